"""The live progress bar of a benchmark run (rich, on stderr so stdout stays clean for --json).

Owns when progress is shown: only on a terminal, only if asked, and only once a run has lasted
``SHOW_AFTER`` seconds, so short runs print nothing but their result. It reads the shared
``Counters``; it never slows the clients down (they bump integers, this polls them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
)

from jetpy.bench.clients import Counters

__all__ = ["SHOW_AFTER", "run_with_progress"]

SHOW_AFTER = 1.0  # seconds before a bar appears: short runs stay quiet
REFRESH = 0.1  # seconds between counter polls

T = TypeVar("T")


async def _display(counters: Counters, console: Console) -> None:
    await asyncio.sleep(SHOW_AFTER)
    columns = (
        TextColumn("{task.description:>8}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("msgs"),
        TaskProgressColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        pub_task: TaskID | None = None
        recv_task: TaskID | None = None
        while True:
            if counters.pub_target and pub_task is None:
                pub_task = progress.add_task(counters.pub_label, total=counters.pub_target)
            if counters.recv_target and recv_task is None:
                recv_task = progress.add_task("receive", total=counters.recv_target)
            if pub_task is not None:
                progress.update(
                    pub_task,
                    description=counters.pub_label,
                    total=counters.pub_target,
                    completed=counters.published,
                )
            if recv_task is not None:
                progress.update(recv_task, total=counters.recv_target, completed=counters.received)
            await asyncio.sleep(REFRESH)


async def run_with_progress(
    work: Awaitable[T], counters: Counters, *, enabled: bool, console: Console | None = None
) -> T:
    """Await ``work`` while showing progress (if ``enabled``) from ``counters``."""
    if not enabled:
        return await work
    display = asyncio.create_task(_display(counters, console or Console(stderr=True)))
    try:
        return await work
    finally:
        display.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await display
