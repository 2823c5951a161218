"""Proposals per second through a three-server group with quorum fsync: the replicated test
service's appends, each answered only once two of the three servers have it on disk and it
applied, from a nats-py client keeping ``--in-flight`` requests outstanding.

    python -m chaos.bench_group [--count 20000] [--in-flight 256] [--via leader|follower]

(from ``tests/``). Reports proposals per second, latency percentiles, log entries per proposal
(many proposals share an entry and its fsync) and the servers' CPU time per proposal (the three
processes summed, from /proc). ``--via follower`` sends every request to a follower, which
forwards it to the leader.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .cluster import ChaosCluster, Settings


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench(count: int, in_flight: int, via: str, size: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="bench-group-"))
    c = ChaosCluster(root, Settings(size=size, proxied=False, power_ledger=False, snapshot_entries=0))
    try:
        await c.start()
        leader, _ = await c.leader()
        target = leader if via == "leader" else next(n for n in c.founders if n != leader)
        for i in range(200):  # warm up
            await c.request(target, {"op": "append", "k": "warm", "v": i})
        pids = [n.popen.pid for n in c.nodes.values() if n.popen is not None]
        before = (await c.raftz(leader) or {})["committed"]
        cpu0 = sum(_cpu(p) for p in pids)
        sem = asyncio.Semaphore(in_flight)
        latencies: list[float] = []

        async def one(i: int) -> None:
            async with sem:
                t = time.perf_counter()
                doc = await c.request(target, {"op": "append", "k": "log", "v": i}, 30)
                latencies.append(time.perf_counter() - t)
                assert doc.get("ok"), doc

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        wall = time.perf_counter() - t0
        cpu = sum(_cpu(p) for p in pids) - cpu0
        entries = (await c.raftz(leader) or {})["committed"] - before
        latencies.sort()
        return {
            "proposals_per_s": count / wall,
            "p50_ms": statistics.median(latencies) * 1e3,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1e3,
            "proposals_per_entry": count / max(1, entries),
            "server_cpu_us_per_proposal": cpu / count * 1e6,
        }
    finally:
        await c.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="chaos.bench_group")
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--in-flight", type=int, default=256)
    p.add_argument("--via", choices=("leader", "follower"), default="leader")
    p.add_argument("--size", type=int, default=3)
    ns = p.parse_args(argv)
    r = asyncio.run(bench(ns.count, ns.in_flight, ns.via, ns.size))
    print(
        f"{ns.size} servers, via the {ns.via}, {ns.in_flight} in flight: {r['proposals_per_s']:,.0f} proposals/s, "
        f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['proposals_per_entry']:.0f} proposals per entry, "
        f"server CPU {r['server_cpu_us_per_proposal']:.0f} µs per proposal (three processes)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
