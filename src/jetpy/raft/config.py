"""A node's settings and the randomness it is given (never takes).

Owns: ``Config`` with every limit named and explained, and the ``Rng`` protocol (the host passes
``random.Random(seed)`` or anything with ``randrange``: a seeded one makes a whole cluster's run
reproducible). Must not know: wall-clock time. A tick is whatever the host says it is; with the
defaults and nats-server's timers (heartbeat 1 s, election 4-9 s) a host ticks every 500 ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Config", "Rng"]


class Rng(Protocol):
    def randrange(self, stop: int, /) -> int: ...


@dataclass(frozen=True, slots=True)
class Config:
    id: str
    # A follower campaigns after a random timeout in [election_ticks, 2 * election_ticks); a
    # leader that heard from no quorum within election_ticks steps down (check-quorum).
    election_ticks: int = 10
    heartbeat_ticks: int = 2
    # Pre-vote (Raft thesis §9.6): a node that cannot win does not bump its term, so a server
    # coming back from a partition cannot depose a healthy leader.
    pre_vote: bool = True
    check_quorum: bool = True
    # One append message carries at most this much entry data (at least one entry).
    max_append_bytes: int = 1 << 20
    # Appends a leader streams to one follower before the follower acknowledges any of them.
    max_inflight: int = 256
    # Proposals are refused (ProposalDropped) while the leader's uncommitted entries hold more
    # data than this: back-pressure instead of unbounded memory. 0: no limit.
    max_uncommitted_bytes: int = 0
    # One Ready hands at most this much committed data to apply (at least one entry).
    max_apply_bytes: int = 64 << 20
    # Ask the host for a snapshot (Ready.want_snapshot) once the applied log since the last
    # snapshot holds this many entries or bytes. 0: never ask.
    snapshot_entries: int = 0
    snapshot_bytes: int = 0

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a node needs an id")
        if self.heartbeat_ticks < 1 or self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("need 1 <= heartbeat_ticks < election_ticks")
        if self.max_inflight < 1 or self.max_append_bytes < 1 or self.max_apply_bytes < 1:
            raise ValueError("max_inflight, max_append_bytes and max_apply_bytes must be positive")
