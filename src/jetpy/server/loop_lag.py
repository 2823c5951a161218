"""LoopLag: how late the event loop wakes up, sampled a few times a second.

Owns one small task: it sleeps ``INTERVAL``, measures how much later than asked it woke, and
records that into a :class:`~jetpy.meters.Histogram` and ``last``. A loop that is busy parsing,
routing or encoding (or blocked by a slow call) wakes late; that lateness is what every client
waits on. Knows nothing of what keeps the loop busy, nor of who reads the numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from jetpy.meters import LOOP_LAG_BUCKETS, Histogram

__all__ = ["INTERVAL", "LoopLag"]

INTERVAL: Final = 0.25
"""Seconds between samples: often enough to see a stall of a fraction of a second, rarely enough
to cost nothing (four timer wake-ups a second)."""


class LoopLag:
    def __init__(self) -> None:
        self.histogram = Histogram(LOOP_LAG_BUCKETS)
        self.last = 0.0  # the latest sample, in seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="jetpy-loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + INTERVAL
            await asyncio.sleep(INTERVAL)
            lag = max(0.0, loop.time() - asked)
            self.last = lag
            self.histogram.observe(lag)
