"""Spark connector throughput, all from one run: batch reads of an N-message stream (100-byte
payloads on 16 subjects) against Spark reading the same rows from Parquet, a filtered read (1 of
16 subjects) with the bytes the server sent, AvailableNow streaming with 100k-message triggers,
the sink writing N rows (and again, to show exactly-once), and the memory of the server and of
Spark's Python workers while they run. Results feed README's Spark section.

    .venv/bin/python scripts/spark_bench.py [--msgs 1000000] [--servers nats://host:port]

Without ``--servers`` a jetpy server is started on ephemeral ports with a temporary store (and
stopped at the end). ``--servers`` points at a running server instead (e.g. nats-server, to
compare; its bytes and memory are not measured then). Repeated reads report min / median /
max: the machine may be shared, and the spread says how much.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import nats

STREAM = "SPARKBENCH"
SINK = "SPARKSINK"
RUNS = 5
SERVER = [sys.executable, "-m", "jetpy.server"]


def start_jetpy(tmp: Path) -> tuple[subprocess.Popen[bytes], str, int]:
    log = tmp / "jetpy.log"
    with open(log, "wb") as f:
        p = subprocess.Popen(
            [*SERVER, "-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-js", "-sd", str(tmp / "js")],
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    for _ in range(750):
        text = log.read_text(errors="replace")
        m = re.search(r"Listening for client connections on [^\s]*:(\d+)", text)
        h = re.search(r"Starting http monitor on [^\s]*:(\d+)", text)
        if m and h and "Server is ready" in text:
            return p, f"nats://127.0.0.1:{m.group(1)}", int(h.group(1))
        time.sleep(0.02)
    p.kill()
    raise RuntimeError("jetpy did not start:\n" + log.read_text(errors="replace"))


async def fill(url: str, n: int) -> float:
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=4000)
    for name, subjects in ((STREAM, ["bench.>"]), (SINK, ["sink.>"])):
        try:
            await js.delete_stream(name)
        except Exception:
            pass
        await js.add_stream(name=name, subjects=subjects)  # allow_direct off: read as they are
    payload = b"x" * 100
    t = time.perf_counter()
    for i in range(n):
        await js.publish_async(f"bench.{i % 16}", payload)
    await js.publish_async_completed()
    dt = time.perf_counter() - t
    await nc.close()
    return n / dt


async def stream_msgs(url: str, name: str) -> int:
    nc = await nats.connect(url)
    try:
        return int((await nc.jetstream().stream_info(name)).state.messages)
    finally:
        await nc.close()


def out_bytes(http_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/varz", timeout=5) as r:
        return int(json.loads(r.read())["out_bytes"])


class Memory:
    """Samples the resident memory of the server and of Spark's Python processes (daemon,
    workers, planners), keeping the maximum seen per phase (``phase`` names the current one)."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.phase = "start"
        self.server: dict[str, int] = {}
        self.workers: dict[str, dict[int, int]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            phase = self.phase
            if self.server_pid:
                self.server[phase] = max(self.server.get(phase, 0), self._rss(self.server_pid))
            seen = self.workers.setdefault(phase, {})
            for d in os.listdir("/proc"):
                if not d.isdigit() or int(d) == me:
                    continue
                try:
                    with open(f"/proc/{d}/cmdline", "rb") as f:
                        cmd = f.read()
                except OSError:
                    continue
                if b"pyspark" in cmd and b"java" not in cmd.split(b"\0")[0]:
                    pid = int(d)
                    seen[pid] = max(seen.get(pid, 0), self._rss(pid))
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()

    def report(self, phase: str) -> str:
        mib = 2**20
        server = f"server {self.server.get(phase, 0) / mib:,.0f} MiB" if self.server_pid else "server ?"
        w = sorted(self.workers.get(phase, {}).values())
        if not w:
            return server
        return f"{server}; {len(w)} Spark Python processes, largest {w[-1] / mib:,.0f} MiB, median {statistics.median(w) / mib:,.0f} MiB"


def spread(values: list[float], fmt: str = ",.0f") -> str:
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def spark_runs(
    url: str, n: int, tmp: Path, master: str, http_port: int | None, mem: Memory
) -> dict[str, Any]:
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
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {}
    df = spark.read.format("jetstream").option("servers", url).option("stream", STREAM).load()
    out["partitions"] = df.rdd.getNumPartitions()
    agg = [F.count("*").alias("n"), F.sum(F.length("data")).alias("bytes"), F.max("seq").alias("last")]

    def timed(frame: Any, rows: int) -> float:
        t = time.perf_counter()
        row = frame.agg(*agg).collect()[0]
        dt = time.perf_counter() - t
        assert row["n"] == rows, row
        return rows / dt

    mem.phase = "read"
    out["cold"] = timed(df, n)
    out["warm"] = [timed(df, n) for _ in range(RUNS)]
    mem.phase = "other"
    pq = str(tmp / "bench.parquet")
    df.write.mode("overwrite").parquet(pq)
    pdf = spark.read.parquet(pq)
    timed(pdf, n)
    out["parquet"] = [timed(pdf, n) for _ in range(RUNS)]
    # alternated, so that both see the same moments of a shared machine
    pairs = [(timed(df, n), timed(pdf, n)) for _ in range(RUNS)]
    out["ratio"] = [a / b for a, b in pairs]

    flt = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", STREAM)
        .option("filterSubject", "bench.3")
        .load()
    )
    want = len(range(3, n, 16))
    b0 = out_bytes(http_port) if http_port else 0
    out["filtered"] = timed(flt, want)
    b1 = out_bytes(http_port) if http_port else 0
    timed(df, n)
    b2 = out_bytes(http_port) if http_port else 0
    out["filtered_rows"] = want
    out["filtered_bytes"] = b1 - b0
    out["all_bytes"] = b2 - b1

    def stream_run() -> tuple[float, int]:
        q = (
            spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", STREAM)
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", "100000")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", tempfile.mkdtemp(dir=tmp))
            .trigger(availableNow=True)
            .start()
        )
        t = time.perf_counter()
        q.awaitTermination()
        dt = time.perf_counter() - t
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        assert rows == n, rows
        return n / dt, len([p for p in q.recentProgress if p["numInputRows"]])

    mem.phase = "stream"
    out["stream_first"], out["stream_batches"] = stream_run()
    out["stream_warm"] = [stream_run()[0] for _ in range(3)]
    mem.phase = "sink"

    rows = (
        spark.range(n, numPartitions=2)
        .select(
            F.concat(F.lit("sink."), (F.col("id") % 16).cast("string")).alias("subject"),
            F.expr("unhex(repeat('78', 100))").alias("data"),
        )
        .cache()
    )
    rows.count()
    sink = rows.write.format("jetstream").option("servers", url).option("writeId", "bench").mode("append")
    t = time.perf_counter()
    sink.save()
    out["sink"] = n / (time.perf_counter() - t)
    out["sink_count"] = asyncio.run(stream_msgs(url, SINK))
    t = time.perf_counter()
    sink.save()  # the same write again: every row a duplicate the stream drops
    out["sink_again"] = n / (time.perf_counter() - t)
    out["sink_count_again"] = asyncio.run(stream_msgs(url, SINK))
    mem.phase = "end"
    spark.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--msgs", type=int, default=1_000_000)
    ap.add_argument("--servers", default=None)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    proc = None
    http_port = None
    try:
        if args.servers:
            url = args.servers
        else:
            proc, url, http_port = start_jetpy(tmp)
        print(
            f"server {url}; load average {os.getloadavg()[0]:.2f}; filling {args.msgs:,} messages ...",
            flush=True,
        )
        print(f"  publish (nats-py, async acks): {asyncio.run(fill(url, args.msgs)):,.0f} msg/s", flush=True)
        mem = Memory(proc.pid if proc else None)
        mem.phase = "filled"
        time.sleep(0.2)
        res = spark_runs(url, args.msgs, tmp, args.master, http_port, mem)
        mem.stop()
        m = args.master
        print(f"  partitions of the batch read: {res['partitions']}")
        print(f"  Spark batch read ({m}), first query: {res['cold']:,.0f} msg/s")
        print(f"  Spark batch read ({m}), warm, min / median / max of {RUNS}: {spread(res['warm'])} msg/s")
        print(f"  Spark reading the same rows from Parquet, warm: {spread(res['parquet'])} rows/s")
        print(f"  ratio jetstream / Parquet, alternated runs: {spread(res['ratio'], '.2f')}")
        print(
            f"  filtered read (bench.3, {res['filtered_rows']:,} rows): {res['filtered']:,.0f} msg/s; "
            f"server sent {res['filtered_bytes']:,} bytes (the whole stream's read: {res['all_bytes']:,})"
        )
        print(
            f"  streaming, AvailableNow, 100k per trigger, noop sink: first query {res['stream_first']:,.0f} "
            f"msg/s in {res['stream_batches']} micro-batches; later queries {spread(res['stream_warm'])}"
        )
        print(
            f"  sink, {args.msgs:,} rows with Nats-Msg-Id: {res['sink']:,.0f} rows/s (stream holds "
            f"{res['sink_count']:,}); the same write again: {res['sink_again']:,.0f} rows/s, stream "
            f"holds {res['sink_count_again']:,}"
        )
        print(f"  memory (max RSS) once the stream was filled: {mem.report('filled')}")
        print(f"  memory during the batch reads: {mem.report('read')}")
        print(f"  memory during the streaming reads: {mem.report('stream')}")
        print(f"  memory during the sink's writes: {mem.report('sink')}")
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
