"""jetpy.raft: a sans-IO, clock-free Raft library (etcd's raft is the model of its shape).

Owns: the consensus algorithm (``RaftNode``), its values and messages, the message codec, the
log-store protocols and an in-memory reference store. Must not know: sockets, asyncio, files,
time or randomness of its own (the host injects a seeded RNG and ticks): ``pyproject.toml``
enforces that, which is what lets ``tests/raft`` run whole clusters deterministically.
"""

from .codec import CodecError, decode, decode_conf, decode_membership, encode, encode_conf, encode_membership
from .config import Config, Rng
from .memlog import MemoryLog
from .messages import (
    AppendRequest,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from .node import RaftNode
from .ready import PeerStatus, Ready, SoftState, Status
from .storage import LogReader, LogStore, Unavailable, limit_bytes, persist_ready
from .types import (
    NO_NODE,
    ConfChange,
    ConfChangeOp,
    Entry,
    EntryKind,
    HardState,
    Membership,
    NotLeader,
    ProposalDropped,
    RaftError,
    Role,
    Snapshot,
    SnapshotMeta,
)

__all__ = [
    "NO_NODE",
    "AppendRequest",
    "AppendResponse",
    "CodecError",
    "ConfChange",
    "ConfChangeOp",
    "Config",
    "Entry",
    "EntryKind",
    "HardState",
    "Heartbeat",
    "HeartbeatResponse",
    "InstallSnapshot",
    "LogReader",
    "LogStore",
    "Membership",
    "MemoryLog",
    "Message",
    "NotLeader",
    "PeerStatus",
    "ProposalDropped",
    "RaftError",
    "RaftNode",
    "Ready",
    "Rng",
    "Role",
    "Snapshot",
    "SnapshotMeta",
    "SoftState",
    "Status",
    "TimeoutNow",
    "Unavailable",
    "VoteRequest",
    "VoteResponse",
    "decode",
    "decode_conf",
    "decode_membership",
    "encode",
    "encode_conf",
    "encode_membership",
    "limit_bytes",
    "persist_ready",
]
