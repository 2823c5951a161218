"""The Spark connector: a PySpark Python data source named ``jetstream`` (install ``jetpy[spark]``).

``spark.read.format("jetstream")`` and ``spark.readStream.format("jetstream")`` read any stream
as ``stream, subject, seq, ts, data, headers`` through the fastest path the server offers
(jetpy's bulk read, batched direct gets, or a pull consumer: ``paths.py``); ``df.write`` and
``df.writeStream`` publish rows with PubAcks and ``Nats-Msg-Id`` deduplication. It is a client of
a running server over the wire and never imports the server. Options: README, section Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["JetStreamDataSource", "register"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jetpy.spark.datasource import JetStreamDataSource


def register(spark: SparkSession) -> None:
    """Register the source by hand (it registers itself when jetpy is installed)."""
    from jetpy.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)


def __getattr__(name: str) -> Any:
    if name == "JetStreamDataSource":  # lazily: importing jetpy.spark must not need pyspark
        from jetpy.spark.datasource import JetStreamDataSource

        return JetStreamDataSource
    raise AttributeError(name)
