"""Reading a JetStream stream into Spark: batch reads and micro-batch streaming reads.

Owns: resolving start/end options to stream sequences, splitting a sequence range into
partitions, reading one partition into Arrow record batches (through :mod:`jetpy.spark.wire`),
data-loss detection, and the streaming offsets ``{"<stream>": <next sequence>}``.
Must not know: the server's internals; it talks to a running server over the wire.

Offsets are stream sequences, exclusive at the end: a micro-batch ``{"S": 101} -> {"S": 201}``
reads sequences 101..200. A replay after a restart plans exactly the same range, so with an
idempotent sink every message is written once. Messages deleted inside a range are gaps, not
loss; messages removed from the head of the stream before they were read are data loss
(``failOnDataLoss``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jetpy.spark.options import EARLIEST, LATEST, ConnOptions, OffsetSpec, SourceOptions
from jetpy.spark.wire import BatchColumns, Wire, WireError
from jetpy.subjects import subject_matches

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "SCHEMA",
    "SCHEMA_STRUCT",
    "JetStreamBatchReader",
    "JetStreamDataLossError",
    "JetStreamStreamReader",
    "SeqRange",
    "read_range",
]

log = logging.getLogger("jetpy.spark")

SCHEMA = (
    "stream STRING, subject STRING, seq BIGINT, ts TIMESTAMP, data BINARY, headers MAP<STRING, ARRAY<STRING>>"
)
"""What a read returns; ``headers`` is null unless ``includeHeaders=true`` (as Kafka's)."""

SCHEMA_STRUCT = StructType(
    [
        StructField("stream", StringType()),
        StructField("subject", StringType()),
        StructField("seq", LongType()),
        StructField("ts", TimestampType()),
        StructField("data", BinaryType()),
        StructField("headers", MapType(StringType(), ArrayType(StringType()))),
    ]
)
""":data:`SCHEMA` built without a Spark session (workers have none to parse DDL with)."""


class JetStreamDataLossError(RuntimeError):
    """Messages the query should have read were removed from the stream (retention, purge)."""


@dataclass(frozen=True, slots=True)
class SeqRange:
    """One partition: sequences ``first..last`` (inclusive) of ``stream``. Picklable."""

    stream: str
    first: int
    last: int
    filters: tuple[str, ...]
    conn: ConnOptions
    include_headers: bool
    fetch_batch: int
    fetch_max_bytes: int
    fail_on_data_loss: bool


class JetStreamPartition(InputPartition):
    def __init__(self, r: SeqRange) -> None:
        super().__init__(r)
        self.range = r


# ----------------------------------------------------------------------------- planning


def _state(w: Wire, stream: str) -> tuple[int, int]:
    """``(first_seq, last_seq)`` of a stream that allows direct get."""
    try:
        info = w.stream_info(stream)
    except WireError as e:
        raise WireError(f"stream {stream!r}: {e}") from None
    if not info.get("config", {}).get("allow_direct", False):
        raise WireError(
            f"stream {stream!r} does not allow direct get, which the jetstream source reads with: "
            f"enable it (allow_direct=true, e.g. `nats stream edit {stream} --allow-direct`)"
        )
    st = info.get("state", {})
    return int(st.get("first_seq", 0)), int(st.get("last_seq", 0))


def _rfc3339(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def seq_at_time(w: Wire, stream: str, ns: int, last_seq: int) -> int:
    """The first sequence stored at or after ``ns`` (``last_seq + 1`` if none)."""
    out = BatchColumns()
    status, _, _ = w.direct_batch(stream, {"start_time": _rfc3339(ns), "batch": 1, "next_by_subj": ">"}, out)
    if status == 204 and out.seqs:
        return out.seqs[0]
    return last_seq + 1


def resolve(w: Wire, stream: str, spec: OffsetSpec, first: int, last: int, default: int) -> int:
    """An offset option for one stream -> a sequence (the next to read / one past the end)."""
    earliest = max(first, 1)
    if spec.kind == "earliest":
        return earliest
    if spec.kind == "latest":
        return last + 1
    if spec.kind == "time":
        return seq_at_time(w, stream, spec.time_ns, last)
    v = spec.seqs.get(stream, default)
    if v == EARLIEST:
        return earliest
    if v == LATEST:
        return last + 1
    return v


def split(r: SeqRange, min_partitions: int, max_per_partition: int) -> list[SeqRange]:
    """``r`` cut into ``max(minPartitions, ceil(n / maxMessagesPerPartition))`` equal ranges."""
    n = r.last - r.first + 1
    if n <= 0:
        return []
    parts = max(min_partitions, math.ceil(n / max_per_partition))
    parts = min(parts, n)
    size = math.ceil(n / parts)
    out = []
    lo = r.first
    while lo <= r.last:
        hi = min(lo + size - 1, r.last)
        out.append(_replace(r, lo, hi))
        lo = hi + 1
    return out


def _replace(r: SeqRange, first: int, last: int) -> SeqRange:
    return SeqRange(
        r.stream,
        first,
        last,
        r.filters,
        r.conn,
        r.include_headers,
        r.fetch_batch,
        r.fetch_max_bytes,
        r.fail_on_data_loss,
    )


def _range(o: SourceOptions, stream: str, first: int, last: int) -> SeqRange:
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
    )


def _data_loss(fail: bool, what: str) -> None:
    if fail:
        raise JetStreamDataLossError(
            f"{what}. Set failOnDataLoss=false to skip them (they are gone from the stream), "
            "or size the stream's retention (max_age, max_msgs, max_bytes) to the query's lag."
        )
    log.warning("jetstream source: %s; skipped (failOnDataLoss=false)", what)


# ----------------------------------------------------------------------------- reading


_ARROW: dict[str, pa.Schema] = {}


def arrow_schema() -> pa.Schema:
    """The exact Arrow schema Spark expects for :data:`SCHEMA` (checked strictly by Spark)."""
    s = _ARROW.get("s")
    if s is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        s = _ARROW["s"] = to_arrow_schema(SCHEMA_STRUCT, timezone="UTC")
    return s


def to_record_batch(cols: BatchColumns, stream: str) -> pa.RecordBatch:
    import pyarrow as pa

    schema = arrow_schema()
    n = len(cols)
    headers = (
        pa.nulls(n, schema.field("headers").type)
        if cols.headers is None
        else pa.array(cols.headers, type=schema.field("headers").type)
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([stream] * n, schema.field("stream").type),
            pa.array(cols.subjects, pa.binary()).cast(schema.field("subject").type),
            pa.array(cols.seqs, schema.field("seq").type),
            pa.array(cols.ts_us, schema.field("ts").type),
            pa.array(cols.data, schema.field("data").type),
            headers,
        ],
        schema=schema,
    )


