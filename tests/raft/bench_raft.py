"""Throughput of the Raft library (run by hand: ``make raft-bench``, or
``.venv/bin/python -m tests.raft.bench_raft``). Not a test: it prints numbers, asserts nothing.

Three measurements, all CPU seconds of this one process (the machine is shared; wall time is
noisy), three voters, no faults:

* ``sim``: the deterministic simulation with a fault-free plan (scheduler, network model and
  checkers included), committed entries per CPU second;
* ``loop``: the library alone, three in-memory hosts passing messages directly (and, in a second
  row, through the codec as bytes), a leader proposing batches; entries and entry bytes per CPU
  second;
* ``disk``: the same with RaftLogStores on disk, one fdatasync per Ready per node (the group
  commit: one Ready holds every proposal since the previous one).

A JetStream entry will carry a batch of messages (everything a stream leader took in since its
last proposal), so messages/s = entries/s x messages per entry.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from jetpy.raft import (
    Config,
    LogStore,
    Membership,
    MemoryLog,
    Message,
    RaftNode,
    Role,
    Snapshot,
    SnapshotMeta,
    decode,
    encode,
    persist_ready,
)
from jetpy.store.raftlog import RaftLogStore

from .sim import Plan, Sim

IDS = ("a", "b", "c")
MEMBERS = Membership(frozenset(IDS))


class Cluster:
    def __init__(self, stores: dict[str, LogStore], wire: bool) -> None:
        self.stores = stores
        self.nodes = {
            nid: RaftNode(Config(nid, max_append_bytes=4 << 20, max_inflight=64), s, random.Random(i))
            for i, (nid, s) in enumerate(stores.items())
        }
        self.inbox: list[Message] = []
        self.wire = wire
        self.applied = 0
        self.syncs = 0

    def send(self, msgs: list[Message]) -> None:
        if self.wire:
            self.inbox.extend(decode(encode(m)) for m in msgs)
        else:
            self.inbox.extend(msgs)

    def pump(self, nid: str) -> None:
        node, store = self.nodes[nid], self.stores[nid]
        while node.has_ready():
            rd = node.ready()
            self.send(rd.messages)
            persist_ready(store, rd)
            if rd.must_sync:
                store.sync()
                self.syncs += 1
            self.send(rd.persisted_messages)
            if nid == "a":
                self.applied += len(rd.committed)
            node.advance(rd)

    def settle(self) -> None:
        for nid in self.nodes:
            self.pump(nid)
        while self.inbox:
            batch, self.inbox = self.inbox, []
            for m in batch:
                self.nodes[m.dst].step(m)
            for nid in self.nodes:
                self.pump(nid)


def bench_loop(
    stores: dict[str, LogStore], wire: bool, batch: int, size: int, seconds: float
) -> tuple[float, int, int]:
    c = Cluster(stores, wire)
    c.nodes["a"].campaign()
    c.settle()
    assert c.nodes["a"].role is Role.LEADER
    item = bytes(size)
    items = [item] * batch
    leader = c.nodes["a"]
    start_applied = c.applied
    t0 = time.process_time()
    w0 = time.perf_counter()
    rounds = 0
    while time.perf_counter() - w0 < seconds:
        leader.propose_batch(items)
        c.settle()
        rounds += 1
        if rounds % 50 == 0:  # keep memory flat: the hosts would snapshot; here just compact
            for nid, node in c.nodes.items():
                idx = node.log.applied
                if idx > node.log.first_index():
                    c.stores[nid].compact(node.snapshot_at(idx, b""))
    cpu = time.process_time() - t0
    return cpu, c.applied - start_applied, c.syncs


def report(name: str, cpu: float, entries: int, size: int, extra: str = "") -> None:
    rate = entries / cpu if cpu else 0.0
    print(f"{name:<34} {rate:>12,.0f} entries/s  {rate * size / 1e6:>8.1f} MB/s of entry data  {extra}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args(argv)

    plan = Plan(nodes=3, fault_ticks=300, propose_rate=3.0, max_delay=20, fsync=(1, 5))
    t0 = time.process_time()
    sims = [Sim(seed, plan).run() for seed in range(10)]
    cpu = time.process_time() - t0
    commits = sum(s.commits for s in sims)
    print(f"{'sim, no faults (3 nodes, 10 runs)':<34} {commits / cpu:>12,.0f} entries/s  ({commits} entries)")

    def memory() -> dict[str, LogStore]:
        return {nid: MemoryLog(Snapshot(SnapshotMeta(0, 0, MEMBERS))) for nid in IDS}

    for batch, size in ((1, 1024), (16, 1024), (128, 1024)):
        for wire in (False, True):
            cpu, n, _ = bench_loop(memory(), wire, batch, size, args.seconds)
            label = f"loop, memory, {batch:>3} x {size} B{' + codec' if wire else ''}"
            report(label, cpu, n, size)

    root = Path(tempfile.mkdtemp(prefix="jetpy-raft-bench-", dir="/var/tmp"))
    try:
        for batch in (16, 128):
            stores: dict[str, LogStore] = {
                nid: RaftLogStore.create(root / f"{batch}-{nid}", Snapshot(SnapshotMeta(0, 0, MEMBERS)))
                for nid in IDS
            }
            w0 = time.perf_counter()
            cpu, n, syncs = bench_loop(stores, True, batch, 1024, args.seconds)
            wall = time.perf_counter() - w0
            for s in stores.values():
                assert isinstance(s, RaftLogStore)
                s.close()
            report(
                f"disk, {batch:>3} x 1024 B + codec",
                cpu,
                n,
                1024,
                f"(wall {n / wall:,.0f} entries/s, {syncs / n * batch:.2f} fsyncs per batch per cluster)",
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
