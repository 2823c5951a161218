"""The seam between a consumer and its delivery loops.

A consumer decides *what* goes out next (redeliveries first, then new messages from its stream
cursor, paced or in bulk); its push delivery (``push.py``) and its pull waiting queue
(``pull.py``) decide *who* receives it and *when to stop* (flow control, request batches and
byte budgets). They meet here: :class:`DeliverySource` is what a delivery loop asks the
consumer, :data:`Send` and :data:`SendBatch` are how anything leaves (the host's bus, bound
once: the delivery hot paths call it directly).

Owns these types, the one bound every delivery loop keeps (:data:`PUMP_BUDGET`), and the
rewrite of a delivery's header block for ``headers_only`` (:func:`headers_only`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from jetpy.jetstream.consumers.pending import Pending
from jetpy.store.base import StoredMsg

__all__ = ["PUMP_BUDGET", "DeliverySource", "Rewrite", "Send", "SendBatch", "chain", "headers_only"]

PUMP_BUDGET: Final = 1024
"""Messages one pump of a consumer sends (or redeliveries of removed messages it drops) before
it stops and asks to be pumped again on the next loop turn (``DeliverySource.more``): a pull
request for 100,000 messages or a storm of 100,000 redeliveries is served in slices of a few
milliseconds, other clients in between."""

Send = Callable[[str, str, "str | None", bytes, bytes], object]
"""``send(route, subject, reply, payload, headers)``: deliver to subscribers of ``route``; they
see ``subject`` on the MSG line."""

SendBatch = Callable[[str, list[StoredMsg], list[bytes]], object]
"""``send_batch(route, msgs, replies)``: ``send`` for each stored message in order, on its own
subject with its reply, in one call."""


Rewrite = Callable[[bytes, bytes], tuple[bytes, bytes]]
"""``rewrite(hdr, data) -> (hdr, data)``: what a consumer changes in each message it sends one by
one (``headers_only``, a pinned client's ``Nats-Pin-Id``); never used for bulk deliveries."""


def headers_only(hdr: bytes, data: bytes) -> tuple[bytes, bytes]:
    """The message's headers with ``Nats-Msg-Size`` added, and no payload."""
    base = hdr[:-2] if hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n"
    return base + b"Nats-Msg-Size: %d\r\n\r\n" % len(data), b""


def chain(rewrites: list[Rewrite]) -> Rewrite | None:
    """One rewrite doing ``rewrites`` in order (None: there are none)."""
    if len(rewrites) < 2:
        return rewrites[0] if rewrites else None
    first, second = rewrites

    def both(hdr: bytes, data: bytes) -> tuple[bytes, bytes]:
        return second(*first(hdr, data))

    return both


class DeliverySource(Protocol):
    """What a delivery loop asks the consumer (``now`` is ns since the epoch). ``more``: the
    consumer stopped at :data:`PUMP_BUDGET` with something left to send (a loop seeing it set
    must not take "nothing now" for "nothing left")."""

    more: bool

    @property
    def bulk(self) -> bool:
        """May new messages go out in bulk (:meth:`burst`)? Fixed by the config."""

    def plain_next(self, now: int) -> bool:
        """Are the next deliveries plain new messages, so :meth:`burst` may send them?"""

    def burst(self, to: str, n: int, now: int) -> list[StoredMsg]:
        """Deliver up to ``n`` new messages to ``to`` at once; returns those sent."""

    def next_message(self, now: int) -> tuple[StoredMsg, Pending | None] | None:
        """The next message to send (with its pending ack if it is a redelivery), taken; None if
        nothing may go out now."""

    def deliver(self, m: StoredMsg, p: Pending | None, to: str, now: int) -> int:
        """Send a message :meth:`next_message` gave to ``to``; returns its size."""

    def delivery_size(self, m: StoredMsg, p: Pending | None) -> int:
        """What delivering ``m`` would count against a pull request's ``max_bytes``."""

    def put_back(self, m: StoredMsg, p: Pending | None) -> None:
        """Undo :meth:`next_message` of a message that was not sent."""

    def can_deliver_new(self) -> bool:
        """Is there room for a new message (``max_ack_pending``)?"""

    def num_pending(self) -> int:
        """Messages not delivered yet (after the one :meth:`next_message` gave)."""

    def num_ack_pending(self) -> int:
        """Deliveries not acknowledged yet."""
