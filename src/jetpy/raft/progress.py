"""A leader's view of one follower's replication, and the quorum arithmetic over those views.

Owns: the per-peer state machine (probe -> replicate -> snapshot, as etcd's raft names the
states), the in-flight window that bounds how far a leader runs ahead of a follower, and
``quorum_index`` (the highest index a quorum of voters has durably). Must not know: the log's
contents or messages.

* ``PROBE``: the leader does not know where the follower's log matches; it sends one append at a
  time and waits for the answer (or a heartbeat response) before the next.
* ``REPLICATE``: the follower matches at ``match``; appends stream optimistically from ``next``,
  at most ``max_inflight`` unacknowledged messages at once.
* ``SNAPSHOT``: the follower needs entries the leader compacted away; a snapshot is on its way
  and nothing else is sent until it is acknowledged (or given up on after a while).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from enum import IntEnum

__all__ = ["Progress", "ProgressState", "quorum_index"]


class ProgressState(IntEnum):
    PROBE = 0
    REPLICATE = 1
    SNAPSHOT = 2


class Progress:
    __slots__ = (
        "inflight",
        "match",
        "max_inflight",
        "next",
        "paused",
        "pending_snapshot",
        "recent_active",
        "snapshot_wait",
        "state",
    )

    def __init__(self, next_index: int, max_inflight: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.paused = False
        self.inflight: deque[int] = deque()  # last index of each unacknowledged append
        self.max_inflight = max_inflight
        self.pending_snapshot = 0
        self.snapshot_wait = 0
        self.recent_active = False

    def _reset(self, state: ProgressState) -> None:
        self.state = state
        self.paused = False
        self.pending_snapshot = 0
        self.snapshot_wait = 0
        self.inflight.clear()

    def become_probe(self) -> None:
        self._reset(ProgressState.PROBE)
        self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, index: int) -> None:
        self._reset(ProgressState.SNAPSHOT)
        self.pending_snapshot = index

    def maybe_update(self, index: int) -> bool:
        """The follower matches through ``index``; True if that is news."""
        updated = index > self.match
        if updated:
            self.match = index
            self.paused = False
        if index + 1 > self.next:
            self.next = index + 1
        return updated

    def maybe_decrease(self, rejected: int, hint: int) -> bool:
        """The follower rejected an append after ``rejected``; ``hint`` is the highest index that
        may match. False for a stale rejection (of an append older than the current probe)."""
        if self.state is ProgressState.REPLICATE:
            if rejected < self.match:
                return False
        elif self.next - 1 != rejected:
            return False
        if rejected <= self.match:
            # The follower no longer holds what it acknowledged: its log was damaged and cut
            # back by recovery. Forget the lost part (commit never counts it again).
            self.match = min(hint, rejected - 1)
        if self.state is ProgressState.REPLICATE:
            self.next = self.match + 1
        else:
            self.next = max(min(rejected, hint + 1), self.match + 1, 1)
            self.paused = False
        return True

    def sent(self, last: int) -> None:
        """An append ending at ``last`` went out (``last`` = next - 1 for an empty one)."""
        if self.state is ProgressState.REPLICATE:
            if last >= self.next:
                self.next = last + 1
                self.inflight.append(last)
        elif self.state is ProgressState.PROBE:
            self.paused = True

    def free_to(self, index: int) -> None:
        inflight = self.inflight
        while inflight and inflight[0] <= index:
            inflight.popleft()

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.paused
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= self.max_inflight
        return True


def quorum_index(matches: Iterable[int], quorum: int) -> int:
    """The highest index that at least ``quorum`` of ``matches`` have reached."""
    ordered = sorted(matches, reverse=True)
    return ordered[quorum - 1] if len(ordered) >= quorum else 0
