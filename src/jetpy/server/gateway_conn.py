"""GatewayConnection: one connection to a server of another cluster, a
:class:`~jetpy.server.peer_link.PeerLink` over the gateway dialect of the route parser.

Owns a gateway connection's session as nats-server runs it. An **outbound** connection (this
server dialled) waits for the remote's INFO, answers with CONNECT and its own INFO, then sends
this cluster's messages and takes the remote's interest (``RS+``/``RS-``, ``A+``/``A-``, the
``gateway_cmd`` INFOs), held per account by
:class:`~jetpy.server.gateway_interest.OutboundInterest`. An **inbound** connection (accepted)
greets with INFO, expects CONNECT then INFO, then takes the remote cluster's messages and tells
it this cluster's interest (:class:`~jetpy.server.gateway_interest.InboundInterest`): in
optimistic mode, ``RS-``/``A-`` for messages nobody here wants. Registration, solicitation,
gossip and what every inbound gateway is told are the gateway manager's (:class:`GatewayHost`).

A message from a gateway goes to this cluster's subscribers only (clients, routes, leaf nodes:
:func:`~jetpy.server.gateway_interest.deliver_from_gateway`), never to another gateway. A message
to a gateway carries a mapped reply when the host says its reply may not be known there yet.
"""

from __future__ import annotations

import logging
from typing import Protocol

from jetpy.protocol import ProtocolError
from jetpy.protocol import encode as enc
from jetpy.protocol.encode import msg_tail
from jetpy.protocol.gateway_wire import (
    CMD_ALL_SUBS_COMPLETE,
    CMD_ALL_SUBS_START,
    GatewayConnect,
    GatewayInfo,
    account_line,
    decode_gateway_connect,
    decode_gateway_info,
)
from jetpy.protocol.ops import Op
from jetpy.protocol.route import A_SUB, A_UNSUB, GATEWAY, R_MSG, R_MSGS, R_SUB, R_UNSUB, RouteParser
from jetpy.protocol.route_wire import sub_line, unsub_line
from jetpy.server.broker import FROM_GATEWAY, Broker, Subscription
from jetpy.server.gateway_interest import (
    GATEWAY as GATEWAY_KIND,
)
from jetpy.server.gateway_interest import (
    INTEREST_ONLY,
    MAX_NO_INTEREST,
    OPTIMISTIC,
    InboundInterest,
    OutboundInterest,
    deliver_from_gateway,
    not_far,
)
from jetpy.server.options import ServerOptions
from jetpy.server.peer_link import PeerLink
from jetpy.server.route_interest import deliver_routed_run
from jetpy.subjects import subject_matches
from jetpy.sublist import MatchResult

__all__ = ["GatewayConnection", "GatewayHost"]

log = logging.getLogger("jetpy.server")

GATEWAY_MAX_PING_INTERVAL = 15.0
"""Gateways PING at least this often, whatever ``ping_interval`` says (nats-server's
gwMaxPingInterval): a dead link between clusters is found within seconds."""


class GatewayHost(Protocol):
    """What a gateway connection needs of the gateway manager."""

    options: ServerOptions
    broker: Broker  # the broker whose read batches a connection's reads join
    name: str  # this cluster's gateway name

    def greeting(self) -> bytes:
        """The INFO an accepted gateway is greeted with."""
        ...

    def check_connect(self, link: GatewayConnection, connect: GatewayConnect) -> bool:
        """An inbound gateway's CONNECT; False when it was refused (and closed)."""
        ...

    def outbound_info(self, link: GatewayConnection, info: GatewayInfo, first: bool) -> None:
        """An INFO on an outbound connection: the remote's first (register), gossip or an
        update of its cluster's URLs."""
        ...

    def inbound_info(self, link: GatewayConnection, info: GatewayInfo) -> None:
        """The first INFO of an inbound connection: register it."""
        ...

    def account(self, account: bytes) -> Broker | None:
        """The broker of ``account``; None when this server does not serve it."""
        ...

    def has_interest(self, account: bytes) -> bool:
        """Whether the cluster has any subscription in ``account`` (else A- for it)."""
        ...

    def switch_to_interest_only(self, link: GatewayConnection, account: bytes) -> None:
        """Tell ``link`` every subject of ``account`` and switch it to interest-only."""
        ...

    def mapped_reply(self, account: bytes, reply: bytes, link: GatewayConnection) -> bytes | None:
        """The reply a request to ``link`` travels with, when it must be mapped."""
        ...

    def gateway_closed(self, link: GatewayConnection, reason: str) -> None: ...


