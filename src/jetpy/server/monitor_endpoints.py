"""Monitoring endpoints: what /varz, /connz, /subsz, /jsz, /healthz and friends answer.

Owns the documents, with nats-server 2.9's field names, order, omissions and query parameters,
built from measured server state: connections, the subscription trie's counters, process usage
and, for JetStream, the service's own report (:meth:`JetStreamService.jsz_stats`). Reads the
server through :class:`MonitoredServer`, the narrow view it owns. Knows nothing of HTTP: each
endpoint takes the decoded query and returns a :class:`Reply`; ``monitor`` serves it.

Accounts are read through :mod:`monitor_accounts` (``/accountz``, ``/accstatz``, the sublist
statistics of ``/subsz`` and ``/varz``, over every account or the one ``?acc=`` names), routes
and gateways through :mod:`monitor_cluster`, leaf nodes through :mod:`monitor_leaf`.
"""

from __future__ import annotations

import posixpath
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jetpy.server.accounts import Accounts
from jetpy.server.auth import Authenticator
from jetpy.server.broker import Broker, Subscription
from jetpy.server.cluster import Cluster
from jetpy.server.connection import ClientConnection
from jetpy.server.gateway import Gateways
from jetpy.server.identity import JETPY_VERSION, NATS_COMPAT_VERSION, PROTO, go_version
from jetpy.server.js_service import JetStreamService
from jetpy.server.jscluster import ClusteredJetStream
from jetpy.server.leafnodes import LeafNodes
from jetpy.server.monitor_accounts import account_detail, account_names, accstatz_entries, sublist_stats
from jetpy.server.monitor_cluster import GatewayzQuery, gatewayz, routez, varz_cluster, varz_gateway
from jetpy.server.monitor_format import (
    ProcessUsage,
    Query,
    QueryError,
    encode_json,
    go_duration,
    go_number,
    go_time,
    ns,
    uptime,
)
from jetpy.server.monitor_leaf import leafz, varz_leaf
from jetpy.server.monitor_raft import NO_RAFT_NODES, RAFTZ_INDENT, SYSTEM_ACCOUNT, raftz
from jetpy.server.nrg import RaftHost
from jetpy.server.options import TLS_TIMEOUT, ServerOptions
from jetpy.subjects import is_valid_literal_subject, subject_matches

__all__ = [
    "HTML",
    "JSON",
    "TEXT",
    "Endpoints",
    "MonitoredServer",
    "Reply",
    "json_reply",
    "pending_bytes",
    "text_reply",
]

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"

DEFAULT_LIST_SIZE = 1024  # nats-server's default page size for /connz, /subsz and /jsz
MAX_PAGE_SIZE = 100_000  # a larger ?limit= is clamped: one answer stays a few tens of MB at most
MAX_OFFSET = 2**32  # a larger ?offset= is clamped (past every list; a page is simply empty)
JS_NOT_ENABLED = "JetStream not enabled (10076)"  # nats-server's ApiError text for JSNotEnabledErr
# /varz's jetstream.stats is /jsz's usage block (nats-server's JetStreamStats)
JS_STATS_KEYS = ("memory", "storage", "reserved_memory", "reserved_storage", "accounts", "ha_assets", "api")
# /jsz's top-level keys after server_id/now, in nats-server's order
JSZ_KEYS = (
    "config",
    *JS_STATS_KEYS,
    "streams",
    "consumers",
    "messages",
    "bytes",
    "meta_cluster",
    "account_details",
)
# connz sort options: the key and whether larger values come first (nats-server's orders)
CONNZ_SORTS: dict[str, tuple[Callable[[_Row], Any], bool]] = {
    "cid": (lambda r: r.cid, False),
    "start": (lambda r: r.cid, False),  # as nats-server: the same order as cid
    "subs": (lambda r: r.subs, True),
    "pending": (lambda r: r.pending, True),
    "msgs_to": (lambda r: r.out_msgs, True),
    "msgs_from": (lambda r: r.in_msgs, True),
    "bytes_to": (lambda r: r.out_bytes, True),
    "bytes_from": (lambda r: r.in_bytes, True),
    "last": (lambda r: r.last, True),
    "idle": (lambda r: r.end - r.last, True),
    "uptime": (lambda r: r.end - r.start, False),  # youngest first, as nats-server
    "stop": (lambda r: r.end, True),
    "reason": (lambda r: r.reason, False),
    "rtt": (lambda r: r.rtt, True),
}
CLOSED_ONLY_SORTS = ("stop", "reason")
STATES = {"open": "open", "closed": "closed", "any": "all", "all": "all"}


