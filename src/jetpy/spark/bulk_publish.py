"""The sink's fast path on jetpy: rows to bulk publish requests (``$JS.API.JETPY.PUBLISH``), built
from Arrow columns.

Owns: finding the stream that takes each subject (the ``stream`` option, else the server's
stream list, read once per task), building every row's message (a header block with the row's
own headers if any and its ``Nats-Msg-Id``, then ``data``) and the requests' bodies column by
column with Arrow and numpy (no Python loop per row, except over a ``headers`` map column), up to
``maxInFlight`` records awaiting their reply, and reading the replies: stored and duplicate
records counted, a refused record failing the task naming its row, a request the server is too
busy to queue (10167) sent again after a pause. The format is
``jetpy.protocol.bulk_publish``'s; the server stores each record as it would a single publish of
it, and replies once every record it stored is on disk.
Must not know: Spark, the message ids' scheme (the writer passes the ids' prefix in).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from jetpy.patterns import PatternSet
from jetpy.protocol.bulk_publish import HEADER, MAGIC, PUBLISH_API, VERSION
from jetpy.spark.options import SinkOptions
from jetpy.spark.wire import Reply, Wire, WireError
from jetpy.subjects import is_valid_subject

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["BUSY_TRIES", "REQUEST_BYTES", "BulkCounts", "StreamRouter", "publish_bulk", "stream_router"]

log = logging.getLogger("jetpy.spark")

REQUEST_BYTES: Final = 512 * 1024
"""A request's size, at most (and at most half the server's ``max_payload``): a few
milliseconds of the server's time, so that several are in flight and one group commit (one
fsync) covers them."""
_RECORD_FIELDS: Final = 12
"""A record's share of a request besides its bytes: its three u32 offsets and lengths."""

_MSG_ID: Final = b"Nats-Msg-Id: "
_BUSY: Final = 10167
BUSY_TRIES: Final = 20
"""How often a request the server refuses as too many (10167) is sent again, backing off from
50 ms to 1.6 s: about 25 s in all."""


@dataclass(slots=True)
class BulkCounts:
    """What the replies said: new messages, duplicates the stream dropped, sequence span."""

    published: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0


@dataclass(slots=True)
class _Pending:
    stream: str
    rows: Any  # numpy int64: the task's row number of each record of the request
    subject: str
    body: bytes  # kept to be sent again if the server is busy (10167)
    tries: int = 0


def _stream_index(w: Wire) -> PatternSet[str]:
    """Every stream's captured subjects (those a publish is routed to it by), from STREAM.LIST."""
    index: PatternSet[str] = PatternSet()
    offset = 0
    while True:
        page = w.api("STREAM.LIST", {"offset": offset})
        streams = page.get("streams") or []
        for s in streams:
            cfg = s.get("config") or {}
            name = str(cfg.get("name", ""))
            subjects = cfg.get("subjects") or (
                [name] if not cfg.get("mirror") and not cfg.get("sources") else []
            )
            for subj in subjects:
                index.add(subj, name)
        offset += len(streams)
        if not streams or offset >= int(page.get("total") or 0):
            return index


class StreamRouter:
    """Which stream takes a subject: the ``stream`` option, else the server's stream list."""

    def __init__(self, fixed: str | None, index: PatternSet[str] | None) -> None:
        self.fixed = fixed
        self._index = index
        self._of: dict[bytes, str | None] = {}

    def of(self, subject: bytes) -> str | None:
        if subject not in self._of:
            owners = sorted(set(self._index.covering(subject.decode()))) if self._index is not None else []
            self._of[subject] = owners[0] if owners else None
        return self._of[subject]


def stream_router(w: Wire, stream: str | None) -> StreamRouter | None:
    """How this task finds its rows' streams; None if the server will not list its streams to
    this user (its permissions): the task publishes row by row then, the server routing them."""
    if stream is not None:
        return StreamRouter(stream, None)
    try:
        return StreamRouter(None, _stream_index(w))
    except WireError as e:
        log.warning("jetstream sink: cannot list the streams (%s): publishing one message per row", e)
        return None


