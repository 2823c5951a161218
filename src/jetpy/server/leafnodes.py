"""LeafNodes: this server's leaf node links, as nats-server forms them: the leaf nodes it is the
hub of, and the hubs it is a leaf node of.

Owns the leaf node listener (``leafnodes { listen }``) and who may connect there: with an
``authorization`` block, its user and password or its ``users`` (each naming the account it
binds to) or none (its ``account``), else the server's own authentication (users, nkeys, or in
operator mode a user JWT signed over the INFO nonce: a leaf node's creds file); the account
each accepted link binds to (the user's, the authorization's ``account``, or ``$G``). It owns
the remotes too: each is dialled in turn at its URLs and those its hub tells (``leafnode_urls``,
so a leaf node moves to another server of the hub's cluster), ``reconnect`` seconds apart for
ever, :data:`~jetpy.server.leaf_conn.LOOP_DELAY` after a loop; a creds file is read at each
dial. And what every link is told: each account's loop-detection subject, then the account's
interest as :func:`~jetpy.server.leaf_interest.told` decides, kept up to date by a watcher on
the account's broker.

Knows its server only as a :class:`LeafServer`; each link is a
:class:`~jetpy.server.leaf_conn.LeafConnection` that knows this manager as its ``LeafHost``.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hmac
import logging
import random
import re
import secrets
import time
from collections.abc import Callable
from typing import Final, Protocol
from urllib.parse import urlsplit

import nkeys

from jetpy.protocol import encode as enc
from jetpy.protocol.connect import DEFAULT_CONNECT
from jetpy.protocol.errors import ERR_AUTH_VIOLATION
from jetpy.protocol.leaf_wire import LOOP_PREFIX, LeafConnect, LeafInfo, connect_line, info_line, sub_line
from jetpy.server.auth import Authenticator, new_nonce
from jetpy.server.broker import Broker, InterestWatcher, Subscription
from jetpy.server.config_leaf import parse_leaf_url
from jetpy.server.dialing import credentials, dial, dial_error, hostport
from jetpy.server.identity import NATS_COMPAT_VERSION, go_version, listen_hosts
from jetpy.server.leaf_conn import LOOP_DELAY, LeafConnection
from jetpy.server.leaf_interest import JS_CLIENT_DENY, JS_SYSTEM_DENY, told
from jetpy.server.link_service import LinkService
from jetpy.server.options import GLOBAL_ACCOUNT, LeafRemote, ServerOptions
from jetpy.server.tls import client_context, server_context

__all__ = ["LEAF_DIAL_TIMEOUT", "LeafNodes", "LeafServer", "read_creds"]

log = logging.getLogger("jetpy.server")

LEAF_DIAL_TIMEOUT: Final = 2.0  # seconds a dial to a hub may take
CONNECT_ERROR_REPORTS: Final = 3600  # a hub still unreachable is logged every 3600th attempt
_CREDS_RE: Final = re.compile(
    r"\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}(\r?\n|\Z)))"
)


class LeafServer(Protocol):
    """What the leaf nodes need of their server."""

    server_id: str
    server_name: str
    options: ServerOptions
    auth: Authenticator

    def next_cid(self) -> int: ...

    def account_broker(self, name: str) -> Broker | None:
        """The broker of the account ``name``; None when the server has no such account."""
        ...

    def leaf_cluster(self) -> str:
        """The cluster name a leaf node tells its hub (its own name without a cluster)."""
        ...

    def hub_leaf_urls(self) -> list[str]:
        """The leaf node URLs of this server's cluster (this server's first)."""
        ...

    def cluster_name(self) -> str:
        """This server's cluster's name ("" without a cluster)."""
        ...

    def system_account_name(self) -> str:
        """The system account's name ("" without one)."""
        ...

    def account_mapping(self, name: str) -> tuple[Callable[[bytes], bytes], list[str]] | None:
        """The account's subject mapping (as its clients' publishes take it, mappings reloaded
        included) and its sources; None without mappings."""
        ...


def read_creds(path: str) -> tuple[str, bytes]:
    """The user JWT and nkey seed of a creds file (as nsc writes it). Raises ``OSError`` or
    ``ValueError``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    blocks = [m.group(1) for m in _CREDS_RE.finditer(text)]
    if len(blocks) < 2:
        raise ValueError("no user JWT and nkey seed found")
    return blocks[0], blocks[1].encode()


class _Remote:
    """A remote's state: its URLs (configured, then learned from its hub) and its link."""

    def __init__(self, config: LeafRemote) -> None:
        self.config = config
        self.urls: list[str] = list(config.urls)
        self.learned: list[str] = []
        self.link: LeafConnection | None = None
        self.attempts = 0

    def candidates(self) -> list[str]:
        urls = self.urls + [u for u in self.learned if u not in self.urls]
        random.shuffle(urls)
        return urls


