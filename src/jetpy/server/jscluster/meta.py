"""The meta group's state machine: which streams exist, where they are placed, under which group.

Owns: the assignments of every account (by account, then name: two accounts may each have a
stream ORDERS; an entry or a snapshot written before accounts, naming none, is the global
account's) (:mod:`.assignments`' records, re-exported here), the entries that
change them (:class:`AddStream`, :class:`UpdateStream`, :class:`RemoveStream`,
:class:`AddConsumer`, :class:`UpdateConsumer`, :class:`RemoveConsumer`, as msgpack; a removed stream takes its
consumers), applying those
in log order (deterministic: the same state and results on every server; a stream's new
placement moves its consumers in the same entry, by :mod:`.consumer_placement`'s rules), and
the whole state as a snapshot. Every applied change is also handed to a listener (the server's reaction:
create, change or delete its replica). Must not know: the
Raft host, streams' rules, the API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, TypeVar

import msgspec

from jetpy.jetstream.models import StreamConfig
from jetpy.server.jscluster.assignments import GLOBAL_ACCOUNT, ConsumerAssignment, StreamAssignment
from jetpy.server.jscluster.consumer_placement import follow, placed

__all__ = [
    "GLOBAL_ACCOUNT",
    "META_GROUP",
    "RESULT_CONFLICT",
    "RESULT_EXISTS",
    "RESULT_MISSING",
    "RESULT_OK",
    "AddConsumer",
    "AddStream",
    "ConsumerAssignment",
    "MetaListener",
    "MetaMachine",
    "RemoveConsumer",
    "RemoveStream",
    "StreamAssignment",
    "UpdateConsumer",
    "UpdateStream",
    "encode_op",
]

META_GROUP: Final = "_meta_"  # nats-server's name for it

RESULT_OK: Final = b"ok"
RESULT_EXISTS: Final = b"exists"  # the same stream, assigned already (an identical create)
RESULT_CONFLICT: Final = b"conflict"  # another stream of that name
RESULT_MISSING: Final = b"missing"


class AddStream(msgspec.Struct, frozen=True, tag="add_stream"):
    assignment: StreamAssignment


class RemoveStream(msgspec.Struct, frozen=True, tag="remove_stream"):
    name: str
    account: str = GLOBAL_ACCOUNT


class UpdateStream(msgspec.Struct, frozen=True, tag="update_stream"):
    """A new config for an assigned stream; ``reply``: where the stream's leader answers once
    the change is in the stream's own log and applied; ``peers``: its new placement (empty:
    unchanged), the servers new to it joining its group, those left out leaving it."""

    name: str
    config: bytes
    reply: str = ""
    peers: list[str] = []
    account: str = GLOBAL_ACCOUNT


class AddConsumer(msgspec.Struct, frozen=True, tag="add_consumer"):
    assignment: ConsumerAssignment


class RemoveConsumer(msgspec.Struct, frozen=True, tag="remove_consumer"):
    """``reply``: where the consumer's leader answers once it removed it ("": nobody)."""

    stream: str
    name: str
    reply: str = ""
    account: str = GLOBAL_ACCOUNT


class UpdateConsumer(msgspec.Struct, frozen=True, tag="update_consumer"):
    """A new config for an assigned consumer; ``reply``: where the consumer's leader answers
    once it runs with it; ``peers``: its new placement (empty: unchanged; its replicas
    changed), the servers new to it joining its group, those left out leaving it."""

    stream: str
    name: str
    config: bytes
    reply: str = ""
    peers: list[str] = []
    account: str = GLOBAL_ACCOUNT


class AccountState(msgspec.Struct, frozen=True, array_like=True):
    """One account's assignments in a snapshot."""

    streams: dict[str, StreamAssignment]
    consumers: dict[str, dict[str, ConsumerAssignment]]


class MetaState(msgspec.Struct, frozen=True, array_like=True):
    """The meta group's snapshot: every assignment (an array: older snapshots are a map of
    the streams alone, or the global account's streams and consumers without ``accounts``,
    which holds every account's since)."""

    streams: dict[str, StreamAssignment]
    consumers: dict[str, dict[str, ConsumerAssignment]]
    accounts: dict[str, AccountState] = {}


_A = TypeVar("_A", StreamAssignment, ConsumerAssignment)

MetaOp = AddStream | RemoveStream | UpdateStream | AddConsumer | RemoveConsumer | UpdateConsumer

_encoder = msgspec.msgpack.Encoder()
_op_decoder = msgspec.msgpack.Decoder(MetaOp)
_state_decoder = msgspec.msgpack.Decoder(MetaState | dict[str, StreamAssignment])


def encode_op(op: MetaOp) -> bytes:
    return _encoder.encode(op)


class MetaListener(Protocol):
    """What a server does when an assignment changes (on every server, in log order)."""

    def assigned(self, sa: StreamAssignment) -> None: ...

    def unassigned(self, sa: StreamAssignment) -> None: ...

    def updated(self, sa: StreamAssignment, reply: str) -> None: ...

    def restored(self, streams: list[StreamAssignment]) -> None:
        """The whole state was replaced by a snapshot's (every account's streams)."""
        ...

    def consumer_assigned(self, ca: ConsumerAssignment) -> None: ...

    def consumer_unassigned(self, ca: ConsumerAssignment, reply: str = "") -> None: ...

    def consumer_updated(self, ca: ConsumerAssignment, reply: str) -> None: ...

    def consumers_restored(self, consumers: list[ConsumerAssignment]) -> None:
        """The consumers of a snapshot's state (told after :meth:`restored`)."""
        ...


