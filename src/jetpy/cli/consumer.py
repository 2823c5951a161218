"""`jetpy consumer ...`: add, ls, info, next, rm, pause, resume, unpin.

Owns: consumer flags (as `nats consumer add`: ``--pull``/``--target``, ``--deliver``, ``--ack``,
``--filter``, ...) or a JSON config file turned into ``$JS.API.CONSUMER.CREATE`` bodies, printing
consumers, `next`: one pull request (``CONSUMER.MSG.NEXT``) for up to ``--count`` messages,
printed and acknowledged as they arrive, and `pause` / `resume` / `unpin` (``CONSUMER.PAUSE``,
``CONSUMER.UNPIN``, nats-server 2.11+).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.cluster_ops import cluster_section, consumer_cluster_app
from jetpy.cli.common import confirm, listed_elsewhere, load_json_config, options, parse_or_usage
from jetpy.cli.connect import Session, run
from jetpy.cli.output import CliError, emit_json, info, print_sections, print_table, usage
from jetpy.cli.reports import consumer_report

if TYPE_CHECKING:
    from nats.aio.msg import Msg

__all__ = ["app", "consumer_flags_config", "create_consumer"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print the server's JSON.")]
StreamArg = Annotated[str, typer.Argument(help="Stream name.", show_default=False)]
ConsumerArg = Annotated[str, typer.Argument(help="Consumer name.", show_default=False)]

_ACK = {"explicit": "explicit", "none": "none", "all": "all"}
_REPLAY = {"instant": "instant", "original": "original"}


def consumer_flags_config(
    *,
    pull: bool = False,
    target: str | None = None,
    deliver: str | None = None,
    ack: str | None = None,
    filters: list[str] | None = None,
    max_deliver: int | None = None,
    max_pending: int | None = None,
    wait: str | None = None,
    replay: str | None = None,
    description: str | None = None,
    deliver_group: str | None = None,
    heartbeat: str | None = None,
    flow_control: bool | None = None,
    headers_only: bool | None = None,
    inactive_threshold: str | None = None,
    max_waiting: int | None = None,
    backoff: str | None = None,
) -> dict[str, Any]:
    """The consumer config fields the flags set (wire names), validated; usage error if bad."""
    cfg: dict[str, Any] = {}
    if pull and target:
        usage("--pull and --target are exclusive (a push consumer delivers to --target)")
    if target is not None:
        cfg["deliver_subject"] = parse_or_usage(V.check_pub_subject, target, "--target")
    if deliver is not None:
        d = deliver.lower()
        if d in ("all", "last", "new"):
            cfg["deliver_policy"] = d
        elif d in ("last_per_subject", "last-per-subject", "subject"):
            cfg["deliver_policy"] = "last_per_subject"
        elif d.isdigit() and int(d) > 0:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = int(d)
        else:
            try:
                ago = V.parse_duration(d, allow_unlimited=False)
            except ValueError:
                usage(
                    f"--deliver: {deliver!r} is not all, last, new, last_per_subject, a sequence or a duration"
                )
            cfg["deliver_policy"] = "by_start_time"
            cfg["opt_start_time"] = V.rfc3339(time.time_ns() - ago)
    if ack is not None:
        if ack.lower() not in _ACK:
            usage(f"--ack: invalid value {ack!r} (choose from explicit, none, all)")
        cfg["ack_policy"] = _ACK[ack.lower()]
    if filters:
        subs = [f.strip() for item in filters for f in item.split(",") if f.strip()]
        for f in subs:
            parse_or_usage(V.check_subject, f, "--filter")
        if len(subs) == 1:
            cfg["filter_subject"] = subs[0]
        elif subs:
            cfg["filter_subjects"] = subs
    if max_deliver is not None:
        cfg["max_deliver"] = max_deliver
    if max_pending is not None:
        cfg["max_ack_pending"] = max_pending
    if wait is not None:
        cfg["ack_wait"] = parse_or_usage(V.parse_duration, wait, "--wait")
    if replay is not None:
        if replay.lower() not in _REPLAY:
            usage(f"--replay: invalid value {replay!r} (choose from instant, original)")
        cfg["replay_policy"] = _REPLAY[replay.lower()]
    if description is not None:
        cfg["description"] = description
    if deliver_group is not None:
        cfg["deliver_group"] = deliver_group
    if heartbeat is not None:
        cfg["idle_heartbeat"] = parse_or_usage(V.parse_duration, heartbeat, "--heartbeat")
    if flow_control is not None:
        cfg["flow_control"] = flow_control
    if headers_only is not None:
        cfg["headers_only"] = headers_only
    if inactive_threshold is not None:
        cfg["inactive_threshold"] = parse_or_usage(
            V.parse_duration, inactive_threshold, "--inactive-threshold"
        )
    if max_waiting is not None:
        cfg["max_waiting"] = max_waiting
    if backoff is not None:
        cfg["backoff"] = [
            parse_or_usage(V.parse_duration, b, "--backoff") for b in backoff.split(",") if b.strip()
        ]
    return cfg


async def create_consumer(s: Session, stream: str, cfg: dict[str, Any], *, what: str) -> dict[str, Any]:
    """CONSUMER.CREATE in the form every server since 2.9 understands (named or ephemeral)."""
    name = cfg.get("name") or cfg.get("durable_name")
    subject = f"CONSUMER.CREATE.{stream}.{name}" if name else f"CONSUMER.CREATE.{stream}"
    return await s.api(subject, {"stream_name": stream, "config": cfg}, what=what)


def format_consumer_info(ci: dict[str, Any]) -> None:
    cfg = ci.get("config") or {}
    delivered = ci.get("delivered") or {}
    floor = ci.get("ack_floor") or {}
    conf: list[tuple[str, Any]] = [("Name", ci.get("name", ""))]
    if cfg.get("description"):
        conf.append(("Description", cfg["description"]))
    conf.append(("Durable", "yes" if cfg.get("durable_name") else "no (ephemeral)"))
    if cfg.get("deliver_subject"):
        conf.append(("Delivery Subject", cfg["deliver_subject"]))
        if cfg.get("deliver_group"):
            conf.append(("Deliver Group", cfg["deliver_group"]))
    else:
        conf.append(("Pull Mode", "yes"))
    if cfg.get("filter_subject"):
        conf.append(("Filter Subject", cfg["filter_subject"]))
    if cfg.get("filter_subjects"):
        conf.append(("Filter Subjects", ", ".join(cfg["filter_subjects"])))
    policy = cfg.get("deliver_policy", "all")
    if policy == "by_start_sequence":
        policy = f"from sequence {cfg.get('opt_start_seq')}"
    elif policy == "by_start_time":
        policy = f"from {V.format_time(cfg.get('opt_start_time'))}"
    conf += [
        ("Deliver Policy", policy),
        ("Ack Policy", cfg.get("ack_policy", "none")),
        ("Ack Wait", V.format_duration(cfg.get("ack_wait", 0), zero="-")),
        ("Replay Policy", cfg.get("replay_policy", "instant")),
        ("Max Deliver", V.format_count(cfg.get("max_deliver", -1))),
        ("Max Ack Pending", V.format_count(cfg.get("max_ack_pending", -1))),
    ]
    if not cfg.get("deliver_subject"):
        conf.append(("Max Waiting Pulls", V.format_count(cfg.get("max_waiting", -1))))
    if cfg.get("idle_heartbeat"):
        conf.append(("Idle Heartbeat", V.format_duration(cfg["idle_heartbeat"])))
    if cfg.get("flow_control"):
        conf.append(("Flow Control", "yes"))
    if cfg.get("headers_only"):
        conf.append(("Headers Only", "yes"))
    if cfg.get("inactive_threshold"):
        conf.append(("Inactive Threshold", V.format_duration(cfg["inactive_threshold"])))
    state: list[tuple[str, Any]] = [
        (
            "Last Delivered Message",
            f"consumer sequence {delivered.get('consumer_seq', 0):,}, "
            f"stream sequence {delivered.get('stream_seq', 0):,}",
        ),
        (
            "Acknowledgment Floor",
            f"consumer sequence {floor.get('consumer_seq', 0):,}, "
            f"stream sequence {floor.get('stream_seq', 0):,}",
        ),
        ("Outstanding Acks", f"{ci.get('num_ack_pending', 0):,}"),
        ("Redelivered Messages", f"{ci.get('num_redelivered', 0):,}"),
        ("Unprocessed Messages", f"{ci.get('num_pending', 0):,}"),
    ]
    if cfg.get("priority_policy", "none") != "none":
        conf.append(("Priority Policy", cfg["priority_policy"]))
        conf.append(("Priority Groups", ", ".join(cfg.get("priority_groups") or [])))
        if cfg.get("priority_timeout"):
            conf.append(("Pinned TTL", V.format_duration(cfg["priority_timeout"])))
    if not cfg.get("deliver_subject"):
        state.append(("Waiting Pulls", f"{ci.get('num_waiting', 0):,}"))
    if ci.get("paused"):
        remaining = V.format_duration(ci.get("pause_remaining", 0))
        state.append(("Paused Until", f"{V.format_time(cfg.get('pause_until'))} ({remaining} left)"))
    for group in ci.get("priority_groups") or []:
        pinned = group.get("pinned_client_id")
        since = f" since {V.format_time(group.get('pinned_ts'))}" if pinned else ""
        state.append(
            (f"Group {group.get('group', '')}", f"pinned to {pinned}{since}" if pinned else "no pin")
        )
    cluster = cluster_section(ci.get("cluster"))
    print_sections(
        [("Configuration", conf), *([("Cluster Information", cluster)] if cluster else []), ("State", state)]
    )


@app.command("add")
def add(
    ctx: typer.Context,
    stream: StreamArg,
    name: Annotated[str | None, typer.Argument(help="Consumer name (durable; or from --config).")] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="JSON file with the consumer configuration.")
    ] = None,
    ephemeral: Annotated[
        bool, typer.Option("--ephemeral", help="Create an ephemeral (not durable) consumer.")
    ] = False,
    pull: Annotated[
        bool, typer.Option("--pull", help="A pull consumer (the default without --target).")
    ] = False,
    target: Annotated[
        str | None, typer.Option("--target", help="Push: deliver messages to this subject.")
    ] = None,
    deliver: Annotated[
        str | None,
        typer.Option("--deliver", help="all, last, new, last_per_subject, a sequence, or a duration ago."),
    ] = None,
    ack: Annotated[str | None, typer.Option("--ack", help="Ack policy: explicit, none, all.")] = None,
    filters: Annotated[
        list[str] | None, typer.Option("--filter", help="Only these subjects (repeatable).")
    ] = None,
    max_deliver: Annotated[
        int | None, typer.Option("--max-deliver", help="Deliveries per message (-1 unlimited).")
    ] = None,
    max_pending: Annotated[
        int | None, typer.Option("--max-pending", help="Maximum outstanding acks.")
    ] = None,
    wait: Annotated[str | None, typer.Option("--wait", help="Ack wait before redelivery: 30s.")] = None,
    replay: Annotated[str | None, typer.Option("--replay", help="instant or original.")] = None,
    description: Annotated[str | None, typer.Option("--description", help="A description.")] = None,
    deliver_group: Annotated[str | None, typer.Option("--deliver-group", help="Push: queue group.")] = None,
    heartbeat: Annotated[
        str | None, typer.Option("--heartbeat", help="Push: idle heartbeat interval.")
    ] = None,
    flow_control: Annotated[
        bool | None, typer.Option("--flow-control/--no-flow-control", help="Push: flow control.")
    ] = None,
    headers_only: Annotated[
        bool | None, typer.Option("--headers-only/--no-headers-only", help="Only headers.")
    ] = None,
    inactive_threshold: Annotated[
        str | None, typer.Option("--inactive-threshold", help="Remove after this long without activity.")
    ] = None,
    max_waiting: Annotated[
        int | None, typer.Option("--max-waiting", help="Pull: maximum waiting requests.")
    ] = None,
    backoff: Annotated[str | None, typer.Option("--backoff", help="Redelivery delays: 1s,5s,30s.")] = None,
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Accepted for nats CLI compatibility.")
    ] = False,
    json_out: JsonOut = False,
) -> None:
    """Create a consumer on a stream from flags or a JSON config file."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    cfg: dict[str, Any] = load_json_config(config, "consumer") if config is not None else {}
    if name is not None:
        parse_or_usage(V.check_consumer_name, name, "consumer")
        cfg["name"] = name
        if not ephemeral:
            cfg["durable_name"] = name
    elif cfg.get("durable_name") and not cfg.get("name"):
        cfg["name"] = cfg["durable_name"]
    if ephemeral:
        cfg.pop("durable_name", None)
    elif not cfg.get("name"):
        usage('a consumer name is required (argument, "name" in --config, or --ephemeral)')
    if cfg.get("name"):
        parse_or_usage(V.check_consumer_name, str(cfg["name"]), "consumer")
    cfg.update(
        consumer_flags_config(
            pull=pull,
            target=target,
            deliver=deliver,
            ack=ack,
            filters=filters,
            max_deliver=max_deliver,
            max_pending=max_pending,
            wait=wait,
            replay=replay,
            description=description,
            deliver_group=deliver_group,
            heartbeat=heartbeat,
            flow_control=flow_control,
            headers_only=headers_only,
            inactive_threshold=inactive_threshold,
            max_waiting=max_waiting,
            backoff=backoff,
        )
    )
    cfg.setdefault("ack_policy", "explicit")
    cfg.setdefault("deliver_policy", "all")

    async def go(s: Session) -> dict[str, Any]:
        return await create_consumer(s, stream, cfg, what=f"could not create consumer on stream {stream}")

    ci = run(options(ctx), go)
    if json_out:
        emit_json(ci)
    else:
        info(f"Consumer {stream} > {ci.get('name', '')} was created\n")
        format_consumer_info(ci)


