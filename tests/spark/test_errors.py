"""What a read may meet, each as one clear error naming the stream and the option: a missing
stream, a wrong server URL, refused credentials, a stream deleted mid-read, a server restarted
mid-read; never a partial result passed off as whole. And a streaming query stopped by a
server restart resumes from its checkpoint reading each message exactly once."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.js import JetStreamContext
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import Row, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from conftest import JETPY_SERVER, Proc, free_port, start_process
from jetpy.spark import paths
from jetpy.spark.options import ConnOptions
from jetpy.spark.paths import JetStreamReadError, SeqRange, read_partition

from .conftest import make_stream, publish, run

pytestmark = pytest.mark.spark


def _jetpy(d: Path, port: int, *extra: str) -> Proc:
    return start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(d / "js"), *extra], d / "log"
    )


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[list[Proc]]:
    """A jetpy server of the test's own, to stop and start again on the same port and store."""
    procs = [_jetpy(tmp_path, free_port())]
    yield procs
    for p in procs:
        p.stop(signal.SIGKILL)


def _load(spark: SparkSession, **opts: str) -> list[Row]:
    return spark.read.format("jetstream").options(**opts).load().collect()


def test_missing_stream_wrong_url_bad_credentials(
    spark: SparkSession, js_server: Proc, tmp_path: Path
) -> None:
    with pytest.raises(
        PySparkException, match=r"stream 'NOPE' \(option 'stream'\) does not exist on nats://"
    ):
        _load(spark, servers=js_server.url, stream="NOPE")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"nats://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(
            PySparkException, match=r"cannot reach a NATS server at nats://127.+\(option 'servers'\)"
        ):
            _load(spark, servers=dead, stream="ANY")
    auth = _jetpy(tmp_path, free_port(), "--user", "spark", "--pass", "s3cret")
    try:
        make_stream(f"nats://spark:s3cret@127.0.0.1:{auth.port}", "AUTHED", ["authed"], 5, lambda i: "authed")
        with pytest.raises(PySparkException, match=r"refused the credentials \(options 'user'/'password'"):
            _load(spark, servers=auth.url, stream="AUTHED", user="spark", password="wrong")
        assert len(_load(spark, servers=auth.url, stream="AUTHED", user="spark", password="s3cret")) == 5
    finally:
        auth.stop(signal.SIGKILL)
    with pytest.raises(StreamingQueryException, match=r"stream 'NOPE' \(option 'stream'\) does not exist"):
        q = spark.readStream.format("jetstream").options(servers=js_server.url, stream="NOPE").load()
        q.writeStream.format("noop").option(
            "checkpointLocation", str(tmp_path / "c")
        ).start().awaitTermination(60)


def _big(url: str, name: str, n: int = 20_000) -> None:
    async def go(js: JetStreamContext) -> None:
        await js.add_stream(name=name, subjects=[name.lower()])
        for _ in range(n):
            await js.publish_async(name.lower(), b"z" * 500)
        await js.publish_async_completed()

    run(go, url)


def _range(url: str, name: str, path: str) -> SeqRange:
    # small requests, so the read is still going when the test acts
    return SeqRange(name, 1, 20_000, (), ConnOptions(servers=(url,)), False, 500, 65536, True, path)


@pytest.mark.parametrize("path", ["bulk", "consumer"])
def test_stream_deleted_mid_read(own_server: list[Proc], path: str) -> None:
    url = own_server[0].url
    _big(url, "DOOMED")
    read = read_partition(_range(url, "DOOMED", path))
    got = next(read).num_rows
    assert 0 < got < 20_000

    async def delete(js: JetStreamContext) -> None:
        await js.delete_stream("DOOMED")

    run(delete, url)
    with pytest.raises(JetStreamReadError, match=r"stream 'DOOMED' \(option 'stream'\) was deleted while"):
        for b in read:
            got += b.num_rows
    assert got < 20_000


@pytest.mark.parametrize("path", ["bulk", "consumer"])
def test_server_restarted_mid_read(own_server: list[Proc], tmp_path: Path, path: str) -> None:
    p = own_server[0]
    _big(p.url, "RESTART")
    read = read_partition(_range(p.url, "RESTART", path))
    assert next(read).num_rows < 20_000
    p.stop()
    own_server.append(_jetpy(tmp_path, p.port))
    with pytest.raises(JetStreamReadError, match=rf"lost the server at {p.url} \(option 'servers'\)"):
        for _ in read:
            pass
    # the same partition read again (as Spark retries a task) is whole
    assert sum(b.num_rows for b in read_partition(_range(p.url, "RESTART", path))) == 20_000


def _query(spark: SparkSession, url: str, out: Path, ckpt: Path, trigger: dict[str, Any]) -> StreamingQuery:
    return (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "DURABLE")
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "50")
        .load()
        .select("seq")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(**trigger)
        .start()
    )


def test_streaming_query_resumes_exactly_once_after_server_restart(
    spark: SparkSession, own_server: list[Proc], tmp_path: Path
) -> None:
    p = own_server[0]
    make_stream(p.url, "DURABLE", ["durable"], 400, lambda i: "durable", allow_direct=False)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = _query(spark, p.url, out, ckpt, {"processingTime": "200 milliseconds"})
    deadline = time.monotonic() + 90
    while (q.lastProgress is None or q.lastProgress["batchId"] < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.stop(signal.SIGKILL)  # mid-query: acknowledged messages survive a kill
    with pytest.raises(StreamingQueryException, match=r"\(option 'servers'\)"):
        q.awaitTermination(60)
    p2 = _jetpy(tmp_path, p.port)
    own_server.append(p2)
    publish(p2.url, "durable", 401, 100)
    q2 = _query(spark, p2.url, out, ckpt, {"availableNow": True})
    assert q2.awaitTermination(120)
    assert q2.exception() is None
    seqs = sorted(r.seq for r in spark.read.parquet(str(out)).collect())
    assert seqs == list(range(1, 501))


def test_tasks_reuse_a_clean_connection(own_server: list[Proc], tmp_path: Path) -> None:
    """A Python worker keeps the connection of a read that ended cleanly for its next task (a
    PING instead of a connect); one that broke, or went stale with a server restart, is not."""
    p = own_server[0]
    make_stream(p.url, "REUSED", ["reused"], 50, lambda i: "reused")
    r = SeqRange("REUSED", 1, 50, (), ConnOptions(servers=(p.url,)), False, 500, 65536, True, "bulk")
    assert sum(b.num_rows for b in read_partition(r)) == 50
    kept = list(paths._idle[r.conn])
    assert len(kept) == 1
    assert sum(b.num_rows for b in read_partition(r)) == 50
    assert paths._idle[r.conn] == kept  # the same connection, back again
    p.stop()
    own_server.append(_jetpy(tmp_path, p.port))
    assert sum(b.num_rows for b in read_partition(r)) == 50  # a fresh connection
    assert paths._idle[r.conn] != kept
