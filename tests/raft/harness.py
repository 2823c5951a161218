"""A hand-driven group of Raft nodes for targeted tests: every step is the test's choice.

Each node has a ``MemoryLog`` and a synchronous host (persist, sync and advance at once);
messages wait in one outbox until the test delivers them, optionally filtered (to cut links,
drop or hold back messages). Applied entries are recorded per node so a test can compare them.
The randomized counterpart is ``sim.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from jetpy.raft import (
    Config,
    Entry,
    EntryKind,
    HardState,
    Membership,
    MemoryLog,
    Message,
    RaftNode,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
    persist_ready,
)

Filter = Callable[[Message], bool]  # True: deliver


@dataclass
class Member:
    node: RaftNode
    store: MemoryLog
    applied: list[Entry] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)


class Group:
    def __init__(
        self,
        voters: Iterable[str],
        *,
        seed: int = 1,
        learners: Iterable[str] = (),
        election_ticks: int = 10,
        heartbeat_ticks: int = 1,
        pre_vote: bool = True,
        check_quorum: bool = True,
        snapshot_entries: int = 0,
        max_inflight: int = 256,
        max_append_bytes: int = 1 << 20,
        max_uncommitted_bytes: int = 0,
    ) -> None:
        self.rng = random.Random(seed)
        self.membership = Membership(frozenset(voters), frozenset(learners))
        self.settings = dict(
            election_ticks=election_ticks,
            heartbeat_ticks=heartbeat_ticks,
            pre_vote=pre_vote,
            check_quorum=check_quorum,
            snapshot_entries=snapshot_entries,
            max_inflight=max_inflight,
            max_append_bytes=max_append_bytes,
            max_uncommitted_bytes=max_uncommitted_bytes,
        )
        self.members: dict[str, Member] = {}
        self.outbox: list[Message] = []
        for nid in sorted(self.membership.members()):
            store = MemoryLog(Snapshot(SnapshotMeta(0, 0, self.membership)))
            self.members[nid] = Member(self._make(nid, store), store)

    def _make(self, nid: str, store: MemoryLog) -> RaftNode:
        cfg = Config(id=nid, **self.settings)  # type: ignore[arg-type]
        return RaftNode(cfg, store, random.Random(self.rng.randrange(1 << 30)))

    def add_empty(self, nid: str) -> Member:
        """A new server with nothing on disk (it learns the membership from the leader)."""
        store = MemoryLog()
        self.members[nid] = Member(self._make(nid, store), store)
        return self.members[nid]

    def node(self, nid: str) -> RaftNode:
        return self.members[nid].node

    # ------------------------------------------------------------------ host loop
    def process(self, nid: str) -> None:
        m = self.members[nid]
        while m.node.has_ready():
            rd = m.node.ready()
            self._handle(m, rd)

    def _handle(self, m: Member, rd: Ready) -> None:
        self.outbox.extend(rd.messages)
        persist_ready(m.store, rd)
        m.store.sync()
        self.outbox.extend(rd.persisted_messages)
        if rd.snapshot is not None:
            m.snapshots.append(rd.snapshot)
            m.applied = [Entry(rd.snapshot.meta.index, rd.snapshot.meta.term, EntryKind.NOOP, b"<snapshot>")]
        m.applied.extend(rd.committed)
        m.node.advance(rd)
        if rd.want_snapshot:
            applied = m.node.log.applied
            snap = m.node.snapshot_at(applied, b"state@%d" % applied)
            m.store.compact(snap)

    def process_all(self) -> None:
        for nid in self.members:
            self.process(nid)

    def deliver(self, allow: Filter | None = None, rounds: int = 1000) -> int:
        """Deliver messages (those ``allow`` accepts; the rest are dropped) until none are left.
        Returns how many were delivered."""
        delivered = 0
        self.process_all()
        for _ in range(rounds):
            if not self.outbox:
                return delivered
            batch, self.outbox = self.outbox, []
            for msg in batch:
                if msg.dst in self.members and (allow is None or allow(msg)):
                    self.members[msg.dst].node.step(msg)
                    delivered += 1
                    self.process(msg.dst)
        raise AssertionError("messages still flowing after many rounds")

    def take(self, allow: Filter) -> list[Message]:
        """Remove and return the waiting messages ``allow`` accepts (to deliver later)."""
        self.process_all()
        kept: list[Message] = []
        taken: list[Message] = []
        for msg in self.outbox:
            (taken if allow(msg) else kept).append(msg)
        self.outbox = kept
        return taken

    def step(self, msgs: Iterable[Message]) -> None:
        for msg in msgs:
            self.members[msg.dst].node.step(msg)
            self.process(msg.dst)

    def tick(self, nid: str, n: int = 1) -> None:
        for _ in range(n):
            self.node(nid).tick()
        self.process(nid)

    def campaign(self, nid: str, allow: Filter | None = None) -> None:
        self.node(nid).campaign()
        self.deliver(allow)

    def elect(self, nid: str) -> None:
        self.campaign(nid)
        assert self.node(nid).role is Role.LEADER, self.node(nid).status()

    def propose(self, nid: str, data: bytes, allow: Filter | None = None) -> tuple[int, int]:
        pos = self.node(nid).propose(data)
        self.deliver(allow)
        return pos

    def heartbeat(self, nid: str, allow: Filter | None = None) -> None:
        node = self.node(nid)
        for _ in range(node.cfg.heartbeat_ticks):
            node.tick()
        self.deliver(allow)

    def leaders(self) -> list[str]:
        return [nid for nid, m in self.members.items() if m.node.role is Role.LEADER]

    def restart(self, nid: str, *, hard_state: HardState | None = None) -> RaftNode:
        """A restart: the node is rebuilt from its (fully synced) store."""
        m = self.members[nid]
        if hard_state is not None:
            m.store.set_hard_state(hard_state)
        m.node = self._make(nid, m.store)
        m.applied = []
        self.outbox = [x for x in self.outbox if x.src != nid]
        return m.node

    def data(self, nid: str) -> list[bytes]:
        return [e.data for e in self.members[nid].applied if e.kind is EntryKind.NORMAL]


def isolate(*nids: str) -> Filter:
    """Cut every link to and from ``nids``."""
    cut = set(nids)
    return lambda m: m.src not in cut and m.dst not in cut


def between(groups: list[set[str]]) -> Filter:
    """A partition: messages flow only inside a group."""

    def allow(m: Message) -> bool:
        return any(m.src in g and m.dst in g for g in groups)

    return allow
