"""Leaf nodes: jetpy hubs and leaf nodes in this process, over real sockets on loopback ports.

Core NATS across a link both ways, deny_imports/deny_exports, a hub that goes away and comes
back while the leaf node keeps serving its clients, a leaf node whose death takes its interest
with it, a leaf node on a two-server hub cluster, loops, credentials against an operator-mode
hub, monitoring, and peers that speak garbage."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ExternalStream, StreamConfig, StreamSource

from certs import make_pki
from cluster_support import embedded_cluster
from conftest import free_port
from jetpy.server.app import Server
from jetpy.server.conf_format import parse_config_text
from jetpy.server.config import apply_config
from jetpy.server.options import (
    GatewayOptions,
    LeafNodeOptions,
    LeafRemote,
    RemoteGateway,
    ServerOptions,
    TlsOptions,
)
from jwt_issuer import user_jwt, user_key, world, write_creds
from leaf_support import EXPECTED, Box, exercise, hub_options, leaf_options, linked, reach, wait_links


def url(srv: Server) -> str:
    return srv.client_url


async def test_core_nats_across_a_leaf_link() -> None:
    async with linked(hub_options(), lambda port: leaf_options([f"nats://127.0.0.1:{port}"])) as (hub, leaf):
        assert await exercise(url(hub), url(leaf)) == EXPECTED
        assert hub.leafnodes is not None and leaf.leafnodes is not None
        (h,) = hub.leafnodes.registered_links()
        (lk,) = leaf.leafnodes.registered_links()
        assert (h.spoke, lk.spoke, h.remote_name, lk.remote_name) == (False, True, "leaf", "hub")


async def test_deny_imports_and_exports() -> None:
    """deny_imports: the hub's messages on those subjects do not come in (and the hub is not
    told of the leaf node's interest in them); deny_exports: the leaf node's messages on
    those subjects do not go out."""

    def leaf(port: int) -> ServerOptions:
        return leaf_options(
            [f"nats://127.0.0.1:{port}"], deny_imports=("secret.>",), deny_exports=("private.*",)
        )

    async with linked(hub_options(), leaf) as (hub, lf):
        hc, lc = await nats.connect(url(hub)), await nats.connect(url(lf))
        try:
            at_leaf, at_hub = Box(), Box()
            await lc.subscribe("secret.plans", cb=at_leaf.cb)
            await lc.subscribe("open", cb=at_leaf.cb)
            await hc.subscribe("private.notes", cb=at_hub.cb)
            await hc.subscribe("public", cb=at_hub.cb)
            await hc.subscribe(">", cb=at_hub.cb)
            await reach(hc, "open", at_leaf)
            await reach(lc, "public", at_hub)
            assert hub.leafnodes is not None
            (link,) = hub.leafnodes.registered_links()
            assert link.interest is not None
            told = {subject for subject, _q in link.interest.subs}
            assert b"open" in told and b"secret.plans" not in told  # never told
            at_hub.msgs.clear()
            await hc.publish("secret.plans", b"no")
            await hc.publish("open", b"yes")
            await lc.publish("private.notes", b"no")
            await lc.publish("public", b"yes")
            await asyncio.gather(hc.flush(), lc.flush())
            await asyncio.sleep(0.3)
            assert at_leaf.data() == [b"yes"]
            # the leaf node's messages: public, by its subscription and by ">"; no private.notes
            from_leaf = [m.subject for m in at_hub.msgs if m.subject in ("public", "private.notes")]
            assert from_leaf == ["public", "public"]
        finally:
            await hc.close()
            await lc.close()


async def test_hub_away_and_back_then_leaf_gone() -> None:
    """The leaf node serves its own clients while its hub is away, tells the hub its interest
    again when it is back (cross traffic resumes), and its death takes its interest off the hub."""
    hub = Server(hub_options())
    await hub.start()
    assert hub.leafnodes is not None
    port = hub.leafnodes.port
    lf = Server(leaf_options([f"nats://127.0.0.1:{port}"]))
    await lf.start()
    hub2: Server | None = None
    try:
        await wait_links(lf)
        lc = await nats.connect(url(lf))
        local, cross = Box(), Box()
        await lc.subscribe("local", cb=local.cb)
        await lc.subscribe("cross", cb=cross.cb)
        await lc.flush()
        await hub.shutdown()
        await wait_links(lf, 0)
        for i in range(5):
            await lc.publish("local", b"%d" % i)
        await lc.flush()
        await asyncio.sleep(0.1)
        assert local.data() == [b"0", b"1", b"2", b"3", b"4"]
        hub2 = Server(hub_options(leaf_port=port))
        await hub2.start()
        await wait_links(hub2)
        hc = await nats.connect(url(hub2))
        await reach(hc, "cross", cross)  # the leaf node's interest was told again
        await hc.publish("cross", b"again")
        await hc.flush()
        await asyncio.sleep(0.1)
        assert cross.data() == [b"again"]
        await lc.close()
        await lf.shutdown()  # the leaf node goes away: its interest leaves the hub
        await wait_links(hub2, 0)
        assert not hub2.broker.has_interest(b"cross")
        with pytest.raises(nats.errors.NoRespondersError):
            await hc.request("cross", b"anyone?", timeout=2)
        await hc.close()
    finally:
        await lf.shutdown()
        await hub.shutdown()
        if hub2 is not None:
            await hub2.shutdown()


async def test_leaf_on_a_two_server_hub_cluster() -> None:
    """A leaf node of one server of a hub cluster: its messages reach the other server's clients
    and theirs reach it, each once (no loop); when its hub dies it moves to the other server,
    whose leaf node URL the hub told it (the routes tell each other theirs), and traffic resumes."""
    base = ServerOptions(leafnodes=LeafNodeOptions(host="127.0.0.1", port=-1))
    async with embedded_cluster(2, base=base) as hubs:
        assert hubs[0].leafnodes is not None
        lf = Server(leaf_options([f"nats://127.0.0.1:{hubs[0].leafnodes.port}"]))
        await lf.start()
        try:
            await wait_links(lf)
            assert lf.leafnodes is not None
            (link,) = lf.leafnodes.registered_links()
            hub = next(h for h in hubs if h.server_name == link.remote_name)
            other = next(h for h in hubs if h is not hub)
            lc, c2 = await nats.connect(url(lf)), await nats.connect(url(other))
            at_leaf, at_other = Box(), Box()
            await lc.subscribe("to.leaf", cb=at_leaf.cb)
            await c2.subscribe("to.other", cb=at_other.cb)
            await reach(c2, "to.leaf", at_leaf)
            await reach(lc, "to.other", at_other)
            for i in range(10):
                await c2.publish("to.leaf", b"%d" % i)
                await lc.publish("to.other", b"%d" % i)
            await asyncio.gather(lc.flush(), c2.flush())
            await asyncio.sleep(0.3)
            assert at_leaf.data() == at_other.data() == [b"%d" % i for i in range(10)]
            await hub.shutdown()  # the leaf node's hub goes: it links to the other
            await wait_links(other)
            await reach(c2, "to.leaf", at_leaf)
            await c2.publish("to.leaf", b"after")
            await c2.flush()
            await asyncio.sleep(0.2)
            assert at_leaf.data()[-1:] == [b"after"] and len(at_leaf.data()) == 11
            await lc.close()
            await c2.close()
        finally:
            await lf.shutdown()


async def test_a_loop_is_detected(caplog: pytest.LogCaptureFixture) -> None:
    """Two servers each a leaf node of the other: one's $LDS. subject comes back to it, and the
    link is closed with nats-server's error (the dialling end waits before trying again)."""
    pa, pb = free_port(), free_port()

    def both(name: str, port: int, other: int) -> ServerOptions:
        return dataclasses.replace(
            hub_options(name),
            leafnodes=LeafNodeOptions(
                host="127.0.0.1", port=port, remotes=[LeafRemote((f"nats://127.0.0.1:{other}",))]
            ),
        )

    a, b = Server(both("a", pa, pb)), Server(both("b", pb, pa))
    with caplog.at_level(logging.ERROR, logger="jetpy.server"):
        await a.start()
        await b.start()
        try:
            deadline = asyncio.get_running_loop().time() + 10
            while "Loop detected for leafnode account" not in caplog.text:
                assert asyncio.get_running_loop().time() < deadline, caplog.text
                await asyncio.sleep(0.05)
        finally:
            await b.shutdown()
            await a.shutdown()
    assert 'Loop detected for leafnode account="$G". Delaying attempt to reconnect for 30s' in caplog.text


