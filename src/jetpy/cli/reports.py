"""The nats CLI's report tables: `jetpy stream report`, `jetpy consumer report STREAM` and
`jetpy server report jetstream`.

Owns what each report asks the server and the table it prints, with the nats CLI's columns:
streams (Stream, Storage, Placement, Consumers, Messages, Bytes, Lost, Deleted, Replicas) from
``STREAM.LIST``; a stream's consumers (Consumer, Mode, Ack Policy, Ack Wait, Ack Pending,
Redelivered, Unprocessed, Ack Floor, Cluster) from ``CONSUMER.LIST``; every server's JetStream
(Server, Cluster, Domain, Streams, Consumers, Messages, Bytes, Memory, File, API Req, API Err)
from the answers to ``$SYS.REQ.SERVER.PING.JSZ``, collected for ``--wait`` (as ``nats server
report`` gathers a cluster's). ``--json`` prints what the server sent. The command groups
register these functions. Must not know: how the answers are produced.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.common import listed_elsewhere, options, parse_or_usage
from jetpy.cli.connect import Session, run
from jetpy.cli.output import CliError, emit_json, print_table

__all__ = [
    "CONSUMER_COLUMNS",
    "SERVER_JETSTREAM_COLUMNS",
    "STREAM_COLUMNS",
    "consumer_report",
    "server_report_jetstream",
    "stream_report",
]

JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print the server's JSON.")]
SERVER_PING_JSZ = "$SYS.REQ.SERVER.PING.JSZ"
STREAM_COLUMNS = (
    "Stream",
    "Storage",
    "Placement",
    "Consumers",
    "Messages",
    "Bytes",
    "Lost",
    "Deleted",
    "Replicas",
)
CONSUMER_COLUMNS = (
    "Consumer",
    "Mode",
    "Ack Policy",
    "Ack Wait",
    "Ack Pending",
    "Redelivered",
    "Unprocessed",
    "Ack Floor",
    "Cluster",
)
SERVER_JETSTREAM_COLUMNS = (
    "Server",
    "Cluster",
    "Domain",
    "Streams",
    "Consumers",
    "Messages",
    "Bytes",
    "Memory",
    "File",
    "API Req",
    "API Err",
)


def stream_report(ctx: typer.Context, json_out: JsonOut = False) -> None:
    """A table of every stream: storage, consumers, messages, bytes, lost and deleted."""

    async def go(s: Session) -> list[Any]:
        return await s.paged("STREAM.LIST", "streams")

    items = sorted(run(options(ctx), go), key=lambda si: str((si.get("config") or {}).get("name", "")))
    if listed_elsewhere(items, json_out, "No streams defined"):
        return
    rows = []
    for si in items:
        cfg, st = si.get("config") or {}, si.get("state") or {}
        lost = st.get("lost") or {}
        placement = cfg.get("placement") or {}
        rows.append(
            (
                cfg.get("name", ""),
                str(cfg.get("storage", "")).capitalize(),
                ", ".join(x for x in (placement.get("cluster", ""), *placement.get("tags", [])) if x),
                V.format_count(st.get("consumer_count", 0)),
                V.format_count(st.get("messages", 0)),
                V.format_bytes(st.get("bytes", 0)),
                V.format_count(len(lost.get("msgs") or [])) if lost else "0",
                V.format_count(st.get("num_deleted", 0)),
                str(cfg.get("num_replicas", 1)),
            )
        )
    print_table(
        "Stream Report",
        STREAM_COLUMNS,
        rows,
        right=("Consumers", "Messages", "Bytes", "Lost", "Deleted", "Replicas"),
    )


def consumer_report(
    ctx: typer.Context,
    stream: Annotated[str, typer.Argument(help="Stream name.", show_default=False)],
    json_out: JsonOut = False,
) -> None:
    """A table of a stream's consumers: mode, acks, pending, redelivered, unprocessed, ack floor."""
    parse_or_usage(V.check_stream_name, stream, "stream")

    async def go(s: Session) -> list[Any]:
        await s.api(f"STREAM.INFO.{stream}", what=f"could not load stream {stream}")
        return await s.paged(f"CONSUMER.LIST.{stream}", "consumers")

    items = sorted(run(options(ctx), go), key=lambda ci: str(ci.get("name", "")))
    if listed_elsewhere(items, json_out, f"No consumers defined on stream {stream}"):
        return
    rows = []
    for ci in items:
        cfg = ci.get("config") or {}
        floor = ci.get("ack_floor") or {}
        cluster = ci.get("cluster") or {}
        max_pending = int(cfg.get("max_ack_pending") or 0)
        ack_pending = int(ci.get("num_ack_pending") or 0)
        unprocessed = int(ci.get("num_pending") or 0)
        rows.append(
            (
                ci.get("name", ""),
                "Push" if cfg.get("deliver_subject") else "Pull",
                str(cfg.get("ack_policy", "")).capitalize(),
                V.format_duration(cfg.get("ack_wait"), zero="-"),
                f"{ack_pending:,}" + (f" / {ack_pending * 100 // max_pending}%" if max_pending > 0 else ""),
                V.format_count(ci.get("num_redelivered", 0)),
                f"{unprocessed:,}",
                V.format_count(floor.get("stream_seq", 0)),
                cluster.get("leader", "") or cluster.get("name", ""),
            )
        )
    print_table(
        f"Consumer report for {stream} with {len(items)} consumers",
        CONSUMER_COLUMNS,
        rows,
        right=("Ack Pending", "Redelivered", "Unprocessed", "Ack Floor"),
    )


