"""Interest across leaf node links: what each side tells the other, and who gets a message that
arrived over a leaf link.

Owns nats-server's leaf node rules, per link (a link carries one account):

* **What a link tells its peer** (:class:`LeafTold`, counted as routes count theirs: a plain
  subject once, a queue group with its weight at every change). A *hub* tells a leaf node the
  account's whole interest as it knows it: its clients', its account imports' (a leaf node's
  messages are imported here, as a client's), its routes' (the cluster's), its gateways' (the
  super cluster's) and its other leaf nodes', never the leaf node's own (see :func:`told`). A *leaf node* tells its hub its own interest: its clients' and those of the leaf
  nodes it is itself the hub of (:data:`TOLD_TO_HUB`), not what its hub or its cluster told it.
  Each side starts with ``LS+ $LDS.<id>``, its loop-detection subject (:mod:`leaf_wire`).
* **Filters** (:class:`Denied`): ``deny_imports`` and ``deny_exports`` of a remote, subject
  patterns a leaf node takes no messages from its hub on (nor tells it of), and sends none on;
  and on every link, both ways, the JetStream subjects nats-server keeps off leaf links
  (:data:`JS_CLIENT_DENY`, :data:`JS_SYSTEM_DENY`; and a server's own domain's API when the
  other side's domain differs), so that each side's JetStream answers its own clients and the
  other's is reached by its domain.
* **Delivering a leaf link's message** (:func:`deliver_from_leaf`): to the plain subscribers
  its side may give it to (a hub: everyone but the link itself, routes and gateways included, so
  a leaf node's message reaches the whole super cluster; a leaf node: its own clients and leaf
  nodes, what it told its hub), and one member of each queue group the message names, the
  nearest (a leaf node's members count as far: local members are preferred on both sides).

Knows nothing of sockets; the lines are :mod:`leaf_wire`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from jetpy.protocol.encode import msg_tail
from jetpy.protocol.leaf_wire import sub_line, unsub_line
from jetpy.server.broker import (
    FROM_CLIENT,
    FROM_GATEWAY,
    FROM_HUB_LEAF,
    Subscriber,
    Subscription,
    Writes,
    near_member,
)
from jetpy.server.route_interest import LocalInterest, announced
from jetpy.subjects import subject_is_subset, subject_matches, subjects_overlap
from jetpy.sublist import MatchResult

__all__ = [
    "LEAFNODE",
    "LEAF_HEADS",
    "TOLD_TO_HUB",
    "Denied",
    "LeafTold",
    "deliver_from_leaf",
    "delivery_for_link",
    "split_delivery",
    "told",
]

LEAFNODE: Final = "Leafnode"  # a leaf link's ``kind``
LEAF_HEADS: Final = (b"LMSG ", b"HMSG ")  # what goes before the subject of a leaf link's frames

TOLD_TO_HUB: Final = frozenset({FROM_CLIENT, FROM_HUB_LEAF})
"""Subscriptions a leaf node tells its hub: its clients' (and in-process handlers') and those of
the leaf nodes it is the hub of."""


class LeafTold(LocalInterest):
    """What one leaf link told its peer (``LS+``/``LS-``, see the module)."""

    __slots__ = ()

    def sub_line(self, subject: bytes, queue: bytes | None, weight: int) -> bytes:
        return sub_line(subject, queue, weight)

    def unsub_line(self, subject: bytes, queue: bytes | None) -> bytes:
        return unsub_line(subject, queue)


def told(sub: Subscription, link: Subscriber, spoke: bool) -> bool:
    """Whether ``link`` tells its peer of ``sub`` (``spoke``: the link goes to this server's hub)."""
    client = sub.client
    if client is link:
        return False
    if spoke:
        return client.origin in TOLD_TO_HUB and announced(sub)
    if sub.local:  # an account import's: a leaf node's messages are carried out here
        return True
    # an older remote cluster's catch-all (optimistic mode) is no interest to tell
    return announced(sub) and not (client.origin == FROM_GATEWAY and sub.filtered)


JS_CLIENT_DENY: Final = ("$JS.API.>", "$KV.>", "$OBJ.>")
"""What crosses no leaf link of an account, either way (nats-server's denyAllClientJs): each
side's JetStream answers its own clients; the other's is reached by its domain
(``$JS.<domain>.API``)."""

JS_SYSTEM_DENY: Final = ("$JSC.>", "$NRG.>", *JS_CLIENT_DENY)
"""The same on a link of the system account (nats-server's denyAllJs): no JetStream extends
across a leaf link."""


class Denied:
    """Subject patterns a link refuses (``deny_imports`` or ``deny_exports``, and the JetStream
    subjects no leaf link carries)."""

    __slots__ = ("_heads", "patterns")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns
        # the patterns' first tokens when none is a wildcard: a subject with another first
        # token is let through without matching (most messages, as JetStream's all start "$")
        heads = {p.split(".", 1)[0] for p in patterns}
        self._heads = None if heads & {"*", ">"} else frozenset(h.encode() for h in heads)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def message(self, subject: bytes) -> bool:
        """Is a message on ``subject`` refused?"""
        heads = self._heads
        if heads is not None and subject.partition(b".")[0] not in heads:
            return False
        text = subject.decode("utf-8", "replace")
        return any(subject_matches(p, text) for p in self.patterns)

    def interest(self, subject: bytes) -> bool:
        """Is all of a subscription's ``subject`` refused (no message it matches may pass)?"""
        text = subject.decode("utf-8", "replace")
        return any(subject_is_subset(text, p) for p in self.patterns)

    def some(self, subject: bytes) -> bool:
        """May some message a subscription's ``subject`` matches be refused (its messages are
        checked one by one)?"""
        text = subject.decode("utf-8", "replace")
        return any(subjects_overlap(text, p) for p in self.patterns)


def deliver_from_leaf(
    r: MatchResult[Subscription],
    plain: list[Subscription],
    origin: Subscriber,
    may: Callable[[Subscription], bool],
    subject: bytes,
    reply: bytes | None,
    hdr_len: int,
    data: bytes,
    sizes: bytes,
    queues: list[bytes] | None,
) -> int:
    """Deliver a message from the leaf link ``origin``: to ``plain`` (the match result ``r``'s
    plain members it ``may`` be given to) and, for each group in ``queues``, its nearest member
    (see the module). A JetStream delivery (:func:`split_delivery`) is shown to this server's
    clients with the subject it was stored under, and passed on to other links as it came.
    Returns the deliveries made."""
    targets = plain
    if queues:
        targets = list(plain)
        for group in r[1]:
            if group[0].queue not in queues:
                continue
            ok = [s for s in group if s.client is not origin and may(s)]
            if ok:
                targets.append(near_member(ok))
    shown, ack = split_delivery(reply)
    tail = shown_tail = b""
    for sub in targets:
        h = sub.handler
        if h is not None:
            h(shown or subject, ack if shown else reply, hdr_len, data)
        elif shown and sub.client.origin == FROM_CLIENT:
            if not shown_tail:
                shown_tail = msg_tail(ack, hdr_len, data, sizes)
            sub.client.deliver(sub, shown, ack, hdr_len, data, shown_tail)
        else:
            if not tail:
                tail = msg_tail(reply, hdr_len, data, sizes)
            sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
    return len(targets)


_ACK_PREFIX: Final = b"$JS.ACK."


def split_delivery(reply: bytes | None) -> tuple[bytes, bytes]:
    """A JetStream delivery crossing a link travels on its deliver subject with the reply
    ``<ack reply>@<stored subject>`` (nats-server's form): (stored subject, ack reply), or
    (b"", b"") for any other message."""
    if reply is None or not reply.startswith(_ACK_PREFIX):
        return b"", b""
    at = reply.rfind(b"@")
    if at < 0:
        return b"", b""
    return reply[at + 1 :], reply[:at]


def delivery_for_link(
    sub: Subscription, subject: bytes, reply: bytes | None, writes: Writes
) -> tuple[bytes, bytes] | None:
    """The (subject, reply) a JetStream delivery shown as ``subject`` travels with to a link
    whose subscription ``sub`` took it: its deliver subject (the one the broker routed the last
    such publish on, ``writes.routed``; else the subscription's own subject when it is literal)
    and ``<ack reply>@<subject>``; None when the message is no such delivery."""
    if reply is None or not reply.startswith(_ACK_PREFIX) or b"@" in reply:
        return None
    if writes.shown is subject:
        routed = writes.routed
    else:
        routed = sub.subject
        if b"*" in routed or b">" in routed:
            return None
    if routed == subject:
        return None
    return routed, reply + b"@" + subject
