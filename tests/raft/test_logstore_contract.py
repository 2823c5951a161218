"""The ``raft.LogStore`` contract, held against every store: the in-memory reference
(``raft.MemoryLog``) and the durable one (``store.raftlog.RaftLogStore``), which is also run
against the reference op by op, reopened at random points."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jetpy.raft import (
    Entry,
    EntryKind,
    HardState,
    LogStore,
    Membership,
    MemoryLog,
    Snapshot,
    SnapshotMeta,
    Unavailable,
    encode_conf,
)
from jetpy.store.raftlog import RaftLogStore

SMALL_SEGMENTS = 600  # bytes: a few entries per segment, so rolling and unlinking are exercised
MEMBERS = Membership(frozenset({"a", "b", "c"}))
Make = Callable[[Snapshot | None], LogStore]
Reopen = Callable[[LogStore], LogStore]


@pytest.fixture(params=["memory", "file"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(kind: str, tmp_path: Path) -> Iterator[Make]:
    opened: list[RaftLogStore] = []

    def factory(snapshot: Snapshot | None = None) -> LogStore:
        if kind == "memory":
            return MemoryLog(snapshot)
        store = RaftLogStore.create(tmp_path / f"log{len(opened)}", snapshot, segment_bytes=SMALL_SEGMENTS)
        opened.append(store)
        return store

    yield factory
    for s in opened:
        s.close()


@pytest.fixture
def reopen(kind: str) -> Reopen:
    def again(store: LogStore) -> LogStore:
        if isinstance(store, RaftLogStore):
            store.close()
            return RaftLogStore.open(store.directory, segment_bytes=SMALL_SEGMENTS)
        return store

    return again


def ents(first: int, last: int, term: int, size: int = 20) -> list[Entry]:
    return [
        Entry(i, term, EntryKind.NORMAL, b"%d@%d:" % (i, term) + b"x" * size) for i in range(first, last + 1)
    ]


def all_entries(store: LogStore) -> list[Entry]:
    return store.entries(store.first_index(), store.last_index() + 1, 1 << 40)


def test_an_empty_log(make: Make) -> None:
    s = make(None)
    assert (s.first_index(), s.last_index(), s.term(0)) == (1, 0, 0)
    assert s.entries(1, 1, 100) == []
    assert s.initial_state() == HardState()
    assert s.snapshot_meta() == SnapshotMeta() and s.conf_entries() == []
    with pytest.raises(Unavailable):
        s.term(1)


def test_append_and_read(make: Make, reopen: Reopen) -> None:
    s = make(None)
    s.append(ents(1, 30, 1))
    s.append(ents(31, 40, 2))
    s.sync()
    for store in (s, reopen(s)):
        assert store.last_index() == 40
        assert all_entries(store) == ents(1, 30, 1) + ents(31, 40, 2)
        assert [store.term(i) for i in (0, 1, 30, 31, 40)] == [0, 1, 1, 2, 2]
        assert store.entries(5, 10, 1) == ents(5, 5, 1)  # at least one, even over the limit
        assert len(store.entries(5, 40, 3 * 26)) == 3
        with pytest.raises(Unavailable):
            store.entries(5, 42, 100)
        with pytest.raises(Unavailable):
            store.term(41)
        s = store


def test_bad_appends_are_refused(make: Make) -> None:
    s = make(Snapshot(SnapshotMeta(10, 2, MEMBERS)))
    with pytest.raises(ValueError):
        s.append(ents(12, 13, 3))  # a gap
    with pytest.raises(ValueError):
        s.append(ents(10, 11, 3))  # inside the snapshot
    s.append(ents(11, 12, 3))
    assert s.last_index() == 12


def test_a_conflicting_suffix_is_replaced(make: Make, reopen: Reopen) -> None:
    s = make(None)
    s.append(ents(1, 20, 1))
    conf = Entry(21, 1, EntryKind.CONF, encode_conf(MEMBERS))
    s.append([conf])
    s.append(ents(22, 25, 1))
    s.sync()
    s.append(ents(6, 8, 2))  # a new leader's entries replace 6..25
    s.sync()
    for store in (s, reopen(s)):
        assert store.last_index() == 8
        assert all_entries(store) == ents(1, 5, 1) + ents(6, 8, 2)
        assert store.conf_entries() == []
        assert store.term(8) == 2 and store.term(5) == 1
        s = store
    s.append(ents(9, 9, 2))
    assert s.last_index() == 9


def test_compaction_keeps_what_follows_the_snapshot(make: Make, reopen: Reopen) -> None:
    s = make(Snapshot(SnapshotMeta(0, 0, MEMBERS)))
    s.append(ents(1, 10, 1))
    s.append(
        [
            Entry(11, 1, EntryKind.CONF, encode_conf(MEMBERS)),
            Entry(12, 2, EntryKind.CONF, b"\x01\x00\x00\x00\x00"),
        ]
    )
    s.append(ents(13, 40, 2))
    s.sync()
    snap = Snapshot(SnapshotMeta(11, 1, MEMBERS), b"state at 11")
    s.compact(snap)
    for store in (s, reopen(s)):
        assert (store.first_index(), store.last_index(), store.term(11)) == (12, 40, 1)
        assert store.snapshot() == snap
        assert [e.index for e in store.conf_entries()] == [12]
        assert all_entries(store)[0].index == 12
        with pytest.raises(Unavailable):
            store.entries(11, 13, 100)
        with pytest.raises(Unavailable):
            store.term(10)
        s = store
    s.compact(Snapshot(SnapshotMeta(5, 1, MEMBERS)))  # older than what we have: nothing
    assert s.first_index() == 12
    with pytest.raises(ValueError):
        s.compact(Snapshot(SnapshotMeta(20, 1, MEMBERS)))  # wrong term


def test_a_leaders_snapshot_replaces_the_log(make: Make, reopen: Reopen) -> None:
    s = make(None)
    s.append(ents(1, 30, 1))
    s.sync()
    snap = Snapshot(SnapshotMeta(100, 4, MEMBERS), b"leader's state")
    s.install_snapshot(snap)
    s.sync()
    for store in (s, reopen(s)):
        assert (store.first_index(), store.last_index(), store.term(100)) == (101, 100, 4)
        assert store.snapshot() == snap and store.snapshot_meta().membership == MEMBERS
        s = store
    s.append(ents(101, 103, 5))
    assert all_entries(s) == ents(101, 103, 5)


def test_hard_state_survives(make: Make, reopen: Reopen) -> None:
    s = make(None)
    s.append(ents(1, 5, 3))
    hs = HardState(3, "nöde-b", 5, 0)
    s.set_hard_state(hs)
    s.sync()
    assert reopen(s).initial_state() == hs


def test_the_durable_store_follows_the_reference_op_by_op(tmp_path: Path) -> None:
    for seed in range(12):
        _model_run(random.Random(seed), tmp_path / f"run{seed}")


def _model_run(rng: random.Random, path: Path) -> None:
    ref = MemoryLog(Snapshot(SnapshotMeta(0, 0, MEMBERS)))
    real = RaftLogStore.create(path, Snapshot(SnapshotMeta(0, 0, MEMBERS)), segment_bytes=SMALL_SEGMENTS)
    term = 1
    try:
        for _ in range(300):
            op = rng.random()
            last, first = ref.last_index(), ref.first_index()
            if op < 0.55:
                n = rng.randint(1, 6)
                start = last + 1
                if last >= first and rng.random() < 0.2:
                    start = rng.randint(max(first, last - 8), last)  # replace a suffix
                    term += 1
                batch = [
                    Entry(
                        i,
                        term,
                        rng.choice((EntryKind.NORMAL, EntryKind.NORMAL, EntryKind.CONF)),
                        rng.randbytes(rng.randint(0, 90)),
                    )
                    for i in range(start, start + n)
                ]
                ref.append(batch)
                real.append(batch)
            elif op < 0.65 and last >= first:
                index = rng.randint(first, last)
                snap = Snapshot(SnapshotMeta(index, ref.term(index), MEMBERS), rng.randbytes(10))
                ref.compact(snap)
                real.compact(snap)
            elif op < 0.68:
                index = last + rng.randint(0, 20)
                term += 1
                snap = Snapshot(SnapshotMeta(index, term, MEMBERS), b"installed")
                ref.install_snapshot(snap)
                real.install_snapshot(snap)
            elif op < 0.78:
                hs = HardState(term, rng.choice(("", "a", "b")), rng.randint(0, max(0, last)), 0)
                ref.set_hard_state(hs)
                real.set_hard_state(hs)
            elif op < 0.9:
                real.sync()
            else:
                real.close()
                real = RaftLogStore.open(path, segment_bytes=SMALL_SEGMENTS)
                assert real.report.problems == ()
            assert (real.first_index(), real.last_index()) == (ref.first_index(), ref.last_index())
            assert real.snapshot_meta() == ref.snapshot_meta()
            assert real.term(real.first_index() - 1) == ref.term(ref.first_index() - 1)
            assert all_entries(real) == all_entries(ref)
            assert real.conf_entries() == ref.conf_entries()
            assert real.initial_state() == ref.initial_state()
            if ref.last_index() >= ref.first_index():
                lo = rng.randint(ref.first_index(), ref.last_index())
                assert real.entries(lo, ref.last_index() + 1, 150) == ref.entries(
                    lo, ref.last_index() + 1, 150
                )
    finally:
        real.close()
