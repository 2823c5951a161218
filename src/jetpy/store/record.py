"""The file store's record codec: message/tombstone records and the block file header.

Owns: every byte layout the file store writes into ``*.blk`` files, and every rule about those
bytes, each written once: encoding (``append_record`` is the append path's own form), the
well-formedness check with the reason a record fails it (``check_record``: recovery, the offline
scanner and re-synchronisation), and the check that a record is the live message an index entry
expects (``decode_msgs``: the single and the bulk read, one run of entries at a time).
Must not know: what the index is beyond the columns ``decode_msgs`` is handed, limits, sequences'
meaning beyond "this record claims seq N", or file handles.

Block file ``<first seq, 20 digits>.blk``::

    0    64  header slot A
    64   64  header slot B
    128  ..  records, back to back

Header slot (both slots have this layout; the valid one with the higher ``gen`` wins, so a torn
in-place rewrite of one slot always leaves the other intact)::

    0   4  magic      b"JPBK"
    4   1  version    1
    5   3  reserved   zero
    8   8  base       u64, first sequence this block was created for (equals the file name)
    16  8  hwm        u64, high-water mark: every seq <= hwm may have been acknowledged
    24  8  floor      u64, every seq < floor is deleted (the stream's first seq when written)
    32  8  last_ts    i64, timestamp of the message with seq == hwm (0 if unknown)
    40  8  gen        u64, rewrite counter; slot = gen % 2
    48  4  crc32      zlib.crc32 over bytes [0, 48)
    52  12 padding    zero

Only the newest (active) block's header is rewritten: by ``flush`` whenever hwm/floor/last_ts
changed (so a killed process leaves them in the page cache), and ``sync`` fdatasyncs that file,
so they become durable together with the records they describe. Recovery takes the maximum over
all blocks and the store's tail record (tail.py, which survives the loss of the block itself):
a torn, truncated or deleted tail can therefore never make an acknowledged sequence look
unused, and purges/compactions at the head need no per-message tombstones.

Record (little-endian)::

    0   1  magic      0xE5 (not ASCII and not a common UTF-8 lead byte in subjects)
    1   1  version    1
    2   1  flags      bit0 TOMBSTONE, bit1 ERASED, bit2 RANGE (only with TOMBSTONE); others zero
    3   1  reserved   zero
    4   4  rec_len    u32, total record length including this header and the CRC trailer
    8   8  seq        u64
    16  8  ts         i64, nanoseconds since the Unix epoch (0 for tombstones)
    24  2  subj_len   u16
    26  4  hdr_len    u32
    30  ..  subject (subj_len bytes UTF-8) | headers (hdr_len) | payload (the rest)
    rec_len-4  4  crc32  zlib.crc32 over bytes [0, rec_len - 4): the whole header is covered

Accounting: ``StreamState.bytes`` counts nats-server's ``fileStoreMsgSize`` per message, which is
``rec_len`` for a message with headers and ``rec_len - 4`` without (nats-server's record has no
header-length field then; this one always has). The index keeps that accounted size
(``accounted_size``); the reader takes the real length from ``rec_len``.

Per-message TTL (``Nats-TTL``, nats-server 2.11) needs no field and no new version: a message with
a TTL always carries the ``Nats-TTL`` header in its own header bytes, and recovery reads the TTL
back from there (records written before TTLs existed simply have none).

Record kinds:

* message: flags 0.
* erased message: flags ERASED, same length as the original, subject/headers/payload zeroed.
  The in-place rewrite is how ``erase_msg`` destroys the bytes; the record then means "deleted".
* tombstone: flags TOMBSTONE, ``seq`` is the deleted sequence, no subject/headers/payload.
* range tombstone: flags TOMBSTONE|RANGE, payload is a u64 ``end``: seqs ``seq..end`` have no
  records anywhere (written when a whole block in the middle of the stream is deleted).

Why zlib.crc32: it runs in C at several GB/s with one call per record and no digest objects,
it detects every burst error up to 32 bits and every 1-3 bit error in records of this size,
and it covers the length field, so a flipped ``rec_len`` is caught rather than trusted. It is
not a MAC: it defends against accidents (bit rot, torn writes), not an attacker with write
access to the data directory. A scanner that meets a bad record searches forward for the next
``magic, version`` pair whose record validates (re-synchronisation), so one damaged record costs
that record, not the rest of the block.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Sequence
from typing import Final, Literal, Protocol, overload

from .base import FILE_HDR_OVERHEAD, FILE_MSG_OVERHEAD, MAX_PAYLOAD, MAX_SUBJECT_BYTES, StoredMsg

__all__ = [
    "BLOCK_HEADER_SIZE",
    "FLAG_ERASED",
    "FLAG_RANGE",
    "FLAG_TOMBSTONE",
    "MAGIC",
    "MAX_RECORD_SIZE",
    "RECORD_HEADER",
    "RECORD_OVERHEAD",
    "RECORD_SYNC",
    "VERSION",
    "BlockHeader",
    "RecordFields",
    "accounted_size",
    "append_record",
    "check_record",
    "decode_block_header",
    "decode_msgs",
    "encode_block_header",
    "encode_erased",
    "encode_range_tombstone",
    "encode_record",
    "encode_tombstone",
    "find_next_record",
    "header_offset",
    "index_parts",
    "longest_record",
    "peek_header",
    "range_end",
    "record_headers",
    "split_record",
    "validate_record",
]

MAGIC: Final = 0xE5
VERSION: Final = 1
RECORD_SYNC: Final = bytes((MAGIC, VERSION))  # what the re-synchronising scanner searches for

FLAG_TOMBSTONE: Final = 0x01
FLAG_ERASED: Final = 0x02
FLAG_RANGE: Final = 0x04
_KNOWN_FLAGS: Final = FLAG_TOMBSTONE | FLAG_ERASED | FLAG_RANGE

RECORD_HEADER: Final = struct.Struct("<BBBBIQqHI")
_CRC: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
RECORD_OVERHEAD: Final = RECORD_HEADER.size + _CRC.size
assert RECORD_HEADER.size == 30
# A record with headers is exactly nats-server's accounted size; one without is 4 bytes longer
# (our hdr_len field is always there): see ``accounted_size``.
assert RECORD_OVERHEAD == FILE_MSG_OVERHEAD + FILE_HDR_OVERHEAD

# The largest record the scanner will believe: the biggest message plus its longest subject.
# A corrupt rec_len above this is rejected before any slicing.
MAX_RECORD_SIZE: Final = RECORD_OVERHEAD + MAX_SUBJECT_BYTES + MAX_PAYLOAD

_SLOT: Final = struct.Struct("<4sB3xQQQqQ")
_SLOT_SIZE: Final = 64
BLOCK_MAGIC: Final = b"JPBK"
BLOCK_HEADER_SIZE: Final = 2 * _SLOT_SIZE
assert _SLOT.size + _CRC.size <= _SLOT_SIZE

_HDR_SIZE: Final = RECORD_HEADER.size
_pack_hdr = RECORD_HEADER.pack
_unpack_hdr = RECORD_HEADER.unpack_from
_pack_crc = _CRC.pack
_crc32 = zlib.crc32
_join = b"".join
# zlib.crc32 over bytes followed by their own CRC-32 (little-endian) always gives this constant,
# so a whole record checks in one call, without unpacking its trailer
_CRC_RESIDUE: Final = 0x2144DF1C

RecordFields = tuple[int, int, int, int, int, int]
"""``(rec_len, flags, seq, ts, subj_len, hdr_len)`` of one record."""


# ----------------------------------------------------------------------------- encoding


def append_record(
    buf: bytearray,
    seq: int,
    ts: int,
    subject: bytes,
    hdr: bytes,
    data: bytes,
    subj_len: int,
    hdr_len: int,
    rec_len: int,
) -> int:
    """Append a message record to ``buf`` and return its accounted size (``accounted_size``).

    The lengths are the ones the append path has already worked out to check its limits:
    ``len(subject)``, ``len(hdr)`` and ``RECORD_OVERHEAD + len(subject) + len(hdr) + len(data)``.
    This is the append path's one call per message, so the accounted size is inlined here."""
    rec = _join((_pack_hdr(MAGIC, VERSION, 0, 0, rec_len, seq, ts, subj_len, hdr_len), subject, hdr, data))
    buf += rec
    buf += _pack_crc(_crc32(rec))
    return rec_len if hdr_len else rec_len - FILE_HDR_OVERHEAD


