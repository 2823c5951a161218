"""An in-memory ``LogStore``: the reference implementation every durable store is compared with.

Owns: a snapshot, a list of entries and a hard state kept in memory, with the ``LogStore``
contract's rules (contiguity, suffix replacement, compaction). Must not know: durability (``sync``
does nothing: the deterministic simulation wraps this store to model a disk that keeps only what
was synced), files or formats.
"""

from __future__ import annotations

from collections.abc import Sequence

from .storage import Unavailable, limit_bytes
from .types import Entry, EntryKind, HardState, Snapshot, SnapshotMeta

__all__ = ["MemoryLog"]


class MemoryLog:
    """``LogStore`` in memory. ``entries[i]`` has index ``snapshot.meta.index + 1 + i``."""

    __slots__ = ("_entries", "_hs", "_snap")

    def __init__(self, snapshot: Snapshot | None = None, hard_state: HardState | None = None) -> None:
        self._snap = snapshot or Snapshot(SnapshotMeta())
        self._entries: list[Entry] = []
        self._hs = hard_state or HardState()

    def copy(self) -> MemoryLog:
        """An independent copy (entries are immutable, so the list is copied, not the entries)."""
        other = MemoryLog(self._snap, self._hs)
        other._entries = list(self._entries)
        return other

    # ------------------------------------------------------------------ reads
    def initial_state(self) -> HardState:
        return self._hs

    def first_index(self) -> int:
        return self._snap.meta.index + 1

    def last_index(self) -> int:
        return self._snap.meta.index + len(self._entries)

    def term(self, index: int) -> int:
        base = self._snap.meta.index
        if index == base:
            return self._snap.meta.term
        if base < index <= base + len(self._entries):
            return self._entries[index - base - 1].term
        raise Unavailable(f"index {index} outside {base}..{base + len(self._entries)}")

    def entries(self, lo: int, hi: int, max_bytes: int) -> list[Entry]:
        base = self._snap.meta.index
        if lo <= base or hi > base + len(self._entries) + 1:
            raise Unavailable(f"entries [{lo}, {hi}) outside {base + 1}..{base + len(self._entries)}")
        out = self._entries[lo - base - 1 : hi - base - 1]
        return limit_bytes(out, max_bytes)

    def snapshot(self) -> Snapshot:
        return self._snap

    def snapshot_meta(self) -> SnapshotMeta:
        return self._snap.meta

    def conf_entries(self) -> list[Entry]:
        return [e for e in self._entries if e.kind == EntryKind.CONF]

    # ------------------------------------------------------------------ writes
    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        base = self._snap.meta.index
        first = entries[0].index
        if first <= base:
            raise ValueError(f"append at {first} inside the snapshot (through {base})")
        if first > base + len(self._entries) + 1:
            raise ValueError(f"append at {first} leaves a gap after {base + len(self._entries)}")
        del self._entries[first - base - 1 :]
        self._entries.extend(entries)

    def set_hard_state(self, hs: HardState) -> None:
        self._hs = hs

    def install_snapshot(self, snap: Snapshot) -> None:
        self._snap = snap
        self._entries = []

    def compact(self, snap: Snapshot) -> None:
        base = self._snap.meta.index
        index = snap.meta.index
        if index <= base:
            return
        if index > self.last_index() or self.term(index) != snap.meta.term:
            raise ValueError(f"snapshot at {index} (term {snap.meta.term}) is not in the log")
        del self._entries[: index - base]
        self._snap = snap

    def sync(self) -> None:
        return None
