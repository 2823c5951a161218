"""The connector's fast path on jetpy: the bulk read (``$JS.API.JETPY.BULK``), decoded in bulk.

Owns: asking for a range of a stream one request after another (each for ``fetchMaxBytes`` of
records, the server streaming them in ~1 MiB messages) and turning each message straight into
an Arrow record batch with numpy: every field of every record is gathered in a few vectorised
steps, ``subject`` and ``data`` become Arrow string/binary columns by one copy each (through
binary views that point into the message), and every record's CRC-32 is checked, one C call
per record. The format is ``jetpy.protocol.bulk``'s.

Why the check is here: the CRC was computed by the server's store when the message was
written; checking it where the row is made covers the disk, the server's memory and the network
at once. A record that fails any check (magic, flags, lengths, CRC, sequence order, range, a
subject the filters do not match) fails the read with the stream and the sequence named.
Must not know: Spark's classes (it returns Arrow batches), the server's internals.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from jetpy.protocol.bulk import (
    BULK_API,
    CHUNK_HEADER,
    CRC_RESIDUE,
    CRC_RUN_MARK,
    RECORD_OVERHEAD,
    BulkFormatError,
    ChunkHeader,
    decode_header,
)
from jetpy.protocol.headers import parse_headers
from jetpy.spark.wire import ApiReplyError, Reply, Wire, WireError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["BulkChunk", "crc32", "read_bulk", "to_batch"]

try:  # ISA-L's CRC-32 is the same function, 3-4 times faster on small records
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - isal comes with jetpy[spark]; zlib is always there
    _crc32 = zlib.crc32

crc32: Callable[..., int] = _crc32

_RECORD_WORD = 0x000001E5
"""A message record's first four bytes as a little-endian u32: magic 0xE5, version 1, flags 0,
reserved 0."""


@dataclass(frozen=True, slots=True)
class BulkChunk:
    """One data message of a reply: its header, its payload (a view of the receive buffer), and
    the window of sequences its request asked for (records are checked against it)."""

    header: ChunkHeader
    payload: memoryview
    lo: int
    hi: int


PIPELINE_DEPTH: Final = 2
"""Requests in flight: the server makes the next window's messages while the task decodes, so
neither waits for the other (on a busy machine, for the other to be scheduled)."""


def read_bulk(
    w: Wire, stream: str, first: int, last: int, filters: tuple[str, ...], max_bytes: int, window: int = 0
) -> Iterator[BulkChunk]:
    """Every data message of the bulk read of ``first..last`` until the range (or the stream)
    is done. With ``window`` (sequences expected to hold about ``max_bytes``), the range is asked
    for window by window, ``PIPELINE_DEPTH`` requests at a time; the server serves requests in
    turns, so messages of two windows may interleave (each is in order within its window). A
    window cut short by ``max_bytes`` is asked again from where its reply stopped."""
    subject = f"{w.conn.api_prefix}.{BULK_API}.{stream}"
    size = window if window > 0 else last - first + 1
    pending: dict[bytes, tuple[int, int]] = {}  # reply subject -> (its window's first, last)

    def ask(lo: int, hi: int) -> None:
        body: dict[str, Any] = {"seq": lo, "up_to_seq": hi, "max_bytes": max_bytes}
        if filters:
            body["filter_subjects"] = list(filters)
        pending[w.send_request(subject, json.dumps(body).encode())] = (lo, hi)

    nxt = first
    ended = False  # the stream ends before the range does: ask for no more windows
    while True:
        while not ended and nxt <= last and len(pending) < PIPELINE_DEPTH:
            hi = min(nxt + size - 1, last)
            ask(nxt, hi)
            nxt = hi + 1
        if not pending:
            return
        subj, _, hlen, view = w.next_frame()
        span = pending.get(subj)
        if span is None:
            continue  # a late reply to an earlier request
        if hlen:
            r = Reply(bytes(view[:hlen]), b"")
            if r.status == 503:
                raise WireError("no responders to the bulk read (JetStream is not enabled on the server)")
            raise WireError(f"unexpected reply to the bulk read: {bytes(view[:hlen])[:80]!r}")
        if view[0:1].tobytes() == b"{":
            err = json.loads(bytes(view)).get("error") or {}
            raise ApiReplyError(int(err.get("err_code") or 0), str(err.get("description", "")))
        try:
            h = decode_header(view)
        except BulkFormatError as e:
            raise WireError(f"stream {stream!r}: {e}") from None
        yield BulkChunk(h, view, span[0], span[1])
        if not h.last:
            continue
        del pending[subj]
        if h.next_seq > h.last_seq:
            ended = ended or h.next_seq <= last  # nothing at or past next_seq yet
        elif span[0] < h.next_seq <= span[1]:
            ask(h.next_seq, span[1])  # cut short by max_bytes: the rest of the window


# ----------------------------------------------------------------------------- decoding


def _views(area: memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrays whose element ``i`` is the little-endian u16/u32/u64/i64 starting at byte ``i``
    of ``area`` (overlapping, unaligned views: one gather reads a field of every record)."""
    import numpy as np

    size = len(area)
    return (
        np.ndarray((size - 1,), "<u2", area, 0, (1,)),
        np.ndarray((size - 3,), "<u4", area, 0, (1,)),
        np.ndarray((size - 7,), "<u8", area, 0, (1,)),
        np.ndarray((size - 7,), "<i8", area, 0, (1,)),
    )


