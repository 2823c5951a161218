"""The Raft log's bytes on disk: segment headers and entry records.

Owns: the byte layouts below (version 1), encoding a batch of entries as one buffer (the append
path writes it with one call), the well-formedness check of one record, decoding, and the
forward search a scanner uses to find the next good record after a bad one. Must not know:
files, the index, hard state or what an entry's data means.

Segment file ``<base index, 20 digits>.rlog``::

    0   4  magic      b"JPRL"
    4   1  version    1
    5   3  reserved   zero
    8   8  base       u64, index of the first entry this segment was created for (the name)
    16  4  crc32      zlib.crc32 over bytes [0, 16)
    20  12 padding    zero
    32  ..  records, back to back, indexes contiguous

Record (little-endian)::

    0   1  magic      0xE7 (not ASCII, and not 0xE5: a message block's record never parses here)
    1   1  version    1
    2   1  kind       raft.EntryKind (0 normal, 1 no-op, 2 membership)
    3   1  reserved   zero
    4   4  rec_len    u32, whole record including this header and the CRC
    8   8  index      u64
    16  8  term       u64
    24  ..  data      rec_len - 28 bytes
    rec_len-4  4  crc32  zlib.crc32 over bytes [0, rec_len - 4): header and length included

The CRC conventions are the message blocks' (``store/record.py``): zlib's CRC-32 in C, the
length covered so a flipped ``rec_len`` is caught, a magic/version pair to re-synchronise on.
The formats stay separate because they describe different things (an entry has an index, a
term and a kind; a message a subject, headers and a timestamp).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Final

from ...raft import Entry, EntryKind

__all__ = [
    "MAX_ENTRY_DATA",
    "RECORD_MAGIC",
    "RECORD_OVERHEAD",
    "SEGMENT_HEADER_SIZE",
    "check_record",
    "decode_header",
    "decode_records",
    "encode_header",
    "encode_records",
    "find_next_record",
    "segment_name",
]

SEGMENT_MAGIC: Final = b"JPRL"
VERSION: Final = 1
RECORD_MAGIC: Final = 0xE7
_SYNC: Final = bytes((RECORD_MAGIC, VERSION))

_SEG: Final = struct.Struct("<4sB3xQ")
_CRC: Final = struct.Struct("<I")
SEGMENT_HEADER_SIZE: Final = 32
_REC: Final = struct.Struct("<BBBxIQQ")
RECORD_OVERHEAD: Final = _REC.size + _CRC.size
assert _REC.size == 24 and RECORD_OVERHEAD == 28

# The largest entry data a record may hold: a scanner never believes a longer rec_len. A
# JetStream entry carries at most a batch of messages of nats-server's maximum payload (64 MiB).
MAX_ENTRY_DATA: Final = 256 << 20
_MAX_RECORD: Final = RECORD_OVERHEAD + MAX_ENTRY_DATA
_KINDS: Final = tuple(EntryKind)


def segment_name(base: int) -> str:
    return f"{base:020d}.rlog"


def encode_header(base: int) -> bytes:
    head = _SEG.pack(SEGMENT_MAGIC, VERSION, base)
    return head + _CRC.pack(zlib.crc32(head)) + bytes(SEGMENT_HEADER_SIZE - _SEG.size - _CRC.size)


def decode_header(buf: bytes | memoryview) -> int | None:
    """The base index in a segment header, None if it is not a valid version-1 header."""
    if len(buf) < SEGMENT_HEADER_SIZE:
        return None
    magic, version, base = _SEG.unpack_from(buf)
    if magic != SEGMENT_MAGIC or version != VERSION:
        return None
    (crc,) = _CRC.unpack_from(buf, _SEG.size)
    return int(base) if zlib.crc32(buf[: _SEG.size]) == crc else None


def encode_records(entries: Sequence[Entry]) -> tuple[bytes, list[int]]:
    """The records of ``entries`` as one buffer, and each record's length."""
    parts: list[bytes] = []
    lengths: list[int] = []
    pack, crc32, pack_crc = _REC.pack, zlib.crc32, _CRC.pack
    for e in entries:
        data = e.data
        n = len(data) + RECORD_OVERHEAD
        if n > _MAX_RECORD:
            raise ValueError(f"entry {e.index} holds {len(data)} bytes, more than {MAX_ENTRY_DATA}")
        head = pack(RECORD_MAGIC, VERSION, e.kind, n, e.index, e.term)
        parts += (head, data, pack_crc(crc32(data, crc32(head))))
        lengths.append(n)
    return b"".join(parts), lengths


def check_record(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int, int, int] | None:
    """(rec_len, index, term, kind) of a well-formed record at ``pos``, or None."""
    if end - pos < RECORD_OVERHEAD:
        return None
    magic, version, kind, n, index, term = _REC.unpack_from(buf, pos)
    if magic != RECORD_MAGIC or version != VERSION or kind >= len(_KINDS):
        return None
    if n < RECORD_OVERHEAD or n > _MAX_RECORD or pos + n > end:
        return None
    (crc,) = _CRC.unpack_from(buf, pos + n - _CRC.size)
    if zlib.crc32(buf[pos : pos + n - _CRC.size]) != crc:
        return None
    return n, index, term, kind


def decode_records(buf: bytes, first_index: int) -> list[Entry]:
    """Every record in ``buf`` (records back to back, starting at ``first_index``), each checked.
    ``ValueError`` names the first that is not what the index promised."""
    out: list[Entry] = []
    pos, end, index = 0, len(buf), first_index
    while pos < end:
        r = check_record(buf, pos, end)
        if r is None or r[1] != index:
            raise ValueError(f"record for entry {index} fails its checks")
        n, _, term, kind = r
        out.append(Entry(index, term, _KINDS[kind], buf[pos + _REC.size : pos + n - _CRC.size]))
        pos += n
        index += 1
    return out


def find_next_record(
    buf: bytes | memoryview, pos: int, end: int
) -> tuple[int, tuple[int, int, int, int]] | None:
    """The first well-formed record at or after ``pos`` (offset and its fields), or None."""
    raw = bytes(buf) if isinstance(buf, memoryview) else buf
    while True:
        pos = raw.find(_SYNC, pos, end)
        if pos < 0:
            return None
        r = check_record(raw, pos, end)
        if r is not None:
            return pos, r
        pos += 1
