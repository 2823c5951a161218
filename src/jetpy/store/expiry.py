"""What is due to expire at ``now``: the one expiry policy of every store.

Owns: a store's per-message TTL deadlines (a heap of ``(expires at, seq)`` for positive TTLs,
whose stale entries are skipped when popped, and the set of ``never`` seqs), the rule for what is
due at ``now`` (every passed TTL deadline, then ``max_age`` from the head of the stream, stepping
over ``never`` messages, as nats-server does), removing it, the subject delete markers left when
that empties a subject (``subject_delete_marker_ttl``), and when the next expiry is due.
Must not know: how a store finds or removes its messages. Each store hands in its own
primitives: whether a seq is live, its head, a message's timestamp, subject and headers, how to
remove one and how to append a marker.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Final

from .base import ErrMaxBytes, ErrMaxMsgs, ErrMaxMsgsPerSubject, StoreLimits
from .ttl import is_marker, marker_headers

__all__ = ["Expiry"]

_heappush = heapq.heappush
_heappop = heapq.heappop


class Expiry:
    """One store's TTL deadlines and its expiry; see the module docstring."""

    __slots__ = (
        "_hdr_of",
        "_head",
        "_live",
        "_remove",
        "_store_msg",
        "_subject_of",
        "_ts_of",
        "heap",
        "never",
    )

    def __init__(
        self,
        *,
        live: Callable[[int], bool],
        head: Callable[[], tuple[int, int]],
        ts_of: Callable[[int], int],
        subject_of: Callable[[int], tuple[str, int]],
        hdr_of: Callable[[int], bytes],
        remove: Callable[[int], object],
        store_msg: Callable[[str, bytes, bytes, int, int], object],
    ) -> None:
        """The store's primitives: ``live(seq)``; ``head()`` = (first seq, last seq), the first
        past the last when the store is empty; ``ts_of``, ``subject_of`` (its subject and how many
        live messages that has) and ``hdr_of`` of a live seq; ``remove(seq)``; and
        ``store_msg(subject, hdr, data, ts, ttl)`` for the markers."""
        self._live = live
        self._head = head
        self._ts_of = ts_of
        self._subject_of = subject_of
        self._hdr_of = hdr_of
        self._remove = remove
        self._store_msg = store_msg
        self.heap: Final[list[tuple[int, int]]] = []
        self.never: Final[set[int]] = set()  # exempt from max_age; removals discard from it

    # ------------------------------------------------------------------ bookkeeping

    def add(self, seq: int, ts: int, ttl: int) -> None:
        """Message ``seq`` stored at ``ts`` has its own TTL (> 0 nanoseconds, or -1 never)."""
        if ttl > 0:
            _heappush(self.heap, (ts + ttl, seq))
        else:
            self.never.add(seq)

    def forget_below(self, seq: int) -> None:
        """Every message below ``seq`` is gone (the heap's stale entries are skipped later)."""
        never = self.never
        if never:
            never.difference_update([s for s in never if s < seq])

    def clear(self) -> None:
        self.heap.clear()
        self.never.clear()

    # ------------------------------------------------------------------ the policy

    def _due(self, max_age: int, now_ns: int) -> Iterator[int]:
        """The seqs to expire at ``now_ns``, in removal order; each is removed before the next is
        worked out (the head walk reads the store as it is then)."""
        heap = self.heap
        live = self._live
        while heap and heap[0][0] <= now_ns:
            seq = _heappop(heap)[1]
            if live(seq):
                yield seq
        if max_age <= 0:
            return
        cutoff = now_ns - max_age
        ts_of = self._ts_of
        never = self.never
        if not never:
            while True:
                first, last = self._head()
                if first > last or ts_of(first) > cutoff:
                    return
                yield first
        seq, last = self._head()
        while seq <= last:
            if live(seq):
                if ts_of(seq) > cutoff:
                    return
                if seq not in never:
                    yield seq
            seq += 1

    def expire(self, limits: StoreLimits, now_ns: int, limit: int = 0) -> int:
        """Remove what is due at ``now_ns``, at most ``limit`` messages (0: no bound); leave a
        delete marker on each subject this empties (unless the message removed was a marker
        itself). Returns how many were removed."""
        marker_ttl = limits.subject_delete_marker_ttl
        emptied: list[str] = []
        removed = 0
        for seq in self._due(limits.max_age, now_ns):
            if marker_ttl > 0:
                subject, count = self._subject_of(seq)
                if count == 1 and not is_marker(self._hdr_of(seq)):
                    emptied.append(subject)
            self._remove(seq)
            removed += 1
            if removed == limit:
                break
        for subject in emptied:
            try:
                self._store_msg(subject, marker_headers(marker_ttl), b"", now_ns, marker_ttl)
            except (ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject):
                pass  # a full discard-new stream has no room for the marker
        return removed

    def next_at(self, max_age: int) -> int | None:
        """When (ns since the epoch) the next message expires by age or TTL, or None."""
        best: int | None = None
        heap = self.heap
        live = self._live
        while heap and not live(heap[0][1]):
            _heappop(heap)
        if heap:
            best = heap[0][0]
        if max_age > 0:
            seq, last = self._head()
            never = self.never
            if never:
                while seq <= last and (seq in never or not live(seq)):
                    seq += 1
            if seq <= last:
                at = self._ts_of(seq) + max_age
                best = at if best is None else min(best, at)
        return best
