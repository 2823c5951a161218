"""Reading a JetStream stream into Spark: batch reads and micro-batch streaming reads.

Owns: resolving start/end options to stream sequences, planning partitions from a range's
sequences and stored bytes, the read path each partition takes (chosen once per stream while
planning, ``spark/paths.py``), the head-of-stream data-loss check of a micro-batch, and the
streaming offsets ``{"<stream>": <next sequence>}``.
Must not know: the server's internals; it talks to a running server over the wire.

Offsets are stream sequences, exclusive at the end: a micro-batch ``{"S": 101} -> {"S": 201}``
reads sequences 101..200. A replay after a restart plans exactly the same range, so with an
idempotent sink every message is written once. Messages deleted inside a range are gaps, not
loss; messages removed from the head of the stream before they were read are data loss
(``failOnDataLoss``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from jetpy.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from jetpy.spark.paths import (
    JetStreamDataLossError,
    JetStreamReadError,
    SeqRange,
    StreamHead,
    choose_path,
    connect,
    data_loss,
    read_partition,
    stream_head,
)
from jetpy.spark.schema import SCHEMA, SCHEMA_STRUCT
from jetpy.spark.wire import ApiReplyError, Wire, WireError
from jetpy.spark.worker import settle_worker

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "SCHEMA",
    "SCHEMA_STRUCT",
    "JetStreamBatchReader",
    "JetStreamDataLossError",
    "JetStreamReadError",
    "JetStreamStreamReader",
    "SeqRange",
    "plan",
]


NO_MESSAGE: Final = 10037
"""STREAM.MSG.GET's "no message found"."""
SPREAD_BYTES: Final = 4 * 1024 * 1024
"""A range is spread over the planning machine's cores when each gets at least this much."""


class JetStreamPartition(InputPartition):
    def __init__(self, r: SeqRange) -> None:
        super().__init__(r)
        self.range = r


# ----------------------------------------------------------------------------- planning


def _ns(text: str) -> int:
    """An RFC 3339 time (as STREAM.MSG.GET answers) -> nanoseconds since the epoch."""
    main, _, frac = text.rstrip("Z").partition(".")
    digits = "".join(c for c in frac if c.isdigit())
    zone = frac[len(digits) :] or ("Z" if text.endswith("Z") else "")
    dt = datetime.fromisoformat(main + (zone.replace("Z", "+00:00") or "+00:00"))
    return int(dt.timestamp()) * 1_000_000_000 + int((digits + "000000000")[:9])


