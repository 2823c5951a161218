"""Spark batch job over seed 000's ``answers`` stream: counts and statistics per subject.

    python examples/answers_report.py --servers nats://127.0.0.1:4222 [--master spark://host:7077]

The same code runs on ``local[*]`` and on a standalone cluster: only ``--master`` changes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def session(master: str, app: str) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", sys.executable)  # executors on a cluster use this venv too
        .getOrCreate()
    )


def report(spark: SparkSession, servers: str) -> list[dict[str, Any]]:
    answers = spark.read.format("jetstream").option("servers", servers).option("stream", "answers").load()
    body = F.from_json(
        F.col("data").cast("string"), "service string, op string, a double, b double, value double"
    )
    rows = (
        answers.select("subject", body.alias("m"))
        .groupBy("subject")
        .agg(
            F.count("*").alias("count"),
            F.round(F.min("m.value"), 3).alias("min"),
            F.round(F.max("m.value"), 3).alias("max"),
            F.round(F.avg("m.value"), 3).alias("mean"),
            F.round(F.stddev("m.value"), 3).alias("stddev"),
            F.countDistinct("m.service").alias("services"),
        )
        .orderBy("subject")
        .collect()
    )
    return [r.asDict() for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="nats://127.0.0.1:4222")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args()
    spark = session(args.master, "answers-report")
    for row in report(spark, args.servers):
        print(row)
    spark.stop()


if __name__ == "__main__":
    main()
