"""RouteConnection: one route to another server of the cluster, a thin asyncio Protocol over the
sans-IO route parser.

Owns a route's session: the handshake (the soliciting side sends CONNECT then INFO at once, as
nats-server 2.9 does; the accepting side greets with INFO and expects CONNECT first), the peer's
announced interest (:class:`~jetpy.server.route_interest.RemoteInterest` per account), the
messages it sends (delivered to this server's own subscribers only), its outbound buffer, PINGs,
and its statistics. Registration, gossip, reconnection and what the server announces are the
cluster's (:class:`RouteHost`, the protocol it owns here).

As a receiver a route is a :class:`~jetpy.server.broker.Subscriber`: the broker hands it a
message once per matching subscription of the peer, and the route sends the peer one frame per
message: a second plain match of the same message is dropped, and a queue group picked for the
peer is added to the frame's queue list (``RMSG <acc> <subject> + <reply> <queues> <size>``,
the last frame rewritten in place), so the peer delivers each message once to its plain
subscribers and once per group named. The same message is recognised by its *tail*, which the
broker builds once per message and shares between receivers.

With ``cluster { tls {} }`` the TLS handshake comes first on both ends (the cluster listens and
dials with asyncio's TLS): a route connection only exists once it is done.

Writes are coalesced as a client's are (once per read batch, see :meth:`Broker.begin_batch`);
bytes waiting for the peer are bounded by ``max_pending``, past which (or a write blocked past
``write_deadline``) the route is closed as a slow consumer, as nats-server does; a publisher whose
read backs a route up is stalled briefly first (:mod:`flow`). A peer that sends something the
parser refuses loses its route only, with nats-server's log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final, Protocol, cast

from jetpy.protocol import ProtocolError
from jetpy.protocol import encode as enc
from jetpy.protocol.encode import append_run, msg_tail
from jetpy.protocol.errors import ERR_AUTH_TIMEOUT, ERR_STALE_CONNECTION, ERR_UNKNOWN_OP
from jetpy.protocol.ops import CONNECT, ERR, INFO, PING, PONG, Op
from jetpy.protocol.route import R_MSG, R_MSGS, R_SUB, R_UNSUB, RouteParser
from jetpy.protocol.route_wire import (
    RouteConnect,
    RouteInfo,
    decode_route_connect,
    decode_route_info,
    queue_msg,
)
from jetpy.server.broker import Broker, Subscription
from jetpy.server.flow import WRITE_HIGH_WATER, WRITE_LOW_WATER, Flow
from jetpy.server.options import ServerOptions
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

FIRST_PING_INTERVAL: Final = 1.0
"""Seconds to a route's first PING (nats-server's firstPingInterval): a route measures its round
trip at once; later PINGs follow ``ping_interval`` as a client's do."""

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


