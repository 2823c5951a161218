"""The process's C heap, kept for the large buffers a server or a reading task makes and drops.

Owns: :func:`keep_heap`, which asks glibc's ``malloc`` to keep freed memory for reuse instead of
giving it back to the kernel at once, and why.

A bulk read makes a few ~1 MiB buffers per reply (the records read from the block file, the
reply, its frame, the connection's output) and drops them a moment later. With glibc's defaults
each such buffer is either mapped fresh (``mmap``: past the mapping threshold) or taken from the
top of the heap, which ``free`` then trims (``brk``) as soon as more than twice that threshold
lies unused there. Either way the next buffer's pages are new to the process: the kernel zeroes
and maps each 4 KiB page on its first touch. Measured on a bulk read of a million 100-byte
messages, those page faults were about half of the server's CPU (0.26 us per message; 0.11
with the heap kept). Keeping up to :data:`TRIM_THRESHOLD` of freed memory, and mapping only
buffers above :data:`MMAP_THRESHOLD` apart, lets the next buffer reuse pages already mapped. The
cost is memory the process may keep after a burst: at most :data:`TRIM_THRESHOLD` more than it
uses (measured: a restarted server's RSS 56 MB at rest and 76 MB at most while it mirrored 100
MB, as with glibc's adapting thresholds (56, 75); with 32 MiB kept it was 72 MB at rest).

An operator's own settings win: with ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_`` or
a ``glibc.malloc`` tunable in ``GLIBC_TUNABLES`` in the environment nothing is changed. Other C
libraries (musl, macOS) are left as they are.

Must not know: what the buffers hold.
"""

from __future__ import annotations

import ctypes
import os
from typing import Final

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_heap"]

TRIM_THRESHOLD: Final = 16 << 20
"""Freed memory at the top of the heap kept before ``free`` gives any back."""

MMAP_THRESHOLD: Final = 8 << 20
"""Buffers above this are mapped apart (and unmapped when freed), as large outliers should be;
below it: a reply's buffers and a Spark task's 4 MiB receive buffers (``spark/wire.py``)."""

_M_TRIM_THRESHOLD: Final = -1  # glibc's <malloc.h>
_M_MMAP_THRESHOLD: Final = -3

_OPERATOR_SETTINGS: Final = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")

_kept: bool | None = None


def keep_heap() -> bool:
    """Tune glibc's ``malloc`` as the module says, once per process; whether it is tuned."""
    global _kept
    if _kept is None:
        _kept = _tune()
    return _kept


def _tune() -> bool:
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):  # not a GNU libc
        return False
    if not libc.startswith("glibc"):
        return False
    if any(k in os.environ for k in _OPERATOR_SETTINGS) or "glibc.malloc" in os.environ.get(
        "GLIBC_TUNABLES", ""
    ):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # the mapping threshold first: setting either fixes both (glibc stops adapting them)
    mapped = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    return bool(mapped and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