async def ping_all(s: Session, subject: str, body: dict[str, Any], wait: float) -> list[dict[str, Any]]:
    """Every answer to a ``$SYS.REQ.SERVER.PING.*`` request that arrives within ``wait`` seconds."""
    answers: list[dict[str, Any]] = []
    inbox = s.nc.new_inbox()
    done = asyncio.Event()

    async def collect(msg: Any) -> None:
        try:
            doc = json.loads(msg.data)
        except ValueError:
            return
        if isinstance(doc, dict):
            answers.append(doc)

    sub = await s.nc.subscribe(inbox, cb=collect)
    try:
        await s.nc.publish(subject, json.dumps(body).encode(), reply=inbox)
        await s.nc.flush()
        try:
            await asyncio.wait_for(done.wait(), wait)
        except TimeoutError:
            pass
    finally:
        await sub.unsubscribe()
    return answers


def server_report_jetstream(
    ctx: typer.Context,
    wait: Annotated[
        float, typer.Option("--wait", min=0.05, help="Seconds to wait for servers to answer.")
    ] = 1.0,
    json_out: JsonOut = False,
) -> None:
    """JetStream on every server that answers $SYS.REQ.SERVER.PING.JSZ: streams, messages, storage, API use."""

    async def go(s: Session) -> list[dict[str, Any]]:
        return await ping_all(s, SERVER_PING_JSZ, {}, wait)

    answers = run(options(ctx), go)
    if json_out:
        emit_json(answers)
        return
    if not answers:
        raise CliError(
            "no server answered $SYS.REQ.SERVER.PING.JSZ (is this user allowed the system subjects?)"
        )
    rows = []
    totals = [0] * 7
    for doc in sorted(answers, key=lambda d: str((d.get("server") or {}).get("name", ""))):
        srv = doc.get("server") or {}
        data = doc.get("data") or {}
        api = data.get("api") or {}
        values = [
            int(data.get(k) or 0) for k in ("streams", "consumers", "messages", "bytes", "memory", "storage")
        ] + [int(api.get("total") or 0)]
        totals = [a + b for a, b in zip(totals, values, strict=True)]
        rows.append(
            (
                srv.get("name", ""),
                srv.get("cluster", ""),
                srv.get("domain", ""),
                *(f"{v:,}" for v in values[:3]),
                *(V.format_bytes(v) for v in values[3:6]),
                f"{values[6]:,}",
                f"{int(api.get('errors') or 0):,}",
            )
        )
    errors = sum(int(((d.get("data") or {}).get("api") or {}).get("errors") or 0) for d in answers)
    rows.append(
        (
            "",
            "",
            "",
            *(f"{v:,}" for v in totals[:3]),
            *(V.format_bytes(v) for v in totals[3:6]),
            f"{totals[6]:,}",
            f"{errors:,}",
        )
    )
    print_table(
        "JetStream Summary",
        SERVER_JETSTREAM_COLUMNS,
        rows,
        right=("Streams", "Consumers", "Messages", "Bytes", "Memory", "File", "API Req", "API Err"),
    )
