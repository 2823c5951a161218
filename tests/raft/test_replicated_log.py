"""End to end: three hosts in one process drive RaftNodes over in-memory queues (every message
crosses as codec bytes) with real RaftLogStores in temporary directories. Proposals commit and
apply everywhere, hosts restart from their disks, a damaged log is repaired from the leader's
snapshot, and a server whose directory is lost rejoins as a new member."""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from jetpy.raft import (
    ConfChange,
    ConfChangeOp,
    Config,
    EntryKind,
    Membership,
    Message,
    RaftNode,
    Role,
    Snapshot,
    SnapshotMeta,
    decode,
    encode,
    persist_ready,
)
from jetpy.store import ErrCorrupt
from jetpy.store.raftlog import RaftLogStore
from jetpy.store.raftlog.records import RECORD_OVERHEAD, SEGMENT_HEADER_SIZE, check_record

SEGMENT = 4096  # small segments, so compaction unlinks files


class Host:
    """A synchronous host: persist, fsync, send, apply, advance; snapshots when asked."""

    def __init__(self, nid: str, path: Path, net: Net, *, founders: Membership | None = None) -> None:
        self.id = nid
        self.path = path
        self.net = net
        if founders is not None or not path.exists():
            snap = Snapshot(SnapshotMeta(0, 0, founders)) if founders is not None else None
            self.store = RaftLogStore.create(path, snap, segment_bytes=SEGMENT)
        else:
            self.store = RaftLogStore.open(path, segment_bytes=SEGMENT)
        cfg = Config(nid, election_ticks=10, heartbeat_ticks=2, snapshot_entries=40, max_append_bytes=8192)
        self.node = RaftNode(cfg, self.store, random.Random(hash(nid) & 0xFFFF))
        self.state: list[str] = json.loads(self.store.snapshot().data or b"[]")
        self.applied = self.store.snapshot_meta().index
        self.snapshots_installed = 0

    def pump(self) -> None:
        node, store = self.node, self.store
        while node.has_ready():
            rd = node.ready()
            self.net.send(rd.messages)
            persist_ready(store, rd)
            if rd.must_sync:
                store.sync()
            self.net.send(rd.persisted_messages)
            if rd.snapshot is not None:
                self.state = json.loads(rd.snapshot.data)
                self.applied = rd.snapshot.meta.index
                self.snapshots_installed += 1
            for e in rd.committed:
                assert e.index == self.applied + 1
                self.applied = e.index
                if e.kind is EntryKind.NORMAL:
                    self.state.append(e.data.decode())
            node.advance(rd)
            if rd.want_snapshot:
                snap = node.snapshot_at(self.applied, json.dumps(self.state).encode())
                store.compact(snap)

    def close(self) -> None:
        self.store.close()


class Net:
    """In-memory queues of encoded frames, one per destination; links can be cut."""

    def __init__(self) -> None:
        self.hosts: dict[str, Host] = {}
        self.queues: dict[str, deque[bytes]] = {}
        self.cut: set[str] = set()
        self.bytes = 0

    def send(self, msgs: Iterable[Message]) -> None:
        for m in msgs:
            if m.dst in self.hosts and m.src not in self.cut and m.dst not in self.cut:
                frame = encode(m)
                self.bytes += len(frame)
                self.queues.setdefault(m.dst, deque()).append(frame)

    def settle(self) -> None:
        for _ in range(10_000):
            busy = False
            for nid, q in list(self.queues.items()):
                host = self.hosts.get(nid)
                while q:
                    busy = True
                    frame = q.popleft()
                    if host is not None and nid not in self.cut:
                        host.node.step(decode(frame))
                        host.pump()
            if not busy:
                return
        raise AssertionError("the network never settled")

    def run(self, ticks: int) -> None:
        for _ in range(ticks):
            for h in list(self.hosts.values()):
                h.node.tick()
                h.pump()
            self.settle()

    def leader(self) -> Host:
        for _ in range(200):
            leaders = [h for h in self.hosts.values() if h.node.role is Role.LEADER and h.id not in self.cut]
            if len(leaders) == 1:
                return leaders[0]
            self.run(1)
        raise AssertionError("no leader")

    def propose(self, items: list[bytes]) -> None:
        for _ in range(50):
            leader = self.leader()
            leader.node.propose_batch(items)
            leader.pump()
            self.settle()
            return
        raise AssertionError("could not propose")


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Net]:
    net = Net()
    founders = Membership(frozenset({"a", "b", "c"}))
    for nid in ("a", "b", "c"):
        net.hosts[nid] = Host(nid, tmp_path / nid, net, founders=founders)
    yield net
    for h in net.hosts.values():
        h.close()


