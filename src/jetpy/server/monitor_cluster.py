"""Monitoring documents of the cluster: ``/routez`` and ``/varz``'s ``cluster`` block, with
nats-server 2.15.1's field names and order (compared with it in the tests).

Owns the reading of the cluster's state into those documents; knows nothing of HTTP (the
endpoints call it) and changes nothing. jetpy keeps one route per peer, so ``pool_size`` reads
-1 (nats-server's "no pooling") and every route's ``compression`` is ``off``.
"""

from __future__ import annotations

import time
from typing import Any, Final

from jetpy.server.cluster import Cluster
from jetpy.server.monitor_format import go_duration, go_number, go_time, ns, uptime
from jetpy.server.options import ClusterOptions
from jetpy.server.route_conn import RouteConnection

__all__ = ["TLS_TIMEOUT", "routez", "varz_cluster"]

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


def _route(r: RouteConnection, now: float, subs: str) -> dict[str, Any]:
    rtt = ns(r.rtt) if r.rtt > 0 else 0
    if 1_000 < rtt < 1_000_000:
        rtt -= rtt % 1_000  # as nats-server's getRTT truncates
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
        "rtt": go_duration(rtt),
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