@app.command("ls")
def ls(
    ctx: typer.Context,
    stream: StreamArg,
    names: Annotated[bool, typer.Option("--names", "-n", help="Only the names, one per line.")] = False,
    json_out: JsonOut = False,
) -> None:
    """List a stream's consumers."""
    parse_or_usage(V.check_stream_name, stream, "stream")

    async def go(s: Session) -> list[Any]:
        if names:
            return await s.paged(f"CONSUMER.NAMES.{stream}", "consumers")
        return await s.paged(f"CONSUMER.LIST.{stream}", "consumers")

    items = run(options(ctx), go)
    if names:
        out = sorted(str(n) for n in items)
        if json_out:
            emit_json(out)
        else:
            for n in out:
                info(n)
        return
    items.sort(key=lambda ci: str(ci.get("name", "")))
    if listed_elsewhere(items, json_out, f"No consumers defined on stream {stream}"):
        return
    rows = []
    for ci in items:
        cfg = ci.get("config") or {}
        last = (ci.get("delivered") or {}).get("last_active")
        rows.append(
            (
                ci.get("name", ""),
                "push" if cfg.get("deliver_subject") else "pull",
                cfg.get("filter_subject") or ", ".join(cfg.get("filter_subjects") or []) or ">",
                V.format_time(ci.get("created")),
                f"{ci.get('num_ack_pending', 0):,}",
                f"{ci.get('num_pending', 0):,}",
                V.format_time(last) if last else "never",
            )
        )
    print_table(
        f"Consumers on stream {stream}",
        ["Name", "Type", "Filter", "Created", "Ack Pending", "Unprocessed", "Last Delivery"],
        rows,
        right=("Ack Pending", "Unprocessed"),
    )


