"""`jetpy store check DIR` and `jetpy store dump DIR STREAM`: offline tools for a stopped server's
file store (like Kafka's DumpLogSegments); compressed blocks are read as they are, an encrypted
store with the server's key (``--key`` or ``$JETPY_STORE_KEY``).

Owns: the two commands, what they print (the JSON report's shape included), decoding the stream
metadata's JSON, and their exit codes: 0 every checked byte is valid, 1 damage was found
(damaged or torn records, bad block headers, unreadable metadata; a consumer's missing,
damaged or impossible state or metadata, or a state past the stream's last sequence, each with
its file, offset and reason), 2 no store at DIR (usage). The reading itself is the store layer's offline scanner (``jetpy.store.scan``,
the CLI's one allowed import of the store, in the import-linter contract), imported when a
command runs: it never writes, truncates or fsyncs anything, so both commands are safe on a
stopped server's directory and on read-only media.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.output import EXIT_API, CliError, emit_json, info, print_table, reader_gone, usage

if TYPE_CHECKING:
    from jetpy.store.scan import ConsumerReport, StreamReport

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

DirArg = Annotated[
    Path, typer.Argument(help="The server's store dir (-sd), or one stream's dir.", show_default=False)
]
KeyOpt = Annotated[
    str | None,
    typer.Option(
        "--key",
        envvar="JETPY_STORE_KEY",
        help="The server's jetstream { key }, to read an encrypted store (or $JETPY_STORE_KEY, kept out of ps).",
        show_default=False,
    ),
]


def _scan() -> ModuleType:
    from jetpy.store import scan

    return scan


def _keys(key: str | None) -> Any:
    """The store's keys from ``--key`` (None without one); the cipher is read from each file."""
    if not key:
        return None
    return _scan().store_keys(key)


def _meta_doc(raw: bytes | None, status: str) -> tuple[dict[str, Any] | None, str]:
    """The stream metadata's JSON document (None if unreadable) and its status."""
    if raw is None:
        return None, status
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        return None, f"meta.dat: checksum ok but not JSON: {exc}"
    return (doc if isinstance(doc, dict) else {"value": doc}), status


def _consumer_dict(c: ConsumerReport) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.name, "meta": c.meta, "state": c.state}
    if c.state == "ok":
        out.update(
            delivered_stream_seq=c.delivered_stream_seq,
            ack_floor_stream_seq=c.ack_floor_stream_seq,
            pending=c.pending,
        )
    if c.faults:
        out["problems"] = [{"file": f.file, "offset": f.offset, "reason": f.reason} for f in c.faults]
    return out


def _report(r: StreamReport) -> dict[str, Any]:
    """One stream's check as printed (``--json``) and tabled."""
    meta, meta_status = _meta_doc(r.meta, r.meta_status)
    problems = list(r.problems)
    if meta is None and r.meta is not None:  # readable, but not the JSON the server writes
        problems.insert(0, meta_status)
    config = meta.get("config") if meta is not None and isinstance(meta.get("config"), dict) else None
    return {
        "stream": r.name,
        "path": str(r.path),
        "locked": r.locked,
        "metadata": meta_status,
        "config": config,
        "blocks": [
            {
                "file": b.file,
                "base": b.base,
                "size": b.size,
                "header": b.header,
                "hwm": b.hwm,
                "floor": b.floor,
                "msgs": b.msgs,
                "erased": b.erased,
                "tombstones": b.tombstones,
                "form": b.form,
                "first_seq": b.first_seq,
                "last_seq": b.last_seq,
                "bad": [
                    {"offset": x.offset, "length": x.length, "reason": x.reason, "tail": x.tail}
                    for x in b.bad
                ],
            }
            for b in r.blocks
        ],
        "records": r.total("msgs"),
        "msgs": len(r.live),
        "erased": r.total("erased"),
        "tombstones": r.total("tombstones"),
        "bytes": sum(r.live.values()),
        "bad_records": sum(len(b.bad) for b in r.blocks),
        "bad_bytes": r.bad_bytes,
        "first_seq": min(r.live, default=0),
        "last_seq": r.last_seq,
        "floor": r.floor,
        "tail": None
        if r.tail is None
        else {"hwm": r.tail.hwm, "floor": r.tail.floor, "block": r.tail.block, "size": r.tail.size},
        "lost": r.lost,
        "consumers": [_consumer_dict(c) for c in r.consumers],
        "problems": problems,
        "ok": not problems,
    }