async def test_creds_against_an_operator_mode_hub(tmp_path: Path) -> None:
    """A leaf node's creds file (a user JWT of account B, and its seed signing the hub's nonce)
    binds the link to account B of an operator-mode jetpy hub; a bad signature is refused."""
    w = world()
    (tmp_path / "op.jwt").write_text(w.operator_jwt)
    hub_opts, _ = apply_config(parse_config_text(w.config(tmp_path / "op.jwt")))
    leaf_user, hub_user = user_key(), user_key()
    creds = write_creds(tmp_path / "leaf.creds", user_jwt(leaf_user, w.b, name="edge"), leaf_user)
    hub_creds = write_creds(tmp_path / "hub.creds", user_jwt(hub_user, w.b, name="cloud"), hub_user)
    async with linked(
        hub_options(base=hub_opts), lambda port: leaf_options([f"nats://127.0.0.1:{port}"], credentials=creds)
    ) as (hub, lf):
        assert hub.leafnodes is not None
        (link,) = hub.leafnodes.registered_links()
        assert link.account == w.b.public.encode()
        hc = await nats.connect(url(hub), user_credentials=hub_creds)
        lc = await nats.connect(url(lf))
        box = Box()
        await hc.subscribe("telemetry", cb=box.cb)
        await reach(lc, "telemetry", box)
        await lc.publish("telemetry", b"42")
        await lc.flush()
        await asyncio.sleep(0.2)
        assert box.data() == [b"42"]
        await hc.close()
        await lc.close()
    wrong = write_creds(tmp_path / "wrong.creds", user_jwt(leaf_user, w.b, name="edge"), user_key())
    hub2 = Server(hub_options(base=hub_opts))
    await hub2.start()
    assert hub2.leafnodes is not None
    lf2 = Server(leaf_options([f"nats://127.0.0.1:{hub2.leafnodes.port}"], credentials=wrong))
    await lf2.start()
    try:
        await asyncio.sleep(0.5)
        assert hub2.leafnodes.registered_links() == []
    finally:
        await lf2.shutdown()
        await hub2.shutdown()