@dataclass(frozen=True, slots=True)
class _Row:
    """A connection as /connz sorts it: open (``stop`` None) or closed."""

    conn: ClientConnection
    stop: float | None
    end: float  # when it closed, or now
    pending: int
    # the sort keys, copied so that sorting reads plain fields
    cid: int
    subs: int
    in_msgs: int
    out_msgs: int
    in_bytes: int
    out_bytes: int
    start: float
    last: float
    rtt: float
    reason: str

    @classmethod
    def of(cls, c: ClientConnection, stop: float | None, now: float) -> _Row:
        return cls(
            c,
            stop,
            now if stop is None else stop,
            0 if stop is not None else pending_bytes(c),
            c.cid,
            len(c.subs),
            c.in_msgs,
            c.out_msgs,
            c.in_bytes,
            c.out_bytes,
            c.start,
            c.last_activity,
            c.rtt,
            c.close_reason,
        )


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()  # more response headers (the dashboard's CSP)


def json_reply(doc: Any, status: int = 200, indent: bool = True) -> Reply:
    return Reply(status, encode_json(doc, indent), JSON)


def text_reply(status: int, text: str) -> Reply:
    return Reply(status, text.encode(), TEXT)


class MonitoredServer(Protocol):
    """What the monitor reads of the server it reports on (it never assigns any of it)."""

    options: ServerOptions
    server_id: str
    server_name: str
    port: int
    start_time: float  # time.time() at construction; also when the configuration was loaded
    auth: Authenticator
    accounts: Accounts
    broker: Broker  # the global account's
    connections: dict[int, ClientConnection]  # open, by cid
    closed_connections: deque[ClientConnection]  # the most recent, oldest first
    total_connections: int
    slow_consumers: int
    auth_failures: int  # CONNECTs refused
    violations: dict[str, int]  # permission violations by kind ("publish", "subscribe", "reply")
    jetstream: JetStreamService | None  # None: not configured, or not started
    cluster: Cluster | None  # None: no routes configured
    gateways: Gateways | None  # None: not in a super cluster
    leafnodes: LeafNodes | None  # None: neither a hub nor a leaf node
    raft: RaftHost | None  # None: not started
    js_cluster: ClusteredJetStream | None  # None: JetStream is not clustered here

    def totals(self) -> tuple[int, int, int, int]:
        """(in_msgs, out_msgs, in_bytes, out_bytes) over every client and route, open or closed."""
        ...


def base_prefix(base: str) -> str:
    """``http_base_path`` cleaned as nats-server cleans it (a leading ``/``, no trailing one,
    ``..`` and doubled slashes resolved): the endpoints' path prefix, "" for the root."""
    prefix = posixpath.normpath("/" + base).lstrip("/") if base else ""
    return "/" + prefix if prefix else ""


