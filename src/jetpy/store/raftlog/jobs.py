"""Disk work a Raft log store hands to another thread: fsyncs and the small files' rewrites.

Owns: :class:`StoreJob`, what one sync, compaction or truncation must make durable, captured on
the store owner's thread and run on any (see ``store``'s module doc for the protocol). Must not
know: the store's in-memory state; a job holds only descriptors, paths and encoded bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...raft import HardState, Snapshot
from ..consumer_state import write_framed_atomic
from ..fileio import fsync_dir
from .statefiles import HARDSTATE_FILE, HS_MAGIC, SNAP_MAGIC, SNAPSHOT_FILE, encode_hs, encode_snapshot

__all__ = ["StoreJob"]


class StoreJob:
    """Disk work captured on the owner's thread (see the module): ``run`` on any thread, then
    the store's ``finish`` on the owner's thread."""

    __slots__ = (
        "_fds",
        "_hs_payload",
        "_path",
        "_snap_payload",
        "_sync_dir",
        "error",
        "hs",
        "kind",
        "last",
        "snap",
        "synced",
    )

    def __init__(
        self,
        kind: str,
        path: Path,
        *,
        fds: tuple[int, ...] = (),
        sync_dir: bool = False,
        hs: HardState | None = None,
        synced: int = 0,
        last: int = -1,
        snap: Snapshot | None = None,
    ) -> None:
        self.kind = kind  # "sync", "compact" or "truncate"
        self._path = path  # the store's directory
        self._fds = fds  # to fdatasync
        self._sync_dir = sync_dir  # segments came or went since the last sync
        self.hs = hs  # the hard state this job writes (None: none)
        self.synced = synced  # the ``synced`` index that hard state records
        self._hs_payload = encode_hs(hs, synced) if hs is not None else None
        self.last = last  # a sync: the log is durable through here once run
        self.snap = snap  # a compaction: the snapshot written
        self._snap_payload = encode_snapshot(snap) if snap is not None else None
        self.error: OSError | None = None

    def run(self) -> None:
        """The job's fsyncs and writes, in the order that makes them safe: the log's data, the
        directory, then the snapshot and hard-state files that point into it. Records (and
        raises) the first ``OSError``."""
        try:
            for fd in self._fds:
                os.fdatasync(fd)
            if self._sync_dir:
                fsync_dir(self._path)
            if self._snap_payload is not None:
                write_framed_atomic(self._path / SNAPSHOT_FILE, SNAP_MAGIC, self._snap_payload)
            if self._hs_payload is not None:
                write_framed_atomic(self._path / HARDSTATE_FILE, HS_MAGIC, self._hs_payload)
        except OSError as exc:
            self.error = exc
            raise