async def test_hub_authorization_binds_accounts() -> None:
    """leafnodes { authorization { users } }: each user's link binds to its account; a wrong
    password is refused with Authorization Violation."""
    from jetpy.server.options import AccountOptions, User

    base = ServerOptions(accounts=[AccountOptions("A"), AccountOptions("B")])
    users = [User("ua", "pa", account="A"), User("ub", "pb", account="B")]
    hub = Server(hub_options(base=base, users=users, auth_set=True))
    await hub.start()
    assert hub.leafnodes is not None
    port = hub.leafnodes.port
    leaves = [
        Server(leaf_options([f"nats://ua:pa@127.0.0.1:{port}"], name="la")),
        Server(leaf_options([f"nats://ub:wrong@127.0.0.1:{port}"], name="lb")),
    ]
    for lf in leaves:
        await lf.start()
    try:
        await wait_links(hub, 1)
        await asyncio.sleep(0.3)
        (link,) = hub.leafnodes.registered_links()
        assert (link.remote_name, link.account) == ("la", b"A")
    finally:
        for lf in leaves:
            await lf.shutdown()
        await hub.shutdown()


async def test_a_peer_that_speaks_garbage_loses_only_its_link(caplog: pytest.LogCaptureFixture) -> None:
    """Garbage from a leaf node closes its link (logged as nats-server logs it) and nothing
    else; garbage from a hub closes the leaf node's link, whose clients keep being served."""
    async with linked(hub_options(), lambda port: leaf_options([f"nats://127.0.0.1:{port}"])) as (hub, lf):
        assert hub.leafnodes is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", hub.leafnodes.port)
        await reader.readline()  # INFO
        with caplog.at_level(logging.ERROR, logger="jetpy.server"):
            writer.write(b'CONNECT {"name":"junk","headers":true}\r\nLMSG foo bar baz qux\r\n')
            await writer.drain()
            await asyncio.wait_for(reader.read(), 5)  # read to the end: the link was closed
        assert "processLeafMsgArgs Bad or Missing Reply Indicator" in caplog.text
        writer.close()
        assert len(hub.leafnodes.registered_links()) == 1  # the real leaf node is still linked
        nc = await nats.connect(url(hub))
        await nc.close()

    # a hub that greets with INFO and then sends garbage
    async def fake_hub(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b'INFO {"server_id":"FAKE","headers":true,"nonce":"x"} \r\nLS+ a b c d e\r\n')
        await w.drain()
        await r.read()

    fake = await asyncio.start_server(fake_hub, "127.0.0.1", 0)
    port = fake.sockets[0].getsockname()[1]
    lf = Server(leaf_options([f"nats://127.0.0.1:{port}"]))
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="jetpy.server"):
        await lf.start()
        try:
            deadline = asyncio.get_running_loop().time() + 5
            while "processLeafSub Parse Error" not in caplog.text:
                assert asyncio.get_running_loop().time() < deadline, caplog.text
                await asyncio.sleep(0.05)
            nc = await nats.connect(url(lf))
            box = Box()
            await nc.subscribe("still", cb=box.cb)
            await nc.publish("still", b"served")
            await nc.flush()
            await asyncio.sleep(0.05)
            assert box.data() == [b"served"]
            await nc.close()
        finally:
            await lf.shutdown()
            fake.close()