class Endpoints:
    """One method per endpoint; ``routes`` maps each path to its stats key and handler."""

    def __init__(self, server: MonitoredServer) -> None:
        self.server = server
        self.usage = ProcessUsage()
        self.http_host = server.options.http_host or server.options.host
        self.http_port = 0  # the bound port, set by the monitor once listening
        self.req_stats: dict[str, int] = {}
        self.go = go_version()
        self.routes: dict[str, tuple[str, Callable[[Query], Awaitable[Reply]]]] = {
            "/": ("/", self.index),
            "/varz": ("/varz", self.varz),
            "/connz": ("/connz", self.connz),
            "/subsz": ("/subsz", self.subsz),
            "/subscriptionsz": ("/subsz", self.subsz),
            "/healthz": ("/healthz", self.healthz),
            "/jsz": ("/jsz", self.jsz),
            "/accountz": ("/accountz", self.accountz),
            "/accstatz": ("/accstatz", self.accstatz),
            "/routez": ("/routez", self.routez),
            "/gatewayz": ("/gatewayz", self.gatewayz),
            "/leafz": ("/leafz", self.leafz),
            "/raftz": ("/raftz", self.raftz),
        }

    async def handle(self, path: str, query: Query) -> Reply | None:
        """The reply for ``path``, or None when no endpoint has that path."""
        route = self.routes.get(path)
        if route is None:
            return None
        key, handler = route
        self.req_stats[key] = self.req_stats.get(key, 0) + 1
        try:
            return await handler(query)
        except QueryError as e:
            return text_reply(400, str(e))

    # -- /  ---------------------------------------------------------------------------------------

    async def index(self, q: Query) -> Reply:
        # relative to the page at the root; under a base path the page may be asked for without
        # the trailing slash ("/nats"), so the links name the base
        base = base_prefix(self.server.options.http_base_path) or "."
        links = "\n".join(
            f"    <a href={base}{path}>{title}</a>"
            for path, title in (
                ("/varz", "General"),
                ("/jsz", "JetStream"),
                ("/connz", "Connections"),
                ("/accountz", "Accounts"),
                ("/accstatz", "Account Stats"),
                ("/subsz", "Subscriptions"),
                ("/routez", "Routes"),
                ("/leafz", "LeafNodes"),
                ("/gatewayz", "Gateways"),
                ("/healthz", "Health Probe"),
                ("/metrics", "Prometheus Metrics"),
                ("/dashboard", "Dashboard"),
            )
        )
        page = (
            '<html lang="en">\n  <head><title>jetpy monitoring</title>\n'
            "  <style>body { font-family: sans-serif; margin-left: 32px } a { display: block; padding-bottom: 6px }</style>\n"
            "  </head>\n  <body>\n"
            f"    <h2>jetpy {JETPY_VERSION} (nats-server {NATS_COMPAT_VERSION} compatible)</h2>\n"
            f"{links}\n"
            "    <a href=https://docs.nats.io/running-a-nats-service/nats_admin/monitoring>Help</a>\n"
            "  </body>\n</html>\n"
        )
        return Reply(200, page.encode(), HTML)

    # -- /varz ------------------------------------------------------------------------------------

    async def varz(self, q: Query) -> Reply:
        return json_reply(self.varz_doc())

    def varz_doc(self) -> dict[str, Any]:
        """/varz as a document (also what ``$SYS.REQ.SERVER.PING.VARZ`` and /metrics read)."""
        s = self.server
        o = s.options
        usage = self.usage
        cpu = usage.cpu_percent()
        now = time.time()
        in_msgs, out_msgs, in_bytes, out_bytes = s.totals()
        v: dict[str, Any] = {
            "server_id": s.server_id,
            "server_name": s.server_name,
            "version": NATS_COMPAT_VERSION,
            "proto": PROTO,
            "go": self.go,
            "host": o.host,
            "port": s.port,
        }
        urls = s.cluster.connect_urls() if s.cluster is not None else None
        if urls:
            v["connect_urls"] = urls
        if s.auth.required:
            v["auth_required"] = True
        if o.tls is not None:
            v["tls_required"] = True
            if o.tls.verifies:
                v["tls_verify"] = True
        v["max_connections"] = o.max_connections
        if o.max_subscriptions:
            v["max_subscriptions"] = o.max_subscriptions
        v.update(
            ping_interval=ns(o.ping_interval),
            ping_max=o.ping_max,
            http_host=self.http_host,
            http_port=self.http_port,
            http_base_path=o.http_base_path,
            https_port=o.https_port,
            auth_timeout=go_number(o.auth_timeout),
            max_control_line=o.max_control_line,
            max_payload=o.max_payload,
            max_pending=o.max_pending,
            cluster=varz_cluster(s.cluster, o.cluster),
            gateway=varz_gateway(s.gateways, o.gateway),
            leaf=varz_leaf(s.leafnodes, o.leafnodes),
            mqtt={},
            websocket=_varz_websocket(o),
            jetstream=self._varz_jetstream(),
            tls_timeout=go_number(o.tls.timeout if o.tls is not None else TLS_TIMEOUT),
            write_deadline=ns(o.write_deadline),
            start=go_time(s.start_time),
            now=go_time(now),
            uptime=uptime(now - s.start_time),
            mem=usage.rss(),
            cores=usage.cores(),
            gomaxprocs=usage.usable_cores(),
            cpu=go_number(cpu),
            connections=len(s.connections),
            total_connections=s.total_connections,
            routes=len(s.cluster.remotes) if s.cluster is not None else 0,
            remotes=len(s.cluster.remotes) if s.cluster is not None else 0,
            leafnodes=len(s.leafnodes.registered_links()) if s.leafnodes is not None else 0,
            in_msgs=in_msgs,
            out_msgs=out_msgs,
            in_bytes=in_bytes,
            out_bytes=out_bytes,
            slow_consumers=s.slow_consumers,
            subscriptions=self.subscription_count(),
            http_req_stats=dict(sorted(self.req_stats.items())),
            config_load_time=go_time(s.start_time),  # the configuration is loaded before the start
        )
        system = s.accounts.system()
        if system is not None:
            v["system_account"] = system.name
        return v

    def _varz_jetstream(self) -> dict[str, Any]:
        st = self._js_report(accounts=False, streams=False, consumers=False, config=False, account="")
        if st is None:
            return {}
        out: dict[str, Any] = {
            "config": st.get("config", {}),
            "stats": {k: st[k] for k in JS_STATS_KEYS if k in st},
        }
        if "meta_cluster" in st:
            out["meta"] = st["meta_cluster"]
        return out

    # -- /connz -----------------------------------------------------------------------------------

    async def connz(self, q: Query) -> Reply:
        sort = q.get("sort") or "cid"
        if sort not in CONNZ_SORTS:
            raise QueryError(f"invalid sorting option: {sort}")
        auth = q.boolean("auth")
        detail = q.get("subs").lower() == "detail"
        subs = False if detail else q.boolean("subs")
        offset, limit = _page(q)
        cid = q.unsigned("cid")
        state_s = q.get("state")
        state = STATES.get(state_s.lower(), "") if state_s else "open"
        if not state:
            raise QueryError(f"Error decoding state for {state_s}")
        user, acc, mqtt_client = q.get("user"), q.get("acc"), q.get("mqtt_client")
        if sort in CLOSED_ONLY_SORTS and state != "closed":
            raise QueryError(f"sort by {sort} only valid on closed connections")
        if cid:
            limit = 1

        s = self.server
        now = time.time()
        open_conns: list[ClientConnection] = []
        closed_conns: list[ClientConnection] = []
        if state in ("open", "all"):
            if not cid:
                open_conns = list(s.connections.values())
            elif cid in s.connections:
                open_conns = [s.connections[cid]]
        if state in ("closed", "all"):
            closed_conns = [c for c in s.closed_connections if not cid or c.cid == cid]

        def wanted(c: ClientConnection) -> bool:
            if acc and c.account.name != acc:
                return False
            if mqtt_client:
                return False  # no MQTT connections
            return not user or c.user == user

        rows = [_Row.of(c, None, now) for c in open_conns if wanted(c)]
        rows += [_Row.of(c, _stop_time(c), now) for c in closed_conns if wanted(c)]
        # as nats-server: asking for one open cid still reports how many are open
        total = len(s.connections) if cid and state == "open" else len(rows)
        key, descending = CONNZ_SORTS[sort]
        rows.sort(key=lambda r: r.cid)
        rows.sort(key=key, reverse=descending)
        page = [self._conn_info(r, subs, detail, auth) for r in rows[offset : offset + limit]]
        return json_reply(
            {
                "server_id": s.server_id,
                "now": go_time(now),
                "num_connections": len(page),
                "total": total,
                "offset": offset,
                "limit": limit,
                "connections": page,
            }
        )

    def _conn_info(self, row: _Row, subs: bool, detail: bool, auth: bool) -> dict[str, Any]:
        c, stop, end = row.conn, row.stop, row.end
        rtt_ns = _rtt_ns(c)
        if rtt_ns == 0 and stop is None:
            _request_rtt(c)
        info: dict[str, Any] = {
            "cid": c.cid,
            "kind": c.kind,
            "type": c.client_type,
            "ip": c.host,
            "port": c.port,
            "start": go_time(c.start),
            "last_activity": go_time(c.last_activity),
        }
        if stop is not None:
            info["stop"] = go_time(stop)
            info["reason"] = c.close_reason
        info.update(
            rtt=go_duration(rtt_ns),
            uptime=uptime(end - c.start),
            idle=uptime(end - c.last_activity),
            pending_bytes=row.pending,
            in_msgs=c.in_msgs,
            out_msgs=c.out_msgs,
            in_bytes=c.in_bytes,
            out_bytes=c.out_bytes,
            subscriptions=len(c.subs),
        )
        for k, val in (("name", c.name), ("lang", c.lang), ("version", c.version)):
            if val:
                info[k] = val
        if auth and c.user:
            info["authorized_user"] = c.user
        if auth and c.connected:
            info["account"] = c.account.name
        if c.subs:
            if detail:
                info["subscriptions_list_detail"] = [_sub_detail(sub) for sub in c.subs.values()]
            elif subs:
                info["subscriptions_list"] = [_text(sub.subject) for sub in c.subs.values()]
        return info

    # -- /subsz -----------------------------------------------------------------------------------

    def subscription_count(self) -> int:
        """Subscriptions of every account, the system account's request handlers and
        JetStream's included (nats-server counts its own internal ones too)."""
        return sum(acc.broker.subs.count for acc in self.server.accounts)

    def sublist_stats(self, acc: str = "") -> dict[str, Any]:
        """The sublist statistics of account ``acc``, or of every account added up."""
        accounts = self.server.accounts
        if acc:
            account = accounts.get(acc)
            return sublist_stats([account.broker] if account is not None else [])
        return sublist_stats(a.broker for a in accounts)

    async def subsz(self, q: Query) -> Reply:
        subs = q.boolean("subs")
        offset, limit = _page(q)
        test = q.get("test")
        acc = q.get("acc")
        if test and not is_valid_literal_subject(test):
            raise QueryError(f"invalid test subject, must be valid publish subject: {test}")
        stats = self.sublist_stats(acc)
        if subs:
            accounts = [a for a in self.server.accounts if not acc or a.name == acc]
            details = [
                _sub_detail(sub, account.name)
                for account in sorted(accounts, key=lambda a: a.name)
                for subject, _queue, sub in account.broker.subs.items()
                if not test or subject_matches(_text(subject), test)
            ]
            page = details[offset : offset + limit]
            if page:  # as nats-server: an empty list answers with the bare statistics
                return json_reply(
                    {
                        "server_id": self.server.server_id,
                        "now": go_time(time.time()),
                        **stats,
                        "total": len(page),
                        "offset": offset,
                        "limit": limit,
                        "subscriptions_list": page,
                    }
                )
        return json_reply(stats)

    # -- /healthz ---------------------------------------------------------------------------------

    async def healthz(self, q: Query) -> Reply:
        enabled_only = q.boolean("js-enabled") or q.boolean("js-enabled-only")  # js-enabled: deprecated
        server_only = q.boolean("js-server-only")
        doc = self.health(cluster=not (enabled_only or server_only))
        return json_reply(doc, 200 if doc["status"] == "ok" else 503, indent=False)

    def health(self, cluster: bool = True) -> dict[str, Any]:
        """/healthz's document: ``{"status": "ok"}`` or ``unavailable`` with the error; with
        ``cluster``, a clustered JetStream's groups must be current (``js-enabled-only`` and
        ``js-server-only`` leave them out, as nats-server does)."""
        if self.server.options.jetstream and self.server.jetstream is None:
            return {"status": "unavailable", "error": JS_NOT_ENABLED}
        cjs = self.server.js_cluster
        problem = cjs.health_problem() if cjs is not None and cluster else ""
        if problem:
            return {"status": "unavailable", "error": problem}
        return {"status": "ok"}

    # -- /jsz -------------------------------------------------------------------------------------

    async def jsz(self, q: Query) -> Reply:
        accounts = q.boolean("accounts")
        streams = q.boolean("streams")
        consumers = q.boolean("consumers")
        config = q.boolean("config")
        offset = min(q.integer("offset"), MAX_OFFSET)
        limit = min(q.integer("limit") or DEFAULT_LIST_SIZE, MAX_PAGE_SIZE)
        q.boolean("leader-only")  # single server: always the leader
        account = q.get("acc")
        streams = streams or consumers
        accounts = accounts or streams
        doc: dict[str, Any] = {"server_id": self.server.server_id, "now": go_time(time.time())}
        st = self._js_report(
            accounts=accounts, streams=streams, consumers=consumers, config=config, account=account
        )
        cjs = self.server.js_cluster
        if st is not None and cjs is not None:  # meta_cluster, the streams' Raft groups
            cjs.jsz_overlay(st, q.boolean("raft"))
        if st is None:
            doc["disabled"] = True
            doc.update(_JSZ_DISABLED)
            return json_reply(doc)
        for k in JSZ_KEYS:
            if k in st:
                doc[k] = st[k]
        for k, val in st.items():
            if k not in doc:
                doc[k] = val
        details = list(doc.pop("account_details", None) or [])
        if not account and accounts:
            if offset:
                details.sort(key=lambda d: str(d.get("id", d.get("name", ""))))
                details = details[offset:] if offset > 0 else details
            details = details[:limit] if limit > 0 else details
        elif not account:
            details = []
        if details:
            doc["account_details"] = details
        return json_reply(doc)

    def _js_report(
        self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str
    ) -> dict[str, Any] | None:
        """JetStream's own report, or None when JetStream is not running."""
        js = self.server.jetstream
        if js is None:
            return None
        return dict(
            js.jsz_stats(
                accounts=accounts, streams=streams, consumers=consumers, config=config, account=account
            )
        )

    # -- accounts ---------------------------------------------------------------------------------

    async def accountz(self, q: Query) -> Reply:
        s = self.server
        acc = q.get("acc")
        doc: dict[str, Any] = {"server_id": s.server_id, "now": go_time(time.time())}
        system = s.accounts.system()
        if system is not None:
            doc["system_account"] = system.name
        if not acc:
            doc["accounts"] = account_names(s.accounts)
            return json_reply(doc)
        account = s.accounts.get(acc)
        if account is None:
            return text_reply(400, f"Account {acc} does not exist")
        doc["account_detail"] = account_detail(account, s.start_time, self._leaf_links().get(acc, 0))
        return json_reply(doc)

    async def accstatz(self, q: Query) -> Reply:
        s = self.server
        stats = accstatz_entries(s.accounts, s.connections.values(), q.boolean("unused"), self._leaf_links())
        return json_reply({"server_id": s.server_id, "now": go_time(time.time()), "account_statz": stats})

    def _leaf_links(self) -> dict[str, int]:
        """The leaf links by account name."""
        counts: dict[str, int] = {}
        leafnodes = self.server.leafnodes
        for link in leafnodes.registered_links() if leafnodes is not None else ():
            name = link.account.decode(errors="replace")
            counts[name] = counts.get(name, 0) + 1
        return counts

    # -- cluster endpoints: routes, gateways and leaf nodes ----------------------------------------

    async def routez(self, q: Query) -> Reply:
        return json_reply(self.routez_doc(q))

    def routez_doc(self, q: Query) -> dict[str, Any]:
        """/routez as a document (also what ``$SYS.REQ.SERVER.PING.ROUTEZ`` and /metrics read)."""
        s = self.server
        return routez(s.cluster, s.server_id, s.server_name, _subs(q))

    async def raftz(self, q: Query) -> Reply:
        system = self.server.accounts.system_name or SYSTEM_ACCOUNT
        doc = raftz(self.server.raft, q.get("acc"), q.get("group"), system)
        if doc is None:
            return text_reply(404, NO_RAFT_NODES)
        return Reply(200, encode_json(doc, width=RAFTZ_INDENT), JSON)

    async def gatewayz(self, q: Query) -> Reply:
        return json_reply(self.gatewayz_doc(q))

    def gatewayz_doc(self, q: Query) -> dict[str, Any]:
        """/gatewayz as a document (also what /metrics reads)."""
        s = self.server
        ask = GatewayzQuery(q.get("gw_name"), q.boolean("accs"), q.get("acc_name"), _subs(q))
        return gatewayz(s.gateways, s.server_id, ask)

    async def leafz(self, q: Query) -> Reply:
        return json_reply(self.leafz_doc(q))

    def leafz_doc(self, q: Query) -> dict[str, Any]:
        """/leafz as a document (also what /metrics reads)."""
        s = self.server
        return leafz(s.leafnodes, s.server_id, q.boolean("subs"), q.get("acc"))


