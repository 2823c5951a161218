"""ClientConnection: one client socket, a thin asyncio Protocol over the sans-IO parser.

Owns a client's session state (CONNECT options, auth, subscriptions, ping/pong liveness) and its
outbound buffer. Parsing is the protocol package's; routing is the broker's. Per read, every
complete op is parsed and handled in one loop; output for this client is appended to one buffer
and written once per event-loop turn (see Broker.mark_dirty).

Back-pressure: bytes waiting for a client (our buffer plus the transport's) are bounded by
``max_pending``; past it the client is a slow consumer and is disconnected, so one slow reader
can never grow the server's memory without bound. A write blocked for longer than
``write_deadline`` is treated the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from jetpy.protocol import Parser, ProtocolError
from jetpy.protocol import encode as enc
from jetpy.protocol.errors import (
    ERR_AUTH_TIMEOUT,
    ERR_AUTH_VIOLATION,
    ERR_INVALID_PROTOCOL,
    ERR_INVALID_PUB_SUBJECT,
    ERR_INVALID_SUBJECT,
    ERR_NO_RESPONDERS_HEADERS,
    ERR_STALE_CONNECTION,
)
from jetpy.protocol.ops import CONNECT, ERR, PING, PONG, PUB, SUB, UNSUB
from jetpy.server.broker import Subscription
from jetpy.subjects import valid_subject_bytes

if TYPE_CHECKING:
    from jetpy.server.app import Server

__all__ = ["ClientConnection"]

log = logging.getLogger("jetpy.server")

NO_RESPONDERS = b"NATS/1.0 503\r\n\r\n"
CLIENT_PROTO_INFO = 1  # the highest client protocol version (async INFO) we speak


class ClientConnection(asyncio.Protocol):
    kind = "Client"

    def __init__(self, server: Server) -> None:
        self.server = server
        opts = server.options
        self.broker = server.broker
        self.parser = Parser(opts.max_control_line, opts.max_payload)
        self.max_pending = opts.max_pending
        self.cid = server.next_cid()
        self.transport: asyncio.Transport | None = None
        self.out = bytearray()
        self.dirty = False
        self.closed = False
        self.close_reason = ""
        # CONNECT options: nats-server's defaults before CONNECT are verbose and pedantic
        self.verbose = True
        self.pedantic = True
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.protocol = 0
        self.name = ""
        self.lang = ""
        self.version = ""
        self.user = ""
        self.connected = False  # CONNECT processed and authorized
        self.auth_required = server.auth.required
        self.subs: dict[bytes, Subscription] = {}
        # stats
        self.start = time.time()
        self.stop_time = 0.0  # set when the server forgets the connection (for /connz closed)
        self.last_activity = self.start
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self.host = ""
        self.port = 0
        self.rtt = 0.0
        self._ping_sent_at = 0.0
        self.pings_out = 0
        self._ping_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self._write_blocked_at = 0.0

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        peer = self.transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.host, self.port = str(peer[0]), int(peer[1])
        server = self.server
        if not server.register(self):
            self.out += server.info_for(self)
            self.close_with_error("maximum connections exceeded")
            return
        self.send(server.info_for(self))
        loop = asyncio.get_running_loop()
        if self.auth_required:
            self._auth_timer = loop.call_later(server.options.auth_timeout, self._auth_timeout)
        if server.options.ping_interval > 0:
            self._ping_timer = loop.call_later(server.options.ping_interval, self._ping_tick)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cleanup(self.close_reason or ("Client Closed" if exc is None else "Read Error"))

    def pause_writing(self) -> None:
        self._write_blocked_at = time.monotonic()

    def resume_writing(self) -> None:
        self._write_blocked_at = 0.0

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            ops = self.parser.feed(data)
        except ProtocolError as e:
            # ops parsed before the error in this read are lost with the connection, as in
            # nats-server, which also stops at the first violation
            log.debug("cid %d: protocol error: %s", self.cid, e)
            if e.err:
                self.close_with_error(e.err, reason="Protocol Violation")
            else:
                self.close("Protocol Violation")
            return
        if not ops:
            return
        self.last_activity = time.time()
        broker = self.broker
        for op in ops:
            code = op[0]
            if code == PUB:
                if not self.connected and self.auth_required:
                    self.close_with_error(ERR_AUTH_VIOLATION, reason="Authentication Failure")
                    return
                _, subject, reply, hdr_len, payload = op
                if hdr_len and not self.headers:
                    # nats-server closes a client that sends HPUB without negotiating headers
                    self.close("Protocol Violation")
                    return
                self.in_msgs += 1
                self.in_bytes += len(payload)
                if self.pedantic and not valid_subject_bytes(subject, allow_wildcards=False):
                    self.send(enc.err(ERR_INVALID_PUB_SUBJECT))
                    continue
                if self.verbose:
                    self.send(enc.OK)
                if (
                    broker.publish(self, subject, reply, hdr_len, payload, self.echo) == 0
                    and reply is not None
                    and self.no_responders
                ):
                    self._no_responders(reply)
                if self.closed:
                    return
            elif code == PING:
                if not self.connected and self.auth_required:
                    self.close_with_error(ERR_AUTH_VIOLATION, reason="Authentication Failure")
                    return
                self.send(enc.PONG)
            elif code == PONG:
                self.pings_out = 0
                if self._ping_sent_at:
                    self.rtt = time.monotonic() - self._ping_sent_at
                    self._ping_sent_at = 0.0
            elif code == SUB:
                if not self.connected and self.auth_required:
                    self.close_with_error(ERR_AUTH_VIOLATION, reason="Authentication Failure")
                    return
                self._sub(op[1], op[2], op[3])
            elif code == UNSUB:
                if not self.connected and self.auth_required:
                    self.close_with_error(ERR_AUTH_VIOLATION, reason="Authentication Failure")
                    return
                self._unsub(op[1], op[2])
            elif code == CONNECT:
                if not self._connect(op[1]):
                    return
            elif code == ERR:
                self.close("Client Closed")
                return
            # INFO and +OK from a client are ignored, as nats-server does

    # -- ops ------------------------------------------------------------------------------------

    def _connect(self, raw: bytes) -> bool:
        try:
            opts: Any = json.loads(raw)
        except ValueError:
            self.close("Protocol Violation")
            return False
        if not isinstance(opts, dict):
            self.close("Protocol Violation")
            return False
        self.verbose = bool(opts.get("verbose", self.verbose))
        self.pedantic = bool(opts.get("pedantic", self.pedantic))
        self.echo = bool(opts.get("echo", True))
        self.headers = bool(opts.get("headers", False))
        self.no_responders = bool(opts.get("no_responders", False))
        proto = opts.get("protocol", 0)
        self.protocol = proto if isinstance(proto, int) else 0
        for attr in ("name", "lang", "version"):
            val = opts.get(attr)
            if isinstance(val, str):
                setattr(self, attr, val)
        if self.protocol > CLIENT_PROTO_INFO or self.protocol < 0:
            self.close_with_error(ERR_INVALID_PROTOCOL, reason="Protocol Violation")
            return False
        if self.no_responders and not self.headers:
            self.close_with_error(ERR_NO_RESPONDERS_HEADERS, reason="Protocol Violation")
            return False
        if self.auth_required:
            user = self.server.auth.authenticate(opts)
            if user is None:
                self.server.auth_failures += 1
                self.close_with_error(ERR_AUTH_VIOLATION, reason="Authentication Failure")
                return False
            self.user = user
            if self._auth_timer is not None:
                self._auth_timer.cancel()
                self._auth_timer = None
        self.connected = True
        if self.verbose:
            self.send(enc.OK)
        return True

    def _sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        if not valid_subject_bytes(subject) or (queue is not None and not valid_subject_bytes(queue, allow_wildcards=False)):
            self.send(enc.err(ERR_INVALID_SUBJECT))
            return
        if sid in self.subs:
            # a duplicate sid is ignored by nats-server (the first subscription stays)
            if self.verbose:
                self.send(enc.OK)
            return
        sub = Subscription(self, subject, queue, sid)
        self.subs[sid] = sub
        self.broker.add(sub)
        if self.verbose:
            self.send(enc.OK)

    def _unsub(self, sid: bytes, max_msgs: int) -> None:
        sub = self.subs.get(sid)
        if sub is not None:
            if max_msgs > 0 and sub.delivered < max_msgs:
                sub.max_msgs = max_msgs
            else:
                del self.subs[sid]
                self.broker.remove(sub)
        if self.verbose:
            self.send(enc.OK)

    def _no_responders(self, reply: bytes) -> None:
        plain, groups = self.broker.subs.match(reply)
        for sub in plain:
            if sub.client is self:
                self.deliver(sub, reply, None, len(NO_RESPONDERS), NO_RESPONDERS)
                return
        for group in groups:
            for sub in group:
                if sub.client is self:
                    self.deliver(sub, reply, None, len(NO_RESPONDERS), NO_RESPONDERS)
                    return

    # -- output ---------------------------------------------------------------------------------

    def deliver(self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if self.closed:
            return
        out = self.out
        if hdr_len:
            if self.headers:
                if reply:
                    out += b"HMSG %b %b %b %d %d\r\n" % (subject, sub.sid, reply, hdr_len, len(data))
                else:
                    out += b"HMSG %b %b %d %d\r\n" % (subject, sub.sid, hdr_len, len(data))
            else:
                data = data[hdr_len:]  # headers are stripped for clients that cannot parse them
                if reply:
                    out += b"MSG %b %b %b %d\r\n" % (subject, sub.sid, reply, len(data))
                else:
                    out += b"MSG %b %b %d\r\n" % (subject, sub.sid, len(data))
        elif reply:
            out += b"MSG %b %b %b %d\r\n" % (subject, sub.sid, reply, len(data))
        else:
            out += b"MSG %b %b %d\r\n" % (subject, sub.sid, len(data))
        out += data
        out += b"\r\n"
        self.out_msgs += 1
        self.out_bytes += len(data)
        if not self.dirty:
            self.dirty = True
            self.broker.mark_dirty(self)
        sub.delivered += 1
        if sub.max_msgs and sub.delivered >= sub.max_msgs:
            self.subs.pop(sub.sid, None)
            self.broker.remove(sub)
        if len(out) > self.max_pending:
            self._slow_consumer()

    def send(self, data: bytes) -> None:
        self.out += data
        if not self.dirty and not self.closed:
            self.dirty = True
            self.broker.mark_dirty(self)

    def flush(self) -> None:
        self.dirty = False
        t = self.transport
        if t is None or self.closed or not self.out:
            return
        out = self.out
        self.out = bytearray()
        t.write(out)
        pending = t.get_write_buffer_size()
        if pending > self.max_pending or (self._write_blocked_at and time.monotonic() - self._write_blocked_at > self.server.options.write_deadline):
            self._slow_consumer()

    def _slow_consumer(self) -> None:
        self.server.slow_consumers += 1
        log.warning("cid %d: slow consumer detected, closing (pending over %d bytes)", self.cid, self.max_pending)
        self.out = bytearray()
        self.close("Slow Consumer (Pending Bytes)", abort=True)

    # -- liveness -------------------------------------------------------------------------------

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.connected and not self.closed:
            self.close_with_error(ERR_AUTH_TIMEOUT, reason="Authentication Timeout")

    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        opts = self.server.options
        if self.pings_out >= opts.ping_max:
            self.close_with_error(ERR_STALE_CONNECTION, reason="Stale Connection")
            return
        self.pings_out += 1
        self._ping_sent_at = time.monotonic()
        self.send(enc.PING)
        self._ping_timer = asyncio.get_running_loop().call_later(opts.ping_interval, self._ping_tick)

    # -- closing --------------------------------------------------------------------------------

    def close_with_error(self, err: str, reason: str = "") -> None:
        self.out += enc.err(err)
        self.close(reason or err)

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
        if self.closed and not self.subs:
            return
        self.closed = True
        for timer in (self._ping_timer, self._auth_timer):
            if timer is not None:
                timer.cancel()
        self._ping_timer = self._auth_timer = None
        for sub in self.subs.values():
            self.broker.remove(sub)
        self.subs.clear()
        self.server.unregister(self, reason)
