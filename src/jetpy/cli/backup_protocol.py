"""The client side of stream backup and restore, over the wire, for any server that speaks it.

Owns the protocol as nats-server 2.14+ and nats.go's jsm.go (``SnapshotToDirectory``,
``RestoreSnapshotFromDirectory``) speak it, and the backup directory's layout, the nats CLI's:

    DIR/backup.json     {"config": <StreamConfig>, "state": <StreamState>} from the snapshot's reply
    DIR/stream.tar.s2   the snapshot's bytes exactly as the server sent them

The data file keeps the nats CLI's name whatever the server put in it (nats-server: an
s2-compressed tar of its files; jetpy: its own archive), so either tool restores either server's
backups onto a server of the kind that took them.

Backup: ``$JS.API.STREAM.SNAPSHOT.<stream>`` with ``deliver_subject`` (an inbox), ``no_consumers``,
``chunk_size`` and ``window_size``; the chunks are written in order and each one with a reply
subject is answered with an empty message (the server's flow control); the end is an empty
message, ``NATS/1.0 204`` (or no header, from older servers) for a whole snapshot, any other
status (``408 No Flow Response``, ...) for a failed one. Restore: ``$JS.API.STREAM.RESTORE.
<stream>`` with backup.json's contents; the file is sent as requests on the returned deliver
subject, one chunk at a time (an error body or ``-ERR`` in an answer stops it), then an empty
request, whose answer is the server's ``stream_create_response``.

Knows nothing of the terminal: progress goes to a callback.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from jetpy.cli.connect import API_PREFIX, ApiFailure
from jetpy.cli.output import CliError

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg

__all__ = [
    "DATA_FILE",
    "DEFAULT_CHUNK",
    "META_FILE",
    "BackupResult",
    "Progress",
    "RestoreResult",
    "backup_stream",
    "restore_stream",
]

META_FILE: Final = "backup.json"
DATA_FILE: Final = "stream.tar.s2"
DEFAULT_CHUNK: Final = 128 * 1024
IDLE_TIMEOUT: Final = 5.0
"""Seconds a backup waits for the next chunk (at least the request timeout), as the nats CLI."""
FINAL_TIMEOUT: Final = 3600.0
"""Seconds the end of a restore may take: the server finishes the stream then (jsm.go's hour)."""

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes expected) as a backup or a restore goes on."""


@dataclass(frozen=True)
class BackupResult:
    stream: str
    directory: str
    bytes: int  # bytes received (the data file's size)
    chunks: int
    config: dict[str, Any]
    state: dict[str, Any]


@dataclass(frozen=True)
class RestoreResult:
    stream: str
    bytes: int  # bytes sent
    chunks: int
    info: dict[str, Any]  # the server's final stream_create_response


async def _api(nc: Client, subject: str, body: dict[str, Any], wait: float, what: str) -> dict[str, Any]:
    import nats.errors

    full = API_PREFIX + subject
    try:
        msg = await nc.request(full, json.dumps(body).encode(), timeout=wait)
    except nats.errors.NoRespondersError as exc:
        raise CliError(f"{what}: JetStream is not enabled on this server (no responders for {full})") from exc
    except nats.errors.TimeoutError as exc:
        raise CliError(f"{what}: timed out after {wait:g}s waiting for the JetStream API") from exc
    return _response(msg.data, what)


def _response(data: bytes, what: str) -> dict[str, Any]:
    if data.startswith(b"-ERR"):
        raise CliError(f"{what}: {data.decode(errors='replace')[4:].strip().strip(chr(39))}")
    try:
        resp = json.loads(data)
    except ValueError as exc:
        raise CliError(f"{what}: invalid response from the server") from exc
    if not isinstance(resp, dict):
        raise CliError(f"{what}: unexpected response from the server")
    if isinstance(resp.get("error"), dict):
        raise ApiFailure(what, resp["error"])
    return resp


async def backup_stream(
    nc: Client,
    stream: str,
    directory: str | os.PathLike[str],
    *,
    consumers: bool = True,
    chunk_size: int = DEFAULT_CHUNK,
    window_size: int = 0,
    request_timeout: float = 5.0,
    progress: Progress | None = None,
) -> BackupResult:
    """Back ``stream`` up into ``directory`` (created if needed); see the module docstring."""
    what = f"backup of stream {stream}"
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - one task, before any I/O
    inbox = nc.new_inbox()
    chunks: asyncio.Queue[Msg] = asyncio.Queue()

    async def collect(msg: Msg) -> None:
        chunks.put_nowait(msg)

    sub = await nc.subscribe(inbox, cb=collect, pending_msgs_limit=-1, pending_bytes_limit=-1)
    try:
        body: dict[str, Any] = {
            "deliver_subject": inbox,
            "no_consumers": not consumers,
            "chunk_size": chunk_size,
        }
        if window_size:
            body["window_size"] = window_size
        resp = await _api(nc, f"STREAM.SNAPSHOT.{stream}", body, request_timeout, what)
        expected = int((resp.get("state") or {}).get("bytes") or 0)
        received = count = 0
        if progress:
            progress(0, expected)
        with open(target / DATA_FILE, "wb") as data:  # noqa: ASYNC230 - one task, written chunk by chunk
            while True:
                try:
                    msg = await asyncio.wait_for(chunks.get(), max(IDLE_TIMEOUT, request_timeout))
                except TimeoutError:
                    raise CliError(f"{what}: timed out after receiving no data for a long period") from None
                if not msg.data:
                    _check_end(msg, what)
                    break
                data.write(msg.data)
                received += len(msg.data)
                count += 1
                if msg.reply:
                    await nc.publish(msg.reply, b"")
                if progress:
                    progress(received, max(expected, received))
        meta = {"config": resp.get("config") or {}, "state": resp.get("state") or {}}
        (target / META_FILE).write_text(json.dumps(meta, indent=2))
        return BackupResult(stream, str(target), received, count, meta["config"], meta["state"])
    finally:
        await sub.unsubscribe()


def _check_end(msg: Msg, what: str) -> None:
    """The empty message that ends a snapshot: 204 (or no status) is whole, anything else failed."""
    headers = msg.headers or {}
    status = headers.get("Status", "")
    if status and status != "204":
        desc = headers.get("Description", "")
        raise CliError(f"{what} failed: the server ended it with status {status}{' ' + desc if desc else ''}")


def read_backup(directory: str | os.PathLike[str]) -> tuple[dict[str, Any], Path]:
    """backup.json's document and the data file's path; CliError if the directory is not a backup."""
    src = Path(directory)
    meta_path, data_path = src / META_FILE, src / DATA_FILE
    try:
        doc = json.loads(meta_path.read_text())
    except OSError as exc:
        raise CliError(
            f"{src} is not a stream backup: cannot read {META_FILE}: {exc.strerror or exc}", 2
        ) from exc
    except ValueError as exc:
        raise CliError(f"{meta_path}: not valid JSON: {exc}", 2) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict) or not doc["config"].get("name"):
        raise CliError(f"{meta_path}: not a stream backup (no config with a stream name)", 2)
    if not data_path.is_file():
        raise CliError(f"{src} is not a stream backup: {DATA_FILE} is missing", 2)
    return doc, data_path


async def restore_stream(
    nc: Client,
    directory: str | os.PathLike[str],
    *,
    config: dict[str, Any] | None = None,
    chunk_size: int = DEFAULT_CHUNK,
    request_timeout: float = 5.0,
    progress: Progress | None = None,
) -> RestoreResult:
    """Restore the backup in ``directory`` (``config``: restore with this config instead of the
    one in backup.json; the stream's name cannot change); see the module docstring."""
    doc, data_path = read_backup(directory)
    name = str(doc["config"]["name"])
    req = {"config": config if config is not None else doc["config"], "state": doc.get("state") or {}}
    if req["config"].get("name", name) != name:
        raise CliError("the stream's name cannot be changed by a restore", 2)
    what = f"restore of stream {name}"
    resp = await _api(nc, f"STREAM.RESTORE.{name}", req, request_timeout, what)
    deliver = str(resp.get("deliver_subject") or "")
    if not deliver:
        raise CliError(f"{what}: the server gave no deliver subject")
    total = data_path.stat().st_size
    sent = count = 0
    if progress:
        progress(0, total)
    with open(data_path, "rb") as data:  # noqa: ASYNC230 - one task, read chunk by chunk
        while chunk := data.read(chunk_size):
            answer = await nc.request(deliver, chunk, timeout=request_timeout)
            if answer.data:
                _response(answer.data, what)  # an error ends the restore
            sent += len(chunk)
            count += 1
            if progress:
                progress(sent, total)
    final = await nc.request(deliver, b"", timeout=FINAL_TIMEOUT)
    info = _response(final.data, what)
    return RestoreResult(name, sent, count, info)
