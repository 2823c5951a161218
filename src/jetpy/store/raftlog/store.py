"""``RaftLogStore``: one Raft group's log, hard state and snapshot in a directory.

Owns: the ``raft.LogStore`` contract on disk: appends written as one buffer per batch and made
durable by one ``fdatasync`` per ``sync`` (group commit), a follower's suffix truncation, prefix
compaction after a snapshot (whole segments unlinked), a leader's snapshot replacing the log,
the atomically replaced hard-state and snapshot files, recovery at open (``scan.py``) and what it
does about a problem: a torn tail is cut off; damage (a bad record with good ones after it, a
gap, a log shorter than what was synced, an unreadable snapshot) moves the affected files to
``quarantine/`` (never deletes them), keeps the good prefix and records ``repair_through`` in the
hard state, so the node neither votes nor campaigns until a leader has repaired it. Must not
know: messages, roles, terms' meaning, or asyncio (``sync`` blocks: a host runs it off its loop).

Directory::

    LOCK                      flock'ed while open (store/layout.py)
    hardstate                 framed file (statefiles.py): term, vote, commit, repair_through
                              and ``synced``: the log was durable through here
    snapshot                  framed file (statefiles.py): index, term, membership, data
    <base, 20 digits>.rlog    segments (records.py)
    quarantine/               damaged files, moved aside for inspection

What is written when: ``term``/``vote``/``repair_through`` at the next ``sync`` after they change
(after the log's own fsync); ``commit`` and ``synced`` ride along with those writes and are
written at ``close`` (they are hints: a lower commit is re-learnt from the leader, and ``synced``
only lets recovery notice a log cut shorter than it was). A truncation below ``synced`` rewrites
the hard state first, so a legitimate truncation is never mistaken for damage.

Off the owner's thread: ``sync``, ``compact`` and the hard-state rewrite a truncation needs each
come in two halves as well, for a host whose owner thread is an event loop. ``begin_sync``,
``begin_compact`` and ``begin_truncate`` capture on the owner's thread what must reach the disk
as a :class:`~.jobs.StoreJob`; its ``run`` touches only the operating system (descriptors the store
keeps open until the job is finished, files it names), so it may run on a worker thread while
the owner keeps reading and appending; ``finish`` takes the result back on the owner's thread.
One job at a time; while one is in flight nothing may close a descriptor (truncating whole
segments, compacting, installing a snapshot), which the store refuses. A failed fsync is
fail-stop: after it every sync raises, because the kernel may have dropped the pages it could
not write (retrying would report them durable).
"""

from __future__ import annotations

import errno
import os
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ...raft import (
    Entry,
    EntryKind,
    HardState,
    Membership,
    Snapshot,
    SnapshotMeta,
    Unavailable,
    limit_bytes,
)
from ..base import ErrCorrupt, ErrStoreIO
from ..consumer_state import read_framed, write_framed_atomic
from ..fileio import fsync_dir, pwrite_all
from ..layout import lock_directory
from .jobs import StoreJob
from .records import (
    RECORD_OVERHEAD,
    SEGMENT_HEADER_SIZE,
    decode_records,
    encode_header,
    encode_records,
    segment_name,
)
from .scan import ScannedSegment, scan_segments
from .statefiles import (
    HARDSTATE_FILE,
    HS_MAGIC,
    SNAP_MAGIC,
    SNAPSHOT_FILE,
    decode_hs,
    decode_snapshot,
    encode_hs,
    encode_snapshot,
)

__all__ = ["DEFAULT_CACHE_BYTES", "DEFAULT_SEGMENT_BYTES", "RaftLogStore", "RecoveryReport", "StoreJob"]

QUARANTINE_DIR: Final = "quarantine"

