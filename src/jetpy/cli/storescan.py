"""Reading a stopped server's file store for `jetpy store check` / `jetpy store dump`.

Owns: finding stream directories under a store dir (``<dir>/jetstream/$G/streams/<name>``, or a
``jetstream`` dir, or one stream's dir), scanning every block file record by record with the store's
own decoder (``jetpy.store.record``) and reporting what is there: valid messages, erased messages,
tombstones, block headers, and every damaged region (offset, length, why) including torn tails,
plus the framed metadata and consumer state files. Like Kafka's DumpLogSegments.

Read-only by construction: files are opened ``O_RDONLY`` and nothing is ever written, truncated or
fsynced, so it is safe on a stopped server's directory and on read-only media. It does not open a
``FileStore`` (whose recovery cuts torn tails); it only reports. If a running server holds a
stream's ``LOCK``, the results may be mid-write and a warning says so.

This module is the one part of the CLI that imports the store layer (an explicit exception in the
import-linter contract): it reads files, it never talks to a server. The commands in ``store.py``
import it only when they run, so other commands do not pay for the store's imports.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jetpy.store.base import ConsumerState, ErrCorrupt, StoreError
from jetpy.store.consumer_state import CONSUMER_MAGIC, META_MAGIC, read_framed
from jetpy.store.record import (
    BLOCK_HEADER_SIZE,
    FLAG_ERASED,
    FLAG_RANGE,
    FLAG_TOMBSTONE,
    MAGIC,
    MAX_RECORD_SIZE,
    RECORD_HEADER,
    RECORD_OVERHEAD,
    VERSION,
    decode_block_header,
    find_next_record,
    range_end,
    validate_record,
)
from jetpy.store.segment import parse_block_name

__all__ = [
    "ACCOUNT",
    "BadRegion",
    "Record",
    "block_files",
    "check_stream",
    "find_streams",
    "read_block",
    "read_consumers",
    "read_meta",
    "scan_block",
]

ACCOUNT = "$G"
MSGS_DIR = "msgs"
OBS_DIR = "obs"
META_FILE = "meta.dat"
STATE_FILE = "o.dat"
LOCK_FILE = "LOCK"


# -- reading ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """One valid record of a block file."""

    offset: int
    length: int
    kind: str  # "msg", "erased", "tombstone", "range"
    seq: int
    ts: int
    subject: str = ""
    hdr: bytes = b""
    payload: bytes = b""
    end_seq: int = 0  # range tombstones: the last sequence covered


@dataclass(slots=True)
class BadRegion:
    offset: int
    length: int
    reason: str
    tail: bool  # nothing valid follows in this file


@dataclass
class BlockReport:
    file: str
    base: int
    size: int
    header: str  # "ok" or why not
    hwm: int = 0
    floor: int = 0
    msgs: int = 0
    erased: int = 0
    tombstones: int = 0
    msg_bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0
    bad: list[BadRegion] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    live: dict[int, int] = field(default_factory=dict)  # message seq -> record length
    deleted: set[int] = field(default_factory=set)  # seqs named by single tombstones
    ranges: list[tuple[int, int]] = field(default_factory=list)  # range tombstones


def read_file(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _why_bad(data: bytes, pos: int, end: int) -> str:
    """Why the record at ``pos`` does not validate (``validate_record`` only says that it does not)."""
    left = end - pos
    if left < RECORD_OVERHEAD:
        return f"truncated: {left} bytes where a record needs at least {RECORD_OVERHEAD}"
    magic, version, flags, reserved, rec_len, _seq, _ts, sl, hl = RECORD_HEADER.unpack_from(data, pos)
    if magic != MAGIC or version != VERSION:
        return f"not a record: magic/version {magic:#04x}/{version}"
    if reserved or flags & ~(FLAG_TOMBSTONE | FLAG_ERASED | FLAG_RANGE):
        return f"bad header: flags {flags:#04x}, reserved {reserved}"
    if rec_len > MAX_RECORD_SIZE or rec_len < RECORD_OVERHEAD + sl + hl:
        return f"bad header: record length {rec_len} with subject {sl} and headers {hl} bytes"
    if pos + rec_len > end:
        return f"truncated: record length {rec_len}, only {left} bytes left in the file"
    body_end = pos + rec_len - 4
    stored = int.from_bytes(data[body_end : body_end + 4], "little")
    computed = zlib.crc32(data[pos:body_end])
    if stored != computed:
        return f"checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
    return "inconsistent record (tombstone shape)"


def scan_block(data: bytes) -> Iterator[Record | BadRegion]:
    """Every valid record and every damaged region of one block file's bytes, in file order."""
    size = len(data)
    pos = BLOCK_HEADER_SIZE
    hs = RECORD_HEADER.size
    while pos < size:
        v = validate_record(data, pos, size)
        if v is None:
            reason = _why_bad(data, pos, size)
            nxt = find_next_record(data, pos, size)
            stop = size if nxt is None else nxt
            yield BadRegion(pos, stop - pos, reason, nxt is None)
            pos = stop
            continue
        rec_len, flags, seq, ts, sl, hl = v
        if flags & FLAG_TOMBSTONE:
            if flags & FLAG_RANGE:
                yield Record(pos, rec_len, "range", seq, ts, end_seq=range_end(data, pos))
            else:
                yield Record(pos, rec_len, "tombstone", seq, ts)
        elif flags & FLAG_ERASED:
            yield Record(pos, rec_len, "erased", seq, ts)
        else:
            body = pos + hs
            yield Record(
                pos, rec_len, "msg", seq, ts,
                subject=data[body : body + sl].decode("utf-8", "replace"),
                hdr=data[body + sl : body + sl + hl],
                payload=data[body + sl + hl : pos + rec_len - 4],
            )
        pos += rec_len