@app.command("info")
def info_cmd(ctx: typer.Context, stream: StreamArg, name: ConsumerArg, json_out: JsonOut = False) -> None:
    """Show a consumer's configuration and state."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    parse_or_usage(V.check_consumer_name, name, "consumer")

    async def go(s: Session) -> dict[str, Any]:
        return await s.api(
            f"CONSUMER.INFO.{stream}.{name}", what=f"could not load consumer {stream} > {name}"
        )

    ci = run(options(ctx), go)
    if json_out:
        emit_json(ci)
    else:
        info(f"Information for Consumer {stream} > {name} created {V.format_time(ci.get('created'))}\n")
        format_consumer_info(ci)


@app.command("rm")
def rm(
    ctx: typer.Context,
    stream: StreamArg,
    name: ConsumerArg,
    force: Annotated[bool, typer.Option("--force", "-f", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a consumer."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    parse_or_usage(V.check_consumer_name, name, "consumer")
    confirm(f"Really delete consumer {stream} > {name}?", force)

    async def go(s: Session) -> None:
        await s.api(f"CONSUMER.DELETE.{stream}.{name}", what=f"could not delete consumer {stream} > {name}")

    run(options(ctx), go)
    info(f"Consumer {stream} > {name} was deleted")


def _ack_meta(reply: str) -> dict[str, int]:
    """Stream sequence, delivery count and pending count from a v1 or v2 ``$JS.ACK`` subject."""
    toks = reply.split(".")
    if len(toks) < 9 or toks[0] != "$JS" or toks[1] != "ACK":
        return {}
    tail = toks[-5:] if len(toks) == 9 else toks[6:11]  # v2 adds domain and account hash
    try:
        dc, sseq, cseq, _ts, pending = (int(t) for t in tail)
    except ValueError:
        return {}
    return {"delivered": dc, "stream_seq": sseq, "consumer_seq": cseq, "pending": pending}


@app.command("next")
def next_cmd(
    ctx: typer.Context,
    stream: StreamArg,
    name: ConsumerArg,
    count: Annotated[int, typer.Option("--count", min=1, help="Messages to fetch.")] = 1,
    no_ack: Annotated[bool, typer.Option("--no-ack", help="Do not acknowledge the messages.")] = False,
    wait: Annotated[str, typer.Option("--wait", help="How long to wait for messages.")] = "2s",
    raw: Annotated[bool, typer.Option("--raw", "-r", help="Only the payloads.")] = False,
    json_out: Annotated[bool, typer.Option("--json", "-j", help="One JSON object per message.")] = False,
    group: Annotated[
        str, typer.Option("--group", help="The priority group to pull as (consumers with a priority policy).")
    ] = "",
) -> None:
    """Fetch up to --count messages from a pull consumer, print and acknowledge them."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    parse_or_usage(V.check_consumer_name, name, "consumer")
    expires = parse_or_usage(lambda v: V.parse_duration(v, allow_unlimited=False), wait, "--wait")
    if expires <= 0:
        usage("--wait must be positive")

    async def go(s: Session) -> tuple[int, str]:
        from jetpy.cli.core import msg_to_json, print_msg

        await s.api(f"CONSUMER.INFO.{stream}.{name}", what=f"could not load consumer {stream} > {name}")
        inbox = s.nc.new_inbox()
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        sub = await s.nc.subscribe(inbox, cb=queue.put)
        req: dict[str, Any] = {"batch": count, "expires": expires}
        if group:
            req["group"] = group
        body = json.dumps(req).encode()
        await s.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", body, reply=inbox)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + expires / 1e9 + 1.0
        got = 0
        end = ""
        try:
            while got < count:
                try:
                    msg = await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    end = "timeout"
                    break
                status = (msg.headers or {}).get("Status", "")
                if status == "100":
                    continue  # idle heartbeat
                if status:
                    end = f"{status} {(msg.headers or {}).get('Description', '')}".strip()
                    break
                got += 1
                meta = _ack_meta(msg.reply or "")
                if json_out:
                    sys.stdout.write(json.dumps({**msg_to_json(msg), **meta}) + "\n")
                    sys.stdout.flush()
                elif raw:
                    print_msg(msg, got, raw=True, as_json=False)
                else:
                    extra = f" stream sequence {meta['stream_seq']}" if meta else ""
                    print_msg(msg, got, raw=False, as_json=False, verb=f"Message{extra} received")
                if not no_ack and msg.reply:
                    await s.nc.publish(msg.reply, b"+ACK")
            await s.nc.flush()
        finally:
            await sub.unsubscribe()
        return got, end

    got, end = run(options(ctx), go)
    if got == 0:
        reason = "no messages" if end.startswith(("404", "408")) or end == "timeout" else end
        raise CliError(f"no message received from consumer {stream} > {name} within {wait} ({reason})")
    if got < count and not raw and not json_out:
        sys.stderr.write(f"received {got} of {count} messages ({end or 'no more'})\n")