def publish_bulk(
    w: Wire,
    opts: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    prefix: str,
    user_headers: Callable[[Any, int], bytes],
    streams: StreamRouter,
) -> BulkCounts:
    """Publish every row of ``batches`` (ids ``<prefix>:<row>`` where a row has no ``msg_id``)
    through bulk publish requests, and read every reply. ``user_headers(value, row)`` turns a
    ``headers`` map cell into header lines."""
    import numpy as np

    res = BulkCounts()
    limit = min(REQUEST_BYTES, int(w.info.get("max_payload") or REQUEST_BYTES) // 2)
    api = f"{opts.conn.api_prefix}.{PUBLISH_API}."
    w.set_timeout(opts.publish_timeout_ms / 1000)
    pending: dict[bytes, _Pending] = {}
    checked: set[bytes] = set()
    in_flight = 0
    row0 = 0
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        rows = np.arange(row0, row0 + n, dtype=np.int64)
        subjects = _subjects(batch, opts, n, row0, checked)
        messages, hdr_lens = _messages(batch, opts, prefix, rows, user_headers)
        for stream, take in _by_stream(subjects, streams, row0):
            s, m, h, at = subjects, messages, hdr_lens, rows
            if take is not None:
                s, m, h, at = s.take(take), m.take(take), h[take], at[take]
            for a, b in _cuts(s, m, limit, opts.max_in_flight, at, w):
                body = _body(s.slice(a, b - a), h[a:b], m.slice(a, b - a))
                pending[w.send_request(api + stream, body)] = _Pending(stream, at[a:b], api + stream, body)
                in_flight += b - a
                while in_flight > opts.max_in_flight:
                    in_flight -= _reply(w, pending, res)
        row0 += n
    while pending:
        _reply(w, pending, res)
    return res


def _subjects(batch: pa.RecordBatch, opts: SinkOptions, n: int, row0: int, checked: set[bytes]) -> pa.Array:
    """The rows' subjects as one binary column, each distinct one checked once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if opts.subject is not None:
        return pa.repeat(pa.scalar(opts.subject.encode(), pa.binary()), n)
    col = batch.column(batch.schema.get_field_index("subject")).cast(pa.binary())
    if col.null_count:
        raise ValueError(f"row {row0 + _first(pc.is_null(col))}: invalid subject None")
    for subj in pc.unique(col).to_pylist():
        if subj in checked:
            continue
        if not is_valid_subject(subj.decode(errors="replace"), allow_wildcards=False):
            row = row0 + _first(pc.equal(col, pa.scalar(subj, pa.binary())))
            raise ValueError(f"row {row}: invalid subject {subj.decode(errors='replace')!r}")
        checked.add(subj)
    return col


def _first(mask: pa.Array) -> int:
    import numpy as np

    return int(np.argmax(mask.to_numpy(zero_copy_only=False)))


def _messages(
    batch: pa.RecordBatch,
    opts: SinkOptions,
    prefix: str,
    rows: np.ndarray[Any, Any],
    user_headers: Callable[[Any, int], bytes],
) -> tuple[pa.Array, np.ndarray[Any, Any]]:
    """Every row's message (header block, then ``data``) and the length of its header block."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(rows)
    derived = pc.binary_join_element_wise(
        pa.scalar(f"{prefix}:".encode(), pa.binary()), pa.array(rows).cast(pa.string()).cast(pa.binary()), b""
    )
    i = batch.schema.get_field_index(opts.msg_id_column)
    if i >= 0:
        given = batch.column(i).cast(pa.binary())
        missing = pc.or_kleene(pc.is_null(given), pc.equal(pc.binary_length(given), 0))
        ids = pc.if_else(missing, derived, given)
        bad = pc.or_(pc.match_substring(ids, "\r"), pc.match_substring(ids, "\n"))
        if pc.any(bad).as_py():
            raise ValueError(f"row {int(rows[_first(bad)])}: a msg_id is one line")
    else:
        ids = derived
    h = batch.schema.get_field_index("headers")
    if h >= 0 and batch.column(h).null_count < n:
        cells = batch.column(h).to_pylist()
        user = pa.array([user_headers(c, int(r)) for c, r in zip(cells, rows, strict=True)], pa.binary())
        hdrs = pc.binary_join_element_wise(b"NATS/1.0\r\n", user, _MSG_ID, ids, b"\r\n\r\n", b"")
    else:
        hdrs = pc.binary_join_element_wise(b"NATS/1.0\r\n" + _MSG_ID, ids, b"\r\n\r\n", b"")
    d = batch.schema.get_field_index("data")
    data = pc.fill_null(batch.column(d).cast(pa.binary()), pa.scalar(b"", pa.binary()))
    messages = pc.binary_join_element_wise(hdrs, data, b"")
    return messages, pc.binary_length(hdrs).to_numpy().astype(np.uint32)


def _by_stream(
    subjects: pa.Array, streams: StreamRouter, row0: int
) -> Iterator[tuple[str, np.ndarray[Any, Any] | None]]:
    """(stream, the rows it takes: None for all) for each stream the rows' subjects go to."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if streams.fixed is not None:
        yield streams.fixed, None
        return
    enc = pc.dictionary_encode(subjects)
    names: list[str] = []
    codes = []
    for k, subj in enumerate(enc.dictionary.to_pylist()):
        owner = streams.of(subj)
        if owner is None:
            row = row0 + _first(pc.equal(enc.indices, pa.scalar(k, enc.indices.type)))
            raise WireError(
                f"row {row}: no stream listens on its subject (option 'subject' or the 'subject' "
                f"column): {subj.decode(errors='replace')!r}"
            )
        if owner not in names:
            names.append(owner)
        codes.append(names.index(owner))
    if len(names) == 1:
        yield names[0], None
        return
    of_row = np.asarray(codes, dtype=np.int64)[enc.indices.to_numpy(zero_copy_only=False)]
    for k, name in enumerate(names):
        yield name, np.nonzero(of_row == k)[0]


def _cuts(
    subjects: pa.Array, messages: pa.Array, limit: int, most: int, rows: np.ndarray[Any, Any], w: Wire
) -> Iterator[tuple[int, int]]:
    """Runs of at most ``most`` records ``[a, b)`` whose requests stay within ``limit`` bytes (a
    record larger than that alone in its request, if the server's ``max_payload`` takes it)."""
    import numpy as np
    import pyarrow.compute as pc

    sizes = (
        pc.binary_length(subjects).to_numpy().astype(np.int64)
        + pc.binary_length(messages).to_numpy().astype(np.int64)
        + _RECORD_FIELDS
    )
    ends = np.cumsum(sizes)
    budget = limit - HEADER.size - 4 * 2
    n = len(sizes)
    a, base = 0, 0
    max_payload = int(w.info.get("max_payload") or 1 << 20)
    while a < n:
        b = min(int(np.searchsorted(ends, base + budget, side="right")), a + most)
        if b == a:
            b = a + 1
            if int(sizes[a]) + HEADER.size + 8 > max_payload:
                raise WireError(
                    f"row {int(rows[a])}: {int(sizes[a])} bytes, more than the server's max_payload ({max_payload})"
                )
        yield a, b
        base = int(ends[b - 1])
        a = b


def _column(arr: pa.Array) -> tuple[bytes, Any]:
    """A binary column's offsets (from 0, little-endian u32) and its bytes."""
    import numpy as np

    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    lo, hi = int(offs[0]), int(offs[-1])
    data = memoryview(bufs[2])[lo:hi] if bufs[2] is not None else b""
    return (offs - lo).astype("<u4").tobytes(), data


def _body(subjects: pa.Array, hdr_lens: np.ndarray[Any, Any], messages: pa.Array) -> bytes:
    so, sdata = _column(subjects)
    mo, mdata = _column(messages)
    head = HEADER.pack(MAGIC, VERSION, 0, 0, len(subjects), 0)
    return b"".join([head, so, hdr_lens.astype("<u4").tobytes(), mo, sdata, mdata])


def _reply(w: Wire, pending: dict[bytes, _Pending], res: BulkCounts) -> int:
    """Read the next reply to a request in flight; returns how many records it answered."""
    while True:
        subj, _, hlen, view = w.next_frame()
        p = pending.pop(subj, None)
        if p is not None:
            break
    rows = p.rows
    what = f"rows {int(rows[0])}..{int(rows[-1])} (stream {p.stream!r})"
    if hlen:
        status = Reply(bytes(view[:hlen]), b"").status
        raise WireError(f"{what}: the server did not take the bulk publish (status {status})")
    obj = json.loads(bytes(view))
    err = obj.get("error") if isinstance(obj, dict) else {"description": "not a bulk publish reply"}
    if err and err.get("err_code") == _BUSY and p.tries < BUSY_TRIES:
        time.sleep(0.05 * 2 ** min(p.tries, 5))  # the server has many requests waiting: again later
        p.tries += 1
        pending[w.send_request(p.subject, p.body)] = p
        return 0
    if err:
        raise WireError(f"{what}: refused: {err.get('description')} ({err.get('err_code')})")
    for e in obj.get("errors") or []:
        err = e.get("error") or {}
        raise WireError(
            f"row {int(rows[e['index']])}: the stream refused it: {err.get('description')} ({err.get('err_code')})"
        )
    answered = 0
    for r in obj.get("stored") or []:
        res.published += r["count"]
        answered += r["count"]
        if not res.first_seq or r["seq"] < res.first_seq:
            res.first_seq = r["seq"]
        res.last_seq = max(res.last_seq, r["seq"] + r["count"] - 1)
    for r in obj.get("duplicates") or []:
        res.duplicates += r["count"]
        answered += r["count"]
    if answered != len(rows):
        raise WireError(f"{what}: the reply accounts for {answered} of {len(rows)} records")
    return answered
