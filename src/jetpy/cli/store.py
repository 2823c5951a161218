"""`jetpy store check DIR` and `jetpy store dump DIR STREAM`: offline tools for a stopped server's
file store (like Kafka's DumpLogSegments).

Owns: the two commands, what they print, and their exit codes: 0 every checked byte is valid,
1 damage was found (damaged or torn records, bad block headers, unreadable metadata or consumer
state), 2 no store at DIR (usage). The reading itself is ``storescan``, imported when a command
runs: it never writes, truncates or fsyncs anything, so both commands are safe on a stopped
server's directory and on read-only media.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.output import EXIT_API, CliError, emit_json, info, print_table, reader_gone, usage

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

DirArg = Annotated[Path, typer.Argument(help="The server's store dir (-sd), or one stream's dir.", show_default=False)]


def _scan() -> Any:
    from jetpy.cli import storescan

    return storescan


def _resolve(sc: Any, directory: Path) -> dict[str, Path]:
    if not directory.exists():
        usage(f"{str(directory)!r} does not exist")
    if not directory.is_dir():
        usage(f"{str(directory)!r} is not a directory")
    streams: dict[str, Path] = sc.find_streams(directory)
    if not streams:
        usage(f"no jetpy file store found in {str(directory)!r} (expected jetstream/{sc.ACCOUNT}/streams/<name>/)")
    return streams


@app.command("check")
def check(
    directory: DirArg,
    stream: Annotated[str | None, typer.Option("--stream", help="Only this stream.")] = None,
    json_out: Annotated[bool, typer.Option("--json", "-j", help="Print the full report as JSON.")] = False,
) -> None:
    """Validate every record's checksum and every metadata file; exit 1 if anything is damaged."""
    sc = _scan()
    streams = _resolve(sc, directory)
    if stream is not None:
        if stream not in streams:
            usage(f"no stream {stream!r} in {str(directory)!r} (found: {', '.join(streams) or 'none'})")
        streams = {stream: streams[stream]}
    reports: list[dict[str, Any]] = [sc.check_stream(n, p) for n, p in streams.items()]
    for r in reports:
        if r["locked"]:
            sys.stderr.write(f"jetpy: warning: stream {r['stream']} is locked by a running server; "
                             "records may be changing under this check\n")
    damaged = [r for r in reports if not r["ok"]]
    if json_out:
        emit_json({"ok": not damaged, "streams": reports})
    else:
        print_table(
            f"File store {directory}",
            ["Stream", "Blocks", "Records", "Messages", "Erased", "Tombstones", "First Seq", "Last Seq", "Size",
             "Bad Records", "Consumers", "Status"],
            [(r["stream"], len(r["blocks"]), f"{r['records']:,}", f"{r['msgs']:,}", f"{r['erased']:,}",
              f"{r['tombstones']:,}",
              f"{r['first_seq']:,}", f"{r['last_seq']:,}", V.format_bytes(r["bytes"]), f"{r['bad_records']:,}",
              len(r["consumers"]), "OK" if r["ok"] else "DAMAGED") for r in reports],
            right=("Blocks", "Records", "Messages", "Erased", "Tombstones", "First Seq", "Last Seq", "Size", "Bad Records",
                   "Consumers"),
        )
        for r in damaged:
            for p in r["problems"]:
                info(f"{r['stream']}: {p}")
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
    max_payload: Annotated[int, typer.Option("--max-payload", min=0, help="Payload bytes shown per record.")] = 64,
    json_out: Annotated[bool, typer.Option("--json", "-j", help="One JSON object per block and record.")] = False,
) -> None:
    """Print every record of a stream's block files: offset, kind, sequence, time, subject, sizes."""
    try:
        _dump(directory, stream, payload, max_payload, json_out)
    except BrokenPipeError as exc:
        raise reader_gone() from exc


def _dump(directory: Path, stream: str, payload: bool, max_payload: int, json_out: bool) -> None:
    sc = _scan()
    streams = _resolve(sc, directory)
    if stream not in streams:
        usage(f"no stream {stream!r} in {str(directory)!r} (found: {', '.join(streams) or 'none'})")
    sdir = streams[stream]
    meta, meta_status = sc.read_meta(sdir)
    out = sys.stdout
    if not json_out:
        out.write(f"Stream {stream} at {sdir}\n  metadata: {meta_status}\n")
        if meta and isinstance(meta.get("config"), dict):
            out.write(f"  config: {json.dumps(meta['config'], sort_keys=True)}\n")
    damaged = meta is None
    for base, path in sc.block_files(sdir):
        data, hdr = sc.read_block(path, base)
        damaged = damaged or hdr is None
        if json_out:
            out.write(json.dumps({"block": path.name, "size": len(data), "header": hdr}) + "\n")
        else:
            h = f"hwm {hdr['hwm']} floor {hdr['floor']} gen {hdr['gen']}" if hdr else "HEADER INVALID"
            out.write(f"\nBlock {path.name}: {len(data)} bytes, {h}\n")
        for item in sc.scan_block(data):
            if isinstance(item, sc.BadRegion):
                damaged = True
                if json_out:
                    out.write(json.dumps({"block": path.name, "offset": item.offset, "kind": "corrupt",
                                          "length": item.length, "reason": item.reason, "tail": item.tail}) + "\n")
                else:
                    what = "TORN TAIL" if item.tail else "CORRUPT"
                    out.write(f"offset {item.offset:>10} {what} length {item.length}: {item.reason}\n")
                continue
            if json_out:
                rec: dict[str, Any] = {"block": path.name, "offset": item.offset, "kind": item.kind,
                                       "length": item.length, "seq": item.seq, "ts": item.ts, "crc": "ok"}
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
                line += (f" time {_time(item.ts)} subject {item.subject}"
                         f" hdr {len(item.hdr)} payload {len(item.payload)} crc ok")
                if payload:
                    if item.hdr:
                        line += f"\n{'':>18}headers: {_printable(item.hdr, 512)}"
                    line += f"\n{'':>18}payload: {_printable(item.payload, max_payload)}"
            out.write(line + "\n")
    for c in sc.read_consumers(sdir):
        problems = c.pop("problems")
        if json_out:
            out.write(json.dumps({"consumer": c}) + "\n")
        else:
            state = (f", delivered stream seq {c['delivered_stream_seq']}, ack floor {c['ack_floor_stream_seq']},"
                     f" {c['pending']} pending") if c.get("state") == "ok" else ""
            out.write(f"\nConsumer {c['name']}: metadata {c['meta']}, state {c['state']}{state}\n")
        damaged = damaged or bool(problems)
    out.flush()
    if damaged:
        raise CliError(f"stream {stream} has damaged records or metadata (see above)", EXIT_API)
