"""The rows a read returns: their Spark schema, its exact Arrow form, and rows from columns.

Owns ``stream string, subject string, seq bigint, ts timestamp, data binary, headers
map<string, array<string>>`` (``headers`` null unless ``includeHeaders``, as Kafka's), which of
those columns a schema given to the reader picks (:func:`read_columns`), the Arrow schema Spark
checks every yielded batch against (strictly: binary not large_binary, microsecond UTC
timestamps), and turning the column lists the slower read paths gather into a batch.
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

from jetpy.spark.options import COLUMNS, JetStreamOptionError
from jetpy.spark.wire import BatchColumns

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SCHEMA", "SCHEMA_STRUCT", "arrow_schema", "read_columns", "to_record_batch"]

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

_FIELDS = {f.name: f for f in SCHEMA_STRUCT.fields}
assert tuple(_FIELDS) == COLUMNS


def read_columns(schema: StructType) -> tuple[str, ...]:
    """The columns a schema given to the reader asks for: any of :data:`SCHEMA`'s, each with its
    type, in any order (only those are made). Anything else is refused, naming the columns."""
    accepted = (
        f"no schema, or some of the columns {SCHEMA}, each with its type, in any order "
        "(e.g. 'seq bigint, data binary'); every column nullable"
    )
    names = tuple(f.name for f in schema.fields)
    if not names or len(set(names)) != len(names):
        raise JetStreamOptionError("schema", schema.simpleString(), accepted)
    for f in schema.fields:
        want = _FIELDS.get(f.name)
        if want is None:
            wrong = f"{f.name!r} is not one of the columns"
        elif f.dataType != want.dataType:
            wrong = f"{f.name!r} is {want.dataType.simpleString()}, not {f.dataType.simpleString()}"
        elif not f.nullable:
            wrong = f"{f.name!r} must be nullable"
        else:
            continue
        raise JetStreamOptionError("schema", schema.simpleString(), f"{accepted} ({wrong})")
    return names


_ARROW: dict[tuple[str, ...], pa.Schema] = {}


def arrow_schema(columns: tuple[str, ...] = COLUMNS) -> pa.Schema:
    """The exact Arrow schema Spark expects for these columns of :data:`SCHEMA`, in this order
    (checked strictly by Spark)."""
    s = _ARROW.get(columns)
    if s is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        s = _ARROW[columns] = to_arrow_schema(StructType([_FIELDS[c] for c in columns]), timezone="UTC")
    return s


def to_record_batch(cols: BatchColumns, stream: str, schema: pa.Schema) -> pa.RecordBatch:
    """Rows of ``schema`` (columns of :data:`SCHEMA`) from the column lists of the direct-get and
    consumer paths."""
    import pyarrow as pa

    n = len(cols)

    def make(name: str, t: pa.DataType) -> pa.Array:
        if name == "stream":
            return pa.array([stream] * n, t)
        if name == "subject":
            return pa.array(cols.subjects, pa.binary()).cast(t)
        if name == "headers":
            return pa.nulls(n, t) if cols.headers is None else pa.array(cols.headers, type=t)
        return pa.array({"seq": cols.seqs, "ts": cols.ts_us, "data": cols.data}[name], t)

    return pa.RecordBatch.from_arrays([make(f.name, f.type) for f in schema], schema=schema)
