"""Reading a stopped server's file store offline (``jetpy store check`` / ``jetpy store dump``).

Owns: finding stream directories under a store dir (``<dir>/jetstream/<account>/streams/<name>``,
every account's, a ``jetstream`` dir, or one stream's dir), scanning every block file record by
record with the store's own codecs (a compressed or encrypted block's frames first, frames.py,
given the key for an encrypted store: a file written with another key is reported as such, never
as damage) (``record.check_record``, so a damaged record is reported with the reason the
store itself rejects it), the per-block and per-stream reports (messages, erased messages,
tombstones, block headers, every damaged region with its offset and reason, torn tails, and
which messages are live by the store's rules: the durable floor and the tombstones), and reading
the framed metadata and consumer state files. Like Kafka's DumpLogSegments.
Must not know: what the metadata bytes mean (the JetStream layer's JSON, decoded by the CLI), or
how anything is printed.

Read-only by construction: files are opened ``O_RDONLY`` and nothing is ever written, truncated or
fsynced, so it is safe on a stopped server's directory and on read-only media. It does not open a
``FileStore`` (whose recovery cuts torn tails); it only reports. If a running server holds a
stream's lock, the results may be mid-write: ``StreamReport.locked`` says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from .base import ConsumerState, ErrCorrupt, ErrEncryptionKey, LostData, StoreError
from .consumer_state import (
    CONSUMER_MAGIC,
    FRAME_HEADER_SIZE,
    META_MAGIC,
    FrameFault,
    check_framed,
    consumer_context,
    decode_state,
    past_last_seq,
    read_framed,
    state_problems,
)
from .crypto import StoreKeys
from .frames import is_framed, parse_framed
from .layout import (
    CONSUMER_META_FILE,
    CONSUMER_STATE_FILE,
    META_FILE,
    MSGS_DIR,
    OBS_DIR,
    TAIL_FILE,
    is_locked,
)
from .record import (
    BLOCK_HEADER_SIZE,
    FLAG_ERASED,
    FLAG_RANGE,
    FLAG_TOMBSTONE,
    BlockHeader,
    check_record,
    decode_block_header,
    find_next_record,
    range_end,
    split_record,
)
from .recovery import recover
from .segment import list_blocks
from .tail import Tail, read_tail

__all__ = [
    "ACCOUNT",
    "BadRegion",
    "BlockReport",
    "ConsumerReport",
    "FileFault",
    "Record",
    "StreamReport",
    "block_files",
    "check_stream",
    "find_streams",
    "read_block",
    "read_consumers",
    "read_meta",
    "scan_block",
    "store_keys",
]

ACCOUNT: Final = "$G"
"""The global account, whose streams a server keeps in ``<store dir>/jetstream/$G/streams/``
(nats-server's layout, which jetpy's server follows; another account's are in
``jetstream/<account>/streams/``)."""


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
    form: str = "plain"  # "plain", "s2", "encrypted" or "s2+encrypted" (frames.py)
    slot: BlockHeader | None = None  # the winning header slot
    msgs: int = 0
    erased: int = 0
    tombstones: int = 0
    first_seq: int = 0
    last_seq: int = 0
    bad: list[BadRegion] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    live: dict[int, int] = field(default_factory=dict)  # message seq -> record length
    deleted: set[int] = field(default_factory=set)  # seqs named by single tombstones
    ranges: list[tuple[int, int]] = field(default_factory=list)  # range tombstones

    @property
    def hwm(self) -> int:
        return self.slot.hwm if self.slot is not None else 0

    @property
    def floor(self) -> int:
        return self.slot.floor if self.slot is not None else 0


@dataclass(slots=True)
class FileFault:
    """What is wrong with one consumer file: ``file`` relative to the stream's directory, the byte
    ``offset`` where it shows (None: the file is missing or unreadable) and the ``reason``."""

    file: str
    offset: int | None
    reason: str

    def __str__(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{self.file}{where}: {self.reason}"


@dataclass
class ConsumerReport:
    """One consumer's files. ``problems`` are the lines ``faults`` print as (each names the
    consumer, the file, the offset and the reason)."""

    name: str
    meta: str  # "ok", "missing" or what is wrong
    state: str  # likewise
    delivered_stream_seq: int = 0
    ack_floor_stream_seq: int = 0
    pending: int = 0
    problems: list[str] = field(default_factory=list)
    faults: list[FileFault] = field(default_factory=list)

    def fault(self, file: str, offset: int | None, reason: str) -> str:
        """Record a fault; returns the reason (the file's status)."""
        f = FileFault(f"{OBS_DIR}/{self.name}/{file}", offset, reason)
        self.faults.append(f)
        self.problems.append(f"consumer {self.name}: {f}")
        return reason


@dataclass
class StreamReport:
    """What ``check_stream`` found. ``live`` holds the messages as the store would count them:
    message records at or above the floor named by no tombstone (seq -> record length)."""

    name: str
    path: Path
    locked: bool
    meta: bytes | None = None
    meta_status: str = ""
    blocks: list[BlockReport] = field(default_factory=list)
    consumers: list[ConsumerReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    live: dict[int, int] = field(default_factory=dict)
    tail: Tail | None = None  # the tail record, if readable
    lost: list[int] = field(default_factory=list)  # what the server would report lost on opening it
    end: int | None = None  # the last sequence the server would find (None: it would not open it)

    @property
    def floor(self) -> int:
        return max([b.floor for b in self.blocks] + [self.tail.floor if self.tail else 0])

    @property
    def last_seq(self) -> int:
        """The stream's last sequence as the server finds it; if it would not open the stream,
        the highest a record or the tail record names (a header's claim is what was refused)."""
        if self.end is not None:
            return self.end
        return max([b.last_seq for b in self.blocks] + [self.tail.hwm if self.tail else 0, 0])

    def total(self, what: Literal["msgs", "erased", "tombstones"]) -> int:
        """The sum over blocks of a ``BlockReport`` count: "msgs" (records), "erased", "tombstones"."""
        return sum(getattr(b, what) for b in self.blocks)

    @property
    def bad_bytes(self) -> int:
        return sum(r.length for b in self.blocks for r in b.bad)


# ----------------------------------------------------------------------------- files


def _read_file(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def store_keys(key: str) -> StoreKeys:
    """The keys that open a store encrypted with the server key ``key`` (each file's header names
    its cipher: none need be given)."""
    return StoreKeys(key)


def find_streams(root: Path) -> dict[str, Path]:
    """Stream name -> stream directory for a store dir or its ``jetstream`` dir (every account's
    streams: the global account's by their names, another account's as ``<account>/<name>``),
    one account's dir, or one stream dir."""
    if (root / MSGS_DIR).is_dir() or (root / META_FILE).is_file():
        return {root.name: root}
    for base in (root / "jetstream", root):
        accounts = sorted(p for p in base.iterdir() if (p / "streams").is_dir()) if base.is_dir() else []
        if accounts:
            found: dict[str, Path] = {}
            for account in accounts:
                found.update(
                    _streams_in(account / "streams", "" if account.name == ACCOUNT else f"{account.name}/")
                )
            return found
    if (root / "streams").is_dir():
        return _streams_in(root / "streams", "")
    return {}


def _streams_in(streams: Path, prefix: str) -> dict[str, Path]:
    return {prefix + p.name: p for p in sorted(streams.iterdir()) if p.is_dir()}


def block_files(stream_dir: Path) -> list[tuple[int, Path]]:
    """``(base, path)`` of every block file of a stream, oldest first."""
    msgdir = stream_dir / MSGS_DIR
    return list_blocks(msgdir) if msgdir.is_dir() else []


def read_block(
    path: Path, base: int, keys: StoreKeys | None = None, stream: str = ""
) -> tuple[bytes, BlockHeader | None]:
    """A block file's logical bytes (a framed file's frames decoded, frames.py, with ``keys``
    for an encrypted one of ``stream``) and its winning header slot (None if neither slot is
    valid). Raises ErrCorrupt, ErrEncryptionKey for a framed file that cannot be read."""
    data = _read_file(path)
    if is_framed(data[:80]):
        data = bytes(parse_framed(data, base, keys, f"{stream}/msgs", path.name).data)
    hdr = decode_block_header(data[:BLOCK_HEADER_SIZE], base) if len(data) >= BLOCK_HEADER_SIZE else None
    return data, hdr


def read_meta(stream_dir: Path, keys: StoreKeys | None = None) -> tuple[bytes | None, str]:
    """The stream's metadata bytes (None if unreadable) and "ok" or what is wrong."""
    try:
        raw = read_framed(stream_dir / META_FILE, META_MAGIC, keys, f"{stream_dir.name}/meta")
    except StoreError as exc:
        return None, f"{META_FILE}: {exc}"
    if raw is None:
        return None, f"{META_FILE} is missing"
    return raw, "ok"


def _read_framed_file(
    path: Path, magic: bytes, keys: StoreKeys | None, context: str
) -> bytes | FrameFault | None:
    """A framed file's payload, why its bytes are refused, or None if it does not exist."""
    try:
        raw = _read_file(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return FrameFault(0, f"cannot read: {exc.strerror or exc}")
    try:
        return check_framed(raw, magic, keys, context, path.name)
    except ErrEncryptionKey as exc:
        return FrameFault(0, str(exc).removeprefix(f"{ErrEncryptionKey.description}: "))


def read_consumers(
    stream_dir: Path, last_seq: int | None = None, keys: StoreKeys | None = None
) -> list[ConsumerReport]:
    """Every consumer directory's files checked: both present, framed and checksummed, the state
    decodable and consistent (``state_problems``, the server's own rules) and, given the
    stream's ``last_seq``, not past it. A missing file is a fault: a durable consumer always has
    both (its state is written first when it is created)."""
    out: list[ConsumerReport] = []
    obs = stream_dir / OBS_DIR
    if not obs.is_dir():
        return out
    for cdir in sorted(p for p in obs.iterdir() if p.is_dir()):
        rep = ConsumerReport(cdir.name, "missing", "missing")
        ctx = consumer_context(stream_dir.name, cdir.name, "")
        meta = _read_framed_file(cdir / CONSUMER_META_FILE, META_MAGIC, keys, ctx + CONSUMER_META_FILE)
        if meta is None:
            rep.fault(CONSUMER_META_FILE, None, "missing")
        elif isinstance(meta, FrameFault):
            rep.meta = rep.fault(CONSUMER_META_FILE, meta.offset, meta.reason)
        else:
            rep.meta = "ok"
        raw = _read_framed_file(cdir / CONSUMER_STATE_FILE, CONSUMER_MAGIC, keys, ctx + CONSUMER_STATE_FILE)
        if raw is None:
            rep.fault(CONSUMER_STATE_FILE, None, "missing")
        elif isinstance(raw, FrameFault):
            rep.state = rep.fault(CONSUMER_STATE_FILE, raw.offset, raw.reason)
        else:
            try:
                st: ConsumerState = decode_state(raw)
            except ErrCorrupt:
                rep.state = rep.fault(
                    CONSUMER_STATE_FILE, FRAME_HEADER_SIZE, "payload is not a consumer state"
                )
            else:
                rep.delivered_stream_seq = st.delivered_stream_seq
                rep.ack_floor_stream_seq = st.ack_floor_stream_seq
                rep.pending = len(st.pending)
                wrong = state_problems(st)
                past = past_last_seq(st, last_seq) if last_seq is not None else None
                if past is not None:
                    wrong.append(past)
                for why in wrong:
                    rep.fault(CONSUMER_STATE_FILE, FRAME_HEADER_SIZE, why)
                rep.state = "; ".join(wrong) or "ok"
        out.append(rep)
    return out


# ----------------------------------------------------------------------------- blocks


def scan_block(data: bytes) -> Iterator[Record | BadRegion]:
    """Every valid record and every damaged region of one block file's bytes, in file order."""
    size = len(data)
    pos = BLOCK_HEADER_SIZE
    while pos < size:
        v = check_record(data, pos, size, explain=True)
        if isinstance(v, str):
            nxt = find_next_record(data, pos, size)
            stop = size if nxt is None else nxt
            yield BadRegion(pos, stop - pos, v, nxt is None)
            pos = stop
            continue
        rec_len, flags, seq, ts, _sl, _hl = v
        if flags & FLAG_TOMBSTONE:
            if flags & FLAG_RANGE:
                yield Record(pos, rec_len, "range", seq, ts, end_seq=range_end(data, pos))
            else:
                yield Record(pos, rec_len, "tombstone", seq, ts)
        elif flags & FLAG_ERASED:
            yield Record(pos, rec_len, "erased", seq, ts)
        else:
            subject, hdr, payload = split_record(data, pos, v)
            yield Record(pos, rec_len, "msg", seq, ts, subject.decode("utf-8", "replace"), hdr, payload)
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
    rep.slot = hdr
    expected = base
    for item in scan_block(data):
        if isinstance(item, BadRegion):
            rep.bad.append(item)
            what = "torn tail" if item.tail else "damaged region"
            rep.problems.append(
                f"{path.name}: {what} at offset {item.offset} ({item.length} bytes): {item.reason}"
            )
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
            rep.live[item.seq] = item.length
    return rep


def check_stream(name: str, stream_dir: Path, keys: StoreKeys | None = None) -> StreamReport:
    """Check every file of one stream directory (see ``StreamReport``); ``keys`` open an
    encrypted one."""
    rep = StreamReport(name, stream_dir, is_locked(stream_dir))
    rep.meta, rep.meta_status = read_meta(stream_dir, keys)
    if rep.meta is None:
        rep.problems.append(rep.meta_status)
    bounds = check_bounds(rep, keys)
    if (stream_dir / MSGS_DIR).is_dir():
        for base, path in block_files(stream_dir):
            try:
                data = _read_file(path)
            except OSError as exc:
                rep.problems.append(f"{path.name}: cannot read: {exc.strerror or exc}")
                continue
            block = _check_any_block(path, base, data, keys, stream_dir.name)
            rep.blocks.append(block)
            rep.problems.extend(block.problems)
    else:
        rep.problems.append(f"{MSGS_DIR}/ is missing")
    rep.consumers = read_consumers(stream_dir, rep.last_seq, keys)
    for c in rep.consumers:
        rep.problems.extend(c.problems)
    floor = rep.floor
    deleted = set().union(*(b.deleted for b in rep.blocks))
    ranges = [r for b in rep.blocks for r in b.ranges]
    rep.live = {
        seq: n
        for b in rep.blocks
        for seq, n in b.live.items()
        if seq >= floor and seq not in deleted and not any(lo <= seq <= hi for lo, hi in ranges)
    }
    rep.problems.extend(bounds)
    return rep


def _check_any_block(path: Path, base: int, raw: bytes, keys: StoreKeys | None, stream: str) -> BlockReport:
    """``check_block`` of a plain file, or of a framed file's logical bytes (its damaged frames
    reported by file offset, before its records)."""
    if not is_framed(raw[:80]):
        return check_block(path, base, raw)
    try:
        parsed = parse_framed(raw, base, keys, f"{stream}/msgs", path.name)
    except (ErrCorrupt, ErrEncryptionKey) as exc:
        why = str(exc).split(": ", 1)[1]
        rep = BlockReport(path.name, base, len(raw), why, form="framed")
        rep.problems.append(why if why.startswith(path.name) else f"{path.name}: {why}")
        return rep
    rep = check_block(path, base, bytes(parsed.data))
    rep.size = len(raw)
    compressed = parsed.table.packed or parsed.compressed
    rep.form = "+".join(x for x, on in (("s2", compressed), ("encrypted", parsed.table.fc is not None)) if on)
    pre = [f"{path.name}: {n.split(': ', 1)[1]}" for n in parsed.notes]
    for pos, length, why in parsed.bad:
        what = "torn tail" if pos == parsed.cut else "damaged frame"
        pre.append(f"{path.name}: {what} at file offset {pos} ({length} bytes): {why}")
    rep.problems[:0] = pre
    return rep


def check_bounds(rep: StreamReport, keys: StoreKeys | None = None) -> list[str]:
    """What the server itself would find opening the stream (its own recovery, run without
    syncing or truncating anything): the tail record unreadable or missing, a header that cannot
    have been written, a newest block missing or shorter than the tail record says, sequences no
    block holds, and so exactly which sequences it would report lost (``rep.lost``). Sets
    ``rep.tail``; returns the problems."""
    try:
        tail = read_tail(rep.path, keys, f"{rep.path.name}/tail")
    except OSError as exc:
        return [f"{TAIL_FILE}: cannot read: {exc.strerror or exc}"]
    except ErrEncryptionKey as exc:
        return [str(exc).removeprefix(f"{ErrEncryptionKey.description}: ")]
    if isinstance(tail, str):
        return [tail]
    rep.tail = tail
    problems = []
    if tail is None and (rep.meta is not None or block_files(rep.path)):
        problems.append(f"{TAIL_FILE} is missing: the newest block cannot be checked against it")
    try:
        rec = recover(
            rep.path / MSGS_DIR, 1, tail, read_only=True, keys=keys, context=f"{rep.path.name}/msgs"
        )
    except ErrCorrupt as exc:
        return [*problems, str(exc).removeprefix(f"{ErrCorrupt.description}: ")]
    except ErrEncryptionKey as exc:
        return [*problems, str(exc).removeprefix(f"{ErrEncryptionKey.description}: ")]
    except OSError as exc:
        return [*problems, f"{MSGS_DIR}/: cannot read: {exc.strerror or exc}"]
    rep.lost = rec.lost
    rep.end = rec.last_seq
    problems.extend(rec.notes)
    if rec.lost:
        problems.append(f"lost sequences: {LostData(rec.lost, rec.lost_bytes).ranges()}")
    return problems
