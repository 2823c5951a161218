"""Steps: work written as a generator that yields where it may pause, run at once or in slices.

A request that touches thousands of subjects (a stream created or updated with 10,000 of them
subscribes each one) takes tens of milliseconds of Python on the event loop; done in one go it
delays every other client by as much. Written as ``Steps`` (a generator that yields ``None``
between units of work and returns its result), the same code runs either at once
(:func:`run_steps`, for small requests and for callers that cannot wait) or in slices of at most
:data:`SLICE` seconds with the loop serving everyone else in between (:func:`paced`).

Knows nothing of what the work is. Owns the slice length.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import Final, TypeVar

__all__ = ["SLICE", "Steps", "paced", "run_steps"]

T = TypeVar("T")

Steps = Generator[None, None, T]

SLICE: Final = 0.005
"""Seconds of work between two chances for the loop to serve other clients: a few ms is what
one client's round trip may grow by while a large request is worked on."""


def run_steps(steps: Steps[T]) -> T:
    """Run every step now; the result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


async def paced(steps: Steps[T]) -> T:
    """Run the steps in slices of :data:`SLICE` seconds, yielding to the loop in between."""
    deadline = time.perf_counter() + SLICE
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        if time.perf_counter() >= deadline:
            await asyncio.sleep(0)
            deadline = time.perf_counter() + SLICE