def check_block(path: Path, base: int, data: bytes) -> BlockReport:
    rep = BlockReport(path.name, base, len(data), "ok")
    if len(data) < BLOCK_HEADER_SIZE:
        rep.header = f"file is {len(data)} bytes, shorter than the {BLOCK_HEADER_SIZE}-byte header"
        rep.problems.append(rep.header)
        return rep
    hdr = decode_block_header(data[:BLOCK_HEADER_SIZE], base)
    if hdr is None:
        rep.header = "no valid header slot (both fail their checksum or name another base)"
        rep.problems.append(rep.header)
    else:
        rep.hwm, rep.floor = hdr.hwm, hdr.floor
    expected = base
    for item in scan_block(data):
        if isinstance(item, BadRegion):
            rep.bad.append(item)
            what = "torn tail" if item.tail else "damaged region"
            rep.problems.append(f"{path.name}: {what} at offset {item.offset} ({item.length} bytes): {item.reason}")
            continue
        if item.kind == "tombstone":
            rep.tombstones += 1
            rep.deleted.add(item.seq)
            continue
        if item.kind == "range":
            rep.tombstones += 1
            rep.ranges.append((item.seq, item.end_seq))
            continue
        if item.seq < expected:
            rep.problems.append(
                f"{path.name}: sequence {item.seq} at offset {item.offset} is out of order (expected {expected} or more)"
            )
        expected = max(expected, item.seq + 1)
        rep.first_seq = rep.first_seq or item.seq
        rep.last_seq = max(rep.last_seq, item.seq)
        if item.kind == "erased":
            rep.erased += 1
        else:
            rep.msgs += 1
            rep.msg_bytes += item.length
            rep.live[item.seq] = item.length
    return rep


def _locked(stream_dir: Path) -> bool:
    """True if a running server holds the stream directory's lock (checked without creating it)."""
    path = stream_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def find_streams(root: Path) -> dict[str, Path]:
    """Stream name -> stream directory for a store dir, its ``jetstream`` dir, or one stream dir."""
    if (root / MSGS_DIR).is_dir() or (root / META_FILE).is_file():
        return {root.name: root}
    for streams in (root / "jetstream" / ACCOUNT / "streams", root / ACCOUNT / "streams", root / "streams"):
        if streams.is_dir():
            return {p.name: p for p in sorted(streams.iterdir()) if p.is_dir()}
    return {}