app.add_typer(
    consumer_cluster_app(format_consumer_info),
    name="cluster",
    help="Manage a replicated consumer's Raft group (step-down).",
)
app.command("report")(consumer_report)  # the nats CLI's `consumer report` (cli/reports.py)


def _pause_until(text: str) -> str:
    """An RFC 3339 time as given, or a duration from now (``1h``, ``30m``) as UTC RFC 3339."""
    if "T" in text:
        return V.check_rfc3339(text)
    return V.rfc3339(time.time_ns() + V.parse_duration(text, allow_unlimited=False))


@app.command("pause")
def pause_cmd(
    ctx: typer.Context,
    stream: StreamArg,
    name: ConsumerArg,
    until: Annotated[
        str, typer.Argument(help="Until when: an RFC 3339 time or a duration from now (1h, 30m).")
    ] = "1h",
    json_out: JsonOut = False,
) -> None:
    """Pause a consumer: it delivers nothing until the time given (nats-server 2.11+)."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    parse_or_usage(V.check_consumer_name, name, "consumer")
    when = parse_or_usage(_pause_until, until, "until")
    _pause(ctx, stream, name, {"pause_until": when}, json_out)


@app.command("resume")
def resume_cmd(ctx: typer.Context, stream: StreamArg, name: ConsumerArg, json_out: JsonOut = False) -> None:
    """Resume a paused consumer now."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    parse_or_usage(V.check_consumer_name, name, "consumer")
    _pause(ctx, stream, name, {}, json_out)