_JSZ_DISABLED: dict[str, Any] = {
    "config": {"max_memory": 0, "max_storage": 0},
    "memory": 0,
    "storage": 0,
    "reserved_memory": 0,
    "reserved_storage": 0,
    "accounts": 0,
    "ha_assets": 0,
    "api": {"total": 0, "errors": 0},
    "streams": 0,
    "consumers": 0,
    "messages": 0,
    "bytes": 0,
}


# -- helpers over connections and subscriptions ------------------------------------------------


def _page(q: Query) -> tuple[int, int]:
    """``(offset, limit)`` of a paged list: negative offsets are 0, a missing or non-positive
    limit is nats-server's default, and huge values are clamped (MAX_OFFSET, MAX_PAGE_SIZE)."""
    offset = min(max(0, q.integer("offset")), MAX_OFFSET)
    limit = q.integer("limit")
    return offset, min(limit, MAX_PAGE_SIZE) if limit > 0 else DEFAULT_LIST_SIZE


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _sub_detail(sub: Subscription, account: str = "") -> dict[str, Any]:
    """A subscription as /subsz (with its ``account``) and /connz list it."""
    d: dict[str, Any] = {"account": account} if account else {}
    d["subject"] = _text(sub.subject)
    if sub.queue:
        d["qgroup"] = _text(sub.queue)
    d["sid"] = _text(sub.sid)
    d["msgs"] = sub.delivered
    if sub.max_msgs:
        d["max"] = sub.max_msgs
    client = sub.client
    d["cid"] = client.cid if isinstance(client, ClientConnection) else 0  # in-process ones have none
    return d