DEFAULT_SEGMENT_BYTES: Final = 64 << 20
"""Roll to a new segment past this size: compaction frees space a whole segment at a time."""
DEFAULT_CACHE_BYTES: Final = 32 << 20
"""Entry data kept in memory after an append: followers and the apply path read the newest
entries, and reading them back from the file would decode what was just encoded."""


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What ``open`` found; ``problems`` is empty for a clean log."""

    problems: tuple[str, ...]
    quarantined: tuple[Path, ...]
    repair_through: int


class _Segment:
    __slots__ = ("base", "end", "fd", "first", "offsets", "path")

    def __init__(self, path: Path, base: int, first: int, offsets: array[int], end: int, fd: int) -> None:
        self.path, self.base, self.first, self.offsets, self.end, self.fd = (
            path,
            base,
            first,
            offsets,
            end,
            fd,
        )

    @property
    def last(self) -> int:
        return self.first + len(self.offsets) - 1


@contextmanager
def _io(what: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise ErrStoreIO(exc.errno or errno.EIO, None, f"raft log: {what}: {exc}") from exc


class RaftLogStore:
    """``raft.LogStore`` on disk. Not thread-safe: one owner calls it (``sync`` may run in a
    worker thread while the owner waits for it)."""

    def __init__(self, path: Path, segment_bytes: int, cache_bytes: int, keep_snapshot: bool = False) -> None:
        self._dir = path
        self._segment_bytes = segment_bytes
        self._cache_limit = cache_bytes
        # keep the snapshot's data in memory whatever its size: only open reads it from disk
        self._keep_snapshot = keep_snapshot
        self._lock_fd = -1
        self._segs: list[_Segment] = []
        self._snap_meta = SnapshotMeta()
        self._snap_data: bytes | None = b""
        self._runs: list[tuple[int, int]] = []  # (first index, term), ascending
        self._run_starts: list[int] = []
        self._confs: list[Entry] = []
        self._last = 0
        self._cache: list[Entry] = []  # the newest entries, indexes _cache_first.._last
        self._cache_first = 1
        self._cache_bytes = 0
        self._hs = HardState()
        self._hs_disk = HardState()  # as last written
        self._synced = 0  # the log is durable through here
        self._synced_disk = 0  # ``synced`` as last written to the hard-state file
        self._dirty_fds: set[int] = set()
        self._dir_dirty = False
        self._job: StoreJob | None = None  # in flight (see the module)
        self._failed: OSError | None = None  # a sync failed: fail-stop
        self.report = RecoveryReport((), (), 0)

    # ================================================================== open / create / close
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        snapshot: Snapshot | None = None,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        keep_snapshot: bool = False,
    ) -> RaftLogStore:
        """A new member's log (``snapshot``: the group's initial membership, at index 0 for a
        group's founders). Refuses a directory that already holds a log."""
        p = Path(path)
        with _io(f"creating {p}"):
            p.mkdir(parents=True, exist_ok=True)
            if (p / HARDSTATE_FILE).exists():
                raise ErrCorrupt(f"{p} already holds a raft log: open it instead")
            if snapshot is not None:
                write_framed_atomic(p / SNAPSHOT_FILE, SNAP_MAGIC, encode_snapshot(snapshot))
            base = snapshot.meta.index + 1 if snapshot is not None else 1
            _write_new_segment(p, base)
            # The hard-state file last: its presence is what marks a complete log.
            write_framed_atomic(p / HARDSTATE_FILE, HS_MAGIC, encode_hs(HardState(), base - 1))
            fsync_dir(p.parent)
        return cls.open(p, segment_bytes=segment_bytes, cache_bytes=cache_bytes, keep_snapshot=keep_snapshot)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        keep_snapshot: bool = False,
    ) -> RaftLogStore:
        """An existing member's log, recovered (see ``report``). A directory without a hard-state
        file is refused: a member whose state is gone must rejoin as a new member, because it
        cannot know what it voted for or acknowledged. ``keep_snapshot``: hold the snapshot's data
        in memory whatever its size, so that only this (off an event loop) reads it from disk."""
        self = cls(Path(path), segment_bytes, cache_bytes, keep_snapshot)
        if not (self._dir / HARDSTATE_FILE).exists():
            raise ErrCorrupt(
                f"{self._dir}: no raft state; a member whose log is lost must rejoin the group as a new member"
            )
        with _io(f"locking {self._dir}"):
            self._lock_fd = lock_directory(self._dir)
        try:
            self._recover()
        except BaseException:
            self._close_fds()
            raise
        return self

    def close(self) -> None:
        """Sync, write the final commit and synced index, release the directory."""
        if self._lock_fd == -2:
            return
        try:
            self.sync()
            if (self._hs, self._synced) != (self._hs_disk, self._synced_disk):
                self._write_hs()
        finally:
            self._close_fds()

    def _close_fds(self) -> None:
        for seg in self._segs:
            if seg.fd >= 0:
                os.close(seg.fd)
                seg.fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
        self._lock_fd = -2

    # ================================================================== recovery
    def _recover(self) -> None:
        d = self._dir
        problems: list[str] = []
        moved: list[Path] = []
        raw = read_framed(d / HARDSTATE_FILE, HS_MAGIC)
        assert raw is not None
        hs, synced = decode_hs(raw)  # a corrupt hard state is fail-stop: votes cannot be guessed
        self._hs_disk, self._synced_disk = hs, synced
        files = _segment_files(d)
        snap_raw: bytes | None = None
        try:
            snap_raw = read_framed(d / SNAPSHOT_FILE, SNAP_MAGIC)
            snap = decode_snapshot(snap_raw) if snap_raw is not None else Snapshot(SnapshotMeta())
        except ErrCorrupt as exc:
            # Without its snapshot the log has no base: keep nothing, be repaired by the leader.
            problems.append(f"{exc}; the log is quarantined and must be restored from the leader")
            seen = scan_segments(files, 0).highest_seen
            moved += self._quarantine([d / SNAPSHOT_FILE, *(p for _, p in files)])
            hs = HardState(hs.term, hs.vote, 0, max(hs.repair_through, synced, hs.commit, seen))
            snap = Snapshot(SnapshotMeta())
            files = []
        self._snap_meta = snap.meta
        self._snap_data = snap.data if self._keep_snapshot or len(snap.data) <= self._cache_limit else None
        after = snap.meta.index
        res = scan_segments(files, after)
        problems += res.skipped
        segs = res.segments
        if res.problem is not None:
            pb = res.problem
            where = f"{pb.segment.name} at byte {pb.offset}: {pb.reason}"
            k = next(i for i, s in enumerate(segs) if s.path == pb.segment) if segs else 0
            if pb.torn:
                problems.append(f"torn tail cut off ({where})")
                with _io("cutting a torn tail"):
                    if pb.offset < SEGMENT_HEADER_SIZE:
                        pb.segment.unlink()
                        segs = segs[:k]
                    else:
                        os.truncate(pb.segment, pb.offset)
            else:
                lost_to = max(res.highest_seen, synced)
                problems.append(
                    f"damaged log ({where}): entries after {res.last_index} lost (up to {lost_to}); "
                    "this member will not vote until a leader has repaired it"
                )
                good = segs[k]
                [aside] = self._quarantine([good.path])
                scanned = {s.path for s in segs}
                later = [s.path for s in segs[k + 1 :]] + [p for _, p in files if p not in scanned]
                moved += [aside, *self._quarantine(later)]
                if good.offsets:
                    with _io("keeping the good prefix"):
                        _rewrite_prefix(aside, good.path, good.end)
                    segs = segs[: k + 1]
                else:
                    segs = segs[:k]
                hs = HardState(hs.term, hs.vote, hs.commit, max(hs.repair_through, lost_to))
        last = res.last_index
        if last < synced and not hs.repair_through:
            problems.append(f"the log ends at {last} but was synced through {synced}: it was cut short")
            hs = HardState(hs.term, hs.vote, hs.commit, synced)
        self._runs = res.term_runs
        self._run_starts = [r[0] for r in self._runs]
        self._confs = res.confs
        self._last = last
        self._cache_first = last + 1
        with _io("opening segments"):
            for s in segs:
                # What a killed process left in the page cache is read back as if durable: make
                # it so before this node acknowledges anything on the strength of it.
                self._segs.append(_open_segment(s))
            if not self._segs or self._segs[-1].end >= self._segment_bytes:
                self._roll()
            self._dirty_fds.clear()
            for seg in self._segs:
                os.fsync(seg.fd)
            fsync_dir(d)
            self._dir_dirty = False
        self._synced = last
        self._hs = hs
        if hs != self._hs_disk or problems:
            self._write_hs()
        self.report = RecoveryReport(tuple(problems), tuple(moved), hs.repair_through)

    def _quarantine(self, paths: Sequence[Path]) -> list[Path]:
        """Move files aside (never delete what may be evidence); returns their new paths."""
        qdir = self._dir / QUARANTINE_DIR
        out: list[Path] = []
        with _io("quarantining damaged files"):
            qdir.mkdir(exist_ok=True)
            for p in paths:
                if not p.exists():
                    continue
                target = qdir / p.name
                n = 1
                while target.exists():
                    target = qdir / f"{p.name}.{n}"
                    n += 1
                os.replace(p, target)
                out.append(target)
            fsync_dir(qdir)
            fsync_dir(self._dir)
        return out

    # ================================================================== reads
    def initial_state(self) -> HardState:
        return self._hs

    def first_index(self) -> int:
        return self._snap_meta.index + 1

    def last_index(self) -> int:
        return self._last

    def term(self, index: int) -> int:
        snap = self._snap_meta
        if index == snap.index:
            return snap.term
        if index < snap.index or index > self._last:
            raise Unavailable(f"index {index} outside {snap.index}..{self._last}")
        return self._runs[bisect_right(self._run_starts, index) - 1][1]

    def entries(self, lo: int, hi: int, max_bytes: int) -> list[Entry]:
        if lo <= self._snap_meta.index or hi > self._last + 1:
            raise Unavailable(f"entries [{lo}, {hi}) outside {self._snap_meta.index + 1}..{self._last}")
        if lo >= hi:
            return []
        cf = self._cache_first
        if lo >= cf:
            return limit_bytes(self._cache[lo - cf : hi - cf], max_bytes)
        out = self._read(lo, min(hi, cf), max_bytes)
        if hi > cf and out and out[-1].index == cf - 1:
            used = sum(len(e.data) for e in out)
            out += limit_bytes(self._cache[: hi - cf], max_bytes, used)
        return out

    def _read(self, lo: int, hi: int, max_bytes: int) -> list[Entry]:
        """Entries [lo, hi) from the segment files within ``max_bytes`` (at least one), each
        record checked again as it is read."""
        out: list[Entry] = []
        used = 0
        segs = self._segs
        k = bisect_right([s.first for s in segs], lo) - 1
        while lo < hi and k < len(segs):
            seg = segs[k]
            k += 1
            if lo > seg.last:
                continue
            top = min(hi, seg.last + 1)
            start = seg.offsets[lo - seg.first]
            stop = seg.offsets[top - seg.first] if top <= seg.last else seg.end
            with _io(f"reading {seg.path.name}"):
                buf = os.pread(seg.fd, stop - start, start)
            try:
                got = decode_records(buf, lo)
            except ValueError as exc:
                raise ErrCorrupt(f"{seg.path.name}: {exc}") from exc
            for e in got:
                used += len(e.data)
                if used > max_bytes and out:
                    return out
                out.append(e)
            lo = top
        return out

    def snapshot(self) -> Snapshot:
        data = self._snap_data
        if data is None:
            raw = read_framed(self._dir / SNAPSHOT_FILE, SNAP_MAGIC)
            if raw is None:
                raise ErrCorrupt(f"{self._dir / SNAPSHOT_FILE} is missing")
            data = decode_snapshot(raw).data
        return Snapshot(self._snap_meta, data)

    def snapshot_meta(self) -> SnapshotMeta:
        return self._snap_meta

    def conf_entries(self) -> list[Entry]:
        return list(self._confs)

    # ================================================================== writes
    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        first = entries[0].index
        if first <= self._snap_meta.index or first > self._last + 1:
            raise ValueError(f"append at {first}: the log holds {self._snap_meta.index + 1}..{self._last}")
        if first <= self._last:
            self._truncate(first)
        if self._segs[-1].end >= self._segment_bytes:
            self._roll()
        seg = self._segs[-1]
        buf, lengths = encode_records(entries)
        with _io(f"appending to {seg.path.name}"):
            try:
                pwrite_all(seg.fd, buf, seg.end)
            except OSError:
                os.ftruncate(seg.fd, seg.end)  # leave no partial record behind
                raise
        pos = seg.end
        offsets = seg.offsets
        if not offsets:
            seg.first = first
        for n in lengths:
            offsets.append(pos)
            pos += n
        seg.end = pos
        self._dirty_fds.add(seg.fd)
        runs = self._runs
        for e in entries:
            if e.kind is EntryKind.CONF:
                self._confs.append(e)
        if not runs or runs[-1][1] != entries[-1].term or entries[0].term != entries[-1].term:
            for e in entries:
                if not runs or runs[-1][1] != e.term:
                    runs.append((e.index, e.term))
                    self._run_starts.append(e.index)
        self._last = entries[-1].index
        self._cache_add(entries, len(buf) - len(lengths) * RECORD_OVERHEAD)

    def _cache_add(self, entries: Sequence[Entry], data_bytes: int) -> None:
        if not self._cache:
            self._cache_first = entries[0].index
        self._cache.extend(entries)
        self._cache_bytes += data_bytes
        cache = self._cache
        if self._cache_bytes > self._cache_limit:
            drop = 0
            while drop < len(cache) - 1 and self._cache_bytes > self._cache_limit:
                self._cache_bytes -= len(cache[drop].data)
                drop += 1
            del cache[:drop]
            self._cache_first += drop

    def _truncate(self, first: int) -> None:
        """Drop entries ``first..`` (a follower's conflicting suffix)."""
        job = self._job
        if first - 1 < max(self._synced_disk, job.synced if job is not None and job.hs is not None else 0):
            # Lower the recorded synced index first: recovery must not mistake this for damage.
            # (A host off its loop runs ``begin_truncate``'s job first, so this does not block.)
            self._check_no_job("truncate below what is synced")
            self._synced = min(self._synced, first - 1)
            self._write_hs()
        self._synced = min(self._synced, first - 1)
        if job is not None and job.last >= first:
            job.last = first - 1  # a sync in flight does not make the replaced entries durable
        with _io("truncating the log"):
            while len(self._segs) > 1 and self._segs[-1].first >= first and self._segs[-1].base >= first:
                self._check_no_job("truncate whole segments")
                seg = self._segs.pop()
                self._dirty_fds.discard(seg.fd)
                os.close(seg.fd)
                seg.path.unlink()
                self._dir_dirty = True
            seg = self._segs[-1]
            keep = max(0, first - seg.first)
            if keep < len(seg.offsets):
                seg.end = seg.offsets[keep]
                del seg.offsets[keep:]
            os.ftruncate(seg.fd, seg.end)
            self._dirty_fds.add(seg.fd)
            if self._dir_dirty:
                fsync_dir(self._dir)  # deleted segments must not come back under the new entries
                self._dir_dirty = False
        self._last = first - 1
        cut = bisect_right(self._run_starts, first - 1)
        del self._runs[cut:]
        del self._run_starts[cut:]
        self._confs = [e for e in self._confs if e.index < first]
        if first <= self._cache_first:
            self._cache, self._cache_bytes, self._cache_first = [], 0, first
        else:
            dropped = self._cache[first - self._cache_first :]
            del self._cache[first - self._cache_first :]
            self._cache_bytes -= sum(len(e.data) for e in dropped)

    def _roll(self) -> None:
        base = self._last + 1
        with _io("creating a segment"):
            path = _write_new_segment(self._dir, base, sync=False)
            fd = os.open(path, os.O_RDWR)
        self._segs.append(_Segment(path, base, base, array("Q"), SEGMENT_HEADER_SIZE, fd))
        self._dirty_fds.add(fd)
        self._dir_dirty = True

    def set_hard_state(self, hs: HardState) -> None:
        self._hs = hs

    def install_snapshot(self, snap: Snapshot) -> None:
        """A leader's snapshot replaces the whole log (durable when this returns)."""
        self._check_no_job("install a snapshot")
        with _io("installing a snapshot"):
            write_framed_atomic(self._dir / SNAPSHOT_FILE, SNAP_MAGIC, encode_snapshot(snap))
            for seg in self._segs:
                self._dirty_fds.discard(seg.fd)
                os.close(seg.fd)
                seg.path.unlink()
            self._segs = []
            self._set_snapshot(snap)
            self._last = snap.meta.index
            self._runs, self._run_starts, self._confs = [], [], []
            self._cache, self._cache_bytes, self._cache_first = [], 0, self._last + 1
            self._roll()
            fsync_dir(self._dir)
            self._dir_dirty = False

    def compact(self, snap: Snapshot) -> None:
        """The host's own snapshot through ``snap.meta.index``: entries up to it are dropped
        (whole segments unlinked; durable when this returns)."""
        job = self.begin_compact(snap)
        if job is None:
            return
        with _io("compacting the log"):
            job.run()
        self.finish(job)
        if self._dir_dirty:
            with _io("compacting the log"):
                fsync_dir(self._dir)
            self._dir_dirty = False

    def begin_compact(self, snap: Snapshot) -> StoreJob | None:
        """The first half of ``compact``: its job writes the snapshot file; ``finish`` then drops
        the entries it covers (the directory's entries are synced by the next sync). None: the
        log is already compacted past it."""
        index = snap.meta.index
        if index <= self._snap_meta.index:
            return None
        if index > self._last or self.term(index) != snap.meta.term:
            raise ValueError(f"snapshot at {index} (term {snap.meta.term}) is not in the log")
        return self._start(StoreJob("compact", self._dir, snap=snap))

    def _finish_compact(self, snap: Snapshot) -> None:
        index = snap.meta.index
        if index <= self._snap_meta.index:
            return
        self._set_snapshot(snap)
        with _io("compacting the log"):
            while len(self._segs) > 1 and self._segs[1].first <= index + 1:
                seg = self._segs.pop(0)
                self._dirty_fds.discard(seg.fd)
                os.close(seg.fd)
                seg.path.unlink()
                self._dir_dirty = True
        cut = bisect_right(self._run_starts, index) - 1
        if cut > 0:
            del self._runs[:cut]
            del self._run_starts[:cut]
        self._confs = [e for e in self._confs if e.index > index]
        if self._cache_first <= index:
            drop = min(index + 1 - self._cache_first, len(self._cache))
            self._cache_bytes -= sum(len(e.data) for e in self._cache[:drop])
            del self._cache[:drop]
            self._cache_first += drop

    def _set_snapshot(self, snap: Snapshot) -> None:
        self._snap_meta = snap.meta
        self._snap_data = snap.data if self._keep_snapshot or len(snap.data) <= self._cache_limit else None

    def sync(self) -> None:
        """Make every write so far durable: one fdatasync per written segment (normally one),
        the directory if segments came or went, then the hard state if its votes changed."""
        job = self.begin_sync()
        try:
            job.run()
        except OSError:
            pass  # ``finish`` raises it as the store's error
        self.finish(job)

    def begin_sync(self) -> StoreJob:
        """The first half of ``sync`` (see the module): its job fdatasyncs what was written so
        far; appends may go on meanwhile and are covered by the next one."""
        if self._failed is not None:
            raise ErrStoreIO(
                self._failed.errno or errno.EIO, None, f"raft log: an earlier sync failed: {self._failed}"
            )
        hs, disk = self._hs, self._hs_disk
        votes_changed = (hs.term, hs.vote, hs.repair_through) != (disk.term, disk.vote, disk.repair_through)
        job = StoreJob(
            "sync",
            self._dir,
            fds=tuple(self._dirty_fds),
            sync_dir=self._dir_dirty,
            hs=hs if votes_changed else None,
            synced=self._last,
            last=self._last,
        )
        self._dirty_fds.clear()
        self._dir_dirty = False
        return self._start(job)

    def begin_truncate(self, first: int) -> StoreJob | None:
        """What an append at ``first`` (replacing a synced suffix) must write before it: the hard
        state with ``synced`` lowered, so recovery never takes the truncation for damage. None:
        nothing to write first."""
        if first > self._last or first - 1 >= self._synced_disk:
            return None
        self._synced = min(self._synced, first - 1)
        return self._start(StoreJob("truncate", self._dir, hs=self._hs, synced=self._synced))

    def _start(self, job: StoreJob) -> StoreJob:
        self._check_no_job(f"start a {job.kind}")
        self._job = job
        return job

    def _check_no_job(self, what: str) -> None:
        if self._job is not None:
            raise RuntimeError(f"raft log: cannot {what} while a {self._job.kind} is in flight")

    def finish(self, job: StoreJob) -> None:
        """The second half: take a job's result on the owner's thread. A failed job raises the
        store's ``ErrStoreIO``; after a failed sync every later one fails too (fail-stop)."""
        if self._job is not job:
            raise RuntimeError("raft log: finishing a job that is not in flight")
        self._job = None
        exc = job.error
        if exc is not None:
            if job.kind == "sync":
                self._failed = exc
            raise ErrStoreIO(exc.errno or errno.EIO, None, f"raft log: {job.kind}: {exc}") from exc
        if job.hs is not None:
            self._hs_disk = job.hs
            self._synced_disk = job.synced
        if job.kind == "sync":
            self._synced = max(self._synced, job.last)
        elif job.kind == "compact" and job.snap is not None:
            self._finish_compact(job.snap)

    def _write_hs(self) -> None:
        with _io("writing the hard state"):
            write_framed_atomic(self._dir / HARDSTATE_FILE, HS_MAGIC, encode_hs(self._hs, self._synced))
        self._hs_disk = self._hs
        self._synced_disk = self._synced

    def size_bytes(self) -> int:
        """The segments' bytes on disk (what the log holds now)."""
        return sum(seg.end for seg in self._segs)

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def membership(self) -> Membership:
        return self._snap_meta.membership


def _segment_files(d: Path) -> list[tuple[int, Path]]:
    out = []
    for p in d.glob("*.rlog"):
        stem = p.name[: -len(".rlog")]
        if len(stem) == 20 and stem.isdigit():
            out.append((int(stem), p))
    return sorted(out)


def _write_new_segment(d: Path, base: int, sync: bool = True) -> Path:
    path = d / segment_name(base)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, encode_header(base), 0)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if sync:
        fsync_dir(d)
    return path


def _open_segment(s: ScannedSegment) -> _Segment:
    fd = os.open(s.path, os.O_RDWR)
    if os.fstat(fd).st_size != s.end:
        os.ftruncate(fd, s.end)  # bytes after the last kept record (only compacted ones remain)
    return _Segment(s.path, s.base, s.first, s.offsets, s.end, fd)


def _rewrite_prefix(source: Path, target: Path, end: int) -> None:
    """``target`` := the first ``end`` bytes of ``source``, durably (tmp, fsync, rename)."""
    tmp = target.with_name(target.name + ".tmp")
    with open(source, "rb") as f:
        data = f.read(end)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(target.parent)
