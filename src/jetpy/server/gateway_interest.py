"""Interest across gateways: what this cluster tells the other clusters, how their interest
becomes subscriptions here, and who gets a message that arrived from a gateway.

Owns nats-server's gateway interest rules, per account:

* **The cluster's interest** (:class:`ClusterInterest`, nats-server's ``pasi``): every
  subscription of this server, of its routes and of the leaf nodes it is the hub of (see
  :data:`TOLD_TO_GATEWAYS`), counted by (subject, queue); a gateway hears of a subject when the
  first arrives and the last goes.
* **What an inbound gateway is told** (:class:`InboundInterest`, on the connection the remote
  cluster sends its messages over): in *optimistic* mode the remote sends everything and is told
  ``RS- <acc> <subject>`` for a message nobody here wants (``A- <acc>`` when the account has no
  interest at all), and ``RS+``/``A+`` when that changes; after :data:`MAX_NO_INTEREST` such
  subjects the account switches to *interest-only*: ``INFO gateway_cmd 2``, an ``RS+`` for every
  subject, ``INFO gateway_cmd 3``, and from then on an ``RS+``/``RS-`` at every first and last
  subscription. Queue groups are always told (``RS+ <acc> <subject> <queue> 1``). A nats-server
  2.9+ (and jetpy) switches every account to interest-only as soon as a gateway connects
  (``gateway_iom`` in its INFO).
* **What an outbound gateway was told** (:class:`OutboundInterest`, on the connection this
  server sends its messages over): in optimistic mode a catch-all subscription (``>``) sends every
  message but those the remote refused, in interest-only mode one subscription per ``RS+``; queue
  groups are members ``far`` away (:meth:`Broker.publish` picks one only when this cluster has
  none, nats-server's preference for the local cluster).
* **Recent subscriptions** (:class:`RecentSubs`): what was subscribed to in the last
  :data:`RECENT_SUB_TTL` seconds; a request to a gateway whose reply is among them travels with
  a mapped reply (``_GR_.``, :mod:`gateway_wire`), because the remote cluster may not know that
  interest yet.
* **Delivering a gateway's message** (:func:`deliver_from_gateway`): to this cluster's plain
  subscribers (clients, routes, leaf nodes: never another gateway), a member of each queue group
  the message names; a client is shown the real reply of a mapped one, and its answer is sent
  back mapped (:class:`ReplyMap`).

Knows nothing of sockets; the lines are :mod:`route_wire`'s and :mod:`gateway_wire`'s.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable
from typing import Final

from jetpy.protocol.encode import msg_tail
from jetpy.protocol.gateway_wire import routed_reply
from jetpy.protocol.route_wire import msg_head
from jetpy.server.broker import (
    FROM_CLIENT,
    FROM_GATEWAY,
    FROM_HUB_LEAF,
    FROM_ROUTE,
    Broker,
    Subscriber,
    Subscription,
)
from jetpy.subjects import subject_matches
from jetpy.sublist import MatchResult, SubjectTree

__all__ = [
    "GATEWAY",
    "INTEREST_ONLY",
    "MAX_NO_INTEREST",
    "MODE_NAMES",
    "OPTIMISTIC",
    "RECENT_SUB_TTL",
    "TOLD_TO_GATEWAYS",
    "TRANSITIONING",
    "ClusterInterest",
    "InboundInterest",
    "OutboundInterest",
    "RecentSubs",
    "ReplyMap",
    "deliver_from_gateway",
    "not_far",
]

GATEWAY: Final = "Gateway"  # a gateway connection's ``kind``

OPTIMISTIC: Final = 0
TRANSITIONING: Final = 1
INTEREST_ONLY: Final = 2
MODE_NAMES: Final = ("Optimistic", "Transitioning", "Interest-Only")

MAX_NO_INTEREST: Final = 1000
"""Subjects an inbound gateway is told nobody wants (RS-) before the account switches to
interest-only (nats-server's gatewayMaxRUnsubBeforeSwitch)."""

MAX_REFUSED: Final = 100_000
"""Subjects an outbound gateway remembers a remote refused in optimistic mode: a remote telling
more (it switches at 1,000) only makes this server send it messages it drops."""

RECENT_SUB_TTL: Final = 2.0
"""Seconds a subscription counts as recent for mapping replies, and a mapped reply is
remembered for the client that got it (nats-server's defaultGatewayRecentSubExpiration)."""

TOLD_TO_GATEWAYS: Final = frozenset({FROM_CLIENT, FROM_ROUTE, FROM_HUB_LEAF})
"""Subscriptions the other clusters hear of: the whole cluster's, and the leaf nodes' of which
its servers are the hub (never another gateway's: a message crosses one gateway at most)."""

Key = tuple[bytes, bytes | None]


class ClusterInterest:
    """One account's interest in this cluster, as gateways are told of it (see the module)."""

    __slots__ = ("account", "counts")

    def __init__(self, account: bytes) -> None:
        self.account = account
        self.counts: dict[Key, int] = {}

    def change(self, subject: bytes, queue: bytes | None, delta: int) -> int:
        """Count a subscription in or out: +1 for the first of its key, -1 for the last, else 0."""
        key = (subject, queue)
        before = self.counts.get(key, 0)
        n = before + delta
        if n <= 0:
            if before <= 0:
                return 0
            del self.counts[key]
            return -1
        self.counts[key] = n
        return 1 if before == 0 else 0

    def plain(self) -> list[bytes]:
        return [subject for subject, queue in self.counts if queue is None]

    def queues(self) -> list[Key]:
        return [key for key in self.counts if key[1] is not None]

    def __bool__(self) -> bool:
        return bool(self.counts)


class RecentSubs:
    """The subjects subscribed to in one account in the last :data:`RECENT_SUB_TTL` seconds."""

    __slots__ = ("_order", "_tree")

    def __init__(self) -> None:
        self._tree: SubjectTree[object] = SubjectTree(cache_size=64)
        self._order: collections.deque[tuple[float, bytes, object]] = collections.deque()

    def add(self, subject: bytes, now: float) -> None:
        self._prune(now)
        token = object()
        self._tree.insert(subject, None, token)
        self._order.append((now + RECENT_SUB_TTL, subject, token))

    def matches(self, reply: bytes, now: float) -> bool:
        self._prune(now)
        return bool(self._order) and self._tree.has_interest(reply)

    def _prune(self, now: float) -> None:
        order = self._order
        while order and order[0][0] <= now:
            _, subject, token = order.popleft()
            self._tree.remove(subject, None, token)


class ReplyMap:
    """The mapped replies a client was shown the real reply of (see the module): its answer to
    one of them in the next :data:`RECENT_SUB_TTL` seconds goes back mapped."""

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[bytes, tuple[float, bytes]] = {}

    def add(self, real: bytes, mapped: bytes) -> None:
        now = time.monotonic()
        m = self._map
        if m:
            for key in list(m):  # oldest first: stop at the first one still alive
                if m[key][0] > now:
                    break
                del m[key]
        m.pop(real, None)
        m[real] = (now + RECENT_SUB_TTL, mapped)

    def get(self, subject: bytes) -> bytes | None:
        entry = self._map.get(subject)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del self._map[subject]
            return None
        return entry[1]

    def __bool__(self) -> bool:
        return bool(self._map)


class InboundInterest:
    """What one inbound gateway connection was told of one account (see the module)."""

    __slots__ = ("mode", "refused")

    def __init__(self, mode: int = OPTIMISTIC) -> None:
        self.mode = mode
        self.refused: set[bytes] = set()  # subjects told RS- (optimistic mode)


class OutboundInterest:
    """One account's interest of the remote cluster an outbound gateway connection goes to,
    as subscriptions in the account's broker (see the module)."""

    __slots__ = ("account", "broker", "catch_all", "iom", "link", "mode", "none", "refused", "subs")

    def __init__(self, link: Subscriber, account: bytes, broker: Broker, iom: bool) -> None:
        self.link = link
        self.account = account
        self.broker = broker
        self.iom = iom  # the remote switches every account to interest-only at once
        self.mode = OPTIMISTIC
        self.none = False  # the remote said A-: no interest in the account at all
        self.refused: set[bytes] = set()  # subjects the remote said RS- to (optimistic mode)
        self.subs: dict[Key, Subscription] = {}
        self.catch_all: Subscription | None = None
        self._catch_all()

    def _new(self, subject: bytes, queue: bytes | None) -> Subscription:
        sub = Subscription(self.link, subject, queue, self.account)
        sub.prefix = msg_head(self.account, False)
        sub.hprefix = msg_head(self.account, True)
        sub.far = queue is not None
        self.broker.add_remote(sub)
        return sub

    def _catch_all(self) -> None:
        """Keep the catch-all subscription while the remote takes every message it did not
        refuse: optimistic or transitioning, not A-, not a 2.9+ remote."""
        want = not self.iom and not self.none and self.mode != INTEREST_ONLY
        if want and self.catch_all is None:
            self.catch_all = sub = self._new(b">", None)
            sub.filtered = True  # see :meth:`allows`
        elif not want and self.catch_all is not None:
            self.broker.remove_remote(self.catch_all)
            self.catch_all = None

    def allows(self, subject: bytes) -> bool:
        """Whether a message the catch-all matched may go (the remote did not refuse it)."""
        return subject not in self.refused

    def sub(self, subject: bytes, queue: bytes | None) -> None:
        """RS+: a queue group, or (not optimistic) a subject; optimistic: no longer refused."""
        if queue is not None or self.mode != OPTIMISTIC:
            key = (subject, queue)
            if key not in self.subs:
                self.subs[key] = self._new(subject, queue)
            return
        refused = self.refused
        if b"*" in subject or b">" in subject:
            pattern = subject.decode(errors="replace")
            for k in [k for k in refused if subject_matches(pattern, k.decode(errors="replace"))]:
                refused.discard(k)
        else:
            refused.discard(subject)

    def unsub(self, subject: bytes, queue: bytes | None) -> None:
        """RS-: a queue group or (not optimistic) a subject gone; optimistic: refused."""
        if queue is not None or self.mode != OPTIMISTIC:
            sub = self.subs.pop((subject, queue), None)
            if sub is not None:
                self.broker.remove_remote(sub)
        elif len(self.refused) < MAX_REFUSED:
            self.refused.add(subject)

    def account_interest(self, interest: bool) -> None:
        """A+ / A-: interest in the account again, or none at all (with queue groups known, A-
        only forgets what was refused, as nats-server's does)."""
        if interest:
            self.none = False
        elif any(q is not None for _s, q in self.subs):
            self.refused.clear()
        else:
            self.none = True
            self.refused.clear()
        self._catch_all()

    def start_all(self) -> None:
        """INFO gateway_cmd 2: every RS+ from now on is a subscription (the refusals still
        count until the switch completes)."""
        if self.mode == OPTIMISTIC:
            self.mode = TRANSITIONING

    def complete_all(self) -> None:
        """INFO gateway_cmd 3: interest-only from now on."""
        self.mode = INTEREST_ONLY
        self.refused = set()
        self._catch_all()

    def clear(self) -> None:
        """The connection is gone: so is the remote's interest."""
        for sub in self.subs.values():
            self.broker.remove_remote(sub)
        self.subs.clear()
        if self.catch_all is not None:
            self.broker.remove_remote(self.catch_all)
            self.catch_all = None

    def count(self) -> int:
        return len(self.subs)


def not_far(members: list[Subscription]) -> list[Subscription]:
    """The members a message from a gateway may go to: this cluster's (clients, in-process
    handlers, routes, leaf nodes), never another gateway."""
    return [s for s in members if s.client.origin != FROM_GATEWAY]


def deliver_from_gateway(
    r: MatchResult[Subscription],
    plain: list[Subscription],
    subject: bytes,
    reply: bytes | None,
    hdr_len: int,
    data: bytes,
    sizes: bytes,
    queues: list[bytes] | None,
    members: Callable[[list[Subscription]], list[Subscription]] = not_far,
) -> int:
    """Deliver a message from a gateway: to ``plain`` (the match result ``r``'s plain members
    but gateways) and, for each group in ``queues``, one of its ``members`` (this cluster's).
    A client gets the real reply of a mapped one (and remembers the mapping, ``map_reply``).
    Returns the deliveries made. (A route's message with a mapped reply goes through here too,
    with its own ``plain`` and ``members``.)"""
    real = shown = b""
    if reply is not None and reply[0] in b"_$":
        mapped = routed_reply(reply)
        if mapped is not None:
            real = mapped[2]
            shown = msg_tail(real, hdr_len, data, sizes)
    tail = b""
    n = 0
    targets = list(plain)
    if queues:
        for group in r[1]:
            if group[0].queue not in queues:
                continue
            ok = members(group)
            if ok:
                targets.append(ok[0] if len(ok) == 1 else ok[random.randrange(len(ok))])
    for sub in targets:
        h = sub.handler
        if h is not None:
            h(subject, reply, hdr_len, data)
        elif real and reply is not None and sub.client.kind == "Client":
            remember = getattr(sub.client, "map_reply", None)
            if remember is not None:
                remember(real, reply)
            sub.client.deliver(sub, subject, real, hdr_len, data, shown)
        else:
            if not tail:
                tail = msg_tail(reply, hdr_len, data, sizes)
            sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
        n += 1
    return n
