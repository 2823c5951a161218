"""Deterministic simulation of a Raft group: one seed replays one whole run, faults included.

N in-process ``RaftNode``s driven by a seeded discrete-event scheduler. Everything random (the
network's drops, delays, duplicates and reordering; partitions, symmetric and one-way; crashes
with the loss of unsynced writes; damaged logs; clock skew; the client workload; membership
changes; each node's election timeouts) comes from ``random.Random(seed)``, so a failing seed is
the whole reproduction: ``python -m tests.raft.sim --seed N -v`` (add ``--storm`` for a seed of
the crash-heavy plans); ``make raft-sim SEEDS=100000`` runs long searches.

The simulated disk (``Disk``) keeps only what was synced: a crash keeps the durable state plus a
random prefix of the writes since the last sync (the last one possibly torn), which is what a
power loss leaves of an append-only log.

Checkers, run as the simulation goes and at the end:

* election safety: at most one leader per term;
* leader completeness: a new leader's log holds every entry any node has applied;
* state-machine safety: every node applies the same entry at each index, in order, and a
  snapshot it installs holds exactly what was applied up to its index;
* log matching: two logs with the same (index, term) are identical up to there (at the end);
* no acknowledged entry lost, none duplicated: every proposal a leader's host acknowledged (it
  applied the entry it proposed) is applied by every member at the end, once;
* liveness after heal: once the network is healed and every node is up, a leader is elected
  and a new proposal commits and is applied everywhere within ``Plan.liveness_ticks``.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jetpy.raft import (
    ConfChange,
    ConfChangeOp,
    Config,
    Entry,
    EntryKind,
    HardState,
    Membership,
    MemoryLog,
    Message,
    NotLeader,
    ProposalDropped,
    RaftError,
    RaftNode,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
    decode,
    encode,
    persist_ready,
)

TICK = 100  # simulated time units per tick (a node's clock may run a little fast or slow)


class SimFailure(AssertionError):
    """A checker found a violation; the message names the seed."""


# ====================================================================== the disk
class Disk:
    """A ``LogStore`` whose writes are durable only once synced.

    ``live`` is what the node reads (the page cache), ``durable`` what survives a crash. Every
    write is applied to ``live`` at once and queued; ``sync_to(seq)`` replays the queue up to
    ``seq`` onto ``durable``.
    """

    def __init__(self, live: MemoryLog) -> None:
        self.live = live
        self.durable = live.copy()
        self.pending: list[tuple[int, str, Any]] = []
        self.seq = 0

    # reads: the live view
    def initial_state(self) -> HardState:
        return self.live.initial_state()

    def first_index(self) -> int:
        return self.live.first_index()

    def last_index(self) -> int:
        return self.live.last_index()

    def term(self, index: int) -> int:
        return self.live.term(index)

    def entries(self, lo: int, hi: int, max_bytes: int) -> list[Entry]:
        return self.live.entries(lo, hi, max_bytes)

    def snapshot(self) -> Snapshot:
        return self.live.snapshot()

    def snapshot_meta(self) -> SnapshotMeta:
        return self.live.snapshot_meta()

    def conf_entries(self) -> list[Entry]:
        return self.live.conf_entries()

    # writes
    def _op(self, name: str, arg: Any) -> None:
        getattr(self.live, name)(arg)
        self.seq += 1
        self.pending.append((self.seq, name, arg))

    def append(self, entries: Sequence[Entry]) -> None:
        self._op("append", list(entries))

    def set_hard_state(self, hs: HardState) -> None:
        self._op("set_hard_state", hs)

    def install_snapshot(self, snap: Snapshot) -> None:
        self._op("install_snapshot", snap)

    def compact(self, snap: Snapshot) -> None:
        self._op("compact", snap)

    def sync(self) -> None:
        self.sync_to(self.seq)

    def sync_to(self, seq: int) -> None:
        pending = self.pending
        i = 0
        while i < len(pending) and pending[i][0] <= seq:
            _, name, arg = pending[i]
            getattr(self.durable, name)(arg)
            i += 1
        del pending[:i]

    def crash(self, rng: random.Random) -> None:
        """Power loss: keep the synced state and a random prefix of later writes (the last kept
        append possibly torn: only some of its entries made it)."""
        keep = rng.randrange(len(self.pending) + 1)
        for _, name, arg in self.pending[:keep]:
            if name == "append" and rng.random() < 0.3:
                arg = arg[: rng.randrange(len(arg) + 1)]
                if arg:
                    self.durable.append(arg)
                break
            getattr(self.durable, name)(arg)
        self.pending = []
        self.live = self.durable.copy()

    def damage(self, rng: random.Random) -> bool:
        """What recovery reports for a record that fails its checksum in the middle of the log:
        the log is cut before it and the node must be repaired through the highest index it had.
        False if the log has nothing to lose."""
        log = self.durable
        first, last = log.first_index(), log.last_index()
        if last < first:
            return False
        cut = rng.randint(first, last)
        kept = log.entries(first, cut, 1 << 62) if cut > first else []
        hs = log.initial_state()
        damaged = MemoryLog(
            log.snapshot(), HardState(hs.term, hs.vote, hs.commit, max(last, hs.repair_through))
        )
        damaged.append(kept)
        self.durable = damaged
        self.live = damaged.copy()
        return True


# ====================================================================== the state machine
@dataclass
class Applied:
    """A node's state machine: the index it applied through and the NORMAL data, in order."""

    index: int = 0
    items: list[tuple[int, bytes]] = field(default_factory=list)

    def encode(self) -> bytes:
        return b" ".join([b"%d" % self.index, *(b"%d:%s" % (i, d.hex().encode()) for i, d in self.items)])

    @staticmethod
    def decode(data: bytes) -> Applied:
        if not data:
            return Applied()
        head, *rest = data.split(b" ")
        items = []
        for part in rest:
            i, d = part.split(b":")
            items.append((int(i), bytes.fromhex(d.decode())))
        return Applied(int(head), items)


