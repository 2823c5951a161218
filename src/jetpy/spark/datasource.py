"""The ``jetstream`` PySpark data source: what ``spark.read/readStream/write/writeStream
.format("jetstream")`` resolve to.

Owns: the source's name and schema and the choice of reader/writer; option parsing lives in
:mod:`jetpy.spark.options`. Registered automatically by the ``pyspark_jetstream`` module that
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
from jetpy.spark.reader import JetStreamBatchReader, JetStreamStreamReader
from jetpy.spark.schema import SCHEMA, SCHEMA_STRUCT
from jetpy.spark.writer import JetStreamStreamWriter, JetStreamWriter, check_schema

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
        self._check_read_schema(schema)
        return JetStreamBatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_read_schema(schema)
        return JetStreamStreamReader(parse_source(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = parse_sink(self.options)
        check_schema(schema, opts)
        return JetStreamWriter(opts, write_id=uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_sink(self.options)
        check_schema(schema, opts)
        return JetStreamStreamWriter(opts)
