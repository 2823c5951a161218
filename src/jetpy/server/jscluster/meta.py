"""The meta group's state machine: which streams exist, where they are placed, under which group.

Owns: the assignments (:class:`StreamAssignment`), the entries that change them
(:class:`AddStream`, :class:`UpdateStream`, :class:`RemoveStream`, as msgpack), applying those
in log order (deterministic: the same state and results on every server), and the whole state
as a snapshot. Every applied change is also handed to a listener (the server's reaction:
create, change or delete its replica). Must not know: the
Raft host, streams' rules, the API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

import msgspec

__all__ = [
    "META_GROUP",
    "RESULT_CONFLICT",
    "RESULT_EXISTS",
    "RESULT_MISSING",
    "RESULT_OK",
    "AddStream",
    "MetaListener",
    "MetaMachine",
    "RemoveStream",
    "StreamAssignment",
    "UpdateStream",
    "encode_op",
]

META_GROUP: Final = "_meta_"  # nats-server's name for it

RESULT_OK: Final = b"ok"
RESULT_EXISTS: Final = b"exists"  # the same stream, assigned already (an identical create)
RESULT_CONFLICT: Final = b"conflict"  # another stream of that name
RESULT_MISSING: Final = b"missing"


class StreamAssignment(msgspec.Struct, frozen=True):
    """A stream placed on servers: ``config`` is its StreamConfig as JSON (checked by the meta
    leader before proposing), ``peers`` the servers holding a replica (server names), ``group``
    the Raft group they form, ``reply`` where its create is answered by its first leader,
    ``joined`` the peers placed after its creation (scaled up, or replacing a removed peer):
    those join its group as new members rather than found it."""

    name: str
    config: bytes
    group: str
    peers: list[str]
    created: int
    reply: str = ""
    joined: list[str] = []


class AddStream(msgspec.Struct, frozen=True, tag="add_stream"):
    assignment: StreamAssignment


class RemoveStream(msgspec.Struct, frozen=True, tag="remove_stream"):
    name: str


class UpdateStream(msgspec.Struct, frozen=True, tag="update_stream"):
    """A new config for an assigned stream; ``reply``: where the stream's leader answers once
    the change is in the stream's own log and applied; ``peers``: its new placement (empty:
    unchanged), the servers new to it joining its group, those left out leaving it."""

    name: str
    config: bytes
    reply: str = ""
    peers: list[str] = []


MetaOp = AddStream | RemoveStream | UpdateStream

_encoder = msgspec.msgpack.Encoder()
_op_decoder = msgspec.msgpack.Decoder(MetaOp)
_state_decoder = msgspec.msgpack.Decoder(dict[str, StreamAssignment])


def encode_op(op: MetaOp) -> bytes:
    return _encoder.encode(op)


class MetaListener(Protocol):
    """What a server does when an assignment changes (on every server, in log order)."""

    def assigned(self, sa: StreamAssignment) -> None: ...

    def unassigned(self, sa: StreamAssignment) -> None: ...

    def updated(self, sa: StreamAssignment, reply: str) -> None: ...

    def restored(self, streams: dict[str, StreamAssignment]) -> None:
        """The whole state was replaced by a snapshot's."""
        ...


class MetaMachine:
    def __init__(self, listener: MetaListener) -> None:
        self.streams: dict[str, StreamAssignment] = {}
        self.listener = listener

    def apply(self, index: int, items: Sequence[bytes]) -> Sequence[bytes]:
        return [self._one(item) for item in items]

    def _one(self, item: bytes) -> bytes:
        try:
            op = _op_decoder.decode(item)
        except (msgspec.DecodeError, ValueError):
            return b"malformed"
        if isinstance(op, AddStream):
            sa = op.assignment
            have = self.streams.get(sa.name)
            if have is not None:
                return RESULT_EXISTS if have.config == sa.config else RESULT_CONFLICT
            self.streams[sa.name] = sa
            self.listener.assigned(sa)
            return RESULT_OK
        if isinstance(op, UpdateStream):
            have = self.streams.get(op.name)
            if have is None:
                return RESULT_MISSING
            sa = msgspec.structs.replace(have, config=op.config, reply="")
            if op.peers:
                joined = [p for p in have.joined if p in op.peers]
                joined += [p for p in op.peers if p not in have.peers]
                sa = msgspec.structs.replace(sa, peers=list(op.peers), joined=joined)
            self.streams[op.name] = sa
            self.listener.updated(sa, op.reply)
            return RESULT_OK
        gone = self.streams.pop(op.name, None)
        if gone is None:
            return RESULT_MISSING
        self.listener.unassigned(gone)
        return RESULT_OK

    def snapshot(self) -> bytes:
        return _encoder.encode(self.streams)

    def restore(self, data: bytes) -> None:
        self.streams = _state_decoder.decode(data) if data else {}
        self.listener.restored(dict(self.streams))
