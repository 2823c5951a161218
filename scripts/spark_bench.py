"""Spark connector throughput: batch read of an N-message stream (100-byte payloads) against the
plain nats-py pull-consumer read of the same stream, in the same run; streaming throughput; and
Spark reading the same rows from Parquet. Results feed README's Performance section.

    .venv/bin/python scripts/spark_bench.py [--msgs 1000000] [--servers nats://host:port]

Without ``--servers`` a jetpy server is started on an ephemeral port with a temporary store
(and stopped at the end). ``--servers`` points at a running server instead (e.g. nats-server
2.11+ for comparison; it needs batched direct get for the Spark read).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

STREAM = "SPARKBENCH"


def start_jetpy(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = tmp / "jetpy.log"
    with open(log, "wb") as f:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jetpy.server",
                "-a",
                "127.0.0.1",
                "-p",
                "-1",
                "-js",
                "-sd",
                str(tmp / "js"),
            ],
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    for _ in range(750):
        m = re.search(r"Listening for client connections on [^\s]*:(\d+)", log.read_text(errors="replace"))
        if m and "Server is ready" in log.read_text(errors="replace"):
            return p, f"nats://127.0.0.1:{m.group(1)}"
        time.sleep(0.02)
    p.kill()
    raise RuntimeError("jetpy did not start:\n" + log.read_text(errors="replace"))


async def fill(url: str, n: int) -> float:
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=4000)
    try:
        await js.delete_stream(STREAM)
    except Exception:
        pass
    await js.add_stream(name=STREAM, subjects=["bench.>"], allow_direct=True)
    payload = b"x" * 100
    t = time.perf_counter()
    for i in range(n):
        await js.publish_async(f"bench.{i % 16}", payload)
    await js.publish_async_completed()
    dt = time.perf_counter() - t
    await nc.close()
    return n / dt


async def pull_baseline(url: str, n: int, batch: int = 500, limit_s: float = 120.0) -> tuple[float, int]:
    """nats-py's documented way to read a stream: an ephemeral pull consumer, fetch in batches."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats.connect(url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(
        "bench.>",
        stream=STREAM,
        config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
    )
    got = 0
    t = time.perf_counter()
    while got < n and time.perf_counter() - t < limit_s:
        msgs = await sub.fetch(batch, timeout=5)
        got += sum(len(m.data) == 100 for m in msgs)
    dt = time.perf_counter() - t
    await nc.close()
    return got / dt, got


def spark_runs(url: str, n: int, tmp: Path, master: str) -> dict[str, float]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, float] = {}
    df = spark.read.format("jetstream").option("servers", url).option("stream", STREAM).load()
    agg = [F.count("*").alias("n"), F.sum(F.length("data")).alias("bytes"), F.max("seq").alias("last")]
    times = []
    for _ in range(3):
        t = time.perf_counter()
        row = df.agg(*agg).collect()[0]
        times.append(time.perf_counter() - t)
        assert row["n"] == n and row["bytes"] == 100 * n, row
    out["spark_cold"] = n / times[0]
    out["spark_warm"] = n / min(times[1:])
    pq = str(tmp / "bench.parquet")
    df.write.mode("overwrite").parquet(pq)
    pdf = spark.read.parquet(pq)
    ptimes = []
    for _ in range(3):
        t = time.perf_counter()
        row = pdf.agg(*agg).collect()[0]
        ptimes.append(time.perf_counter() - t)
        assert row["n"] == n
    out["parquet_warm"] = n / min(ptimes[1:])
    ckpt = tempfile.mkdtemp(dir=tmp)
    q = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", STREAM)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "100000")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    t = time.perf_counter()
    q.awaitTermination()
    dt = time.perf_counter() - t
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    assert rows == n, rows
    out["streaming"] = n / dt
    out["streaming_batches"] = float(len([p for p in q.recentProgress if p["numInputRows"]]))
    spark.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--msgs", type=int, default=1_000_000)
    ap.add_argument("--servers", default=None)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--skip-baseline", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    proc = None
    try:
        if args.servers:
            url = args.servers
        else:
            proc, url = start_jetpy(tmp)
        print(f"server {url}; filling {args.msgs:,} messages of 100 bytes ...", flush=True)
        rate = asyncio.run(fill(url, args.msgs))
        print(f"  publish (nats-py, async acks): {rate:,.0f} msg/s", flush=True)
        base = 0.0
        if not args.skip_baseline:
            try:
                base, got = asyncio.run(pull_baseline(url, args.msgs))
                print(
                    f"  nats-py pull consumer (fetch 500, AckNone): {base:,.0f} msg/s ({got:,} read)",
                    flush=True,
                )
            except Exception as e:  # consumers may not exist on this server yet
                print(
                    f"  nats-py pull consumer: not available on this server ({type(e).__name__}: {e})",
                    flush=True,
                )
        res = spark_runs(url, args.msgs, tmp, args.master)
        print(f"  Spark batch read ({args.master}), first query: {res['spark_cold']:,.0f} msg/s")
        print(f"  Spark batch read ({args.master}), warm: {res['spark_warm']:,.0f} msg/s")
        if base:
            print(f"  ratio Spark warm / nats-py pull: {res['spark_warm'] / base:.1f}x (bar: >= 5x)")
        print(f"  Spark reading the same rows from Parquet, warm: {res['parquet_warm']:,.0f} rows/s")
        print(
            f"  Spark streaming (AvailableNow, 100k per trigger, noop sink): {res['streaming']:,.0f} msg/s "
            f"in {res['streaming_batches']:.0f} micro-batches"
        )
        return 0
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
