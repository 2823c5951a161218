"""ExpiryTimer: one timer for the age limits and per-message TTLs of every stream.

Owns when expiry runs: the timer is armed for the earliest deadline any stream's store reports
(``next_expiry``), and an empty stream with ``max_age`` is bounded by one ``max_age`` from now.
A firing removes at most ``EXPIRE_SLICE`` messages per stream; when more are due, the timer fires
again at once, after the loop has served everyone else (a million expired messages never hold
the loop).
What expires, and the delete markers it leaves, is the store's rule (``StreamStore.expire``);
what follows from it (caches, consumers, durability) is the owner's, told through ``on_expired``.
A stream whose expiry is decided through a replicated log (``Stream.expiry_by_log``) is not
expired here: on the server that proposes its expiries the timer asks for one when it is due,
and on the others (or while one is in the log) it is not armed for that stream at all; nor for
a stream that ``log_owned`` says is such a one before its replica has taken it (a restart:
the store is open before the log is, and an expiry on this server's clock then would leave
markers of its own).

Must not know: consumers, the API, the network.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from jetpy.jetstream.stream import EXPIRE_SLICE, Stream
from jetpy.store.base import StoredMsg

__all__ = ["ExpiryTimer"]

# (stream, how many messages went, the delete markers the store left)
OnExpired = Callable[[Stream, int, list[StoredMsg]], None]


class ExpiryTimer:
    def __init__(self, streams: Mapping[str, Stream], on_expired: OnExpired) -> None:
        self._streams = streams
        self._on_expired = on_expired
        self._timer: asyncio.TimerHandle | None = None
        self.armed_at = 0  # when the armed timer fires (ns since epoch; 0: not armed)
        # whether a stream's expiry is decided through a log even while no replica has it yet
        self.log_owned: Callable[[Stream], bool] = lambda s: False

    def schedule(self) -> None:
        """Arm one timer for the earliest age expiry over all streams."""
        self.cancel()
        now = time.time_ns()
        # a TTL stream with nothing due and no max_age has no bound: its publishes re-arm the timer
        bounds = [
            (t - now if (t := s.store.next_expiry()) is not None else (s.config.max_age or None))
            for s in self._streams.values()
            if (s.config.max_age > 0 or s.config.allow_msg_ttl) and self._expires_here(s)
        ]
        waits = [w for w in bounds if w is not None]
        self.armed_at = now + max(0, min(waits)) if waits else 0
        if waits:
            self._timer = asyncio.get_running_loop().call_later(max(0, min(waits)) / 1e9, self._fire)

    def schedule_before(self, deadline: int) -> None:
        """A message with its own TTL ending at ``deadline``: re-arm if that is sooner."""
        if not 0 < self.armed_at <= deadline:
            self.schedule()

    def _expires_here(self, s: Stream) -> bool:
        """Whether the timer is armed for ``s`` on this server (see the module doc)."""
        by_log = s.expiry_by_log
        if by_log is None:
            return not self.log_owned(s)
        return not by_log.owns_expiry() or by_log.may_propose_expiry()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        now = time.time_ns()
        more = False
        for s in list(self._streams.values()):
            if s.config.max_age > 0 or s.config.allow_msg_ttl:
                by_log = s.expiry_by_log
                if by_log is None and self.log_owned(s):
                    continue  # until its replica takes it
                if by_log is not None and by_log.owns_expiry():
                    due = s.store.next_expiry()
                    if due is not None and due <= now and by_log.may_propose_expiry():
                        by_log.propose_expiry()  # applied on every replica, this one too
                    continue
                removed, markers = s.expire(now, EXPIRE_SLICE)
                if removed or markers:
                    self._on_expired(s, removed, markers)
                more = more or removed == EXPIRE_SLICE
        if more:  # the rest next, once the loop has served everyone else
            self.armed_at = now
            self._timer = asyncio.get_running_loop().call_later(0, self._fire)
        else:
            self.schedule()
