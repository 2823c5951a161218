"""Helpers of the stream fault tests: jetpy as a process on a file store, streams filled with
acknowledged messages, an independent reader of the block files (which sequence is where, from
the format documented in ``jetpy.store.record``, not from the store's code), the damage a disk
or an operator does, and what a restarted server says about a stream.

What the tests hold jetpy to: an acknowledged message is either served intact after the fault
or named in the stream's ``lost`` (exactly the ones the fault destroyed, nothing else); a stream
whose files cannot be trusted is offline (10194, its files untouched) while the rest of the
server runs; sequences never go backwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from conftest import JETPY_SERVER, Proc, start_process

__all__ = [
    "BLOCK_HEADER",
    "MAX_BYTES",
    "Record",
    "api",
    "blocks",
    "fault_runs",
    "fetch_all",
    "fill",
    "flip",
    "jetpy",
    "records",
    "snapshot",
    "stream_dir",
    "zero",
]

BLOCK_HEADER = 128  # two 64-byte header slots open every block file
MAX_BYTES = 127_000  # nats-server's block sizing gives a stream this small 32,000-byte blocks
_RECORD = struct.Struct("<BBBBIQ")  # magic, version, flags, reserved, rec_len, seq


def fault_runs(default: int) -> int:
    """Rounds of a repeated fault: ``JETPY_FAULT_RUNS`` (``make faults``) or the fast slice's."""
    return int(os.environ.get("JETPY_FAULT_RUNS", default))


def jetpy(store: Path, log: Path, *extra: str) -> Proc:
    return start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store), *extra], log
    )


def stream_dir(store: Path, name: str) -> Path:
    return store / "jetstream" / "$G" / "streams" / name


def blocks(sdir: Path) -> list[Path]:
    return sorted((sdir / "msgs").glob("*.blk"))


@dataclass(frozen=True)
class Record:
    block: Path
    offset: int
    length: int
    flags: int
    seq: int


def records(block: Path, data: bytes | None = None) -> list[Record]:
    """Every record of an intact block file (or of ``data``, its bytes), by the documented layout."""
    if data is None:
        data = block.read_bytes()
    out = []
    pos = BLOCK_HEADER
    while pos + _RECORD.size <= len(data):
        _magic, _version, flags, _r, rec_len, seq = _RECORD.unpack_from(data, pos)
        out.append(Record(block, pos, rec_len, flags, seq))
        pos += rec_len
    return out


def flip(path: Path, offset: int) -> None:
    """Flip one bit, as bit rot does."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ 0x04]))


def zero(path: Path, offset: int, n: int) -> None:
    """Zero ``n`` bytes, as a lost or unwritten sector reads."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes(min(n, max(os.path.getsize(path) - offset, 0))))


def snapshot(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (but the lock) and a digest of its bytes."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != "LOCK"
    }


async def api(nc: Client, subject: str, body: Any = b"") -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return json.loads((await nc.request(subject, raw, timeout=10)).data)


def payload(stream: str, seq: int) -> bytes:
    return f"{stream}:{seq}:".encode() + bytes(60)


async def fill(nc: Client, name: str, n: int, **config: Any) -> list[int]:
    """Create stream ``name`` on ``<name>.>`` and publish ``n`` messages, each acknowledged;
    returns their sequences (the payload names the stream and sequence)."""
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=[f"{name}.>"], **config)
    futs = [await js.publish_async(f"{name}.m", payload(name, i + 1)) for i in range(n)]
    acked = [(await f).seq for f in futs]
    assert acked == list(range(1, n + 1))
    return acked


async def fetch_all(nc: Client, name: str, start: int = 1) -> dict[int, bytes]:
    """Every message the stream serves from ``start`` on, by sequence (an ephemeral consumer)."""
    js = nc.jetstream()
    info = await js.stream_info(name)
    want = info.state.messages
    sub = await js.pull_subscribe(
        "",
        stream=name,
        config=ConsumerConfig(
            ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start
        ),
    )
    got: dict[int, bytes] = {}
    try:
        while True:
            try:
                msgs = await sub.fetch(1000, timeout=1)
            except TimeoutError:  # nats-py's own, or asyncio's when its deadline is spent
                break
            for m in msgs:
                got[m.metadata.sequence.stream] = m.data
            if start <= 1 and len(got) >= want:
                break
    finally:
        await sub.unsubscribe()
    return got