async def test_monitoring() -> None:
    """/leafz (subs=1, acc), /varz's leaf block and leafnodes count, and /metrics' leafz families."""
    import json
    import urllib.request

    def get(srv: Server, path: str) -> bytes:
        with urllib.request.urlopen(f"{srv.monitor_url}{path}", timeout=5) as r:
            return bytes(r.read())

    async with linked(
        dataclasses.replace(hub_options(), http_port=-1),
        lambda port: leaf_options([f"nats://127.0.0.1:{port}"], deny_imports=("x.>",)),
    ) as (hub, lf):
        nc = await nats.connect(url(lf))
        hc = await nats.connect(url(hub))
        box = Box()
        await nc.subscribe("seen.here", cb=box.cb)
        await reach(hc, "seen.here", box)
        doc = json.loads(await asyncio.to_thread(get, hub, "/leafz?subs=1"))
        assert doc["leafnodes"] == 1
        (entry,) = doc["leafs"]
        assert (entry["name"], entry["is_spoke"], entry["account"], entry["compression"]) == (
            "leaf",
            False,
            "$G",
            "off",
        )
        assert "seen.here" in entry["subscriptions_list"] and entry["in_msgs"] == 0 and entry["out_msgs"] >= 1
        none = json.loads(await asyncio.to_thread(get, hub, "/leafz?acc=OTHER"))
        assert (none["leafnodes"], none["leafs"]) == (0, None)
        varz = json.loads(await asyncio.to_thread(get, hub, "/varz"))
        assert varz["leafnodes"] == 1 and list(varz["leaf"]) == [
            "host",
            "port",
            "auth_timeout",
            "tls_timeout",
        ]
        (stat,) = [
            a
            for a in json.loads(await asyncio.to_thread(get, hub, "/accstatz"))["account_statz"]
            if a["acc"] == "$G"
        ]
        assert (stat["leafnodes"], stat["total_conns"]) == (1, stat["conns"] + 1)
        detail = json.loads(await asyncio.to_thread(get, hub, "/accountz?acc=$G"))["account_detail"]
        assert detail["leafnode_connections"] == 1
        metrics = (await asyncio.to_thread(get, hub, "/metrics")).decode()
        assert (
            "gnatsd_leafz_conn_nodes_total" in metrics and "gnatsd_leafz_conn_out_msgs{server_id=" in metrics
        )
        await nc.close()
        await hc.close()


