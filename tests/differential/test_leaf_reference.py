"""Leaf nodes side by side with nats-server: a jetpy leaf node on a nats-server hub (2.9.10 and
2.15.1) and a nats-server leaf node on a jetpy hub, each pair sent the same traffic
(:func:`leaf_support.exercise`) and held to the deliveries a pair of nats-servers makes; then
/leafz and /varz's leaf block of jetpy and 2.15.1 compared field by field, and a jetpy leaf
node's creds file against a nats-server hub in operator mode."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import ExternalStream, StreamConfig, StreamSource

from cluster_support import JETPY, NEWEST, OLDEST
from conftest import free_port
from jwt_issuer import user_jwt, user_key, world, write_creds
from leaf_support import EXPECTED, Box, exercise, reach
from super_support import Node, start_node

pytestmark = pytest.mark.timeout(120)


def _hub_conf(name: str, leaf_port: int, http: int = 0, extra: str = "") -> str:
    mon = f"http: 127.0.0.1:{http}\n" if http else ""
    return f"server_name: {name}\nlisten: 127.0.0.1:-1\n{mon}leafnodes {{ listen: 127.0.0.1:{leaf_port} }}\n{extra}"


def _leaf_conf(name: str, remote: str, http: int = 0, extra: str = "") -> str:
    mon = f"http: 127.0.0.1:{http}\n" if http else ""
    return f"server_name: {name}\nlisten: 127.0.0.1:-1\n{mon}leafnodes {{ reconnect: 1, remotes: [ {{ {remote} }} ] }}\n{extra}"


def _pair(tmp_path: Path, hub_kind: str, leaf_kind: str, monitor: bool = False) -> tuple[Node, Node]:
    leaf_port = free_port()
    hub = Node(hub_kind, "hub", "", tmp_path / "hub.conf", leaf_port=leaf_port)
    leaf = Node(leaf_kind, "leaf", "", tmp_path / "leaf.conf")
    start_node(tmp_path, hub, _hub_conf("hub", leaf_port, free_port() if monitor else 0), want_http=monitor)
    try:
        remote = f'url: "nats://127.0.0.1:{leaf_port}"'
        start_node(
            tmp_path, leaf, _leaf_conf("leaf", remote, free_port() if monitor else 0), want_http=monitor
        )
    except BaseException:
        hub.kill()
        raise
    return hub, leaf


@pytest.mark.parametrize(
    ("hub_kind", "leaf_kind"),
    [(NEWEST, NEWEST), (OLDEST, JETPY), (NEWEST, JETPY), (JETPY, NEWEST), (JETPY, OLDEST)],
    ids=[
        "reference",
        "jetpy-leaf-on-2.9.10",
        "jetpy-leaf-on-2.15.1",
        "2.15.1-leaf-on-jetpy",
        "2.9.10-leaf-on-jetpy",
    ],
)
async def test_same_traffic_same_deliveries(tmp_path: Path, hub_kind: str, leaf_kind: str) -> None:
    hub, leaf = _pair(tmp_path, hub_kind, leaf_kind)
    try:
        assert await exercise(hub.url, leaf.url) == EXPECTED
    finally:
        leaf.kill()
        hub.kill()


def _get(node: Node, path: str) -> Any:
    assert node.proc is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{node.proc.http_port}{path}", timeout=5) as r:
        return json.loads(r.read())


async def _leafz(node: Node) -> Any:
    return await asyncio.to_thread(_get, node, "/leafz?subs=1")


def _shape(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """A leaf entry's fields in order, with the values that must agree (not ids, ports, times,
    the loop-detection subject or compression, which jetpy never negotiates)."""
    keep = {"name", "is_spoke", "account", "ip", "in_msgs", "out_msgs", "in_bytes", "out_bytes"}
    return [(k, v if k in keep else None) for k, v in doc.items() if k != "compression"]


@pytest.mark.parametrize("side", ["hub", "leaf"])
async def test_leafz_and_varz_as_nats_server(tmp_path: Path, side: str) -> None:
    """jetpy on one end of a link, 2.15.1 on the other: each end's /leafz entry for the link
    compared with what 2.15.1 shows in the same seat (2.15.1 on both ends)."""
    seats = {"hub": (JETPY, NEWEST), "leaf": (NEWEST, JETPY)}[side]
    views: dict[str, Any] = {}
    for label, kinds in (("jetpy", seats), ("reference", (NEWEST, NEWEST))):
        d = tmp_path / label
        d.mkdir()
        hub, leaf = _pair(d, *kinds, monitor=True)
        try:
            nc = await nats.connect(leaf.url)
            hc = await nats.connect(hub.url)
            box, hbox = Box(), Box()
            await nc.subscribe("leafz.topic", cb=box.cb)
            await hc.subscribe("hubz.topic", cb=hbox.cb)
            await reach(hc, "leafz.topic", box)
            await reach(nc, "hubz.topic", hbox)
            await hc.publish("leafz.topic", b"hello")
            await hc.flush()
            await asyncio.sleep(0.3)
            node = hub if side == "hub" else leaf
            views[label] = (await _leafz(node), await asyncio.to_thread(_get, node, "/varz"))
            await nc.close()
            await hc.close()
        finally:
            leaf.kill()
            hub.kill()
    (jz, jv), (rz, rv) = views["jetpy"], views["reference"]
    assert list(jz) == list(rz) and jz["leafnodes"] == rz["leafnodes"] == 1
    jl, rl = jz["leafs"][0], rz["leafs"][0]
    # counts: 2.15.1's own traffic on the link (its $SYS requests' interest) is not jetpy's
    for doc in (jl, rl):
        doc["in_msgs"] = doc["out_msgs"] = doc["in_bytes"] = doc["out_bytes"] = None
    assert _shape(jl) == _shape(rl)
    topic = "leafz.topic" if side == "hub" else "hubz.topic"  # the peer's interest
    assert topic in rl["subscriptions_list"] and topic in jl["subscriptions_list"]
    assert list(jv["leaf"]) == list(rv["leaf"]) and jv["leafnodes"] == rv["leafnodes"] == 1
    if side == "leaf":
        assert jv["leaf"]["remotes"][0]["local_account"] == rv["leaf"]["remotes"][0]["local_account"]
    else:
        assert (jv["leaf"]["auth_timeout"], jv["leaf"]["tls_timeout"]) == (
            rv["leaf"]["auth_timeout"],
            rv["leaf"]["tls_timeout"],
        )


async def test_jetpy_leaf_with_creds_on_an_operator_mode_nats_server(tmp_path: Path) -> None:
    """A creds file (user JWT and nkey seed) authenticates a jetpy leaf node to nats-server
    2.15.1 in operator mode: the link binds to the user's account there."""
    w = world()
    op_file = tmp_path / "op.jwt"
    op_file.write_text(w.operator_jwt)
    leaf_user, hub_user = user_key(), user_key()
    leaf_creds = write_creds(tmp_path / "leaf.creds", user_jwt(leaf_user, w.b, name="leafuser"), leaf_user)
    hub_creds = write_creds(tmp_path / "hub.creds", user_jwt(hub_user, w.b, name="hubuser"), hub_user)
    leaf_port = free_port()
    hub = Node(NEWEST, "hub", "", tmp_path / "hub.conf", leaf_port=leaf_port)
    leaf = Node(JETPY, "leaf", "", tmp_path / "leaf.conf")
    start_node(tmp_path, hub, _hub_conf("hub", leaf_port, extra=w.config(op_file)))
    try:
        remote = f'url: "nats://127.0.0.1:{leaf_port}", credentials: "{leaf_creds}"'
        start_node(tmp_path, leaf, _leaf_conf("leaf", remote))
        hc = await nats.connect(hub.url, user_credentials=hub_creds)
        lc = await nats.connect(leaf.url)
        box = Box()
        await hc.subscribe("in.b", cb=box.cb)
        await reach(lc, "in.b", box)
        await lc.publish("in.b", b"from the edge")
        await lc.flush()
        await asyncio.sleep(0.3)
        assert box.data() == [b"from the edge"]
        await hc.close()
        await lc.close()
    finally:
        leaf.kill()
        hub.kill()


