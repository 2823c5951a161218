"""Batch reads: every column, subject filters, sequence and time bounds, parallel partitions."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from nats.js import JetStreamContext
from pyspark.sql import SparkSession

from conftest import Proc

from .conftest import make_stream, run

pytestmark = pytest.mark.spark

N = 600


@pytest.fixture(scope="module")
def orders(js_server: Proc) -> str:
    make_stream(js_server.url, "ORDERS", ["orders.>"], N, lambda i: f"orders.{['eu', 'us', 'asia'][i % 3]}")
    return "ORDERS"


def _read(spark: SparkSession, opts: dict[str, str], **more: str) -> list[dict[str, object]]:
    df = spark.read.format("jetstream").options(**opts).options(**more).load()
    return [r.asDict() for r in df.orderBy("seq").collect()]


def test_reads_every_message_with_its_columns(spark: SparkSession, opts: dict[str, str], orders: str) -> None:
    df = (
        spark.read.format("jetstream")
        .options(**opts)
        .option("stream", orders)
        .option("includeHeaders", "true")
        .load()
    )
    assert df.columns == ["stream", "subject", "seq", "ts", "data", "headers"]
    assert df.rdd.getNumPartitions() == 1
    rows = [r.asDict() for r in df.orderBy("seq").collect()]
    assert [r["seq"] for r in rows] == list(range(1, N + 1))
    for r in rows:
        i = r["seq"]
        assert r["stream"] == "ORDERS"
        assert r["subject"] == f"orders.{['eu', 'us', 'asia'][i % 3]}"
        assert bytes(r["data"]) == f"m{i}".encode()
        assert r["headers"] == ({"K": [f"v{i}"]} if i % 5 == 0 else None)
        assert isinstance(r["ts"], datetime)
    ts = [r["ts"] for r in rows]
    assert ts == sorted(ts)
    assert abs((datetime.now(UTC).replace(tzinfo=None) - ts[-1]).total_seconds()) < 600
    # headers are only read when asked for
    assert _read(spark, opts, stream=orders)[4]["headers"] is None


def test_filters_bounds_and_partitions(spark: SparkSession, opts: dict[str, str], orders: str) -> None:
    rows = _read(spark, opts, stream=orders, filterSubject="orders.eu")
    assert [r["seq"] for r in rows] == [i for i in range(1, N + 1) if i % 3 == 0]
    rows = _read(spark, opts, stream=orders, filterSubjects="orders.us,orders.asia")
    assert [r["seq"] for r in rows] == [i for i in range(1, N + 1) if i % 3 != 0]
    rows = _read(
        spark,
        opts,
        stream=orders,
        filterSubject="orders.*",
        startingOffsets='{"ORDERS": 101}',
        endingOffsets='{"ORDERS": 201}',
    )
    assert [r["seq"] for r in rows] == list(range(101, 201))
    rows = _read(
        spark,
        opts,
        stream=orders,
        filterSubject="orders.eu",
        startingOffsets='{"ORDERS": 101}',
        endingOffsets='{"ORDERS": 201}',
    )
    assert [r["seq"] for r in rows] == [i for i in range(101, 201) if i % 3 == 0]
    df = (
        spark.read.format("jetstream")
        .options(**opts)
        .option("stream", orders)
        .option("minPartitions", "4")
        .option("fetchBatch", "37")
        .load()
    )
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.seq for r in df.select("seq").collect()) == list(range(1, N + 1))
    df = (
        spark.read.format("jetstream")
        .options(**opts)
        .option("stream", orders)
        .option("maxMessagesPerPartition", "100")
        .load()
    )
    assert df.rdd.getNumPartitions() == 6


def test_time_bounds(spark: SparkSession, opts: dict[str, str], orders: str) -> None:
    async def times(js: JetStreamContext) -> tuple[str, str]:
        nc = js._nc
        a = await nc.request("$JS.API.STREAM.MSG.GET.ORDERS", b'{"seq": 200}')
        b = await nc.request("$JS.API.STREAM.MSG.GET.ORDERS", b'{"seq": 400}')
        return json.loads(a.data)["message"]["time"], json.loads(b.data)["message"]["time"]

    t200, t400 = run(times, opts["servers"])
    rows = _read(spark, opts, stream=orders, startingTimestamp=t200, endingTimestamp=t400)
    seqs = [int(str(r["seq"])) for r in rows]
    # messages published in the same microsecond share a timestamp: bounds land on the first of them
    assert seqs[0] <= 200 and seqs[-1] < 400 and seqs == list(range(seqs[0], seqs[-1] + 1))
    assert len(seqs) >= 150
    ms = str(int(datetime.now(UTC).timestamp() * 1000) + 3_600_000)
    assert _read(spark, opts, stream=orders, startingTimestamp=ms) == []
