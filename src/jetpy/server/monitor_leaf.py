"""Monitoring documents of the leaf nodes: ``/leafz`` and ``/varz``'s ``leaf`` block, with
nats-server's field names, order and omissions.

Owns the reading of the leaf links' state into those documents; knows nothing of HTTP (the
endpoints call it) and changes nothing. jetpy's leaf links are never compressed: every link's
``compression`` is ``off``.
"""

from __future__ import annotations

import time
from typing import Any

from jetpy.server.config_leaf import parse_leaf_url
from jetpy.server.dialing import hostport
from jetpy.server.leaf_conn import LeafConnection
from jetpy.server.leafnodes import LeafNodes
from jetpy.server.monitor_cluster import TLS_TIMEOUT, link_rtt
from jetpy.server.monitor_format import go_number, go_time
from jetpy.server.options import GLOBAL_ACCOUNT, LeafNodeOptions

__all__ = ["leafz", "varz_leaf"]


def varz_leaf(leafnodes: LeafNodes | None, lo: LeafNodeOptions) -> dict[str, Any]:
    """``/varz``'s ``leaf`` block: empty without leaf nodes; the listener's address and
    timeouts on a hub, the remotes on a leaf node (their local account, URLs and filters)."""
    if leafnodes is None:
        return {}
    doc: dict[str, Any] = {}
    if lo.port:
        doc.update(host=lo.host, port=leafnodes.port, auth_timeout=go_number(lo.auth_timeout))
        tls = lo.tls
        doc["tls_timeout"] = go_number(tls.timeout) if tls is not None else TLS_TIMEOUT
        if tls is not None:
            doc["tls_required"] = True
            if tls.verifies:
                doc["tls_verify"] = True
    remotes: list[dict[str, Any]] = []
    for remote in lo.remotes:
        r: dict[str, Any] = {"local_account": remote.account or GLOBAL_ACCOUNT}
        r["urls"] = [hostport(*parse_leaf_url(u)) for u in remote.urls]
        deny: dict[str, Any] = {}
        if remote.deny_exports:
            deny["exports"] = list(remote.deny_exports)
        if remote.deny_imports:
            deny["imports"] = list(remote.deny_imports)
        if deny:
            r["deny"] = deny
        remotes.append(r)
    if remotes:
        doc["remotes"] = remotes
    return doc


def leafz(leafnodes: LeafNodes | None, server_id: str, subs: bool, account: str = "") -> dict[str, Any]:
    """``/leafz`` (``subs``: each link's subscriptions listed; ``account``: its links only).
    nats-server encodes an empty list of links as null."""
    links = leafnodes.registered_links() if leafnodes is not None else []
    if account:
        links = [x for x in links if x.account.decode(errors="replace") == account]
    return {
        "server_id": server_id,
        "now": go_time(time.time()),
        "leafnodes": len(links),
        "leafs": [_leaf(x, subs) for x in links] if links else None,
    }


def _leaf(link: LeafConnection, subs: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": link.rid,
        "name": link.remote_name,
        "is_spoke": link.spoke,
        "account": link.account.decode(errors="replace"),
        "ip": link.host_addr,
        "port": link.port,
        "rtt": link_rtt(link),
        "in_msgs": link.in_msgs,
        "out_msgs": link.out_msgs,
        "in_bytes": link.in_bytes,
        "out_bytes": link.out_bytes,
        "subscriptions": link.subscription_count(),
    }
    if subs and link.interest is not None:
        doc["subscriptions_list"] = [s.decode(errors="replace") for s, _q in link.interest.subs]
    doc["compression"] = "off"
    return doc
