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
from dataclasses import replace

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from jetpy.spark.options import SourceOptions, parse_sink, parse_source
from jetpy.spark.schema import SCHEMA_STRUCT, read_columns

__all__ = ["JetStreamDataSource"]


class JetStreamDataSource(DataSource):
    """Streams as DataFrames ``stream, subject, seq, ts, data, headers`` (or those of them a
    schema given to the reader names); DataFrames into streams."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> StructType:
        return SCHEMA_STRUCT

    def _source(self, schema: StructType, streaming: bool) -> SourceOptions:
        """The read's options, with the columns ``schema`` (the default or the user's) asks for."""
        columns = read_columns(schema)
        return replace(parse_source(self.options, streaming=streaming), columns=columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        from jetpy.spark.reader import JetStreamBatchReader

        return JetStreamBatchReader(self._source(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from jetpy.spark.reader import JetStreamStreamReader

        return JetStreamStreamReader(self._source(schema, streaming=True))

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
