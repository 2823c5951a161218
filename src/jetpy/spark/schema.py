"""The rows a read returns: their Spark schema, its exact Arrow form, and rows from columns.

Owns ``stream string, subject string, seq bigint, ts timestamp, data binary, headers
map<string, array<string>>`` (``headers`` null unless ``includeHeaders``, as Kafka's), the Arrow
schema Spark checks every yielded batch against (strictly: binary not large_binary, microsecond
UTC timestamps), and turning the column lists the slower read paths gather into a batch.
Must not know: where rows come from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

from jetpy.spark.wire import BatchColumns

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SCHEMA", "SCHEMA_STRUCT", "arrow_schema", "to_record_batch"]

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

_ARROW: dict[str, pa.Schema] = {}


def arrow_schema() -> pa.Schema:
    """The exact Arrow schema Spark expects for :data:`SCHEMA` (checked strictly by Spark)."""
    s = _ARROW.get("s")
    if s is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        s = _ARROW["s"] = to_arrow_schema(SCHEMA_STRUCT, timezone="UTC")
    return s


def to_record_batch(cols: BatchColumns, stream: str) -> pa.RecordBatch:
    """Rows from the column lists of the direct-get and consumer paths."""
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
