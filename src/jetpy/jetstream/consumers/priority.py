"""PriorityGroups: which waiting pull request may take a consumer's next message (nats-server
2.11's priority groups, ADR-42), as the consumer's ``priority_policy`` says.

Owns:

* a pull request's group fields (:class:`PullGroup`: ``group``, ``min_pending``,
  ``min_ack_pending``, ``id``, ``priority``) and the checks a request passes when it arrives
  (:meth:`PriorityGroups.admit`), with nats-server's status lines (``400 Bad Request - ...``,
  ``423 Nats-Pin-Id mismatch``); the checks on the fields hold for every pull consumer, those on
  the group only for one with a policy;
* ``pinned_client``: the pin (a server-made id handed to the first request without one, sent
  with every message as ``Nats-Pin-Id``), its time-to-live (``priority_timeout``: renewed by each
  request carrying the pin), unpinning (on expiry, or by ``CONSUMER.UNPIN``), and the
  ``consumer_group_pinned`` / ``consumer_group_unpinned`` advisories;
* ``overflow``: a request naming ``min_pending`` / ``min_ack_pending`` takes messages only while
  the consumer has at least that many messages pending or acks outstanding;
* ``prioritized``: requests are served in ``priority`` order (0 first; 0 to 9), FIFO within one;
* the ``priority_groups`` state ConsumerInfo reports (the first group, as nats-server).

The queue of waiting requests and its walk are ``pull.py``'s: it asks :meth:`choose` about each
request in turn. Must not know: the store, the network, pending acks (it is given the counts).
Sans-IO and clock-free: times are given (ns since the epoch).
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from jetpy.jetstream.models import PriorityGroupState, format_time

__all__ = ["ACCOUNT", "CLAIM", "SERVE", "SKIP", "WRONG_PIN", "PriorityGroups", "PullGroup", "pin_id"]

ACCOUNT: Final = "$G"
"""The account every consumer lives in (the global one, until accounts exist): the pinned and
unpinned advisories name it."""

NO_PRIORITY: Final = 2**31 - 1
"""Where a request without group fields (a bare batch number) sorts under ``prioritized``: last,
as nats-server places it (Go's MaxInt32)."""

# what choose() says about a waiting request
SERVE: Final = 0  # it takes the message
CLAIM: Final = 1  # it takes the message and the new pin
SKIP: Final = 2  # it waits: another request is pinned, or its overflow minimums are not met
WRONG_PIN: Final = 3  # it names a pin that is not the current one: answered 423 and dropped

_ALPHABET: Final = string.ascii_letters + string.digits


def pin_id() -> str:
    """A new pin: 22 random base-62 characters, the shape of the nuid nats-server hands out."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(22))


@dataclass(slots=True)
class PullGroup:
    """A JSON pull request's priority-group fields (nats-server's ``PriorityGroup``): a request
    with a JSON body always has them, one with a bare batch number never does."""

    group: str = ""
    min_pending: int = 0
    min_ack_pending: int = 0
    id: str = ""
    priority: int = 0


Advise = Callable[[str, str, int, dict[str, Any]], None]
"""``advise(event, kind, now, fields)``: publish ``$JS.EVENT.ADVISORY.CONSUMER.<event>`` of type
``<kind>`` for the consumer (the consumer's own advisory sender)."""


class PriorityGroups:
    def __init__(self, advise: Advise) -> None:
        self._advise = advise
        self.policy = "none"
        self.groups: list[str] = []
        self.ttl = 0  # ns a pin lives without a request renewing it
        self.pin = ""  # the current pin ("" none)
        self.pinned_ts = 0  # when it was handed out (ns)
        self._pin_deadline = 0  # when it expires (ns; 0 none)

    def configure(self, policy: str, groups: list[str], ttl: int) -> None:
        """The consumer's ``priority_policy``, ``priority_groups`` and ``priority_timeout``; a
        pin already handed out is kept (nats-server keeps it across updates too)."""
        self.policy, self.groups, self.ttl = policy, groups, ttl

    @property
    def pinning(self) -> bool:
        return self.policy == "pinned_client"

    @property
    def prioritized(self) -> bool:
        return self.policy == "prioritized"

    # -- a request arrives --------------------------------------------------------------------

    def admit(self, g: PullGroup | None, now: int) -> tuple[int, str] | None:
        """The status a request with these group fields is refused with, in nats-server's order,
        or None; a request carrying the current pin renews it."""
        if g is None:
            return None
        if (g.min_pending or g.min_ack_pending) and self.policy != "overflow":
            return 400, "Bad Request - Not a Overflow Priority consumer"
        if g.id and self.policy != "pinned_client":
            return 400, "Bad Request - Not a Pinned Client Priority consumer"
        if not 0 <= g.priority <= 9:
            return 400, "Bad Request - Priority must be between 0 and 9"
        if self.policy == "none":
            return None
        if not g.group:
            return 400, "Bad Request - Priority Group missing"
        if g.group not in self.groups:
            return 400, "Bad Request - Invalid Priority Group"
        if self.pin:
            if g.id == self.pin:
                self._pin_deadline = now + self.ttl
            elif g.id:
                return 423, "Nats-Pin-Id mismatch"
        return None

    @staticmethod
    def rank(g: PullGroup | None) -> int:
        """Where a request sorts under ``prioritized``."""
        return g.priority if g is not None else NO_PRIORITY

    # -- a message goes out ---------------------------------------------------------------------

    def needs_pin(self) -> bool:
        """Must the next request served be handed a new pin?"""
        return self.policy == "pinned_client" and not self.pin

    def choose(self, g: PullGroup | None, needs_pin: bool, num_pending: int, num_ack_pending: int) -> int:
        """May the request with group fields ``g`` take the message in hand (:data:`SERVE`,
        :data:`CLAIM`, :data:`SKIP` or :data:`WRONG_PIN`)? ``needs_pin``: :meth:`needs_pin` when
        the walk over the waiting requests began; ``num_pending`` the messages left after this
        one, ``num_ack_pending`` the acks outstanding before it (nats-server's counts)."""
        if needs_pin:
            return CLAIM if g is None or not g.id else WRONG_PIN
        if self.pin:
            if g is None or not g.id:
                return SKIP
            if g.id != self.pin:
                return WRONG_PIN
        if self.policy == "overflow" and g is not None and (g.min_pending > 0 or g.min_ack_pending > 0):
            # served once either minimum is met
            pending_met = 0 < g.min_pending <= num_pending + 1
            acks_met = 0 < g.min_ack_pending <= num_ack_pending
            if not (pending_met or acks_met):
                return SKIP
        return SERVE

    def claim(self, g: PullGroup | None, now: int) -> None:
        """Hand a new pin to the request with group fields ``g`` (a request without them, a bare
        batch number, is served without one, as by nats-server)."""
        if g is None or not g.group:
            return
        self.pin = g.id = pin_id()
        self.pinned_ts = now
        self._pin_deadline = now + self.ttl
        self._advise(
            "PINNED",
            "consumer_group_pinned",
            now,
            {"account": ACCOUNT, "group": g.group, "pinned_id": self.pin},
        )

    def release(self) -> None:
        """Take back a pin just handed to a request that then could not take the message."""
        self.pin, self.pinned_ts, self._pin_deadline = "", 0, 0

    def stamp(self, hdr: bytes, data: bytes) -> tuple[bytes, bytes]:
        """A delivery's header block with ``Nats-Pin-Id`` added (``pinned_client``)."""
        base = hdr[:-2] if hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n"
        return base + b"Nats-Pin-Id: " + self.pin.encode() + b"\r\n\r\n", data

    # -- unpinning ------------------------------------------------------------------------------

    def unpin(self, group: str, now: int) -> None:
        """``CONSUMER.UNPIN``: the next request without a pin gets a new one. Announced even when
        nothing was pinned, as by nats-server."""
        self.release()
        self._unpinned(group, "admin", now)

    def deadline(self) -> int | None:
        """When the pin expires (ns), or None."""
        return self._pin_deadline or None

    def expire(self, now: int) -> bool:
        """Has the pin expired at ``now`` (then it is gone, and announced)?"""
        if not self.pin or self._pin_deadline > now:
            return False
        group = self.groups[0] if self.groups else ""
        self.release()
        self._unpinned(group, "timeout", now)
        return True

    def _unpinned(self, group: str, reason: str, now: int) -> None:
        fields = {"account": ACCOUNT, "group": group, "reason": reason}
        self._advise("UNPINNED", "consumer_group_unpinned", now, fields)

    # -- reporting ------------------------------------------------------------------------------

    def state(self) -> list[PriorityGroupState]:
        """ConsumerInfo's ``priority_groups``: the first group and its pin."""
        if not self.groups:
            return []
        ts = format_time(self.pinned_ts)
        return [PriorityGroupState(group=self.groups[0], pinned_client_id=self.pin, pinned_ts=ts)]
