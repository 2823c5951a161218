"""Structured streaming reads: offsets are stream sequences, checkpointed by Spark.

A query stopped at any point and restarted from its checkpoint yields every message once (with
an exactly-once sink: Spark's file sink here); retention that removes unread messages is data
loss (``failOnDataLoss``); AvailableNow honours ``maxMessagesPerTrigger``; the progress reports
the stream's head for lag.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from conftest import Proc

from .conftest import make_stream, publish

pytestmark = pytest.mark.spark


def _start(
    spark: SparkSession, opts: dict[str, str], out: Path, ckpt: Path, trigger: dict[str, Any], **more: str
) -> StreamingQuery:
    df = spark.readStream.format("jetstream").options(**opts).options(**more).load()
    return (
        df.select("seq", "subject", "data")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(**trigger)
        .start()
    )


def _seqs(spark: SparkSession, out: Path) -> list[int]:
    return sorted(r.seq for r in spark.read.parquet(str(out)).select("seq").collect())


def test_exactly_once_across_stop_and_restart(
    spark: SparkSession, opts: dict[str, str], js_server: Proc, tmp_path: Path
) -> None:
    url = js_server.url
    make_stream(url, "EVENTS", ["ev.>"], 300, lambda i: "ev.a")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    more = {"stream": "EVENTS", "startingOffsets": "earliest", "maxMessagesPerTrigger": "70"}
    q = _start(spark, opts, out, ckpt, {"processingTime": "0 seconds"}, **more)
    publish(url, "ev.b", 301, 200)  # while the query runs
    deadline = time.monotonic() + 90
    while (q.lastProgress is None or q.lastProgress["batchId"] < 2) and time.monotonic() < deadline:
        time.sleep(0.1)
    q.stop()  # wherever it is, possibly in the middle of a micro-batch
    assert q.exception() is None
    publish(url, "ev.c", 501, 100)
    q2 = _start(spark, opts, out, ckpt, {"availableNow": True}, **more)
    assert q2.awaitTermination(120)
    assert q2.exception() is None
    assert _seqs(spark, out) == list(range(1, 601))
    # the restart resumed from the checkpoint, in micro-batches of at most 70 sequences
    rows = [p["numInputRows"] for p in q2.recentProgress if p["numInputRows"]]
    assert rows and max(rows) <= 70
    last = q2.recentProgress[-1]["sources"][0]
    assert json.loads(last["endOffset"]) == {"EVENTS": 601}
    assert json.loads(last["latestOffset"]) == {"EVENTS": 601}  # head of the stream: lag = 0
    # a third run finds nothing new
    q3 = _start(spark, opts, out, ckpt, {"availableNow": True}, **more)
    assert q3.awaitTermination(60)
    assert _seqs(spark, out) == list(range(1, 601))


def test_starting_offsets_latest_and_json(
    spark: SparkSession, opts: dict[str, str], js_server: Proc, tmp_path: Path
) -> None:
    url = js_server.url
    make_stream(url, "START", ["st"], 50, lambda i: "st")
    q = _start(spark, opts, tmp_path / "o1", tmp_path / "c1", {"availableNow": True}, stream="START")
    assert q.awaitTermination(60)
    assert spark.read.parquet(str(tmp_path / "o1")).count() == 0  # latest: only new messages
    q = _start(
        spark,
        opts,
        tmp_path / "o2",
        tmp_path / "c2",
        {"availableNow": True},
        stream="START",
        startingOffsets='{"START": 41}',
        filterSubject="st",
    )
    assert q.awaitTermination(60)
    assert _seqs(spark, tmp_path / "o2") == list(range(41, 51))


def test_fail_on_data_loss(
    spark: SparkSession, opts: dict[str, str], js_server: Proc, tmp_path: Path
) -> None:
    url = js_server.url
    make_stream(url, "LOSSY", ["lossy"], 50, lambda i: "lossy", max_msgs=50)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    more = {"stream": "LOSSY", "startingOffsets": "earliest"}
    q = _start(spark, opts, out, ckpt, {"availableNow": True}, **more)
    assert q.awaitTermination(60)
    assert _seqs(spark, out) == list(range(1, 51))
    publish(url, "lossy", 51, 100)  # the stream keeps 101..150: 51..100 go unread
    q = _start(spark, opts, out, ckpt, {"availableNow": True}, **more)
    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        q.awaitTermination(60)
    q = _start(spark, opts, out, ckpt, {"availableNow": True}, failOnDataLoss="false", **more)
    assert q.awaitTermination(60)
    assert _seqs(spark, out) == list(range(1, 51)) + list(range(101, 151))
    # batch reads check the same
    df = (
        spark.read.format("jetstream")
        .options(**opts)
        .option("stream", "LOSSY")
        .option("startingOffsets", '{"LOSSY": 1}')
    )
    with pytest.raises(Exception, match="failOnDataLoss"):
        df.load().collect()
    assert df.option("failOnDataLoss", "false").load().count() == 50
