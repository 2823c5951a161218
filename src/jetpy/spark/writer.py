"""Writing DataFrames to JetStream (batch and streaming), with PubAcks awaited (``publish.py``).

Owns: turning rows (``subject``, ``data``, optional ``headers``, optional ``msg_id``) into
publishes, the bounded in-flight window, and the ``Nats-Msg-Id`` each message carries:

1. the ``msg_id`` column (``msgIdColumn``) when the row has one: natural keys dedup anything;
2. streaming: ``<queryId or writeId>:<batchId>:<partition>:<row>``: a replayed micro-batch (same
   offsets, so the same rows in the same partitions) or a retried task publishes the same ids;
3. batch: ``<writeId>:<partition>:<row>`` with a ``writeId`` fixed when the write is planned:
   a retried task publishes the same ids; a second run of the job is a new write.

The stream drops a message whose id it saw within its ``duplicate_window``: exactly-once holds
for replays within that window (size it to the longest recovery you expect).
Must not know: the server's internals.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, MapType, StringType, StructType

from jetpy.spark.options import JetStreamOptionError, SinkOptions
from jetpy.spark.publish import Published, publish_rows
from jetpy.spark.worker import settle_worker

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["JetStreamCommit", "JetStreamStreamWriter", "JetStreamWriter", "check_schema"]


@dataclass
class JetStreamCommit(WriterCommitMessage):
    """What one task published: new messages, duplicates the stream dropped, sequence span."""

    published: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    """The DataFrame must have ``data`` and ``subject`` (unless the ``subject`` option is set)."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "data" not in fields or not isinstance(fields["data"], (BinaryType, StringType)):
        raise JetStreamOptionError(
            "data", sorted(fields), "a DataFrame with a 'data' column of binary or string type"
        )
    if opts.subject is None and not isinstance(fields.get("subject"), StringType):
        raise JetStreamOptionError("subject", None, "a 'subject' string column, or the 'subject' option")
    h = fields.get("headers")
    if h is not None and not (isinstance(h, MapType) and isinstance(h.keyType, StringType)):
        raise JetStreamOptionError(
            "headers", str(h), "a map<string, string> or map<string, array<string>> column"
        )
    mid = fields.get(opts.msg_id_column)
    if mid is not None and not isinstance(mid, StringType):
        raise JetStreamOptionError("msgIdColumn", opts.msg_id_column, "the name of a string column")


def _commit(p: Published) -> JetStreamCommit:
    return JetStreamCommit(p.published, p.duplicates, p.first_seq, p.last_seq)


def _task() -> TaskContext:
    ctx = TaskContext.get()
    assert ctx is not None, "the jetstream writer runs inside a Spark task"
    return ctx


class JetStreamWriter(DataSourceArrowWriter):
    """``df.write.format("jetstream")``: each task publishes its rows and awaits every PubAck."""

    def __init__(self, opts: SinkOptions, write_id: str) -> None:
        self.opts = opts
        self.write_id = opts.write_id or write_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommit:  # type: ignore[override]
        settle_worker()
        prefix = f"{self.write_id}:{_task().partitionId()}"
        return _commit(publish_rows(self.opts, iterator, prefix))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to finish: every message was acked by the stream before its task returned."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Published messages cannot be taken back; a rerun is deduplicated by the stream."""


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("jetstream")``: ids derive from the query, micro-batch and row."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommit:  # type: ignore[override]
        settle_worker()
        ctx = _task()
        query = self.opts.write_id or ctx.getLocalProperty("sql.streaming.queryId") or "query"
        batch_id = ctx.getLocalProperty("streaming.sql.batchId") or "0"
        prefix = f"{query}:{batch_id}:{ctx.partitionId()}"
        return _commit(publish_rows(self.opts, iterator, prefix))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to finish (see :meth:`JetStreamWriter.commit`)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A replay of this micro-batch publishes the same ids, which the stream drops."""
