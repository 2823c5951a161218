"""A group's Raft state as the monitoring (``/raftz``, and next ``/jsz``'s ``meta_cluster``,
stream info's ``cluster {}`` and ``/healthz``) reads it: typed values, nothing live.

Owns: :class:`GroupStatus` and :class:`PeerState` with each peer's health (``current``: has
everything the leader committed; ``lagging``: alive but behind; ``offline``: not heard from
within an election timeout), and the rule deciding that health. Must not know: how the state is
kept, or any endpoint's JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from jetpy.raft import Membership, PeerStatus

__all__ = ["CURRENT", "LAGGING", "OFFLINE", "UNKNOWN", "GroupStatus", "PeerState", "health", "peer_states"]

CURRENT: Final = "current"
LAGGING: Final = "lagging"
OFFLINE: Final = "offline"
UNKNOWN: Final = "unknown"  # a follower knows only its leader's state
Health = Literal["current", "lagging", "offline", "unknown"]


def health(active: bool, match: int | None, commit: int) -> Health:
    """A peer as its leader sees it: ``match`` is its last replicated index."""
    if not active:
        return OFFLINE
    if match is None:
        return UNKNOWN
    return CURRENT if match >= commit else LAGGING


@dataclass(frozen=True, slots=True)
class PeerState:
    id: str
    name: str  # its server's name, when known (else its id)
    voter: bool
    health: Health
    active: bool  # heard from within an election timeout
    match: int | None  # last index replicated to it (the leader's view only)
    lag: int | None  # entries it is behind the leader's commit (the leader's view only)
    last_seen: float | None  # seconds since a message from it arrived (None: never)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    group: str
    id: str  # this member's id
    state: str  # nats-server's names: LEADER, FOLLOWER, CANDIDATE, CLOSED
    leader: str  # the leader's id ("" when none is known)
    leader_since: float | None  # epoch seconds this member became leader (while it is)
    ever_had_leader: bool
    term: int
    vote: str
    committed: int
    applied: int
    first_index: int  # the log holds first_index..last_index (first_index - 1: the snapshot)
    last_index: int
    last_term: int
    voters: int
    quorum: int
    observer: bool  # not a voter (a learner, or not yet a member)
    current: bool  # has a leader and has applied everything it knows is committed
    catching_up: bool
    repair_through: int  # its log lost entries through here: it will not vote until repaired
    peers: tuple[PeerState, ...]
    error: str  # why the group stopped, if it did
    proposals_queued: int  # proposals waiting to go into an entry (or to the leader)
    proposals_pending: int  # units queued or forwarded, not yet answered
    log_bytes: int  # the log's segments on disk
    last_append: float | None  # epoch seconds entries were last written to the log
    last_snapshot: tuple[float, float] | None = None  # (epoch seconds, duration) of the last snapshot here


def peer_states(
    membership: Membership,
    me: str,
    progress: Mapping[str, PeerStatus],
    commit: int,
    last_seen: Mapping[str, float],
    names: Mapping[str, str],
    now: float,
    timeout: float,
) -> tuple[PeerState, ...]:
    """Every other member as this one sees it (``progress``: the leader's replication state of
    each, empty on a follower; ``last_seen``: monotonic times a message from each arrived)."""
    peers: list[PeerState] = []
    for pid in sorted(membership.members() - {me}):
        seen = last_seen.get(pid)
        ago = now - seen if seen is not None else None
        active = ago is not None and ago <= timeout
        pr = progress.get(pid)
        match = pr.match if pr is not None else None
        lag = max(0, commit - match) if match is not None else None
        peers.append(
            PeerState(
                pid,
                names.get(pid, pid),
                pid in membership.voters,
                health(active, match, commit),
                active,
                match,
                lag,
                ago,
            )
        )
    return tuple(peers)
