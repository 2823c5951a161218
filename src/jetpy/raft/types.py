"""Raft's values: log entries, hard state, membership, snapshots, and the library's errors.

Owns: the immutable values that cross between the Raft state machine, its host and the log
store, and the rules that belong to a value alone (a membership's quorum size, what a membership
change may do). Must not know: how the values are encoded (``codec``), stored (the host's log
store) or moved (the host's transport).

An ``Entry`` is a ``NamedTuple`` on purpose: it is created once per proposal on the hot path, and
a tuple is the cheapest immutable object Python builds. A proposal's ``data`` may carry many
application messages (JetStream batches a whole publish burst into one entry); the library never
looks inside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final, NamedTuple

__all__ = [
    "NO_NODE",
    "ConfChange",
    "ConfChangeOp",
    "Entry",
    "EntryKind",
    "HardState",
    "Membership",
    "NotLeader",
    "ProposalDropped",
    "RaftError",
    "Role",
    "Snapshot",
    "SnapshotMeta",
]

NO_NODE: Final = ""  # "no vote" / "no leader": never a valid node id


class EntryKind(IntEnum):
    """What a log entry is for (its byte value is part of the log store's and the wire's format)."""

    NORMAL = 0  # the application's data (one proposal, possibly many messages)
    NOOP = 1  # a new leader's first entry: commits the entries of earlier terms (Raft §5.4.2)
    CONF = 2  # a membership change: ``data`` is the whole new membership, encoded by ``codec``


class Entry(NamedTuple):
    # ``index`` shadows tuple.index (unused on entries): the name Raft gives the field wins.
    index: int  # type: ignore[assignment]
    term: int
    kind: EntryKind
    data: bytes


class Role(IntEnum):
    FOLLOWER = 0
    PRE_CANDIDATE = 1
    CANDIDATE = 2
    LEADER = 3


@dataclass(frozen=True, slots=True)
class HardState:
    """What a node must have on disk before it sends anything that depends on it.

    ``term`` and ``vote`` must be durable before a vote or an append is answered. ``commit`` is a
    hint: a restarted node may start from a lower one and learns the rest from the leader.
    ``repair_through`` is non-zero while the node's log has lost entries it may once have
    acknowledged (a damaged record found by recovery): until its log again reaches that index
    through a leader, the node neither votes nor campaigns, so its loss can never help elect a
    leader that lacks a committed entry.
    """

    term: int = 0
    vote: str = NO_NODE
    commit: int = 0
    repair_through: int = 0


@dataclass(frozen=True, slots=True)
class Membership:
    """The voters and learners (non-voting observers, nats-server's "observers") of a group."""

    voters: frozenset[str] = frozenset()
    learners: frozenset[str] = frozenset()

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def members(self) -> frozenset[str]:
        return self.voters | self.learners

    def apply(self, change: ConfChange) -> Membership:
        """The membership after ``change``; ``ValueError`` if the change makes no sense here."""
        peer, voters, learners = change.peer, self.voters, self.learners
        if not peer:
            raise ValueError("a membership change needs a peer id")
        if change.op is ConfChangeOp.ADD_VOTER:
            if peer in voters:
                raise ValueError(f"{peer} is already a voter")
            return Membership(voters | {peer}, learners - {peer})
        if change.op is ConfChangeOp.ADD_LEARNER:
            if peer in voters:
                raise ValueError(f"{peer} is a voter: remove it before adding it back as a learner")
            if peer in learners:
                raise ValueError(f"{peer} is already a learner")
            return Membership(voters, learners | {peer})
        if peer not in voters and peer not in learners:
            raise ValueError(f"{peer} is not a member")
        if voters == {peer}:
            raise ValueError(f"{peer} is the last voter")
        return Membership(voters - {peer}, learners - {peer})


class ConfChangeOp(IntEnum):
    ADD_VOTER = 0  # also promotes a learner
    ADD_LEARNER = 1
    REMOVE = 2


@dataclass(frozen=True, slots=True)
class ConfChange:
    """One server in or out at a time (Raft thesis §4.1): no joint consensus needed."""

    op: ConfChangeOp
    peer: str


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """The log position a snapshot replaces, and the membership as of that position."""

    index: int = 0
    term: int = 0
    membership: Membership = Membership()


@dataclass(frozen=True, slots=True)
class Snapshot:
    meta: SnapshotMeta
    data: bytes = b""


class RaftError(Exception):
    """The root of everything the library raises at its host."""


class NotLeader(RaftError):
    """A request only a leader can serve; ``leader`` names the current one, if known."""

    def __init__(self, leader: str) -> None:
        self.leader = leader
        super().__init__(f"not the leader (leader: {leader or 'unknown'})")


class ProposalDropped(RaftError):
    """The leader refused a proposal for now (a transfer under way, too much uncommitted data,
    a membership change still pending); the reason is in the message. Retrying later may work."""