async def test_leaf_clients_use_the_hubs_jetstream_by_its_domain(tmp_path: Path) -> None:
    """A leaf node's clients reach their hub's JetStream by its domain ($JS.<domain>.API), and
    their publishes are stored by the hub's streams; $JS.API itself, $KV. and $OBJ. cross no
    leaf link, either way, as in nats-server (each side's JetStream answers its own clients)."""
    hub_opts = dataclasses.replace(
        hub_options(), jetstream=True, store_dir=str(tmp_path / "js"), jetstream_domain="cloud"
    )
    async with linked(hub_opts, lambda port: leaf_options([f"nats://127.0.0.1:{port}"])) as (hub, lf):
        nc = await nats.connect(url(lf))
        js = nc.jetstream(domain="cloud")
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # until the hub's API interest has crossed the link
            try:
                await js.add_stream(name="EDGE", subjects=["edge.>"])
                break
            except nats.errors.NoRespondersError:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)
        ack = await nc.jetstream().publish("edge.temp", b"21.5")
        assert (ack.stream, ack.seq, ack.domain) == ("EDGE", 1, "cloud")
        msg = await js.get_msg("EDGE", 1)
        assert msg.data == b"21.5"
        # consumers across: a pull consumer's fetch and a push consumer's deliveries, each
        # shown with the subject the message was stored under
        await nc.jetstream().publish("edge.wind", b"7")
        pull = await js.pull_subscribe("edge.>", durable="PULL", stream="EDGE")
        fetched = await pull.fetch(2, timeout=5)
        assert [(m.subject, m.data) for m in fetched] == [("edge.temp", b"21.5"), ("edge.wind", b"7")]
        for m in fetched:
            await m.ack()
        pushed = Box()
        await js.subscribe("edge.>", stream="EDGE", durable="PUSH", cb=pushed.cb)
        deadline = asyncio.get_running_loop().time() + 5
        while len(pushed.msgs) < 2:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert [(m.subject, m.data) for m in pushed.msgs] == [("edge.temp", b"21.5"), ("edge.wind", b"7")]
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JS.API.INFO", b"", timeout=2)
        assert hub.leafnodes is not None
        (link,) = hub.leafnodes.registered_links()
        assert link.told is not None
        told = {subject for subject, _q in link.told.counts}
        assert b"$JS.cloud.API.>" in told and not any(
            t.startswith((b"$JS.API", b"$KV.", b"$OBJ.")) for t in told
        )
        # a wildcard subscription across the link does not carry JetStream's API either
        hc = await nats.connect(url(hub))
        seen = Box()
        await nc.subscribe(">", cb=seen.cb)
        await reach(hc, "any.probe", seen)
        await hc.request("$JS.API.INFO", b"", timeout=2)  # the hub's own JetStream answers
        await asyncio.sleep(0.1)
        assert not [m for m in seen.msgs if m.subject.startswith("$JS.API")]
        await hc.close()
        await nc.close()


async def test_tls_and_a_remote_that_is_the_hub(tmp_path: Path) -> None:
    """leafnodes { tls } on the hub and tls {} on the remote (mutual, verified against the CA);
    and remotes: [{ hub: true }]: the dialling server is the hub, the accepting one its leaf node."""
    pki = make_pki(tmp_path / "pki")
    tls = TlsOptions(
        cert_file=str(pki.route_cert), key_file=str(pki.route_key), ca_file=str(pki.ca), verify=True
    )
    async with linked(
        hub_options(tls=tls), lambda port: leaf_options([f"tls://127.0.0.1:{port}"], tls=tls)
    ) as (hub, lf):
        assert await _crosses(hub, lf)
    # the accepting server is the leaf node: it dials nothing, the hub dials it
    acceptor = Server(hub_options("acceptor"))
    await acceptor.start()
    assert acceptor.leafnodes is not None
    dialler = Server(leaf_options([f"nats://127.0.0.1:{acceptor.leafnodes.port}"], name="dialler", hub=True))
    await dialler.start()
    try:
        await wait_links(acceptor)
        await wait_links(dialler)
        assert acceptor.leafnodes is not None and dialler.leafnodes is not None
        assert [x.spoke for x in acceptor.leafnodes.registered_links()] == [True]
        assert [x.spoke for x in dialler.leafnodes.registered_links()] == [False]
        assert await _crosses(dialler, acceptor)
    finally:
        await dialler.shutdown()
        await acceptor.shutdown()