def _keep(filters: tuple[str, ...]) -> tuple[str | None, Callable[[bytes], bool] | None]:
    """One filter goes to the server (``next_by_subj``); several are matched here."""
    if not filters:
        return None, None
    if len(filters) == 1:
        return filters[0], None

    def keep(subject: bytes) -> bool:
        s = subject.decode()
        return any(subject_matches(f, s) for f in filters)

    return None, keep


def read_range(r: SeqRange) -> Iterator[pa.RecordBatch]:
    """Every message of one partition as Arrow record batches (runs on executors)."""
    flt, keep = _keep(r.filters)
    first_seen = 0
    with Wire(r.conn) as w:
        for cols in w.read_range(
            r.stream, r.first, r.last, flt, keep, r.fetch_batch, r.fetch_max_bytes, r.include_headers
        ):
            if not first_seen:
                first_seen = cols.seqs[0]
            yield to_record_batch(cols, r.stream)
        if first_seen != r.first:
            # Was the head of the range removed before we read it? (a deleted message is a gap)
            head, _ = _state(w, r.stream)
            gone_to = min(head, first_seen or r.last + 1, r.last + 1)
            if gone_to > r.first:
                _data_loss(
                    r.fail_on_data_loss,
                    f"stream {r.stream!r}: sequences {r.first}..{gone_to - 1} were removed before they were read",
                )


