"""Spark connector throughput, all from one run: batch reads of an N-message stream (100-byte
payloads on 16 subjects) against Spark reading the same rows from Parquet (all six columns, and
only the two the query uses, named by a schema), a filtered read (1 of 16 subjects) with the
bytes the server sent, AvailableNow streaming with 100k-message triggers, the sink writing N rows
(and again, to show exactly-once), and the memory of the server and of Spark's Python workers
while they run. Results feed README's Spark section.

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
from datetime import datetime
from pathlib import Path
from typing import Any

import nats

STREAM = "SPARKBENCH"
SINK = "SPARKSINK"
WARM = "SPARKWARM"
RUNS = 5
TWO = "seq bigint, data binary"
"""The schema of the two-column reads: the columns the bench query uses."""
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
    for name, subjects in ((STREAM, ["bench.>"]), (SINK, ["sink.>"]), (WARM, ["warm.>"])):
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
    return n / dt if n else 0.0


async def stream_msgs(url: str, name: str) -> int:
    nc = await nats.connect(url)
    try:
        return int((await nc.jetstream().stream_info(name)).state.messages)
    finally:
        await nc.close()


def out_bytes(http_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/varz", timeout=5) as r:
        return int(json.loads(r.read())["out_bytes"])


def descendants(root: int) -> dict[int, bytes]:
    """The processes below ``root`` (Spark's JVM and its Python workers: not other users'
    Spark sessions on a shared machine), with their command lines."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    out: dict[int, bytes] = {}
    for pid in parent:
        p = pid
        while p > 1 and p != root:
            p = parent.get(p, 0)
        if p == root and pid != root:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    out[pid] = f.read()
            except OSError:
                continue
    return out


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
        workers: list[int] = []
        looked = 0.0
        while not self._stop.is_set():
            phase = self.phase
            if self.server_pid:
                self.server[phase] = max(self.server.get(phase, 0), self._rss(self.server_pid))
            seen = self.workers.setdefault(phase, {})
            if time.monotonic() - looked > 1.0:  # which processes: a scan of /proc once a second
                looked = time.monotonic()
                workers = [
                    pid
                    for pid, cmd in descendants(me).items()
                    if b"pyspark" in cmd and b"java" not in cmd.split(b"\0")[0]
                ]
            for pid in workers:
                seen[pid] = max(seen.get(pid, 0), self._rss(pid))
            time.sleep(0.1)

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