# ====================================================================== plan of a run
@dataclass
class Plan:
    """What one run does; ``Plan.random(seed)`` draws a varied one."""

    nodes: int = 3
    spares: int = 0  # extra servers that membership changes may add
    fault_ticks: int = 60
    liveness_ticks: int = 120
    drop: float = 0.0
    dup: float = 0.0
    max_delay: int = 40  # time units (a tick is 100)
    fsync: tuple[int, int] = (2, 30)
    crash_rate: float = 0.0  # per tick
    window_crash: float = 0.0  # per synced write: crash before its fsync completes
    partition_rate: float = 0.0
    damage: float = 0.0  # chance that a crash also damages the log
    skew: float = 0.0  # clocks run at 1 +/- skew
    propose_rate: float = 0.5  # per tick
    conf_rate: float = 0.0
    snapshot_entries: int = 0
    wire: bool = False  # encode and decode every message through the codec
    election_ticks: int = 6
    heartbeat_ticks: int = 1

    @staticmethod
    def random(seed: int, nodes: int | None = None) -> Plan:
        r = random.Random(seed ^ 0x5EED)
        calm = r.random() < 0.15
        return Plan(
            nodes=nodes or r.choice((3, 3, 3, 5)),
            spares=r.choice((0, 0, 1, 2)),
            fault_ticks=r.randint(30, 70),
            drop=0.0 if calm else r.choice((0.0, 0.02, 0.1, 0.25)),
            dup=0.0 if calm else r.choice((0.0, 0.05, 0.2)),
            max_delay=r.choice((20, 60, 150, 300)),
            fsync=(1, r.choice((5, 30, 120, 400))),
            crash_rate=0.0 if calm else r.choice((0.0, 0.02, 0.06)),
            window_crash=0.0 if calm else r.choice((0.0, 0.0, 0.005, 0.02)),
            partition_rate=0.0 if calm else r.choice((0.0, 0.03, 0.08)),
            damage=r.choice((0.0, 0.0, 0.3)),
            skew=r.choice((0.0, 0.1, 0.3)),
            propose_rate=r.choice((0.3, 1.0, 3.0)),
            conf_rate=r.choice((0.0, 0.0, 0.05)),
            snapshot_entries=r.choice((0, 0, 8, 30)),
            wire=r.random() < 0.25,
        )

    @staticmethod
    def storm(seed: int) -> Plan:
        """Crashes all the time, many inside the window between a write and its fsync."""
        r = random.Random(seed ^ 0x570F)
        return Plan(
            nodes=r.choice((3, 5)),
            spares=r.choice((0, 1)),
            fault_ticks=r.randint(30, 60),
            drop=r.choice((0.0, 0.1)),
            max_delay=r.choice((20, 100)),
            fsync=(1, r.choice((30, 200))),
            crash_rate=0.15,
            window_crash=r.choice((0.05, 0.2)),
            partition_rate=r.choice((0.0, 0.05)),
            damage=r.choice((0.0, 0.2)),
            propose_rate=1.0,
            conf_rate=r.choice((0.0, 0.05)),
            snapshot_entries=r.choice((0, 10)),
        )