class RouteConnection(asyncio.Protocol):
    kind = ROUTER

    def __init__(self, host: RouteHost, url: str = "", explicit: bool = False) -> None:
        self.host = host
        self.broker = host.broker
        opts = host.options
        self.rid = host.next_rid()
        self.url = url  # where this server dialled (credentials included); "" when accepted
        self.solicited = bool(url)
        self.explicit = explicit  # a configured route (reconnected for ever), not a gossiped one
        self.retry = False  # reconnect once closed even if gossiped (it lost a duplicate race)
        self.parser = RouteParser()
        self.max_pending = opts.max_pending
        self.transport: asyncio.Transport | None = None
        self.out = bytearray()
        self.dirty = False
        self.closed = False
        self.close_reason = ""
        self.host_addr = ""
        self.port = 0
        self.connect_received = self.solicited  # an accepted route must say CONNECT first
        self.info: RouteInfo | None = None  # the peer's first INFO
        self.remote_id = ""
        self.remote_name = ""
        self.registered = False  # the cluster took this route (not a duplicate)
        self.headers = True  # the peer takes HMSG (both sides say headers: true)
        self.interests: dict[bytes, RemoteInterest | None] = {}
        self.start = time.time()
        self.last_activity = self.start
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self.rtt = 0.0
        self.pings_out = 0
        self._ping_sent_at = float("-inf")
        self._pong_due = False
        self._last_in = time.monotonic()
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self._ping_timer: asyncio.TimerHandle | None = None
        self._write_blocked_at = 0.0
        self.flow = Flow(self)
        self._lost = False
        self._lost_event: asyncio.Event | None = None
        # the last frame written (see the module): its tail identifies the message
        self._last_tail: bytes | None = None
        self._last_at = 0
        self._last_msg: tuple[bytes, bytes, bytes | None, int, bytes] = (b"", b"", None, 0, b"")
        self._last_queues: list[bytes] = []
        # inbound: the last account's interest and the last match result's local plain members
        self._acc: bytes = b""
        self._acc_broker: Broker | None = None
        self._last_r: MatchResult[Subscription] | None = None
        self._last_plain: list[Subscription] = []

    # -- naming ---------------------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """nats-server's ``host:port - rid:N`` that starts the route's log lines."""
        host = f"[{self.host_addr}]" if ":" in self.host_addr else self.host_addr
        return f"{host}:{self.port} - rid:{self.rid}"

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (over TLS, the transport is asyncio's TLS transport: the handshake is done)
        self.transport = cast(asyncio.Transport, transport)
        peer = self.transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.host_addr, self.port = str(peer[0]), int(peer[1])
        high = min(WRITE_HIGH_WATER, self.max_pending // 4)
        self.transport.set_write_buffer_limits(high=high, low=min(WRITE_LOW_WATER, high // 4))
        host = self.host
        if self.solicited:
            log.debug("%s - Route connect msg sent", self.prefix)
            self.send(host.connect_line(self))
        self.send(host.greeting())
        log.info("%s - Route connection created", self.prefix)
        loop = asyncio.get_running_loop()
        self._handshake_timer = loop.call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout)
        opts = host.options
        if not self.solicited and opts.cluster.username:
            self._auth_timer = loop.call_later(opts.cluster.auth_timeout, self._auth_timeout)
        self._ping_timer = loop.call_later(min(FIRST_PING_INTERVAL, opts.ping_interval), self._ping_tick)
        self.broker.flush_dirty()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._lost_event is not None:
            self._lost_event.set()
        self._cleanup(self.close_reason or ("Client Closed" if exc is None else "Read Error"))

    async def wait_closed(self) -> None:
        if self._lost or self.transport is None:
            return
        if self._lost_event is None:
            self._lost_event = asyncio.Event()
        await self._lost_event.wait()

    def pause_writing(self) -> None:
        self._write_blocked_at = time.monotonic()

    def resume_writing(self) -> None:
        self._write_blocked_at = 0.0
        self.flow.drained()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed:
            pass  # (probe)

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_in = time.monotonic()
        broker = self.broker
        broker.begin_batch()
        try:
            try:
                ops = self.parser.feed(data)
            except ProtocolError as e:
                if e.ops:
                    self._handle(e.ops)
                if not self.closed:
                    self._parse_error(e)
                return
            if ops:
                self._handle(ops)
        finally:
            broker.end_batch()
        backed_up = broker.backed_up
        if backed_up:  # this read's messages backed local receivers up: let them catch up
            broker.backed_up = []
            self.flow.stall(backed_up)

    def _parse_error(self, e: ProtocolError) -> None:
        if e.err == ERR_UNKNOWN_OP:
            log.error("%s - Router parser ERROR: %s", self.prefix, e.detail)
            self.out += enc.err(ERR_UNKNOWN_OP)
        else:
            log.error("%s - %s", self.prefix, e.detail or e.err or "protocol violation")
            if e.err:
                self.out += enc.err(e.err)
        self.close("Protocol Violation")

    # -- ops ------------------------------------------------------------------------------------

    def _handle(self, ops: list[Op]) -> None:
        self.last_activity = time.time()
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
            elif code == PING:
                self.send(enc.PONG)
            elif code == PONG:
                self.pings_out = 0
                if self._pong_due:
                    self.rtt = max(time.monotonic() - self._ping_sent_at, 1e-9)
                    self._pong_due = False
            elif code == CONNECT:
                self._connect(op[1])
            elif code == INFO:
                self._info(op[1])
            elif code == ERR:
                text = op[1].decode("utf-8", "replace")
                log.error("%s - Route Error %s", self.prefix, text)
                self.close("Parse Error")
            # +OK is ignored

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

    # -- output ---------------------------------------------------------------------------------

    def deliver(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None:
        if self.closed:
            return
        queue = sub.queue
        if tail is self._last_tail:  # the same message again: one frame per message
            if queue is not None:
                self._add_queue(queue)
            return
        out = self.out
        self._last_tail = tail
        self._last_at = len(out)
        self._last_msg = (sub.sid, subject, reply, hdr_len, data)
        if queue is not None:
            self._last_queues = [queue]
            if hdr_len and not self.headers:
                data, hdr_len = data[hdr_len:], 0
            out += queue_msg(sub.sid, subject, reply, self._last_queues, hdr_len, data)
        else:
            self._last_queues = []
            if not hdr_len:
                out += sub.prefix
                out += subject
                out += b" "
                out += tail
            elif self.headers:
                out += sub.hprefix
                out += subject
                out += b" "
                out += tail
            else:  # headers are stripped for a peer that cannot take them
                out += sub.prefix + subject + b" " + msg_tail(reply, 0, data[hdr_len:])
        self.out_msgs += 1
        self.out_bytes += len(data)
        sub.delivered += 1
        if not self.dirty:
            self.dirty = True
            self.broker.mark_dirty(self)
        if len(out) > self.max_pending:
            self._slow_consumer()

    def _add_queue(self, queue: bytes) -> None:
        """Name one more queue group in the last frame (rewritten in place)."""
        queues = self._last_queues
        if queue in queues:
            return
        queues.append(queue)
        account, subject, reply, hdr_len, data = self._last_msg
        if hdr_len and not self.headers:
            data, hdr_len = data[hdr_len:], 0
        del self.out[self._last_at :]
        self.out += queue_msg(account, subject, reply, queues, hdr_len, data)

    def deliver_run(self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]) -> None:
        if self.closed:
            return
        self._last_tail = None
        append_run(self.out, sub.prefix + subject + b" ", tails)
        self.out_msgs += len(tails)
        self.out_bytes += sum(map(len, datas))
        sub.delivered += len(tails)
        if not self.dirty:
            self.dirty = True
            self.broker.mark_dirty(self)
        if len(self.out) > self.max_pending:
            self._slow_consumer()

    def deliver_batch(
        self,
        sub: Subscription,
        subjects: list[bytes],
        replies: list[bytes],
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        return False  # one by one, through deliver

    def send(self, data: bytes) -> None:
        """Queue control lines (INFO, RS+/RS-, PING/PONG) for the peer."""
        if self.closed:
            return
        self.out += data
        self._last_tail = None
        if not self.dirty:
            self.dirty = True
            self.broker.mark_dirty(self)

    def flush(self) -> None:
        self.dirty = False
        self._last_tail = None
        t = self.transport
        if t is None or self.closed or not self.out:
            return
        out = self.out
        self.out = bytearray()
        t.write(out)
        if self._write_blocked_at:
            blocked_for = time.monotonic() - self._write_blocked_at
            if t.get_write_buffer_size() > self.max_pending or blocked_for > self.host.options.write_deadline:
                self._slow_consumer()
            else:
                self.broker.backed_up.append(self.flow)

    def pending_bytes(self) -> int:
        pending = len(self.out)
        if self.transport is not None:
            try:
                pending += self.transport.get_write_buffer_size()
            except (AttributeError, RuntimeError):
                pass
        return pending

    def _slow_consumer(self) -> None:
        log.warning("%s - Slow Consumer Detected: MaxPending of %d Exceeded", self.prefix, self.max_pending)
        self.out = bytearray()
        self.close("Slow Consumer (Pending Bytes)", abort=True)

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

    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        opts = self.host.options
        now = time.monotonic()
        if not self.rtt or now - self._last_in >= opts.ping_interval or self.pings_out:
            if self.pings_out + 1 > opts.ping_max:
                log.debug("%s - Stale Client Connection - Closing", self.prefix)
                self.out += enc.err(ERR_STALE_CONNECTION)
                self.close("Stale Connection")
                return
            log.debug("%s - Router Ping Timer", self.prefix)
            self.pings_out += 1
            self._ping_sent_at = now
            self._pong_due = True
            self.send(enc.PING)
        self._ping_timer = asyncio.get_running_loop().call_later(opts.ping_interval, self._ping_tick)

    # -- closing --------------------------------------------------------------------------------

    def close(self, reason: str, abort: bool = False) -> None:
        if self.closed:
            return
        self.close_reason = reason
        t = self.transport
        if t is not None:
            if self.out and not abort:
                t.write(self.out)
            self.out = bytearray()
            if abort:
                t.abort()
            else:
                t.close()
        self._cleanup(reason)

    def _cleanup(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = self.close_reason or reason
        for timer in (self._handshake_timer, self._auth_timer, self._ping_timer):
            if timer is not None:
                timer.cancel()
        self._handshake_timer = self._auth_timer = self._ping_timer = None
        for interest in self.interests.values():
            if interest is not None:
                interest.clear()
        self.interests.clear()
        self.flow.close()
        remote = f" - Remote: {self.remote_name}" if self.remote_name else ""
        log.info("%s - Router connection closed: %s%s", self.prefix, self.close_reason, remote)
        self.host.route_closed(self, self.close_reason)

    def subscription_count(self) -> int:
        return sum(i.count() for i in self.interests.values() if i is not None)
