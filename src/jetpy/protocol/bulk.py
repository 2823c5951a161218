"""The bulk read's wire format: a jetpy extension of the JetStream API for reading a stream fast.

Owns the format of the request and of the reply messages, byte by byte (README, section Spark,
repeats it), their constants, the encoding of a reply message's header, and a plain reference
decoder (``decode_chunk``) that checks every record: any client can read streams this way, not
only the Spark source (which decodes the same bytes in bulk with numpy/Arrow). Sans-IO.
Must not know: stores, streams, sockets. The server writes replies in
``jetstream/api/bulk.py``; the records themselves are the file store's (``store/record.py``
writes them), restated here as readers see them and held equal to it by a test.

Request: publish to ``$JS.API.JETPY.BULK.<stream>`` (under a JetStream API prefix, like every
API subject) with a reply subject and a JSON body, every field optional::

    {"seq": 1,                 first sequence to read (0: the stream's first)
     "up_to_seq": 0,           last sequence to read, inclusive (0: the stream's last when asked)
     "filter_subjects": [],    subjects (wildcards allowed) to read; none: every message
     "max_bytes": 8388608}     records to send for this request (0: 8 MiB; at most 64 MiB)

Any stream can be read this way, whatever its ``allow_direct``. A server without this API
(nats-server) does not answer it (its ``$JS.API.>`` subscription swallows the request); a
jetpy server names itself in its INFO's ``go`` field (``... jetpy<version>``), which is how a
client knows to ask.

Reply: one or more messages on the reply subject, in order, the last one flagged ``LAST``. A
failure (unknown stream, bad request, a damaged store) is instead a JetStream API error reply,
a JSON object (first byte ``{``) such as
``{"type":"jetpy.api.v1.bulk_read_response","error":{"code":404,"err_code":10059,...}}``; it
ends the reply too, possibly after some data messages. A data message's payload (integers
little-endian)::

    0   4  magic      b"JPBR"
    4   1  version    1
    5   1  flags      bit 0 LAST: the reply's final message; other bits zero
    6   2  reserved   zero
    8   4  count      u32, records in this message
    12  4  base       u32, subtracted from an offset gives the record's position in the area
    16  8  next_seq   u64, LAST only (else 0): where to continue; every matching message from
                      the request's ``seq`` to just below it was sent. The range is done when
                      it is past ``up_to_seq`` (or past ``last_seq``)
    24  8  first_seq  u64, the stream's first sequence when the message was made
    32  8  last_seq   u64, the stream's last sequence when the message was made
    40  4 * count     u32 offsets, one per record, ascending
    ..  area          the records, to the end of the payload; bytes between records are not
                      messages (tombstones, padding) and are skipped by going by the offsets

Each record is a message as the file store wrote it, with its CRC-32 (zlib's, over the whole
record including its header): a reader that checks it verifies the bytes from the moment they
were stored to the moment it reads them::

    0   1  magic      0xE5
    1   1  version    1
    2   1  flags      0 (any other value is not a message: refuse it)
    3   1  reserved   0
    4   4  rec_len    u32, the whole record's length, this header and the CRC included
    8   8  seq        u64, the stream sequence
    16  8  ts         i64, nanoseconds since the Unix epoch
    24  2  subj_len   u16
    26  4  hdr_len    u32
    30  ..            subject (UTF-8) | headers (a NATS header block, or none) | payload
    rec_len - 4   4   crc32 of bytes [0, rec_len - 4)

Records come in sequence order, only live messages matching the filters, within the range. A
record that fails its checks (magic, flags, lengths, CRC, a sequence out of order or out of the
range asked for) means damaged data: report it, never skip it.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BULK_API",
    "CHUNK_HEADER",
    "CRC_RESIDUE",
    "CRC_RUN_MARK",
    "DEFAULT_MAX_BYTES",
    "FLAG_LAST",
    "MAGIC",
    "MAX_BYTES",
    "RECORD_HEADER",
    "RECORD_MAGIC",
    "RECORD_OVERHEAD",
    "RECORD_VERSION",
    "RESPONSE_TYPE",
    "VERSION",
    "BulkFormatError",
    "BulkRecord",
    "ChunkHeader",
    "decode_chunk",
    "decode_header",
    "encode_header",
    "offsets_bytes",
]

BULK_API: Final = "JETPY.BULK"
"""The API path after the prefix: ``$JS.API.JETPY.BULK.<stream>``."""
RESPONSE_TYPE: Final = "jetpy.api.v1.bulk_read_response"

MAGIC: Final = b"JPBR"
VERSION: Final = 1
FLAG_LAST: Final = 0x01
CHUNK_HEADER: Final = struct.Struct("<4sBBHIIQQQ")
assert CHUNK_HEADER.size == 40

DEFAULT_MAX_BYTES: Final = 8 * 1024 * 1024
"""Records per request when ``max_bytes`` is 0: a few milliseconds of a reader's work, so two
requests in flight keep it busy without holding much memory on either side."""
MAX_BYTES: Final = 64 * 1024 * 1024
"""The most one request gets (larger ``max_bytes`` are lowered to it): nats-server's default
``max_pending``, so one reply never makes its reader a slow consumer by itself."""

RECORD_MAGIC: Final = 0xE5
RECORD_VERSION: Final = 1
RECORD_HEADER: Final = struct.Struct("<BBBBIQqHI")
RECORD_OVERHEAD: Final = RECORD_HEADER.size + 4
CRC_RESIDUE: Final = 0x2144DF1C
"""zlib.crc32 over a record's bytes followed by their CRC (the whole record) always gives this:
one call checks a record without unpacking its trailer."""
CRC_RUN_MARK: Final = 0x6DD90A9D
"""What makes a run of adjacent records checkable with two CRC calls instead of one per record.

