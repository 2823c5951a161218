"""The seam between the Raft state machine and the host's durable log.

Owns: the two protocols a log store implements (``LogReader``, what the state machine reads;
``LogStore``, what the host writes when it persists a ``Ready``), ``persist_ready`` (the one
correct order of those writes), and ``Unavailable``. Must not know: files, fsync or formats
(``jetpy.store.raftlog`` is the durable implementation, ``MemoryLog`` the reference one).

The contract, which ``tests/raft/test_logstore_contract.py`` holds every store to:

* The log is the snapshot followed by contiguous entries ``first_index() .. last_index()``,
  ``first_index() == snapshot().meta.index + 1``; ``term(snapshot index)`` is the snapshot's term.
* ``append`` takes contiguous entries whose first index is at most ``last_index() + 1``; entries
  at or after that index are replaced (a follower's conflicting suffix). Entries become readable
  at once; they are durable after the next ``sync``.
* ``set_hard_state``: ``term``/``vote``/``repair_through`` durable after the next ``sync``; the
  commit index may be written lazily (it is a hint).
* ``install_snapshot`` replaces the whole log with a snapshot sent by a leader; ``compact``
  records the host's own snapshot and drops the entries it covers. Both durable after ``sync``.
* ``sync`` makes everything written before it durable, in order: one call covers any number of
  appends (group commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Protocol

from .types import Entry, HardState, RaftError, Snapshot, SnapshotMeta

if TYPE_CHECKING:
    from .ready import Ready

__all__ = ["LogReader", "LogStore", "Unavailable", "limit_bytes", "persist_ready"]


class Unavailable(RaftError):
    """An index outside what the store holds (compacted into the snapshot, or not written yet)."""


class LogReader(Protocol):
    def initial_state(self) -> HardState: ...

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def term(self, index: int) -> int:
        """The term of entry ``index``, for ``first_index() - 1 <= index <= last_index()``;
        ``Unavailable`` otherwise."""
        ...

    def entries(self, lo: int, hi: int, max_bytes: int) -> list[Entry]:
        """Entries ``[lo, hi)``, stopping before ``max_bytes`` of data but never empty when
        ``lo < hi``; ``Unavailable`` if ``lo < first_index()`` or ``hi > last_index() + 1``."""
        ...

    def snapshot(self) -> Snapshot:
        """The latest snapshot, data included (read only to send it to a follower)."""
        ...

    def snapshot_meta(self) -> SnapshotMeta: ...

    def conf_entries(self) -> list[Entry]:
        """The membership-change entries after the snapshot, in index order."""
        ...


class LogStore(LogReader, Protocol):
    def append(self, entries: Sequence[Entry]) -> None: ...

    def set_hard_state(self, hs: HardState) -> None: ...

    def install_snapshot(self, snap: Snapshot) -> None: ...

    def compact(self, snap: Snapshot) -> None: ...

    def sync(self) -> None: ...


def persist_ready(store: LogStore, rd: Ready) -> None:
    """Write what ``rd`` asks to persist, in the only safe order (a snapshot replaces the log the
    entries then extend). Durable after the host's next ``store.sync()``; a host may persist
    several ``Ready`` objects and sync once for all of them."""
    if rd.snapshot is not None:
        store.install_snapshot(rd.snapshot)
    if rd.entries:
        store.append(rd.entries)
    if rd.hard_state is not None:
        store.set_hard_state(rd.hard_state)


_data = itemgetter(3)  # Entry.data


def limit_bytes(entries: list[Entry], max_bytes: int, used: int = 0) -> list[Entry]:
    """The longest prefix of ``entries`` that keeps the data within ``max_bytes``, counting
    ``used`` bytes already taken; never empty when nothing was taken yet."""
    total = used + sum(map(len, map(_data, entries)))  # one pass in C: usually all fit
    if total <= max_bytes or (not used and len(entries) <= 1):
        return entries
    total = used
    for i, e in enumerate(entries):
        total += len(e.data)
        if total > max_bytes and (i > 0 or used > 0):
            return entries[:i]
    return entries