class LeafNodes(LinkService):
    def __init__(self, server: LeafServer) -> None:
        super().__init__()
        self.server = server
        self.options = server.options
        self.lo = server.options.leafnodes
        self.server_id = server.server_id
        default = server.account_broker(GLOBAL_ACCOUNT)
        assert default is not None
        self.broker: Broker = default
        self.port = 0
        self.url = ""  # this server's leaf node URL (host:port)
        self.links: dict[int, LeafConnection] = {}  # every link, registered or not
        self.by_account: dict[bytes, list[LeafConnection]] = {}
        self.remotes = [_Remote(r) for r in self.lo.remotes]
        self._lds: dict[bytes, bytes] = {}
        self._yielded: dict[bytes, float] = {}  # accounts whose newer link yielded to a loop, until
        self._watched: dict[bytes, tuple[Broker, InterestWatcher]] = {}
        self._closed_totals = [0, 0, 0, 0]
        tls = self.lo.tls
        self._server_ssl = server_context(tls) if tls is not None and self.lo.port else None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        lo = self.lo
        self._running = True
        if lo.port:
            self._listener = await asyncio.get_running_loop().create_server(
                self._accepted,
                lo.host,
                0 if lo.port == -1 else lo.port,
                reuse_address=True,
                backlog=128,
                ssl=self._server_ssl,
                ssl_handshake_timeout=lo.tls.timeout if lo.tls is not None else None,
            )
            self.port = self._listener.sockets[0].getsockname()[1]
            self.url = lo.advertise or hostport(listen_hosts(lo.host)[0], self.port)
            log.info("Listening for leafnode connections on %s", hostport(lo.host, self.port))
        for remote in self.remotes:
            self._spawn(self._run_remote(remote))

    async def stop(self) -> None:
        await self._close_links(self.links.values())
        for broker, watcher in self._watched.values():
            if watcher in broker.watchers:
                broker.watchers.remove(watcher)
        self._watched.clear()
        await self._close_listener()

    def _accepted(self) -> LeafConnection:
        link = LeafConnection(self, self.server.next_cid())
        link.nonce = new_nonce()
        self.links[link.rid] = link
        return link

    # -- the hub's side -------------------------------------------------------------------------

    def _auth_required(self) -> bool:
        lo = self.lo
        if lo.auth_set:
            return bool(lo.username or lo.users)
        return self.server.auth.required

    def greeting(self, link: LeafConnection, account: bytes = b"") -> bytes:
        lo = self.lo
        host, _, port = self.url.rpartition(":")
        return info_line(
            server_id=self.server_id,
            server_name=self.server.server_name,
            version=NATS_COMPAT_VERSION,
            go=go_version(),
            host=host.strip("[]"),
            port=int(port) if port.isdigit() else self.port,
            max_payload=self.options.max_payload,
            client_id=link.rid,
            auth_required=self._auth_required(),
            tls_required=lo.tls is not None,
            tls_verify=lo.tls is not None and lo.tls.verifies,
            nonce="" if account else link.nonce,
            domain=self.options.jetstream_domain if self.options.jetstream else "",
            leafnode_urls=None if lo.no_advertise else self.server.hub_leaf_urls(),
            remote_account=account.decode(),
        )

    def accept(self, link: LeafConnection, connect: LeafConnect) -> tuple[bytes, Broker] | None:
        refusal = self._refusal(connect)
        if refusal is not None:
            text, reason = refusal
            log.error("%s - %s", link.prefix, text)
            link.out += enc.err(text)
            link.close(reason)
            return None
        account = self._authenticate(link, connect)
        if account is None:
            who = f' - User "{connect.user}"' if connect.user else ""
            log.error("%s - authentication error%s", link.prefix, who)
            link.out += enc.err(ERR_AUTH_VIOLATION)
            link.close("Authentication Failure")
            return None
        broker = self.server.account_broker(account)
        if broker is None:
            log.error('%s - no local account "%s" for leafnode', link.prefix, account)
            link.out += enc.err(ERR_AUTH_VIOLATION)
            link.close("Authentication Failure")
            return None
        acc = account.encode()
        link.send(self.greeting(link, acc))
        mapping = self.server.account_mapping(account)
        if mapping is not None:  # a leaf node's messages are mapped as a client's publishes are
            link.map_subject, sources = mapping
            link.mapped_sources = [src.encode() for src in sources]
        return acc, broker

    def _refusal(self, connect: LeafConnect) -> tuple[str, str] | None:
        """nats-server's refusal of a CONNECT that is no leaf node's of another cluster: (the
        error, the close reason), or None."""
        if connect.lang:
            return "attempted to connect to leaf node port", "Incorrect Port"
        if connect.gateway:
            return (
                f'Rejecting connection from gateway "{connect.gateway}" on the leafnode port',
                "Wrong Gateway",
            )
        if " " in connect.cluster:
            return "cluster name cannot contain spaces", "Protocol Violation"
        cluster = self.server.cluster_name()
        if cluster and connect.cluster == cluster:
            return "remote leafnode has same cluster name", "Cluster Names Identical"
        return None

    def _authenticate(self, link: LeafConnection, connect: LeafConnect) -> str | None:
        """The account a leaf node's credentials bind it to; None when they are refused."""
        lo = self.lo
        if lo.auth_set:
            if lo.users:
                for u in lo.users:
                    if hmac.compare_digest(u.user.encode(), connect.user.encode()):
                        if not hmac.compare_digest(u.password.encode(), connect.password.encode()):
                            return None
                        return lo.account if u.account == GLOBAL_ACCOUNT and lo.account else u.account
                return None
            if lo.username and not (
                hmac.compare_digest(lo.username.encode(), connect.user.encode())
                and hmac.compare_digest(lo.password.encode(), connect.password.encode())
            ):
                return None
            return lo.account or GLOBAL_ACCOUNT
        options = dataclasses.replace(
            DEFAULT_CONNECT,
            user=connect.user,
            password=connect.password,
            auth_token=connect.token,
            nkey=connect.nkey,
            jwt=connect.jwt,
            sig=connect.sig,
        )
        who = self.server.auth.authenticate(options, link.nonce, host=link.host_addr, conn_type="LEAFNODE")
        return who.account if who is not None else None

    def urls_changed(self) -> None:
        """The cluster's leaf node URLs changed: tell the leaf nodes (an INFO, as nats-server)."""
        for link in self.links.values():
            if link.registered and not link.solicited and not self.lo.no_advertise:
                link.send(self.greeting(link, link.account))

    # -- the leaf node's side -------------------------------------------------------------------

    async def _run_remote(self, remote: _Remote) -> None:
        """Dial the remote's hub, and again whenever its link drops (see the module)."""
        reconnect = self.lo.reconnect
        while self._running:
            for url in remote.candidates():
                if not self._running:
                    return
                link = await self._dial(remote, url)
                if link is not None:
                    await link.wait_closed()
                    remote.link = None
                    if link.loop_detected:
                        await asyncio.sleep(LOOP_DELAY)
                    break
            await asyncio.sleep(reconnect)

    async def _dial(self, remote: _Remote, url: str) -> LeafConnection | None:
        host, port = parse_leaf_url(url)
        made: list[LeafConnection] = []

        def factory() -> LeafConnection:
            link = LeafConnection(self, self.server.next_cid(), remote.config, url)
            self.links[link.rid] = link
            made.append(link)
            return link

        tls = remote.config.tls
        if tls is None and urlsplit(url).scheme.lower() == "tls":
            tls = self.lo.tls
        remote.attempts += 1
        log.debug("Trying to connect as leafnode to remote server on %s", hostport(host, port))
        try:
            await dial(factory, host, port, LEAF_DIAL_TIMEOUT, tls, client_context(tls) if tls else None)
        except OSError as e:
            n = remote.attempts
            say = log.error if n == 1 or n % CONNECT_ERROR_REPORTS == 0 else log.debug
            say(
                'Error trying to connect as leafnode to remote server "%s" (attempt %d): %s',
                hostport(host, port),
                n,
                dial_error(host, port, e),
            )
            for link in made:
                self.links.pop(link.rid, None)
            return None
        remote.attempts = 0
        remote.link = made[0] if made else None
        return remote.link

    def solicit(self, link: LeafConnection, info: LeafInfo) -> tuple[bytes, Broker] | None:
        config = link.remote
        assert config is not None
        if info.gateway:
            log.error("%s - Attempted to connect to gateway port as leafnode", link.prefix)
            link.close("Incorrect Port")
            return None
        user, password = credentials(link.url)
        jwt = sig = ""
        if config.credentials:
            try:
                jwt, seed = read_creds(config.credentials)
                signed = nkeys.from_seed(seed).sign(info.nonce.encode())
            except (OSError, ValueError, nkeys.ErrInvalidSeed) as e:
                log.error('Error reading LeafNode Remote Credentials file "%s": %s', config.credentials, e)
                link.close("Authentication Failure")
                return None
            sig = base64.urlsafe_b64encode(bytes(signed)).rstrip(b"=").decode()
        name = config.account or GLOBAL_ACCOUNT
        broker = self.server.account_broker(name)
        if broker is None:
            log.error('%s - no local account "%s" for leafnode remote', link.prefix, name)
            link.close("Server Shutdown")
            return None
        link.send(
            connect_line(
                version=NATS_COMPAT_VERSION,
                server_id=self.server_id,
                name=self.server.server_name,
                cluster=self.server.leaf_cluster(),
                user=user,
                password=password,
                jwt=jwt,
                sig=sig,
                tls=config.tls is not None,
                hub=config.hub,
                deny_pub=config.deny_exports,
                jetstream=self.options.jetstream,
                domain=self.options.jetstream_domain if self.options.jetstream else "",
            )
        )
        log.info("%s - Leafnode connection created for account: %s", link.prefix, name)
        self._learn(link, info)
        return name.encode(), broker

    def hub_info(self, link: LeafConnection, info: LeafInfo) -> None:
        self._learn(link, info)

    def _learn(self, link: LeafConnection, info: LeafInfo) -> None:
        """The hub's cluster's leaf node URLs: where to go should this hub go away."""
        for remote in self.remotes:
            if remote.link is link or remote.config is link.remote:
                scheme = "tls" if remote.config.tls is not None else "nats"
                user, password = credentials(link.url)
                creds = f"{user}:{password}@" if user else ""
                remote.learned = [f"{scheme}://{creds}{hp}" for hp in info.leafnode_urls]

    # -- interest -------------------------------------------------------------------------------

    def loop_subject(self, account: bytes) -> bytes:
        lds = self._lds.get(account)
        if lds is None:
            token = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=")
            lds = self._lds[account] = LOOP_PREFIX + token.replace(b"-", b"A").replace(b"_", b"B")
        return lds

    def link_denies(self, link: LeafConnection) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """nats-server's JetStream denies on a leaf link, both ways: the JetStream API, KV and
        object store subjects (and the system account's JetStream and Raft traffic), so that no
        JetStream answers across the link but by its domain; and, when the peer's domain is not
        this server's, this server's own domain's API going out."""
        system = self.server.system_account_name()
        deny = JS_SYSTEM_DENY if system and link.account == system.encode() else JS_CLIENT_DENY
        exports = deny
        domain = self.options.jetstream_domain
        if self.options.jetstream and domain and link.remote_domain != domain:
            exports = (*deny, f"$JS.{domain}.API.>")
        return deny, exports

    def keeps_through_loop(self, link: LeafConnection) -> bool:
        if not link.spoke:
            return False
        others = [x for x in self.by_account.get(link.account, ()) if x.spoke and x is not link]
        if any(x.rid < link.rid for x in others):
            return False
        # the newer links closed (or will): their loop-detection subject still echoes here
        return bool(others) or self._yielded.get(link.account, 0.0) > time.monotonic()

    def registered(self, link: LeafConnection) -> None:
        account = link.account
        broker = link.acc_broker
        assert broker is not None and link.told is not None
        self.by_account.setdefault(account, []).append(link)
        if account not in self._watched:
            watcher = self._watcher(account)
            broker.watchers.append(watcher)
            self._watched[account] = (broker, watcher)
        tell = link.told
        for _subject, _queue, sub in broker.subs.items():
            if self._tells(link, sub):
                tell.change(sub, 1)
        for source in link.mapped_sources:  # what the account maps is interest too
            tell.change(Subscription(link, source, None, b""), 1)
        link.send(sub_line(self.loop_subject(account), None, 0) + tell.announce_all())

    @staticmethod
    def _tells(link: LeafConnection, sub: Subscription) -> bool:
        if not told(sub, link, link.spoke):
            return False
        return not (link.deny_imports and link.deny_imports.interest(sub.subject))

    def _watcher(self, account: bytes) -> InterestWatcher:
        links = self.by_account.setdefault(account, [])
        tells = self._tells

        def watch(sub: Subscription, delta: int) -> None:
            for link in links:
                if link.told is not None and tells(link, sub):
                    line = link.told.change(sub, delta)
                    if line is not None:
                        link.send(line)

        return watch

    # -- closed links ---------------------------------------------------------------------------

    def leaf_closed(self, link: LeafConnection, reason: str) -> None:
        self.links.pop(link.rid, None)
        t = self._closed_totals
        t[0] += link.in_msgs
        t[1] += link.out_msgs
        t[2] += link.in_bytes
        t[3] += link.out_bytes
        links = self.by_account.get(link.account)
        if links is not None and link in links:
            links.remove(link)
            if link.loop_detected and link.spoke and any(x.spoke and x.rid < link.rid for x in links):
                self._yielded[link.account] = time.monotonic() + 2 * LOOP_DELAY

    # -- state for monitoring -------------------------------------------------------------------

    def registered_links(self) -> list[LeafConnection]:
        return sorted((x for x in self.links.values() if x.registered), key=lambda x: x.rid)

    def totals(self) -> tuple[int, int, int, int]:
        """(in_msgs, out_msgs, in_bytes, out_bytes) over every leaf link, open or closed."""
        im, om, ib, ob = self._closed_totals
        for x in self.links.values():
            im += x.in_msgs
            om += x.out_msgs
            ib += x.in_bytes
            ob += x.out_bytes
        return im, om, ib, ob