def encode_record(seq: int, ts: int, subject: bytes, hdr: bytes, data: bytes) -> bytes:
    """A complete message record."""
    buf = bytearray()
    sl, hl = len(subject), len(hdr)
    append_record(buf, seq, ts, subject, hdr, data, sl, hl, RECORD_OVERHEAD + sl + hl + len(data))
    return bytes(buf)


def accounted_size(rec_len: int, hdr_len: int) -> int:
    """The bytes a message record counts in ``StreamState.bytes`` (nats-server's
    ``fileStoreMsgSize``): the record length, less the unused header-length field without headers."""
    return rec_len if hdr_len else rec_len - FILE_HDR_OVERHEAD


def longest_record(accounted: int) -> int:
    """The longest a message record of this accounted size can be (it may be 4 bytes shorter)."""
    return accounted + FILE_HDR_OVERHEAD


def encode_tombstone(seq: int) -> bytes:
    rec = _pack_hdr(MAGIC, VERSION, FLAG_TOMBSTONE, 0, RECORD_OVERHEAD, seq, 0, 0, 0)
    return rec + _pack_crc(_crc32(rec))


def encode_range_tombstone(first: int, last: int) -> bytes:
    rec = _pack_hdr(
        MAGIC, VERSION, FLAG_TOMBSTONE | FLAG_RANGE, 0, RECORD_OVERHEAD + 8, first, 0, 0, 0
    ) + _U64.pack(last)
    return rec + _pack_crc(_crc32(rec))


