"""A file store's stream directory: the names of its parts, and the lock on it.

Owns: the directory layout below, the exclusive lock a ``FileStore`` holds while it has the
directory open, and the read-only probe the offline scanner uses to warn that a server is
running. Must not know: what the files hold (``record.py`` for blocks, ``consumer_state.py`` for
the framed files), the index, or where a server keeps its stream directories.

Layout::

    <dir>/LOCK                      flock'ed while a FileStore has the directory open
    <dir>/meta.dat                  stream config bytes (framed, see consumer_state.py)
    <dir>/tail.dat                  the tail record: where the stream ends (see tail.py), kept
                                    outside msgs/ so that losing the blocks does not lose it
    <dir>/msgs/<first seq>.blk      message blocks (see record.py, named by segment.block_name);
                                    no index file: recovery rebuilds the index from the blocks
    <dir>/obs/<consumer>/o.dat      consumer state (framed msgpack, see consumer_state.py)
    <dir>/obs/<consumer>/meta.dat   consumer config bytes (framed)
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Final

from .base import ErrStoreLocked

__all__ = [
    "CONSUMER_META_FILE",
    "CONSUMER_STATE_FILE",
    "LOCK_FILE",
    "META_FILE",
    "MSGS_DIR",
    "OBS_DIR",
    "TAIL_FILE",
    "is_locked",
    "lock_directory",
]

MSGS_DIR: Final = "msgs"
OBS_DIR: Final = "obs"
META_FILE: Final = "meta.dat"
TAIL_FILE: Final = "tail.dat"
LOCK_FILE: Final = "LOCK"  # flock'ed while open: two writers on one directory would corrupt it
CONSUMER_STATE_FILE: Final = "o.dat"
CONSUMER_META_FILE: Final = "meta.dat"


def lock_directory(directory: Path) -> int:
    """Take an exclusive advisory lock on ``directory/LOCK``; -1 if the media cannot hold one.

    The lock lives as long as the returned descriptor; closing it releases the lock."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return -1  # read-only media without a lock file: nobody can write here anyway
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise ErrStoreLocked(f"{ErrStoreLocked.description}: {directory}") from exc
    return fd


def is_locked(directory: Path) -> bool:
    """True if a ``FileStore`` (here or in another process) holds the directory's lock; checked
    without creating the lock file or taking the lock."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
