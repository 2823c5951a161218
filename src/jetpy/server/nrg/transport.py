"""The Raft host's transport: one member's traffic over the system account's broker.

Owns: subscribing a member's ``$NRG.`` subjects (``names``) in the system account's broker,
which the cluster routes to the other servers like any account's interest, so each message goes
over the one route to the server its addressee is on; sending Raft messages as codec frames
(cut into fragments past ``wire.FRAGMENT_BYTES`` and put back together on arrival, with a bound
on what is held); publishing forwarded requests and their answers. Malformed frames are counted
and dropped (a peer's bug must not stop this member). Must not know: Raft's rules, the group's
state or what proposals mean.

A message to a member whose interest has not reached this server yet is dropped by the broker,
as a lost network packet would be: Raft retries what matters.
"""

from __future__ import annotations

import logging
import random
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from jetpy.raft import (
    AppendRequest,
    CodecError,
    Heartbeat,
    InstallSnapshot,
    Message,
    TimeoutNow,
    VoteRequest,
    decode,
    encode,
)
from jetpy.server.broker import Broker, Subscription
from jetpy.server.nrg.names import Subjects
from jetpy.server.nrg.wire import FRAGMENT, FRAGMENT_BYTES, WireError, decode_fragment, encode_fragments

__all__ = ["MAX_REASSEMBLY_BYTES", "Handlers", "Transport"]

log = logging.getLogger("jetpy.server")

MAX_REASSEMBLY_BYTES: Final = 256 << 20
"""Fragments held for frames not yet complete, per member; past it the oldest frames are given
up (the sender retries a snapshot that got no answer)."""

MAX_REASSEMBLING: Final = 4  # frames put together at once (normally one: a snapshot)

_TO_FOLLOWER: Final = (AppendRequest, Heartbeat, InstallSnapshot, TimeoutNow)

# (subject, reply, payload) -> None, for the requests and answers the group handles itself
Request = Callable[[bytes, bytes | None, bytes], None]


class Handlers:
    """What a member does with what arrives (the group's methods)."""

    __slots__ = ("on_answer", "on_change", "on_join", "on_message", "on_proposal")

    def __init__(
        self,
        on_message: Callable[[Message], None],
        on_proposal: Request,
        on_change: Request,
        on_answer: Request,
        on_join: Request,
    ) -> None:
        self.on_message = on_message
        self.on_proposal = on_proposal
        self.on_change = on_change
        self.on_answer = on_answer
        self.on_join = on_join


class Transport:
    def __init__(self, broker: Broker, group: str, member: str) -> None:
        self.broker = broker
        self.subjects = Subjects(group)
        self.member = member
        self._subs: list[Subscription] = []
        self._frag_id = random.getrandbits(48)  # fragments are told apart by id: not shared between senders
        self._partial: OrderedDict[int, list[bytes | None]] = OrderedDict()
        self._partial_bytes = 0
        self.dropped = 0  # malformed frames received
        self.sent = 0
        self.received = 0

    # -- subscriptions ----------------------------------------------------------------------

    def bind(self, handlers: Handlers) -> None:
        """Subscribe this member's subjects."""
        s, me = self.subjects, self.member
        on_frame = self._framed(handlers.on_message)
        for subject in (s.vote(me), s.append(me), s.response(me)):
            self._sub(subject.decode(), on_frame)
        self._sub(s.replies(me), handlers.on_answer)
        self._sub(s.proposals(me).decode(), handlers.on_proposal)
        self._sub(s.control(me).decode(), handlers.on_change)
        self._sub(s.join().decode(), handlers.on_join)

    def _sub(self, subject: str, handler: Request) -> None:
        group = self.subjects.group

        def on_msg(subj: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            try:
                handler(subj, reply, data[hdr_len:] if hdr_len else data)
            except Exception:  # a bug here must not break the route the message came on
                log.exception(
                    "raft %s: handling a message on %s failed", group, subj.decode(errors="replace")
                )

        self._subs.append(self.broker.subscribe_internal(subject, on_msg))

    def close(self) -> None:
        for sub in self._subs:
            self.broker.unsubscribe_internal(sub)
        self._subs.clear()
        self._partial.clear()
        self._partial_bytes = 0

    # -- Raft messages ----------------------------------------------------------------------

    def send(self, m: Message) -> None:
        s = self.subjects
        if isinstance(m, VoteRequest):
            subject = s.vote(m.dst)
        elif isinstance(m, _TO_FOLLOWER):
            subject = s.append(m.dst)
        else:
            subject = s.response(m.dst)
        frame = encode(m)
        self.sent += 1
        if len(frame) <= FRAGMENT_BYTES:
            self.broker.publish(None, subject, None, 0, frame)
            return
        self._frag_id += 1
        for part in encode_fragments(frame, self._frag_id):
            self.broker.publish(None, subject, None, 0, part)

    def _framed(self, deliver: Callable[[Message], None]) -> Request:
        def on_frame(subject: bytes, reply: bytes | None, data: bytes) -> None:
            if data and data[0] == FRAGMENT:
                whole = self._fragment(data)
                if whole is None:
                    return
                data = whole
            try:
                m = decode(data)
            except CodecError as exc:
                self.dropped += 1
                log.warning(
                    "raft %s: dropped a malformed message on %s: %s",
                    self.subjects.group,
                    subject.decode(),
                    exc,
                )
                return
            self.received += 1
            deliver(m)

        return on_frame

    def _fragment(self, data: bytes) -> bytes | None:
        try:
            frag_id, part, parts, chunk = decode_fragment(data)
        except WireError as exc:
            self.dropped += 1
            log.warning("raft %s: dropped a malformed fragment: %s", self.subjects.group, exc)
            return None
        held = self._partial.get(frag_id)
        if held is None:
            if part != 0:
                return None  # its start was given up or lost
            held = self._partial[frag_id] = [None] * parts
            while len(self._partial) > MAX_REASSEMBLING:
                self._forget(next(iter(self._partial)))
        if len(held) != parts or held[part] is not None:
            self._forget(frag_id)
            return None
        held[part] = chunk
        self._partial_bytes += len(chunk)
        if part + 1 < parts:
            while self._partial_bytes > MAX_REASSEMBLY_BYTES and self._partial:
                self._forget(next(iter(self._partial)))
            return None
        self._forget(frag_id)
        if any(c is None for c in held):
            return None
        return b"".join(c for c in held if c is not None)

    def _forget(self, frag_id: int) -> None:
        held = self._partial.pop(frag_id, None)
        if held is not None:
            self._partial_bytes -= sum(len(c) for c in held if c is not None)

    # -- requests and answers ---------------------------------------------------------------

    def request(self, subject: bytes, reply: bytes, body: bytes) -> None:
        self.broker.publish(None, subject, reply, 0, body)

    def answer(self, reply: bytes, body: bytes) -> None:
        self.broker.publish(None, reply, None, 0, body)

    def announce_join(self, body: bytes) -> None:
        self.broker.publish(None, self.subjects.join(), None, 0, body)
