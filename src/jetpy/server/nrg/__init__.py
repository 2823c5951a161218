"""jetpy.server.nrg: the Raft host (nats-server calls its Raft "NRG", NATS Raft Groups).

Owns: running :mod:`jetpy.raft` nodes on the event loop with a real clock, their durable logs
(:mod:`jetpy.store.raftlog`, every fsync in a worker thread) and the cluster as their network
(``$NRG.`` subjects in the system account, over the routes), several groups per server: the
ground replicated JetStream stands on. Must not know: what a group replicates (a
:class:`~jetpy.server.nrg.machine.StateMachine`), JetStream, or HTTP.

Modules: ``names`` (member ids, subjects), ``wire`` (the host's own bytes), ``transport``,
``proposals``, ``group`` (one member's loop), ``host`` (the groups of a server), ``machine``
(the state machine seam and proposal errors), ``status`` (typed state for monitoring).
"""

from jetpy.server.nrg.config import GroupConfig
from jetpy.server.nrg.group import MAX_PROPOSAL_BYTES, RaftGroup
from jetpy.server.nrg.host import RaftHost, RaftHostError, groups_root
from jetpy.server.nrg.machine import (
    GroupStopped,
    NoLeader,
    ProposalBusy,
    ProposalError,
    ProposalLost,
    ProposalRefused,
    ProposalUnknown,
    StateMachine,
)
from jetpy.server.nrg.names import member_id
from jetpy.server.nrg.status import GroupStatus, PeerState

__all__ = [
    "MAX_PROPOSAL_BYTES",
    "GroupConfig",
    "GroupStatus",
    "GroupStopped",
    "NoLeader",
    "PeerState",
    "ProposalBusy",
    "ProposalError",
    "ProposalLost",
    "ProposalRefused",
    "ProposalUnknown",
    "RaftGroup",
    "RaftHost",
    "RaftHostError",
    "StateMachine",
    "groups_root",
    "member_id",
]