def _binary_views(v32: np.ndarray, start: np.ndarray, length: np.ndarray, size: int) -> np.ndarray:
    """Arrow binary-view structs (16 bytes each) for values at ``start`` of ``length`` bytes in
    the area: up to 12 bytes inline (zero padded), longer ones as a 4-byte prefix and offset."""
    import numpy as np

    n = len(start)
    views = np.empty((n, 4), dtype=np.uint32)
    views[:, 0] = length
    inline = length <= 12
    if not inline.any():
        views[:, 1] = v32[start]
        views[:, 2] = 0  # buffer index: the one data buffer
        views[:, 3] = start
        return views
    words = []
    for k in range(3):  # the inline bytes, each word masked to the value's length
        valid = np.clip(length - 4 * k, 0, 4)
        word = v32[np.minimum(start + 4 * k, size - 4)]
        mask = np.where(valid >= 4, 0xFFFFFFFF, (np.left_shift(1, 8 * valid) - 1)).astype(np.uint32)
        words.append(word & mask)
    views[:, 1] = words[0]  # also the prefix of a long value (its first 4 bytes)
    views[:, 2] = np.where(inline, words[1], 0)
    views[:, 3] = np.where(inline, words[2], start)
    return views


def _fail(stream: str, what: str, seqs: np.ndarray, bad: np.ndarray) -> BulkFormatError:
    k = int(bad.argmax()) if bad.any() else 0
    where = f"sequence {int(seqs[k - 1])}" if k else "the start of the message"
    return BulkFormatError(
        f"stream {stream!r}: the record after {where} {what}: the data is damaged (on the server's "
        "disk or on the way); nothing of this range is returned"
    )


