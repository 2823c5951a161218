"""Fast-producer stalls: a publisher waits briefly for a receiver its messages backed up.

Owns one connection's side of it, both ways: as a producer, the receivers its last read left
write-blocked (past their transport's high-water mark) make it stop reading for at most
``STALL_MAX`` seconds, or until they drain; as a receiver, the producers waiting on it, released
when it drains or closes. Like nats-server's stall, this bounds nothing by itself: a receiver
that never drains keeps growing (more slowly) until ``max_pending`` or ``write_deadline`` makes
it a slow consumer, so one stuck subscriber never stops a publisher for long. A fast receiver
simply paces a faster producer instead of being cut off.

Must not know: the protocol, routing, subscriptions.
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol

__all__ = ["STALL_MAX", "WRITE_HIGH_WATER", "WRITE_LOW_WATER", "Flow"]

STALL_MAX: Final = 0.005
"""Longest a producer waits for backed-up receivers per read, seconds (nats-server stalls a fast
producer for a few milliseconds at a time)."""

WRITE_HIGH_WATER: Final = 1024 * 1024
"""Bytes a client's transport may hold before it counts as backed up (a producer then stalls)."""

WRITE_LOW_WATER: Final = 256 * 1024
"""Bytes below which a backed-up client counts as drained again."""


class Reader(Protocol):
    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class Flow:
    __slots__ = ("_loop", "_paused", "_reader", "_timer", "_waiting")

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._paused = False
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: set[Flow] = set()  # producers stalled on this receiver
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- as a producer ---------------------------------------------------------------------------

    def stall(self, receivers: list[Flow]) -> None:
        """This connection's read left ``receivers`` backed up: stop reading until they drain,
        for ``STALL_MAX`` at most."""
        others = [r for r in receivers if r is not self]
        if not others or self._paused:
            return
        for r in others:
            r._waiting.add(self)
        self._paused = True
        self._reader.pause_reading()
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        self._timer = loop.call_later(STALL_MAX, self.resume)

    def resume(self) -> None:
        if not self._paused:
            return
        self._paused = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._reader.resume_reading()

    # -- as a receiver ---------------------------------------------------------------------------

    def drained(self) -> None:
        """This connection drained (or closed): the producers waiting on it go on."""
        waiting, self._waiting = self._waiting, set()
        for p in waiting:
            p.resume()

    def close(self) -> None:
        """The connection is gone: release whoever waits on it, and stop its own stall timer."""
        self.drained()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._paused = False