async def _crosses(hub: Server, leaf: Server) -> bool:
    """A message from each side reaches a subscriber on the other."""
    hc, lc = await nats.connect(url(hub)), await nats.connect(url(leaf))
    try:
        at_hub, at_leaf = Box(), Box()
        await hc.subscribe("up", cb=at_hub.cb)
        await lc.subscribe("down", cb=at_leaf.cb)
        await reach(lc, "up", at_hub)
        await reach(hc, "down", at_leaf)
        return True
    finally:
        await hc.close()
        await lc.close()


async def test_two_remotes_into_one_hub_cluster_carry_each_message_once() -> None:
    """Two remotes of one account to the two servers of a hub cluster: each hears its own
    $LDS. subject back through the other; the newer link closes as a loop, the older stays,
    and a message from the cluster arrives once."""
    base = ServerOptions(leafnodes=LeafNodeOptions(host="127.0.0.1", port=-1))
    async with embedded_cluster(2, base=base) as hubs:
        remotes = [
            LeafRemote((f"nats://127.0.0.1:{h.leafnodes.port}",)) for h in hubs if h.leafnodes is not None
        ]
        lf = Server(
            dataclasses.replace(leaf_options([]), leafnodes=LeafNodeOptions(remotes=remotes, reconnect=0.1))
        )
        await lf.start()
        try:
            lc, c2 = await nats.connect(url(lf)), await nats.connect(url(hubs[1]))
            box = Box()
            await lc.subscribe("once", cb=box.cb)
            await reach(c2, "once", box)
            await asyncio.sleep(0.3)  # the loop found, the newer link closed
            assert lf.leafnodes is not None and len(lf.leafnodes.registered_links()) == 1
            box.msgs.clear()
            for i in range(10):
                await c2.publish("once", b"%d" % i)
            await c2.flush()
            await asyncio.sleep(0.3)
            assert box.data() == [b"%d" % i for i in range(10)]
            await lc.close()
            await c2.close()
        finally:
            await lf.shutdown()


async def test_a_remote_carries_one_local_account() -> None:
    """remotes: [{ account: A }]: the link carries the leaf node's account A (its clients'
    messages cross, those of its other accounts stay home); /leafz names the account."""
    from jetpy.server.options import AccountOptions, User

    base = ServerOptions(
        accounts=[AccountOptions("A")], users=[User("a", "pa", account="A"), User("g", "pg")]
    )

    def leaf(port: int) -> ServerOptions:
        return leaf_options([f"nats://127.0.0.1:{port}"], base=base, account="A")

    async with linked(hub_options(), leaf) as (hub, lf):
        assert lf.leafnodes is not None
        assert [x.account for x in lf.leafnodes.registered_links()] == [b"A"]
        hc = await nats.connect(url(hub))
        a = await nats.connect(url(lf), user="a", password="pa")
        g = await nats.connect(url(lf), user="g", password="pg")
        box = Box()
        await hc.subscribe("acc.>", cb=box.cb)
        await reach(a, "acc.probe", box)
        await g.publish("acc.g", b"stays")
        await a.publish("acc.a", b"crosses")
        await asyncio.gather(g.flush(), a.flush())
        await asyncio.sleep(0.2)
        assert box.data() == [b"crosses"]
        for nc in (hc, a, g):
            await nc.close()


async def test_a_leaf_nodes_account_imports_on_the_hub() -> None:
    """A leaf link bound to an account with imports: its clients reach the exporting account's
    service (the hub tells the leaf node the import's subject) and get its stream."""
    text = """
    accounts {
      A: { users: [{user: a, password: a}], exports: [{service: "svc.time"}, {stream: "news.>"}] }
      B: { imports: [{service: {account: A, subject: "svc.time"}, to: "time"}, {stream: {account: A, subject: "news.>"}}] }
    }
    """
    base, _ = apply_config(parse_config_text(text))
    async with linked(
        hub_options(base=base, account="B", auth_set=True),
        lambda port: leaf_options([f"nats://127.0.0.1:{port}"]),
    ) as (hub, lf):
        a = await nats.connect(url(hub), user="a", password="a")
        lc = await nats.connect(url(lf))

        async def answer(msg: Msg) -> None:
            await msg.respond(b"noon")

        await a.subscribe("svc.time", cb=answer)
        await a.flush()
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            try:
                reply = await lc.request("time", b"?", timeout=1)
                break
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)
        assert reply.data == b"noon"
        news = Box()
        await lc.subscribe("news.>", cb=news.cb)
        await reach(a, "news.probe", news)
        await a.publish("news.today", b"sunny")
        await a.flush()
        await asyncio.sleep(0.2)
        assert news.data() == [b"sunny"]
        await a.close()
        await lc.close()


