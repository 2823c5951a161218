"""A replicated consumer under kill -9: ``make chaos``'s JetStream consumer run.

    python -m chaos.js_consumers --duration 60 [--seed 7] [--out DIR] [--snapshot-entries N]

(from ``tests/``). Three clustered JetStream servers (``chaos.jsnode``), an R3 file work-queue
stream and an R3 durable pull consumer (explicit acks, ``ack_wait`` 2 s). A publisher publishes unique ids
(``Nats-Msg-Id``, retried until a PubAck) and records each PubAck's sequence; a worker fetches
and acknowledges with ``ack_sync``, recording every delivery and every confirmed ack; meanwhile
a random server (the consumer's leader half the time) is killed -9 and started again, one at a
time. Then every server runs, the worker drains the consumer, and the checks say exactly which
sequences went wrong, if any:

* **never delivered again after a confirmed ack** (an ``ack_sync`` that returned is on a
  quorum's disk: no leader may hand that message out again);
* **never skipped**: every sequence the stream acknowledged was delivered, and the consumer ends
  with its ack floor at the stream's last sequence and nothing pending;
* **the work is gone**: every replica of the stream ends empty (what was acknowledged was
  removed through the stream's log), at one last sequence (a replica that applied an entry
  twice held its messages again at sequences of its own).

``--snapshot-entries`` has the groups compact their logs that often (the servers' default
otherwise), so that servers coming back catch up from their leaders' snapshots.

Writes ``report.json`` in the run's directory; the exit status is 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import APIError

from .jscluster import JsCluster

RETRY = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,  # no JetStream API subscribed yet (a server starting)
)


async def _retry(call: Any, until: float) -> Any:
    while time.monotonic() < until:
        try:
            return await call()
        except RETRY:
            await asyncio.sleep(0.1)
        except APIError as e:
            if e.err_code != 10008:
                raise
            await asyncio.sleep(0.1)
    raise TimeoutError("no answer")


class Run:
    def __init__(self, cluster: JsCluster, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng
        self.published: dict[int, str] = {}  # PubAck sequence -> id
        self.delivered: dict[int, int] = {}  # sequence -> deliveries seen
        self.confirmed: set[int] = set()  # ack_sync returned
        self.again: list[int] = []  # delivered after a confirmed ack: a violation
        self.kills: list[dict[str, Any]] = []
        self.stopping = False

    async def publisher(self, js: Any) -> None:
        i = 0
        while not self.stopping:
            i += 1
            mid = f"m{i}"
            try:
                ack = await _retry(
                    lambda i=i, mid=mid: js.publish(
                        f"jobs.{i}", mid.encode(), timeout=1, headers={"Nats-Msg-Id": mid}
                    ),
                    time.monotonic() + 60,
                )
            except TimeoutError:
                continue
            self.published[ack.seq] = mid
            await asyncio.sleep(0.005)

    async def worker(self, js: Any, until: Any) -> None:
        sub = None
        while not until():
            try:
                if sub is None:
                    sub = await js.pull_subscribe_bind("W", "JOBS")
                msgs = await sub.fetch(20, timeout=1)
            except RETRY:
                continue
            for m in msgs:
                seq = m.metadata.sequence.stream
                if seq in self.confirmed:
                    self.again.append(seq)
                self.delivered[seq] = self.delivered.get(seq, 0) + 1
                try:
                    await m.ack_sync(timeout=1)
                except RETRY:
                    continue  # not confirmed: it may come again
                self.confirmed.add(seq)

    async def nemesis(self, until: float) -> None:
        names = sorted(self.cluster.nodes)
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(1.0, 3.0))
            victim = self.rng.choice(names)
            t0 = time.monotonic()
            self.cluster.kill(victim)
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))
            self.cluster.start(victim)
            self.kills.append({"server": victim, "down_s": round(time.monotonic() - t0, 2)})


async def run(root: Path, duration: float, seed: int, snapshot_entries: int = 0) -> dict[str, Any]:
    cluster = JsCluster(root, snapshot_entries=snapshot_entries)
    rng = random.Random(seed)
    r = Run(cluster, rng)
    started = time.monotonic()
    drained = False
    left: dict[str, Any] = {}
    last_seqs: dict[str, Any] = {}
    try:
        cluster.start()

        async def quiet(e: Exception) -> None:  # servers are killed on purpose: no tracebacks
            pass

        async with await nats.connect(
            servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2, error_cb=quiet
        ) as nc:
            js = nc.jetstream(timeout=3)
            deadline = time.monotonic() + 60
            await _retry(
                lambda: js.add_stream(
                    name="JOBS", subjects=["jobs.>"], num_replicas=3, retention="workqueue"
                ),
                deadline,
            )
            cfg = ConsumerConfig(
                durable_name="W", ack_policy=AckPolicy.EXPLICIT, ack_wait=2, max_ack_pending=200
            )
            await _retry(lambda: js.add_consumer("JOBS", cfg), deadline)
            faults_end = time.monotonic() + duration
            pub = asyncio.create_task(r.publisher(js))
            work = asyncio.create_task(r.worker(js, lambda: r.stopping))
            await r.nemesis(faults_end)
            r.stopping = True
            await asyncio.gather(pub, work)
            # every server up; drain what is left (redeliveries after ack_wait included)
            last = max(r.published, default=0)
            drain_end = time.monotonic() + 120
            while time.monotonic() < drain_end:
                ci = await _retry(lambda: js.consumer_info("JOBS", "W"), drain_end)
                if ci.num_pending == 0 and ci.num_ack_pending == 0 and ci.ack_floor.stream_seq >= last:
                    drained = True
                    break
                await r.worker(js, lambda t=time.monotonic() + 3: time.monotonic() > t)
            for _ in range(100):  # the removals reach every replica
                states = {n: node.stream_state("JOBS") or {} for n, node in cluster.nodes.items()}
                left = {n: st.get("messages") for n, st in states.items()}
                last_seqs = {n: st.get("last_seq") for n, st in states.items()}
                if all(v == 0 for v in left.values()) and len(set(last_seqs.values())) == 1:
                    break
                await asyncio.sleep(0.1)
    finally:
        cluster.stop()
    skipped = sorted(s for s in r.published if s not in r.delivered)
    report = {
        "seed": seed,
        "duration": duration,
        "wall_seconds": round(time.monotonic() - started, 1),
        "published": len(r.published),
        "delivered": len(r.delivered),
        "deliveries": sum(r.delivered.values()),
        "confirmed_acks": len(r.confirmed),
        "delivered_after_confirmed_ack": sorted(set(r.again)),
        "skipped": skipped,
        "drained": drained,
        "left_on_replicas": left,
        "last_seqs": last_seqs,
        "kills": r.kills,
    }
    report["ok"] = (
        not r.again
        and not skipped
        and drained
        and all(v == 0 for v in left.values())
        and len(set(last_seqs.values())) == 1
    )
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="chaos.js_consumers", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", default="", help="directory for the servers' files and the report")
    p.add_argument("--snapshot-entries", type=int, default=0, help="compact the groups' logs this often")
    ns = p.parse_args(argv)
    seed = ns.seed if ns.seed is not None else random.randrange(1 << 30)
    root = Path(ns.out) if ns.out else Path(tempfile.mkdtemp(prefix="chaos-js-consumers-"))
    report = asyncio.run(run(root, ns.duration, seed, ns.snapshot_entries))
    (root / "report.json").write_text(json.dumps(report, indent=2))
    print(
        f"JetStream consumer under kill -9 (seed {seed}, {ns.duration:g}s, {len(report['kills'])} kills): "
        f"{report['published']} published, {report['deliveries']} deliveries, "
        f"{report['confirmed_acks']} confirmed acks; delivered again after a confirmed ack: "
        f"{report['delivered_after_confirmed_ack'] or 'none'}; skipped: {report['skipped'] or 'none'}; "
        f"drained: {report['drained']}; left on the replicas: {report['left_on_replicas']}, "
        f"last sequences: {report['last_seqs']} "
        f"-> {'PASS' if report['ok'] else 'FAIL'}"
    )
    print(f"  report: {root / 'report.json'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
