"""Cluster: this server's routes to the other servers of its cluster, as nats-server forms them.

Owns the route listener, the routes it solicits (the configured ones for ever, one second
apart; gossiped ones up to ``connect_retries`` times), the registry of routes by peer server id
(a second route to the same server is closed as ``Duplicate Route``, the one kept remembers to
reconnect), gossip (a new peer's INFO is forwarded to the others, with its route URL in ``ip``;
an INFO about a server this one has no route to is a route to solicit, so one seed route builds
the full mesh), the cluster name (generated when not set, and then given up for a peer's, as
nats-server's dynamic names are), route authorization, what this server announces to its
routes (:class:`~jetpy.server.route_interest.LocalInterest`, fed by each account broker's
``watchers``) and the client URLs of the cluster that clients learn in INFO ``connect_urls``
(own first, then each peer's while its route lasts; not with ``no_advertise``), and TLS on
routes (``cluster { tls {} }``: the handshake comes first on both ends, the accepting end
verifying the dialling one's certificate with ``verify``, the dialling end always verifying the
accepting one's against ``ca_file`` and the host it dialled, as nats-server's routes do).

Accounts are a parameter: the cluster is given the brokers of the accounts it routes, by name
(every account of the server, the system account's among them: its ``$SYS`` requests and events
and the server's internal traffic between servers, the Raft groups' ``$NRG.`` subjects,
:mod:`jetpy.server.nrg`, cross routes there). A peer's interest in ``$SYS`` when this server has
no account of that name (it names another system account, or none) is ignored; any other unknown
account is logged.

Knows its server only as a :class:`ClusterServer`; each route is a
:class:`~jetpy.server.route_conn.RouteConnection` that knows the cluster as its ``RouteHost``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import secrets
from typing import Final, Protocol
from urllib.parse import quote, urlsplit

from jetpy.protocol import encode as enc
from jetpy.protocol.errors import ERR_AUTH_VIOLATION
from jetpy.protocol.route_wire import RouteConnect, RouteInfo, connect_line, info_line
from jetpy.server.broker import Broker, InterestWatcher, Subscription
from jetpy.server.config_cluster import RouteURLError, parse_route_url
from jetpy.server.dialing import credentials, dial, dial_error, hostport, redact
from jetpy.server.identity import NATS_COMPAT_VERSION, go_version
from jetpy.server.link_service import LinkService
from jetpy.server.options import ClusterOptions, ServerOptions
from jetpy.server.route_conn import RouteConnection
from jetpy.server.route_interest import TOLD_TO_ROUTES, LocalInterest, RemoteInterest, announced
from jetpy.server.tls import client_context, server_context

__all__ = [
    "ROUTE_CONNECT_DELAY",
    "ROUTE_DIAL_TIMEOUT",
    "SYSTEM_ACCOUNT",
    "Cluster",
    "ClusterServer",
    "RouteObserver",
]

log = logging.getLogger("jetpy.server")

ROUTE_CONNECT_DELAY: Final = 1.0
"""Seconds between attempts to reach a route, and before reconnecting a configured one that
dropped (nats-server's DEFAULT_ROUTE_CONNECT / DEFAULT_ROUTE_RECONNECT)."""

ROUTE_RECONNECT_JITTER: Final = 0.1
"""Up to this many seconds added to a reconnect: two servers that dropped each other's duplicate
routes do not dial again in the same instant (nats-server adds up to 100 ms too)."""

ROUTE_DIAL_TIMEOUT: Final = 1.0  # seconds a route dial may take (nats-server's DEFAULT_ROUTE_DIAL)
CONNECT_ERROR_REPORTS: Final = 3600  # a configured route still failing is logged every 3600th try
NONCE_LENGTH: Final = 15  # nats-server's route INFO carries a nonce (unused on routes) this long
SYSTEM_ACCOUNT: Final = b"$SYS"


class ClusterServer(Protocol):
    """What the cluster needs of its server."""

    server_id: str
    server_name: str
    options: ServerOptions

    def client_urls(self, websocket: bool = False) -> list[str]:
        """This server's own client (or WebSocket) URLs (``host:port``), as clients are told."""
        ...

    def topology_changed(self) -> None:
        """The cluster name or ``connect_urls`` changed: tell the clients that take async INFO."""
        ...

    def leaf_urls(self) -> list[str]:
        """This server's leaf node URLs (``host:port``; none without a leaf node listener)."""
        ...

    def leaf_urls_changed(self) -> None:
        """The cluster's leaf node URLs changed: tell the leaf nodes."""
        ...


class RouteObserver(Protocol):
    """Told of the routes as they come and go (the gateways, which spread over the cluster)."""

    url: str  # this server's gateway URL, told to the peers in the route INFO

    def route_registered(self, route: RouteConnection, info: RouteInfo) -> None: ...

    def route_gone(self, route: RouteConnection) -> None: ...

    def route_gossip(self, info: RouteInfo) -> None:
        """A peer's INFO about a gateway (``gateway_cmd``)."""
        ...


class Cluster(LinkService):
    def __init__(self, server: ClusterServer, accounts: dict[bytes, Broker]) -> None:
        super().__init__()
        self.server = server
        self.options = server.options
        self.copts: ClusterOptions = server.options.cluster
        self.server_id = server.server_id
        self.accounts = accounts
        self.broker = accounts[b"$G"] if b"$G" in accounts else next(iter(accounts.values()))
        self.dynamic = not self.copts.name
        self.name = self.copts.name or _generated_name()
        self.port = 0
        self.routes: dict[int, RouteConnection] = {}  # every route connection, by rid
        self.remotes: dict[str, RouteConnection] = {}  # registered routes, by peer server id
        self.peer_urls: dict[str, tuple[str, ...]] = {}  # client URLs of each registered peer
        self.peer_ws_urls: dict[str, tuple[str, ...]] = {}  # and its WebSocket URLs
        self.peer_leaf_urls: dict[str, tuple[str, ...]] = {}  # and its leaf node URLs
        self.advertised = False  # connect_urls are told to clients (a peer has joined once)
        self.local: dict[bytes, LocalInterest] = {acc: LocalInterest(acc) for acc in accounts}
        self._rid = 0
        self._dialing: set[str] = set()  # server ids a gossiped route is being dialled to
        self._configured: set[str] = set()  # host:port of the configured routes, lower case
        self.to_self: set[str] = set()  # configured route URLs that reached this server itself
        self._closed_totals = [0, 0, 0, 0]  # in/out msgs, in/out bytes of routes now closed
        self._watchers: dict[bytes, InterestWatcher] = {}  # each account broker's announcer
        self.observer: RouteObserver | None = None
        tls = self.copts.tls
        # routes over TLS: this server's context as the accepting end, and as the dialling one
        self._server_ssl = server_context(tls) if tls is not None else None
        self._client_ssl = client_context(tls) if tls is not None else None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        copts = self.copts
        for acc, broker in self.accounts.items():
            local = self.local[acc]
            for _subject, _queue, sub in broker.subs.items():
                if sub.client.origin in TOLD_TO_ROUTES and announced(sub):
                    local.change(sub, 1)
            self._watchers[acc] = watcher = self._announcer(local)
            broker.watchers.append(watcher)
        loop = asyncio.get_running_loop()
        port = 0 if copts.port == -1 else copts.port
        tls = copts.tls
        self._listener = await loop.create_server(
            self._new_route,
            copts.host,
            port,
            reuse_address=True,
            backlog=128,
            ssl=self._server_ssl,
            ssl_handshake_timeout=tls.timeout if tls is not None else None,
        )
        self.port = self._listener.sockets[0].getsockname()[1]
        self._running = True
        log.info("Cluster name is %s", self.name)
        if self.dynamic:
            log.warning("Cluster name was dynamically generated, consider setting one")
        log.info("Listening for route connections on %s", hostport(copts.host, self.port))
        for url in copts.routes:
            host, port = parse_route_url(url)
            self._configured.add(hostport(host, port).lower())
            self._spawn(self._solicit(url, explicit=True, first=True))

    async def stop(self) -> None:
        await self._close_links(self.routes.values())
        for acc, watcher in self._watchers.items():
            self.accounts[acc].watchers.remove(watcher)
        self._watchers.clear()
        await self._close_listener()

    def _new_route(self, url: str = "", explicit: bool = False) -> RouteConnection:
        """A route connection, tracked from the moment its socket is connected."""
        route = RouteConnection(self, url, explicit)
        self.routes[route.rid] = route
        return route

    # -- what this server says ------------------------------------------------------------------

    def route_url(self) -> str:
        """Where peers reach this server (``advertise`` if set)."""
        if self.copts.advertise:
            return self.copts.advertise
        return hostport(self.copts.host, self.port)

    def _info(self, nonce: bool, ldm: bool = False) -> bytes:
        opts = self.options
        host, _, port = self.copts.advertise.rpartition(":") if self.copts.advertise else ("", "", "")
        return info_line(
            server_id=self.server_id,
            server_name=self.server.server_name,
            version=NATS_COMPAT_VERSION,
            go=go_version(),
            host=host.strip("[]") if host else self.copts.host,
            port=int(port) if port.isdigit() else self.port,
            max_payload=opts.max_payload,
            cluster=self.name,
            cluster_dynamic=self.dynamic,
            auth_required=bool(self.copts.username),
            tls_required=self.copts.tls is not None,
            tls_verify=self.copts.tls is not None and self.copts.tls.verify,
            ip=f"nats-route://{self.copts.advertise}/" if self.copts.advertise else "",
            nonce=_nonce() if nonce else "",
            connect_urls=None if self.copts.no_advertise else self.server.client_urls(),
            ws_connect_urls=None if self.copts.no_advertise else self.server.client_urls(websocket=True),
            leafnode_urls=self.server.leaf_urls(),
            ldm=ldm,
            gateway_url=self.observer.url if self.observer is not None else "",
        )

    def greeting(self) -> bytes:
        return self._info(nonce=True)

    def connect_line(self, route: RouteConnection) -> bytes:
        user, password = credentials(route.url)
        return connect_line(
            server_id=self.server_id,
            cluster=self.name,
            dynamic=self.dynamic,
            user=user,
            password=password,
            tls=self.copts.tls is not None,
        )

    def next_rid(self) -> int:
        self._rid += 1
        return self._rid

    def connect_urls(self, websocket: bool = False) -> list[str] | None:
        """INFO ``connect_urls`` for clients: None until a peer has joined (or never, with
        ``no_advertise``), then this server's own URLs and every connected peer's (their
        WebSocket URLs for a WebSocket client)."""
        if not self.advertised or self.copts.no_advertise:
            return None
        urls = list(self.server.client_urls(websocket))
        for peer in (self.peer_ws_urls if websocket else self.peer_urls).values():
            urls.extend(u for u in peer if u not in urls)
        return urls

    def leaf_urls(self) -> list[str]:
        """The cluster's leaf node URLs: this server's, then each registered peer's, as a hub
        tells its leaf nodes (where to go should it go away)."""
        urls = list(self.server.leaf_urls())
        for peer in self.peer_leaf_urls.values():
            urls.extend(u for u in peer if u not in urls)
        return urls

    def announce_ldm(self) -> None:
        """Lame duck mode: the peers are told (INFO ``ldm``) and take this server out of the
        URLs their clients know, as nats-server's peers do."""
        line = self._info(nonce=False, ldm=True)
        for route in self.remotes.values():
            route.send(line)

    # -- a route's handshake --------------------------------------------------------------------

    def check_connect(self, route: RouteConnection, connect: RouteConnect) -> bool:
        if connect.lang:
            text = "attempted to connect to route port"
            log.error("%s - %s", route.prefix, text)
            route.out += enc.err(text)
            route.close("Incorrect Port")
            return False
        if connect.gateway:
            text = f'Rejecting connection from gateway "{connect.gateway}" on the Route port'
            log.error("%s - %s", route.prefix, text)
            route.out += enc.err(text)
            route.close("Wrong Gateway")
            return False
        copts = self.copts
        if copts.username and (connect.user != copts.username or connect.password != copts.password):
            who = f' - User "{connect.user}"' if connect.user else ""
            log.error("%s - authentication error%s", route.prefix, who)
            route.out += enc.err(ERR_AUTH_VIOLATION)
            route.close("Authentication Failure")
            return False
        if connect.cluster != self.name:
            if self.dynamic and (not connect.cluster_dynamic or self.name < connect.cluster):
                self._adopt_name(connect.cluster, connect.cluster_dynamic, keep=route)
            else:
                text = f'Rejecting connection, cluster name "{connect.cluster}" does not match "{self.name}"'
                log.error("%s - %s", route.prefix, text)
                route.out += enc.err(text)
                route.close("Cluster Name Conflict")
                return False
        return True

    def process_info(self, route: RouteConnection, info: RouteInfo, raw: bytes = b"") -> None:
        if route.registered:
            if info.gateway and info.gateway_cmd:
                if self.observer is not None:
                    self.observer.route_gossip(info)
            elif info.server_id != route.remote_id:
                self._implicit(info)
            elif info.ldm:  # the peer is going away: its clients move elsewhere, ours stay off it
                ws = self.peer_ws_urls.pop(route.remote_id, None)
                if self.peer_urls.pop(route.remote_id, None) is not None or ws is not None:
                    self.server.topology_changed()
            return
        if info.server_id == self.server_id:
            route.remote_id = info.server_id
            log.debug("%s - Detected route to self, ignoring %s", route.prefix, route.url or "")
            if route.url:
                self.to_self.add(route.url)
            route.close("Duplicate Route")
            return
        if info.cluster and info.cluster != self.name:
            if self.dynamic and (not info.cluster_dynamic or self.name < info.cluster):
                self._adopt_name(info.cluster, info.cluster_dynamic, keep=route)
            else:
                log.error("%s - cluster name from remote server conflicts", route.prefix)
                route.close("Cluster Name Conflict")
                return
        if not route.solicited and info.server_name and info.server_name == self.server.server_name:
            log.error('%s - Remote server has a duplicate name: "%s"', route.prefix, info.server_name)
            route.close("Duplicate Route")
            return
        existing = self.remotes.get(info.server_id)
        if existing is not None:
            if route.solicited and not existing.solicited:
                existing.url, existing.solicited = route.url, True
                existing.explicit = existing.explicit or route.explicit
            existing.retry = True
            log.debug('%s - Detected duplicate remote route "%s"', route.prefix, info.server_id)
            route.remote_id = info.server_id
            route.close("Duplicate Route")
            return
        self.remotes[info.server_id] = route
        self._dialing.discard(info.server_id)
        route.registered_as(info)
        log.debug('%s - Registering remote route "%s"', route.prefix, info.server_id)
        lines = b"".join(local.announce_all() for local in self.local.values())
        if lines:
            route.send(lines)
        log.debug("%s - Sent local subscriptions to route", route.prefix)
        if len(self.remotes) > 1 and raw:
            self._gossip(route, info, raw)
        if self.observer is not None:
            self.observer.route_registered(route, info)
        if info.leafnode_urls:
            self.peer_leaf_urls[info.server_id] = info.leafnode_urls
            self.server.leaf_urls_changed()
        if not self.copts.no_advertise:
            self.peer_urls[info.server_id] = info.connect_urls
            self.peer_ws_urls[info.server_id] = info.ws_connect_urls
            self.advertised = True
            self.server.topology_changed()

    def _gossip(self, route: RouteConnection, info: RouteInfo, raw: bytes) -> None:
        """Tell the other peers about the new one, so that they route to it too."""
        try:
            doc = json.loads(raw)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        doc.pop("nonce", None)
        if not info.ip:
            doc["ip"] = f"nats-route://{hostport(route.host_addr, info.port)}/"
        line = b"INFO " + json.dumps(doc, separators=(",", ":")).encode() + b"\r\n"
        for other in self.remotes.values():
            if other is not route:
                other.send(line)

    def _implicit(self, info: RouteInfo) -> None:
        """Gossip about a server this one may not have a route to yet: solicit one."""
        sid = info.server_id
        if not self._running or sid == self.server_id or sid in self.remotes or sid in self._dialing:
            return
        if hostport(info.host, info.port).lower() in self._configured:
            return  # a configured route reaches it (and retries for ever)
        if not info.ip:
            return
        url = info.ip
        if info.auth_required and self.copts.username:
            parts = urlsplit(url)
            creds = f"{quote(self.copts.username, safe='')}:{quote(self.copts.password, safe='')}@"
            url = f"{parts.scheme}://{creds}{parts.netloc.rpartition('@')[2]}{parts.path}"
        self._dialing.add(sid)
        self._spawn(self._solicit(url, explicit=False, first=True, for_id=sid))

    def _adopt_name(self, name: str, dynamic: bool, keep: RouteConnection) -> None:
        """A dynamic name gives way to a peer's (configured, or larger): every other route is
        dropped and formed again under the new name, as in nats-server."""
        log.info("Cluster name updated to %s", name)
        self.name = name
        self.dynamic = self.dynamic and dynamic
        for other in list(self.routes.values()):
            if other is not keep:
                other.close("Cluster Name Conflict")
        self.server.topology_changed()

    def interest(self, route: RouteConnection, account: bytes) -> RemoteInterest | None:
        broker = self.accounts.get(account)
        if broker is not None:
            return RemoteInterest(route, account, broker)
        if account == SYSTEM_ACCOUNT:
            log.debug("%s - ignoring the interest of $SYS, not an account here", route.prefix)
        else:
            log.error(
                '%s - Unknown account "%s" for remote interest',
                route.prefix,
                account.decode(errors="replace"),
            )
        return None

    # -- closed routes and reconnects -----------------------------------------------------------

    def route_closed(self, route: RouteConnection, reason: str) -> None:
        self.routes.pop(route.rid, None)
        t = self._closed_totals
        t[0] += route.in_msgs
        t[1] += route.out_msgs
        t[2] += route.in_bytes
        t[3] += route.out_bytes
        rid = route.remote_id
        if route.registered and self.remotes.get(rid) is route:
            del self.remotes[rid]
            if self.observer is not None:
                self.observer.route_gone(route)
            self.peer_ws_urls.pop(rid, None)
            if self.peer_leaf_urls.pop(rid, None) is not None:
                self.server.leaf_urls_changed()
            if self.peer_urls.pop(rid, None) is not None:
                self.server.topology_changed()
        if not self._running or not route.solicited:
            return
        if not (route.explicit or route.retry):
            return
        if rid and rid in self.remotes:
            log.debug('Not attempting reconnect for solicited route, already connected to "%s"', rid)
            return
        if rid == self.server_id:
            return
        log.debug('Attempting reconnect for solicited route "%s"', redact(route.url))
        delay = random.uniform(0, ROUTE_RECONNECT_JITTER) + (ROUTE_CONNECT_DELAY if route.explicit else 0.0)
        self._spawn(self._solicit(route.url, explicit=route.explicit, first=False, delay=delay))

    async def _solicit(
        self, url: str, explicit: bool, first: bool, delay: float = 0.0, for_id: str = ""
    ) -> None:
        """Dial ``url`` until connected: for ever for a configured route, else ``connect_retries``
        more times. Errors are logged as nats-server logs them."""
        try:
            host, port = parse_route_url(url)
        except RouteURLError as e:
            log.error("%s", e)
            return
        attempts = 0
        tls = self.copts.tls
        try:
            if delay:
                await asyncio.sleep(delay)
            while self._running:
                if for_id and for_id in self.remotes:
                    return
                log.debug("Trying to connect to route on %s", hostport(host, port))
                try:
                    await dial(
                        lambda: self._new_route(url, explicit),
                        host,
                        port,
                        ROUTE_DIAL_TIMEOUT,
                        tls,
                        self._client_ssl,
                    )
                    return
                except OSError as e:  # TimeoutError included
                    attempts += 1
                    text = dial_error(host, port, e)
                    if not first or attempts == 1 or attempts % CONNECT_ERROR_REPORTS == 0:
                        log.error("Error trying to connect to route (attempt %d): %s", attempts, text)
                    else:
                        log.debug("Error trying to connect to route (attempt %d): %s", attempts, text)
                    if not explicit and attempts > self.copts.connect_retries:
                        return
                    await asyncio.sleep(ROUTE_CONNECT_DELAY)
        finally:
            if for_id:
                self._dialing.discard(for_id)

    # -- this server's interest -----------------------------------------------------------------

    def _announcer(self, local: LocalInterest) -> InterestWatcher:
        remotes = self.remotes

        def announce(sub: Subscription, delta: int) -> None:
            if sub.client.origin not in TOLD_TO_ROUTES or not announced(sub):
                return
            line = local.change(sub, delta)
            if line is not None:
                for route in remotes.values():
                    route.send(line)

        return announce

    # -- state for monitoring -------------------------------------------------------------------

    def totals(self) -> tuple[int, int, int, int]:
        """(in_msgs, out_msgs, in_bytes, out_bytes) over every route, open or closed."""
        im, om, ib, ob = self._closed_totals
        for r in self.routes.values():
            im += r.in_msgs
            om += r.out_msgs
            ib += r.in_bytes
            ob += r.out_bytes
        return im, om, ib, ob

    def registered_routes(self) -> list[RouteConnection]:
        return sorted(self.remotes.values(), key=lambda r: r.rid)


def _generated_name() -> str:
    """A cluster name for a cluster without one (nats-server's are random 22-character ids)."""
    return base64.b32encode(secrets.token_bytes(15)).decode().rstrip("=")[:22]


def _nonce() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(12)).decode()[:NONCE_LENGTH]
