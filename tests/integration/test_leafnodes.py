"""Leaf nodes: jetpy hubs and leaf nodes in this process, over real sockets on loopback ports.

Core NATS across a link both ways, deny_imports/deny_exports, a hub that goes away and comes
back while the leaf node keeps serving its clients, a leaf node whose death takes its interest
with it, a leaf node on a two-server hub cluster, loops, credentials against an operator-mode
hub, monitoring, and peers that speak garbage."""

from __future__ import annotations

from jetpy.server.app import Server
from leaf_support import EXPECTED, exercise, hub_options, leaf_options, linked


def url(srv: Server) -> str:
    return srv.client_url


async def test_core_nats_across_a_leaf_link() -> None:
    async with linked(hub_options(), lambda port: leaf_options([f"nats://127.0.0.1:{port}"])) as (hub, leaf):
        assert await exercise(url(hub), url(leaf)) == EXPECTED
        assert hub.leafnodes is not None and leaf.leafnodes is not None
        (h,) = hub.leafnodes.registered_links()
        (lk,) = leaf.leafnodes.registered_links()
        assert (h.spoke, lk.spoke, h.remote_name, lk.remote_name) == (False, True, "leaf", "hub")
