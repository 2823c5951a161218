"""Pause: a consumer suspended until a deadline (``pause_until``, nats-server 2.11).

Owns: the instant a consumer is paused until (ns since the epoch, from its config), whether it
is paused at a given time, how long is left (ConsumerInfo's ``paused`` / ``pause_remaining``),
the resumption at the deadline (the consumer is told once, to announce it and deliver again),
and the ``consumer_pause`` advisory's fields.

What a pause means is the consumer's: nothing is delivered while it lasts (push or pull), while
acks, ack-wait expiries, idle heartbeats and pull request expiries go on as usual, as in
nats-server. A deadline in the past (or Go's zero time) is no pause. Must not know: the
network, the store or the API. Sans-IO and clock-free: times are given (ns since the epoch).
"""

from __future__ import annotations

from typing import Any

from jetpy.jetstream.models import ZERO_TIME, format_time, parse_time

__all__ = ["Pause", "utc"]

_EPOCH = "1970-01-01T00:00:00Z"


def utc(pause_until: str | None) -> str | None:
    """A (valid) ``pause_until`` as nats-server keeps it once ``CONSUMER.PAUSE`` set it: in UTC,
    None for no time or Go's zero time (which ``parse_time`` reads as 0, as it does the epoch)."""
    if not pause_until:
        return None
    ns = parse_time(pause_until)
    if ns == 0:
        return None if pause_until.startswith("0001") else _EPOCH
    return format_time(ns)


class Pause:
    def __init__(self) -> None:
        self.until = 0  # ns; 0: not paused
        self.text: str | None = None  # the config's pause_until, as written there
        self._resume_due = False  # a deadline still to be announced when it passes

    def configure(self, pause_until: str | None, now: int) -> bool:
        """Take the config's ``pause_until`` (already validated); returns whether it changed."""
        if pause_until == self.text:
            return False
        self.text = pause_until
        self.until = parse_time(pause_until) if pause_until else 0
        self._resume_due = self.until > now
        return True

    def paused(self, now: int) -> bool:
        return self.until > now

    def remaining(self, now: int) -> int:
        """ns left of the pause at ``now`` (0 when not paused)."""
        return max(0, self.until - now)

    def deadline(self) -> int | None:
        """When the pause ends, while that is still to be announced (ns), or None."""
        return self.until if self._resume_due else None

    def resumed(self, now: int) -> bool:
        """Has the deadline just passed? True once per deadline: the consumer then announces it
        and delivers again."""
        if self._resume_due and self.until <= now:
            self._resume_due = False
            return True
        return False

    def advisory(self, now: int) -> dict[str, Any]:
        """The ``consumer_pause`` advisory's own fields: paused now, and until when (Go's zero
        time when the pause was lifted)."""
        return {"paused": self.paused(now), "pause_until": utc(self.text) or ZERO_TIME}
