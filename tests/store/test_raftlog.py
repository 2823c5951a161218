"""RaftLogStore on disk: group commit, recovery from torn tails and damage, quarantine, the
hard state's fail-stop, and a real kill -9 while appending (every synced entry survives)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from jetpy.raft import Entry, EntryKind, HardState, Membership, Snapshot, SnapshotMeta
from jetpy.store import ErrCorrupt, ErrStoreIO, ErrStoreLocked, consumer_state
from jetpy.store.raftlog import RaftLogStore
from jetpy.store.raftlog import store as store_module
from jetpy.store.raftlog.records import RECORD_OVERHEAD, SEGMENT_HEADER_SIZE, check_record

MEMBERS = Membership(frozenset({"a", "b", "c"}))
SEG = 2000  # small segments: recovery crosses segment boundaries


def ents(first: int, last: int, term: int = 1, size: int = 40) -> list[Entry]:
    return [Entry(i, term, EntryKind.NORMAL, b"%06d" % i + b"." * size) for i in range(first, last + 1)]


def build(path: Path, last: int, *, close: bool = True) -> RaftLogStore:
    s = RaftLogStore.create(path, Snapshot(SnapshotMeta(0, 0, MEMBERS)), segment_bytes=SEG)
    for i in range(1, last + 1, 10):
        s.append(ents(i, min(last, i + 9)))
        s.sync()
    s.set_hard_state(HardState(1, "a", last, 0))
    if close:
        s.close()
    return s


def segments(path: Path) -> list[Path]:
    return sorted(path.glob("*.rlog"))


def records(seg: Path) -> list[tuple[int, int]]:
    """(offset, index) of every record in a segment file."""
    data = seg.read_bytes()
    out, pos = [], SEGMENT_HEADER_SIZE
    while pos < len(data):
        r = check_record(data, pos, len(data))
        assert r is not None
        out.append((pos, r[1]))
        pos += r[0]
    return out


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def reopen(path: Path) -> RaftLogStore:
    return RaftLogStore.open(path, segment_bytes=SEG)


def test_a_clean_log_reopens_as_it_was(tmp_path: Path) -> None:
    build(tmp_path, 100)
    s = reopen(tmp_path)
    assert s.report.problems == () and s.report.repair_through == 0
    assert s.last_index() == 100 and s.initial_state() == HardState(1, "a", 100, 0)
    assert s.entries(1, 101, 1 << 30) == ents(1, 100)  # read back from the files, checked again
    assert len(segments(tmp_path)) > 3
    s.close()


def test_one_fsync_covers_a_whole_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = RaftLogStore.create(tmp_path, Snapshot(SnapshotMeta(0, 0, MEMBERS)))
    calls: list[int] = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    for i in range(1, 1001, 50):
        s.append(ents(i, i + 49))
    s.sync()
    assert len(calls) == 1  # 1,000 entries in 20 appends: one fdatasync
    s.close()


def test_a_torn_tail_is_cut_off_and_reported(tmp_path: Path) -> None:
    build(tmp_path, 50)
    s = reopen(tmp_path)
    s.append(ents(51, 55))  # written, never synced, then the machine goes down mid-write:
    s._close_fds()
    last = segments(tmp_path)[-1]
    with open(last, "r+b") as f:
        f.truncate(last.stat().st_size - 7)  # the last record half written
    s = reopen(tmp_path)
    assert s.last_index() == 54 and s.report.repair_through == 0
    assert any("torn tail" in p for p in s.report.problems)
    s.append(ents(55, 57, 2))
    s.sync()
    s.close()
    s = reopen(tmp_path)
    assert s.entries(50, 58, 1 << 20)[-1] == ents(57, 57, 2)[0]
    s.close()


def test_zeros_after_the_last_record_are_a_torn_tail(tmp_path: Path) -> None:
    build(tmp_path, 30)
    with open(segments(tmp_path)[-1], "ab") as f:
        f.write(bytes(300))
    s = reopen(tmp_path)
    assert s.last_index() == 30 and s.report.repair_through == 0
    assert any("torn tail" in p for p in s.report.problems)
    s.close()


def test_a_bad_record_in_the_middle_is_damage_not_a_tail(tmp_path: Path) -> None:
    build(tmp_path, 100)
    seg = segments(tmp_path)[1]
    moved = [p.name for p in segments(tmp_path)[1:]]
    offset, index = records(seg)[2]
    flip(seg, offset + RECORD_OVERHEAD)  # a byte of that entry's data
    s = reopen(tmp_path)
    assert s.last_index() == index - 1  # the good prefix
    assert s.report.repair_through == 100  # never vote until repaired through everything it had
    assert s.initial_state().repair_through == 100
    assert any("damaged log" in p for p in s.report.problems)
    # Nothing deleted: the damaged segment and everything after it are in quarantine/.
    assert sorted(p.name for p in (tmp_path / "quarantine").iterdir()) == moved
    s.close()
    again = reopen(tmp_path)  # the repair requirement survives a restart
    assert again.report.problems == () and again.initial_state().repair_through == 100
    assert again.last_index() == index - 1
    again.close()


def test_a_missing_segment_is_a_gap(tmp_path: Path) -> None:
    build(tmp_path, 100)
    gone = segments(tmp_path)[2]
    first_lost = records(gone)[0][1]
    gone.unlink()
    s = reopen(tmp_path)
    assert s.last_index() == first_lost - 1 and s.report.repair_through == 100
    s.close()


def test_a_log_cut_at_a_record_boundary_is_noticed(tmp_path: Path) -> None:
    build(tmp_path, 60)  # close() recorded that the log was synced through 60
    last = segments(tmp_path)[-1]
    offset, index = records(last)[-3]
    with open(last, "r+b") as f:
        f.truncate(offset)
    s = reopen(tmp_path)
    assert s.last_index() == index - 1
    assert s.report.repair_through == 60
    s.close()


def test_a_legitimate_truncation_is_not_mistaken_for_damage(tmp_path: Path) -> None:
    s = build(tmp_path, 60, close=False)
    s.close()
    s = reopen(tmp_path)
    s.append(ents(20, 25, 2))  # a new leader replaced 20..60
    s.sync()
    s._close_fds()  # a crash: no close(), so no final hard-state write
    s = reopen(tmp_path)
    assert s.report.problems == () and s.last_index() == 25
    s.close()


def test_a_corrupt_hard_state_stops_the_node(tmp_path: Path) -> None:
    build(tmp_path, 10)
    flip(tmp_path / "hardstate", 20)
    with pytest.raises(ErrCorrupt, match="hardstate"):
        reopen(tmp_path)


def test_a_corrupt_snapshot_quarantines_the_log(tmp_path: Path) -> None:
    s = build(tmp_path, 50, close=False)
    s.compact(Snapshot(SnapshotMeta(30, 1, MEMBERS), b"state"))
    s.close()
    flip(tmp_path / "snapshot", 30)
    s = reopen(tmp_path)
    assert (s.first_index(), s.last_index()) == (1, 0)  # nothing usable: the leader restores it
    assert s.report.repair_through == 50
    assert (tmp_path / "quarantine" / "snapshot").exists()
    assert s.snapshot_meta().membership == Membership()  # cannot campaign: knows no voters
    s.close()


def test_a_lost_directory_is_refused_not_recreated(tmp_path: Path) -> None:
    with pytest.raises(ErrCorrupt, match="rejoin"):
        RaftLogStore.open(tmp_path / "gone")
    build(tmp_path / "log", 5)
    with pytest.raises(ErrCorrupt, match="already holds"):
        RaftLogStore.create(tmp_path / "log")


def test_one_owner_at_a_time(tmp_path: Path) -> None:
    build(tmp_path, 5)
    s = reopen(tmp_path)
    with pytest.raises(ErrStoreLocked):
        reopen(tmp_path)
    s.close()


def test_compaction_unlinks_whole_segments(tmp_path: Path) -> None:
    s = build(tmp_path, 100, close=False)
    before = len(segments(tmp_path))
    s.compact(Snapshot(SnapshotMeta(80, 1, MEMBERS), b"state"))
    assert len(segments(tmp_path)) < before
    assert s.entries(81, 101, 1 << 20) == ents(81, 100)
    s.close()
    s = reopen(tmp_path)
    assert (s.first_index(), s.last_index(), s.report.problems) == (81, 100, ())
    s.close()


def test_a_record_damaged_after_open_fails_its_read(tmp_path: Path) -> None:
    build(tmp_path, 40)
    s = RaftLogStore.open(tmp_path, segment_bytes=SEG, cache_bytes=0)
    seg = segments(tmp_path)[0]
    offset, index = records(seg)[1]
    flip(seg, offset + RECORD_OVERHEAD + 2)
    with pytest.raises(ErrCorrupt):
        s.entries(index, index + 1, 1 << 20)
    s.close()


def test_a_sync_job_runs_on_another_thread_while_the_owner_appends(tmp_path: Path) -> None:
    s = RaftLogStore.create(tmp_path, Snapshot(SnapshotMeta(0, 0, MEMBERS)), segment_bytes=SEG)
    s.append(ents(1, 50))
    s.set_hard_state(HardState(3, "b", 0, 0))
    job = s.begin_sync()
    worker = threading.Thread(target=job.run)
    worker.start()
    s.append(ents(51, 90))  # meanwhile: written now, made durable by the next sync
    assert s.entries(1, 91, 1 << 30) == ents(1, 90)
    worker.join()
    s.finish(job)
    with pytest.raises(RuntimeError, match="in flight"):
        s.finish(job)  # once only
    s.sync()
    s._close_fds()  # a crash after the second sync
    s = reopen(tmp_path)
    assert s.report.problems == () and s.last_index() == 90
    assert (s.initial_state().term, s.initial_state().vote) == (3, "b")  # written by the first job
    s.close()


def test_one_job_at_a_time_and_no_descriptor_closed_under_one(tmp_path: Path) -> None:
    s = build(tmp_path, 60, close=False)
    job = s.begin_sync()
    with pytest.raises(RuntimeError, match="in flight"):
        s.begin_sync()
    with pytest.raises(RuntimeError, match="in flight"):
        s.begin_compact(Snapshot(SnapshotMeta(30, 1, MEMBERS)))
    with pytest.raises(RuntimeError, match="in flight"):
        s.install_snapshot(Snapshot(SnapshotMeta(90, 2, MEMBERS)))
    with pytest.raises(RuntimeError, match="in flight"):
        s.append(ents(5, 6, 2))  # would replace synced entries (and unlink whole segments)
    job.run()
    s.finish(job)
    s.close()


def test_a_compaction_job_writes_the_snapshot_off_the_owners_thread(tmp_path: Path) -> None:
    s = build(tmp_path, 100, close=False)
    before = len(segments(tmp_path))
    job = s.begin_compact(Snapshot(SnapshotMeta(80, 1, MEMBERS), b"state"))
    assert job is not None
    worker = threading.Thread(target=job.run)
    worker.start()
    worker.join()
    assert s.first_index() == 1  # nothing dropped until finished on the owner's thread
    s.finish(job)
    assert s.first_index() == 81 and len(segments(tmp_path)) < before
    assert s.begin_compact(Snapshot(SnapshotMeta(70, 1, MEMBERS))) is None  # already past it
    s.sync()  # the unlinks' directory entries
    s._close_fds()
    s = reopen(tmp_path)
    assert (s.first_index(), s.last_index(), s.snapshot().data, s.report.problems) == (81, 100, b"state", ())
    s.close()


def test_a_truncation_job_lowers_synced_first_so_the_append_writes_nothing_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path, 60)
    s = reopen(tmp_path)
    assert s.begin_truncate(61) is None  # nothing synced is replaced
    job = s.begin_truncate(20)
    assert job is not None
    job.run()
    s.finish(job)
    written: list[Path] = []
    real = consumer_state.write_framed_atomic

    def counting(path: Path, magic: bytes, payload: bytes) -> None:
        written.append(path)
        real(path, magic, payload)

    monkeypatch.setattr(store_module, "write_framed_atomic", counting)
    s.append(ents(20, 25, 2))  # the new leader's entries replace 20..60
    assert written == []
    s.sync()
    s._close_fds()
    s = reopen(tmp_path)
    assert s.report.problems == () and s.last_index() == 25
    s.close()


def test_keep_snapshot_holds_any_snapshot_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = RaftLogStore.create(
        tmp_path, Snapshot(SnapshotMeta(0, 0, MEMBERS)), cache_bytes=16, keep_snapshot=True
    )
    s.append(ents(1, 10))
    s.sync()
    s.compact(Snapshot(SnapshotMeta(8, 1, MEMBERS), b"s" * 1000))
    s.close()
    s = RaftLogStore.open(tmp_path, cache_bytes=16, keep_snapshot=True)
    monkeypatch.setattr(store_module, "read_framed", None)  # no reading from disk once open
    assert s.snapshot().data == b"s" * 1000
    s.close()


def test_a_failed_fsync_is_fail_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = build(tmp_path, 10, close=False)
    s.append(ents(11, 12))

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(ErrStoreIO, match="Input/output"):
        s.sync()
    monkeypatch.undo()
    # The kernel may have dropped the pages it could not write: never report them durable.
    with pytest.raises(ErrStoreIO, match="an earlier sync failed"):
        s.sync()
    s._close_fds()


WRITER = textwrap.dedent(
    """
    import sys
    from jetpy.raft import Entry, EntryKind, Membership, Snapshot, SnapshotMeta
    from jetpy.store.raftlog import RaftLogStore
    s = RaftLogStore.create(sys.argv[1], Snapshot(SnapshotMeta(0, 0, Membership(frozenset({"a"})))), segment_bytes=4096)
    i = 1
    while True:
        s.append([Entry(j, 1, EntryKind.NORMAL, b"%08d" % j * 8) for j in range(i, i + 20)])
        i += 20
        s.append([Entry(j, 1, EntryKind.NORMAL, b"%08d" % j * 8) for j in range(i, i + 20)])
        i += 20
        s.sync()
        print(i - 1, flush=True)  # acknowledged: synced through here
    """
)


@pytest.mark.slow
def test_kill_9_while_appending_loses_nothing_synced(tmp_path: Path) -> None:
    for attempt in range(3):
        path = tmp_path / f"log{attempt}"
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
        acked = 0
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                acked = int(line)
                if acked >= 400 * (attempt + 1):
                    break
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        s = reopen(path)
        assert s.last_index() >= acked
        assert s.report.repair_through == 0
        got = s.entries(1, s.last_index() + 1, 1 << 30)
        assert [e.index for e in got] == list(range(1, s.last_index() + 1))
        assert all(e.data == b"%08d" % e.index * 8 for e in got)
        s.close()
