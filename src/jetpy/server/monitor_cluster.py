"""Monitoring documents of the cluster and the super cluster: ``/routez``, ``/gatewayz`` and
``/varz``'s ``cluster`` and ``gateway`` blocks, with nats-server 2.15.1's field names, order and
omissions (compared with it in the tests).

Owns the reading of the routes' and gateways' state into those documents; knows nothing of HTTP
(the endpoints call it) and changes nothing. jetpy keeps one route per peer, so ``pool_size``
reads -1 (nats-server's "no pooling") and every route's ``compression`` is ``off``. A gateway's
accounts are every account the server has (``$G``, ``$SYS``, the configured ones); gateway maps
and accounts are sorted by name and inbound connections by cid (nats-server's order is its maps').
"""

from __future__ import annotations

import time
from typing import Any, Final
from urllib.parse import urlsplit

from jetpy.server.cluster import Cluster
from jetpy.server.dialing import hostport
from jetpy.server.gateway import Gateways
from jetpy.server.gateway_conn import GatewayConnection
from jetpy.server.gateway_interest import MAX_NO_INTEREST, MODE_NAMES, OPTIMISTIC
from jetpy.server.monitor_format import go_duration, go_number, go_time, ns, uptime
from jetpy.server.options import ClusterOptions, GatewayOptions
from jetpy.server.peer_link import PeerLink
from jetpy.server.route_conn import RouteConnection

__all__ = ["TLS_TIMEOUT", "GatewayzQuery", "gatewayz", "link_rtt", "routez", "varz_cluster", "varz_gateway"]

TLS_TIMEOUT: Final = 2  # seconds, nats-server's default route TLS timeout (shown though routes are plain)


def varz_cluster(cluster: Cluster | None, copts: ClusterOptions) -> dict[str, Any]:
    """``/varz``'s ``cluster`` block: empty unless the server routes."""
    if cluster is None:
        return {}
    doc: dict[str, Any] = {
        "name": cluster.name,
        "addr": copts.host,
        "cluster_port": cluster.port,
        "auth_timeout": go_number(copts.auth_timeout),
    }
    if copts.routes:
        doc["urls"] = [_hostport(url) for url in copts.routes]
    tls = copts.tls
    if tls is not None:
        doc["tls_required"] = True
        if tls.verify:
            doc["tls_verify"] = True
    doc["tls_timeout"] = go_number(tls.timeout) if tls is not None else TLS_TIMEOUT
    doc["pool_size"] = -1
    return doc


def _hostport(url: str) -> str:
    rest = url.partition("://")[2] or url
    return rest.rpartition("@")[2].split("/", 1)[0]


def routez(cluster: Cluster | None, server_id: str, server_name: str, subs: str) -> dict[str, Any]:
    """``/routez``; ``subs`` is "", "1" (subject lists) or "detail"."""
    now = time.time()
    routes = cluster.registered_routes() if cluster is not None else []
    return {
        "server_id": server_id,
        "server_name": server_name,
        "now": go_time(now),
        "num_routes": len(routes),
        "routes": [_route(r, now, subs) for r in routes],
    }


def link_rtt(link: PeerLink) -> str:
    rtt = ns(link.rtt) if link.rtt > 0 else 0
    if 1_000 < rtt < 1_000_000:
        rtt -= rtt % 1_000  # as nats-server's getRTT truncates
    return go_duration(rtt)


def _route(r: RouteConnection, now: float, subs: str) -> dict[str, Any]:
    d: dict[str, Any] = {
        "rid": r.rid,
        "remote_id": r.remote_id,
        "remote_name": r.remote_name,
        "did_solicit": r.solicited,
        "is_configured": r.explicit,
        "ip": r.host_addr,
        "port": r.port,
        "start": go_time(r.start),
        "last_activity": go_time(r.last_activity),
        "rtt": link_rtt(r),
        "uptime": uptime(now - r.start),
        "idle": uptime(now - r.last_activity),
        "pending_size": r.pending_bytes(),
        "in_msgs": r.in_msgs,
        "out_msgs": r.out_msgs,
        "in_bytes": r.in_bytes,
        "out_bytes": r.out_bytes,
        "subscriptions": r.subscription_count(),
    }
    if subs:
        detail = subs == "detail"
        items: list[Any] = []
        for account, interest in r.interests.items():
            if interest is None:
                continue
            for (subject, queue), shadows in interest.subs.items():
                s = subject.decode("utf-8", "replace")
                if not detail:
                    items.append(s)
                    continue
                item: dict[str, Any] = {"subject": s}
                if queue is not None:
                    item["qgroup"] = queue.decode("utf-8", "replace")
                sid = b" ".join(x for x in (account, subject, queue) if x is not None)
                item["sid"] = sid.decode("utf-8", "replace")
                item["msgs"] = sum(sh.delivered for sh in shadows)
                item["cid"] = r.rid
                items.append(item)
        if items:
            d["subscriptions_list_detail" if detail else "subscriptions_list"] = items
    d["compression"] = "off"
    return d


