"""Meters: the counters and histograms that the code producing a measurement bumps, and the
monitor reads.

Owns two small value types and the process-wide store I/O counters:

- :class:`Histogram`, fixed upper bounds (Prometheus' ``le`` buckets), a count and a sum; one
  ``observe`` is a bisect and three additions, made once per batch (a group commit, a loop-lag
  sample), never once per message;
- :data:`STORE_IO`, the bytes file stores handed to the OS (one ``pwrite`` of a commit's whole
  buffer) and read back (one ``pread`` per read-ahead or bulk read). Process-wide, like a
  process's CPU time: several servers embedded in one process share it.

Pure: no clock, no I/O, no formatting (``server.metrics`` spells the Prometheus text). Knows
nothing of what is measured.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

__all__ = ["FSYNC_BUCKETS", "LOOP_LAG_BUCKETS", "STORE_IO", "Histogram", "StoreIo"]

FSYNC_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Seconds: a group commit's fsync on an SSD takes 0.5-5 ms, on a busy or networked disk up to
seconds; past 2.5 s only ``+Inf`` tells."""

LOOP_LAG_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
"""Seconds the event loop woke late: under 1 ms is idle, tens of ms is a busy loop, a second is
a stall every client notices."""


class Histogram:
    """Observations counted into cumulative buckets by upper bound, with their count and sum."""

    __slots__ = ("bounds", "buckets", "count", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.buckets = [0] * len(bounds)  # per bucket, not cumulative: one increment per observe
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        i = bisect_left(self.bounds, value)
        if i < len(self.buckets):
            self.buckets[i] += 1
        self.count += 1
        self.sum += value

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= it)`` per bucket, then ``(inf, count)``."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip(self.bounds, self.buckets, strict=True):
            running += n
            out.append((bound, running))
        out.append((float("inf"), self.count))
        return out


class StoreIo:
    """Bytes the file stores wrote to and read from their block files, since the process started."""

    __slots__ = ("read_bytes", "reads", "write_bytes", "writes")

    def __init__(self) -> None:
        self.write_bytes = 0
        self.writes = 0  # pwrite calls (one per flush of a commit's buffer, plus header slots)
        self.read_bytes = 0
        self.reads = 0  # pread calls (a read-ahead or a bulk read each)

    def wrote(self, n: int) -> None:
        self.write_bytes += n
        self.writes += 1

    def read(self, n: int) -> None:
        self.read_bytes += n
        self.reads += 1


STORE_IO: Final = StoreIo()