async def test_hub_mappings_apply_to_a_leaf_nodes_messages() -> None:
    """A hub's subject mappings: the leaf node is told their sources as interest, and its
    messages are mapped as a client's publishes are."""
    base, _ = apply_config(parse_config_text('mappings { "temp.in": "temp.stored" }'))
    async with linked(hub_options(base=base), lambda port: leaf_options([f"nats://127.0.0.1:{port}"])) as (
        hub,
        lf,
    ):
        hc, lc = await nats.connect(url(hub)), await nats.connect(url(lf))
        box = Box()
        await hc.subscribe("temp.stored", cb=box.cb)
        await reach(lc, "temp.in", box)
        await lc.publish("temp.in", b"20")
        await lc.flush()
        await asyncio.sleep(0.2)
        assert [(m.subject, m.data) for m in box.msgs] == [("temp.stored", b"20")]
        await hc.close()
        await lc.close()


async def test_jetstream_domains_across_a_leaf_link(tmp_path: Path) -> None:
    """JetStream on both ends, domains cloud (hub) and edge (leaf node): each side's $JS.API is
    its own, each reaches the other by its domain, and an external mirror and source on the
    leaf node copy a hub stream across the link (later messages too)."""
    hub_opts = dataclasses.replace(
        hub_options(), jetstream=True, store_dir=str(tmp_path / "hub"), jetstream_domain="cloud"
    )

    def leaf(port: int) -> ServerOptions:
        return dataclasses.replace(
            leaf_options([f"nats://127.0.0.1:{port}"]),
            jetstream=True,
            store_dir=str(tmp_path / "leaf"),
            jetstream_domain="edge",
        )

    async with linked(hub_opts, leaf) as (hub, lf):
        hc, lc = await nats.connect(url(hub)), await nats.connect(url(lf))
        hjs, ljs = hc.jetstream(), lc.jetstream()
        await hjs.add_stream(name="ORDERS", subjects=["orders.>"])
        await ljs.add_stream(name="LOCAL", subjects=["local.>"])
        assert (await hjs.account_info()).domain == "cloud"
        assert (await ljs.account_info()).domain == "edge"
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # the leaf node's domain API, reached from the hub
            try:
                info = await hc.jetstream(domain="edge").stream_info("LOCAL")
                break
            except nats.errors.NoRespondersError:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)
        assert info.config.name == "LOCAL"
        for i in range(5):
            await hjs.publish("orders.new", b"%d" % i, headers={"N": str(i)})
        external = ExternalStream(api="$JS.cloud.API")
        await ljs.add_stream(
            StreamConfig(name="MIRROR", mirror=StreamSource(name="ORDERS", external=external))
        )
        await ljs.add_stream(
            StreamConfig(name="COPY", sources=[StreamSource(name="ORDERS", external=external)])
        )
        for i in range(5, 8):
            await hjs.publish("orders.new", b"%d" % i)

        async def count(name: str) -> int:
            return (await ljs.stream_info(name)).state.messages

        deadline = asyncio.get_running_loop().time() + 15
        while (await count("MIRROR"), await count("COPY")) != (8, 8):
            assert asyncio.get_running_loop().time() < deadline, (
                (await count("MIRROR")),
                await count("COPY"),
            )
            await asyncio.sleep(0.1)
        first = await ljs.get_msg("MIRROR", 1)
        assert (first.subject, first.data, first.headers) == ("orders.new", b"0", {"N": "0"})
        last = await ljs.get_msg("COPY", 8)
        assert (last.subject, last.data) == ("orders.new", b"7")
        await hc.close()
        await lc.close()