def to_batch(
    chunk: BulkChunk,
    stream: str,
    lo: int,
    hi: int,
    after: int,
    schema: pa.Schema,
    with_headers: bool,
    keep: Callable[[str], bool] | None,
) -> tuple[pa.RecordBatch, int, int]:
    """The chunk's records as rows of ``schema`` (columns of the source's schema, only those
    made), with the first and last sequence, every record checked whatever the columns: well
    formed, its CRC, sequences ascending after ``after`` within ``lo..hi``, subjects accepted by
    ``keep``."""
    import numpy as np
    import pyarrow as pa

    h, payload = chunk.header, chunk.payload
    n = h.count
    start = h.area_start
    area = payload[start:]
    size = len(area)
    pos = np.frombuffer(payload, "<u4", n, CHUNK_HEADER.size).astype(np.int64) - h.base
    if size < RECORD_OVERHEAD or pos.min() < 0 or pos.max() > size - RECORD_OVERHEAD:
        raise BulkFormatError(f"stream {stream!r}: a bulk reply's offsets point outside its records")
    v16, v32, v64, vi64 = _views(area)
    seq = v64[pos + 8].astype(np.int64)
    ok = v32[pos] == _RECORD_WORD
    if not ok.all():
        raise _fail(stream, "is not a message record", seq, ~ok)
    rec_len = v32[pos + 4].astype(np.int64)
    sl = v16[pos + 24].astype(np.int64)
    hl = v32[pos + 26].astype(np.int64)
    end = pos + rec_len
    ok = (rec_len >= RECORD_OVERHEAD + sl + hl) & (end <= size)
    if not ok.all():
        raise _fail(stream, "has a damaged length", seq, ~ok)
    bad = _bad_crcs(area, pos, end)
    if bad is not None:
        raise _fail(stream, "fails its checksum", seq, bad)
    ok = np.empty(n, dtype=bool)
    ok[0] = seq[0] > after and seq[0] >= lo
    np.greater(seq[1:], seq[:-1], out=ok[1:])
    ok &= seq <= hi
    if not ok.all():
        raise _fail(stream, f"is out of order or outside the range {lo}..{hi} read", seq, ~ok)
    buf = pa.py_buffer(area)
    sstart = pos + 30
    names = schema.names
    subject = None
    if keep is not None or "subject" in names:  # filtered: checked whether asked for or not
        subject = _gathered_column(area, sstart, sl, pa.string())
    if keep is not None and subject is not None:
        for s in subject.unique().to_pylist():
            if not keep(s):
                raise BulkFormatError(
                    f"stream {stream!r}: the server sent a message on {s!r}, which the filter does not match"
                )

    def column(name: str, t: pa.DataType) -> pa.Array:
        if name == "stream":
            return _constant(stream, n)
        if name == "subject":
            return subject
        if name == "seq":
            return pa.array(seq, t)
        if name == "ts":
            return pa.array(vi64[pos + 16] // 1000, t)
        if name == "data":
            return _view_column(v32, sstart + sl + hl, rec_len - RECORD_OVERHEAD - sl - hl, size, buf, t)
        if with_headers:
            return pa.array(_headers(area, sstart + sl, hl), t)
        return pa.nulls(n, t)

    batch = pa.RecordBatch.from_arrays([column(f.name, f.type) for f in schema], schema=schema)
    return batch, int(seq[0]), int(seq[-1])


RUN_CHECK_RECORDS: Final = 8
"""Runs of adjacent records are checked as runs when they average more records than this."""


def _bad_crcs(area: memoryview, pos: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """None if every record's CRC-32 (over the record and its stored CRC) is the residue of a
    whole record, else which records fail. Runs of adjacent records (usually the whole message)
    are checked two CRC calls a run (:data:`CRC_RUN_MARK`); a run that fails, or a message of
    many short runs, is checked a record at a time, which also names the damaged ones."""
    import numpy as np

    n = len(pos)
    breaks = np.flatnonzero(pos[1:] != end[:-1]) + 1
    if len(breaks) * RUN_CHECK_RECORDS < n and _runs_whole(area, pos, end, breaks):
        return None
    crcs = list(map(crc32, map(area.__getitem__, map(slice, pos.tolist(), end.tolist()))))
    if crcs.count(CRC_RESIDUE) == len(crcs):
        return None
    bad: np.ndarray = np.array(crcs, dtype=np.uint32) != CRC_RESIDUE
    return bad


def _runs_whole(data: memoryview, pos: np.ndarray, end: np.ndarray, breaks: np.ndarray) -> bool:
    """Whether each run of adjacent records (split at ``breaks``) has the CRC-32 that whole
    records would give it: :data:`CRC_RUN_MARK` in the last four bytes of each record's place in
    a zero buffer, whose raw CRC is the run's expected one."""
    import numpy as np

    marks = np.zeros(len(data), dtype=np.uint8)
    np.ndarray((len(data) - 3,), "<u4", marks.data, 0, (1,))[end - 4] = CRC_RUN_MARK
    expected = memoryview(marks.data)
    firsts = [0, *breaks.tolist()]
    lasts = [*(breaks - 1).tolist(), len(pos) - 1]
    for a, b in zip(firsts, lasts, strict=True):
        lo, hi = int(pos[a]), int(end[b])
        if crc32(data[lo:hi]) != crc32(expected[lo:hi], 0xFFFFFFFF) ^ 0xFFFFFFFF:
            return False
    return True


def _view_column(
    v32: np.ndarray, start: np.ndarray, length: np.ndarray, size: int, buf: pa.Buffer, t: pa.DataType
) -> pa.Array:
    """A string/binary column of the values at ``start`` of ``length`` bytes in the area: binary
    views into it, then one copy into ``t``'s form."""
    import pyarrow as pa

    views = pa.py_buffer(_binary_views(v32, start, length, size))
    return pa.Array.from_buffers(pa.binary_view(), len(start), [None, views, buf]).cast(t)


def _gathered_column(area: memoryview, start: np.ndarray, length: np.ndarray, t: pa.DataType) -> pa.Array:
    """A string/binary column of short values (subjects) at ``start`` of ``length`` bytes in the
    area, gathered byte by byte into one buffer: for values of a few bytes, fewer steps than
    binary views and a cast. A string column that is not all ASCII is checked to be UTF-8, as a
    cast would."""
    import numpy as np
    import pyarrow as pa

    n = len(start)
    offsets = np.empty(n + 1, dtype=np.int32)
    offsets[0] = 0
    np.cumsum(length, out=offsets[1:])
    total = int(offsets[-1])
    index = np.repeat(start - offsets[:-1], length)
    index += np.arange(total)
    values = np.frombuffer(area, np.uint8)[index]
    col = pa.Array.from_buffers(t, n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])
    if t == pa.string() and total and int(values.max()) >= 0x80:
        col.validate(full=True)
    return col


def _headers(area: memoryview, start: np.ndarray, hl: np.ndarray) -> list[list[tuple[str, list[str]]] | None]:
    """The ``headers`` column: each record's header block parsed (None where it has none)."""
    out: list[list[tuple[str, list[str]]] | None] = [None] * len(start)
    for k in hl.nonzero()[0].tolist():
        a = int(start[k])
        items: dict[str, list[str]] = {}
        for key, value in parse_headers(bytes(area[a : a + int(hl[k])])).items:
            items.setdefault(key, []).append(value)
        out[k] = list(items.items())
    return out


def _constant(value: str, n: int) -> pa.Array:
    """A string column of ``n`` copies of ``value``, built from its buffers."""
    import numpy as np
    import pyarrow as pa

    enc = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(enc)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(enc * n)])