class MetaMachine:
    def __init__(self, listener: MetaListener) -> None:
        # by account, then name; consumers by account, stream, then name
        self.streams: dict[str, dict[str, StreamAssignment]] = {}
        self.consumers: dict[str, dict[str, dict[str, ConsumerAssignment]]] = {}
        self.listener = listener

    def streams_of(self, account: str) -> dict[str, StreamAssignment]:
        """The account's stream assignments, by name (empty when it has none)."""
        return self.streams.get(account) or {}

    def consumers_of(self, account: str) -> dict[str, dict[str, ConsumerAssignment]]:
        """The account's consumer assignments, by stream then name."""
        return self.consumers.get(account) or {}

    def all_streams(self) -> list[StreamAssignment]:
        """Every account's stream assignments."""
        return [sa for streams in self.streams.values() for sa in streams.values()]

    def apply(self, index: int, items: Sequence[bytes]) -> Sequence[bytes]:
        return [self._one(item) for item in items]

    def _one(self, item: bytes) -> bytes:
        try:
            op = _op_decoder.decode(item)
        except (msgspec.DecodeError, ValueError):
            return b"malformed"
        if isinstance(op, AddStream):
            sa = op.assignment
            streams = self.streams.setdefault(sa.account, {})
            have = streams.get(sa.name)
            if have is not None:
                return RESULT_EXISTS if have.config == sa.config else RESULT_CONFLICT
            streams[sa.name] = sa
            self.listener.assigned(sa)
            return RESULT_OK
        if isinstance(op, UpdateStream):
            streams = self.streams_of(op.account)
            have = streams.get(op.name)
            if have is None:
                return RESULT_MISSING
            sa = msgspec.structs.replace(have, config=op.config, reply="")
            if op.peers:
                joined = [p for p in have.joined if p in op.peers]
                joined += [p for p in op.peers if p not in have.peers]
                sa = msgspec.structs.replace(sa, peers=list(op.peers), joined=joined)
            streams[op.name] = sa
            self.listener.updated(sa, op.reply)
            if op.peers:
                self._follow(sa)
            return RESULT_OK
        if isinstance(op, (AddConsumer, RemoveConsumer, UpdateConsumer)):
            return self._consumer_op(op)
        gone = self.streams_of(op.account).pop(op.name, None)
        if gone is None:
            return RESULT_MISSING
        for ca in self.consumers_of(op.account).pop(op.name, {}).values():
            self.listener.consumer_unassigned(ca)
        self.listener.unassigned(gone)
        return RESULT_OK

    def _follow(self, sa: StreamAssignment) -> None:
        """The stream's consumers placed anew with it (after the stream's own change, so a
        server joining the stream starts its replica first)."""
        scfg = msgspec.json.decode(sa.config, type=StreamConfig)
        consumers = self.consumers_of(sa.account).get(sa.name, {})
        for name, ca in list(consumers.items()):
            moved = follow(ca, scfg, sa.peers)
            if moved is not ca:
                consumers[name] = moved
                self.listener.consumer_updated(moved, "")

    def _consumer_op(self, op: AddConsumer | RemoveConsumer | UpdateConsumer) -> bytes:
        if isinstance(op, UpdateConsumer):
            consumers = self.consumers_of(op.account).get(op.stream, {})
            have = consumers.get(op.name)
            if have is None:
                return RESULT_MISSING
            updated = msgspec.structs.replace(have, config=op.config, reply="")
            sa = self.streams_of(op.account).get(op.stream)
            # servers the stream still has (it may have moved since the meta leader chose them)
            peers = [p for p in op.peers if sa is not None and p in sa.peers]
            if peers:
                updated = placed(updated, peers)
            consumers[op.name] = updated
            self.listener.consumer_updated(updated, op.reply)
            return RESULT_OK
        if isinstance(op, RemoveConsumer):
            gone = self.consumers_of(op.account).get(op.stream, {}).pop(op.name, None)
            if gone is None:
                return RESULT_MISSING
            self.listener.consumer_unassigned(gone, op.reply)
            return RESULT_OK
        ca = op.assignment
        if ca.stream not in self.streams_of(ca.account):
            return RESULT_MISSING
        consumers = self.consumers.setdefault(ca.account, {}).setdefault(ca.stream, {})
        have = consumers.get(ca.name)
        if have is not None:
            return RESULT_EXISTS if have.config == ca.config else RESULT_CONFLICT
        consumers[ca.name] = ca
        self.listener.consumer_assigned(ca)
        return RESULT_OK

    def snapshot(self) -> bytes:
        accounts = {
            acc: AccountState(streams, self.consumers_of(acc))
            for acc, streams in self.streams.items()
            if streams
        }
        return _encoder.encode(MetaState({}, {}, accounts))

    def restore(self, data: bytes) -> None:
        state = _state_decoder.decode(data) if data else MetaState({}, {})
        if not isinstance(state, MetaState):  # a snapshot from before consumer assignments
            state = MetaState(state, {})
        accounts = dict(state.accounts)
        if state.streams:  # a snapshot from before accounts: the global account's
            accounts[GLOBAL_ACCOUNT] = AccountState(state.streams, state.consumers)
        self.streams = {}
        self.consumers = {}
        for acc, st in accounts.items():
            self.streams[acc] = {n: _in(sa, acc) for n, sa in st.streams.items()}
            consumers = {
                s: {n: _in(ca, acc) for n, ca in cs.items()}
                for s, cs in st.consumers.items()
                if s in st.streams
            }
            if consumers:
                self.consumers[acc] = consumers
        self.listener.restored(self.all_streams())
        self.listener.consumers_restored(
            [ca for by_stream in self.consumers.values() for cs in by_stream.values() for ca in cs.values()]
        )


def _in(a: _A, account: str) -> _A:
    """An assignment of ``account`` (one from before accounts names none: the global one's)."""
    return a if a.account == account else msgspec.structs.replace(a, account=account)
