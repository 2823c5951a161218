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
  patterns a leaf node takes no messages from its hub on (nor tells it of), and sends none on.
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
    near_member,
)
from jetpy.server.route_interest import LocalInterest, announced
from jetpy.subjects import subject_is_subset, subject_matches
from jetpy.sublist import MatchResult

__all__ = [
    "LEAFNODE",
    "LEAF_HEADS",
    "TOLD_TO_HUB",
    "Denied",
    "LeafTold",
    "deliver_from_leaf",
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


class Denied:
    """Subject patterns a link refuses (``deny_imports`` or ``deny_exports``)."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def message(self, subject: bytes) -> bool:
        """Is a message on ``subject`` refused?"""
        text = subject.decode("utf-8", "replace")
        return any(subject_matches(p, text) for p in self.patterns)

    def interest(self, subject: bytes) -> bool:
        """Is all of a subscription's ``subject`` refused (no message it matches may pass)?"""
        text = subject.decode("utf-8", "replace")
        return any(subject_is_subset(text, p) for p in self.patterns)


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
    (see the module). Returns the deliveries made."""
    targets = plain
    if queues:
        targets = list(plain)
        for group in r[1]:
            if group[0].queue not in queues:
                continue
            ok = [s for s in group if s.client is not origin and may(s)]
            if ok:
                targets.append(near_member(ok))
    tail = b""
    for sub in targets:
        h = sub.handler
        if h is not None:
            h(subject, reply, hdr_len, data)
        else:
            if not tail:
                tail = msg_tail(reply, hdr_len, data, sizes)
            sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
    return len(targets)
