"""The messages Raft nodes exchange, as typed values (their bytes are ``codec``'s business).

Owns: one frozen class per message kind and the ``Message`` union the state machine steps on.
Must not know: byte layouts, subjects, connections or timers. Every message names its sender
(``src``), its addressee (``dst``) and the sender's ``term``; the host routes on ``dst`` and
hands every message it receives to ``RaftNode.step``.

=================== ===================================================================
``VoteRequest``     a (pre-)candidate asks for a vote; ``pre`` marks a pre-vote (Raft
                    thesis §9.6: nothing changes on the voter), ``transfer`` a campaign
                    started by a leadership transfer (voters ignore their leader lease)
``VoteResponse``    granted or not
``AppendRequest``   entries after (``prev_index``, ``prev_term``), and the leader's commit
``AppendResponse``  ``index`` is the follower's match on success; on reject ``index`` is
                    the rejected ``prev_index`` and (``hint_index``, ``hint_term``) the
                    follower's last entry at or below it whose term is at most the
                    leader's ``prev_term``: the leader skips a whole term per round trip
``Heartbeat``       the leader's liveness and the commit the follower may apply
``HeartbeatResponse`` the follower is alive (check-quorum, probing); ``lost`` if its log
                    ends below the commit the leader sent (a damaged log cut back by
                    recovery): the leader forgets what it thought the follower had
``InstallSnapshot`` the leader's snapshot, for a follower behind the compacted log
``TimeoutNow``      a leader hands over: the addressee campaigns at once
=================== ===================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .types import Entry, Snapshot

__all__ = [
    "AppendRequest",
    "AppendResponse",
    "Heartbeat",
    "HeartbeatResponse",
    "InstallSnapshot",
    "Message",
    "TimeoutNow",
    "VoteRequest",
    "VoteResponse",
]


@dataclass(frozen=True, slots=True)
class VoteRequest:
    src: str
    dst: str
    term: int
    last_index: int
    last_term: int
    pre: bool = False
    transfer: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: str
    dst: str
    term: int
    granted: bool
    pre: bool = False


@dataclass(frozen=True, slots=True)
class AppendRequest:
    src: str
    dst: str
    term: int
    prev_index: int
    prev_term: int
    entries: Sequence[Entry]
    commit: int


@dataclass(frozen=True, slots=True)
class AppendResponse:
    src: str
    dst: str
    term: int
    index: int
    reject: bool = False
    hint_index: int = 0
    hint_term: int = 0


@dataclass(frozen=True, slots=True)
class Heartbeat:
    src: str
    dst: str
    term: int
    commit: int


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    src: str
    dst: str
    term: int
    lost: bool = False  # our log ends below the commit you sent: we lost acknowledged entries


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    src: str
    dst: str
    term: int
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    src: str
    dst: str
    term: int


Message = (
    VoteRequest
    | VoteResponse
    | AppendRequest
    | AppendResponse
    | Heartbeat
    | HeartbeatResponse
    | InstallSnapshot
    | TimeoutNow
)