# -- gateways -----------------------------------------------------------------------------------


def varz_gateway(gateways: Gateways | None, g: GatewayOptions) -> dict[str, Any]:
    """``/varz``'s ``gateway`` block: empty unless the server is in a super cluster. The
    configured remotes list every URL known for them (configured and learned), this cluster's
    own entry its configured ones."""
    if gateways is None:
        return {}
    tls = g.tls
    doc: dict[str, Any] = {"name": g.name, "host": g.host, "port": gateways.port}
    doc["auth_timeout"] = go_number(g.auth_timeout)
    doc["tls_timeout"] = go_number(tls.timeout) if tls is not None else TLS_TIMEOUT
    if tls is not None:
        doc["tls_required"] = doc["tls_verify"] = True  # as nats-server: verify reads "TLS is on"
    if g.advertise:
        doc["advertise"] = g.advertise
    if g.connect_retries:
        doc["connect_retries"] = g.connect_retries
    remotes: list[dict[str, Any]] = []
    for remote in g.gateways:
        r: dict[str, Any] = {"name": remote.name}
        if remote.tls is not None:
            r["tls_timeout"] = go_number(remote.tls.timeout)
        cfg = gateways.remotes.get(remote.name)
        # this cluster's own entry has no remote config: its configured URLs
        urls = list(cfg.urls) if cfg is not None else [_url_hostport(u) for u in remote.urls]
        if urls:
            r["urls"] = urls
        remotes.append(r)
    if remotes:
        doc["gateways"] = remotes
    if g.reject_unknown:
        doc["reject_unknown"] = True
    return doc


def _url_hostport(url: str) -> str:
    parts = urlsplit(url)
    return hostport(parts.hostname or "", parts.port or 0)


class GatewayzQuery:
    """What ``/gatewayz`` was asked: one remote (``gw_name``), the accounts (``accs``, or one
    with ``acc_name``), their subscriptions (``subs``: "", "1" or "detail")."""

    __slots__ = ("account", "accounts", "name", "subs")

    def __init__(self, name: str = "", accounts: bool = False, account: str = "", subs: str = "") -> None:
        self.name = name
        self.account = account
        self.accounts = accounts or bool(account)
        self.subs = subs


def gatewayz(gateways: Gateways | None, server_id: str, q: GatewayzQuery) -> dict[str, Any]:
    """``/gatewayz``: this server's outbound gateway connection to each remote cluster (by name;
    ``null`` when ``gw_name`` names one it has none to) and its inbound ones (by the remote's
    name, a list each)."""
    now = time.time()
    doc: dict[str, Any] = {"server_id": server_id, "now": go_time(now)}
    if gateways is None:
        doc.update(outbound_gateways={}, inbound_gateways={})
        return doc
    host, _, port = gateways.url.rpartition(":")
    doc.update(name=gateways.name, host=host.strip("[]"), port=int(port) if port.isdigit() else gateways.port)
    out = {name: link for name, link in gateways.out.items() if link.registered and not link.closed}
    if q.name:
        link = out.get(q.name)
        doc["outbound_gateways"] = None if link is None else {q.name: _outbound(gateways, link, now, q)}
    else:
        doc["outbound_gateways"] = {name: _outbound(gateways, out[name], now, q) for name in sorted(out)}
    inbound: dict[str, list[dict[str, Any]]] = {}
    for gid in sorted(gateways.inbound):
        link = gateways.inbound[gid]
        if link.closed or (q.name and link.name != q.name):
            continue
        rgw: dict[str, Any] = {"configured": False, "connection": _gateway_conn(link, now, 0)}
        if q.accounts:
            accs = _inbound_accounts(link, q.account)
            if accs:
                rgw["accounts"] = accs
        inbound.setdefault(link.name, []).append(rgw)
    doc["inbound_gateways"] = {name: inbound[name] for name in sorted(inbound)}
    return doc


