"""A node's view of its log: what the store holds plus what the host has not persisted yet.

Owns: the unstable tail (entries and an incoming snapshot the host has not yet written), the
indexes that move along the log (``committed``, ``persisted``, ``applying``, ``applied``), log
matching (``find_conflict``, ``truncate_and_append``: replace a conflicting suffix) and the
by-term search the fast back-off uses. Must not know: roles, peers or messages.

Indexes, always ``applied <= applying <= committed`` and ``applying <= persisted``:

* ``persisted``: this node's log is durable through here (the host acknowledged it with
  ``advance``). A leader counts itself towards a quorum only up to here, and nothing is applied
  past it, so what a node applies is on its own disk too.
* ``committed``: known committed (a quorum has it durably).
* ``applying``: handed to the host in a ``Ready``; ``applied``: the host confirmed it.

The unstable tail starts at ``offset``; entries before it are read from the store. ``handed`` is
the last unstable index already given to the host in a ``Ready`` (it is written but maybe not
synced): the next ``Ready`` carries only what follows. A follower's truncation can move
``offset`` below the store's last index; reads at or after ``offset`` then come from the tail.
"""

from __future__ import annotations

from collections.abc import Sequence

from .storage import LogReader, Unavailable, limit_bytes
from .types import Entry, Snapshot

__all__ = ["RaftLog"]


class RaftLog:
    __slots__ = (
        "applied",
        "applying",
        "committed",
        "handed",
        "handed_snapshot",
        "offset",
        "persisted",
        "snapshot",
        "storage",
        "unstable",
    )

    def __init__(self, storage: LogReader, commit_hint: int) -> None:
        self.storage = storage
        self.unstable: list[Entry] = []
        self.snapshot: Snapshot | None = None  # an incoming snapshot not yet persisted
        self.handed_snapshot = False
        last = storage.last_index()
        self.offset = last + 1
        self.handed = last
        self.persisted = last  # everything the store holds at start-up is on disk
        snap_index = storage.first_index() - 1
        # The stored commit is a hint written lazily: never past the log, never before the snapshot.
        self.committed = max(snap_index, min(commit_hint, last))
        self.applying = snap_index
        self.applied = snap_index

    # ------------------------------------------------------------------ positions
    def first_index(self) -> int:
        if self.snapshot is not None:
            return self.snapshot.meta.index + 1
        return self.storage.first_index()

    def last_index(self) -> int:
        if self.unstable:
            return self.offset + len(self.unstable) - 1
        if self.snapshot is not None:
            return self.snapshot.meta.index
        return self.storage.last_index()

    def last_term(self) -> int:
        t = self.term(self.last_index())
        assert t is not None
        return t

    def term(self, index: int) -> int | None:
        """The term of entry ``index``, None if compacted away or past the end."""
        off = self.offset
        if index >= off:
            i = index - off
            return self.unstable[i].term if i < len(self.unstable) else None
        if self.snapshot is not None:
            return self.snapshot.meta.term if index == self.snapshot.meta.index else None
        if index < self.storage.first_index() - 1:
            return None
        try:
            return self.storage.term(index)
        except Unavailable:
            return None

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log at least as up to date as ours."""
        our_term = self.last_term()
        return last_term > our_term or (last_term == our_term and last_index >= self.last_index())

    # ------------------------------------------------------------------ reads
    def entries(self, lo: int, hi: int, max_bytes: int) -> list[Entry]:
        """Entries ``[lo, hi)`` within ``max_bytes`` (at least one); ``Unavailable`` if ``lo``
        is compacted away."""
        if lo >= hi:
            return []
        if lo < self.first_index():
            raise Unavailable(f"entry {lo} is compacted")
        off = self.offset
        if lo >= off:
            return limit_bytes(self.unstable[lo - off : hi - off], max_bytes)
        stored = self.storage.entries(lo, min(hi, off), max_bytes)
        if hi > off and stored and stored[-1].index == off - 1:
            used = sum(len(e.data) for e in stored)
            stored.extend(limit_bytes(self.unstable[: hi - off], max_bytes, used))
        return stored

    def next_committed(self, max_bytes: int) -> list[Entry]:
        """Committed entries not yet handed out for applying, never past ``persisted``."""
        hi = min(self.committed, self.persisted)
        if hi <= self.applying:
            return []
        return self.entries(self.applying + 1, hi + 1, max_bytes)

    def has_next_committed(self) -> bool:
        return min(self.committed, self.persisted) > self.applying

    def unhanded(self) -> list[Entry]:
        start = self.handed + 1 - self.offset
        return self.unstable[start:] if start < len(self.unstable) else []

    # ------------------------------------------------------------------ writes
    def append(self, entries: Sequence[Entry]) -> None:
        """A leader's own new entries, at ``last_index() + 1``."""
        self.unstable.extend(entries)

    def truncate_and_append(self, entries: Sequence[Entry]) -> None:
        after = entries[0].index
        off = self.offset
        if after == off + len(self.unstable):
            self.unstable.extend(entries)
        elif after <= off:
            self.offset = after
            self.unstable = list(entries)
        else:
            del self.unstable[after - off :]
            self.unstable.extend(entries)
        if after <= self.handed:
            self.handed = after - 1
        if after <= self.persisted:
            self.persisted = after - 1

    def find_conflict(self, entries: Sequence[Entry]) -> int:
        """The index of the first entry that is not already in the log (0: all are)."""
        last = self.last_index()
        for e in entries:
            if e.index > last or self.term(e.index) != e.term:
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The last entry at or below ``index`` whose term is at most ``term`` (and that term).
        An index that is compacted away answers (index, 0): the caller probes there."""
        while index > 0:
            t = self.term(index)
            if t is None:
                return index, 0
            if t <= term:
                return index, t
            index -= 1
        return 0, 0

    def commit_to(self, index: int) -> bool:
        if index > self.committed:
            self.committed = index
            return True
        return False

    def restore(self, snap: Snapshot) -> None:
        """Replace the whole log by a leader's snapshot (persisted by the host from the next Ready)."""
        idx = snap.meta.index
        self.snapshot = snap
        self.handed_snapshot = False
        self.unstable = []
        self.offset = idx + 1
        self.handed = idx
        self.persisted = min(self.persisted, idx)
        self.committed = idx
        self.applying = idx

    # ------------------------------------------------------------------ the host persisted
    def stable_to(self, index: int, term: int) -> None:
        """The host persisted the unstable entries through (index, term), if still ours."""
        if self.term(index) != term:
            return  # a later Ready truncated them; its own advance will move ``persisted``
        if index >= self.offset:
            del self.unstable[: index + 1 - self.offset]
            self.offset = index + 1
        self.persisted = max(self.persisted, index)

    def stable_snapshot(self, snap: Snapshot) -> None:
        if self.snapshot is snap:
            self.snapshot = None
            self.handed_snapshot = False
            self.persisted = max(self.persisted, snap.meta.index)

    def applied_to(self, index: int) -> None:
        if index > self.applied:
            self.applied = index
