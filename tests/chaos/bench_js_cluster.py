"""Publishes (or a durable pull consumer's fetches and acks) per second on a replicated stream: three jetpy servers (``chaos.jsnode``, with
nats-server's Raft timers) against three nats-server processes, the same natsbench scenario (``jspub``, or ``jsfetch``: a prefilled stream read by a durable pull consumer
with explicit acks) run against each in alternation, and the servers' CPU time per message (the three processes summed,
from /proc).

    python -m chaos.bench_js_cluster [--replicas 3] [--n 100000] [--rounds 3]
        [--scenario jspub|jsfetch] [--natsbench /tmp/natsbench] [--nats-server PATH]

(from ``tests/``; natsbench is built by ``/work/shared/bench/build.sh``). Prints one JSON line per
run and the medians. Every process started here is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from conftest import free_port

from .jscluster import JsCluster


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class NatsCluster:
    """Three nats-server processes with JetStream in one cluster."""

    def __init__(self, binary: str, root: Path) -> None:
        self.binary = binary
        self.root = root
        self.ports = [(free_port(), free_port()) for _ in range(3)]
        self.http_ports = [free_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.ports[0][0]}"

    def start(self) -> None:
        routes = ",".join(f"nats-route://127.0.0.1:{c}" for _, c in self.ports)
        for i, (port, cport) in enumerate(self.ports):
            store = self.root / f"s{i + 1}"
            store.mkdir(parents=True, exist_ok=True)
            cmd = [self.binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)]
            cmd += ["-m", str(self.http_ports[i])]
            cmd += ["-n", f"s{i + 1}", "--cluster_name", "NSC", "--cluster", f"nats://127.0.0.1:{cport}"]
            cmd += ["--routes", routes]
            log = open(self.root / f"s{i + 1}.log", "wb")  # noqa: SIM115 - the process keeps it
            self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _holds(http_port: int, stream: str) -> bool:
    """Whether the server (its monitoring port) holds a replica of the stream, from /jsz."""
    url = f"http://127.0.0.1:{http_port}/jsz?accounts=true&streams=true"
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.load(r)
    return any(
        sd.get("name") == stream
        for acc in doc.get("account_details") or []
        for sd in acc.get("stream_detail") or []
    )


def run_bench(
    natsbench: str, url: str, replicas: int, n: int, stream: str, scenario: str = "jspub"
) -> dict[str, float]:
    cmd = [natsbench, "-s", scenario, "-storage", "file", "-replicas", str(replicas), "-n", str(n)]
    cmd += ["-size", "128", "-window", "4000", "-stream", stream, "-url", url, "-timeout", "60s", "-keep"]
    cmd += ["-subject", f"bench.{stream}"]  # (a stream kept from an earlier run takes its own)
    for _ in range(60):  # until the meta group answers
        out = subprocess.run(cmd, capture_output=True, timeout=150)
        lines = [ln for ln in out.stdout.decode().splitlines() if ln.startswith("{")]
        if out.returncode == 0 and lines:
            doc: dict[str, float] = json.loads(lines[-1])
            return doc
        time.sleep(1)
    raise RuntimeError(f"natsbench failed: {out.stderr.decode()[-2000:]}")


def one(kind: str, args: argparse.Namespace, round_: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix=f"bench-js-{kind}-"))
    try:
        if kind == "jetpy":
            c = JsCluster(root, tick=0.5)
            c.start()
            url, pids, stop = c.urls[0], [n.popen.pid for n in c.nodes.values() if n.popen], c.stop
            http = [n.http_port for n in c.nodes.values()]
        else:
            nc = NatsCluster(args.nats_server, root)
            nc.start()
            time.sleep(2)
            url, pids, stop, http = nc.url, nc.pids(), nc.stop, nc.http_ports
        try:
            for attempt in range(12):
                stream = f"B{round_}x{attempt}"
                before = sum(_cpu(p) for p in pids)
                doc = run_bench(args.natsbench, url, args.replicas, args.n, stream, args.scenario)
                doc["cpu_us_per_msg"] = (sum(_cpu(p) for p in pids) - before) / args.n * 1e6
                # the servers holding the stream (the client is on the first)
                holders = [f"s{i + 1}" for i, port in enumerate(http) if _holds(port, stream)]
                doc["holders"] = ",".join(holders)  # type: ignore[assignment]
                if not args.local or holders[:1] == ["s1"]:
                    break
        finally:
            stop()
        doc["server"] = kind  # type: ignore[assignment]
        return doc
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(prog="bench_js_cluster")
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--natsbench", default="/tmp/natsbench")
    p.add_argument("--nats-server", default=str(Path(sys.executable).parent / "nats-server"))
    p.add_argument("--scenario", choices=["jspub", "jsfetch"], default="jspub")
    p.add_argument(
        "--local",
        action="store_true",
        help="run again (a new stream) until the stream is placed on the client's server (R1)",
    )
    p.add_argument("--only", choices=["jetpy", "nats-server"], default=None)
    args = p.parse_args()
    got: dict[str, list[float]] = {"jetpy": [], "nats-server": []}
    for r in range(args.rounds):
        for kind in ["jetpy", "nats-server"]:
            if args.only and kind != args.only:
                continue
            doc = one(kind, args, r)
            print(json.dumps(doc), flush=True)
            got[kind].append(float(doc["msgs_per_s"]))
    for kind, vals in got.items():
        if vals:
            print(
                f"{kind}: {args.scenario} R{args.replicas} median {statistics.median(vals):,.0f} msgs/s {vals}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
