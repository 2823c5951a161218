"""The faults a run inflicts, one episode at a time, chosen by a seeded random generator, and how
long the cluster takes to recover from those that take its leader.

Each episode hurts at most a minority of the servers (one of three, two of five), as Raft
promises to ride out, except ``power-loss-all``, which takes every server down at once (a
coordinated power failure: with quorum fsync before every answer nothing acknowledged may be
lost). Episodes:

``kill-leader`` ``kill-follower`` ``kill-minority``  kill -9, then a restart
``pause-leader`` ``pause-follower``                  SIGSTOP past an election, then SIGCONT
``partition-leader`` ``partition-minority``          both ways, through the route proxies
``one-way``                                          the leader's messages stop arriving, the
                                                     others' still reach it
``delay``                                            one server's routes slowed by 50-300 ms
``power-loss`` ``power-loss-all``                    kill -9, un-fsynced writes lost, restart
``corrupt`` ``truncate``                             kill -9, a bit flipped in / a cut at a record
                                                     of a log segment, restart

For the episodes that remove the leader, the time from the fault to a new leader (agreed by a
majority, from ``/raftz``) and to the first write that succeeds is measured. The cluster says
which group's leader an episode aims at (``choose_target``: the test service has one group, the
JetStream run a stream's and a KV bucket's) and what a write is (``probe``).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Final

from .cluster import ChaosCluster

FAULTS: Final = (
    "kill-leader",
    "kill-follower",
    "kill-minority",
    "pause-leader",
    "pause-follower",
    "partition-leader",
    "partition-minority",
    "one-way",
    "delay",
    "power-loss",
    "power-loss-all",
    "corrupt",
    "truncate",
)
MEASURE_LIMIT: Final = 10.0  # seconds a recovery is waited for before the episode ends anyway
LEADER_FAULTS: Final = frozenset({"kill-leader", "pause-leader", "partition-leader", "one-way"})


@dataclass
class Episode:
    kind: str
    start: float
    end: float = 0.0
    targets: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    election: float | None = None  # seconds from the fault to a new leader
    first_write: float | None = None  # ... and to the first write that succeeded


class Nemesis:
    def __init__(self, cluster: ChaosCluster, rng: random.Random, faults: tuple[str, ...] = FAULTS) -> None:
        self.cluster = cluster
        self.rng = rng
        self.faults = faults
        self.episodes: list[Episode] = []
        e = cluster.s.election_timeout
        self.hold = (2.5 * e, 5.0 * e)  # how long a fault lasts
        self.quiet = (1.0 * e, 3.0 * e)  # between two faults

    async def run(self, until: float) -> None:
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(*self.quiet))
            if time.monotonic() >= until:
                break
            kind = self.rng.choice(self.faults)
            ep = Episode(kind, time.monotonic())
            self.episodes.append(ep)
            try:
                await self._episode(ep)
            except Exception as exc:
                ep.notes.append(f"harness: {type(exc).__name__}: {exc}")
            finally:
                await self.heal()
                ep.end = time.monotonic()

    async def heal(self) -> None:
        """Lift every fault: links healed, servers resumed, dead ones restarted."""
        c = self.cluster
        c.faults.heal()
        for name, node in c.nodes.items():
            if node.paused:
                c.resume(name)
            if node.starts and not node.alive:
                await c.launch(name)

    def _size_of_minority(self) -> int:
        return (len(self.cluster.founders) - 1) // 2

    async def _episode(self, ep: Episode) -> None:
        c, rng = self.cluster, self.rng
        kind = ep.kind
        names = [n for n in c.founders if c.nodes[n].alive]
        c.choose_target(rng)
        leader, _ = await c.leader(within=10)
        followers = [n for n in names if n != leader]
        hold = rng.uniform(*self.hold)
        if kind in LEADER_FAULTS:
            ep.targets = [leader]
            t0 = time.monotonic()
            if kind == "kill-leader":
                c.kill(leader)
            elif kind == "pause-leader":
                c.pause(leader)
            elif kind == "partition-leader":
                c.faults.partition([leader], followers)
            else:
                for f in followers:
                    c.faults.cut(leader, f)
            await self._measure(ep, t0, leader)
            await asyncio.sleep(max(0.0, hold - (time.monotonic() - t0)))
            return
        if kind in ("kill-follower", "pause-follower"):
            victim = rng.choice(followers)
            ep.targets = [victim]
            (c.kill if kind == "kill-follower" else c.pause)(victim)
            await asyncio.sleep(hold)
            return
        if kind == "kill-minority":
            ep.targets = rng.sample(names, self._size_of_minority())
            for v in ep.targets:
                c.kill(v)
            await asyncio.sleep(hold)
            return
        if kind == "partition-minority":
            ep.targets = rng.sample(names, self._size_of_minority())
            c.faults.partition(ep.targets, [n for n in c.nodes if n not in ep.targets])
            await asyncio.sleep(hold)
            return
        if kind == "delay":
            victim = rng.choice(names)
            ep.targets = [victim]
            for other in c.nodes:
                if other != victim:
                    c.faults.delay(victim, other, rng.uniform(0.05, 0.3))
                    c.faults.delay(other, victim, rng.uniform(0.05, 0.3))
            await asyncio.sleep(hold)
            return
        if kind == "power-loss-all":
            ep.targets = list(names)
            for v in names:
                c.kill(v)
            for v in names:
                ep.notes.append(f"{v}: {c.power_loss(v)}")
            for v in names:
                await c.launch(v)
            return
        victim = rng.choice(names)
        ep.targets = [victim]
        c.kill(victim)
        if kind == "power-loss":
            ep.notes.append(f"{victim}: {c.power_loss(victim)}")
        else:
            ep.notes.append(f"{victim}: {c.damage(victim, rng, 'flip' if kind == 'corrupt' else 'truncate')}")
        await asyncio.sleep(hold / 2)
        await c.launch(victim)

    async def _measure(self, ep: Episode, t0: float, old: str) -> None:
        """Time to a new leader, and to the first write through a server other than the old one."""
        c = self.cluster
        try:
            await c.leader(within=MEASURE_LIMIT, exclude=old)
            ep.election = time.monotonic() - t0
        except TimeoutError:
            ep.notes.append(f"no new leader within {MEASURE_LIMIT:g} s")
            return
        deadline = t0 + MEASURE_LIMIT
        while time.monotonic() < deadline:
            others = [n for n in c.founders if n != old and c.nodes[n].up]
            probes = [asyncio.ensure_future(c.probe(n, ep.start, 1.0)) for n in others]
            try:
                for fut in asyncio.as_completed(probes):
                    try:
                        done = await fut
                    except Exception:
                        continue
                    if done:
                        ep.first_write = time.monotonic() - t0
                        return
            finally:
                for p in probes:
                    p.cancel()
                await asyncio.gather(*probes, return_exceptions=True)
            await asyncio.sleep(0.01)
        ep.notes.append(f"no write succeeded within {MEASURE_LIMIT:g} s")