class GatewayConnection(PeerLink):
    kind = GATEWAY_KIND
    origin = FROM_GATEWAY
    tag = "gid"
    label = "Gateway"

    def __init__(self, host: GatewayHost, gid: int, outbound_to: str = "", url: str = "") -> None:
        super().__init__(host.broker, host.options, RouteParser(dialect=GATEWAY), gid)
        self.host = host
        self.outbound = bool(outbound_to)
        self.name = outbound_to  # the remote cluster's gateway name (inbound: from its INFO)
        self.url = url  # where an outbound connection dialled (credentials included)
        self.remote_id = ""
        self.connect_received = self.outbound  # an inbound gateway must say CONNECT first
        self.info: GatewayInfo | None = None  # the remote's first INFO
        self.registered = False
        self.iom = False  # the remote switches every account to interest-only at once
        self.nrp = True  # the remote maps replies with _GR_ (else $GR.)
        self.no_reconnect = False
        # outbound: the remote's interest per account (None: an account not served here)
        self.interests: dict[bytes, OutboundInterest | None] = {}
        # inbound: what the remote was told per account, and the accounts told A-
        self.told: dict[bytes, InboundInterest] = {}
        self.told_none: set[bytes] = set()
        # inbound messages: the current account and the last match result's receivers
        self._acc = b""
        self._acc_broker: Broker | None = None
        self._last_r: MatchResult[Subscription] | None = None
        self._last_plain: list[Subscription] = []
        # outbound messages: the last tail whose reply was mapped, and the mapped tail
        self._mapped_from: bytes | None = None
        self._mapped_tail = b""

    def _made(self) -> None:
        if self.outbound:
            log.info('%s - Creating outbound gateway connection to "%s"', self.prefix, self.name)
        else:
            log.info("%s - Processing inbound gateway connection", self.prefix)
            self.send(self.host.greeting())

    def ping_interval(self) -> float:
        return min(self.options.ping_interval, GATEWAY_MAX_PING_INTERVAL)

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
                plain = self._plain(subject)
                if not plain:
                    self._no_interest(account, subject)
                    continue
                deliver_routed_run(plain, subject, datas, sizes)
            elif code == R_MSG:
                if not self._ready():
                    return
                _, account, subject, reply, queues, hdr_len, data, sizes = op
                self.in_msgs += 1
                self.in_bytes += len(data)
                if account != self._acc and not self._account(account):
                    continue
                plain = self._plain(subject)
                if not plain:
                    self._no_interest(account, subject)
                    if not queues:
                        continue
                assert self._last_r is not None
                if hdr_len and not self.headers:
                    continue
                deliver_from_gateway(self._last_r, plain, subject, reply, hdr_len, data, sizes, queues)
            elif code in (R_SUB, R_UNSUB, A_SUB, A_UNSUB):
                if not self._ready():
                    return
                if not self.outbound:
                    log.error(
                        "%s - Received %s from gateway on inbound connection", self.prefix, _NAMES[code]
                    )
                    self.close("Protocol Violation")
                    return
                interest = self._interest(op[1])
                if interest is None:
                    continue
                if code == R_SUB:
                    interest.sub(op[2], op[3])
                elif code == R_UNSUB:
                    interest.unsub(op[2], op[3])
                else:
                    interest.account_interest(code == A_SUB)
            else:
                self._control(op)

    def _ready(self) -> bool:
        """Interest and messages only come from a registered connection."""
        if self.registered:
            return True
        log.error("%s - gateway sent interest or messages before its INFO", self.prefix)
        self.out += enc.err("Authorization Violation")
        self.close("Protocol Violation")
        return False

    def _connect(self, raw: bytes) -> None:
        if self.outbound or self.connect_received:
            return
        try:
            connect = decode_gateway_connect(raw)
        except ProtocolError as e:
            log.error("%s - %s", self.prefix, e.detail or "invalid CONNECT")
            self.close("Protocol Violation")
            return
        if self.host.check_connect(self, connect):
            self.connect_received = True
            self.remote_id = connect.name
            self.start_pings()

    def _info(self, raw: bytes) -> None:
        if not self.connect_received:
            log.error("%s - gateway sent INFO before CONNECT", self.prefix)
            self.out += enc.err("Authorization Violation")
            self.close("Authentication Failure")
            return
        try:
            info = decode_gateway_info(raw)
        except ProtocolError as e:
            log.error("%s - %s", self.prefix, e.detail or "invalid INFO")
            self.close("Parse Error")
            return
        first = self.info is None
        if self.outbound:
            if not first and info.gateway_cmd in (CMD_ALL_SUBS_START, CMD_ALL_SUBS_COMPLETE):
                self._command(info)
                return
            if first:
                self.info = info
            self.host.outbound_info(self, info, first)
        elif first:
            self.info = info
            self.name = info.gateway
            self.remote_id = info.server_id or self.remote_id
            self.remote_name = info.server_name
            self.host.inbound_info(self, info)

    def _command(self, info: GatewayInfo) -> None:
        account = info.gateway_cmd_payload.encode()
        if not account:
            what = "start" if info.gateway_cmd == CMD_ALL_SUBS_START else "complete"
            text = f"Account absent from receive-all-subscriptions-{what} command"
            log.error("%s - %s", self.prefix, text)
            self.out += enc.err(text)
            self.close("Protocol Violation")
            return
        interest = self._interest(account)
        if interest is None:
            return
        mode = "Interest-Only mode" + (" complete" if info.gateway_cmd == CMD_ALL_SUBS_COMPLETE else "")
        log.debug(
            '%s - Gateway "%s": switching account "%s" to %s', self.prefix, self.name, account.decode(), mode
        )
        if info.gateway_cmd == CMD_ALL_SUBS_START:
            interest.start_all()
        else:
            interest.complete_all()

    def registered_as(self, info: GatewayInfo) -> None:
        """The manager registered this connection (outbound: for the remote ``info`` describes)."""
        self.registered = True
        self.remote_id = info.server_id
        self.remote_name = info.server_name
        self.iom = info.gateway_iom
        self.nrp = info.gateway_nrp
        if self.outbound:
            self.headers = info.headers
            self.start_pings()

    # -- the remote's interest (outbound) --------------------------------------------------------

    def _interest(self, account: bytes) -> OutboundInterest | None:
        try:
            return self.interests[account]
        except KeyError:
            broker = self.host.account(account)
            interest = OutboundInterest(self, account, broker, self.iom) if broker is not None else None
            self.interests[account] = interest
            return interest

    def open_accounts(self, accounts: list[bytes]) -> None:
        """Outbound, remote not interest-only: every account served here starts optimistic
        (everything is sent until the remote refuses)."""
        for account in accounts:
            self._interest(account)

    # -- the remote's messages (inbound) ---------------------------------------------------------

    def _account(self, account: bytes) -> bool:
        broker = self.host.account(account)
        if broker is None:
            self._no_interest(account, b"")
            return False
        self._acc = account
        self._acc_broker = broker
        self._last_r = None
        return True

    def _plain(self, subject: bytes) -> list[Subscription]:
        broker = self._acc_broker
        assert broker is not None
        r = broker.subs.match(subject)
        if r is not self._last_r:
            self._last_r = r
            self._last_plain = not_far(r[0])
        return self._last_plain

    def _no_interest(self, account: bytes, subject: bytes) -> None:
        """A message nobody here wants (``subject`` b"": an account not served here): in
        optimistic mode, tell the remote (A- or RS-, once), and past :data:`MAX_NO_INTEREST`
        subjects switch the account to interest-only."""
        if self.outbound:
            return
        told = self.told.get(account)
        if told is not None and told.mode != OPTIMISTIC:
            return
        if not subject or not self.host.has_interest(account):
            if account not in self.told_none:
                self.told_none.add(account)
                self.send(account_line(account, False))
            return
        if told is None:
            told = self.told[account] = InboundInterest()
        if subject in told.refused:
            return
        if len(told.refused) >= MAX_NO_INTEREST:
            self.host.switch_to_interest_only(self, account)
            return
        told.refused.add(subject)
        self.send(unsub_line(account, subject, None))

    def tell(self, account: bytes, subject: bytes, queue: bytes | None, added: bool) -> None:
        """The cluster's first subscription to a key came (``added``) or its last went: tell
        the remote what its mode for the account asks."""
        if queue is not None:
            if added:
                self.told_none.discard(account)
            self.send(sub_line(account, subject, queue, 1) if added else unsub_line(account, subject, queue))
            return
        if added and account in self.told_none:
            self.told_none.discard(account)
            self.send(account_line(account, True))
            return
        told = self.told.get(account)
        if told is None:
            return
        if told.mode == INTEREST_ONLY:
            self.send(sub_line(account, subject, None, 0) if added else unsub_line(account, subject, None))
        elif added and told.refused:
            if b"*" in subject or b">" in subject:
                pattern = subject.decode(errors="replace")
                gone = [s for s in told.refused if subject_matches(pattern, s.decode(errors="replace"))]
                if gone:
                    told.refused.difference_update(gone)
                    self.send(sub_line(account, subject, None, 0))
            elif subject in told.refused:
                told.refused.discard(subject)
                self.send(sub_line(account, subject, None, 0))

    # -- output (outbound) -----------------------------------------------------------------------

    def deliver(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None:
        if sub.filtered:  # the catch-all of an optimistic account: not what the remote refused
            interest = self.interests.get(sub.sid)
            if interest is not None and not interest.allows(subject):
                return
        if reply is not None:
            if tail is self._mapped_from:
                tail = self._mapped_tail
            else:
                mapped = self.host.mapped_reply(sub.sid, reply, self)
                if mapped is not None:
                    self._mapped_from = tail
                    tail = self._mapped_tail = msg_tail(mapped, hdr_len, data)
                    reply = mapped
        super().deliver(sub, subject, reply, hdr_len, data, tail)

    def deliver_run(self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]) -> None:
        if sub.filtered:
            interest = self.interests.get(sub.sid)
            if interest is not None and not interest.allows(subject):
                return
        super().deliver_run(sub, subject, datas, tails)

    # -- closing --------------------------------------------------------------------------------

    def _closed(self, reason: str) -> None:
        for interest in self.interests.values():
            if interest is not None:
                interest.clear()
        self.interests.clear()
        remote = f" - Remote: {self.remote_name}" if self.remote_name else ""
        log.info("%s - Gateway connection closed: %s%s", self.prefix, reason, remote)
        self.host.gateway_closed(self, reason)

    def subscription_count(self) -> int:
        return sum(i.count() for i in self.interests.values() if i is not None)


_NAMES = {R_SUB: "RS+", R_UNSUB: "RS-", A_SUB: "A+", A_UNSUB: "A-"}
