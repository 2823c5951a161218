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
import math
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
    finished = _advance(steps, math.inf)
    assert finished is not None
    result: T = finished.value
    return result


async def paced(steps: Steps[T]) -> T:
    """Run the steps in slices of :data:`SLICE` seconds, yielding to the loop in between."""
    while True:
        finished = _advance(steps, time.perf_counter() + SLICE)
        if finished is not None:
            result: T = finished.value
            return result
        await asyncio.sleep(0)  # the loop serves everyone else, then the next slice


def _advance(steps: Steps[T], deadline: float) -> StopIteration | None:
    """Run steps until they finish (their ``StopIteration``, holding the result) or ``deadline``
    has passed (None)."""
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            return finished
        if time.perf_counter() >= deadline:
            return None
