"""Pacer: when a consumer may send its next new message, for ``replay_policy: original`` (messages
spaced as they were stored) and ``rate_limit_bps`` (a bit rate).

Owns: the earliest time the next delivery may go out (``not_before``), the message held back
until then by replay timing (``held``), and the (time, message timestamp) pair replay timing is
measured from.

Must not know: the store, pending acks, the network or whether delivery is push or pull. Sans-IO
and clock-free: times are given (ns since the epoch).
"""

from __future__ import annotations

from jetpy.store.base import StoredMsg

__all__ = ["Pacer"]


class Pacer:
    def __init__(self) -> None:
        self.not_before = 0  # ns; 0: no wait
        self.held: StoredMsg | None = None  # taken from the stream, waiting for its replay time
        self._replay_base: tuple[int, int] | None = None  # (now, msg ts) of the first delivery
        self.rate_bps = 0  # <= 0: no rate limit

    def blocked(self, now: int) -> bool:
        """Must new messages wait at ``now``?"""
        return self.not_before > now

    def hold(self, m: StoredMsg) -> None:
        """Keep ``m`` (taken from the stream, not sent) as the next new message."""
        self.held = m

    def take_held(self) -> StoredMsg | None:
        """The message held back (no longer held), or None."""
        m = self.held
        self.held = None
        return m

    def hold_for_replay(self, m: StoredMsg, now: int) -> bool:
        """``replay_policy: original``: is ``m`` due later than ``now``? Then it is held until
        then. The first message sets the pace: every later one goes out as long after it as it
        was stored after it."""
        base = self._replay_base
        if base is None:
            self._replay_base = (now, m.ts)
            return False
        due = base[0] + (m.ts - base[1])
        if due <= now:
            return False
        self.held = m
        self.not_before = due
        return True

    def sent(self, size: int, now: int) -> None:
        """``size`` bytes went out at ``now``: the next message waits as long as the rate limit
        takes to send them."""
        self.not_before = max(self.not_before, now) + size * 8 * 1_000_000_000 // self.rate_bps

    def deadline(self) -> int | None:
        """When new messages may go out again (ns), or None if they need not wait."""
        return self.not_before or None

    def tick(self, now: int) -> None:
        if self.not_before and self.not_before <= now:
            self.not_before = 0
