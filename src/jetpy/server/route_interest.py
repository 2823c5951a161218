"""Interest across routes: what this server announces to its peers, how a peer's announcements
become subscriptions here, and who gets a message that arrived from a peer.

Owns three rules of nats-server's route protocol, per account:

* **Announcing** (:class:`LocalInterest`): this server's subscriptions (but for the account
  imports' own, see :func:`announced`) counted by (subject, queue). A plain subject is announced once (``RS+`` at the first subscription, ``RS-`` after the
  last), a queue group with its weight, the number of members here (``RS+ ... <queue> <n>`` at
  every change, ``RS-`` after the last), so a peer picks among the whole cluster's members.
* **Remote interest** (:class:`RemoteInterest`): a peer's ``RS+`` becomes a subscription in the
  account's broker whose receiver is the route; a queue group of weight *n* becomes *n* of them
  (what nats-server's sublist does when it returns a remote queue subscription *n* times), so the
  broker's uniform choice among members is nats-server's weighted one, with no cost on the
  message path. Weights are capped at :data:`MAX_QUEUE_WEIGHT`.
* **Delivering a routed message** (:func:`deliver_routed`, :func:`deliver_routed_run`): to this
  server's own subscribers only (one hop: never to another route, so nothing loops or arrives
  twice; nor to the account imports' subscriptions, which the publishing server carried out
  already), its plain subscribers always, and a member of each queue group the message names,
  preferring a member here; only when none is left here (it just left) does the message go on to
  one on another peer, never back to the route it came from.

Knows nothing of sockets or of the wire beyond the announcement lines :mod:`route_wire` spells.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

from jetpy.protocol.encode import msg_tail, msg_tails
from jetpy.protocol.route_wire import msg_head, sub_line, unsub_line
from jetpy.server.broker import (
    FROM_CLIENT,
    FROM_HUB_LEAF,
    FROM_SPOKE_LEAF,
    Broker,
    Subscriber,
    Subscription,
)
from jetpy.sublist import MatchResult

__all__ = [
    "MAX_QUEUE_WEIGHT",
    "ROUTER",
    "TOLD_TO_ROUTES",
    "LocalInterest",
    "RemoteInterest",
    "announced",
    "deliver_routed",
    "deliver_routed_run",
    "local_members",
]

ROUTER: Final = "Router"  # a route connection's ``kind``: how a receiver is told from a client

TOLD_TO_ROUTES: Final = frozenset({FROM_CLIENT, FROM_HUB_LEAF})
"""Subscriptions the routes hear of: this server's clients' (and in-process handlers') and
those of the leaf nodes it is the hub of; never another peer's (one hop: the cluster's other
servers announce their own, a gateway's and the hub's interest stay on this server)."""

_LOCAL: Final = frozenset({FROM_CLIENT, FROM_HUB_LEAF, FROM_SPOKE_LEAF})

MAX_QUEUE_WEIGHT: Final = 1024
"""Members of one queue group a peer may announce (its RS+ weight): each becomes a subscription
here, so a peer cannot make this server allocate without bound; past it the group keeps this
weight (the cluster-wide choice then slightly favours other servers' members)."""

Key = tuple[bytes, bytes | None]  # (subject, queue)


class LocalInterest:
    """This server's subscriptions in one account, counted for the routes (see the module)."""

    __slots__ = ("account", "counts")

    def __init__(self, account: bytes) -> None:
        self.account = account
        self.counts: dict[Key, int] = {}

    def change(self, sub: Subscription, delta: int) -> bytes | None:
        """Count ``sub`` in (+1) or out (-1); the line every route must be sent, if any."""
        key = (sub.subject, sub.queue)
        before = self.counts.get(key, 0)
        n = before + delta
        if n <= 0:
            if before <= 0:
                return None
            del self.counts[key]
            return self.unsub_line(sub.subject, sub.queue)
        self.counts[key] = n
        if sub.queue is None:
            return self.sub_line(sub.subject, None, 0) if before == 0 else None
        return self.sub_line(sub.subject, sub.queue, n)

    def announce_all(self) -> bytes:
        """Every announcement, for a route that just joined."""
        line = self.sub_line
        return b"".join(line(subject, queue, n) for (subject, queue), n in self.counts.items())

    def sub_line(self, subject: bytes, queue: bytes | None, weight: int) -> bytes:
        """The announcement of a subject or of a group's weight (a route's ``RS+``)."""
        return sub_line(self.account, subject, queue, weight)

    def unsub_line(self, subject: bytes, queue: bytes | None) -> bytes:
        """The withdrawal of a subject or group (a route's ``RS-``)."""
        return unsub_line(self.account, subject, queue)

    def count(self) -> int:
        return len(self.counts)


class RemoteInterest:
    """One route's announced interest in one account, as subscriptions in its broker."""

    __slots__ = ("account", "broker", "far", "filtered", "heads", "route", "subs")

    def __init__(
        self,
        route: Subscriber,
        account: bytes,
        broker: Broker,
        heads: tuple[bytes, bytes] | None = None,
        far: bool = False,
        filtered: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.route = route
        self.account = account
        self.broker = broker
        self.subs: dict[Key, list[Subscription]] = {}
        # what the link writes before the subject of a message (RMSG <account> on a route; a
        # leaf node's LMSG names no account), without headers and with
        self.heads = heads if heads is not None else (msg_head(account, False), msg_head(account, True))
        self.far = far  # its queue group members are picked only when the group has none nearer
        # whether its receiver may refuse some messages of a subject (Subscription.filtered)
        self.filtered = filtered

    def _new(self, subject: bytes, queue: bytes | None) -> Subscription:
        sub = Subscription(self.route, subject, queue, self.account)
        sub.prefix, sub.hprefix = self.heads
        sub.far = self.far and queue is not None
        sub.filtered = self.filtered is not None and self.filtered(subject)
        self.broker.add_remote(sub)
        return sub

    def add(self, subject: bytes, queue: bytes | None, weight: int) -> None:
        """RS+: a new subject or group, or a group's new weight (0: counts for nothing)."""
        key = (subject, queue)
        have = self.subs.get(key)
        if have is None:
            have = self.subs[key] = []
            if queue is None:
                have.append(self._new(subject, None))
                return
        elif queue is None:
            return  # a plain subject announced again changes nothing
        want = min(weight, MAX_QUEUE_WEIGHT)
        while len(have) < want:
            have.append(self._new(subject, queue))
        while len(have) > want:
            self.broker.remove_remote(have.pop())

    def remove(self, subject: bytes, queue: bytes | None) -> bool:
        """RS-; False if the peer had not announced it."""
        have = self.subs.pop((subject, queue), None)
        if have is None:
            return False
        for sub in have:
            self.broker.remove_remote(sub)
        return True

    def clear(self) -> None:
        """The route is gone: so is its interest."""
        for have in self.subs.values():
            for sub in have:
                self.broker.remove_remote(sub)
        self.subs.clear()

    def count(self) -> int:
        """Announcements held (a queue group counts once, whatever its weight)."""
        return len(self.subs)


_UNTOLD: Final = (b"_GR_.", b"$GR.")


def announced(sub: Subscription) -> bool:
    """Whether a local subscription is told to other servers: all but the account imports' own
    (``Subscription.local``: they act on what is published on this server only) and the
    in-process handlers of the replies mapped across gateways (each server takes its own, see
    :mod:`gateway`). The system account's request handlers are told, as nats-server's are."""
    return not sub.local and (sub.handler is None or not sub.subject.startswith(_UNTOLD))


def local_members(members: list[Subscription]) -> list[Subscription]:
    """The members a message from a route may go to: this server's clients, in-process
    handlers and leaf nodes (never another route or a gateway: a routed message makes one hop),
    but for the account imports' subscriptions."""
    return [s for s in members if s.client.origin in _LOCAL and not s.local]


def deliver_routed(
    r: MatchResult[Subscription],
    plain: list[Subscription],
    origin: Subscriber,
    subject: bytes,
    reply: bytes | None,
    hdr_len: int,
    data: bytes,
    sizes: bytes,
    queues: list[bytes] | None,
) -> int:
    """Deliver a message from the route ``origin``: to ``plain`` (the local plain members of the
    match result ``r``) and, for each group in ``queues``, one member (see the module). Returns
    the deliveries made."""
    tail = b""
    n = 0
    for sub in plain:
        h = sub.handler
        if h is not None:
            h(subject, reply, hdr_len, data)
        else:
            if not tail:
                tail = msg_tail(reply, hdr_len, data, sizes)
            sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
        n += 1
    if queues:
        for group in r[1]:
            if group[0].queue not in queues:
                continue
            mine = local_members(group)
            if mine:
                sub = mine[0] if len(mine) == 1 else mine[random.randrange(len(mine))]
            else:
                others = [s for s in group if s.client is not origin]
                if not others:
                    continue
                sub = others[random.randrange(len(others))]
            h = sub.handler
            if h is not None:
                h(subject, reply, hdr_len, data)
            else:
                if not tail:
                    tail = msg_tail(reply, hdr_len, data, sizes)
                sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
            n += 1
    return n


def deliver_routed_run(
    plain: list[Subscription], subject: bytes | list[bytes], datas: list[bytes], sizes: list[bytes]
) -> int:
    """Deliver a run of plain messages (no reply, headers or queue groups) from a route to the
    local plain members ``plain`` (which every message matches): one call per receiver when each
    is a different client (so per-client order is the same either way), else message by
    message. ``subject``: the run's, or each message's own (an ``R_SIBS`` run)."""
    if not plain:
        return 0
    subjects = [subject] * len(datas) if isinstance(subject, bytes) else subject
    if len(plain) > 1 and len({s.client for s in plain}) < len(plain):
        n = 0
        for subj, data, sz in zip(subjects, datas, sizes, strict=True):
            tail = msg_tail(None, 0, data, sz)
            for sub in plain:
                h = sub.handler
                if h is not None:
                    h(subj, None, 0, data)
                else:
                    sub.client.deliver(sub, subj, None, 0, data, tail)
                n += 1
        return n
    tails: list[bytes] | None = None
    for sub in plain:
        h = sub.handler
        if h is not None:
            for subj, data in zip(subjects, datas, strict=True):
                h(subj, None, 0, data)
            continue
        client = sub.client
        if isinstance(subject, bytes):
            if tails is None:
                tails = msg_tails(sizes, datas)
            client.deliver_run(sub, subject, datas, tails)
        elif not client.deliver_batch(sub, subjects, None, [b""] * len(datas), datas):
            for subj, data, sz in zip(subjects, datas, sizes, strict=True):
                if sub.max_msgs and sub.delivered >= sub.max_msgs:
                    break  # (UNSUB <sid> <max>: it is gone)
                client.deliver(sub, subj, None, 0, data, msg_tail(None, 0, data, sz))
    return len(plain) * len(datas)