def _pause(ctx: typer.Context, stream: str, name: str, body: dict[str, Any], json_out: bool) -> None:
    async def go(s: Session) -> dict[str, Any]:
        return await s.api(
            f"CONSUMER.PAUSE.{stream}.{name}", body, what=f"could not pause consumer {stream} > {name}"
        )

    doc = run(options(ctx), go)
    if json_out:
        emit_json(doc)
    elif doc.get("paused"):
        left = V.format_duration(doc.get("pause_remaining", 0))
        info(f"Paused {stream} > {name} until {V.format_time(doc.get('pause_until'))} ({left} left)")
    else:
        info(f"Consumer {stream} > {name} is not paused")


@app.command("unpin")
def unpin_cmd(
    ctx: typer.Context,
    stream: StreamArg,
    name: ConsumerArg,
    group: Annotated[
        str, typer.Argument(help="The priority group whose pin is released.", show_default=False)
    ],
) -> None:
    """Release a priority group's pinned client: the next pull without a pin gets a new one."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    parse_or_usage(V.check_consumer_name, name, "consumer")

    async def go(s: Session) -> None:
        await s.api(
            f"CONSUMER.UNPIN.{stream}.{name}",
            {"group": group},
            what=f"could not unpin group {group} of consumer {stream} > {name}",
        )

    run(options(ctx), go)
    info(f"Unpinned group {group} of consumer {stream} > {name}")
