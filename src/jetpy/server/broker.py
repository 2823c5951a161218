"""Broker: interest and routing. Who gets a published message, and queue-group selection.

Owns the subscription trie. A subscriber is anything with a
``deliver(sub, subject, reply, hdr_len, data, tail)`` method (and ``deliver_run`` for a run of
plain messages, see :meth:`Broker.publish_run`): a client connection, or an
:class:`InternalClient` whose callback runs in-process (JetStream's API and streams use these).
Knows nothing of sockets nor of the wire format: the frame is ``protocol.encode``'s. The broker
only decides when its halves are built: a subscription's prefix when it is made, a message's
tail once per publish (for the first socket receiver, then shared by every other), the tails of
a run once per run.

One broker per account: an account is a subject space of its own (nats-server's sublist per
account), so a message published in one account reaches only that account's subscribers; what
crosses accounts (imports and exports) is ``accounts``' business, through in-process
subscriptions. Every account's broker shares one :class:`Writes`.

Writes are coalesced: a delivery only appends to the receiver's buffer and marks it dirty. A
connection that handles a read wraps it in :meth:`Broker.begin_batch`/:meth:`Broker.end_batch`,
which writes out every dirty receiver at its end: a read holding a hundred PUBs costs one write
per receiving connection, and the writes leave before the loop turns (latency). Deliveries outside a read (timers, JetStream)
are flushed once per event-loop turn (``call_soon``). A read may deliver into several accounts
(an import): the batch and the dirty receivers are the server's, not one account's.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from jetpy.protocol.encode import msg_prefix, msg_tail, msg_tails
from jetpy.server.options import GLOBAL_ACCOUNT
from jetpy.server.permissions import Permissions
from jetpy.subjects import subject_matches, subjects_overlap
from jetpy.sublist import MatchResult, SubjectTree

__all__ = [
    "FROM_CLIENT",
    "FROM_GATEWAY",
    "FROM_HUB_LEAF",
    "FROM_ROUTE",
    "FROM_SPOKE_LEAF",
    "PEERS",
    "Broker",
    "InterestWatcher",
    "InternalClient",
    "OverlapWatch",
    "Subscriber",
    "Subscription",
    "Writes",
    "near_member",
    "split_shown",
]

# Where a subscription comes from (``Subscriber.origin``): who else is told of it depends on it
# (routes hear of clients' and of the leaf nodes this server is the hub of; gateways of those and
# of routes'; a leaf node of nearly everything, see the interest modules of each).
FROM_CLIENT = 0  # this server's clients and in-process handlers
FROM_ROUTE = 1  # another server of this cluster
FROM_GATEWAY = 2  # another cluster of the super cluster
FROM_HUB_LEAF = 3  # a leaf node connected to this server (this server is its hub)
FROM_SPOKE_LEAF = 4  # the hub this server is a leaf node of
PEERS = frozenset({FROM_ROUTE, FROM_GATEWAY})  # other servers' interest, not this server's

log = logging.getLogger("jetpy.server")


class Subscriber(Protocol):
    kind: str  # "Client", "Router", "Gateway", "Leafnode" or "internal", as /connz tells them apart
    origin: int  # FROM_CLIENT ... FROM_SPOKE_LEAF

    def deliver(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None: ...

    def deliver_run(self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]) -> None:
        """Deliver plain messages (no reply, no headers) in order, as ``deliver`` would each."""

    def deliver_batch(
        self,
        sub: Subscription,
        subjects: list[bytes],
        replies: list[bytes] | None,
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        """Deliver messages with their own subjects and replies (None: none has one) in order,
        as ``deliver`` would each; False (nothing done) when this subscriber only takes them one
        by one."""

    def flush(self) -> None: ...


class Subscription:
    __slots__ = (
        "client",
        "created",
        "delivered",
        "far",
        "filtered",
        "handler",
        "hprefix",
        "local",
        "max_msgs",
        "prefix",
        "queue",
        "relay",
        "run",
        "sid",
        "subject",
    )

    def __init__(self, client: Subscriber, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        self.client = client
        self.subject = subject
        self.queue = queue
        self.sid = sid
        self.max_msgs = 0  # 0 = unlimited; set by UNSUB <sid> <max>
        self.delivered = 0
        self.filtered = False  # its client may not see every message it matches (permissions)
        # a queue group member in another cluster: picked only when the group has none here
        self.far = False
        self.created = time.time()
        # the start of a MSG/HMSG frame for a message published on exactly ``subject``
        self.prefix = msg_prefix(subject, sid)
        self.hprefix = msg_prefix(subject, sid, headers=True)
        # an in-process subscriber's callback, called directly by the routing hot path
        self.handler: InternalHandler | None = None
        # an in-process subscriber that passes messages on (a stream import): given the subject
        # routed on as well as the one shown, when they differ (JetStream deliveries)
        self.relay: RelayHandler | None = None
        # an in-process subscriber that takes a run of messages with replies in one call (a
        # stream's subjects: see :meth:`Broker.publish_requests`)
        self.run: RunHandler | None = None
        # acts on messages published on this server only (an account import's subscription):
        # neither announced to the routes nor given routed messages nor counted as interest
        # by an import
        self.local = False


# (subject, reply, hdr_len, data) -> None; data holds the header block then the payload
InternalHandler = Callable[[bytes, "bytes | None", int, bytes], None]
# (subject routed on, subject shown, reply, hdr_len, data) -> None
RelayHandler = Callable[[bytes, bytes, "bytes | None", int, bytes], None]
# (subject, replies, hdr_lens, datas) -> None: a run of messages with replies to one subject
RunHandler = Callable[[bytes, list[bytes], list[int], list[bytes]], None]


class OverlapWatch:
    """A watch on the subscriptions overlapping ``pattern`` (see :meth:`Broker.watch_overlap`)."""

    __slots__ = ("callback", "count", "pattern")

    def __init__(self, pattern: str, callback: Callable[[bool], None]) -> None:
        self.pattern = pattern
        self.callback = callback
        self.count = 0


# told of every subscription made (+1) or dropped (-1), local or a peer's: what the routes,
# gateways and leaf nodes announce follows from it
InterestWatcher = Callable[[Subscription, int], None]


class InternalClient:
    """An in-process subscriber: deliveries call ``handler`` synchronously, in publish order."""

    kind = "internal"
    origin = FROM_CLIENT

    def __init__(self, name: str) -> None:
        self.name = name
        self.handlers: dict[Subscription, InternalHandler] = {}

    def deliver(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None:
        handler = self.handlers.get(sub)
        if handler is not None:
            try:
                handler(subject, reply, hdr_len, data)
            except Exception:  # a server bug; the publisher's connection must not pay for it
                log.exception("internal subscriber %s failed on %r", self.name, subject)

    def deliver_run(self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]) -> None:
        for data in datas:
            handler = self.handlers.get(sub)  # looked up each time: a handler may unsubscribe
            if handler is None:
                return
            try:
                handler(subject, None, 0, data)
            except Exception:
                log.exception("internal subscriber %s failed on %r", self.name, subject)

    def deliver_batch(
        self,
        sub: Subscription,
        subjects: list[bytes],
        replies: list[bytes] | None,
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        return False  # handlers take one message per call

    def flush(self) -> None:
        pass


class Writes:
    """The server's coalesced output and the client being served, shared by every account's
    broker: receivers with buffered output (written at the end of the read that filled them,
    or once per loop turn), and the permissions of the client whose read is being handled."""

    __slots__ = (
        "_batching",
        "_dirty",
        "_flush_scheduled",
        "_loop",
        "backed_up",
        "caller",
        "client",
        "depth",
        "routed",
        "shown",
    )

    def __init__(self) -> None:
        self._dirty: list[Subscriber] = []
        self._flush_scheduled = False
        self._batching = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        # receivers (their ``flow``) that the flush of a client's read left backed up: that
        # client stalls briefly (see jetpy.server.flow); cleared by flushes no client drives
        self.backed_up: list[Any] = []
        # the permissions of the client whose read is being handled (None: the server itself,
        # or a client without permissions): what in-process subscribers ask of their caller
        self.caller: Permissions | None = None
        # the client whose read is being handled (None: the server itself); its ``rtt`` is
        # what an imported request's Nats-Request-Info reports
        self.client: Any = None
        self.depth = 0  # imports the message being delivered went through (accounts)
        # the last message published with a subject shown apart from the one routed on (a
        # JetStream delivery): a link sends it on the routed one, which its subscription's
        # wildcards do not tell (see leaf_interest.delivery_for_link)
        self.shown = b""
        self.routed = b""

    def begin_batch(self) -> None:
        """A read is being handled: deliveries wait for its :meth:`end_batch`, not the loop."""
        self._batching += 1

    def end_batch(self) -> None:
        self._batching -= 1
        if not self._batching and self._dirty:
            self.flush_dirty()

    def mark_dirty(self, conn: Subscriber) -> None:
        self._dirty.append(conn)
        if not self._batching and not self._flush_scheduled:
            self._flush_scheduled = True
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush_dirty()
        self.backed_up.clear()  # no client's read caused these deliveries: nobody to stall

    def flush_dirty(self) -> None:
        """Write out every receiver with buffered output, now."""
        while self._dirty:
            dirty = self._dirty
            self._dirty = []
            for conn in dirty:
                conn.flush()


class Broker:
    """One account's subscriptions and routing (see the module)."""

    def __init__(self, account: str = GLOBAL_ACCOUNT, writes: Writes | None = None) -> None:
        self.account = account
        self.subs: SubjectTree[Subscription] = SubjectTree()
        self._cache_get = self.subs.cache.get
        # messages published from inside the server (clients count their own in and out)
        self.in_msgs = 0
        self.in_bytes = 0
        self.writes = writes = writes if writes is not None else Writes()
        # the shared output's methods, bound once (called per read and per dirty receiver)
        self.begin_batch = writes.begin_batch
        self.end_batch = writes.end_batch
        self.mark_dirty = writes.mark_dirty
        self.flush_dirty = writes.flush_dirty
        self._internal = InternalClient(account)
        self._watchers: dict[str, list[Callable[[], None]]] = {}
        self._overlaps: list[OverlapWatch] = []
        # told of every subscription made (+1) or dropped (-1), this server's and its peers'
        # (routes, gateways and leaf nodes announce what they must from it)
        self.watchers: list[InterestWatcher] = []

    @property
    def backed_up(self) -> list[Any]:
        """Receivers the current read's flush left backed up (see :class:`Writes`)."""
        return self.writes.backed_up

    @backed_up.setter
    def backed_up(self, value: list[Any]) -> None:
        self.writes.backed_up = value

    @property
    def caller(self) -> Permissions | None:
        """The permissions of the client whose read is being handled (see :class:`Writes`)."""
        return self.writes.caller

    @caller.setter
    def caller(self, value: Permissions | None) -> None:
        self.writes.caller = value

    # -- interest -------------------------------------------------------------------------------

    def add(self, sub: Subscription) -> None:
        self.subs.insert(sub.subject, sub.queue, sub)
        if self._watchers:
            self._interest_changed(sub)
        if self._overlaps:
            self._overlap_changed(sub, 1)
        for watch in self.watchers:
            watch(sub, 1)

    def remove(self, sub: Subscription) -> None:
        if self.subs.remove(sub.subject, sub.queue, sub):
            if self._watchers:
                self._interest_changed(sub)
            if self._overlaps:
                self._overlap_changed(sub, -1)
            for watch in self.watchers:
                watch(sub, -1)

    # a peer's subscription (a route's, gateway's or leaf node's): routed to like any other;
    # the watchers tell it on according to its ``origin``
    add_remote = add
    remove_remote = remove

    def subscribe_internal(
        self,
        subject: str,
        handler: InternalHandler,
        queue: str | None = None,
        local: bool = False,
        relay: RelayHandler | None = None,
        run: RunHandler | None = None,
    ) -> Subscription:
        """Subscribe an in-process handler (used by JetStream); returns the handle to unsubscribe.
        ``local``, ``relay``, ``run``: see :class:`Subscription`."""
        sub = Subscription(self._internal, subject.encode(), queue.encode() if queue else None, b"")
        self._internal.handlers[sub] = handler
        sub.handler = handler
        sub.local = local
        sub.relay = relay
        sub.run = run
        self.add(sub)
        return sub

    def unsubscribe_internal(self, sub: Subscription) -> None:
        self._internal.handlers.pop(sub, None)
        sub.handler = None
        self.remove(sub)

    def has_interest(self, subject: bytes) -> bool:
        return self.subs.has_interest(subject)

    def has_queue_interest(self, subject: bytes, queue: bytes) -> bool:
        """Whether members of the queue group named ``queue`` subscribe to ``subject``."""
        return any(members[0].queue == queue for members in self.subs.match(subject)[1])

    def publish_local(
        self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, shown: bytes | None = None
    ) -> int:
        """Deliver to this server's own subscribers only (a member of each queue group among
        them), never to a route: what an import hands over on this server (each server carries
        out the imports of its own clients). ``shown``: see :meth:`publish`. Returns the
        deliveries made."""
        plain, groups = self.subs.match(subject)
        routed = subject
        if shown is not None:
            subject = shown
        tail = b""
        delivered = 0
        for sub in plain:
            if sub.client.origin in PEERS:
                continue
            h = sub.handler
            if h is not None:
                if shown is not None and sub.relay is not None:
                    sub.relay(routed, shown, reply, hdr_len, data)
                else:
                    h(subject, reply, hdr_len, data)
            else:
                if not tail:
                    tail = msg_tail(reply, hdr_len, data)
                sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
            delivered += 1
        for group in groups:
            members = [s for s in group if s.client.origin not in PEERS]
            if not members:
                continue
            sub = members[random.randrange(len(members))]
            h = sub.handler
            if h is not None:
                h(subject, reply, hdr_len, data)
            else:
                if not tail:
                    tail = msg_tail(reply, hdr_len, data)
                sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
            delivered += 1
        return delivered

    # -- routing --------------------------------------------------------------------------------

    def publish(
        self,
        origin: Subscriber | None,
        subject: bytes,
        reply: bytes | None,
        hdr_len: int,
        data: bytes,
        echo: bool = True,
        sizes: bytes | None = None,
        shown: bytes | None = None,
    ) -> int:
        """Deliver to every plain subscriber and one member per queue group; returns the count.

        ``echo=False`` skips subscriptions of ``origin``. ``sizes`` is the MSG line's size field
        as the publisher wrote it (computed when None). ``shown`` is the subject receivers see
        when it differs from the one routed on (JetStream deliveries to an inbox).
        """
        r = self._cache_get(subject)  # the match cache read inline: this runs for every message
        if r is None:
            r = self.subs.match(subject)
        else:
            self.subs.hot_hits += 1
        plain, groups = r
        if not plain and not groups:
            return 0
        tail = b""  # built once, for the first socket receiver; handlers take the message as is
        delivered = 0
        if shown is not None:
            routed = subject  # given to a relay (an import), with the one shown
            subject = shown
            writes = self.writes  # what a link sends such a delivery on (two stores, no allocation)
            writes.shown = shown
            writes.routed = routed
        for sub in plain:
            h = sub.handler
            if h is not None:
                if shown is not None and sub.relay is not None:  # a JetStream delivery to an import
                    sub.relay(routed, shown, reply, hdr_len, data)
                else:
                    h(subject, reply, hdr_len, data)
            else:
                c = sub.client
                if c is origin and not echo:
                    continue
                if shown is not None and c.origin == FROM_ROUTE:
                    _route_shown(sub, routed, shown, reply, hdr_len, data)
                    delivered += 1
                    continue
                if not tail:
                    tail = msg_tail(reply, hdr_len, data, sizes)
                c.deliver(sub, subject, reply, hdr_len, data, tail)
            delivered += 1
        for group in groups:
            members = group
            if not echo and origin is not None:
                members = [s for s in group if s.client is not origin]
                if not members:
                    continue
            sub = members[0] if len(members) == 1 else members[random.randrange(len(members))]
            if sub.far:
                sub = near_member(members)
            h = sub.handler
            if h is not None:
                h(subject, reply, hdr_len, data)
            elif shown is not None and sub.client.origin == FROM_ROUTE:
                _route_shown(sub, routed, shown, reply, hdr_len, data)
            else:
                if not tail:
                    tail = msg_tail(reply, hdr_len, data, sizes)
                sub.client.deliver(sub, subject, reply, hdr_len, data, tail)
            delivered += 1
        return delivered

    def publish_run(
        self,
        origin: Subscriber | None,
        subject: bytes,
        datas: list[bytes],
        sizes: list[bytes],
        echo: bool = True,
    ) -> int:
        """:meth:`publish` for a run of plain messages to one subject (no reply, no headers):
        one route lookup for the run, and one call per receiver rather than per message, when
        every receiver is a different client (so per-client order is the same either way).
        Returns the deliveries made."""
        plain, groups = self.subs.match(subject)  # once per run: the method (it reads the cache too)
        if not plain and not groups:
            return 0
        if groups or (len(plain) > 1 and len({s.client for s in plain}) < len(plain)):
            # A client that gets a message more than once (two subscriptions, or a queue group)
            # sees the copies interleaved message by message: keep that order exactly.
            n = 0
            for data, sz in zip(datas, sizes, strict=True):
                n += self.publish(origin, subject, None, 0, data, echo, sz)
            return n
        tails = msg_tails(sizes, datas)
        delivered = 0
        for sub in plain:
            c = sub.client
            if c is origin and not echo:
                continue
            c.deliver_run(sub, subject, datas, tails)
            delivered += len(datas)
        return delivered

    def publish_requests(
        self, subject: bytes, replies: list[bytes], hdr_lens: list[int], datas: list[bytes]
    ) -> bool:
        """:meth:`publish` for a run of messages with replies to one subject (a publisher's
        window of JetStream publishes), handed in one call to the subject's receiver when it is
        the only one and takes runs (a stream's subjects). False, with nothing done, otherwise:
        the caller then publishes each message in turn."""
        plain, groups = self.subs.match(subject)  # once per run (the method reads the cache too)
        if groups or len(plain) != 1:
            return False
        run = plain[0].run
        if run is None:
            return False
        run(subject, replies, hdr_lens, datas)
        return True

    def publish_batch(
        self, route: bytes, subjects: list[bytes], replies: list[bytes], hdrs: list[bytes], datas: list[bytes]
    ) -> int:
        """Internal deliveries of a run of messages to one route, each shown on its own subject
        with its own reply (a JetStream consumer's messages to an inbox or deliver subject): one
        route lookup, and one call for the lone plain receiver this usually has."""
        plain, groups = self.subs.match(route)
        self.in_msgs += len(datas)
        self.in_bytes += sum(map(len, hdrs)) + sum(map(len, datas))
        if not plain and not groups:
            return 0
        if len(plain) == 1 and not groups:
            sub = plain[0]
            if sub.client.deliver_batch(sub, subjects, replies, hdrs, datas):
                return len(datas)
        n = 0
        publish = self.publish
        for subject, reply, hdr, data in zip(subjects, replies, hdrs, datas, strict=True):
            n += publish(None, route, reply, len(hdr), hdr + data if hdr else data, shown=subject)
        return n

    def publish_internal(
        self, subject: str, reply: str | None, payload: bytes, headers: bytes = b"", shown: str | None = None
    ) -> int:
        """Publish from inside the server (API replies, deliveries, advisories); ``shown``: see
        :meth:`publish`."""
        data = headers + payload if headers else payload
        self.in_msgs += 1
        self.in_bytes += len(data)
        return self.publish(
            None,
            subject.encode(),
            reply.encode() if reply else None,
            len(headers),
            data,
            shown=shown.encode() if shown is not None and shown != subject else None,
        )

    def publish_reply(self, subject: bytes, data: bytes) -> int:
        """:meth:`publish_internal` of a plain reply (no headers, no reply of its own) to a
        subject still in the bytes the requester sent: JetStream's PubAcks, one per published
        message. The usual single receiver (the publisher's inbox subscription) gets it
        directly; any other interest takes the general :meth:`publish`."""
        self.in_msgs += 1
        self.in_bytes += len(data)
        return self._reply(self.subs.match(subject), subject, data)

    def publish_replies(self, subjects: list[bytes], datas: list[bytes]) -> int:
        """:meth:`publish_reply` of each reply in turn (a group commit's PubAcks). A run of
        subjects that differ in their last token only (one requester's inbox) is matched once
        when they are sure to share the result (:meth:`SubjectTree.sibling_result`) and handed
        to its lone receiver in one call when it takes a batch."""
        n = len(subjects)
        tree = self.subs
        delivered = i = 0
        while i < n:
            subject = subjects[i]
            r = tree.match(subject)
            j = i + 1
            if j < n and tree.sibling_result(subject) is r:
                cut = subject.rfind(b".") + 1
                head = subject[:cut]
                while (
                    j < n and (s := subjects[j]).startswith(head) and len(s) > cut and s.find(b".", cut) < 0
                ):
                    j += 1
            k = j - i
            plain, groups = r
            if k > 1 and len(plain) == 1 and not groups:
                sub = plain[0]
                run = datas[i:j]
                if sub.client.deliver_batch(sub, subjects[i:j], None, [b""] * k, run):
                    tree.hot_hits += k - 1  # the lookups the run spared, counted as hits
                    self.in_msgs += k
                    self.in_bytes += sum(map(len, run))
                    delivered += k
                    i = j
                    continue
            self.in_msgs += 1
            self.in_bytes += len(datas[i])
            delivered += self._reply(r, subject, datas[i])
            for m in range(i + 1, j):
                delivered += self.publish_reply(subjects[m], datas[m])
            i = j
        return delivered

    def _reply(self, r: MatchResult[Subscription], subject: bytes, data: bytes) -> int:
        """Deliver a plain reply to the receivers ``r`` of its subject (inbox subjects miss the
        exact-subject cache: the match is the caller's)."""
        plain, groups = r
        if len(plain) == 1 and not groups:
            sub = plain[0]
            sub.client.deliver(sub, subject, None, 0, data, msg_tail(None, 0, data))
            return 1
        return self.publish(None, subject, None, 0, data) if plain or groups else 0

    # -- interest watches (JetStream push consumers follow their deliver subject) ----------------

    def watch_interest(self, subject: str, callback: Callable[[], None]) -> tuple[str, Callable[[], None]]:
        """Call ``callback`` (on a later loop turn) whenever a subscription that could receive
        ``subject`` comes or goes. Returns the handle for :meth:`unwatch_interest`."""
        self._watchers.setdefault(subject, []).append(callback)
        return (subject, callback)

    def unwatch_interest(self, handle: tuple[str, Callable[[], None]]) -> None:
        subject, callback = handle
        cbs = self._watchers.get(subject)
        if cbs and callback in cbs:
            cbs.remove(callback)
            if not cbs:
                del self._watchers[subject]

    # -- overlap watches (an account's stream imports follow the importer's interest) ------------

    def watch_overlap(self, pattern: str, callback: Callable[[bool], None]) -> OverlapWatch:
        """Call ``callback(True)`` (now, if already so) when the first subscription overlapping
        ``pattern`` comes, ``callback(False)`` when the last goes: this server's own (a peer
        follows its own), not the import machinery's (:attr:`Subscription.local`)."""
        watch = OverlapWatch(pattern, callback)
        self._overlaps.append(watch)
        for subject, _queue, sub in self.subs.items():
            if sub.local or sub.client.origin in PEERS:
                continue
            if subjects_overlap(subject.decode("utf-8", "replace"), pattern):
                watch.count += 1
        if watch.count:
            callback(True)
        return watch

    def unwatch_overlap(self, watch: OverlapWatch) -> None:
        if watch in self._overlaps:
            self._overlaps.remove(watch)

    def _overlap_changed(self, sub: Subscription, delta: int) -> None:
        if sub.local or sub.client.origin in PEERS:  # a peer's interest: the peer follows it
            return
        subject = sub.subject.decode("utf-8", "replace")
        for watch in list(self._overlaps):
            if subjects_overlap(subject, watch.pattern):
                before = watch.count
                watch.count = before + delta
                if before == 0 and watch.count > 0:
                    watch.callback(True)
                elif before > 0 and watch.count <= 0:
                    watch.count = 0
                    watch.callback(False)

    def _interest_changed(self, sub: Subscription) -> None:
        pattern = sub.subject.decode()
        loop = asyncio.get_running_loop()
        for subject, cbs in list(self._watchers.items()):
            if subject_matches(pattern, subject):
                for cb in cbs:
                    loop.call_soon(cb)


