"""Writes: PubAcks awaited, Nats-Msg-Id dedup of retried writes and replayed micro-batches."""

from __future__ import annotations

from pathlib import Path

import pytest
from nats.js import JetStreamContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from conftest import Proc

from .conftest import make_stream, publish, run, stream_msgs

pytestmark = pytest.mark.spark


def _add(url: str, name: str, subjects: list[str]) -> None:
    async def go(js: JetStreamContext) -> None:
        await js.add_stream(name=name, subjects=subjects, allow_direct=True)

    run(go, url)


def test_batch_write_dedups_a_rerun(spark: SparkSession, opts: dict[str, str], js_server: Proc) -> None:
    url = js_server.url
    _add(url, "OUT1", ["out1.>"])
    df = spark.createDataFrame(
        [(f"out1.{i % 2}", f"d{i}", f"key-{i}", {"h": "v"} if i == 3 else None) for i in range(200)],
        "subject string, data string, msg_id string, headers map<string,string>",
    ).repartition(3)
    df.write.format("jetstream").options(**opts).option("stream", "OUT1").mode("append").save()
    assert stream_msgs(url, "OUT1") == 200
    df.write.format("jetstream").options(**opts).mode("append").save()  # the same ids again
    assert stream_msgs(url, "OUT1") == 200
    back = (
        spark.read.format("jetstream")
        .options(**opts)
        .option("stream", "OUT1")
        .option("includeHeaders", "true")
        .load()
    )
    got = {bytes(r.data).decode(): (r.subject, r.headers) for r in back.collect()}
    assert len(got) == 200
    subject, headers = got["d3"]
    assert subject == "out1.1"
    assert headers is not None and headers["h"] == ["v"] and headers["Nats-Msg-Id"] == ["key-3"]
    assert got["d4"][0] == "out1.0"
    assert got["d4"][1] is not None and "h" not in got["d4"][1]
    # without a msg_id column, a fixed writeId makes a rerun of the same job idempotent
    plain = spark.range(50).select(F.concat(F.lit("x"), F.col("id").cast("string")).alias("data")).coalesce(2)
    for _ in range(2):
        plain.write.format("jetstream").options(**opts).option("subject", "out1.plain").option(
            "writeId", "job-7"
        ).mode("append").save()
    assert stream_msgs(url, "OUT1") == 250


def test_stream_to_stream_replay_is_deduplicated(
    spark: SparkSession, opts: dict[str, str], js_server: Proc, tmp_path: Path
) -> None:
    url = js_server.url
    make_stream(url, "SRC", ["src.>"], 300, lambda i: f"src.{i % 3}")
    _add(url, "DST", ["dst.>"])
    ckpt = tmp_path / "ckpt"

    def run_once() -> int:
        q = (
            spark.readStream.format("jetstream")
            .options(**opts)
            .option("stream", "SRC")
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", "100")
            .load()
            .select(F.concat(F.lit("dst."), F.col("subject")).alias("subject"), "data")
            .writeStream.format("jetstream")
            .options(**opts)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120)
        assert q.exception() is None
        return sum(p["numInputRows"] for p in q.recentProgress)

    assert run_once() == 300
    assert stream_msgs(url, "DST") == 300
    # a crash after the sink wrote batch 2 but before Spark committed it: the batch is replayed
    for f in ("2", ".2.crc"):
        (ckpt / "commits" / f).unlink(missing_ok=True)
    publish(url, "src.new", 301, 40)
    assert run_once() == 140  # batch 2 again (100 rows), then the 40 new ones
    assert stream_msgs(url, "DST") == 340  # the replayed 100 were dropped as duplicates
    seqs = [
        r.seq for r in spark.read.format("jetstream").options(**opts).option("stream", "DST").load().collect()
    ]
    assert len(seqs) == 340


def test_refusals_fail_the_write_naming_the_row_or_option(
    spark: SparkSession, opts: dict[str, str], js_server: Proc
) -> None:
    url = js_server.url

    async def small(js: JetStreamContext) -> None:
        await js.add_stream(name="SMALL", subjects=["small"], max_msg_size=150)  # headers count

    run(small, url)
    rows = spark.createDataFrame(
        [("small", "ok"), ("small", "x" * 200)], "subject string, data string"
    ).coalesce(1)
    with pytest.raises(
        Exception, match=r"row 1: the stream refused it: message size exceeds maximum allowed"
    ):
        rows.write.format("jetstream").options(**opts).mode("append").save()
    nobody = spark.createDataFrame([("nobody.listens", "x")], "subject string, data string")
    with pytest.raises(Exception, match=r"no stream listens on its subject \(option 'subject'"):
        nobody.write.format("jetstream").options(**opts).mode("append").save()
    bad = spark.createDataFrame([("small", "x", "a\r\nb")], "subject string, data string, msg_id string")
    with pytest.raises(Exception, match="a msg_id is one line"):
        bad.write.format("jetstream").options(**opts).mode("append").save()
