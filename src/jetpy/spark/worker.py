"""Spark's Python workers, as this connector's tasks leave them.

Owns: keeping Spark's collection after each task of a reused worker cheap, and its heap
ready for the next task's buffers (``settle_worker``).
Must not know: what the task reads or writes.
"""

from __future__ import annotations

import gc
import sys

from jetpy.heap import keep_heap

__all__ = ["settle_worker"]

_settled_modules = 0


def settle_worker() -> None:
    """Before a read or a write in a Python worker that imported modules since the last time:
    collect, then freeze what survives.

    Spark's Python daemon runs a full ``gc.collect()`` after every task of a reused worker.
    With pyspark, pyarrow and numpy loaded that walks some 80,000 objects: about 40 ms of CPU
    per task, twice what a micro-batch task takes to read its 50,000 messages. Frozen objects
    (modules and what they keep) are left out of every later collection, which then walks only
    what later tasks made. A worker imports more during its first task, after it began, so its
    second task settles again; once nothing new is imported, nothing more is frozen. What a
    task had in flight when it settled stays until the worker ends: a few settles' worth, not
    one per task.

    The worker's C heap is kept as the server's is (:func:`jetpy.heap.keep_heap`): each task's
    messages and Arrow batches are ~1 MiB buffers made and dropped one after another."""
    global _settled_modules
    keep_heap()
    if len(sys.modules) != _settled_modules:
        gc.collect()
        gc.freeze()
        _settled_modules = len(sys.modules)
