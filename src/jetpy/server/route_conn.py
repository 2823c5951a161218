"""RouteConnection: one route to another server of the cluster, a
:class:`~jetpy.server.peer_link.PeerLink` over the sans-IO route parser.

Owns a route's session: the handshake (the soliciting side sends CONNECT then INFO at once, as
nats-server 2.9 does; the accepting side greets with INFO and expects CONNECT first), the peer's
announced interest (:class:`~jetpy.server.route_interest.RemoteInterest` per account) and the
messages it sends (delivered to this server's own subscribers only). Registration, gossip,
reconnection and what the server announces are the cluster's (:class:`RouteHost`, the protocol
it owns here); the outbound buffer, frames, PINGs, slow consumers and statistics are the
:class:`PeerLink`'s.

With ``cluster { tls {} }`` the TLS handshake comes first on both ends (the cluster listens and
dials with asyncio's TLS): a route connection only exists once it is done. A peer that sends
something the parser refuses loses its route only, with nats-server's log line.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, Protocol

from jetpy.protocol import ProtocolError
from jetpy.protocol import encode as enc
from jetpy.protocol.errors import ERR_AUTH_TIMEOUT, ERR_UNKNOWN_OP
from jetpy.protocol.ops import Op
from jetpy.protocol.route import R_MSG, R_MSGS, R_REQS, R_SIBS, R_SUB, R_UNSUB, RouteParser
from jetpy.protocol.route_wire import RouteConnect, RouteInfo, decode_route_connect, decode_route_info
from jetpy.server.broker import FROM_ROUTE, Broker, Subscription, split_shown
from jetpy.server.options import ServerOptions
from jetpy.server.peer_link import FIRST_PING_INTERVAL, PeerLink
from jetpy.server.route_interest import (
    ROUTER,
    RemoteInterest,
    deliver_routed,
    deliver_routed_run,
    local_members,
)
from jetpy.sublist import MatchResult

__all__ = ["FIRST_PING_INTERVAL", "HANDSHAKE_TIMEOUT", "RouteConnection", "RouteHost"]

log = logging.getLogger("jetpy.server")

HANDSHAKE_TIMEOUT: Final = 10.0
"""Seconds a route connection has to complete its handshake (CONNECT and INFO): a peer that has
not by then is no server of this cluster, and a socket is not held for it."""


class RouteHost(Protocol):
    """What a route needs of the cluster it belongs to."""

    options: ServerOptions
    server_id: str
    broker: Broker  # the broker whose read batches a route's reads join

    def next_rid(self) -> int: ...

    def greeting(self) -> bytes:
        """The INFO a route is greeted with."""
        ...

    def connect_line(self, route: RouteConnection) -> bytes:
        """The CONNECT a solicited route sends (with its URL's credentials)."""
        ...

    def check_connect(self, route: RouteConnection, connect: RouteConnect) -> bool:
        """Take a peer's CONNECT; False when the route was refused (and closed)."""
        ...

    def process_info(self, route: RouteConnection, info: RouteInfo, raw: bytes) -> None:
        """A peer's INFO (``raw``: its JSON): register the route, or act on gossip or an update."""
        ...

    def interest(self, route: RouteConnection, account: bytes) -> RemoteInterest | None:
        """The route's interest in ``account``; None (logged) for an account not served here."""
        ...

    def route_closed(self, route: RouteConnection, reason: str) -> None: ...


class RouteConnection(PeerLink):
    kind = ROUTER
    origin = FROM_ROUTE
    tag = "rid"
    label = "Router"

    def __init__(self, host: RouteHost, url: str = "", explicit: bool = False) -> None:
        super().__init__(host.broker, host.options, RouteParser(), host.next_rid())
        self.host = host
        self.url = url  # where this server dialled (credentials included); "" when accepted
        self.solicited = bool(url)
        self.explicit = explicit  # a configured route (reconnected for ever), not a gossiped one
        self.retry = False  # reconnect once closed even if gossiped (it lost a duplicate race)
        self.connect_received = self.solicited  # an accepted route must say CONNECT first
        self.info: RouteInfo | None = None  # the peer's first INFO
        self.remote_id = ""
        self.registered = False  # the cluster took this route (not a duplicate)
        self.interests: dict[bytes, RemoteInterest | None] = {}
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        # inbound: the last account's interest and the last match result's local plain members
        self._acc: bytes = b""
        self._acc_broker: Broker | None = None
        self._last_r: MatchResult[Subscription] | None = None
        self._last_plain: list[Subscription] = []

    def _made(self) -> None:
        host = self.host
        if self.solicited:
            log.debug("%s - Route connect msg sent", self.prefix)
            self.send(host.connect_line(self))
        self.send(host.greeting())
        log.info("%s - Route connection created", self.prefix)
        loop = asyncio.get_running_loop()
        self._handshake_timer = loop.call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout)
        opts = self.options
        if not self.solicited and opts.cluster.username:
            self._auth_timer = loop.call_later(opts.cluster.auth_timeout, self._auth_timeout)
        self.start_pings()

    # -- ops ------------------------------------------------------------------------------------

    def _handle(self, ops: list[Op]) -> None:
        for op in ops:
            if self.closed:
                return
            code = op[0]
            if code == R_MSGS:
                if not self._ready():
                    return
                _, account, subject, datas, sizes = op
                self.in_msgs += len(datas)
                self.in_bytes += sum(map(len, datas))
                if account != self._acc and not self._account(account):
                    continue
                deliver_routed_run(self._plain(subject), subject, datas, sizes)
            elif code == R_SIBS:
                if not self._ready():
                    return
                _, account, subjects, datas, sizes = op
                self.in_msgs += len(datas)
                self.in_bytes += sum(map(len, datas))
                if account != self._acc and not self._account(account):
                    continue
                self._siblings(subjects, datas, sizes)
            elif code == R_REQS:
                if not self._ready():
                    return
                _, account, subject, replies, datas, sizes = op
                self.in_msgs += len(datas)
                self.in_bytes += sum(map(len, datas))
                if account != self._acc and not self._account(account):
                    continue
                self._requests(subject, replies, datas, sizes)
            elif code == R_MSG:
                if not self._ready():
                    return
                _, account, subject, reply, queues, hdr_len, data, sizes = op
                self.in_msgs += 1
                self.in_bytes += len(data)
                if account != self._acc and not self._account(account):
                    continue
                plain = self._plain(subject)
                assert self._last_r is not None
                if hdr_len and not self.headers:
                    continue  # (a peer that said it takes no headers sends none either)
                if reply is not None and reply[:1] == b"$" and (js := split_shown(reply)) is not None:
                    reply, subject = js  # a JetStream delivery: shown on the message's subject
                deliver_routed(
                    self._last_r,
                    plain,
                    self,
                    subject,
                    reply,
                    hdr_len,
                    data,
                    sizes,
                    queues,
                )
            elif code == R_SUB:
                if not self._ready():
                    return
                interest = self._interest(op[1])
                if interest is not None:
                    interest.add(op[2], op[3], op[4] if op[3] is not None else 0)
            elif code == R_UNSUB:
                if not self._ready():
                    return
                interest = self._interest(op[1])
                if interest is not None:
                    interest.remove(op[2], op[3])
            else:
                self._control(op)

    def _ready(self) -> bool:
        """Interest and messages only come from a registered route (after its INFO)."""
        if self.registered:
            return True
        log.error("%s - route sent interest or messages before its INFO", self.prefix)
        self.out += enc.err("Authorization Violation" if not self.connect_received else ERR_UNKNOWN_OP)
        self.close("Protocol Violation")
        return False

    def _account(self, account: bytes) -> bool:
        """Switch the inbound path to ``account``; False if it is not served here."""
        interest = self._interest(account)
        if interest is None:
            return False
        self._acc = account
        self._acc_broker = interest.broker
        self._last_r = None
        return True

    def _plain(self, subject: bytes) -> list[Subscription]:
        """The local plain members matching ``subject`` in the current account (memoised on the
        match result, which the broker's cache returns again while interest is unchanged)."""
        broker = self._acc_broker
        assert broker is not None
        r = broker.subs.match(subject)
        if r is not self._last_r:
            self._last_r = r
            self._last_plain = local_members(r[0])
        return self._last_plain

    def _siblings(self, subjects: list[bytes], datas: list[bytes], sizes: list[bytes]) -> None:
        """An ``R_SIBS`` run in the current account: matched once when every subject of the run
        is sure to get the first one's result (:meth:`SubjectTree.sibling_result`), else message
        by message."""
        plain = self._plain(subjects[0])
        r = self._last_r
        assert r is not None
        tree = self._acc_broker.subs if self._acc_broker is not None else None
        if tree is not None and tree.sibling_result(subjects[0]) is r:
            tree.hot_hits += len(subjects) - 1  # the lookups the run spared, counted as hits
            deliver_routed_run(plain, subjects, datas, sizes)
            return
        for subject, data, sz in zip(subjects, datas, sizes, strict=True):
            plain = self._plain(subject)
            assert self._last_r is not None
            deliver_routed(self._last_r, plain, self, subject, None, 0, data, sz, None)

    def _requests(self, subject: bytes, replies: list[bytes], datas: list[bytes], sizes: list[bytes]) -> None:
        """An ``R_REQS`` run in the current account: as many R_MSGs, the subject matched again
        only when a subscription came or went meanwhile (a receiver's doing)."""
        plain = self._plain(subject)
        tree = self._acc_broker.subs if self._acc_broker is not None else None
        assert tree is not None
        changes = tree.inserts + tree.removes
        for reply, data, sz in zip(replies, datas, sizes, strict=True):
            if tree.inserts + tree.removes != changes:
                plain = self._plain(subject)
                changes = tree.inserts + tree.removes
            assert self._last_r is not None
            if reply[:1] == b"$" and (js := split_shown(reply)) is not None:
                deliver_routed(self._last_r, plain, self, js[1], js[0], 0, data, sz, None)
            else:
                deliver_routed(self._last_r, plain, self, subject, reply, 0, data, sz, None)
            if self.closed:
                return

    def deliver_batch(
        self,
        sub: Subscription,
        subjects: list[bytes],
        replies: list[bytes] | None,
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        """Plain replies (no reply of their own, no headers) to a plain subscription go in one
        call (a group commit's PubAcks to a requester on the peer); anything else one by one,
        through :meth:`deliver`."""
        if replies is not None or sub.queue is not None or any(hdrs):
            return False
        self.deliver_plain_batch(sub, subjects, datas)
        return True

    def _interest(self, account: bytes) -> RemoteInterest | None:
        try:
            return self.interests[account]
        except KeyError:
            interest = self.interests[account] = self.host.interest(self, account)
            return interest

    def _connect(self, raw: bytes) -> None:
        if self.solicited or self.connect_received:
            return  # nats-server takes a repeated CONNECT as nothing new on a route
        try:
            connect = decode_route_connect(raw)
        except ProtocolError as e:
            log.error("%s - %s", self.prefix, e.detail or "invalid CONNECT")
            self.close("Protocol Violation")
            return
        self.connect_received = True
        self.remote_id = connect.name
        self.headers = connect.headers
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        self.host.check_connect(self, connect)

    def _info(self, raw: bytes) -> None:
        if not self.connect_received:
            log.error("%s - route sent INFO before CONNECT", self.prefix)
            self.out += enc.err("Authorization Violation")
            self.close("Authentication Failure")
            return
        try:
            info = decode_route_info(raw)
        except ProtocolError as e:
            log.error("%s - %s", self.prefix, e.detail or "invalid INFO")
            self.close("Parse Error")
            return
        self.host.process_info(self, info, raw)

    def registered_as(self, info: RouteInfo) -> None:
        """The cluster registered this route for the server ``info`` describes."""
        self.info = info
        self.remote_id = info.server_id
        self.remote_name = info.server_name
        self.registered = True
        if self.solicited:
            self.headers = info.headers
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    # -- liveness -------------------------------------------------------------------------------

    def _handshake_timeout(self) -> None:
        if not self.registered and not self.closed:
            log.error("%s - route handshake not completed in %gs", self.prefix, HANDSHAKE_TIMEOUT)
            self.close("Stale Connection")

    def _auth_timeout(self) -> None:
        if not self.connect_received and not self.closed:
            log.error("%s - %s", self.prefix, ERR_AUTH_TIMEOUT)
            self.out += enc.err(ERR_AUTH_TIMEOUT)
            self.close("Authentication Timeout")

    # -- closing --------------------------------------------------------------------------------

    def _closed(self, reason: str) -> None:
        for timer in (self._handshake_timer, self._auth_timer):
            if timer is not None:
                timer.cancel()
        self._handshake_timer = self._auth_timer = None
        for interest in self.interests.values():
            if interest is not None:
                interest.clear()
        self.interests.clear()
        remote = f" - Remote: {self.remote_name}" if self.remote_name else ""
        log.info("%s - Router connection closed: %s%s", self.prefix, reason, remote)
        self.host.route_closed(self, reason)

    def subscription_count(self) -> int:
        return sum(i.count() for i in self.interests.values() if i is not None)
