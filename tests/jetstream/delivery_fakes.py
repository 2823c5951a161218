"""Test doubles for the consumer's delivery loops: a recording ``Send`` and a ``DeliverySource``
over a list of messages (no stream, no store, no consumer)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