def _rfc3339(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _next_msg(w: Wire, stream: str, seq: int) -> tuple[int, int] | None:
    """``(seq, time ns)`` of the first message at or after ``seq`` (STREAM.MSG.GET, any server)."""
    try:
        msg = w.api(f"STREAM.MSG.GET.{stream}", {"seq": max(seq, 1), "next_by_subj": ">"}).get("message", {})
    except ApiReplyError as e:
        if e.err_code == NO_MESSAGE:
            return None
        raise
    return int(msg["seq"]), _ns(str(msg["time"]))


def seq_at_time(w: Wire, stream: str, ns: int, first: int, last: int) -> int:
    """The first sequence stored at or after ``ns`` (``last + 1`` if none): one get by time on
    servers that have it (jetpy, nats-server 2.11+), else a binary search over message gets."""
    if w.is_jetpy or w.server_version >= (2, 11, 0):
        try:
            msg = w.api(f"STREAM.MSG.GET.{stream}", {"start_time": _rfc3339(ns)}).get("message", {})
            return int(msg["seq"])
        except ApiReplyError as e:
            if e.err_code == NO_MESSAGE:
                return last + 1
            raise
    lo, hi = max(first, 1), last + 1
    while lo < hi:
        mid = (lo + hi) // 2
        m = _next_msg(w, stream, mid)
        if m is None or m[1] >= ns:
            hi = mid
        else:
            lo = m[0] + 1
    m = _next_msg(w, stream, lo) if lo <= last else None
    return m[0] if m is not None and m[1] >= ns else last + 1


def resolve(w: Wire, stream: str, spec: OffsetSpec, head: StreamHead, default: int) -> int:
    """An offset option for one stream -> a sequence (the next to read / one past the end)."""
    earliest = max(head.first, 1)
    if spec.kind == "earliest":
        return earliest
    if spec.kind == "latest":
        return head.last + 1
    if spec.kind == "time":
        return seq_at_time(w, stream, spec.time_ns, head.first, head.last)
    v = spec.seqs.get(stream, default)
    if v == EARLIEST:
        return earliest
    if v == LATEST:
        return head.last + 1
    return v


def plan(o: SourceOptions, head: StreamHead, r: SeqRange, cores: int | None = None) -> list[SeqRange]:
    """``r`` cut into equal sequence ranges, by the range's stored bytes (the stream's average
    message size times its sequences) and sequences:

    * none holds more than ``maxBytesPerPartition`` bytes or ``maxMessagesPerPartition``
      sequences (a large stream spreads over every core of a cluster);
    * a range of more than ``SPREAD_BYTES`` per core of the machine planning the read is spread
      over at least that many cores (a local session uses them all), and a count past it is
      rounded up to a multiple of them, so the last wave of tasks is not a lone one;
    * at least ``minPartitions``.

    Spark pays tens of milliseconds per task, so partitions are no smaller than that needs."""
    n = r.last - r.first + 1
    if n <= 0:
        return []
    cores = max(cores or os.cpu_count() or 1, 1)
    size = n * (head.bytes / head.msgs if head.msgs else 0.0)
    parts = max(1, math.ceil(n / o.max_per_partition), math.ceil(size / o.max_bytes_per_partition))
    if size >= cores * SPREAD_BYTES:
        parts = math.ceil(parts / cores) * cores
    parts = min(max(parts, o.min_partitions), n)
    step = math.ceil(n / parts)
    # an unfiltered bulk read asks for windows of about fetchMaxBytes, two in flight
    window = int(o.fetch_max_bytes * 0.9 * head.msgs / head.bytes) if head.bytes and not r.filters else 0
    out = []
    lo = r.first
    while lo <= r.last:
        hi = min(lo + step - 1, r.last)
        out.append(replace(r, first=lo, last=hi, window=max(window, 0)))
        lo = hi + 1
    return out


def _range(o: SourceOptions, stream: str, first: int, last: int, path: str) -> SeqRange:
    return SeqRange(
        stream,
        first,
        last,
        o.filters,
        o.conn,
        o.include_headers,
        o.fetch_batch,
        o.fetch_max_bytes,
        o.fail_on_data_loss,
        path,
        columns=o.columns,
    )


def _head(w: Wire, o: SourceOptions, stream: str, paths: dict[str, str]) -> StreamHead:
    """The stream's head; the first time, also the path its partitions will be read through."""
    head = stream_head(w, stream)
    if stream not in paths:
        paths[stream] = choose_path(w, stream, head, o.read_mode)
    return head


class JetStreamBatchReader(DataSourceReader):
    """``spark.read.format("jetstream")``: one bounded read, split into sequence ranges."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        out: list[InputPartition] = []
        paths: dict[str, str] = {}
        w = connect(o.conn)
        try:
            for stream in o.streams:
                head = _head(w, o, stream, paths)
                start = resolve(w, stream, o.starting, head, EARLIEST)
                end = min(resolve(w, stream, o.ending, head, LATEST), head.last + 1)
                if start < head.first and start < end:
                    data_loss(
                        o.fail_on_data_loss,
                        f"stream {stream!r}: startingOffsets asks for sequence {start} but the stream "
                        f"starts at {head.first}",
                    )
                    start = head.first
                for r in plan(o, head, _range(o, stream, start, end - 1, paths[stream])):
                    out.append(JetStreamPartition(r))
        except WireError as e:
            raise JetStreamReadError(
                f"jetstream source: lost the server at {w.url} (option 'servers') while planning the read: {e}"
            ) from None
        finally:
            w.close()
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, JetStreamPartition):
            return iter(())  # an empty read: Spark still runs one task, with a placeholder
        settle_worker()
        return read_partition(partition.range)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("jetstream")``: offsets are ``{"<stream>": <next sequence>}``."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._wire: Wire | None = None
        self._ending: dict[str, int] | None = None
        self._target: dict[str, int] | None = None
        self._paths: dict[str, str] = {}
        self._last_heads: dict[str, StreamHead] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # executors get a copy of this reader; a socket does not pickle (and is not needed there)
        return {
            "opts": self.opts,
            "_wire": None,
            "_ending": self._ending,
            "_target": self._target,
            "_paths": dict(self._paths),
            "_last_heads": None,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _w(self) -> Wire:
        if self._wire is None:
            self._wire = connect(self.opts.conn)
        return self._wire

    def _call(self, fn: Callable[[Wire], Any]) -> Any:
        """Run ``fn`` on the driver's connection, reconnecting once if it broke."""
        try:
            return fn(self._w())
        except (WireError, OSError):
            if self._wire is not None:
                self._wire.close()
                self._wire = None
        w = self._w()
        try:
            return fn(w)
        except WireError as e:
            raise JetStreamReadError(
                f"jetstream source: lost the server at {w.url} (option 'servers') while planning "
                f"a micro-batch of {', '.join(map(repr, self.opts.streams))}: {e}"
            ) from None

    def _heads(self, fresh: bool = True) -> dict[str, StreamHead]:
        """The streams' heads: asked of the server, or (``fresh=False``) those ``latestOffset``
        asked for this micro-batch: Spark calls ``latestOffset``, ``reportLatestOffset`` and
        ``partitions`` one after the other for each, and one STREAM.INFO per stream serves all
        three (each task checks its own range against the stream as it reads it)."""
        o = self.opts
        if fresh or self._last_heads is None:
            self._last_heads = self._call(lambda w: {s: _head(w, o, s, self._paths) for s in o.streams})
        return self._last_heads

    def initialOffset(self) -> dict[str, int]:
        o = self.opts

        def go(w: Wire) -> dict[str, int]:
            return {s: resolve(w, s, o.starting, _head(w, o, s, self._paths), EARLIEST) for s in o.streams}

        return self._call(go)  # type: ignore[no-any-return]

    def _ends(self) -> dict[str, int] | None:
        """``endingOffsets``/``endingTimestamp`` as sequences (resolved once), or None."""
        o = self.opts
        if o.ending.kind == "latest" and not o.ending.seqs:
            return None
        if self._ending is None:

            def go(w: Wire) -> dict[str, int]:
                return {s: resolve(w, s, o.ending, _head(w, o, s, self._paths), LATEST) for s in o.streams}

            self._ending = self._call(go)
        return self._ending

    def _start_of(self, start: dict[str, Any], stream: str, heads: dict[str, StreamHead]) -> int:
        if stream in start:
            return int(start[stream])
        # a stream added to the query after its checkpoint: from the starting option
        head = heads[stream]
        return self._call(lambda w: resolve(w, stream, self.opts.starting, head, EARLIEST))  # type: ignore[no-any-return]

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        heads = self._heads()
        ends = self._ends()
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        out: dict[str, int] = {}
        for s in self.opts.streams:
            lo = self._start_of(start, s, heads)
            hi = heads[s].last + 1
            if ends is not None:
                hi = min(hi, ends[s])
            if self._target is not None:
                hi = min(hi, self._target.get(s, hi))
            hi = max(hi, lo)
            if budget is not None:
                take = min(hi - lo, budget)
                budget -= take
                hi = lo + take
            out[s] = hi
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, int]:
        """The heads of the streams: ``latestOffset - endOffset`` of a progress is the lag."""
        return {s: h.last + 1 for s, h in self._heads(fresh=False).items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {s: h.last + 1 for s, h in self._heads().items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        o = self.opts
        heads: dict[str, StreamHead] | None = None
        out: list[InputPartition] = []
        for s in o.streams:
            hi = int(end.get(s, 0))
            lo = int(start[s]) if s in start else None
            if lo is None:
                heads = heads or self._heads(fresh=False)
                lo = self._start_of(start, s, heads)
            if hi <= lo:
                continue
            heads = heads or self._heads(fresh=False)
            first = heads[s].first
            if first > lo:
                gone = min(first, hi)
                data_loss(
                    o.fail_on_data_loss,
                    f"stream {s!r}: sequences {lo}..{gone - 1} were removed before they were read",
                )
                lo = gone
            for r in plan(o, heads[s], _range(o, s, lo, hi - 1, self._paths[s])):
                out.append(JetStreamPartition(r))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, JetStreamPartition):
            return iter(())  # an empty read: Spark still runs one task, with a placeholder
        settle_worker()
        return read_partition(partition.range)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint is the source of truth, as with Kafka."""

    def stop(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None