def encode_erased(seq: int, ts: int, rec_len: int, subj_len: int, hdr_len: int) -> bytes:
    """The same-length replacement ``erase_msg`` writes over a message record."""
    rec = _pack_hdr(MAGIC, VERSION, FLAG_ERASED, 0, rec_len, seq, ts, subj_len, hdr_len)
    rec += bytes(rec_len - RECORD_OVERHEAD)
    return rec + _pack_crc(_crc32(rec))


# ----------------------------------------------------------------------------- checking a record


@overload
def check_record(
    buf: bytes | bytearray | memoryview, pos: int, end: int, explain: Literal[False] = False
) -> RecordFields | None: ...
@overload
def check_record(
    buf: bytes | bytearray | memoryview, pos: int, end: int, explain: Literal[True]
) -> RecordFields | str: ...
def check_record(
    buf: bytes | bytearray | memoryview, pos: int, end: int, explain: bool = False
) -> RecordFields | str | None:
    """The record at ``buf[pos:end]``: its fields if it is well formed, else None, or with
    ``explain`` why it is not (the offline checker prints that; scans only need to know).

    Well formed: long enough, our magic and version, known flags and a zero reserved byte,
    lengths that add up within ``MAX_RECORD_SIZE`` and within ``end``, a matching CRC, and the
    shape of a tombstone exactly when flagged as one."""
    left = end - pos
    if left < RECORD_OVERHEAD:
        return f"truncated: {left} bytes where a record needs at least {RECORD_OVERHEAD}" if explain else None
    magic, version, flags, reserved, rec_len, seq, ts, sl, hl = _unpack_hdr(buf, pos)
    if magic != MAGIC or version != VERSION:
        return f"not a record: magic/version {magic:#04x}/{version}" if explain else None
    if reserved or flags & ~_KNOWN_FLAGS:
        return f"bad header: flags {flags:#04x}, reserved {reserved}" if explain else None
    if rec_len > MAX_RECORD_SIZE or rec_len < RECORD_OVERHEAD + sl + hl:
        return (
            f"bad header: record length {rec_len} with subject {sl} and headers {hl} bytes"
            if explain
            else None
        )
    if rec_len > left:
        return f"truncated: record length {rec_len}, only {left} bytes left in the file" if explain else None
    view = memoryview(buf)
    if _crc32(view[pos : pos + rec_len]) != _CRC_RESIDUE:
        if not explain:
            return None
        body_end = pos + rec_len - 4
        stored, computed = _CRC.unpack_from(buf, body_end)[0], _crc32(view[pos:body_end])
        return f"checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
    if flags & FLAG_TOMBSTONE:
        tombstone_ok = not (sl or hl or flags & FLAG_ERASED) and rec_len == RECORD_OVERHEAD + (
            8 if flags & FLAG_RANGE else 0
        )
    else:
        tombstone_ok = not flags & FLAG_RANGE
    if not tombstone_ok:
        return "inconsistent record (tombstone shape)" if explain else None
    return rec_len, flags, seq, ts, sl, hl


