"""Test doubles for the consumer's delivery loops: a recording ``Send``, a ``DeliverySource`` over
a list of messages (no stream, no store, no consumer), and a recording ``ConsumerHost`` for a
whole consumer driven with an invented clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jetpy.jetstream.consumers.pending import Pending
from jetpy.store.base import StoredMsg


@dataclass
class Sent:
    route: str
    subject: str
    reply: str | None
    payload: bytes
    headers: bytes

    @property
    def status(self) -> str:
        """The status line of a status message (``"100 Idle Heartbeat"``), else ``""``."""
        first = self.headers.split(b"\r\n", 1)[0].decode()
        return first.removeprefix("NATS/1.0").strip()


@dataclass
class Recorder:
    sent: list[Sent] = field(default_factory=list)

    def __call__(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes) -> None:
        self.sent.append(Sent(route, subject, reply, payload, headers))

    def statuses(self) -> list[tuple[str, str]]:
        return [(s.route, s.status) for s in self.sent if s.status]


def msg(seq: int, size: int = 10) -> StoredMsg:
    return StoredMsg("s", seq, 1000 + seq, b"", b"x" * size)


@dataclass
class Source:
    """New messages from a list, one by one or in bulk; ``room`` stands in for max_ack_pending."""

    msgs: list[StoredMsg]
    bulk: bool = True
    room: int = 1_000_000
    deliveries: list[tuple[str, int]] = field(default_factory=list)  # (to, seq)
    bursts: list[int] = field(default_factory=list)  # sizes of bulk deliveries
    more: bool = False  # a loop stopped at PUMP_BUDGET
    _held: StoredMsg | None = None

    def plain_next(self, now: int) -> bool:
        return self._held is None

    def burst(self, to: str, n: int, now: int) -> list[StoredMsg]:
        n = min(n, self.room)
        out, self.msgs = self.msgs[:n], self.msgs[n:]
        self.room -= len(out)
        if out:
            self.bursts.append(len(out))
            self.deliveries.extend((to, m.seq) for m in out)
        return out

    def next_message(self, now: int) -> tuple[StoredMsg, Pending | None] | None:
        if self._held is not None:
            m, self._held = self._held, None
            return m, None
        if not self.msgs or self.room <= 0:
            return None
        return self.msgs.pop(0), None

    def deliver(self, m: StoredMsg, p: Pending | None, to: str, now: int) -> int:
        self.deliveries.append((to, m.seq))
        self.room -= 1
        return self.delivery_size(m, p)

    def delivery_size(self, m: StoredMsg, p: Pending | None) -> int:
        return len(m.subject) + len(m.hdr) + len(m.data)

    def put_back(self, m: StoredMsg, p: Pending | None) -> None:
        self._held = m

    def can_deliver_new(self) -> bool:
        return self.room > 0

    def num_pending(self) -> int:
        return len(self.msgs)

    def num_ack_pending(self) -> int:
        return len(self.deliveries)


@dataclass
class RecordingHost:
    """A ``ConsumerHost`` that records what a consumer sends and announces; ``gone`` lists the
    reply subjects nobody listens on any more."""

    sends: list[Sent] = field(default_factory=list)
    advisories: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gone: set[str] = field(default_factory=set)

    def send(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes) -> None:
        self.sends.append(Sent(route, subject, reply, payload, headers))

    def send_batch(self, route: str, msgs: list[StoredMsg], replies: list[bytes]) -> None:
        for m, reply in zip(msgs, replies, strict=True):
            self.send(route, m.subject, reply.decode(), m.data, m.hdr)

    def has_interest(self, subject: str) -> bool:
        return subject not in self.gone

    def advisory(self, subject: str, body: dict[str, Any]) -> None:
        self.advisories.append((subject, body))

    def acked(self, consumer: Any, seqs: list[int]) -> None:
        pass

    def state_changed(self, consumer: Any) -> None:
        pass

    def confirm(self, consumer: Any, reply: str, stream_seq: int) -> None:
        pass

    def to(self, route: str) -> list[Sent]:
        """What went to ``route``, taken (the record keeps the rest)."""
        mine = [s for s in self.sends if s.route == route]
        self.sends = [s for s in self.sends if s.route != route]
        return mine

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The advisories so far (event token, body), taken."""
        out = [(subject.split(".")[4], body) for subject, body in self.advisories]
        self.advisories.clear()
        return out
