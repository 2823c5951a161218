"""Makes ``format("jetstream")`` work without registration: PySpark imports every installed
top-level ``pyspark_*`` module and registers its ``DefaultSource``."""

from jetpy.spark.datasource import JetStreamDataSource as DefaultSource

__all__ = ["DefaultSource"]