def read_meta(stream_dir: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        raw = read_framed(stream_dir / META_FILE, META_MAGIC)
    except StoreError as exc:
        return None, f"{META_FILE}: {exc}"
    if raw is None:
        return None, f"{META_FILE} is missing"
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        return None, f"{META_FILE}: checksum ok but not JSON: {exc}"
    return (doc if isinstance(doc, dict) else {"value": doc}), "ok"


def read_consumers(stream_dir: Path) -> list[dict[str, Any]]:
    import msgspec

    out: list[dict[str, Any]] = []
    obs = stream_dir / OBS_DIR
    if not obs.is_dir():
        return out
    for cdir in sorted(p for p in obs.iterdir() if p.is_dir()):
        item: dict[str, Any] = {"name": cdir.name, "problems": []}
        try:
            meta = read_framed(cdir / META_FILE, META_MAGIC)
            item["meta"] = "ok" if meta is not None else "missing"
        except StoreError as exc:
            item["meta"] = str(exc)
            item["problems"].append(f"consumer {cdir.name}: {META_FILE}: {exc}")
        try:
            raw = read_framed(cdir / STATE_FILE, CONSUMER_MAGIC)
            if raw is None:
                item["state"] = "missing"
            else:
                st = msgspec.msgpack.decode(raw, type=ConsumerState)
                item["state"] = "ok"
                item["delivered_stream_seq"] = st.delivered_stream_seq
                item["ack_floor_stream_seq"] = st.ack_floor_stream_seq
                item["pending"] = len(st.pending)
        except (ErrCorrupt, StoreError, msgspec.DecodeError) as exc:
            item["state"] = str(exc)
            item["problems"].append(f"consumer {cdir.name}: {STATE_FILE}: {exc}")
        out.append(item)
    return out


def check_stream(name: str, stream_dir: Path) -> dict[str, Any]:
    problems: list[str] = []
    meta, meta_status = read_meta(stream_dir)
    if meta is None:
        problems.append(meta_status)
    blocks: list[BlockReport] = []
    if (stream_dir / MSGS_DIR).is_dir():
        for base, path in block_files(stream_dir):
            try:
                data = read_file(path)
            except OSError as exc:
                problems.append(f"{path.name}: cannot read: {exc.strerror or exc}")
                continue
            rep = check_block(path, base, data)
            blocks.append(rep)
            problems.extend(rep.problems)
    else:
        problems.append(f"{MSGS_DIR}/ is missing")
    consumers = read_consumers(stream_dir)
    for c in consumers:
        problems.extend(c["problems"])
    config = (meta or {}).get("config") if isinstance((meta or {}).get("config"), dict) else None
    hwm = max((b.hwm for b in blocks), default=0)
    floor = max((b.floor for b in blocks), default=0)
    # live messages: message records not below the floor and not named by any tombstone
    deleted = set().union(*(b.deleted for b in blocks))
    ranges = [r for b in blocks for r in b.ranges]
    live = {
        seq: n for b in blocks for seq, n in b.live.items()
        if seq >= floor and seq not in deleted and not any(lo <= seq <= hi for lo, hi in ranges)
    }
    return {
        "stream": name,
        "path": str(stream_dir),
        "locked": _locked(stream_dir),
        "metadata": meta_status,
        "config": config,
        "blocks": [
            {"file": b.file, "base": b.base, "size": b.size, "header": b.header, "hwm": b.hwm, "floor": b.floor,
             "msgs": b.msgs, "erased": b.erased, "tombstones": b.tombstones, "first_seq": b.first_seq,
             "last_seq": b.last_seq,
             "bad": [{"offset": r.offset, "length": r.length, "reason": r.reason, "tail": r.tail} for r in b.bad]}
            for b in blocks
        ],
        "records": sum(b.msgs for b in blocks),
        "msgs": len(live),
        "erased": sum(b.erased for b in blocks),
        "tombstones": sum(b.tombstones for b in blocks),
        "bytes": sum(live.values()),
        "bad_records": sum(len(b.bad) for b in blocks),
        "bad_bytes": sum(r.length for b in blocks for r in b.bad),
        "first_seq": min(live, default=0),
        "last_seq": max([b.last_seq for b in blocks] + [hwm]),
        "floor": floor,
        "consumers": [{k: v for k, v in c.items() if k != "problems"} for c in consumers],
        "problems": problems,
        "ok": not problems,
    }


def block_files(stream_dir: Path) -> list[tuple[int, Path]]:
    """``(base, path)`` of every block file of a stream, oldest first."""
    msgdir = stream_dir / MSGS_DIR
    if not msgdir.is_dir():
        return []
    return sorted((b, msgdir / n) for n in os.listdir(msgdir) if (b := parse_block_name(n)) is not None)


def read_block(path: Path, base: int) -> tuple[bytes, dict[str, int] | None]:
    """A block file's bytes and its winning header slot (``hwm``, ``floor``, ``gen``), None if invalid."""
    data = read_file(path)
    hdr = decode_block_header(data[:BLOCK_HEADER_SIZE], base) if len(data) >= BLOCK_HEADER_SIZE else None
    return data, (None if hdr is None else {"hwm": hdr.hwm, "floor": hdr.floor, "gen": hdr.gen})
