"""jetpy.store.raftlog: a Raft group's durable log (the ``raft.LogStore`` the library persists to).

Owns: segment files of CRC'd entry records with group commit (``records.py`` for the bytes,
``scan.py`` for recovery's scan, ``store.py`` for the store), the hard-state and snapshot files,
and recovery that reports and quarantines damage instead of hiding it. Must not know: the Raft
algorithm beyond the ``LogStore`` contract, or JetStream.
"""

from .jobs import StoreJob
from .store import DEFAULT_CACHE_BYTES, DEFAULT_SEGMENT_BYTES, RaftLogStore, RecoveryReport

__all__ = ["DEFAULT_CACHE_BYTES", "DEFAULT_SEGMENT_BYTES", "RaftLogStore", "RecoveryReport", "StoreJob"]