def _subs(q: Query) -> str:
    """The ``subs`` parameter: "detail", "1" (true) or "" (false)."""
    subs = q.get("subs").lower()
    if subs != "detail":
        subs = "1" if q.boolean("subs") else ""
    return subs


def pending_bytes(c: ClientConnection) -> int:
    """Bytes waiting for the client: our buffer plus the transport's."""
    pending = len(c.out)
    t = c.transport
    if t is not None:
        try:
            pending += t.get_write_buffer_size()
        except (AttributeError, RuntimeError):
            pass
    return pending


def _stop_time(c: ClientConnection) -> float:
    """When a closed connection was closed; the last activity is a lower bound if unrecorded."""
    return c.stop_time if c.stop_time > 0 else c.last_activity


def _rtt_ns(c: ClientConnection) -> int:
    """The last measured round trip, truncated as nats-server's getRTT does."""
    n = ns(c.rtt) if c.rtt > 0 else 0
    if 1_000 < n < 1_000_000:
        n -= n % 1_000
    return n


def _request_rtt(c: ClientConnection) -> None:
    """As nats-server, a real client (one that sent a lang) without an RTT yet gets a PING."""
    if c.lang and not c.closed:
        c.send_rtt_ping()


def _varz_websocket(o: ServerOptions) -> dict[str, Any]:
    """/varz's ``websocket``: the block's settings, empty ones left out (nats-server's)."""
    ws = o.websocket
    if ws is None or not ws.port:
        return {}
    doc: dict[str, Any] = {"host": ws.host, "port": ws.port}
    if ws.handshake_timeout:
        doc["handshake_timeout"] = ns(ws.handshake_timeout)
    for key, value in (
        ("no_tls", ws.no_tls),
        ("same_origin", ws.same_origin),
        ("allowed_origins", list(ws.allowed_origins)),
        ("compression", ws.compression),
    ):
        if value:
            doc[key] = value
    return doc