def _resolve(sc: ModuleType, directory: Path) -> dict[str, Path]:
    if not directory.exists():
        usage(f"{str(directory)!r} does not exist")
    if not directory.is_dir():
        usage(f"{str(directory)!r} is not a directory")
    streams: dict[str, Path] = sc.find_streams(directory)
    if not streams:
        usage(
            f"no jetpy file store found in {str(directory)!r} (expected jetstream/<account>/streams/<name>/)"
        )
    return streams


@app.command("check")
def check(
    directory: DirArg,
    stream: Annotated[str | None, typer.Option("--stream", help="Only this stream.")] = None,
    json_out: Annotated[bool, typer.Option("--json", "-j", help="Print the full report as JSON.")] = False,
    key: KeyOpt = None,
) -> None:
    """Validate every record's checksum and every metadata file; exit 1 if anything is damaged."""
    sc = _scan()
    keys = _keys(key)
    streams = _resolve(sc, directory)
    if stream is not None:
        if stream not in streams:
            usage(f"no stream {stream!r} in {str(directory)!r} (found: {', '.join(streams) or 'none'})")
        streams = {stream: streams[stream]}
    reports: list[dict[str, Any]] = [_report(sc.check_stream(n, p, keys)) for n, p in streams.items()]
    for r in reports:
        if r["locked"]:
            sys.stderr.write(
                f"jetpy: warning: stream {r['stream']} is locked by a running server; "
                "records may be changing under this check\n"
            )
    damaged = [r for r in reports if not r["ok"]]
    if json_out:
        emit_json({"ok": not damaged, "streams": reports})
    else:
        print_table(
            f"File store {directory}",
            [
                "Stream",
                "Blocks",
                "Records",
                "Messages",
                "Erased",
                "Tombstones",
                "First Seq",
                "Last Seq",
                "Size",
                "Bad Records",
                "Consumers",
                "Status",
            ],
            [
                (
                    r["stream"],
                    len(r["blocks"]),
                    f"{r['records']:,}",
                    f"{r['msgs']:,}",
                    f"{r['erased']:,}",
                    f"{r['tombstones']:,}",
                    f"{r['first_seq']:,}",
                    f"{r['last_seq']:,}",
                    V.format_bytes(r["bytes"]),
                    f"{r['bad_records']:,}",
                    len(r["consumers"]),
                    "OK" if r["ok"] else "DAMAGED",
                )
                for r in reports
            ],
            right=(
                "Blocks",
                "Records",
                "Messages",
                "Erased",
                "Tombstones",
                "First Seq",
                "Last Seq",
                "Size",
                "Bad Records",
                "Consumers",
            ),
        )
        for r in damaged:
            for p in r["problems"]:
                info(f"{r['stream']}: {p}")
        if any("encryption key" in p for r in damaged for p in r["problems"]):
            info("the store is encrypted: give the server's key with --key (or $JETPY_STORE_KEY)")
    if damaged:
        raise CliError(
            f"damage found in {len(damaged)} of {len(reports)} streams: "
            + ", ".join(f"{r['stream']} ({len(r['problems'])} problems)" for r in damaged),
            EXIT_API,
        )


def _printable(b: bytes, limit: int) -> str:
    text = b[:limit].decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else "." for c in text)
    return text + ("..." if len(b) > limit else "")


