"""The bulk publish's wire format: a jetpy extension of the JetStream API for writing a stream fast.

Owns the request's format, byte by byte (README, section Spark, repeats it), its constants, a
reference encoder (:func:`encode_request`) and the decoder the server uses (:func:`decode_request`),
which checks the whole request's form before anything of it is stored. Sans-IO.
Must not know: stores, streams, sockets. The server stores the records in
``jetstream/api/bulk_publish.py`` and answers with ``BulkPublishResponse`` (JSON).

Request: publish to ``$JS.API.JETPY.PUBLISH.<stream>`` (under a JetStream API prefix, like
every API subject) with a reply subject. A record is what an HPUB carries: a subject and a
message, the message being an optional NATS header block (``NATS/1.0\\r\\n...\\r\\n\\r\\n``,
where ``Nats-Msg-Id``, ``Nats-Expected-*``, ``Nats-TTL`` and ``Nats-Rollup`` mean what they mean
on a single publish) followed by the payload. The body lays the records out column by column
(integers little-endian), so that a columnar writer (Arrow) builds it without a loop per row::

    0   4  magic      b"JPBP"
    4   1  version    1
    5   1  flags      0
    6   2  reserved   0
    8   4  count      u32, records in the request (at least 1)
    12  4  reserved   0
    16  4 * (count+1) subject offsets: u32, the first 0, ascending; record i's subject is
                      subjects[off[i]:off[i+1]]
    ..  4 * count     header lengths: u32, the length of record i's header block (0: none)
    ..  4 * (count+1) message offsets: u32, as the subject offsets, into the messages area
    ..  subjects area the subjects, back to back (UTF-8)
    ..  messages area each record's header block and payload, back to back; the body ends here

A request of another length than these fields say, offsets that do not ascend or leave their
area, or a header length past its message or that does not frame a header block, is refused as
a whole (nothing stored).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice, pairwise, repeat
from operator import add, gt
from typing import Final

__all__ = [
    "HEADER",
    "MAGIC",
    "PUBLISH_API",
    "RESPONSE_TYPE",
    "VERSION",
    "BulkPublishFormatError",
    "BulkRecords",
    "decode_request",
    "encode_request",
    "msg_id_header",
    "request_size",
]

PUBLISH_API: Final = "JETPY.PUBLISH"
"""The API path after the prefix: ``$JS.API.JETPY.PUBLISH.<stream>``."""
RESPONSE_TYPE: Final = "jetpy.api.v1.bulk_publish_response"

MAGIC: Final = b"JPBP"
VERSION: Final = 1
HEADER: Final = struct.Struct("<4sBBHII")
assert HEADER.size == 16

_HDR_START: Final = b"NATS/1.0"
_HDR_END: Final = b"\r\n\r\n"


class BulkPublishFormatError(ValueError):
    """A request that does not follow the format (the reason says where)."""


@dataclass(frozen=True, slots=True)
class BulkRecords:
    """A decoded request: record i is ``subjects[i]``, its header block ``hdrs[i]`` (``b""``:
    none) and its payload ``payloads[i]``."""

    subjects: list[bytes]
    hdrs: list[bytes]
    payloads: list[bytes]

    def __len__(self) -> int:
        return len(self.subjects)


def msg_id_header(msg_id: bytes) -> bytes:
    """The header block that carries a message id and nothing else."""
    return b"NATS/1.0\r\nNats-Msg-Id: %s\r\n\r\n" % msg_id


def request_size(count: int, subject_bytes: int, message_bytes: int) -> int:
    """The length of a request of ``count`` records with areas of these sizes."""
    return HEADER.size + 4 * (3 * count + 2) + subject_bytes + message_bytes


def _le(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _u32s(raw: bytes, start: int, n: int) -> array[int]:
    a = array("I")
    a.frombytes(raw[start : start + 4 * n])
    if sys.byteorder == "big":
        a.byteswap()
    return a


def encode_request(records: Sequence[tuple[bytes, bytes, bytes]]) -> bytes:
    """The body for ``(subject, header block or b"", payload)`` records: the reference encoder."""
    so = array("I", [0])
    mo = array("I", [0])
    hl = array("I")
    for subject, hdr, payload in records:
        so.append(so[-1] + len(subject))
        hl.append(len(hdr))
        mo.append(mo[-1] + len(hdr) + len(payload))
    parts = [HEADER.pack(MAGIC, VERSION, 0, 0, len(records), 0), _le(so), _le(hl), _le(mo)]
    parts += [r[0] for r in records]
    for _subject, hdr, payload in records:
        parts += (hdr, payload)
    return b"".join(parts)


def decode_request(body: bytes) -> BulkRecords:
    """Every record of a request, its form checked (BulkPublishFormatError otherwise); what the
    records mean (subjects, headers) is the stream's to check."""
    if len(body) < HEADER.size:
        raise BulkPublishFormatError(f"a request of {len(body)} bytes is shorter than its header")
    magic, version, flags, reserved, count, reserved2 = HEADER.unpack_from(body)
    if magic != MAGIC or version != VERSION or flags or reserved or reserved2:
        raise BulkPublishFormatError(f"not a bulk publish request (header {body[:8]!r})")
    if not count:
        raise BulkPublishFormatError("a request without records")
    if request_size(count, 0, 0) > len(body):
        raise BulkPublishFormatError(f"{count} records do not fit in a request of {len(body)} bytes")
    pos = HEADER.size
    so = _u32s(body, pos, count + 1)
    pos += 4 * (count + 1)
    hl = _u32s(body, pos, count)
    pos += 4 * count
    mo = _u32s(body, pos, count + 1)
    pos += 4 * (count + 1)
    if request_size(count, so[-1], mo[-1]) != len(body):
        raise BulkPublishFormatError(
            f"the offsets say {request_size(count, so[-1], mo[-1])} bytes, the request has {len(body)}"
        )
    if so[0] or mo[0]:
        raise BulkPublishFormatError("the first offsets are not 0")
    sb = pos
    mb = sb + so[-1]
    # in comprehensions, not a loop with a body per record: the decoding is the server's
    # first cost per record
    if any(map(gt, so, islice(so, 1, None))) or any(map(gt, mo, islice(mo, 1, None))):
        first = next(i for i in range(count) if so[i] > so[i + 1] or mo[i] > mo[i + 1])
        raise BulkPublishFormatError(f"record {first}: offsets not ascending")
    area = body[sb:mb]
    subjects = [area[a:b] for a, b in pairwise(so)]
    area = body[mb:]
    ends = list(map(add, mo, hl))  # where each header block ends (map stops at the shorter hl)
    hdrs = [area[c:e] for c, e in zip(islice(mo, count), ends, strict=True)]
    payloads = [area[e:d] for e, d in zip(ends, islice(mo, 1, None), strict=True)]
    # every header block frames a NATS header block (counted in C; b"" is no block)
    framed = count - hl.count(0)
    if (
        list(map(len, hdrs)) != hl.tolist()
        or sum(map(bytes.startswith, hdrs, repeat(_HDR_START))) != framed
        or sum(map(bytes.endswith, hdrs, repeat(_HDR_END))) != framed
    ):
        bad = next(
            i
            for i, (h, hdr) in enumerate(zip(hl, hdrs, strict=True))
            if len(hdr) != h or (h and not (hdr.startswith(_HDR_START) and hdr.endswith(_HDR_END)))
        )
        raise BulkPublishFormatError(f"record {bad}: its header length does not frame a NATS header block")
    return BulkRecords(subjects, hdrs, payloads)
