"""PeerLink: what every server-to-server connection (route, gateway, leaf node) shares, a thin
asyncio Protocol over a sans-IO parser of the route family (:mod:`jetpy.protocol.route`).

Owns the session mechanics common to them: the transport and its outbound buffer (bounded
by ``max_pending``, past which, or a write blocked past ``write_deadline``, the link is closed
as a slow consumer, as nats-server does; a publisher whose read backs a link up is stalled
briefly first, :mod:`flow`), coalesced writes (once per read batch, see
:meth:`Broker.begin_batch`), PINGs and the round trip, statistics, closing, and the link as a
:class:`~jetpy.server.broker.Subscriber`: the broker hands it a message once per matching
subscription of the peer, and the link sends one frame per message: a second plain match of the
same message is dropped, a queue group picked for the peer is added to the frame's queue list
(``RMSG <acc> <subject> + <reply> <queues> <size>``, the last frame rewritten in place), so the
peer delivers each message once to its plain subscribers and once per group named. The same
message is recognised by its *tail*, which the broker builds once per message and shares
between receivers. What goes before the subject is the subscription's ``prefix`` (``RMSG $G ``
on routes and gateways; ``LMSG `` is the leaf dialect's) or ``hprefix`` with headers.

What a link says in its handshake, which ops it takes and what it does with them are its
subclass's (:mod:`route_conn`, :mod:`gateway_conn`, :mod:`leaf_conn`); the ops every link takes
alike (PING, PONG, CONNECT, INFO, ``-ERR``) are dispatched here (:meth:`PeerLink._control`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final, cast

from jetpy.protocol import ProtocolError
from jetpy.protocol import encode as enc
from jetpy.protocol.encode import append_run, msg_tail
from jetpy.protocol.errors import ERR_STALE_CONNECTION, ERR_UNKNOWN_OP
from jetpy.protocol.ops import CONNECT, ERR, INFO, PING, PONG, Op
from jetpy.protocol.route import RouteParser
from jetpy.protocol.route_wire import queue_msg
from jetpy.server.broker import Broker, Subscription
from jetpy.server.flow import WRITE_HIGH_WATER, WRITE_LOW_WATER, Flow
from jetpy.server.options import ServerOptions

__all__ = ["FIRST_PING_INTERVAL", "PeerLink"]

log = logging.getLogger("jetpy.server")

FIRST_PING_INTERVAL: Final = 1.0
"""Seconds to a link's first PING (nats-server's firstPingInterval): a link measures its round
trip at once; later PINGs follow ``ping_interval`` as a client's do."""


