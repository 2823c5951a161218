"""Server: the composition root. Listens, owns the broker, connections, monitoring and JetStream.

Embeddable in any asyncio program::

    async with Server(port=0, store_dir=tmp) as srv:
        nc = await nats.connect(srv.client_url)

Knows how the pieces fit together and in which order they start and stop; the pieces know
nothing of each other, nor of this class, beyond the protocols they own and it satisfies:
:class:`~jetpy.server.connection.ConnectionHost` (a client connection's view of its server),
:class:`~jetpy.server.monitor_endpoints.MonitoredServer` (the monitor's) and, towards JetStream,
:class:`~jetpy.server.js_service.JetStreamService`. Only the entry points import this module.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from jetpy.protocol.errors import ERR_MAX_ACCOUNT_CONNECTIONS, ERR_MAX_CONNECTIONS, ERR_MAX_SUBSCRIPTIONS
from jetpy.server.accounts import Account, Accounts
from jetpy.server.auth import Authenticator
from jetpy.server.broker import Broker
from jetpy.server.client_log import ClientIdentity, ClientLog
from jetpy.server.cluster import Cluster
from jetpy.server.config_cluster import check_cluster_options, cluster_size
from jetpy.server.config_gateway import check_gateway_options
from jetpy.server.config_leaf import check_leaf_options
from jetpy.server.config_operator import FULL, check_resolver_options
from jetpy.server.connection import PLAIN, ClientConnection
from jetpy.server.gateway import Gateways
from jetpy.server.identity import client_info, info_document, listen_hosts, new_server_id
from jetpy.server.js_service import JetStreamService
from jetpy.server.js_wiring import AccountsJetStream, start_jetstream
from jetpy.server.jscluster import ClusteredJetStream
from jetpy.server.lameduck import lame_duck
from jetpy.server.leafnodes import LeafNodes
from jetpy.server.monitor import Monitor
from jetpy.server.nrg import GroupConfig, RaftHost, groups_root
from jetpy.server.options import TLS_TIMEOUT, ServerOptions, TlsOptions
from jetpy.server.resolver import AccountResolver
from jetpy.server.stack import Listener
from jetpy.server.sysevents import SystemEvents
from jetpy.server.tls import TlsLayer, server_context
from jetpy.server.websocket import WebSocketLayer, WebSocketSettings, origin_parts

__all__ = ["Server"]

log = logging.getLogger("jetpy.server")

_AUTH_OPTIONS = frozenset({"username", "password", "token", "users", "operator"})

MAX_CLOSED_CONNECTIONS = 10_000  # closed connections remembered for /connz?state=closed
SHUTDOWN_FLUSH_TIMEOUT = 2.0  # seconds to let buffered output drain on shutdown
MAX_SUBS_LOG_INTERVAL = 2.0  # seconds between two "maximum subscriptions exceeded" log lines


class Server:
    def __init__(
        self,
        options: ServerOptions | None = None,
        *,
        raft_config: GroupConfig | None = None,
        **overrides: Any,
    ) -> None:
        if options is None:
            options = ServerOptions(host="127.0.0.1", port=0)
            if "store_dir" in overrides and "jetstream" not in overrides:
                overrides["jetstream"] = True
        self.options = dataclasses.replace(options, **overrides) if overrides else options
        self.server_id = new_server_id()
        self.server_name = self.options.server_name or self.server_id
        self.accounts = Accounts(self.options, self._cluster_name)
        self.broker = self.accounts.global_account.broker  # the global account's
        self.client_listener = self._client_listener(self.options)
        self.ws_listener = self._ws_listener(self.options)
        self.auth = Authenticator(self.options)
        self.connections: dict[int, ClientConnection] = {}
        self.closed_connections: collections.deque[ClientConnection] = collections.deque(
            maxlen=MAX_CLOSED_CONNECTIONS
        )
        self.total_connections = 0
        self.slow_consumers = 0
        self.auth_failures = 0
        self.violations: dict[str, int] = {}  # permission violations by kind, for /metrics
        self._max_subs_logged = float("-inf")
        self.client_log = ClientLog(log)
        self.start_time = time.time()
        self.port = 0
        self.http_port = 0
        self.ws_port = 0
        self._cid = 0
        self._listener: asyncio.Server | None = None
        self._ws_server: asyncio.Server | None = None
        self._ldm = False  # in lame duck mode
        self._monitor: Monitor | None = None
        self.jetstream: JetStreamService | None = None
        self.cluster: Cluster | None = None
        self.gateways: Gateways | None = None
        self.leafnodes: LeafNodes | None = None
        self.raft: RaftHost | None = None  # this server's Raft groups (started by what replicates)
        # JetStream on a cluster (jscluster), its groups' timers (None: nats-server's)
        self.raft_config = raft_config
        self.js_cluster: ClusteredJetStream | None = None
        self._closed_in_msgs = 0
        self._closed_out_msgs = 0
        self._closed_in_bytes = 0
        self._closed_out_bytes = 0
        self._stopped = asyncio.Event()
        self._infos: dict[Listener, dict[str, Any]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.events = SystemEvents(self, self._spawn)
        self.resolver: AccountResolver | None = None  # the full account resolver

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        opts = self.options
        check_cluster_options(opts)
        check_gateway_options(opts)
        check_leaf_options(opts)
        check_resolver_options(opts)
        clustered = opts.jetstream and opts.cluster.enabled
        self.accounts.start()
        port = 0 if opts.port == -1 else opts.port
        client = self.client_listener
        self._listener = await loop.create_server(
            lambda: ClientConnection(self, client), opts.host, port, reuse_address=True, backlog=1024
        )
        sock = self._listener.sockets[0]
        self.port = sock.getsockname()[1]
        ws, wso = self.ws_listener, opts.websocket
        if ws is not None and wso is not None:
            ws_host = wso.host
            self._ws_server = await loop.create_server(
                lambda: ClientConnection(self, ws),
                ws_host,
                0 if wso.port == -1 else wso.port,
                reuse_address=True,
                backlog=1024,
            )
            self.ws_port = self._ws_server.sockets[0].getsockname()[1]
            scheme = "wss" if ws.tls is not None else "ws"
            log.info("Listening for websocket clients on %s://%s:%d", scheme, ws_host, self.ws_port)
            if ws.tls is None:
                log.warning("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!")
        self._build_infos()
        self.events.start()
        if opts.jetstream and not clustered:
            self.jetstream = await start_jetstream(opts, self.accounts, self.server_name)
        if opts.operator is not None and opts.operator.resolver == FULL:
            self.resolver = AccountResolver(self, opts.operator, self._spawn)
            self.resolver.start()
        if opts.http_port or opts.https_port:
            self._monitor = Monitor(self, server_context(opts.tls) if opts.https_port and opts.tls else None)
            self.http_port = await self._monitor.start()
        log.info("Listening for client connections on %s:%d", opts.host, self.port)
        if client.tls is not None:
            log.info("TLS required for client connections")
            if client.tls_first:
                log.warning('Clients that are not using "TLS Handshake First" option will fail to connect')
        log.info("Server is ready")
        if opts.leafnodes.enabled:  # its own leaf nodes (first: the routes tell their peers its
            # leaf node URL) and the hubs it is a leaf node of
            self.leafnodes = LeafNodes(self)
            await self.leafnodes.start()
        if opts.gateway.enabled:  # listening first: the routes tell their peers its URL
            # every account crosses the gateways in its own name, the system account's too
            # (its $SYS requests reach every server of the super cluster, as nats-server's)
            self.gateways = Gateways(self, self.accounts.brokers())
            await self.gateways.start()
        # The Raft groups' $NRG. traffic between servers is the system account's (it crosses the
        # routes there, apart from every other account's); without one (no_system_account) the
        # groups have a broker of their own that no route carries.
        system = self.accounts.system()
        self.raft = RaftHost(
            self.server_name,
            system.broker if system is not None else Broker(),
            groups_root(opts.store_dir, system.name if system is not None else "$SYS"),
            self._peer_names,
        )
        # clustered JetStream answers the other servers' questions about the meta group from
        # before its routes are up: a server they reach is in their view from the start (not
        # settled yet), so none founds the group without it while its JetStream starts
        cjs = self._clustered_jetstream(self.raft) if clustered else None
        if opts.cluster.enabled:  # as nats-server, routes once clients can be told where to go
            # every account crosses the routes, the system account's too (its $SYS requests and
            # events, the Raft groups' traffic); the gateways every account too
            self.cluster = Cluster(self, self.accounts.brokers())
            if self.gateways is not None:
                self.cluster.observer = self.gateways
                self.gateways.cluster = self.cluster
            await self.cluster.start()
        if self.gateways is not None:
            self.gateways.solicit()
        if cjs is not None:
            self.jetstream = await start_jetstream(opts, self.accounts, self.server_name, cjs.prepare)
            await cjs.start()

    def _clustered_jetstream(self, raft: RaftHost) -> ClusteredJetStream:
        """The cluster's JetStream, answering about the meta group (started once the routes are)."""
        opts = self.options
        system = self.accounts.system()
        cjs = ClusteredJetStream(
            self.server_name,
            lambda: self.cluster.name if self.cluster is not None else opts.cluster.name,
            raft,
            raft.broker,  # the system account's, as the Raft groups' traffic
            self._peer_names,
            self._foreign_jetstream,
            # the routes' servers (one of them this one under another address, once a route
            # reaches it)
            lambda: cluster_size(opts.cluster, self.cluster.to_self if self.cluster is not None else ()),
            self.raft_config,
            system.name if system is not None else "",
            opts.server_tags,
        )
        self.js_cluster = cjs
        cjs.answer_forming()
        return cjs

    async def lame_duck(self) -> None:
        """Lame duck mode (``jetpy.server.lameduck``): stop accepting, tell the clients, close
        them gradually, then shut down."""
        if self._listener is None or self._ldm:
            return
        self._ldm = True
        opts = self.options
        await lame_duck(self, opts.lame_duck_duration, opts.lame_duck_grace_period)
        await self.shutdown()

    def stop_accepting(self) -> None:
        for server in (self._listener, self._ws_server):
            if server is not None:
                server.close()

    def clients(self) -> list[ClientConnection]:
        return list(self.connections.values())

    def announce_ldm(self) -> None:
        if self.cluster is not None:  # the peers drop this server from their clients' connect_urls
            self.cluster.announce_ldm()
        for c in self.connections.values():
            if c.connected and c.protocol >= 1 and not c.closed:
                c.send(
                    client_info(
                        self._infos[c.listener],
                        c.cid,
                        c.host,
                        c.nonce,
                        ldm=True,
                        cluster=self._cluster_info(c),
                    )
                )

    async def shutdown(self) -> None:
        """Stop accepting, flush every client's pending output, close them, stop JetStream."""
        if self._listener is None:
            return
        listener, self._listener = self._listener, None
        listener.close()
        ws_server, self._ws_server = self._ws_server, None
        if ws_server is not None:
            ws_server.close()
        if self.js_cluster is not None:
            await self.js_cluster.stop()
            self.js_cluster = None
        if self.raft is not None:  # every group's log synced and closed while its peers are reachable
            await self.raft.stop()
            self.raft = None
        if self.leafnodes is not None:
            await self.leafnodes.stop()
        if self.gateways is not None:
            await self.gateways.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        closing = list(self.connections.values())
        for conn in closing:
            conn.close("Server Shutdown")
        # let every client's buffered output drain before the loop goes away (bounded)
        if closing:
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(c.wait_closed() for c in closing), return_exceptions=True),
                    SHUTDOWN_FLUSH_TIMEOUT,
                )
            except TimeoutError:
                log.warning("shutdown: some clients did not drain in %.0fs", SHUTDOWN_FLUSH_TIMEOUT)
        if self.jetstream is not None:
            await self.jetstream.stop()
            self.jetstream = None
        if self._monitor is not None:
            await self._monitor.stop()
            self._monitor = None
        if self.resolver is not None:
            self.resolver.stop()
            self.resolver = None
        self.events.stop()
        self.accounts.stop()
        for task in list(self._background):
            task.cancel()
        try:
            await asyncio.wait_for(listener.wait_closed(), SHUTDOWN_FLUSH_TIMEOUT)
        except TimeoutError:
            pass
        self._stopped.set()

    async def wait_closed(self) -> None:
        await self._stopped.wait()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- a configuration reload ---------------------------------------------------------------

    def reload(self, new: ServerOptions, changed: set[str]) -> None:
        """Take options a reload may change (``reload.diff_options`` decided which, and
        ``reload.reload_config`` logged them) into the running server and its clients."""
        self.options = new
        if changed & _AUTH_OPTIONS:
            self.auth = Authenticator(new)
        if changed & {"max_control_line", "max_payload"}:
            for conn in list(self.connections.values()):
                conn.limits_changed(new.max_control_line, new.max_payload)
        if changed & _AUTH_OPTIONS:
            for conn in list(self.connections.values()):
                conn.reauthorize()
        if changed & {"accounts", "mappings"}:
            remapped = set(self.accounts.reload_mappings(new))
            for conn in self.connections.values():
                if conn.account in remapped:
                    conn.account_changed()
        over = len(self.connections) - new.max_connections
        if "max_connections" in changed and new.max_connections > 0 and over > 0:
            for conn in list(self.connections.values())[-over:]:  # the newest go first
                conn.log.error(conn.ident, ERR_MAX_CONNECTIONS)
                conn.close_with_error(ERR_MAX_CONNECTIONS, reason="Maximum Connections Exceeded")
            log.info("Closed %d connections to fall within max_connections", over)
        self._build_infos()  # what new clients are told (max_payload, auth)

    # -- accounts the resolver adds and changes -------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        return self.events.server_info()

    async def account_added(self, account: Account) -> None:
        if isinstance(self.jetstream, AccountsJetStream):  # clustered: its engine hooked in too
            cjs = self.js_cluster
            await self.jetstream.add_account(account, self.accounts.system(), cjs.prepare if cjs else None)
            if cjs is not None:
                cjs.account_started(account.name)

    def account_updated(self, account: Account) -> None:
        """An account JWT changed: its clients log in again (one revoked is closed), and the
        newest of them past its connection limit are closed, as nats-server closes them."""
        members = [c for c in self.connections.values() if c.account is account]
        for conn in members:
            conn.reauthorize()
        trusted = self.auth.trusted
        claims = trusted.accounts.get(account.name) if trusted is not None else None
        limit = claims.nats.limits.conn if claims is not None else -1
        live = [c for c in members if not c.closed]
        if 0 <= limit < len(live):
            for conn in live[limit:]:  # in the order they connected: the newest go
                conn.log.error(conn.ident, ERR_MAX_ACCOUNT_CONNECTIONS)
                conn.close_with_error(
                    ERR_MAX_ACCOUNT_CONNECTIONS, reason="Maximum Account Connections Exceeded"
                )

    # -- addresses ------------------------------------------------------------------------------

    @property
    def client_url(self) -> str:
        host = self.options.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"{'tls' if self.options.tls else 'nats'}://{host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        host = self.options.http_host or self.options.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        scheme = "https" if self.options.https_port else "http"
        return f"{scheme}://{host}:{self.http_port}"

    # -- connections ----------------------------------------------------------------------------

    def next_cid(self) -> int:
        self._cid += 1
        return self._cid

    def register(self, conn: ClientConnection) -> bool:
        if len(self.connections) >= self.options.max_connections:
            return False
        self.connections[conn.cid] = conn
        self.total_connections += 1
        return True

    def unregister(self, conn: ClientConnection, reason: str) -> None:
        if self.connections.pop(conn.cid, None) is None:
            return
        self._closed_in_msgs += conn.in_msgs
        self._closed_out_msgs += conn.out_msgs
        self._closed_in_bytes += conn.in_bytes
        self._closed_out_bytes += conn.out_bytes
        conn.close_reason = conn.close_reason or reason
        conn.stop_time = time.time()
        self.closed_connections.append(conn)
        if conn.connected:
            account = conn.account
            account.connections -= 1
            t = account.closed_traffic
            t[0] += conn.in_msgs
            t[1] += conn.out_msgs
            t[2] += conn.in_bytes
            t[3] += conn.out_bytes
        self.events.disconnected(conn)

    def max_subs_exceeded(self, who: ClientIdentity) -> None:
        now = time.monotonic()
        if now - self._max_subs_logged >= MAX_SUBS_LOG_INTERVAL:
            self._max_subs_logged = now
            self.client_log.error(who, ERR_MAX_SUBSCRIPTIONS)

    def connected(self, conn: ClientConnection) -> None:
        account = conn.account
        account.connections += 1
        account.total_connections += 1
        self.events.connected(conn)

    def account_broker(self, name: str) -> Broker | None:
        """The broker of the account ``name`` (None: no such account here)."""
        account = self.accounts.get(name)
        return account.broker if account is not None else None

    def leaf_urls(self) -> list[str]:
        """This server's leaf node URL, as its routes tell their peers (none without a leaf node
        listener, or with ``no_advertise``)."""
        leaf = self.leafnodes
        if leaf is None or not leaf.url or self.options.leafnodes.no_advertise:
            return []
        return [leaf.url]

    def hub_leaf_urls(self) -> list[str]:
        """The leaf node URLs a leaf node is told: the cluster's, or this server's alone."""
        return self.cluster.leaf_urls() if self.cluster is not None else self.leaf_urls()

    def leaf_urls_changed(self) -> None:
        if self.leafnodes is not None:
            self.leafnodes.urls_changed()

    def cluster_name(self) -> str:
        return self.cluster.name if self.cluster is not None else ""

    def system_account_name(self) -> str:
        system = self.accounts.system()
        return system.name if system is not None else ""

    def account_mapping(self, name: str) -> tuple[Callable[[bytes], bytes], list[str]] | None:
        """The account's subject mapping, as a leaf node's messages take it (see LeafNodes)."""
        account = self.accounts.get(name)
        if account is None or account.mapper is None:
            return None
        found = account

        def map_subject(subject: bytes) -> bytes:
            mapper = found.mapper  # a reload may have given the account new mappings
            return mapper.map(subject) if mapper is not None else subject

        return map_subject, [m.source for m in account.options.mappings]

    def leaf_cluster(self) -> str:
        """The cluster name a leaf node tells its hub: its cluster's, else its own name."""
        return self.cluster.name if self.cluster is not None else self.server_name

    def _cluster_name(self) -> str:
        """The cluster's name now ("" without one): what cluster-specific mappings follow."""
        return self.cluster.name if self.cluster is not None else ""

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in the background until it ends or the server shuts down."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def totals(self) -> tuple[int, int, int, int]:
        """(in_msgs, out_msgs, in_bytes, out_bytes) over every client and route, open or closed."""
        im, om, ib, ob = (
            self._closed_in_msgs,
            self._closed_out_msgs,
            self._closed_in_bytes,
            self._closed_out_bytes,
        )
        for c in self.connections.values():
            im += c.in_msgs
            om += c.out_msgs
            ib += c.in_bytes
            ob += c.out_bytes
        for peers in (self.cluster, self.gateways, self.leafnodes):
            if peers is not None:
                rim, rom, rib, rob = peers.totals()
                im, om, ib, ob = im + rim, om + rom, ib + rib, ob + rob
        return im, om, ib, ob

    # -- INFO -----------------------------------------------------------------------------------

    @staticmethod
    def _client_listener(opts: ServerOptions) -> Listener:
        """The client port's connections: plain, or TLS as the tls block says."""
        tls = opts.tls
        if tls is None:
            return PLAIN
        ctx = server_context(tls)
        return Listener(
            tls=ctx,
            tls_first=tls.handshake_first,
            tls_timeout=tls.timeout,
            tls_map=tls.verify_and_map,
            layers=lambda: [TlsLayer(ctx)],
        )

    @staticmethod
    def _ws_listener(opts: ServerOptions) -> Listener | None:
        """The WebSocket port's connections: an upgrade (over TLS unless no_tls), then NATS."""
        wso = opts.websocket
        if wso is None or not wso.port:
            return None
        settings = WebSocketSettings(
            compression=wso.compression,
            same_origin=wso.same_origin,
            allowed=frozenset(p for p in map(origin_parts, wso.allowed_origins) if p is not None),
            tls=wso.tls is not None,
            max_message=opts.max_payload + opts.max_control_line + 64 * 1024,
        )
        if wso.tls is None:
            return Listener(
                tls_timeout=wso.handshake_timeout or TLS_TIMEOUT,
                kind="websocket",
                layers=lambda: [WebSocketLayer(settings)],
            )
        ctx = server_context(wso.tls)
        return Listener(
            tls=ctx,
            tls_first=True,
            tls_timeout=wso.handshake_timeout or TLS_TIMEOUT,
            tls_map=wso.tls.verify_and_map,
            kind="websocket",
            layers=lambda: [TlsLayer(ctx), WebSocketLayer(settings)],
        )

    def _build_infos(self) -> None:
        opts = self.options
        listeners = [self.client_listener] + ([self.ws_listener] if self.ws_listener is not None else [])
        self._infos = {
            listener: info_document(
                server_id=self.server_id,
                server_name=self.server_name,
                host=opts.host,
                port=self.port,
                auth_required=self.auth.required,
                max_payload=opts.max_payload,
                jetstream=opts.jetstream,
                tls_required=listener.tls is not None and listener.kind != "websocket",
                tls_verify=listener.tls is not None and listener.kind != "websocket" and _verifies(opts.tls),
            )
            for listener in listeners
        }

    def info_for(self, conn: ClientConnection) -> bytes:
        return client_info(
            self._infos[conn.listener], conn.cid, conn.host, conn.nonce, cluster=self._cluster_info(conn)
        )

    # -- the cluster ------------------------------------------------------------------------------

    def _cluster_info(self, conn: ClientConnection) -> dict[str, Any] | None:
        """What a client is told of the cluster: its name and (once a peer joined) connect_urls,
        the servers' WebSocket URLs for a WebSocket client, as nats-server tells them."""
        cluster = self.cluster
        if cluster is None:
            return None
        doc: dict[str, Any] = {"cluster": cluster.name}
        urls = cluster.connect_urls(websocket=conn.listener.kind == "websocket")
        if urls:
            doc["connect_urls"] = urls
        return doc

    def client_urls(self, websocket: bool = False) -> list[str]:
        """This server's client URLs for connect_urls (``client_advertise``, else the listen
        address; every interface's address when listening on all of them), or its WebSocket
        URLs (none without a WebSocket listener)."""
        if websocket:
            wso = self.options.websocket
            if wso is None or not self.ws_port:
                return []
            host, port = wso.host, self.ws_port
        elif self.options.client_advertise:
            return [self.options.client_advertise]
        else:
            host, port = self.options.host, self.port
        return [f"{h}:{port}" if ":" not in h else f"[{h}]:{port}" for h in listen_hosts(host)]

    def _foreign_jetstream(self) -> list[str]:
        """The servers this one has a route to that announce JetStream in their route INFO:
        nats-server's (jetpy's INFO never does), whose meta group jetpy's cannot share."""
        if self.cluster is None:
            return []
        return [
            r.remote_name for r in self.cluster.remotes.values() if r.info is not None and r.info.jetstream
        ]

    def _peer_names(self) -> list[str]:
        """The names of the servers this one has a route to (the Raft host names members by them)."""
        if self.cluster is None:
            return []
        return [r.remote_name for r in self.cluster.remotes.values()]

    def topology_changed(self) -> None:
        """Send the clients that take async INFO (CONNECT protocol 1) the cluster's new INFO."""
        for conn in self.connections.values():
            if conn.connected and conn.protocol >= 1 and not conn.closed:
                conn.send(self.info_for(conn))


def _verifies(tls: TlsOptions | None) -> bool:
    return tls is not None and tls.verifies