@pytest.mark.parametrize(
    ("hub_kind", "leaf_kind"),
    [(NEWEST, NEWEST), (NEWEST, JETPY), (JETPY, NEWEST)],
    ids=["reference", "jetpy-leaf-on-2.15.1", "2.15.1-leaf-on-jetpy"],
)
async def test_jetstream_across_a_leaf_link(tmp_path: Path, hub_kind: str, leaf_kind: str) -> None:
    """A hub with JetStream in domain "cloud": a leaf node's client reaches it by the domain's
    API, never by $JS.API (no responders), whoever is on either end."""
    leaf_port = free_port()
    js = f'jetstream {{ store_dir: "{tmp_path / "js"}", domain: cloud }}'
    hub = Node(hub_kind, "hub", "", tmp_path / "hub.conf", leaf_port=leaf_port)
    leaf = Node(leaf_kind, "leaf", "", tmp_path / "leaf.conf")
    start_node(tmp_path, hub, _hub_conf("hub", leaf_port, extra=js))
    try:
        start_node(tmp_path, leaf, _leaf_conf("leaf", f'url: "nats://127.0.0.1:{leaf_port}"'))
        nc = await nats.connect(leaf.url)
        outcome: dict[str, str] = {}
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            try:
                info = json.loads((await nc.request("$JS.cloud.API.INFO", b"", timeout=2)).data)
                outcome["domain"] = info.get("domain", "")
                break
            except nats.errors.NoRespondersError:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.1)
        try:
            await nc.request("$JS.API.INFO", b"", timeout=2)
            outcome["plain"] = "answered"
        except nats.errors.NoRespondersError:
            outcome["plain"] = "no responders"
        except nats.errors.TimeoutError:
            outcome["plain"] = "timeout"
        await nc.close()
        assert outcome == {"domain": "cloud", "plain": "no responders"}
    finally:
        leaf.kill()
        hub.kill()