def _cpu_of(pid: str) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Cpu:
    """CPU seconds (user + system, from /proc) of the server, Spark's JVM, Spark's Python
    workers, the planner process Spark starts for each streaming query, and this driver, between
    :meth:`start` and :meth:`stop` of a measurement. A sampler keeps each process's last reading,
    so that processes which ended in between (each query's planner) are counted too."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self._t0: dict[str, tuple[str, float]] = {}
        self._last: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._sample, daemon=True).start()

    def _read(self) -> dict[str, tuple[str, float]]:
        me = os.getpid()
        out: dict[str, tuple[str, float]] = {str(me): ("driver (this script)", _cpu_of(str(me)))}
        if self.server_pid:
            out[str(self.server_pid)] = ("server", _cpu_of(str(self.server_pid)))
        for pid, cmd in descendants(me).items():
            if pid == self.server_pid:
                continue
            if b"java" in cmd.split(b"\0")[0]:
                role = "Spark JVM"
            elif b"python_streaming_source_runner" in cmd:
                role = "Spark Python planners"
            elif b"pyspark" in cmd:
                role = "Spark Python workers"
            else:
                continue
            out[str(pid)] = (role, _cpu_of(str(pid)))
        return out

    def _sample(self) -> None:
        while True:
            self._now()
            time.sleep(0.5)

    def _now(self) -> dict[str, tuple[str, float]]:
        now = self._read()
        with self._lock:
            for pid, (role, t) in now.items():
                if t or pid not in self._last:  # a process that just ended reads 0
                    self._last[pid] = (role, t)
            return dict(self._last)

    def start(self) -> None:
        self._t0 = self._now()

    def stop(self, n: int) -> str:
        """CPU per message of each role since :meth:`start` (``n`` messages)."""
        by: dict[str, float] = {}
        for pid, (role, t) in self._now().items():
            by[role] = by.get(role, 0.0) + t - self._t0.get(pid, (role, 0.0))[1]
        return "; ".join(f"{role} {1e6 * t / n:.2f} µs" for role, t in sorted(by.items()))


def spread(values: list[float], fmt: str = ",.0f") -> str:
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def spark_runs(
    url: str, n: int, tmp: Path, master: str, http_port: int | None, mem: Memory, only: set[str], cpu: Cpu
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

    if "read" in only:
        _reads(spark, df, url, n, tmp, http_port, mem, cpu, timed, out)
    if "stream" in only:
        _streams(spark, url, n, tmp, mem, cpu, out)
    if "sink" in only:
        _sink(spark, F, url, n, mem, cpu, out)
    mem.phase = "end"
    spark.stop()
    return out


def _reads(
    spark: Any,
    df: Any,
    url: str,
    n: int,
    tmp: Path,
    http_port: int | None,
    mem: Memory,
    cpu: Cpu,
    timed: Any,
    out: dict[str, Any],
) -> None:
    mem.phase = "read"
    out["cold"] = timed(df, n)
    cpu.start()
    out["warm"] = [timed(df, n) for _ in range(RUNS)]
    out["read_cpu"] = cpu.stop(n * RUNS)
    mem.phase = "other"
    pq = str(tmp / "bench.parquet")
    df.write.mode("overwrite").parquet(pq)
    pdf = spark.read.parquet(pq)
    timed(pdf, n)
    out["parquet"] = [timed(pdf, n) for _ in range(RUNS)]
    # alternated, so that both see the same moments of a shared machine
    pairs = [(timed(df, n), timed(pdf, n)) for _ in range(RUNS)]
    out["ratio"] = [a / b for a, b in pairs]
    # the same query reading only the two columns it uses (a schema given to the reader)
    two = spark.read.format("jetstream").option("servers", url).option("stream", STREAM).schema(TWO).load()
    timed(two, n)
    cpu.start()
    out["two"] = [timed(two, n) for _ in range(RUNS)]
    out["two_cpu"] = cpu.stop(n * RUNS)
    pairs = [(timed(two, n), timed(pdf, n)) for _ in range(RUNS)]
    out["two_ratio"] = [a / b for a, b in pairs]

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


FS_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
"""Spark's checkpoint logs through Hadoop's FileSystem API: on a local directory without Hadoop's
native library, the default (FileContext) forks ``readlink`` twice for each log file, its
checksum file and their temporary names (16 processes per micro-batch)."""


def _streams(spark: Any, url: str, n: int, tmp: Path, mem: Memory, cpu: Cpu, out: dict[str, Any]) -> None:
    parts = ("triggerExecution", "addBatch", "walCommit", "commitOffsets", "queryPlanning", "latestOffset")

    starts: list[float] = []  # seconds from a query's start() to its first micro-batch

    def stream_run(batches: list[dict[str, int]] | None = None) -> tuple[float, int]:
        t_wall = time.time()
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
        done = [p for p in q.recentProgress if p["numInputRows"]]
        if batches is not None:
            batches.extend({k: int(p["durationMs"].get(k, 0)) for k in parts} for p in done)
            starts.append(datetime.fromisoformat(done[0]["timestamp"]).timestamp() - t_wall)
        return n / dt, len(done)

    def report(batches: list[dict[str, int]]) -> str:
        med = {k: statistics.median(b[k] for b in batches) for k in parts}
        rate = 100_000 / med["triggerExecution"] * 1000 if med["triggerExecution"] else 0.0
        return f"{rate:,.0f} msgs/s (median ms: " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()) + ")"

    mem.phase = "stream"
    out["stream_first"], out["stream_batches"] = stream_run()
    # Spark's JVM is still compiling its driver's code for the first queries (seconds of CPU per
    # query, falling query by query): two more before the measured ones, reported as they come
    out["stream_warming"] = [stream_run()[0] for _ in range(2)]
    batches: list[dict[str, int]] = []
    cpu.start()
    out["stream_warm"] = [stream_run(batches)[0] for _ in range(3)]
    out["stream_cpu"] = cpu.stop(3 * n)
    out["stream_batch"] = report(batches)
    out["stream_start"], starts[:] = list(starts), []
    out["stream_load"] = os.getloadavg()[0]
    key = "spark.sql.streaming.checkpointFileManagerClass"
    before = spark.conf.get(key, None)
    spark.conf.set(key, FS_CHECKPOINTS)
    try:
        batches = []
        cpu.start()
        out["stream_fs"] = [stream_run(batches)[0] for _ in range(3)]
        out["stream_fs_cpu"] = cpu.stop(3 * n)
        out["stream_fs_batch"] = report(batches)
        out["stream_fs_start"] = list(starts)
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _sink(spark: Any, F: Any, url: str, n: int, mem: Memory, cpu: Cpu, out: dict[str, Any]) -> None:
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
    # the first write of a session also warms Spark's JVM and starts its Python workers (seconds
    # of CPU): a write of a tenth as many rows to another stream first, with its own rate
    t = time.perf_counter()
    rows.limit(n // 10).write.format("jetstream").option("servers", url).option("writeId", "warm").option(
        "subject", "warm.rows"
    ).mode("append").save()
    out["sink_cold"] = (n // 10) / (time.perf_counter() - t)
    cpu.start()
    t = time.perf_counter()
    sink.save()
    out["sink"] = n / (time.perf_counter() - t)
    out["sink_cpu"] = cpu.stop(n)
    out["sink_count"] = asyncio.run(stream_msgs(url, SINK))
    cpu.start()
    t = time.perf_counter()
    sink.save()  # the same write again: every row a duplicate the stream drops
    out["sink_again"] = n / (time.perf_counter() - t)
    out["sink_again_cpu"] = cpu.stop(n)
    out["sink_count_again"] = asyncio.run(stream_msgs(url, SINK))


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--msgs", type=int, default=1_000_000)
    ap.add_argument("--servers", default=None)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--only", default="read,stream,sink", help="comma-separated measurements: read, stream, sink"
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
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
        filled = args.msgs if only & {"read", "stream"} else 0
        print(f"  publish (nats-py, async acks): {asyncio.run(fill(url, filled)):,.0f} msg/s", flush=True)
        mem = Memory(proc.pid if proc else None)
        mem.phase = "filled"
        time.sleep(0.2)
        res = spark_runs(
            url, args.msgs, tmp, args.master, http_port, mem, only, Cpu(proc.pid if proc else None)
        )
        mem.stop()
        m = args.master
        print(f"  load average at the end {os.getloadavg()[0]:.2f}")
        if "read" in only:
            _print_reads(res, m, mem)
        if "stream" in only:
            print(
                f"  streaming, AvailableNow, 100k per trigger, noop sink: first query {res['stream_first']:,.0f} "
                f"msg/s in {res['stream_batches']} micro-batches; the next two "
                f"{', '.join(format(r, ',.0f') for r in res['stream_warming'])}; later queries "
                f"{spread(res['stream_warm'])}"
            )
            print(f"    CPU per message, later queries: {res['stream_cpu']}")
            print(f"    a micro-batch of later queries: {res['stream_batch']}; load {res['stream_load']:.2f}")
            print(
                f"    a query's start, from start() to its first micro-batch: {spread(res['stream_start'], '.2f')} s"
            )
            print(
                f"  the same with Spark's FileSystem-based checkpoint logs ({FS_CHECKPOINTS.rsplit('.', 1)[1]}): "
                f"{spread(res['stream_fs'])}"
            )
            print(f"    CPU per message: {res['stream_fs_cpu']}")
            print(f"    a micro-batch: {res['stream_fs_batch']}")
            print(f"    a query's start: {spread(res['stream_fs_start'], '.2f')} s")
            print(f"  memory during the streaming reads: {mem.report('stream')}")
        if "sink" in only:
            print(
                f"  sink, {args.msgs:,} rows with Nats-Msg-Id: {res['sink']:,.0f} rows/s (stream holds "
                f"{res['sink_count']:,}); the same write again: {res['sink_again']:,.0f} rows/s, stream "
                f"holds {res['sink_count_again']:,}"
            )
            print(f"    the session's first write ({args.msgs // 10:,} rows): {res['sink_cold']:,.0f} rows/s")
            print(f"    CPU per row: {res['sink_cpu']}")
            print(f"    CPU per row, again: {res['sink_again_cpu']}")
            print(f"  memory during the sink's writes: {mem.report('sink')}")
        print(f"  memory (max RSS) once the stream was filled: {mem.report('filled')}")
        return 0
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def _print_reads(res: dict[str, Any], m: str, mem: Memory) -> None:
    print(f"  partitions of the batch read: {res['partitions']}")
    print(f"  Spark batch read ({m}), first query: {res['cold']:,.0f} msg/s")
    print(f"  Spark batch read ({m}), warm, min / median / max of {RUNS}: {spread(res['warm'])} msg/s")
    print(f"    CPU per message, warm reads: {res['read_cpu']}")
    print(f"  Spark reading the same rows from Parquet, warm: {spread(res['parquet'])} rows/s")
    print(f"  ratio jetstream / Parquet, alternated runs: {spread(res['ratio'], '.2f')}")
    print(f"  Spark batch read of two columns (schema '{TWO}'), warm: {spread(res['two'])} msg/s")
    print(f"    CPU per message, two-column reads: {res['two_cpu']}")
    print(f"  ratio two-column jetstream / Parquet, alternated runs: {spread(res['two_ratio'], '.2f')}")
    print(
        f"  filtered read (bench.3, {res['filtered_rows']:,} rows): {res['filtered']:,.0f} msg/s; "
        f"server sent {res['filtered_bytes']:,} bytes (the whole stream's read: {res['all_bytes']:,})"
    )
    print(f"  memory during the batch reads: {mem.report('read')}")


if __name__ == "__main__":
    sys.exit(main())
