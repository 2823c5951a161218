"""A Raft group's timers and limits (:class:`GroupConfig`), as the host runs every group with them.

Owns: the defaults (nats-server's timers) and the election timeout they make. Must not know:
how a group runs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupConfig"]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A group's timers and limits. The defaults are nats-server's timers (a heartbeat every
    second, elections after 5-10 s); tests and the fault harness shorten ``tick``."""

    tick: float = 0.5  # seconds per Raft tick
    election_ticks: int = 10  # a follower campaigns after [1, 2) x this many ticks of silence
    heartbeat_ticks: int = 2
    max_entry_items: int = 512  # proposals packed into one entry at most (nats-server's 512)...
    max_entry_bytes: int = 256 << 10  # ...and bytes (its 256 KiB)
    max_append_bytes: int = 512 << 10  # entry data in one append message
    max_uncommitted_bytes: int = 64 << 20  # proposals refused past this much waiting for a quorum
    snapshot_entries: int = 0  # snapshot (and compact the log) after this many applied entries
    snapshot_bytes: int = 0  # ...or this much applied data (0: never)
    timeout: float = 10.0  # default seconds a proposal or change may take

    @property
    def election_timeout(self) -> float:
        return self.tick * self.election_ticks