def validate_record(buf: bytes | bytearray | memoryview, pos: int, end: int) -> RecordFields | None:
    """``check_record`` without the reason: the fields, or None."""
    return check_record(buf, pos, end)


def find_next_record(buf: bytes | memoryview, pos: int, end: int) -> int | None:
    """Offset of the next valid record strictly after ``pos`` (re-synchronisation), or None."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    p = pos + 1
    while True:
        p = data.find(RECORD_SYNC, p, end)
        if p < 0:
            return None
        if check_record(data, p, end) is not None:
            return p
        p += 1


def range_end(buf: bytes | memoryview, pos: int) -> int:
    """The ``end`` of a validated range tombstone starting at ``pos``."""
    return int(_U64.unpack_from(buf, pos + _HDR_SIZE)[0])


def peek_header(buf: bytes | bytearray | memoryview, pos: int) -> RecordFields | None:
    """The header fields of the record at ``pos``, unchecked (a timestamp, an erase's lengths);
    None if ``buf`` ends before the header does."""
    if pos < 0 or pos + _HDR_SIZE > len(buf):
        return None
    _m, _v, flags, _r, rec_len, seq, ts, sl, hl = _unpack_hdr(buf, pos)
    return rec_len, flags, seq, ts, sl, hl


def split_record(buf: bytes, pos: int, fields: RecordFields) -> tuple[bytes, bytes, bytes]:
    """``(subject, headers, payload)`` of a checked message record at ``pos``."""
    a = pos + _HDR_SIZE + fields[4]
    b = a + fields[5]
    return buf[pos + _HDR_SIZE : a], buf[a:b], buf[b : pos + fields[0] - 4]


def index_parts(buf: bytes, pos: int, rec_len: int, subj_len: int, hdr_len: int) -> tuple[bytes, int]:
    """``(subject, accounted size)`` of a checked message record at ``pos`` with these fields:
    what recovery indexes."""
    return buf[
        pos + _HDR_SIZE : pos + _HDR_SIZE + subj_len
    ], rec_len if hdr_len else rec_len - FILE_HDR_OVERHEAD


def record_headers(buf: bytes, pos: int, subj_len: int, hdr_len: int) -> bytes:
    """The headers of a checked message record at ``pos`` (recovery reads a TTL back from them)."""
    a = pos + _HDR_SIZE + subj_len
    return buf[a : a + hdr_len]


# ----------------------------------------------------------------------------- reading messages


class Named(Protocol):
    """What ``decode_msgs`` needs of a subject table entry."""

    @property
    def name(self) -> str: ...


def decode_msgs(
    buf: bytes,
    buf_off: int,
    offs: array[int],
    lens: array[int],
    sids: array[int],
    subjects: Sequence[Named | None],
    base: int,
    i: int,
    want: int,
    out: list[StoredMsg],
    deleted: int,
) -> int:
    """Decode up to ``want`` live messages of a run of index entries into ``out``; returns the
    entry where it stopped.

    Entry ``k`` (sequence ``base + k``) has its record at file offset ``offs[k]``, the accounted
    size ``lens[k]`` and the subject ``subjects[sids[k]]``; entries whose sid is ``deleted`` are
    passed over. ``buf`` holds the file's bytes from offset ``buf_off``. A record is the one
    the entry expects when it is a plain message (no flags) of that sequence and accounted size
    whose CRC matches. Decoding stops after ``want`` messages, at the end of the columns, or at
    the first live entry whose record is not wholly in ``buf`` or is not the one expected: the
    caller tells those two apart by reading ``buf`` afresh from that record. The single read
    is a run of one; the bulk read is why this is a loop and not a call per message."""
    clen = len(buf)
    n = len(sids)
    stop = min(n, i + want)
    append = out.append
    last_sid, name = -1, ""  # consecutive messages often share a subject
    while i < stop:
        sid = sids[i]
        if sid == deleted:
            i += 1
            if stop < n:
                stop += 1
            continue
        d = offs[i] - buf_off
        if d < 0 or d + _HDR_SIZE > clen:
            return i
        _m, _v, flags, _r, rec_len, seq, ts, sl, hl = _unpack_hdr(buf, d)
        end = d + rec_len
        if (
            end > clen
            or seq != base + i
            or flags
            or rec_len < RECORD_OVERHEAD
            or (rec_len if hl else rec_len - FILE_HDR_OVERHEAD) != lens[i]  # accounted_size
            or _crc32(buf[d:end]) != _CRC_RESIDUE
        ):
            return i
        if sid != last_sid:
            info = subjects[sid]
            if info is None:
                return i
            name, last_sid = info.name, sid
        a = d + _HDR_SIZE + sl
        b = a + hl
        append(StoredMsg(name, seq, ts, buf[a:b], buf[b : end - 4]))
        i += 1
    return i


# ----------------------------------------------------------------------------- the block header


class BlockHeader:
    """The decoded winning header slot of a block file."""

    __slots__ = ("base", "floor", "gen", "hwm", "last_ts")

    def __init__(self, base: int, hwm: int, floor: int, last_ts: int, gen: int) -> None:
        self.base = base
        self.hwm = hwm
        self.floor = floor
        self.last_ts = last_ts
        self.gen = gen


def encode_block_header(hdr: BlockHeader) -> tuple[int, bytes]:
    """``(file offset, 64 bytes)`` of the slot that ``hdr.gen`` selects."""
    body = _SLOT.pack(BLOCK_MAGIC, VERSION, hdr.base, hdr.hwm, hdr.floor, hdr.last_ts, hdr.gen)
    slot = body + _CRC.pack(_crc32(body))
    return header_offset(hdr), slot + bytes(_SLOT_SIZE - len(slot))


def header_offset(hdr: BlockHeader) -> int:
    """The file offset of the slot ``hdr`` was read from (or is written to)."""
    return (hdr.gen % 2) * _SLOT_SIZE


def decode_block_header(buf: bytes, base: int) -> BlockHeader | None:
    """The valid slot with the highest generation whose base matches the file name, or None."""
    best: BlockHeader | None = None
    for off in (0, _SLOT_SIZE):
        if len(buf) < off + _SLOT.size + _CRC.size:
            continue
        if _crc32(buf[off : off + _SLOT.size]) != _CRC.unpack_from(buf, off + _SLOT.size)[0]:
            continue
        magic, version, b, hwm, floor, last_ts, gen = _SLOT.unpack_from(buf, off)
        if magic != BLOCK_MAGIC or version != VERSION or b != base:
            continue
        if best is None or gen > best.gen:
            best = BlockHeader(b, hwm, floor, last_ts, gen)
    return best