def payloads(first: int, n: int) -> list[bytes]:
    return [b"msg-%05d" % i for i in range(first, first + n)]


def test_proposals_commit_and_apply_everywhere_and_survive_restarts(group: Net, tmp_path: Path) -> None:
    net = group
    for i in range(0, 300, 10):
        net.propose(payloads(i, 10))
    net.run(4)
    expected = [p.decode() for p in payloads(0, 300)]
    for h in net.hosts.values():
        assert h.state == expected, h.id
    assert net.leader().store.first_index() > 200  # snapshots compacted the logs
    # Every host restarts from its own directory: state = its snapshot + its committed log.
    for nid in list(net.hosts):
        net.hosts[nid].close()
        net.hosts[nid] = Host(nid, tmp_path / nid, net)
    net.propose(payloads(300, 5))
    net.run(4)
    for h in net.hosts.values():
        assert h.state == expected + [p.decode() for p in payloads(300, 5)], h.id


def test_a_damaged_log_is_repaired_from_the_leaders_snapshot(group: Net, tmp_path: Path) -> None:
    net = group
    victim = next(h for h in net.hosts.values() if h.node.role is not Role.LEADER)
    sent = 0
    while sent < 200 or victim.store.last_index() - victim.store.first_index() < 10:
        net.propose(payloads(sent, 5))  # until its log holds entries past its last snapshot
        sent += 5
    vid = victim.id
    target = (victim.store.first_index() + victim.store.last_index()) // 2
    victim.close()
    del net.hosts[vid]
    # Flip a byte of an entry in the middle of what it still needs: good records follow it.
    for seg in sorted((tmp_path / vid).glob("*.rlog")):
        data = bytearray(seg.read_bytes())
        pos = SEGMENT_HEADER_SIZE
        while (r := check_record(bytes(data), pos, len(data))) is not None and r[1] != target:
            pos += r[0]
        if r is not None:
            data[pos + RECORD_OVERHEAD] ^= 0xFF
            seg.write_bytes(bytes(data))
            break
    else:
        raise AssertionError(f"entry {target} not found")
    # Meanwhile the others move on and compact past everything the victim had.
    for i in range(sent, sent + 200, 10):
        net.propose(payloads(i, 10))
    host = Host(vid, tmp_path / vid, net)
    assert host.store.report.repair_through > 0 and host.node.repair_through > 0
    assert any("damaged" in p for p in host.store.report.problems)
    net.hosts[vid] = host
    for _ in range(100):  # it never campaigns while damaged
        host.node.tick()
    assert host.node.role is Role.FOLLOWER
    net.run(6)
    assert host.snapshots_installed >= 1
    assert host.node.repair_through == 0
    assert host.state == net.leader().state == [p.decode() for p in payloads(0, sent + 200)]
    host.close()
    net.hosts[vid] = Host(vid, tmp_path / vid, net)
    assert net.hosts[vid].node.repair_through == 0  # durable: it votes again after a restart


def test_a_server_whose_directory_is_lost_rejoins_as_a_new_member(group: Net, tmp_path: Path) -> None:
    net = group
    for i in range(0, 150, 10):
        net.propose(payloads(i, 10))
    victim = next(h for h in net.hosts.values() if h.node.role is not Role.LEADER)
    vid = victim.id
    victim.close()
    del net.hosts[vid]
    for p in sorted((tmp_path / vid).rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    (tmp_path / vid).rmdir()
    with pytest.raises(ErrCorrupt, match="rejoin"):
        RaftLogStore.open(tmp_path / vid)  # never silently restarted empty: it may have voted
    # The operator's path: the new incarnation joins as a learner, catches up from the
    # leader's snapshot, becomes a voter, and the old identity is removed.
    new = f"{vid}2"
    net.hosts[new] = Host(new, tmp_path / new, net)
    for change in (
        ConfChange(ConfChangeOp.ADD_LEARNER, new),
        ConfChange(ConfChangeOp.ADD_VOTER, new),
        ConfChange(ConfChangeOp.REMOVE, vid),
    ):
        leader = net.leader()
        leader.node.propose_conf_change(change)
        leader.pump()
        net.run(3)
    assert net.hosts[new].snapshots_installed == 1
    assert net.leader().node.membership.voters == {"a", "b", "c", new} - {vid}
    net.propose(payloads(150, 10))
    net.run(3)
    assert net.hosts[new].state == [p.decode() for p in payloads(0, 160)]
    # The group tolerates losing another original member now.
    other = next(h for h in net.hosts.values() if h.id != new and h.node.role is not Role.LEADER)
    net.cut.add(other.id)
    net.propose(payloads(160, 5))
    net.run(3)
    assert net.hosts[new].state[-1] == "msg-00164"
