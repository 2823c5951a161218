"""LeafConnection: one leaf node link, a :class:`~jetpy.server.peer_link.PeerLink` over the
leaf dialect of the route parser.

Owns a leaf link's session as nats-server runs it, on either end. **Accepted** (this server is
the hub): greet with INFO (a nonce to sign), take the leaf node's CONNECT within the
authorization timeout, bind the link to the account its credentials name, answer with INFO
(``connect_info``, ``remote_account``) and the account's interest. **Solicited** (this server is
the leaf node): wait for the hub's INFO, answer with CONNECT (credentials: the URL's user and
password, or a creds file's user JWT and the nonce signed with its seed), the local account's
interest and a PING. A remote with ``hub: true`` swaps the roles (the dialling server is the
hub). Then both ends take ``LS+``/``LS-`` (the peer's interest in the bound account, held as
subscriptions by :class:`~jetpy.server.route_interest.RemoteInterest`, queue groups with their
weights) and ``LMSG``/``HMSG`` (delivered by :func:`~jetpy.server.leaf_interest.deliver_from_leaf`).

A peer that tells this server its own loop-detection subject (``$LDS.``) is a loop: the link
closes with nats-server's ``Loop detected for leafnode account=...`` and the dialling end waits
:data:`LOOP_DELAY` before trying again. Of several links this leaf node has into one hub system
(two remotes of one account into one cluster) all hear the subject back: the oldest stays, the
others close, so each message arrives once. Registration, what the link is told and what it tells,
dialling and credentials are the manager's (:class:`LeafHost`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final, Protocol

from jetpy.protocol import ProtocolError
from jetpy.protocol import encode as enc
from jetpy.protocol.encode import msg_tail
from jetpy.protocol.errors import ERR_AUTH_TIMEOUT
from jetpy.protocol.leaf_wire import LOOP_PREFIX, LeafConnect, LeafInfo, decode_leaf_connect, decode_leaf_info
from jetpy.protocol.ops import Op
from jetpy.protocol.route import LEAF, R_MSG, R_MSGS, R_SUB, R_UNSUB, RouteParser
from jetpy.server.broker import FROM_HUB_LEAF, FROM_SPOKE_LEAF, Broker, Subscription
from jetpy.server.leaf_interest import (
    LEAF_HEADS,
    LEAFNODE,
    TOLD_TO_HUB,
    Denied,
    LeafTold,
    deliver_from_leaf,
    delivery_for_link,
)
from jetpy.server.options import LeafRemote, ServerOptions
from jetpy.server.peer_link import PeerLink
from jetpy.server.route_interest import RemoteInterest, deliver_routed_run
from jetpy.sublist import MatchResult

__all__ = ["HANDSHAKE_TIMEOUT", "LOOP_DELAY", "LeafConnection", "LeafHost"]

log = logging.getLogger("jetpy.server")

HANDSHAKE_TIMEOUT: Final = 10.0
"""Seconds a leaf link has to complete its handshake: a peer that has not is no server."""

LOOP_DELAY: Final = 30.0
"""Seconds a leaf node waits before dialling a hub again after a loop was detected
(nats-server's leafNodeReconnectDelayAfterLoopDetected)."""


class LeafHost(Protocol):
    """What a leaf link needs of the leaf node manager."""

    options: ServerOptions
    broker: Broker  # the broker whose read batches a link's reads join

    def greeting(self, link: LeafConnection) -> bytes:
        """The INFO an accepted leaf node is greeted with."""
        ...

    def accept(self, link: LeafConnection, connect: LeafConnect) -> tuple[bytes, Broker] | None:
        """An accepted leaf node's CONNECT: the account it binds to and its broker, or None
        when it was refused (and closed)."""
        ...

    def solicit(self, link: LeafConnection, info: LeafInfo) -> tuple[bytes, Broker] | None:
        """The hub's first INFO: send CONNECT; the local account and its broker, or None when
        the link was closed."""
        ...

    def registered(self, link: LeafConnection) -> None:
        """The link is bound to its account: tell it the interest it must hear of."""
        ...

    def hub_info(self, link: LeafConnection, info: LeafInfo) -> None:
        """A later INFO from the hub (its leaf node URLs)."""
        ...

    def loop_subject(self, account: bytes) -> bytes:
        """This server's loop-detection subject in ``account``."""
        ...

    def link_denies(self, link: LeafConnection) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What the bound ``link`` refuses besides its remote's filters: (imports, exports)."""
        ...

    def keeps_through_loop(self, link: LeafConnection) -> bool:
        """Whether ``link`` stays although its peer told it this server's own loop-detection
        subject (the oldest of several links into one hub system: the newer ones close)."""
        ...

    def leaf_closed(self, link: LeafConnection, reason: str) -> None: ...


class LeafConnection(PeerLink):
    kind = LEAFNODE
    tag = "lid"
    label = "Leafnode"

    def __init__(self, host: LeafHost, cid: int, remote: LeafRemote | None = None, url: str = "") -> None:
        super().__init__(host.broker, host.options, RouteParser(dialect=LEAF), cid)
        self.host = host
        self.remote = remote  # the remotes entry this server dialled for; None when accepted
        self.url = url
        self.solicited = remote is not None
        # this server's role on the link: the leaf node (its hub's interest is FROM_SPOKE_LEAF)
        # or the hub (the leaf node's is FROM_HUB_LEAF)
        self.spoke = remote is not None and not remote.hub
        self.origin = FROM_SPOKE_LEAF if self.spoke else FROM_HUB_LEAF
        self.account = b""
        self.acc_broker: Broker | None = None
        self.registered = False
        self.connect_received = self.solicited
        self.remote_id = ""
        self.remote_cluster = ""
        self.nonce = ""
        self.deny_imports = Denied(remote.deny_imports if remote is not None else ())
        self.deny_exports = Denied(remote.deny_exports if remote is not None else ())
        self.remote_domain = ""  # the peer's JetStream domain
        self.interest: RemoteInterest | None = None
        self.told: LeafTold | None = None
        self.loop_detected = False
        # a hub's account mappings, applied to the leaf node's messages (see LeafHost.accept)
        self.map_subject: Callable[[bytes], bytes] | None = None
        self.mapped_sources: list[bytes] = []
        self._timers: list[asyncio.TimerHandle] = []
        self._last_r: MatchResult[Subscription] | None = None
        self._last_plain: list[Subscription] = []

    def _made(self) -> None:
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout))
        if self.solicited:
            log.debug("%s - Leafnode connection created for remote %s", self.prefix, self.url)
            return
        log.info("%s - Leafnode connection created", self.prefix)
        self.send(self.host.greeting(self))
        timeout = self.options.leafnodes.auth_timeout
        self._timers.append(loop.call_later(timeout, self._auth_timeout))

    # -- ops ------------------------------------------------------------------------------------

    def _handle(self, ops: list[Op]) -> None:
        for op in ops:
            if self.closed:
                return
            code = op[0]
            if code == R_MSGS:
                if not self._ready():
                    return
                _, _, subject, datas, sizes = op
                self.in_msgs += len(datas)
                self.in_bytes += sum(map(len, datas))
                if self.deny_imports and self.deny_imports.message(subject):
                    continue
                if self.map_subject is not None:  # each message mapped anew (weighted mappings)
                    for data, size in zip(datas, sizes, strict=True):
                        self._message(subject, None, None, 0, data, size)
                    continue
                deliver_routed_run(self._plain(subject), subject, datas, sizes)
            elif code == R_MSG:
                if not self._ready():
                    return
                _, _, subject, reply, queues, hdr_len, data, sizes = op
                self.in_msgs += 1
                self.in_bytes += len(data)
                if self.deny_imports and self.deny_imports.message(subject):
                    continue
                self._message(subject, reply, queues, hdr_len, data, sizes)
            elif code == R_SUB:
                if not self._ready():
                    return
                self._sub(op[2], op[3], op[4] if op[3] is not None else 0)
            elif code == R_UNSUB:
                if not self._ready():
                    return
                if self.interest is not None:
                    self.interest.remove(op[2], op[3])
            else:
                self._control(op)

    def _message(
        self,
        subject: bytes,
        reply: bytes | None,
        queues: list[bytes] | None,
        hdr_len: int,
        data: bytes,
        sizes: bytes,
    ) -> None:
        if self.map_subject is not None:
            subject = self.map_subject(subject)
        plain = self._plain(subject)
        assert self._last_r is not None
        deliver_from_leaf(self._last_r, plain, self, self._may, subject, reply, hdr_len, data, sizes, queues)

    def _ready(self) -> bool:
        if self.registered:
            return True
        log.error("%s - leafnode sent interest or messages before its CONNECT", self.prefix)
        self.out += enc.err("Authorization Violation")
        self.close("Protocol Violation")
        return False

    def _may(self, sub: Subscription) -> bool:
        """May a message from this link go to ``sub``? (A leaf node gives its hub's messages
        to what it told the hub of; a hub gives a leaf node's to everyone but the link.)"""
        return not self.spoke or sub.client.origin in TOLD_TO_HUB

    def _plain(self, subject: bytes) -> list[Subscription]:
        broker = self.acc_broker
        assert broker is not None
        r = broker.subs.match(subject)
        if r is not self._last_r:
            self._last_r = r
            may = self._may
            self._last_plain = [s for s in r[0] if s.client is not self and may(s)]
        return self._last_plain

    def _sub(self, subject: bytes, queue: bytes | None, weight: int) -> None:
        if subject.startswith(LOOP_PREFIX) and subject == self.host.loop_subject(self.account):
            if not self.host.keeps_through_loop(self):
                self.loop(send=True)
            return
        if self.interest is None or (self.deny_exports and self.deny_exports.interest(subject)):
            return
        self.interest.add(subject, queue, weight)

    def loop(self, send: bool) -> None:
        """A loop: this server's own interest came back over this link (``send``: tell the peer,
        which was not the one to find it)."""
        name = self.account.decode(errors="replace")
        text = (
            f'Loop detected for leafnode account="{name}". Delaying attempt to reconnect for {LOOP_DELAY:g}s'
        )
        self.loop_detected = self.solicited
        if send:
            self.out += enc.err(text)
        log.error("%s - %s", self.prefix, text)
        self.close("Protocol Violation")

    def _peer_error(self, text: str) -> None:
        if "Loop detected" in text:
            self.loop(send=False)
            return
        super()._peer_error(text)

    def _connect(self, raw: bytes) -> None:
        if self.solicited or self.connect_received:
            return
        try:
            connect = decode_leaf_connect(raw)
        except ProtocolError as e:
            log.error("%s - %s", self.prefix, e.detail or "invalid CONNECT")
            self.close("Protocol Violation")
            return
        self.connect_received = True
        self.remote_id = connect.server_id
        self.remote_name = connect.name
        self.remote_cluster = connect.cluster
        self.remote_domain = connect.domain
        self.headers = connect.headers
        if connect.hub:  # the dialling server is the hub: this one is its leaf node
            self.spoke = True
            self.origin = FROM_SPOKE_LEAF
        bound = self.host.accept(self, connect)
        if bound is not None:
            self._bind(*bound)

    def _info(self, raw: bytes) -> None:
        if not self.solicited:
            return  # a leaf node's INFO (2.10+'s compression negotiation) asks nothing of a 2.9 hub
        try:
            info = decode_leaf_info(raw)
        except ProtocolError as e:
            log.error("%s - %s", self.prefix, e.detail or "invalid INFO")
            self.close("Parse Error")
            return
        if self.registered:
            self.host.hub_info(self, info)
            return
        self.remote_id = info.server_id
        self.remote_name = info.server_name
        self.remote_cluster = info.cluster
        self.remote_domain = info.domain
        self.headers = info.headers
        bound = self.host.solicit(self, info)
        if bound is not None:
            self._bind(*bound)
            self.send(enc.PING)

    def _bind(self, account: bytes, broker: Broker) -> None:
        self.account = account
        self.acc_broker = broker
        imports, exports = self.host.link_denies(self)
        self.deny_imports = Denied(self.deny_imports.patterns + imports)
        self.deny_exports = Denied(self.deny_exports.patterns + exports)
        self.interest = RemoteInterest(
            self, account, broker, heads=LEAF_HEADS, far=True, filtered=self.deny_exports.some
        )
        self.told = LeafTold(account)
        self.registered = True
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self.host.registered(self)
        self.start_pings()

    # -- output ---------------------------------------------------------------------------------

    def deliver(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None:
        if sub.filtered and self.deny_exports.message(subject):
            return
        if reply is not None and reply[0] == 36:  # "$": a JetStream delivery crosses on its deliver subject
            carried = delivery_for_link(sub, subject, reply, self.broker.writes)
            if carried is not None:
                subject, reply = carried
                tail = msg_tail(reply, hdr_len, data)
        super().deliver(sub, subject, reply, hdr_len, data, tail)

    def deliver_run(self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]) -> None:
        if sub.filtered and self.deny_exports.message(subject):
            return
        super().deliver_run(sub, subject, datas, tails)

    # -- liveness -------------------------------------------------------------------------------

    def _handshake_timeout(self) -> None:
        if not self.registered and not self.closed:
            log.error("%s - leafnode handshake not completed in %gs", self.prefix, HANDSHAKE_TIMEOUT)
            self.close("Stale Connection")

    def _auth_timeout(self) -> None:
        if not self.connect_received and not self.closed:
            log.error("%s - %s", self.prefix, ERR_AUTH_TIMEOUT)
            self.out += enc.err(ERR_AUTH_TIMEOUT)
            self.close("Authentication Timeout")

    # -- closing --------------------------------------------------------------------------------

    def _closed(self, reason: str) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self.interest is not None:
            self.interest.clear()
        remote = f" - Remote: {self.remote_name}" if self.remote_name else ""
        account = f" account: {self.account.decode(errors='replace')}" if self.account else ""
        log.info("%s - Leafnode connection closed: %s%s%s", self.prefix, reason, account, remote)
        self.host.leaf_closed(self, reason)

    def subscription_count(self) -> int:
        return self.interest.count() if self.interest is not None else 0