class JetStreamBatchReader(DataSourceReader):
    """``spark.read.format("jetstream")``: one bounded read, split into sequence ranges."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        out: list[InputPartition] = []
        with Wire(o.conn) as w:
            for stream in o.streams:
                first, last = _state(w, stream)
                start = resolve(w, stream, o.starting, first, last, EARLIEST)
                end = resolve(w, stream, o.ending, first, last, LATEST)
                end = min(end, last + 1)
                if start < first and start < end:
                    _data_loss(
                        o.fail_on_data_loss,
                        f"stream {stream!r}: startingOffsets asks for sequence {start} but the stream starts at {first}",
                    )
                    start = first
                for r in split(_range(o, stream, start, end - 1), o.min_partitions, o.max_per_partition):
                    out.append(JetStreamPartition(r))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, JetStreamPartition):
            return iter(())  # an empty read: Spark still runs one task, with a placeholder
        return read_range(partition.range)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("jetstream")``: offsets are ``{"<stream>": <next sequence>}``."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._wire: Wire | None = None
        self._ending: dict[str, int] | None = None
        self._target: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # executors get a copy of this reader; a socket does not pickle (and is not needed there)
        return {"opts": self.opts, "_wire": None, "_ending": self._ending, "_target": self._target}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _w(self) -> Wire:
        if self._wire is None:
            self._wire = Wire(self.opts.conn)
        return self._wire

    def _call(self, fn: Callable[[Wire], Any]) -> Any:
        """Run ``fn`` on the driver's connection, reconnecting once if it broke."""
        try:
            return fn(self._w())
        except (WireError, OSError):
            if self._wire is not None:
                self._wire.close()
                self._wire = None
            return fn(self._w())

    def _heads(self) -> dict[str, tuple[int, int]]:
        return self._call(lambda w: {s: _state(w, s) for s in self.opts.streams})  # type: ignore[no-any-return]

    def initialOffset(self) -> dict[str, int]:
        o = self.opts

        def go(w: Wire) -> dict[str, int]:
            out = {}
            for s in o.streams:
                first, last = _state(w, s)
                out[s] = resolve(w, s, o.starting, first, last, EARLIEST)
            return out

        return self._call(go)  # type: ignore[no-any-return]

    def _ends(self) -> dict[str, int] | None:
        """``endingOffsets``/``endingTimestamp`` as sequences (resolved once), or None."""
        o = self.opts
        if o.ending.kind == "latest" and not o.ending.seqs:
            return None
        if self._ending is None:

            def go(w: Wire) -> dict[str, int]:
                out = {}
                for s in o.streams:
                    first, last = _state(w, s)
                    out[s] = resolve(w, s, o.ending, first, last, LATEST)
                return out

            self._ending = self._call(go)
        return self._ending

    def _start_of(self, start: dict[str, Any], stream: str, heads: dict[str, tuple[int, int]]) -> int:
        if stream in start:
            return int(start[stream])
        # a stream added to the query after its checkpoint: from the starting option
        first, last = heads[stream]
        return self._call(lambda w: resolve(w, stream, self.opts.starting, first, last, EARLIEST))  # type: ignore[no-any-return]

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        heads = self._heads()
        ends = self._ends()
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        out: dict[str, int] = {}
        for s in self.opts.streams:
            lo = self._start_of(start, s, heads)
            hi = heads[s][1] + 1
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
        return {s: last + 1 for s, (_, last) in self._heads().items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {s: last + 1 for s, (_, last) in self._heads().items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        o = self.opts
        heads: dict[str, tuple[int, int]] | None = None
        out: list[InputPartition] = []
        for s in o.streams:
            hi = int(end.get(s, 0))
            lo = int(start[s]) if s in start else None
            if lo is None:
                heads = heads or self._heads()
                lo = self._start_of(start, s, heads)
            if hi <= lo:
                continue
            heads = heads or self._heads()
            first = heads[s][0]
            if first > lo:
                gone = min(first, hi)
                _data_loss(
                    o.fail_on_data_loss,
                    f"stream {s!r}: sequences {lo}..{gone - 1} were removed before they were read",
                )
                lo = gone
            for r in split(_range(o, s, lo, hi - 1), o.min_partitions, o.max_per_partition):
                out.append(JetStreamPartition(r))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, JetStreamPartition):
            return iter(())  # an empty read: Spark still runs one task, with a placeholder
        return read_range(partition.range)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint is the source of truth, as with Kafka."""

    def stop(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None
