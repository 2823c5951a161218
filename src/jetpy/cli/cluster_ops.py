"""The nats CLI's cluster verbs: `jetpy stream cluster step-down|peer-remove`, `jetpy consumer
cluster step-down` and `jetpy server raft step-down|peer-remove`, and the "Cluster Information"
section that `stream info` and `consumer info` print for a replicated asset.

Owns: the requests (``$JS.API.STREAM.LEADER.STEPDOWN.<s>``, ``$JS.API.STREAM.PEER.REMOVE.<s>``,
``$JS.API.CONSUMER.LEADER.STEPDOWN.<s>.<c>``, and the system account's
``$JS.API.META.LEADER.STEPDOWN`` and ``$JS.API.SERVER.REMOVE``), waiting until a new leader is
named (the info, or ``/jsz``'s meta leader through ``reports.ping_all``) and the lines
printed, as the nats CLI words them. Talks to the server only through ``connect.Session``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Annotated, Any, Final

import typer

from jetpy.cli import values as V
from jetpy.cli.common import confirm, options, parse_or_usage
from jetpy.cli.connect import ApiTimeout, Session, run
from jetpy.cli.output import CliError, emit_json, info
from jetpy.cli.reports import SERVER_PING_JSZ, ping_all

__all__ = ["cluster_section", "consumer_cluster_app", "raft_app", "stream_cluster_app"]

NEW_LEADER_WAIT: Final = 10.0  # seconds to wait for the group to name a new leader
POLL: Final = 0.1
PING_WAIT: Final = 0.5  # seconds the servers' /jsz answers are gathered for, to name the meta leader

JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print the server's JSON.")]
Force = Annotated[bool, typer.Option("--force", "-f", help="Do not ask for confirmation.")]
StreamArg = Annotated[str, typer.Argument(help="Stream name.", show_default=False)]
ConsumerArg = Annotated[str, typer.Argument(help="Consumer name.", show_default=False)]
PeerArg = Annotated[str, typer.Argument(help="The server's name.", show_default=False)]

Show = Callable[[dict[str, Any]], None]
"""How `stream info` (or `consumer info`) prints an info: the step-downs print the new one."""

_SETTINGS: Final = {"help_option_names": ["-h", "--help"]}
raft_app = typer.Typer(no_args_is_help=True, context_settings=_SETTINGS)


def cluster_section(block: Any) -> list[tuple[str, Any]]:
    """An info's ``cluster`` block as nats' `stream info` prints it; empty when there is none."""
    if not isinstance(block, dict) or not (block.get("leader") or block.get("replicas")):
        return []
    lines: list[tuple[str, Any]] = []
    if block.get("name"):
        lines.append(("Name", block["name"]))
    lines.append(("Leader", block.get("leader") or "(none)"))
    for r in block.get("replicas") or []:
        lines.append(("Replica", replica_line(r)))
    return lines


def replica_line(r: dict[str, Any]) -> str:
    """``n2, current, seen 0.21s ago`` / ``n3, outdated, OFFLINE, not seen``."""
    parts = [str(r.get("name", "")), "current" if r.get("current") else "outdated"]
    if r.get("offline"):
        parts.append("OFFLINE")
    active = r.get("active", 0)
    if r.get("offline") or not active:
        parts.append("not seen")
    else:
        parts.append(f"seen {active / 1e9:.2f}s ago")
    if r.get("lag"):
        parts.append(f"{r['lag']:,} operations behind")
    return ", ".join(parts)


def _peers(block: Any) -> int:
    if not isinstance(block, dict):
        return 0
    return (1 if block.get("leader") else 0) + len(block.get("replicas") or [])


def _now() -> str:
    return time.strftime("%H:%M:%S")


async def _new_leader(s: Session, subject: str, before: str, what: str) -> dict[str, Any]:
    """The info from ``subject`` once its cluster block names a leader other than ``before``."""
    end = time.monotonic() + NEW_LEADER_WAIT
    while True:
        try:  # while the group elects, no server answers about it: asked again
            with_info = await s.api(subject, what=what, wait=min(s.options.timeout, 2.0))
        except ApiTimeout:
            if time.monotonic() > end:
                raise
            continue
        leader = (with_info.get("cluster") or {}).get("leader") or ""
        if leader and leader != before:
            return with_info
        if time.monotonic() > end:
            raise CliError(f"{what}: no new leader within {NEW_LEADER_WAIT:g}s")
        await asyncio.sleep(POLL)


# -- streams ----------------------------------------------------------------------------------------


def stream_cluster_app(show: Show) -> typer.Typer:
    """`jetpy stream cluster ...`; ``show`` prints a stream's info."""
    app = typer.Typer(no_args_is_help=True, context_settings=_SETTINGS)

    @app.command("step-down")
    def step_down(ctx: typer.Context, stream: StreamArg, json_out: JsonOut = False) -> None:
        """Make the stream's Raft group elect another leader."""
        parse_or_usage(V.check_stream_name, stream, "stream")
        info_subject, subject = f"STREAM.INFO.{stream}", f"STREAM.LEADER.STEPDOWN.{stream}"
        _step_down(ctx, info_subject, subject, f"stream {stream}", json_out, show)

    app.command("peer-remove")(stream_peer_remove)
    return app