async def test_a_leaf_node_of_a_super_cluster() -> None:
    """A leaf node of a server of cluster A, in a super cluster with cluster B: the hub tells it
    what B's clients subscribe to (learned over the gateway), tells B what the leaf node's
    clients subscribe to, and messages cross both hops each way, once."""
    pa, pb = free_port(), free_port()

    def member(name: str, port: int, other: str, other_port: int) -> ServerOptions:
        gw = GatewayOptions(
            name=name,
            host="127.0.0.1",
            port=port,
            gateways=[RemoteGateway(other, (f"nats://127.0.0.1:{other_port}",))],
        )
        return ServerOptions(host="127.0.0.1", port=0, server_name=f"{name}1", gateway=gw)

    a = Server(
        dataclasses.replace(member("A", pa, "B", pb), leafnodes=LeafNodeOptions(host="127.0.0.1", port=-1))
    )
    b = Server(member("B", pb, "A", pa))
    await a.start()
    await b.start()
    assert a.leafnodes is not None
    lf = Server(leaf_options([f"nats://127.0.0.1:{a.leafnodes.port}"]))
    await lf.start()
    try:
        await wait_links(lf)
        lc, bc = await nats.connect(url(lf)), await nats.connect(url(b))
        at_leaf, at_b = Box(), Box()
        await lc.subscribe("edge.y", cb=at_leaf.cb)
        await bc.subscribe("far.x", cb=at_b.cb)
        await reach(bc, "edge.y", at_leaf, within=15)  # B -> gateway -> A -> leaf node
        await reach(lc, "far.x", at_b, within=15)  # leaf node -> A -> gateway -> B
        for i in range(5):
            await bc.publish("edge.y", b"%d" % i)
            await lc.publish("far.x", b"%d" % i)
        await asyncio.gather(bc.flush(), lc.flush())
        await asyncio.sleep(0.3)
        assert at_leaf.data() == at_b.data() == [b"%d" % i for i in range(5)]
        reply = await asyncio.wait_for(_answered(lc, bc), 10)
        assert reply == b"from B"
        await lc.close()
        await bc.close()
    finally:
        await lf.shutdown()
        await b.shutdown()
        await a.shutdown()


async def _answered(requester: Client, responder: Client) -> bytes:
    """A request from ``requester`` answered by ``responder`` once its interest has crossed."""

    async def answer(msg: Msg) -> None:
        await msg.respond(b"from B")

    await responder.subscribe("svc.b", cb=answer)
    while True:
        try:
            reply = await requester.request("svc.b", b"?", timeout=1)
            return bytes(reply.data)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            await asyncio.sleep(0.05)


async def test_the_hub_refuses_what_is_no_leaf_node_of_another_cluster(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client on the leaf node port gets nats-server's `attempted to connect to leaf node
    port`; a leaf node whose cluster has the hub's cluster name is refused with `remote leafnode
    has same cluster name`."""
    base = ServerOptions(leafnodes=LeafNodeOptions(host="127.0.0.1", port=-1))
    async with embedded_cluster(1, base=base) as (hub,):
        assert hub.leafnodes is not None and hub.cluster is not None
        port = hub.leafnodes.port
        with caplog.at_level(logging.ERROR, logger="jetpy.server"):
            # (a raw client: a failed nats.connect leaves CPython 3.11's AST recursion count
            # inconsistent for the rest of the process)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await reader.readline()  # INFO
            writer.write(b'CONNECT {"lang":"python","version":"2.0","verbose":false}\r\nPING\r\n')
            answer = await asyncio.wait_for(reader.read(), 5)
            writer.close()
            assert b"-ERR 'attempted to connect to leaf node port'" in answer
            twin = Server(leaf_options([f"nats://127.0.0.1:{port}"], name=hub.cluster.name))
            await twin.start()
            try:
                deadline = asyncio.get_running_loop().time() + 5
                while "remote leafnode has same cluster name" not in caplog.text:
                    assert asyncio.get_running_loop().time() < deadline, caplog.text
                    await asyncio.sleep(0.05)
                assert hub.leafnodes.registered_links() == []
            finally:
                await twin.shutdown()
