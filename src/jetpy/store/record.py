"""The file store's on-disk formats: message/tombstone records and the block file header.

Owns: every byte layout the file store writes into ``*.blk`` files, how to encode them, and how
to validate and re-synchronise on them when scanning a damaged block. Must not know: the in-memory
index, limits, sequences' meaning beyond "this record claims seq N", or file handles.

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
all blocks: a torn or truncated tail can therefore never make an acknowledged sequence look
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
from typing import Final

from .base import FILE_HDR_OVERHEAD, FILE_MSG_OVERHEAD, MAX_PAYLOAD, MAX_SUBJECT_BYTES

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
    "accounted_size",
    "decode_block_header",
    "encode_block_header",
    "encode_erased",
    "encode_range_tombstone",
    "encode_record",
    "encode_tombstone",
    "find_next_record",
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

_pack_hdr = RECORD_HEADER.pack
_unpack_hdr = RECORD_HEADER.unpack_from
_pack_crc = _CRC.pack
_crc32 = zlib.crc32


def encode_record(seq: int, ts: int, subject: bytes, hdr: bytes, data: bytes) -> bytes:
    """A complete message record (the hot path inlines the same two lines)."""
    rec = b"".join(
        (
            _pack_hdr(MAGIC, VERSION, 0, 0, RECORD_OVERHEAD + len(subject) + len(hdr) + len(data),
                      seq, ts, len(subject), len(hdr)),
            subject,
            hdr,
            data,
        )
    )
    return rec + _pack_crc(_crc32(rec))


def accounted_size(rec_len: int, hdr_len: int) -> int:
    """The bytes a message record counts in ``StreamState.bytes`` (nats-server's
    ``fileStoreMsgSize``): the record length, less the unused header-length field without headers."""
    return rec_len if hdr_len else rec_len - FILE_HDR_OVERHEAD


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


def validate_record(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int, int, int, int, int] | None:
    """Check the record at ``buf[pos:end]``; returns ``(rec_len, flags, seq, ts, subj_len, hdr_len)``.

    None if anything is off: short, wrong magic/version, unknown flags, lengths that do not add
    up, an implausible tombstone shape, or a CRC mismatch.
    """
    if end - pos < RECORD_OVERHEAD:
        return None
    magic, version, flags, reserved, rec_len, seq, ts, sl, hl = _unpack_hdr(buf, pos)
    if magic != MAGIC or version != VERSION or reserved or flags & ~_KNOWN_FLAGS:
        return None
    if rec_len > MAX_RECORD_SIZE or rec_len < RECORD_OVERHEAD + sl + hl or pos + rec_len > end:
        return None
    if flags & FLAG_TOMBSTONE:
        want = RECORD_OVERHEAD + (8 if flags & FLAG_RANGE else 0)
        if sl or hl or rec_len != want or flags & FLAG_ERASED:
            return None
    elif flags & FLAG_RANGE:
        return None
    body_end = pos + rec_len - 4
    if _crc32(memoryview(buf)[pos:body_end]) != _CRC.unpack_from(buf, body_end)[0]:
        return None
    return rec_len, flags, seq, ts, sl, hl


def range_end(buf: bytes | memoryview, pos: int) -> int:
    """The ``end`` of a validated range tombstone starting at ``pos``."""
    return int(_U64.unpack_from(buf, pos + RECORD_HEADER.size)[0])


def find_next_record(buf: bytes | memoryview, pos: int, end: int) -> int | None:
    """Offset of the next valid record strictly after ``pos`` (re-synchronisation), or None."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    p = pos + 1
    while True:
        p = data.find(RECORD_SYNC, p, end)
        if p < 0:
            return None
        if validate_record(data, p, end) is not None:
            return p
        p += 1


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
    return (hdr.gen % 2) * _SLOT_SIZE, slot + bytes(_SLOT_SIZE - len(slot))


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
