"""What a node hands its host after a step: the unit of persisting, sending and applying.

Owns: ``Ready`` (one batch of work for the host), ``SoftState`` (role and leader, for the host's
advisories) and ``Status`` (a snapshot of a node's view, for monitoring). Must not know: how the
host does any of it.

The host's loop, for every ``Ready`` in the order they come (see ``RaftNode.ready``)::

    rd = node.ready()
    send(rd.messages)                  # any time: they promise nothing about this node's disk
    persist_ready(store, rd)           # install the snapshot, append the entries, hard state
    if rd.must_sync: store.sync()      # one fsync may cover several Readies (group commit)
    send(rd.persisted_messages)        # only now: votes and acks promise what is on disk
    apply(rd.snapshot, rd.committed)   # to the state machine, in order
    node.advance(rd)

A host may overlap: take the next ``Ready`` before the previous one is synced, as long as it
persists, syncs and advances them in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Message
from .types import Entry, HardState, Membership, Role, Snapshot

__all__ = ["PeerStatus", "Ready", "SoftState", "Status"]


@dataclass(frozen=True, slots=True)
class SoftState:
    role: Role
    leader: str


@dataclass(slots=True)
class Ready:
    hard_state: HardState | None = None  # None: unchanged since the previous Ready
    entries: list[Entry] = field(default_factory=list)  # to append (may replace a suffix)
    snapshot: Snapshot | None = None  # a leader's snapshot to install before ``entries``
    committed: list[Entry] = field(default_factory=list)  # to apply, in order
    messages: list[Message] = field(default_factory=list)  # send now
    persisted_messages: list[Message] = field(default_factory=list)  # send after the sync
    must_sync: bool = False  # something here must be durable before persisted_messages go out
    soft_state: SoftState | None = None  # None: unchanged
    want_snapshot: bool = False  # the log since the last snapshot is past the configured size


@dataclass(frozen=True, slots=True)
class PeerStatus:
    match: int
    next: int
    state: str
    active: bool


@dataclass(frozen=True, slots=True)
class Status:
    id: str
    role: Role
    leader: str
    term: int
    commit: int
    applied: int
    last_index: int
    membership: Membership
    repair_through: int
    peers: dict[str, PeerStatus]  # a leader's view of each other member (empty on followers)
