"""RecentMessages: the newest messages of a stream, kept decoded in memory so that consumers
that keep up deliver without reading them back from the store.

Stored sequences grow by one per stored message, so the cache is one contiguous run
``[base, base + len)``. It is only correct while it sees every removal: the engine clears it on
every removal it drives (API delete/purge, rollups, age and TTL expiry, retention) and does not
use it at all for streams whose store may discard messages by itself (max_msgs, max_bytes,
max_msgs_per_subject). Bounded by bytes; the oldest half goes when it is full.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Final

from jetpy.store.base import StoredMsg

__all__ = ["RECENT_BYTES", "RecentMessages"]

# Enough for a consumer to trail its publishers by seconds at high rates; a consumer further
# behind reads from the store, as it would without the cache.
RECENT_BYTES: Final = 16 * 1024 * 1024
_ENTRY_OVERHEAD: Final = 200  # a StoredMsg and its bytes objects, roughly


class RecentMessages:
    __slots__ = ("base", "enabled", "holes", "msgs", "nbytes")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.base = 0
        self.msgs: list[StoredMsg | None] = []  # None: removed since
        self.nbytes = 0
        self.holes = 0  # removed entries (an upper bound once the oldest half is dropped)

    def add(self, msg: StoredMsg) -> None:
        if not self.enabled:
            return
        msgs = self.msgs
        if not msgs or msg.seq != self.base + len(msgs):
            self._restart(msg.seq)
        msgs.append(msg)
        self.nbytes += len(msg.hdr) + len(msg.data) + _ENTRY_OVERHEAD
        if self.nbytes > RECENT_BYTES:
            self._halve()

    def extend(self, run: list[StoredMsg]) -> None:
        """:meth:`add` of each message of ``run`` (consecutive sequences), in one go."""
        if not self.enabled or not run:
            return
        first = run[0].seq
        if run[-1].seq - first != len(run) - 1:  # not consecutive (a store removed some)
            for m in run:
                self.add(m)
            return
        msgs = self.msgs
        if not msgs or first != self.base + len(msgs):
            self._restart(first)
        msgs.extend(run)
        self.nbytes += _size(run) + _ENTRY_OVERHEAD * len(run)
        while self.nbytes > RECENT_BYTES and len(msgs) > 1:
            self._halve()

    def _restart(self, seq: int) -> None:
        self.base = seq
        self.msgs.clear()
        self.nbytes = 0
        self.holes = 0

    def _halve(self) -> None:
        """Drop the oldest half (the cache is over its bytes)."""
        msgs = self.msgs
        drop = len(msgs) // 2
        gone = [m for m in msgs[:drop] if m is not None] if self.holes else msgs[:drop]
        self.nbytes -= _size(gone) + _ENTRY_OVERHEAD * len(gone)  # type: ignore[arg-type]  # no None
        del msgs[:drop]
        self.base += drop

    def get(self, seq: int) -> StoredMsg | None:
        i = seq - self.base
        if 0 <= i < len(self.msgs):
            return self.msgs[i]
        return None

    def take(self, seq: int, n: int) -> list[StoredMsg]:
        """Up to ``n`` cached messages from ``seq`` on, in order, removed ones left out (so a
        message run, not necessarily ``n`` long); empty when ``seq`` is not cached."""
        i = seq - self.base
        if i < 0 or i >= len(self.msgs):
            return []
        run = self.msgs[i : i + n]
        if self.holes:
            return [m for m in run if m is not None]
        return run  # type: ignore[return-value]  # no holes: no None in it

    def discard(self, seq: int) -> None:
        i = seq - self.base
        if 0 <= i < len(self.msgs) and self.msgs[i] is not None:
            self.msgs[i] = None
            self.holes += 1

    def reset(self, enabled: bool) -> None:
        """Empty, and on or off for a changed stream config (the same object: consumers hold it)."""
        self.clear()
        self.enabled = enabled

    def clear(self) -> None:
        self.msgs.clear()
        self.nbytes = 0
        self.base = 0
        self.holes = 0


_hdr_of = attrgetter("hdr")
_data_of = attrgetter("data")


def _size(msgs: list[StoredMsg]) -> int:
    """Their header and payload bytes (counted in C: once per message of a bulk publish)."""
    return sum(map(len, map(_hdr_of, msgs))) + sum(map(len, map(_data_of, msgs)))
