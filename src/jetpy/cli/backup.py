"""`jetpy stream backup STREAM DIR` and `jetpy stream restore DIR`, spelled as the nats CLI's.

Owns the two verbs (registered on `jetpy stream` by ``cli/stream.py``): their flags
(``--consumers/--no-consumers``, ``--chunk-size``, ``--window-size``, ``--config`` for restore,
``--progress/--no-progress``, ``--json``), the progress bar (rich, on stderr, only on a terminal),
and what they print. The protocol and the directory layout are ``backup_protocol``'s.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.backup_protocol import Progress, backup_stream, read_backup, restore_stream
from jetpy.cli.common import load_json_config, options, parse_or_usage
from jetpy.cli.connect import Session, run
from jetpy.cli.output import emit_json, info

__all__ = ["stream_backup", "stream_restore"]

JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print the result as JSON.")]
ShowProgress = Annotated[
    bool, typer.Option("--progress/--no-progress", help="A progress bar on a terminal (default on).")
]


@contextlib.contextmanager
def _bar(what: str, enabled: bool) -> Iterator[Progress | None]:
    """A byte progress bar on stderr while the block runs (only on a terminal, if enabled)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import Progress as RichProgress

    bar = RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(what, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total or None)

    with bar:
        yield update


def stream_backup(
    ctx: typer.Context,
    stream: Annotated[str, typer.Argument(help="Stream to back up.", show_default=False)],
    target: Annotated[Path, typer.Argument(help="Directory to create the backup in.", show_default=False)],
    consumers: Annotated[
        bool, typer.Option("--consumers/--no-consumers", help="Include the durable consumers (default on).")
    ] = True,
    chunk_size: Annotated[
        str, typer.Option("--chunk-size", help="Bytes per chunk the server sends (1KB to 1MB).")
    ] = "128KB",
    window_size: Annotated[
        str | None, typer.Option("--window-size", help="Bytes the server sends before it waits for acks.")
    ] = None,
    progress: ShowProgress = True,
    json_out: JsonOut = False,
) -> None:
    """Back a stream up into a directory (backup.json and stream.tar.s2, as the nats CLI)."""
    parse_or_usage(V.check_stream_name, stream, "stream")
    chunk = parse_or_usage(_positive_size, chunk_size, "--chunk-size")
    window = parse_or_usage(_positive_size, window_size, "--window-size") if window_size else 0
    opts = options(ctx)

    async def go(s: Session) -> dict[str, Any]:
        with _bar(f"Backing up {stream}", progress and not json_out) as bar:
            r = await backup_stream(
                s.nc,
                stream,
                target,
                consumers=consumers,
                chunk_size=chunk,
                window_size=window,
                request_timeout=opts.timeout,
                progress=bar,
            )
        state = r.state
        return {
            "stream": r.stream,
            "directory": r.directory,
            "bytes": r.bytes,
            "chunks": r.chunks,
            "messages": int(state.get("messages") or 0),
            "stream_bytes": int(state.get("bytes") or 0),
            "first_seq": int(state.get("first_seq") or 0),
            "last_seq": int(state.get("last_seq") or 0),
            "consumers": consumers,
        }

    res = run(opts, go)
    if json_out:
        emit_json(res)
        return
    info(
        f"Backed up stream {stream}: {res['messages']:,} messages ({res['stream_bytes']:,} bytes, "
        f"seq {res['first_seq']}..{res['last_seq']}) in {res['bytes']:,} bytes and {res['chunks']:,} chunks "
        f"to {res['directory']}"
    )


def stream_restore(
    ctx: typer.Context,
    source: Annotated[Path, typer.Argument(help="Directory holding the backup.", show_default=False)],
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Restore with this stream config (JSON) instead of the backup's."),
    ] = None,
    chunk_size: Annotated[str, typer.Option("--chunk-size", help="Bytes per chunk sent.")] = "128KB",
    progress: ShowProgress = True,
    json_out: JsonOut = False,
) -> None:
    """Restore a stream from a backup directory (the stream must not exist)."""
    doc, data = read_backup(source)  # not a backup: a usage error, nothing is sent
    name = str(doc["config"]["name"])
    cfg = load_json_config(config, "stream") if config is not None else None
    chunk = parse_or_usage(_positive_size, chunk_size, "--chunk-size")
    opts = options(ctx)

    async def go(s: Session) -> dict[str, Any]:
        with _bar(f"Restoring {name}", progress and not json_out) as bar:
            r = await restore_stream(
                s.nc, source, config=cfg, chunk_size=chunk, request_timeout=opts.timeout, progress=bar
            )
        return r.info

    resp = run(opts, go)
    if json_out:
        emit_json(resp)
        return
    state = resp.get("state") or {}
    info(
        f"Restored stream {name}: {int(state.get('messages') or 0):,} messages "
        f"({int(state.get('bytes') or 0):,} bytes, seq {state.get('first_seq', 0)}..{state.get('last_seq', 0)}), "
        f"{int(state.get('consumer_count') or 0)} consumers, from {data.parent}"
    )


def _positive_size(text: str) -> int:
    n = V.parse_size(text)
    if n <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return n