def _step_down(
    ctx: typer.Context, info_subject: str, subject: str, name: str, json_out: bool, show: Show
) -> None:
    """Step a group's leader down and wait for the info to name another; print as nats does."""
    what = f"could not step down the leader of {name}"

    async def go(s: Session) -> dict[str, Any]:
        got = await s.api(info_subject, what=what)
        block = got.get("cluster") or {}
        before = block.get("leader") or ""
        if _peers(block) < 2:
            raise CliError(f"{what}: it is not replicated")
        if not json_out:
            info(f'{_now()} Requesting leader step down of "{before}" in a {_peers(block)} peer RAFT group')
        await s.api(subject, what=what)
        return await _new_leader(s, info_subject, before, what)

    got = run(options(ctx), go)
    if json_out:
        emit_json(got)
        return
    info(f'{_now()} New leader elected "{(got.get("cluster") or {}).get("leader", "")}"')
    info("")
    show(got)


def stream_peer_remove(
    ctx: typer.Context, stream: StreamArg, peer: PeerArg, force: Force = False, json_out: JsonOut = False
) -> None:
    """Remove a server from the stream's replicas (the meta leader places it elsewhere)."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    confirm(f"Really remove peer {peer} from stream {stream}?", force)
    what = f"could not remove peer {peer} from stream {stream}"

    async def go(s: Session) -> dict[str, Any]:
        return await s.api(f"STREAM.PEER.REMOVE.{stream}", {"peer": peer}, what=what)

    resp = run(options(ctx), go)
    if json_out:
        emit_json(resp)
        return
    info(f'{_now()} Requested removal of peer "{peer}"')


# -- consumers --------------------------------------------------------------------------------------


def consumer_cluster_app(show: Show) -> typer.Typer:
    """`jetpy consumer cluster ...`; ``show`` prints a consumer's info."""
    app = typer.Typer(no_args_is_help=True, context_settings=_SETTINGS)

    @app.command("step-down")
    def step_down(
        ctx: typer.Context, stream: StreamArg, consumer: ConsumerArg, json_out: JsonOut = False
    ) -> None:
        """Make the consumer's Raft group elect another leader."""
        parse_or_usage(V.check_stream_name, stream, "stream")
        _step_down(
            ctx,
            f"CONSUMER.INFO.{stream}.{consumer}",
            f"CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}",
            f"consumer {stream} > {consumer}",
            json_out,
            show,
        )

    return app


# -- the meta group (the system account's) ----------------------------------------------------------


async def _meta_leader(s: Session) -> str:
    """The meta leader's name, as the servers' ``/jsz`` name it (the answers to
    ``$SYS.REQ.SERVER.PING.JSZ`` within :data:`PING_WAIT`: the first that names one)."""
    for doc in await ping_all(s, SERVER_PING_JSZ, {}, PING_WAIT):
        leader = ((doc.get("data") or {}).get("meta_cluster") or {}).get("leader")
        if leader:
            return str(leader)
    return ""


@raft_app.command("step-down")
def meta_step_down(
    ctx: typer.Context,
    preferred: Annotated[
        str | None, typer.Option("--preferred", help="The server that should become the leader.")
    ] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Elect a leader in this cluster.")] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tags", help="Elect a leader among servers with these tags.")
    ] = None,
    json_out: JsonOut = False,
) -> None:
    """Make the JetStream meta group elect another leader (a system account user's request)."""
    what = "could not step down the meta leader"
    placement: dict[str, Any] = {}
    if preferred:
        placement["preferred"] = preferred
    if cluster:
        placement["cluster"] = cluster
    if tags:
        placement["tags"] = [t for tag in tags for t in tag.split(",") if t]
    body = {"placement": placement} if placement else None

    async def go(s: Session) -> tuple[str, str, dict[str, Any]]:
        before = await _meta_leader(s)
        if not before:
            raise CliError(f"{what}: no meta leader known (is this the system account's user?)")
        resp = await s.api("META.LEADER.STEPDOWN", body, what=what)
        end = time.monotonic() + NEW_LEADER_WAIT
        while (after := await _meta_leader(s)) in ("", before):
            if time.monotonic() > end:
                raise CliError(f"{what}: no new meta leader within {NEW_LEADER_WAIT:g}s")
            await asyncio.sleep(POLL)
        return before, after, resp

    before, after, resp = run(options(ctx), go)
    if json_out:
        emit_json(resp)
        return
    info(f"{_now()} Requested meta group leader step down of {before}")
    info(f"{_now()} New leader elected {after}")


@raft_app.command("peer-remove")
def meta_peer_remove(
    ctx: typer.Context, peer: PeerArg, force: Force = False, json_out: JsonOut = False
) -> None:
    """Remove a server from the JetStream cluster for good (its assets are placed elsewhere; a
    system account user's request)."""
    confirm(f"Really remove server {peer} from the JetStream cluster?", force)
    what = f"could not remove server {peer}"

    async def go(s: Session) -> dict[str, Any]:
        return await s.api("SERVER.REMOVE", {"peer": peer}, what=what)

    resp = run(options(ctx), go)
    if json_out:
        emit_json(resp)
        return
    info(f'{_now()} Removed server "{peer}" from the JetStream cluster')