# ====================================================================== one node's host
class Host:
    def __init__(self, sim: Sim, nid: str, disk: Disk) -> None:
        self.sim = sim
        self.id = nid
        self.disk = disk
        self.up = True
        self.waiting: list[tuple[int, Ready]] = []  # (disk seq, Ready) persisted, not yet synced
        self.sync_in_flight = False
        self.sm = Applied()
        self.proposed: dict[int, tuple[int, bytes]] = {}  # index -> (term, client id)
        self.rate = 1.0
        self.node = self._boot()

    def _boot(self) -> RaftNode:
        plan = self.sim.plan
        cfg = Config(
            id=self.id,
            election_ticks=plan.election_ticks,
            heartbeat_ticks=plan.heartbeat_ticks,
            snapshot_entries=plan.snapshot_entries,
            max_append_bytes=512,
            max_inflight=8,
        )
        node = RaftNode(cfg, self.disk, random.Random(self.sim.rng.randrange(1 << 30)))
        snap = self.disk.snapshot()
        self.sm = Applied.decode(snap.data)
        self.sim.check_snapshot(self.id, snap)
        self.sm.index = snap.meta.index
        return node

    def restart(self) -> None:
        self.up = True
        self.waiting = []
        self.sync_in_flight = False
        self.proposed = {}
        self.node = self._boot()

    def process(self) -> None:
        node = self.node
        sim = self.sim
        while node.has_ready():
            rd = node.ready()
            sim.send(rd.messages)
            persist_ready(self.disk, rd)
            self.waiting.append((self.disk.seq, rd))
            if rd.soft_state is not None and rd.soft_state.role is Role.LEADER:
                sim.check_new_leader(self)
            if not self.sync_in_flight:
                self._start_sync()
            if rd.must_sync and sim.plan.window_crash and sim.rng.random() < sim.plan.window_crash:
                sim.at(sim.now + 1, sim.crash_for, self, sim.rng.randint(1, 4))
        if node.role is Role.LEADER:
            sim.note_leader(node.term, self.id)

    def _start_sync(self) -> None:
        self.sync_in_flight = True
        lo, hi = self.sim.plan.fsync
        self.sim.at(self.sim.now + self.sim.rng.randint(lo, hi), self._synced, self.disk.seq, self.node)

    def _synced(self, seq: int, node: RaftNode) -> None:
        if not self.up or node is not self.node:
            return  # crashed (and maybe restarted) since this sync began
        self.disk.sync_to(seq)
        self.sync_in_flight = False
        done = 0
        for s, rd in self.waiting:
            if s > seq:
                break
            done += 1
            self.sim.send(rd.persisted_messages)
            self._apply(rd)
            self.node.advance(rd)
            if rd.want_snapshot:
                self._snapshot()
        del self.waiting[:done]
        self.process()
        if self.waiting and not self.sync_in_flight:
            self._start_sync()

    def _apply(self, rd: Ready) -> None:
        sim = self.sim
        if rd.snapshot is not None:
            sim.check_snapshot(self.id, rd.snapshot)
            self.sm = Applied.decode(rd.snapshot.data)
            self.sm.index = rd.snapshot.meta.index
        for e in rd.committed:
            if e.index != self.sm.index + 1:
                sim.fail(f"{self.id} applied {e.index} after {self.sm.index}")
            sim.check_apply(self.id, e)
            self.sm.index = e.index
            if e.kind is EntryKind.NORMAL:
                self.sm.items.append((e.index, e.data))
            mine = self.proposed.pop(e.index, None)
            if mine is not None and mine[0] == e.term:
                sim.acked(mine[1], e.index)

    def _snapshot(self) -> None:
        applied = self.node.log.applied
        try:
            snap = self.node.snapshot_at(applied, self.sm.encode())
        except RaftError:
            return  # a leader's snapshot arrived meanwhile: ours would be older
        self.disk.compact(snap)

    def propose(self, items: list[bytes]) -> None:
        try:
            first, term = self.node.propose_batch(items)
        except (NotLeader, ProposalDropped):
            return
        for i, cid in enumerate(items):
            self.proposed[first + i] = (term, cid)
        self.process()