@pytest.mark.parametrize(
    ("hub_kind", "leaf_kind"),
    [(NEWEST, NEWEST), (NEWEST, JETPY), (JETPY, NEWEST)],
    ids=["reference", "jetpy-leaf-on-2.15.1", "2.15.1-leaf-on-jetpy"],
)
async def test_external_mirror_across_domains(tmp_path: Path, hub_kind: str, leaf_kind: str) -> None:
    """JetStream on both ends (domains cloud and edge): a mirror on the leaf node of a hub
    stream, through $JS.cloud.API, copies every message with its subject and headers (the
    deliveries cross the link on their deliver subject, with the stored subject after the ack
    reply's @, as nats-server sends them)."""
    leaf_port = free_port()
    hub = Node(hub_kind, "hub", "", tmp_path / "hub.conf", leaf_port=leaf_port)
    leaf = Node(leaf_kind, "leaf", "", tmp_path / "leaf.conf")
    start_node(
        tmp_path,
        hub,
        _hub_conf("hub", leaf_port, extra=f'jetstream {{ store_dir: "{tmp_path / "h"}", domain: cloud }}'),
    )
    try:
        remote = f'url: "nats://127.0.0.1:{leaf_port}"'
        start_node(
            tmp_path,
            leaf,
            _leaf_conf("leaf", remote, extra=f'jetstream {{ store_dir: "{tmp_path / "l"}", domain: edge }}'),
        )
        hc, lc = await nats.connect(hub.url), await nats.connect(leaf.url)
        hjs, ljs = hc.jetstream(), lc.jetstream()
        await hjs.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(4):
            await hjs.publish(f"orders.{i}", b"%d" % i, headers={"N": str(i)})
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # until the hub's domain API is known on the leaf node
            try:
                await lc.request("$JS.cloud.API.INFO", b"", timeout=1)
                break
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.1)
        external = ExternalStream(api="$JS.cloud.API")
        await ljs.add_stream(
            StreamConfig(name="MIRROR", mirror=StreamSource(name="ORDERS", external=external))
        )
        await hjs.publish("orders.9", b"9")
        while (await ljs.stream_info("MIRROR")).state.messages < 5:
            assert asyncio.get_running_loop().time() < deadline + 10
            await asyncio.sleep(0.1)
        got = [await ljs.get_msg("MIRROR", seq) for seq in range(1, 6)]
        assert [(m.subject, m.data, (m.headers or {}).get("N")) for m in got] == [
            ("orders.0", b"0", "0"),
            ("orders.1", b"1", "1"),
            ("orders.2", b"2", "2"),
            ("orders.3", b"3", "3"),
            ("orders.9", b"9", None),
        ]
        await hc.close()
        await lc.close()
    finally:
        leaf.kill()
        hub.kill()


async def test_hub_killed_and_restarted(tmp_path: Path) -> None:
    """kill -9 of a jetpy hub under a jetpy leaf node: the leaf node keeps serving its clients,
    and once the hub is back on its port its clients reach the leaf node's again (the leaf node
    told it its interest anew). (A hub shut down and started again, and a leaf node against
    nats-server's hubs, are tests/integration/test_leafnodes.py's and the tests above.)"""
    hub, leaf = _pair(tmp_path, JETPY, JETPY)
    try:
        lc = await nats.connect(leaf.url)
        local, cross = Box(), Box()
        await lc.subscribe("local", cb=local.cb)
        await lc.subscribe("cross", cb=cross.cb)
        hc = await nats.connect(hub.url, allow_reconnect=False)
        await reach(hc, "cross", cross)
        await hc.close()
        hub.kill()
        for i in range(5):
            await lc.publish("local", b"%d" % i)
        await lc.flush()
        await asyncio.sleep(0.2)
        assert local.data() == [b"%d" % i for i in range(5)]
        start_node(tmp_path, hub, hub.conf.read_text())
        hc = await nats.connect(hub.url)
        cross.msgs.clear()
        await reach(hc, "cross", cross, within=15)
        await hc.publish("cross", b"back")
        await hc.flush()
        await asyncio.sleep(0.2)
        assert cross.data() == [b"back"]
        await hc.close()
        await lc.close()
    finally:
        leaf.kill()
        hub.kill()
