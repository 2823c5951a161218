"""The ``jetstream`` PySpark data source: what ``spark.read/readStream/write/writeStream
.format("jetstream")`` resolve to.

Owns: the source's name and schema and the choice of reader/writer; option parsing lives in
:mod:`jetpy.spark.options`. The reader and the writer are imported when asked for: Spark starts
a new Python process for each streaming query's planner, which needs only the reader. Registered automatically by the ``pyspark_jetstream`` module that
ships with jetpy (PySpark imports every top-level ``pyspark_*`` module that has a
``DefaultSource``), or by hand with ``spark.dataSource.register(JetStreamDataSource)``.
"""

from __future__ import annotations

import uuid

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from jetpy.spark.options import JetStreamOptionError, parse_sink, parse_source
from jetpy.spark.schema import SCHEMA, SCHEMA_STRUCT

__all__ = ["JetStreamDataSource"]


class JetStreamDataSource(DataSource):
    """Streams as DataFrames ``stream, subject, seq, ts, data, headers``; DataFrames into streams."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> StructType:
        return SCHEMA_STRUCT

    def _check_read_schema(self, schema: StructType) -> None:
        if schema != SCHEMA_STRUCT:
            raise JetStreamOptionError("schema", schema.simpleString(), f"no schema, or exactly {SCHEMA}")

    def reader(self, schema: StructType) -> DataSourceReader:
        from jetpy.spark.reader import JetStreamBatchReader

        self._check_read_schema(schema)
        return JetStreamBatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from jetpy.spark.reader import JetStreamStreamReader

        self._check_read_schema(schema)
        return JetStreamStreamReader(parse_source(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from jetpy.spark.writer import JetStreamWriter, check_schema

        opts = parse_sink(self.options)
        check_schema(schema, opts)
        return JetStreamWriter(opts, write_id=uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from jetpy.spark.writer import JetStreamStreamWriter, check_schema

        opts = parse_sink(self.options)
        check_schema(schema, opts)
        return JetStreamStreamWriter(opts)
