"""Gateways: this cluster's connections to the other clusters of a super cluster, as
nats-server forms them.

Owns the gateway listener; the remote gateways (the configured ones, dialled for ever a second
apart, a second after :data:`GATEWAY_SOLICIT_DELAY` so that the cluster forms first; and the
*implicit* ones learned by gossip, dialled ``connect_retries`` more times); one outbound
connection per remote cluster (a second one is closed) and any number of inbound ones; gossip
(a new outbound gateway is told to every route, so that each server of this cluster dials that
cluster too, and an inbound one is told of every other gateway this server knows, so that the
super cluster becomes a full mesh); this cluster's gateway URLs (this server's and every route
peer's, sent to inbound gateways when they change); gateway authorization and
``reject_unknown_cluster``; what every inbound gateway is told of this cluster's interest
(:class:`~jetpy.server.gateway_interest.ClusterInterest`, fed by each account broker's watchers;
every account is switched to interest-only as soon as a gateway connects, as nats-server 2.9+
does and says with ``gateway_iom``); and the replies mapped across gateways (``_GR_.``): a
request goes out mapped when its reply was subscribed to in the last 2 seconds, a mapped answer
that arrives for another server of this cluster is sent on over the route to it (a subscription
of that route on ``_GR_.<cluster>.<server>.>``), one for this server is published with its real
subject (an in-process handler), and every outbound gateway takes the answers for its cluster
(``_GR_.<its cluster>.>``).

Accounts are a parameter, as for the cluster: the gateways are given the brokers of the accounts
they serve, by name. Knows its server only as a :class:`GatewayServer`, its routes through the
cluster's :class:`~jetpy.server.cluster.RouteObserver` hooks; each connection is a
:class:`~jetpy.server.gateway_conn.GatewayConnection` that knows this manager as its
:class:`~jetpy.server.gateway_conn.GatewayHost`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

from jetpy.protocol import encode as enc
from jetpy.protocol.errors import ERR_AUTH_VIOLATION
from jetpy.protocol.gateway_wire import (
    CMD_ALL_SUBS_COMPLETE,
    CMD_ALL_SUBS_START,
    CMD_GOSSIP,
    OLD_REPLY_PREFIX,
    REPLY_PREFIX,
    GatewayConnect,
    GatewayInfo,
    command_line,
    connect_line,
    gossip_line,
    gw_hash,
    info_line,
    old_hash,
    routed_reply,
)
from jetpy.protocol.route_wire import RouteInfo, msg_head, sub_line
from jetpy.server.broker import Broker, Subscription
from jetpy.server.cluster import Cluster
from jetpy.server.dialing import credentials, dial, dial_error, hostport
from jetpy.server.gateway_conn import GatewayConnection
from jetpy.server.gateway_interest import (
    INTEREST_ONLY,
    TOLD_TO_GATEWAYS,
    ClusterInterest,
    InboundInterest,
    RecentSubs,
)
from jetpy.server.identity import NATS_COMPAT_VERSION, listen_hosts
from jetpy.server.link_service import LinkService
from jetpy.server.options import RemoteGateway, ServerOptions, TlsOptions
from jetpy.server.route_conn import RouteConnection
from jetpy.server.route_interest import announced
from jetpy.server.tls import client_context, server_context

__all__ = ["FORCE_INTEREST_ONLY", "GATEWAY_SOLICIT_DELAY", "GatewayServer", "Gateways", "RemoteConfig"]

log = logging.getLogger("jetpy.server")

GATEWAY_SOLICIT_DELAY: Final = 1.0
"""Seconds before the configured gateways are dialled (nats-server's defaultSolicitGatewaysDelay):
the cluster forms first, so that the remote clusters learn all of its gateway URLs."""

GATEWAY_CONNECT_DELAY: Final = 1.0  # seconds between rounds of dialling a gateway's URLs
GATEWAY_RECONNECT_JITTER: Final = 0.1  # up to this many seconds before redialling a lost one
GATEWAY_DIAL_TIMEOUT: Final = 1.0  # seconds a dial may take (nats-server's DEFAULT_ROUTE_DIAL)
CONNECT_ERROR_REPORTS: Final = 3600  # a configured gateway still failing is logged every 3600th try
HANDSHAKE_TIMEOUT: Final = 10.0  # seconds an accepted gateway has to register

FORCE_INTEREST_ONLY: dict[str, bool] = {"enabled": True}
"""Switch every account to interest-only as soon as a gateway connects (nats-server 2.9+, and what
``gateway_iom`` tells the remote). Tests turn it off to run an inbound gateway in optimistic mode,
as nats-server's own tests do; nothing else should."""


class GatewayServer(Protocol):
    """What the gateways need of their server."""

    server_id: str
    server_name: str
    options: ServerOptions

    def next_cid(self) -> int: ...


@dataclass
class RemoteConfig:
    """A remote gateway (cluster): its URLs (``host:port`` -> URL to dial), as configured and as
    learned from its INFO, and whether it was learned by gossip."""

    name: str
    implicit: bool = False
    tls: TlsOptions | None = None
    configured: tuple[str, ...] = ()
    urls: dict[str, str] = field(default_factory=dict)
    hash: bytes = b""
    old_hash: bytes = b""

    def __post_init__(self) -> None:
        self.hash = gw_hash(self.name)
        self.old_hash = old_hash(self.name)
        for url in self.configured:
            parts = urlsplit(url)
            self.urls[parts.netloc.rpartition("@")[2]] = url

    def add_urls(self, urls: tuple[str, ...] | list[str]) -> None:
        scheme = "tls" if self.tls is not None else "nats"
        for hp in urls:
            if hp and hp not in self.urls:
                self.urls[hp] = f"{scheme}://{hp}"

    def update_urls(self, urls: tuple[str, ...]) -> None:
        """The remote's INFO lists its cluster's gateway URLs: those and the configured ones."""
        keep = {k: v for k, v in self.urls.items() if v in self.configured}
        self.urls = keep
        self.add_urls(urls)


class Gateways(LinkService):
    def __init__(self, server: GatewayServer, accounts: dict[bytes, Broker]) -> None:
        super().__init__()
        self.server = server
        self.options = server.options
        self.gopts = server.options.gateway
        self.server_id = server.server_id
        self.name = self.gopts.name
        self.accounts = accounts
        self.broker = accounts[b"$G"] if b"$G" in accounts else next(iter(accounts.values()))
        self.port = 0
        self.url = ""  # this server's gateway URL (host:port)
        self.urls: dict[str, int] = {}  # this cluster's gateway URLs (refcounted: routes tell theirs)
        self.remotes: dict[str, RemoteConfig] = {}
        self.out: dict[str, GatewayConnection] = {}  # outbound, by remote gateway name
        self.inbound: dict[int, GatewayConnection] = {}  # inbound, by gid
        self.links: dict[int, GatewayConnection] = {}  # every connection, registered or not
        self.interest: dict[bytes, ClusterInterest] = {acc: ClusterInterest(acc) for acc in accounts}
        self.recent: dict[bytes, RecentSubs] = {acc: RecentSubs() for acc in accounts}
        self.cluster_hash = gw_hash(self.name)
        self.server_hash = gw_hash(self.server_id)
        self.reply_prefix = REPLY_PREFIX + self.cluster_hash + b"." + self.server_hash + b"."
        self.old_reply_prefix = OLD_REPLY_PREFIX + old_hash(self.name) + b"."
        self._closed_totals = [0, 0, 0, 0]
        self._watchers: dict[bytes, Any] = {}
        self._handlers: list[tuple[Broker, Subscription]] = []
        self._direct: dict[int, list[tuple[Broker, Subscription]]] = {}  # per link / route: reply subs
        self._route_urls: dict[int, str] = {}  # each route's gateway URL
        self.cluster: Cluster | None = None  # this server's routes (set by the server)
        tls = self.gopts.tls
        self._server_ssl = server_context(tls) if tls is not None else None
        for remote in self.gopts.gateways:
            if remote.name != self.name:
                self.remotes[remote.name] = self._config(remote)

    def _config(self, remote: RemoteGateway) -> RemoteConfig:
        return RemoteConfig(remote.name, tls=remote.tls or self.gopts.tls, configured=remote.urls)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen; the configured gateways are dialled by :meth:`solicit` (after the routes)."""
        g = self.gopts
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(
            self._accepted,
            g.host,
            0 if g.port == -1 else g.port,
            reuse_address=True,
            backlog=128,
            ssl=self._server_ssl,
            ssl_handshake_timeout=g.tls.timeout if g.tls is not None else None,
        )
        self.port = self._listener.sockets[0].getsockname()[1]
        self._running = True
        log.info("Gateway name is %s", self.name)
        log.info("Listening for gateways connections on %s", hostport(g.host, self.port))
        if g.advertise:
            self.url = g.advertise
            log.info('Advertise address for gateway "%s" is set to %s', self.name, self.url)
        else:
            # listening on every interface: the first address other than loopback, as nats-server
            # tells the other clusters (loopback only when the machine has nothing else)
            self.url = hostport(listen_hosts(g.host)[0], self.port)
            log.info('Address for gateway "%s" is %s', self.name, self.url)
        self.urls[self.url] = 1
        for acc, broker in self.accounts.items():
            for _subject, _queue, sub in broker.subs.items():
                self._watch(acc)(sub, 1)
            self._watchers[acc] = watcher = self._watch(acc)
            broker.watchers.append(watcher)
            for prefix in (self.reply_prefix, self.old_reply_prefix):
                handler = broker.subscribe_internal((prefix + b">").decode(), self._reply_handler(broker))
                self._handlers.append((broker, handler))

    def solicit(self) -> None:
        """Dial the configured gateways, after :data:`GATEWAY_SOLICIT_DELAY`."""
        for cfg in list(self.remotes.values()):
            if not cfg.implicit:
                self._spawn(self._solicit(cfg, first=True, delay=GATEWAY_SOLICIT_DELAY))

    async def stop(self) -> None:
        await self._close_links(self.links.values())
        for acc, watcher in self._watchers.items():
            self.accounts[acc].watchers.remove(watcher)
        self._watchers.clear()
        for broker, sub in self._handlers:
            broker.unsubscribe_internal(sub)
        self._handlers.clear()
        await self._close_listener()

    def _accepted(self) -> GatewayConnection:
        link = GatewayConnection(self, self.server.next_cid())
        self.links[link.rid] = link
        loop = asyncio.get_running_loop()
        loop.call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout, link)
        if self.gopts.username:
            loop.call_later(self.gopts.auth_timeout, self._auth_timeout, link)
        return link

    def _handshake_timeout(self, link: GatewayConnection) -> None:
        if not link.registered and not link.closed:
            log.error("%s - gateway handshake not completed in %gs", link.prefix, HANDSHAKE_TIMEOUT)
            link.close("Stale Connection")

    def _auth_timeout(self, link: GatewayConnection) -> None:
        if not link.connect_received and not link.closed:
            log.error("%s - Authentication Timeout", link.prefix)
            link.out += enc.err("Authentication Timeout")
            link.close("Authentication Timeout")

    # -- what this server says ------------------------------------------------------------------

    def url_list(self) -> list[str]:
        return list(self.urls)

    def greeting(self) -> bytes:
        host, _, port = self.url.rpartition(":")
        return info_line(
            server_id=self.server_id,
            server_name=self.server.server_name,
            version=NATS_COMPAT_VERSION,
            host=host.strip("[]"),
            port=int(port) if port.isdigit() else self.port,
            max_payload=self.options.max_payload,
            gateway=self.name,
            gateway_urls=self.url_list(),
            gateway_url=self.url,
            auth_required=bool(self.gopts.username),
            tls_required=self.gopts.tls is not None,
            iom=FORCE_INTEREST_ONLY["enabled"],
        )

    def _urls_changed(self) -> None:
        """Tell the inbound gateways this cluster's gateway URLs (nats-server's async INFO)."""
        line = self.greeting()
        for link in self.inbound.values():
            link.send(line)

    # -- handshakes -----------------------------------------------------------------------------

    def check_connect(self, link: GatewayConnection, connect: GatewayConnect) -> bool:
        if connect.lang or not connect.gateway:
            text = "attempted to connect to gateway port"
            log.error("%s - %s", link.prefix, text)
            link.out += enc.err(text)
            link.close("Incorrect Port")
            return False
        g = self.gopts
        if g.username and (connect.user != g.username or connect.password != g.password):
            who = f' - User "{connect.user}"' if connect.user else ""
            log.error("%s - authentication error%s", link.prefix, who)
            link.out += enc.err(ERR_AUTH_VIOLATION)
            link.close("Authentication Failure")
            return False
        if g.reject_unknown and connect.gateway not in self.remotes:
            log.error('%s - Rejecting connection from gateway "%s"', link.prefix, connect.gateway)
            link.out += enc.err(f'Connection to gateway "{self.name}" rejected')
            link.close("Wrong Gateway")
            return False
        return True

    def outbound_info(self, link: GatewayConnection, info: GatewayInfo, first: bool) -> None:
        if not info.gateway:
            text = f'Attempt to connect to gateway "{link.name}" using wrong port'
            log.error("%s - %s", link.prefix, text)
            link.out += enc.err(text)
            link.close("Incorrect Port")
            return
        if info.gateway != link.name:
            if not first and info.gateway_cmd == CMD_GOSSIP:
                if not (self.gopts.reject_unknown and info.gateway not in self.remotes):
                    self.implicit(info.gateway, info.gateway_urls)
                return
            log.error(
                '%s - Failing connection to gateway "%s", remote gateway name is "%s"',
                link.prefix,
                link.name,
                info.gateway,
            )
            link.out += enc.err(
                f'Connection from "{self.name}" rejected, wanted to connect to "{link.name}", this is "{info.gateway}"'
            )
            link.close("Wrong Gateway")
            return
        cfg = self.remotes.get(link.name)
        if cfg is not None and info.gateway_urls:
            cfg.update_urls(info.gateway_urls)
        if first:
            user, password = credentials(link.url)
            if not user and self.gopts.username:
                user, password = self.gopts.username, self.gopts.password
            tls = cfg is not None and cfg.tls is not None
            link.send(
                connect_line(
                    server_id=self.server_id, gateway=self.name, user=user, password=password, tls=tls
                )
            )
            log.debug('%s - Gateway connect protocol sent to "%s"', link.prefix, link.name)
            link.send(self.greeting())
            if link.name in self.out:
                link.no_reconnect = True
                link.close("Wrong Gateway")
                return
            self.out[link.name] = link
            link.registered_as(info)
            log.info(
                '%s - Outbound gateway connection to "%s" (%s) registered',
                link.prefix,
                link.name,
                info.server_id,
            )
            if not info.gateway_iom:
                link.open_accounts(list(self.accounts))
            hashes = [REPLY_PREFIX + (cfg.hash if cfg else gw_hash(link.name)) + b".>"]
            hashes.append(OLD_REPLY_PREFIX + (cfg.old_hash if cfg else old_hash(link.name)) + b".>")
            self._direct[link.rid] = [
                (b, self._remote_sub(link, acc, b, h)) for acc, b in self.accounts.items() for h in hashes
            ]
        self._tell_routes(info.gateway, info.gateway_urls)

    def inbound_info(self, link: GatewayConnection, info: GatewayInfo) -> None:
        self.inbound[link.rid] = link
        link.registered_as(info)
        log.info(
            '%s - Inbound gateway connection from "%s" (%s) registered',
            link.prefix,
            info.gateway,
            info.server_id,
        )
        lines = b"".join(
            sub_line(acc, subject, queue, 1)
            for acc, ci in self.interest.items()
            for subject, queue in ci.queues()
        )
        if lines:
            link.send(lines)
            log.debug("%s - Sent queue subscriptions to gateway", link.prefix)
        self.implicit(info.gateway, info.gateway_urls)
        for name, cfg in self.remotes.items():
            if name != info.gateway and cfg.urls:
                link.send(gossip_line(name, list(cfg.urls), server_id=self.server_id))
        if FORCE_INTEREST_ONLY["enabled"]:
            for acc in self.accounts:
                self.switch_to_interest_only(link, acc)

    def implicit(self, name: str, urls: tuple[str, ...] | list[str]) -> None:
        """A gateway learned of (gossip, an inbound connection): dial it unless known."""
        if name == self.name or not self._running:
            return
        cfg = self.remotes.get(name)
        if cfg is not None:
            cfg.add_urls(urls)
            return
        cfg = RemoteConfig(name, implicit=True, tls=self.gopts.tls)
        cfg.add_urls(urls)
        if not cfg.urls:
            return
        self.remotes[name] = cfg
        self._spawn(self._solicit(cfg, first=True))

    def _tell_routes(self, name: str, urls: tuple[str, ...]) -> None:
        """Flood this cluster with a gateway: each server makes sure it has an outbound too."""
        if self.cluster is None or not urls:
            return
        line = gossip_line(
            name, list(urls), server_id="GW" + self.server_id, server_name=self.server.server_name
        )
        for route in self.cluster.registered_routes():
            route.send(line)

    # -- dialling -------------------------------------------------------------------------------

    async def _solicit(self, cfg: RemoteConfig, first: bool, delay: float = 0.0) -> None:
        kind = "implicit" if cfg.implicit else "explicit"
        attempts = 0
        try:
            if delay:
                await asyncio.sleep(delay)
            while self._running:
                if cfg.name in self.out:
                    return
                urls = list(cfg.urls.items())
                if not urls:
                    return
                random.shuffle(urls)
                attempts += 1
                report = not first or attempts == 1 or attempts % CONNECT_ERROR_REPORTS == 0
                for hp, url in urls:
                    parts = urlsplit(url)
                    host, port = parts.hostname or "", parts.port or 0
                    address = hostport(host, port)
                    say = log.info if report else log.debug
                    say(
                        'Connecting to %s gateway "%s" (%s) at %s (attempt %d)',
                        kind,
                        cfg.name,
                        hp,
                        address,
                        attempts,
                    )
                    try:
                        await dial(
                            partial(self._dialled, cfg.name, url),
                            host,
                            port,
                            GATEWAY_DIAL_TIMEOUT,
                            cfg.tls,
                            client_context(cfg.tls) if cfg.tls is not None else None,
                        )
                        return
                    except OSError as e:
                        (log.error if report else log.debug)(
                            'Error connecting to %s gateway "%s" (%s) at %s (attempt %d): %s',
                            kind,
                            cfg.name,
                            hp,
                            address,
                            attempts,
                            dial_error(host, port, e),
                        )
                    if not self._running:
                        return
                if cfg.implicit and (
                    self.gopts.connect_retries == 0 or attempts > self.gopts.connect_retries
                ):
                    if any(x.name == cfg.name for x in self.inbound.values()):
                        continue
                    if self.remotes.get(cfg.name) is cfg:
                        del self.remotes[cfg.name]
                    return
                await asyncio.sleep(GATEWAY_CONNECT_DELAY)
        except asyncio.CancelledError:
            raise

    def _dialled(self, name: str, url: str) -> GatewayConnection:
        link = GatewayConnection(self, self.server.next_cid(), outbound_to=name, url=url)
        self.links[link.rid] = link
        return link

    # -- closed connections ---------------------------------------------------------------------

    def gateway_closed(self, link: GatewayConnection, reason: str) -> None:
        self.links.pop(link.rid, None)
        t = self._closed_totals
        t[0] += link.in_msgs
        t[1] += link.out_msgs
        t[2] += link.in_bytes
        t[3] += link.out_bytes
        for broker, sub in self._direct.pop(link.rid, []):
            broker.remove_remote(sub)
        if not link.outbound:
            self.inbound.pop(link.rid, None)
            return
        if self.out.get(link.name) is link:
            del self.out[link.name]
        cfg = self.remotes.get(link.name)
        if not self._running or link.no_reconnect or cfg is None:
            return
        delay = random.uniform(0, GATEWAY_RECONNECT_JITTER) + (0.0 if cfg.implicit else GATEWAY_CONNECT_DELAY)
        self._spawn(self._solicit(cfg, first=False, delay=delay))

    # -- this cluster's interest ----------------------------------------------------------------

    def _watch(self, account: bytes) -> Any:
        interest = self.interest[account]
        recent = self.recent[account]
        inbound = self.inbound

        def watch(sub: Subscription, delta: int) -> None:
            if sub.client.origin not in TOLD_TO_GATEWAYS or not announced(sub):
                return
            subject = sub.subject
            if subject.startswith((REPLY_PREFIX, OLD_REPLY_PREFIX)):
                return
            if delta > 0:
                recent.add(subject, time.monotonic())
            change = interest.change(subject, sub.queue, delta)
            if change:
                for link in inbound.values():
                    link.tell(account, subject, sub.queue, change > 0)

        return watch

    def account(self, account: bytes) -> Broker | None:
        return self.accounts.get(account)

    def has_interest(self, account: bytes) -> bool:
        ci = self.interest.get(account)
        return ci is not None and bool(ci)

    def switch_to_interest_only(self, link: GatewayConnection, account: bytes) -> None:
        told = link.told.get(account)
        if told is None:
            told = link.told[account] = InboundInterest()
        if told.mode == INTEREST_ONLY:
            return
        told.mode = INTEREST_ONLY
        told.refused.clear()
        link.told_none.discard(account)
        ci = self.interest.get(account)
        name = account.decode(errors="replace")
        log.debug(
            '%s - Gateway "%s": switching account "%s" to Interest-Only mode', link.prefix, link.name, name
        )
        subs = b"".join(sub_line(account, s, None, 0) for s in ci.plain()) if ci is not None else b""
        link.send(
            command_line(self.name, CMD_ALL_SUBS_START, account)
            + subs
            + command_line(self.name, CMD_ALL_SUBS_COMPLETE, account)
        )
        log.debug(
            '%s - Gateway "%s": switching account "%s" to Interest-Only mode complete',
            link.prefix,
            link.name,
            name,
        )

    # -- mapped replies -------------------------------------------------------------------------

    def mapped_reply(self, account: bytes, reply: bytes, link: GatewayConnection) -> bytes | None:
        if reply.startswith((REPLY_PREFIX, OLD_REPLY_PREFIX)):
            return None
        recent = self.recent.get(account)
        if recent is None or not recent.matches(reply, time.monotonic()):
            return None
        return (self.reply_prefix if link.nrp else self.old_reply_prefix) + reply

    def _reply_handler(self, broker: Broker) -> Any:
        """An answer mapped for this server: published with its real subject (to this server's
        subscribers, its routes' and the gateways with interest, as a local publish)."""

        def handle(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            mapped = routed_reply(subject)
            if mapped is not None:
                broker.publish(None, mapped[2], reply, hdr_len, data)

        return handle

    def _remote_sub(self, client: Any, account: bytes, broker: Broker, subject: bytes) -> Subscription:
        sub = Subscription(client, subject, None, account)
        sub.prefix = msg_head(account, False)
        sub.hprefix = msg_head(account, True)
        broker.add_remote(sub)
        return sub

    # -- the cluster's routes (RouteObserver) ---------------------------------------------------

    def route_registered(self, route: RouteConnection, info: RouteInfo) -> None:
        if info.gateway_url and info.gateway_url not in self.urls:
            self._route_urls[route.rid] = info.gateway_url
            self.urls[info.gateway_url] = self.urls.get(info.gateway_url, 0) + 1
            self._urls_changed()
        elif info.gateway_url:
            self._route_urls[route.rid] = info.gateway_url
            self.urls[info.gateway_url] += 1
        for name in self.out:
            cfg = self.remotes.get(name)
            if cfg is not None and cfg.urls:
                route.send(
                    gossip_line(
                        name,
                        list(cfg.urls),
                        server_id="GW" + self.server_id,
                        server_name=self.server.server_name,
                    )
                )
        subject = REPLY_PREFIX + self.cluster_hash + b"." + gw_hash(info.server_id) + b".>"
        self._direct[-route.rid] = [
            (b, self._remote_sub(route, acc, b, subject)) for acc, b in self.accounts.items()
        ]

    def route_gone(self, route: RouteConnection) -> None:
        url = self._route_urls.pop(route.rid, "")
        if url and url in self.urls:
            self.urls[url] -= 1
            if self.urls[url] <= 0 and url != self.url:
                del self.urls[url]
                self._urls_changed()
        for broker, sub in self._direct.pop(-route.rid, []):
            broker.remove_remote(sub)

    def route_gossip(self, info: RouteInfo) -> None:
        if info.gateway_cmd == CMD_GOSSIP:
            self.implicit(info.gateway, info.gateway_urls)
        else:
            log.error("Unknown command %d from server %s", info.gateway_cmd, info.server_id)

    # -- state for monitoring -------------------------------------------------------------------

    def totals(self) -> tuple[int, int, int, int]:
        """(in_msgs, out_msgs, in_bytes, out_bytes) over every gateway connection, open or closed."""
        im, om, ib, ob = self._closed_totals
        for x in self.links.values():
            im += x.in_msgs
            om += x.out_msgs
            ib += x.in_bytes
            ob += x.out_bytes
        return im, om, ib, ob