def _time(ts: int) -> str:
    from datetime import UTC, datetime

    if ts <= 0:
        return "-"
    return datetime.fromtimestamp(ts / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


@app.command("dump")
def dump(
    directory: DirArg,
    stream: Annotated[str, typer.Argument(help="Stream to dump.", show_default=False)],
    payload: Annotated[bool, typer.Option("--payload", "-p", help="Print payloads (and headers).")] = False,
    max_payload: Annotated[
        int, typer.Option("--max-payload", min=0, help="Payload bytes shown per record.")
    ] = 64,
    json_out: Annotated[
        bool, typer.Option("--json", "-j", help="One JSON object per block and record.")
    ] = False,
    key: KeyOpt = None,
) -> None:
    """Print every record of a stream's block files: offset, kind, sequence, time, subject, sizes."""
    try:
        _dump(directory, stream, payload, max_payload, json_out, _keys(key))
    except BrokenPipeError as exc:
        raise reader_gone() from exc


def _dump(directory: Path, stream: str, payload: bool, max_payload: int, json_out: bool, keys: Any) -> None:
    sc = _scan()
    streams = _resolve(sc, directory)
    if stream not in streams:
        usage(f"no stream {stream!r} in {str(directory)!r} (found: {', '.join(streams) or 'none'})")
    sdir = streams[stream]
    meta, meta_status = _meta_doc(*sc.read_meta(sdir, keys))
    out = sys.stdout
    if not json_out:
        out.write(f"Stream {stream} at {sdir}\n  metadata: {meta_status}\n")
        if meta and isinstance(meta.get("config"), dict):
            out.write(f"  config: {json.dumps(meta['config'], sort_keys=True)}\n")
    damaged = meta is None
    for base, path in sc.block_files(sdir):
        try:
            data, bh = sc.read_block(path, base, keys, sdir.name)
        except sc.StoreError as exc:
            damaged = True
            out.write(
                json.dumps({"block": path.name, "unreadable": str(exc)}) + "\n"
                if json_out
                else f"\nBlock {path.name}: {exc}\n"
            )
            continue
        damaged = damaged or bh is None
        hdr = None if bh is None else {"hwm": bh.hwm, "floor": bh.floor, "gen": bh.gen}
        if json_out:
            out.write(json.dumps({"block": path.name, "size": len(data), "header": hdr}) + "\n")
        else:
            h = f"hwm {bh.hwm} floor {bh.floor} gen {bh.gen}" if bh else "HEADER INVALID"
            out.write(f"\nBlock {path.name}: {len(data)} bytes, {h}\n")
        for item in sc.scan_block(data):
            if isinstance(item, sc.BadRegion):
                damaged = True
                if json_out:
                    out.write(
                        json.dumps(
                            {
                                "block": path.name,
                                "offset": item.offset,
                                "kind": "corrupt",
                                "length": item.length,
                                "reason": item.reason,
                                "tail": item.tail,
                            }
                        )
                        + "\n"
                    )
                else:
                    what = "TORN TAIL" if item.tail else "CORRUPT"
                    out.write(f"offset {item.offset:>10} {what} length {item.length}: {item.reason}\n")
                continue
            if json_out:
                rec: dict[str, Any] = {
                    "block": path.name,
                    "offset": item.offset,
                    "kind": item.kind,
                    "length": item.length,
                    "seq": item.seq,
                    "ts": item.ts,
                    "crc": "ok",
                }
                if item.kind == "range":
                    rec["end_seq"] = item.end_seq
                if item.kind == "msg":
                    rec.update(subject=item.subject, hdr_len=len(item.hdr), payload_len=len(item.payload))
                    if payload:
                        rec["headers"] = item.hdr.decode("utf-8", "replace")
                        rec["payload"] = item.payload[:max_payload].decode("utf-8", "replace")
                out.write(json.dumps(rec) + "\n")
                continue
            line = f"offset {item.offset:>10} {item.kind:<9} seq {item.seq:<10} len {item.length:<7}"
            if item.kind == "range":
                line += f" covers {item.seq}..{item.end_seq}"
            elif item.kind == "msg":
                line += (
                    f" time {_time(item.ts)} subject {item.subject}"
                    f" hdr {len(item.hdr)} payload {len(item.payload)} crc ok"
                )
                if payload:
                    if item.hdr:
                        line += f"\n{'':>18}headers: {_printable(item.hdr, 512)}"
                    line += f"\n{'':>18}payload: {_printable(item.payload, max_payload)}"
            out.write(line + "\n")
    for c in sc.read_consumers(sdir, None, keys):
        if json_out:
            out.write(json.dumps({"consumer": _consumer_dict(c)}) + "\n")
        else:
            state = (
                (
                    f", delivered stream seq {c.delivered_stream_seq}, ack floor {c.ack_floor_stream_seq},"
                    f" {c.pending} pending"
                )
                if c.state == "ok"
                else ""
            )
            out.write(f"\nConsumer {c.name}: metadata {c.meta}, state {c.state}{state}\n")
        damaged = damaged or bool(c.problems)
    out.flush()
    if damaged:
        raise CliError(f"stream {stream} has damaged records or metadata (see above)", EXIT_API)