def near_member(members: list[Subscription]) -> Subscription:
    """A queue group's member in this cluster, at random; when it has none, the one in the
    cluster with the shortest round trip (nats-server sends such a message to one other
    cluster only, the nearest that has the group)."""
    near = [s for s in members if not s.far]
    if near:
        return near[0] if len(near) == 1 else near[random.randrange(len(near))]
    return min(members, key=_rtt)


def _rtt(sub: Subscription) -> float:
    rtt = getattr(sub.client, "rtt", 0.0)
    return rtt if rtt > 0 else float("inf")


def _route_shown(
    sub: Subscription, routed: bytes, shown: bytes, reply: bytes | None, hdr_len: int, data: bytes
) -> None:
    """A JetStream delivery (routed on an inbox or deliver subject, shown on the message's own
    subject) to a route: sent on the subject it is routed on, with the one shown after an ``@``
    in its ack reply, as nats-server sends it; the receiving server shows it again
    (:func:`split_shown`)."""
    enc_reply = (reply or b"") + b"@" + shown
    sub.client.deliver(sub, routed, enc_reply, hdr_len, data, msg_tail(enc_reply, hdr_len, data, None))


def split_shown(reply: bytes) -> tuple[bytes, bytes] | None:
    """A routed JetStream delivery's (ack reply, subject shown), or None for any other reply."""
    if not reply.startswith(b"$JS.ACK.") or b"@" not in reply:
        return None
    ack, _, shown = reply.rpartition(b"@")
    return (ack, shown) if shown else None