class PeerLink(asyncio.Protocol):
    """A connection to another server. Subclasses set :attr:`kind`, :attr:`tag` and
    :attr:`label` and implement :meth:`_handle`, :meth:`_made` and :meth:`_closed`."""

    kind = ""  # the Subscriber kind ("Router", "Gateway", "Leafnode")
    origin = 0  # the Subscriber origin (broker.FROM_*)
    tag = ""  # nats-server's log id prefix ("rid", "gid", "lid")
    label = ""  # nats-server's word in "<label> connection closed" and "<label> Ping Timer"

    def __init__(self, broker: Broker, options: ServerOptions, parser: RouteParser, cid: int) -> None:
        self.broker = broker
        self.options = options
        self.rid = cid
        self.parser = parser
        self.max_pending = options.max_pending
        self.transport: asyncio.Transport | None = None
        self.out = bytearray()
        self.dirty = False
        self.closed = False
        self.close_reason = ""
        self.host_addr = ""
        self.port = 0
        self.headers = True  # the peer takes HMSG
        self.start = time.time()
        self.last_activity = self.start
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self.rtt = 0.0
        self.pings_out = 0
        self.remote_name = ""  # the peer's server name, once known (logged when closed)
        self._ping_sent_at = float("-inf")
        self._pong_due = False
        self._last_in = time.monotonic()
        self._ping_timer: asyncio.TimerHandle | None = None
        self._write_blocked_at = 0.0
        self.flow = Flow(self)
        self._lost = False
        self._lost_event: asyncio.Event | None = None
        # the last frame written (see the module): its tail identifies the message
        self._last_tail: bytes | None = None
        self._last_at = 0
        self._last_msg: tuple[bytes, bytes, bytes, bytes | None, int, bytes] = (b"", b"", b"", None, 0, b"")
        self._last_queues: list[bytes] = []

    # -- naming ---------------------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """nats-server's ``host:port - rid:N`` that starts the link's log lines."""
        host = f"[{self.host_addr}]" if ":" in self.host_addr else self.host_addr
        return f"{host}:{self.port} - {self.tag}:{self.rid}"

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (over TLS, the transport is asyncio's TLS transport: the handshake is done)
        self.transport = cast(asyncio.Transport, transport)
        peer = self.transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.host_addr, self.port = str(peer[0]), int(peer[1])
        high = min(WRITE_HIGH_WATER, self.max_pending // 4)
        self.transport.set_write_buffer_limits(high=high, low=min(WRITE_LOW_WATER, high // 4))
        self._made()
        self.broker.flush_dirty()

    def start_pings(self) -> None:
        """Start PINGing the peer (its first PING after :data:`FIRST_PING_INTERVAL`)."""
        if self._ping_timer is None and not self.closed:
            delay = min(FIRST_PING_INTERVAL, self.options.ping_interval)
            self._ping_timer = asyncio.get_running_loop().call_later(delay, self._ping_tick)

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
        pass  # a link's reads are not stalled (its peer's PINGs and interest keep flowing)

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
                    self.last_activity = time.time()
                    self._handle(e.ops)
                if not self.closed:
                    self._parse_error(e)
                return
            if ops:
                self.last_activity = time.time()
                self._handle(ops)
        finally:
            broker.end_batch()
        backed_up = broker.backed_up
        if backed_up:  # this read's messages backed local receivers up: let them catch up
            broker.backed_up = []
            self.flow.stall(backed_up)

    def _parse_error(self, e: ProtocolError) -> None:
        if e.err == ERR_UNKNOWN_OP:
            log.error("%s - %s parser ERROR: %s", self.prefix, self.parser_name, e.detail)
            self.out += enc.err(ERR_UNKNOWN_OP)
        else:
            log.error("%s - %s", self.prefix, e.detail or e.err or "protocol violation")
            if e.err:
                self.out += enc.err(e.err)
        self.close("Protocol Violation")

    @property
    def parser_name(self) -> str:
        """The word nats-server's parser errors name the connection by."""
        return self.label

    # -- what a subclass does -------------------------------------------------------------------

    def _made(self) -> None:
        """The socket is connected: send the greeting, start timers."""
        raise NotImplementedError

    def _handle(self, ops: list[Op]) -> None:
        """Act on the ops of one read, in order (stop when :attr:`closed`)."""
        raise NotImplementedError

    def _closed(self, reason: str) -> None:
        """The link is closed (once): drop its interest, tell its owner."""
        raise NotImplementedError

    def _connect(self, raw: bytes) -> None:
        """The peer's CONNECT (its JSON)."""
        raise NotImplementedError

    def _info(self, raw: bytes) -> None:
        """The peer's INFO (its JSON)."""
        raise NotImplementedError

    def _control(self, op: Op) -> None:
        """The ops every link takes alike: PING (answered), PONG (the round trip), CONNECT and
        INFO (the subclass's), ``-ERR`` (logged as nats-server logs it; the link closes) and
        ``+OK`` (ignored)."""
        code = op[0]
        if code == PING:
            self.send(enc.PONG)
        elif code == PONG:
            self._pong()
        elif code == CONNECT:
            self._connect(op[1])
        elif code == INFO:
            self._info(op[1])
        elif code == ERR:
            self._peer_error(op[1].decode("utf-8", "replace"))

    def _peer_error(self, text: str) -> None:
        """The peer sent ``-ERR``: nats-server logs ``<Label> Error <text>`` and closes."""
        word = "Route" if self.label == "Router" else self.label
        log.error("%s - %s Error %s", self.prefix, word, text)
        self.close("Parse Error")

    def _pong(self) -> None:
        """A PONG arrived: the round trip, when a PING of ours was outstanding."""
        self.pings_out = 0
        if self._pong_due:
            self.rtt = max(time.monotonic() - self._ping_sent_at, 1e-9)
            self._pong_due = False

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
        self._last_msg = (sub.prefix, sub.hprefix, subject, reply, hdr_len, data)
        if queue is not None:
            self._last_queues = [queue]
            if hdr_len and not self.headers:
                data, hdr_len = data[hdr_len:], 0
            out += queue_msg(
                sub.hprefix if hdr_len else sub.prefix, subject, reply, self._last_queues, hdr_len, data
            )
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
        prefix, hprefix, subject, reply, hdr_len, data = self._last_msg
        if hdr_len and not self.headers:
            data, hdr_len = data[hdr_len:], 0
        del self.out[self._last_at :]
        self.out += queue_msg(hprefix if hdr_len else prefix, subject, reply, queues, hdr_len, data)

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
        replies: list[bytes] | None,
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        return False  # one by one, through deliver

    def deliver_plain_batch(self, sub: Subscription, subjects: list[bytes], datas: list[bytes]) -> None:
        """Frames for messages without reply or headers to the plain subscription ``sub``, each
        on its own subject, in one append (each goes once: no later match of it to rewrite)."""
        if self.closed:
            return
        self._last_tail = None
        prefix = sub.prefix
        self.out += b"".join(
            [b"%b%b %d\r\n%b\r\n" % (prefix, s, len(d), d) for s, d in zip(subjects, datas, strict=True)]
        )
        k = len(datas)
        self.out_msgs += k
        self.out_bytes += sum(map(len, datas))
        sub.delivered += k
        if not self.dirty:
            self.dirty = True
            self.broker.mark_dirty(self)
        if len(self.out) > self.max_pending:
            self._slow_consumer()

    def send(self, data: bytes) -> None:
        """Queue control lines (INFO, interest, PING/PONG) or a whole frame for the peer."""
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
            if t.get_write_buffer_size() > self.max_pending or blocked_for > self.options.write_deadline:
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

    def ping_interval(self) -> float:
        return self.options.ping_interval

    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        opts = self.options
        interval = self.ping_interval()
        now = time.monotonic()
        if not self.rtt or now - self._last_in >= interval or self.pings_out:
            if self.pings_out + 1 > opts.ping_max:
                log.debug("%s - Stale Client Connection - Closing", self.prefix)
                self.out += enc.err(ERR_STALE_CONNECTION)
                self.close("Stale Connection")
                return
            log.debug("%s - %s Ping Timer", self.prefix, self.label)
            self.pings_out += 1
            self._ping_sent_at = now
            self._pong_due = True
            self.send(enc.PING)
        self._ping_timer = asyncio.get_running_loop().call_later(interval, self._ping_tick)

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
        if self._ping_timer is not None:
            self._ping_timer.cancel()
            self._ping_timer = None
        self.flow.close()
        self._closed(self.close_reason)
