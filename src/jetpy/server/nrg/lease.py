"""A Raft leader's lease: whether it can be sure no other leader exists now, so that what it
applied is current for a read (a KV get) or a delivery (a consumer's).

Owns: when each voter last answered this leader in its term, when the loop last ticked, and
the rule: a quorum of voters (this one counted) answered within half an election timeout, on
a loop not stalled past that. A voter votes for nobody else for an election timeout after
hearing from its leader (``jetpy.raft``'s check-quorum), so within half of one no other leader
can have been elected. Only answers to this leader count (a leader cut off one way still
receives the others' vote requests), and nothing read by a loop that was stalled (after a
pause, what it reads was sent long before). Must not know: Raft's rules, the transport.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Lease"]


class Lease:
    def __init__(self, tick: float, election_timeout: float, now: float) -> None:
        self.span = election_timeout / 2
        self.stall = max(2 * tick, self.span)
        self._answered: dict[str, float] = {}
        self._ticked = now

    def ticked(self, now: float) -> None:
        self._ticked = now

    def stalled(self, now: float) -> bool:
        """The loop has not ticked for longer than the lease (or two ticks): it was stopped."""
        return now - self._ticked > self.stall

    def answered(self, voter: str, now: float) -> None:
        """``voter`` answered this leader in its term (a heartbeat's or an append's answer)."""
        if not self.stalled(now):
            self._answered[voter] = now

    def reset(self) -> None:
        """A new term: its lease starts with nobody's answer."""
        self._answered.clear()

    def holds(self, now: float, me: str, voters: Iterable[str], quorum: int) -> bool:
        if self.stalled(now):
            return False
        answered, span = self._answered, self.span
        heard = sum(1 for v in voters if v == me or (v in answered and now - answered[v] < span))
        return heard >= quorum