# ====================================================================== the simulation
class Sim:
    def __init__(self, seed: int, plan: Plan | None = None, trace: bool = False) -> None:
        self.seed = seed
        self.plan = plan or Plan.random(seed)
        self.rng = random.Random(seed)
        self.trace = trace
        self.now = 0
        self._events: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._eseq = 0
        p = self.plan
        self.voters = [f"n{i}" for i in range(p.nodes)]
        self.all_ids = self.voters + [f"s{i}" for i in range(p.spares)]
        self.blocked: set[tuple[str, str]] = set()
        self.leaders: dict[int, str] = {}
        self.applied: dict[int, tuple[int, int, bytes]] = {}  # index -> (term, kind, data)
        self.acks: dict[bytes, int] = {}
        self.next_client = 0
        self.delivered = 0
        self.commits = 0
        first = Membership(frozenset(self.voters))
        self.hosts: dict[str, Host] = {}
        for nid in self.all_ids:
            snap = Snapshot(SnapshotMeta(0, 0, first)) if nid in self.voters else Snapshot(SnapshotMeta())
            self.hosts[nid] = Host(self, nid, Disk(MemoryLog(snap)))

    # ------------------------------------------------------------------ scheduling
    def at(self, when: int, fn: Callable[..., None], *args: Any) -> None:
        self._eseq += 1
        heapq.heappush(self._events, (when, self._eseq, fn, args))

    def run_until(self, end: int, stop: Callable[[], bool] | None = None) -> bool:
        events = self._events
        while events and events[0][0] <= end:
            when, _, fn, args = heapq.heappop(events)
            self.now = when
            fn(*args)
            if stop is not None and stop():
                return True
        self.now = end
        return False

    def log(self, text: str) -> None:
        if self.trace:
            print(f"[{self.now:>7}] {text}")

    def fail(self, what: str) -> None:
        raise SimFailure(f"seed {self.seed}: {what} (at time {self.now}; plan {self.plan})")

    # ------------------------------------------------------------------ network
    def send(self, msgs: list[Message]) -> None:
        if not msgs:
            return
        rng, plan = self.rng, self.plan
        for m in msgs:
            if (m.src, m.dst) in self.blocked or m.dst not in self.hosts:
                continue
            if plan.drop and rng.random() < plan.drop:
                continue
            if plan.wire:
                m = decode(encode(m))
            self.at(self.now + 1 + rng.randrange(plan.max_delay), self._deliver, m)
            if plan.dup and rng.random() < plan.dup:
                self.at(self.now + 1 + rng.randrange(plan.max_delay * 2), self._deliver, m)

    def _deliver(self, m: Message) -> None:
        host = self.hosts[m.dst]
        if not host.up or (m.src, m.dst) in self.blocked:
            return
        self.delivered += 1
        host.node.step(m)
        host.process()

    # ------------------------------------------------------------------ clocks
    def _tick(self, host: Host, node: RaftNode) -> None:
        if not host.up or node is not host.node:
            return  # the host crashed; its restart schedules a new clock
        node.tick()
        host.process()
        self.at(self.now + int(TICK * host.rate), self._tick, host, node)

    def _start_clock(self, host: Host) -> None:
        skew = self.plan.skew
        host.rate = 1.0 + (self.rng.uniform(-skew, skew) if skew else 0.0)
        self.at(self.now + self.rng.randrange(1, TICK), self._tick, host, host.node)

    # ------------------------------------------------------------------ checkers
    def note_leader(self, term: int, nid: str) -> None:
        other = self.leaders.setdefault(term, nid)
        if other != nid:
            self.fail(f"two leaders in term {term}: {other} and {nid}")

    def check_new_leader(self, host: Host) -> None:
        """Leader completeness: every applied entry is in the new leader's log."""
        node = host.node
        self.log(f"{host.id} leads term {node.term}")
        first = node.log.first_index()
        for index, (term, _, _) in self.applied.items():
            if index >= first and node.log.term(index) != term:
                self.fail(f"leader {host.id} (term {node.term}) lacks committed entry {index}")

    def check_apply(self, nid: str, e: Entry) -> None:
        seen = self.applied.get(e.index)
        got = (e.term, int(e.kind), e.data)
        if seen is None:
            self.applied[e.index] = got
            self.commits += 1
        elif seen != got:
            self.fail(f"{nid} applied {got} at {e.index}, another node applied {seen}")

    def check_snapshot(self, nid: str, snap: Snapshot) -> None:
        state = Applied.decode(snap.data)
        for index, data in state.items:
            seen = self.applied.get(index)
            if seen is None or seen[2] != data or index > snap.meta.index:
                self.fail(f"{nid}'s snapshot at {snap.meta.index} holds {data!r} at {index}; applied: {seen}")

    def acked(self, cid: bytes, index: int) -> None:
        if cid in self.acks and self.acks[cid] != index:
            self.fail(f"{cid!r} acknowledged at {self.acks[cid]} and at {index}")
        self.acks[cid] = index

    # ------------------------------------------------------------------ workload and faults
    def _client(self) -> None:
        up = [h for h in self.hosts.values() if h.up]
        if up:
            leaders = [h for h in up if h.node.role is Role.LEADER]
            host = self.rng.choice(leaders if leaders and self.rng.random() < 0.9 else up)
            items = []
            for _ in range(self.rng.choice((1, 1, 1, 2, 5))):
                self.next_client += 1
                pad = self.rng.choice((0, 0, 40, 200))  # appends carry at most 512 bytes: some split
                items.append(b"c%d:" % self.next_client + b"x" * pad)
            host.propose(items)

    def _fault(self) -> None:
        rng, plan = self.rng, self.plan
        if plan.crash_rate and rng.random() < plan.crash_rate:
            hosts = list(self.hosts.values())
            leaders = [h for h in hosts if h.up and h.node.role is Role.LEADER]
            host = rng.choice(leaders if leaders and rng.random() < 0.5 else hosts)
            self.crash_for(host, rng.randint(1, 20))
        if plan.partition_rate and rng.random() < plan.partition_rate:
            ids = list(self.hosts)
            if rng.random() < 0.5:
                rng.shuffle(ids)
                cut = rng.randint(1, len(ids) - 1)
                a, b = set(ids[:cut]), set(ids[cut:])
                self.blocked |= {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}
                self.log(f"partition {sorted(a)} | {sorted(b)}")
            else:
                x, y = rng.sample(ids, 2)
                self.blocked.add((x, y))  # one-way
                self.log(f"block {x} -> {y}")
        if self.blocked and rng.random() < 0.05:
            self.blocked.clear()
            self.log("heal")
        if plan.conf_rate and rng.random() < plan.conf_rate:
            self._conf_change()

    def _conf_change(self) -> None:
        leaders = [h for h in self.hosts.values() if h.up and h.node.role is Role.LEADER]
        if not leaders:
            return
        node = leaders[0].node
        m = node.membership
        rng = self.rng
        others = [x for x in self.all_ids if x not in m.members()]
        choices: list[ConfChange] = []
        choices += [ConfChange(ConfChangeOp.ADD_LEARNER, x) for x in others]
        choices += [ConfChange(ConfChangeOp.ADD_VOTER, x) for x in sorted(m.learners) + others]
        if len(m.voters) > 3:  # two voters cannot survive one damaged log
            choices += [ConfChange(ConfChangeOp.REMOVE, x) for x in sorted(m.voters)]
        choices += [ConfChange(ConfChangeOp.REMOVE, x) for x in sorted(m.learners)]
        if choices:
            change = rng.choice(choices)
            try:
                node.propose_conf_change(change)
                self.log(f"{node.id} proposes {change}")
            except RaftError:
                pass
            leaders[0].process()

    def crash_for(self, host: Host, ticks: int) -> None:
        if host.up:
            self.crash(host)
            self.at(self.now + ticks * TICK, self.restart, host)

    def crash(self, host: Host, damage: bool | None = None) -> None:
        host.up = False
        host.disk.crash(self.rng)
        if damage is None:
            damage = bool(self.plan.damage) and self.rng.random() < self.plan.damage
        # At most one damaged log at a time: two of three could never elect anyone again.
        others_damaged = any(
            h.disk.durable.initial_state().repair_through for h in self.hosts.values() if h is not host
        )
        if damage and not others_damaged and host.disk.damage(self.rng):
            self.log(f"crash {host.id} with a damaged log")
        else:
            self.log(f"crash {host.id}")

    def restart(self, host: Host) -> None:
        if host.up:
            return
        host.restart()
        self.log(f"restart {host.id}")
        self._start_clock(host)
        host.process()

    # ------------------------------------------------------------------ the run
    def run(self) -> Sim:
        plan = self.plan
        for h in self.hosts.values():
            self._start_clock(h)
        end = plan.fault_ticks * TICK
        t = 0
        while t + TICK < end:
            t += TICK
            if self.rng.random() < plan.propose_rate:
                self.at(t + self.rng.randrange(TICK), self._client)
            if plan.propose_rate > 1 and self.rng.random() < plan.propose_rate - 1:
                self.at(t + self.rng.randrange(TICK), self._client)
            self.at(t, self._fault)
        self.run_until(end)
        self.heal()
        return self

    def heal(self) -> None:
        """Heal everything, then require a leader and a fresh commit everywhere in time."""
        plan = self.plan
        self.plan = Plan(
            **{
                **plan.__dict__,
                "drop": 0.0,
                "dup": 0.0,
                "window_crash": 0.0,
                "max_delay": min(plan.max_delay, 40),
            }
        )
        self.blocked.clear()
        for h in self.hosts.values():
            if not h.up:
                self.restart(h)
        self.log("healed")
        deadline = self.now + self.plan.liveness_ticks * TICK
        attempts: list[bytes] = []
        holder: list[Host] = []

        def marker_index() -> int:
            for marker in attempts:
                if marker in self.acks:
                    return self.acks[marker]
            if holder and holder[0].node.role is not Role.LEADER:
                holder.clear()  # lost leadership before committing: propose again elsewhere
            if not holder:
                leaders = [h for h in self.hosts.values() if h.up and h.node.role is Role.LEADER]
                if len(leaders) == 1:
                    marker = b"final-%d" % len(attempts)
                    leaders[0].propose([marker])
                    if any(cid == marker for _, cid in leaders[0].proposed.values()):
                        attempts.append(marker)
                        holder.append(leaders[0])
            return 0

        def everyone_applied() -> bool:
            target = marker_index()
            if target:
                target = max(target, *self.acks.values())
            return bool(target) and all(self.hosts[x].sm.index >= target for x in self._members())

        while self.now < deadline:
            self.run_until(min(deadline, self.now + TICK // 2))
            if everyone_applied():
                break
        else:
            status = {x: h.node.status() for x, h in self.hosts.items()}
            self.fail(f"no progress within {self.plan.liveness_ticks} ticks of healing: {status}")
        self.final_checks()

    def _members(self) -> list[str]:
        counts: dict[frozenset[str], int] = {}
        for h in self.hosts.values():
            if h.node.role is Role.LEADER:
                return sorted(h.node.membership.members())
            counts[h.node.membership.members()] = counts.get(h.node.membership.members(), 0) + 1
        return sorted(max(counts.items(), key=lambda kv: kv[1])[0])

    def final_checks(self) -> None:
        members = self._members()
        # No acknowledged entry lost, none applied twice: compare every member's state.
        for nid in members:
            sm = self.hosts[nid].sm
            seen: dict[bytes, int] = {}
            for index, data in sm.items:
                if data in seen:
                    self.fail(f"{nid} applied {data!r} twice ({seen[data]} and {index})")
                seen[data] = index
            for cid, index in self.acks.items():
                if seen.get(cid) != index:
                    self.fail(
                        f"{nid} lost acknowledged {cid!r} (acked at {index}, applied through {sm.index})"
                    )
        self.check_log_matching()

    def check_log_matching(self) -> None:
        logs = {}
        for nid, h in self.hosts.items():
            log = h.node.log
            first, last = log.first_index(), log.last_index()
            logs[nid] = (
                first,
                {e.index: e for e in log.entries(first, last + 1, 1 << 62)} if last >= first else {},
            )
        ids = sorted(logs)
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                la, lb = logs[a][1], logs[b][1]
                common = sorted(set(la) & set(lb), reverse=True)
                matched = False
                for index in common:
                    ea, eb = la[index], lb[index]
                    if matched and ea != eb:
                        self.fail(f"logs of {a} and {b} differ at {index} below a matching entry")
                    if ea.term == eb.term:
                        if ea != eb:
                            self.fail(f"{a} and {b} hold different entries at ({index}, {ea.term})")
                        matched = True


def run_seed(seed: int, plan: Plan | None = None, trace: bool = False) -> Sim:
    return Sim(seed, plan, trace).run()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run seeded Raft simulations; print failing seeds.")
    ap.add_argument("--seeds", type=int, default=1000, help="how many seeds (from --start)")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seed", type=int, help="run one seed (with -v: trace it)")
    ap.add_argument("--nodes", type=int, help="force the group size")
    ap.add_argument("--storm", action="store_true", help="crash-heavy plans (Plan.storm)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    failed = 0
    commits = 0
    t0 = time.process_time()
    for s in seeds:
        try:
            plan = Plan.storm(s) if args.storm else Plan.random(s, args.nodes)
            sim = run_seed(s, plan, trace=args.verbose)
            commits += sim.commits
        except SimFailure as exc:
            failed += 1
            print(f"FAIL {exc}", flush=True)
    spent = time.process_time() - t0
    print(f"{len(seeds)} seeds, {failed} failed, {commits} entries committed, {spent:.1f} s CPU")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