def _outbound(gateways: Gateways, link: GatewayConnection, now: float, q: GatewayzQuery) -> dict[str, Any]:
    cfg = gateways.remotes.get(link.name)
    subs = sum(i.count() for i in link.interests.values() if i is not None)
    rgw: dict[str, Any] = {
        "configured": cfg is not None and not cfg.implicit,
        "connection": _gateway_conn(link, now, subs),
    }
    if q.accounts:
        accs: list[dict[str, Any]] = []
        for name in sorted(link.interests):
            if q.account and name.decode() != q.account:
                continue
            interest = link.interests[name]
            a: dict[str, Any] = {"name": name.decode("utf-8", "replace")}
            if interest is None:
                a.update(interest_mode=MODE_NAMES[OPTIMISTIC], interest_only_threshold=MAX_NO_INTEREST)
                accs.append(a)
                continue
            a["interest_mode"] = MODE_NAMES[interest.mode]
            if interest.refused:
                a["no_interest_count"] = len(interest.refused)
            a["interest_only_threshold"] = MAX_NO_INTEREST
            keys = list(interest.subs)
            if keys:
                a["num_subs"] = len(keys)
            queues = sum(1 for _s, queue in keys if queue is not None)
            if queues:
                a["num_queue_subs"] = queues
            if keys and q.subs == "detail":
                a["subscriptions_list_detail"] = [
                    _sub_detail(link, key, interest.subs[key].delivered) for key in keys
                ]
            elif keys and q.subs:
                a["subscriptions_list"] = [subject.decode("utf-8", "replace") for subject, _q in keys]
            accs.append(a)
        if accs:
            rgw["accounts"] = accs
    return rgw


def _sub_detail(link: GatewayConnection, key: tuple[bytes, bytes | None], msgs: int) -> dict[str, Any]:
    subject, queue = key
    d: dict[str, Any] = {"subject": subject.decode("utf-8", "replace")}
    if queue is not None:
        d["qgroup"] = queue.decode("utf-8", "replace")
    d.update(sid="", msgs=msgs, cid=link.rid)  # a remote cluster's interest has no sid
    return d


def _inbound_accounts(link: GatewayConnection, only: str) -> list[dict[str, Any]]:
    """What ``link`` was told per account: its mode and the subjects refused; an account told
    ``A-`` and nothing since is in optimistic mode (nats-server keeps no state for it)."""
    names = sorted(set(link.told) | link.told_none)
    accs: list[dict[str, Any]] = []
    for name in names:
        if only and name.decode() != only:
            continue
        told = link.told.get(name)
        a: dict[str, Any] = {"name": name.decode("utf-8", "replace")}
        a["interest_mode"] = MODE_NAMES[told.mode if told is not None else OPTIMISTIC]
        if told is not None and told.refused:
            a["no_interest_count"] = len(told.refused)
        a["interest_only_threshold"] = MAX_NO_INTEREST
        accs.append(a)
    return accs


def _gateway_conn(link: GatewayConnection, now: float, subs: int) -> dict[str, Any]:
    """A gateway connection as nats-server's ConnInfo shows one (kind ``Gateway``, the remote
    server's id as ``name``)."""
    d: dict[str, Any] = {
        "cid": link.rid,
        "kind": link.kind,
        "ip": link.host_addr,
        "port": link.port,
        "start": go_time(link.start),
        "last_activity": go_time(link.last_activity),
        "rtt": link_rtt(link),
        "uptime": uptime(now - link.start),
        "idle": uptime(now - link.last_activity),
        "pending_bytes": link.pending_bytes(),
        "in_msgs": link.in_msgs,
        "out_msgs": link.out_msgs,
        "in_bytes": link.in_bytes,
        "out_bytes": link.out_bytes,
        "subscriptions": subs,
    }
    if link.remote_id:
        d["name"] = link.remote_id
    return d
