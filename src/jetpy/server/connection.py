"""ClientConnection: one client socket, a thin asyncio Protocol over the sans-IO parser.

Owns a client's session state (CONNECT options, auth, subscriptions, ping/pong liveness) and its
outbound buffer. Parsing and framing are the protocol package's (``protocol.encode`` spells every
MSG/HMSG frame); routing is the broker's, the broker of the client's account (the global
account's until it has logged in; its publishes go through the account's mappings, if any). Knows its server only as a :class:`ConnectionHost`,
the protocol it owns here, never the server class. Per read, every complete op is parsed and
handled in one loop; output is appended to each receiver's buffer and written once at the end
of the read (see :meth:`Broker.begin_batch`).

Errors follow nats-server: the ops that precede a protocol violation in a read are acted on,
then the connection closes, after ``-ERR '<text>'`` when nats-server sends one (pending output
is written first, as nats-server's writer flushes before closing).

Back-pressure: bytes waiting for a client (our buffer plus the transport's) are bounded by
``max_pending``; past it the client is a slow consumer and is disconnected, so one slow reader
can never grow the server's memory without bound. A write blocked for longer than
``write_deadline`` is treated the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final, Protocol, cast

from jetpy.protocol import Parser, ProtocolError
from jetpy.protocol import encode as enc
from jetpy.protocol.connect import DEFAULT_CONNECT, ConnectOptions
from jetpy.protocol.encode import append_run, msg, msg_batch, msg_prefix, msg_tail
from jetpy.protocol.errors import (
    ERR_AUTH_REVOKED,
    ERR_AUTH_TIMEOUT,
    ERR_AUTH_VIOLATION,
    ERR_INVALID_PROTOCOL,
    ERR_INVALID_SUBJECT,
    ERR_MAX_CONNECTIONS,
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_MAX_SUBSCRIPTIONS,
    ERR_NO_RESPONDERS_HEADERS,
    ERR_STALE_CONNECTION,
    ERR_UNKNOWN_OP,
)
from jetpy.protocol.headers import encode_headers
from jetpy.protocol.ops import CONNECT, ERR, PING, PONG, PUB, PUBR, PUBS, SUB, UNSUB, Op
from jetpy.server.accounts import Account, Accounts
from jetpy.server.auth import ANONYMOUS, Authenticator, CertNames, Identity, new_nonce
from jetpy.server.broker import FROM_CLIENT, Broker, Subscription
from jetpy.server.client_layers import ClientLayers
from jetpy.server.client_limits import PAYLOAD_VIOLATION, ClientLimits
from jetpy.server.client_log import ClientIdentity, ClientLog, client_prefix
from jetpy.server.client_permissions import ClientPermissions
from jetpy.server.client_runs import INVALID_PUB_SUBJECT, ClientRuns
from jetpy.server.flow import WRITE_HIGH_WATER, WRITE_LOW_WATER, Flow
from jetpy.server.gateway_interest import ReplyMap
from jetpy.server.options import ServerOptions
from jetpy.server.permissions import (
    SYS_QUEUE,
    Permissions,
    Replies,
    pub_violation,
    reply_violation,
    reserved_reply,
    sub_violation,
    tokens_violation,
)
from jetpy.server.stack import Listener, Stack
from jetpy.server.trace import trace_in, trace_out
from jetpy.subjects import valid_literal_bytes, valid_sub_bytes

__all__ = ["ClientConnection", "ConnectionHost"]

log = logging.getLogger("jetpy.server")

NO_RESPONDERS_STATUS: Final = 503
NO_RESPONDERS: Final = encode_headers([], NO_RESPONDERS_STATUS)  # nats-server 2.9's: no description
_NO_RESPONDERS_TAIL: Final = msg_tail(None, len(NO_RESPONDERS), NO_RESPONDERS)
CLIENT_PROTO_ZERO: Final = 0  # the original protocol
CLIENT_PROTO_INFO: Final = 1  # the highest client protocol version (async INFO) we speak
RTT_MEASUREMENT_INTERVAL: Final = 3600.0  # nats-server re-measures a busy client's RTT hourly

_MAX_SUBS: Final = enc.err(ERR_MAX_SUBSCRIPTIONS)
_INVALID_SUBJECT: Final = enc.err(ERR_INVALID_SUBJECT)

# nats-server's closed-connection reasons (/connz?state=closed) for each protocol error
_CLOSE_REASONS: Final[dict[str | None, str]] = {
    None: "Protocol Violation",
    ERR_UNKNOWN_OP: "Protocol Violation",
    ERR_MAX_CONTROL_LINE: "Maximum Control Line Exceeded",
    ERR_MAX_PAYLOAD: "Maximum Message Payload Exceeded",
    ERR_AUTH_VIOLATION: "Authentication Failure",
}


class ConnectionHost(Protocol):
    """What a client connection needs of the server that accepted it."""

    options: ServerOptions
    accounts: Accounts
    auth: Authenticator
    auth_failures: int  # CONNECTs refused, for /varz
    slow_consumers: int  # clients disconnected as slow consumers, for /varz
    violations: dict[str, int]  # permission violations by kind ("publish", "subscribe", "reply")
    client_log: ClientLog  # what clients did wrong, rate-limited

    def next_cid(self) -> int:
        """A fresh client id (never reused while the server runs)."""
        ...

    def register(self, conn: ClientConnection) -> bool:
        """Count the connection in; False when the server is full (max_connections)."""
        ...

    def unregister(self, conn: ClientConnection, reason: str) -> None:
        """Forget a closed connection (once; later calls do nothing)."""
        ...

    def connected(self, conn: ClientConnection) -> None:
        """The client is in: CONNECT accepted (or the no_auth_user login). For system events."""
        ...

    def info_for(self, conn: ClientConnection) -> bytes:
        """The INFO line this client is greeted with."""
        ...

    def max_subs_exceeded(self, who: ClientIdentity) -> None:
        """A client hit ``max_subscriptions`` (logged at most every 2 s, as nats-server)."""
        ...


PLAIN: Final = Listener()  # the client port without TLS


class ClientConnection(ClientPermissions, ClientLimits, ClientLayers, ClientRuns, asyncio.Protocol):
    kind = "Client"
    origin = FROM_CLIENT
    server: ConnectionHost

    def __init__(self, server: ConnectionHost, listener: Listener = PLAIN) -> None:
        self.server = server
        self.listener = listener
        self.stack: Stack | None = None  # TLS, WebSocket: the layers under the protocol
        self._stack_up = listener.plain  # every layer's handshake done
        self._greeted = False  # INFO sent
        self._handshake_timer: asyncio.TimerHandle | None = None
        opts = server.options
        self.account: Account = server.accounts.global_account
        self.broker: Broker = self.account.broker
        self._publish = self.account.publish  # the account's publish (mapped, when it maps)
        self._publish_run = self.account.publish_run
        self._publish_requests = self.account.publish_requests
        self.auth_required = server.auth.required
        # with no_auth_user, a client may skip CONNECT (it then is that user), as in nats-server
        self.anonymous_user = server.auth.anonymous_user
        self.parser = Parser(
            opts.max_control_line,
            opts.max_payload,
            expect_connect=self.auth_required and self.anonymous_user is None,
        )
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
        self.identity: Identity = ANONYMOUS  # whom the client authenticated as
        self.perms: Permissions | None = None
        self._pub_ok: Callable[[bytes], bool] | None = None  # the publish check, when there is one
        self.replies: Replies | None = None  # requests it may answer (allow_responses)
        self.gw_replies: ReplyMap | None = None  # requests from other clusters it was shown unmapped
        self.nonce = new_nonce() if server.auth.uses_nonce else ""  # for nkey users to sign
        self.cert: CertNames | None = None  # a verified client certificate's names (TLS)
        self.connect_opts: ConnectOptions | None = None  # the last CONNECT (credentials for a reload)
        self.connected = False  # CONNECT processed and authorized
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
        self.ident = ClientIdentity("", 0, self.cid, websocket=listener.kind == "websocket")
        self.client_type = "websocket" if listener.kind == "websocket" else "nats"  # for /connz
        self.log = server.client_log
        self.rtt = 0.0
        self._start_mono = time.monotonic()
        self._last_in = self._start_mono  # last read from the client (activity delays PINGs)
        self._ping_sent_at = float("-inf")  # when the last PING (RTT measurement) went out
        self._pong_due = False
        self.pings_out = 0
        self._ping_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self._write_blocked_at = 0.0
        self.flow = Flow(self)  # fast-producer stalls, both ways
        self._lost = False  # connection_lost has run: the socket is closed
        self._lost_event: asyncio.Event | None = None
        self.trace = opts.trace  # -V: every op in and line out is logged (server.trace)

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        # backed up well before max_pending, so that the slow-consumer check (made once the
        # transport is past its high-water mark) still sees max_pending
        high = min(WRITE_HIGH_WATER, self.max_pending // 4)
        self.transport.set_write_buffer_limits(high=high, low=min(WRITE_LOW_WATER, high // 4))
        peer = self.transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.host, self.port = str(peer[0]), int(peer[1])
            self.ident.host, self.ident.port = self.host, self.port
        log.debug("%s - Client connection created", client_prefix(self.ident))
        server = self.server
        if not server.register(self):
            self.out += server.info_for(self)
            self.log.error(self.ident, ERR_MAX_CONNECTIONS)
            self.close_with_error(ERR_MAX_CONNECTIONS, reason="Maximum Connections Exceeded")
            return
        loop = asyncio.get_running_loop()
        listener = self.listener
        if listener.layers is None:
            self._greet()
        else:
            self.stack = Stack(listener.layers(), self.transport.write)
            if listener.tls is not None:
                if not listener.tls_first:  # INFO in plaintext, then the client starts TLS
                    self.transport.write(server.info_for(self))
                    self._greeted = True
                log.debug("%s - Starting TLS client connection handshake", client_prefix(self.ident))
            self._handshake_timer = loop.call_later(listener.tls_timeout, self._handshake_timeout)
        if self.auth_required:
            self._auth_timer = loop.call_later(server.options.auth_timeout, self._auth_timeout)
        if server.options.ping_interval > 0:
            self._ping_timer = loop.call_later(server.options.ping_interval, self._ping_tick)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._lost_event is not None:
            self._lost_event.set()
        self._cleanup(self.close_reason or ("Client Closed" if exc is None else "Read Error"))

    async def wait_closed(self) -> None:
        """Wait until the socket is closed: after :meth:`close`, that is once the transport has
        written out everything it held (a graceful shutdown awaits this, with a time limit)."""
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
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self.stack is not None:
            self._layered(self.stack, data)
        else:
            self._received(data)

    def _received(self, data: bytes) -> None:
        """Protocol bytes from the client (through its layers, if it has any)."""
        if self.closed:
            return
        self._last_in = time.monotonic()
        writes = self.broker.writes
        writes.begin_batch()
        writes.caller = self.perms  # whom JetStream's handlers serve while this read is handled
        writes.client = self
        try:
            try:
                ops = self.parser.feed(data)
            except ProtocolError as e:
                if e.ops:
                    self._handle(e.ops)
                if not self.closed:
                    self.log.error(self.ident, _log_text(e))
                    if e.err == ERR_AUTH_VIOLATION:
                        self.server.auth_failures += 1
                    reason = _CLOSE_REASONS.get(e.err, "Protocol Violation")
                    if e.err:
                        self.close_with_error(e.err, reason=reason)
                    else:
                        self.close(reason)
                return
            if ops:
                if self.trace:
                    trace_in(self, ops)
                self._handle(ops)
        finally:
            writes.caller = writes.client = None
            writes.end_batch()
        backed_up = writes.backed_up
        if backed_up:  # this read's messages backed receivers up: let them catch up first
            writes.backed_up = []
            self.flow.stall(backed_up)

    # -- ops ------------------------------------------------------------------------------------

    def _handle(self, ops: list[Op]) -> None:
        """Act on parsed ops in order; stops early if the connection closes."""
        self.last_activity = time.time()
        if not self.connected and self.auth_required and ops[0][0] != CONNECT:
            # only reachable with no_auth_user: the parser refuses anything else before CONNECT
            self._login_anonymous()
        publish = self._publish
        verbose = self.verbose
        pedantic = self.pedantic
        echo = self.echo
        no_responders = self.no_responders
        pub_ok = self._pub_ok
        gw_replies = self.gw_replies
        n_in = b_in = 0
        for op in ops:
            code = op[0]
            if code == PUBS:
                self._plain_run(op)
                if self.closed:
                    break
            elif code == PUBR:
                self._request_run(op)
                if self.closed:
                    break
            elif code == PUB:
                _, subject, reply, hdr_len, data, sizes = op
                n_in += 1
                b_in += len(data)
                if pedantic and not valid_literal_bytes(subject) and subject:
                    # nats-server complains but still delivers (an empty subject is a client
                    # HMSG, which nats-server takes without a check)
                    self.send(INVALID_PUB_SUBJECT)
                if pub_ok is not None and not pub_ok(subject) and not self._answers(subject):
                    self._violation("publish", *pub_violation(subject))
                    continue
                if reply is not None and reserved_reply(reply):
                    self._violation("reply", *reply_violation(reply))
                    continue
                if verbose:
                    self.send(enc.OK)
                if gw_replies:
                    subject = gw_replies.get(subject) or subject
                if publish(self, subject, reply, hdr_len, data, echo, sizes) == 0 and no_responders and reply:
                    self._no_responders(reply)
                if self.closed:
                    break
            elif code == PING:
                self.send(enc.PONG)
            elif code == PONG:
                self.pings_out = 0
                if self._pong_due:
                    self.rtt = max(time.monotonic() - self._ping_sent_at, 1e-9)
                    self._pong_due = False
            elif code == SUB:
                self._sub(op[1], op[2], op[3])
            elif code == UNSUB:
                self._unsub(op[1], op[2])
            elif code == CONNECT:
                if not self._connect(op[1]):
                    break
                if self.parser.max_payload < self.server.options.max_payload:
                    self.clip_payloads(ops, op)  # a JWT's limit, for what was read with CONNECT
                verbose = self.verbose
                pedantic = self.pedantic
                echo = self.echo
                no_responders = self.no_responders
                pub_ok = self._pub_ok
                publish = self._publish
            elif code == ERR:
                if op[1] is PAYLOAD_VIOLATION:
                    self.payload_violation()
                else:
                    self.close("Parse Error")
                break
            # INFO and +OK from a client are ignored, as nats-server does
        self.in_msgs += n_in
        self.in_bytes += b_in

    def map_reply(self, real: bytes, mapped: bytes) -> None:
        """This client was shown ``real`` as the reply of a request whose reply is ``mapped``
        (from another cluster, see ``gateway_interest``): its answer goes back mapped."""
        if self.gw_replies is None:
            self.gw_replies = ReplyMap()
        self.gw_replies.add(real, mapped)

    def _login_anonymous(self) -> None:
        identity = self.server.auth.anonymous()
        self._set_identity(identity)
        self._enter(identity.account)
        self.broker.caller = self.perms  # (inside this client's read)
        self.ident.connected = True
        self.connected = True
        self._cancel_auth_timer()
        self.server.connected(self)

    def _cancel_auth_timer(self) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    def _connect(self, opts: ConnectOptions) -> bool:
        self.verbose = opts.verbose
        self.pedantic = opts.pedantic
        self.echo = opts.echo
        self.headers = opts.headers
        self.no_responders = opts.no_responders
        self.protocol = opts.protocol
        self.name = opts.name
        self.lang = opts.lang
        self.version = opts.version
        # nats-server's order: credentials, then the protocol version, then no_responders
        self.connect_opts = opts
        auth = self.server.auth
        identity = self._login(opts) if self.auth_required else ANONYMOUS
        # a CONNECT naming an account is refused whatever the credentials, as by nats-server;
        # so is an identity whose account this server does not hold (never left in $G)
        account = None if identity is None else self.server.accounts.get(identity.account)
        if identity is None or account is None or opts.account or opts.new_account:
            self.server.auth_failures += 1
            self.log.error(self.ident, auth.error_text(opts))
            self.close_with_error(ERR_AUTH_VIOLATION, reason="Authentication Failure")
            return False
        self._cancel_auth_timer()
        self._set_identity(identity)
        self._enter(identity.account)
        if not self._take_limits(self.server.options.max_payload):
            return False
        self.broker.caller = self.perms  # what follows CONNECT in this read is this user's
        ident = self.ident
        ident.version, ident.lang, ident.name = opts.version, opts.lang, opts.name
        ident.connected = True
        if not CLIENT_PROTO_ZERO <= opts.protocol <= CLIENT_PROTO_INFO:
            self.log.error(ident, ERR_INVALID_PROTOCOL)
            self.close_with_error(ERR_INVALID_PROTOCOL, reason="Bad Client Protocol Version")
            return False
        if opts.no_responders and not opts.headers:
            self.log.error(ident, ERR_NO_RESPONDERS_HEADERS)
            self.close_with_error(ERR_NO_RESPONDERS_HEADERS, reason="No Responders Requires Headers")
            return False
        self.connected = True
        if not self.rtt:  # nats-server's first estimate: connection setup to CONNECT
            self.rtt = max(time.monotonic() - self._start_mono, 1e-9)
        if self.verbose:
            self.send(enc.OK)
        self.server.connected(self)
        return True

    def _enter(self, name: str) -> None:
        """Take the account ``name`` (the one the client logged in to): its broker and publish
        path. Only before the client has subscriptions (it logs in once)."""
        account = self.server.accounts.get(name)
        if account is None or account is self.account:
            return
        self.account = account
        self.broker = account.broker
        self.account_changed()

    def account_changed(self) -> None:
        """The account's publish path changed (its mappings, on a reload): take the new one."""
        self._publish = self.account.publish
        self._publish_run = self.account.publish_run
        self._publish_requests = self.account.publish_requests

    def _sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        # nats-server's order: permissions (and the reserved queue), the token and subscription
        # limits, then the subject; any other queue name is taken as is
        perms = self.perms
        if queue == SYS_QUEUE or (perms is not None and not perms.may_subscribe(subject, queue)):
            self._violation("subscribe", *sub_violation(subject, queue, sid))
            return
        opts = self.server.options
        if opts.max_sub_tokens and subject.count(b".") >= opts.max_sub_tokens:
            self._violation("subscribe", *tokens_violation(subject, sid))
            return
        limit = self.max_subs(opts.max_subscriptions)
        if limit >= 0 and len(self.subs) >= limit:
            self.send(_MAX_SUBS)
            self.server.max_subs_exceeded(self.ident)
            return
        if not valid_sub_bytes(subject):
            self.send(_INVALID_SUBJECT)
            return
        if sid not in self.subs:  # a duplicate sid is ignored (the first subscription stays)
            sub = Subscription(self, subject, queue, sid)
            self.subs[sid] = sub
            self.broker.add(sub)
            if perms is not None:
                self._filter_new(sub)
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

    def _login(self, opts: ConnectOptions) -> Identity | None:
        """Who ``opts`` log in as on this connection (None: refused)."""
        listener = self.listener
        return self.server.auth.authenticate(
            opts, self.nonce, self.cert, listener.tls_map, self.host, listener.conn_type
        )

    def info(self) -> bytes:
        return self.server.info_for(self)

    def _no_responders(self, reply: bytes) -> None:
        """Tell the publisher nobody listens: a 503 status to its first plain subscription
        matching the reply subject (nats-server's choice; queue subscriptions are not used)."""
        plain, _groups = self.broker.subs.match(reply)
        for sub in plain:
            if sub.client is self:
                self.deliver(sub, reply, None, len(NO_RESPONDERS), NO_RESPONDERS, _NO_RESPONDERS_TAIL)
                return

    # -- a configuration reload ---------------------------------------------------------------

    def reauthorize(self) -> None:
        """The server's authorization changed: a client in whose credentials no longer pass is
        closed with ``-ERR 'Authorization Violation'``, as nats-server's reload does."""
        if self.closed or not self.connected:
            return
        auth = self.server.auth
        self.auth_required = auth.required
        opts = self.connect_opts or DEFAULT_CONNECT
        if self.connect_opts is None:  # logged in without CONNECT: as the no_auth_user, if still one
            identity: Identity | None = auth.anonymous() if auth.anonymous_user or not auth.required else None
        else:
            identity = self._login(opts) if auth.required else ANONYMOUS
        if identity is None or identity.account != self.account.name:
            # a user moved to another account logs in again, as nats-server makes it
            self.server.auth_failures += 1
            self.log.error(self.ident, auth.error_text(opts))
            if auth.revoked(opts):
                self.close_with_error(ERR_AUTH_REVOKED, reason="Credentials Revoked")
            else:
                self.close_with_error(ERR_AUTH_VIOLATION, reason="Authentication Failure")
            return
        self._set_identity(identity)
        self.apply_limits(self.server.options.max_payload)
        self._remove_unauthorized_subs()

    # -- output ---------------------------------------------------------------------------------

    def deliver(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None:
        if self.closed:
            return
        out = self.out
        if not hdr_len:
            out += sub.prefix if subject == sub.subject else msg_prefix(subject, sub.sid)
            out += tail
        elif self.headers:
            out += sub.hprefix if subject == sub.subject else msg_prefix(subject, sub.sid, headers=True)
            out += tail
        else:  # headers are stripped for clients that cannot parse them
            out += msg(subject, sub.sid, reply, 0, data[hdr_len:])
        self.out_msgs += 1
        self.out_bytes += len(data)
        sub.delivered += 1
        # in a busy read the connection is already dirty: then this is the only test made
        if sub.max_msgs or not self.dirty or len(out) > self.max_pending:
            self._delivered(sub)

    def deliver_run(self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]) -> None:
        if self.closed:
            return
        k = len(tails)
        if sub.max_msgs:  # UNSUB <sid> <max>: deliver up to the limit, then the sub is gone
            left = sub.max_msgs - sub.delivered
            if left <= 0:
                return
            if left < k:
                k = left
                tails = tails[:k]
                datas = datas[:k]
        append_run(self.out, sub.prefix if subject == sub.subject else msg_prefix(subject, sub.sid), tails)
        self.out_msgs += k
        self.out_bytes += sum(map(len, datas))
        sub.delivered += k
        self._delivered(sub)

    def deliver_batch(
        self,
        sub: Subscription,
        subjects: list[bytes],
        replies: list[bytes] | None,
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        if sub.max_msgs:
            return False  # UNSUB <sid> <max>: counted out one by one
        if self.closed:
            return True
        # a client that cannot take headers gets them stripped, as by deliver
        self.out += msg_batch(subjects, sub.sid, replies, hdrs, datas, self.headers)
        k = len(datas)
        self.out_msgs += k
        self.out_bytes += sum(map(len, hdrs)) + sum(map(len, datas))
        sub.delivered += k
        self._delivered(sub)
        return True

    def _delivered(self, sub: Subscription) -> None:
        """After output for ``sub`` was buffered: retire it at its UNSUB maximum, have the
        buffer written at the end of the read, and drop the client if it is too far behind."""
        if sub.max_msgs and sub.delivered >= sub.max_msgs:
            self.subs.pop(sub.sid, None)
            self.broker.remove(sub)
        if not self.dirty:
            self.dirty = True
            self.broker.mark_dirty(self)
        if len(self.out) > self.max_pending:
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
        if self.trace:
            trace_out(self, out)
        if self.stack is None:
            t.write(out)
        else:
            self.stack.outbound(bytes(out))
        if self._write_blocked_at:  # past the transport's high-water mark: check the limits
            blocked_for = time.monotonic() - self._write_blocked_at
            if (
                t.get_write_buffer_size() > self.max_pending
                or blocked_for > self.server.options.write_deadline
            ):
                self._slow_consumer()
            else:
                self.broker.backed_up.append(self.flow)

    def _slow_consumer(self) -> None:
        self.server.slow_consumers += 1
        self.account.slow_consumers += 1
        self.log.log(
            logging.WARNING, self.ident, f"Slow Consumer Detected: MaxPending of {self.max_pending} Exceeded"
        )
        self.out = bytearray()
        self.close("Slow Consumer (Pending Bytes)", abort=True)

    # -- liveness -------------------------------------------------------------------------------

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.connected and not self.closed:
            self.log.debug(self.ident, ERR_AUTH_TIMEOUT)
            self.close_with_error(ERR_AUTH_TIMEOUT, reason="Authentication Timeout")

    def _ping_tick(self) -> None:
        """nats-server's ping timer: a client that sent something within the interval is not
        pinged (unless its RTT is due for measurement); ``ping_max`` PINGs unanswered is stale."""
        self._ping_timer = None
        if self.closed:
            return
        opts = self.server.options
        now = time.monotonic()
        need_rtt = not self.rtt or now - self._ping_sent_at > RTT_MEASUREMENT_INTERVAL
        if need_rtt or now - self._last_in >= opts.ping_interval:
            if self.pings_out + 1 > opts.ping_max:
                self.log.debug(self.ident, "Stale Client Connection - Closing")
                self.close_with_error(ERR_STALE_CONNECTION, reason="Stale Connection")
                return
            self.send_rtt_ping()
        self._ping_timer = asyncio.get_running_loop().call_later(opts.ping_interval, self._ping_tick)

    def send_rtt_ping(self) -> None:
        """PING the client; its PONG clears the outstanding count and measures the round trip."""
        if self.closed:
            return
        self.pings_out += 1
        self._ping_sent_at = time.monotonic()
        self._pong_due = True
        self.send(enc.PING)

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
                self._write(self.out)
            self.out = bytearray()
            if self.stack is not None and not abort and not self._lost:
                self.stack.closing(reason)
            if abort:
                t.abort()
            else:
                t.close()
        self._cleanup(reason)

    def _cleanup(self, reason: str) -> None:
        if self.closed and not self.subs:
            return
        self.closed = True
        log.debug("%s - Client connection closed: %s", client_prefix(self.ident), reason)
        for timer in (self._ping_timer, self._auth_timer, self._handshake_timer):
            if timer is not None:
                timer.cancel()
        self._cancel_expiry()
        self._ping_timer = self._auth_timer = self._handshake_timer = None
        for sub in self.subs.values():
            self.broker.remove(sub)
        self.subs.clear()
        self.flow.close()
        self.server.unregister(self, reason)


def _log_text(e: ProtocolError) -> str:
    """What nats-server logs for a protocol error (its own words where jetpy has them)."""
    if e.err == ERR_AUTH_VIOLATION:  # something other than CONNECT came first
        return "authentication error"
    if e.err == ERR_UNKNOWN_OP:
        return f"Client parser ERROR: {e.detail}" if e.detail else "Client parser ERROR"
    if e.err in (ERR_MAX_PAYLOAD, ERR_MAX_CONTROL_LINE) and e.detail:
        return e.detail
    return e.detail or e.err or "protocol violation"
