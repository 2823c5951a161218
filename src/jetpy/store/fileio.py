"""Whole reads and writes with the OS: the loops every store file kind needs, written once.

Owns: reading a file's bytes to a size (``pread_all``: short reads continued, a file shorter than
asked for gives what it has), writing all of a buffer at an offset (``pwrite_all``: short writes
continued, no progress is ENOSPC), a new file's bytes written and synced (``write_synced``), and
making a directory's entries durable (``fsync_dir``). Raises OSError only; knows nothing of
records, frames or keys.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["fsync_dir", "pread_all", "pwrite_all", "write_synced"]


def pread_all(fd: int, size: int, offset: int = 0) -> bytes:
    """Up to ``size`` bytes of ``fd`` from ``offset`` (fewer only where the file ends)."""
    first = os.pread(fd, size, offset)
    if len(first) == size or not first:
        return first
    chunks = [first]
    done = len(first)
    while done < size:
        chunk = os.pread(fd, size - done, offset + done)
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    """All of ``data`` at ``offset``; a write that makes no progress is ENOSPC."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        if n <= 0:
            raise OSError(errno.ENOSPC, "no progress writing")
        view = view[n:]
        offset += n


def write_synced(path: Path, data: bytes) -> None:
    """Create (or truncate) ``path`` holding ``data``, fsynced before it returns."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (creates, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