zlib's CRC-32 of a concatenation is ``crc(A || B) = crc(B) ^ shift(crc(A), len(B))``, where
``shift(v, n)`` (the register advanced over ``n`` zero bytes) is linear and invertible; so the
CRC of a run of records is the sum over its records of ``shift(crc(record), bytes after it)``.
With every record whole, each ``crc(record)`` is :data:`CRC_RESIDUE`, so the run's CRC is
``sum shift(CRC_RESIDUE, bytes after each record)``, which depends only on where the records
end. That sum is itself a CRC: of a zero buffer as long as the run with this mark (little
endian) in the last four bytes of each record's place, taken from a zero register with no final
inversion (``crc32(z, 0xFFFFFFFF) ^ 0xFFFFFFFF``); the mark is ``shift(., 4)`` undone on
:data:`CRC_RESIDUE` (``tests/unit/test_bulk_format.py`` derives it). A record whose CRC is not
the residue adds ``shift(error, n) != 0`` to the sum, so one damaged record in a run always
shows; several could cancel out with a chance of one in 2^32."""

_U32: Final = struct.Struct("<I")
assert array("I").itemsize == 4  # C's unsigned int, on every platform Python supports today


class BulkFormatError(ValueError):
    """A reply message that does not follow this format, or a record that fails its checks."""


@dataclass(frozen=True, slots=True)
class ChunkHeader:
    flags: int
    count: int
    base: int
    next_seq: int
    first_seq: int
    last_seq: int

    @property
    def last(self) -> bool:
        return bool(self.flags & FLAG_LAST)

    @property
    def area_start(self) -> int:
        """Where the records area starts in the payload."""
        return CHUNK_HEADER.size + 4 * self.count


@dataclass(frozen=True, slots=True)
class BulkRecord:
    """One message of a reply, as :func:`decode_chunk` returns it."""

    seq: int
    ts: int
    subject: str
    hdr: bytes
    data: bytes


def encode_header(flags: int, count: int, base: int, next_seq: int, first_seq: int, last_seq: int) -> bytes:
    return CHUNK_HEADER.pack(MAGIC, VERSION, flags, 0, count, base, next_seq, first_seq, last_seq)


def offsets_bytes(offsets: array[int]) -> bytes:
    """An ``array("I")`` of offsets as the format's little-endian u32s."""
    if sys.byteorder == "big":
        offsets = array(offsets.typecode, offsets)
        offsets.byteswap()
    return offsets.tobytes()


def decode_header(payload: bytes | memoryview) -> ChunkHeader:
    """The header of a data message; BulkFormatError if it is not one."""
    if len(payload) < CHUNK_HEADER.size:
        raise BulkFormatError(f"bulk reply message of {len(payload)} bytes, shorter than its header")
    magic, version, flags, reserved, count, base, next_seq, first, last = CHUNK_HEADER.unpack_from(payload)
    if magic != MAGIC or version != VERSION or reserved or flags & ~FLAG_LAST:
        raise BulkFormatError(f"not a bulk reply message (header {bytes(payload[:8])!r})")
    h = ChunkHeader(flags, count, base, next_seq, first, last)
    if h.area_start > len(payload):
        raise BulkFormatError(f"bulk reply message says {count} records but is {len(payload)} bytes long")
    return h


def decode_chunk(payload: bytes, lo: int = 1, hi: int = 2**64 - 1) -> tuple[ChunkHeader, list[BulkRecord]]:
    """A data message's header and records, every record checked (format, CRC, sequence
    ascending within ``[lo, hi]``): the reference reader, one record at a time."""
    h = decode_header(payload)
    area = memoryview(payload)[h.area_start :]
    size = len(area)
    out: list[BulkRecord] = []
    prev = lo - 1
    for k in range(h.count):
        pos = _U32.unpack_from(payload, CHUNK_HEADER.size + 4 * k)[0] - h.base
        if pos < 0 or pos + RECORD_OVERHEAD > size:
            raise BulkFormatError(f"record {k} of a bulk reply lies outside its message")
        magic, version, flags, reserved, rec_len, seq, ts, sl, hl = RECORD_HEADER.unpack_from(area, pos)
        where = f"the record after sequence {prev}" if k else f"the record at or after sequence {lo}"
        if (magic, version, flags, reserved) != (RECORD_MAGIC, RECORD_VERSION, 0, 0):
            raise BulkFormatError(f"{where} is not a message record")
        if rec_len < RECORD_OVERHEAD + sl + hl or pos + rec_len > size:
            raise BulkFormatError(f"{where} has a damaged length")
        if zlib.crc32(area[pos : pos + rec_len]) != CRC_RESIDUE:
            raise BulkFormatError(f"{where} (sequence {seq} if its header is right) fails its checksum")
        if not prev < seq <= hi:
            raise BulkFormatError(f"sequence {seq} after {prev}: out of order or outside {lo}..{hi}")
        a = pos + RECORD_HEADER.size
        out.append(
            BulkRecord(
                seq,
                ts,
                bytes(area[a : a + sl]).decode(),
                bytes(area[a + sl : a + sl + hl]),
                bytes(area[a + sl + hl : pos + rec_len - 4]),
            )
        )
        prev = seq
    return h, out
