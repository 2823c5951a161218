"""Gateways as processes: two clusters of two servers joined by gateways, all jetpy or with the
other cluster made of nats-server 2.9.10 or 2.15.1 (either direction of every check crosses a
gateway both ways), and three clusters learning of each other by gossip. Checked between every
pair of servers in different clusters: subjects, wildcards, headers, request/reply with the
reply mapped across (``_GR_.``) and shown unmapped to the responder, no responders, queue groups
(the local cluster's members first, another cluster's when it has none); a killed gateway comes
back and traffic resumes.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

from cluster_support import JETPY, NEWEST, OLDEST, wait_mesh
from super_support import Node, start_node, super_cluster

pytestmark = pytest.mark.timeout(180)

LAYOUTS = {
    "all-jetpy": {"A": [JETPY, JETPY], "B": [JETPY, JETPY]},
    "B-is-2.15.1": {"A": [JETPY, JETPY], "B": [NEWEST, NEWEST]},
    "B-is-2.9.10": {"A": [JETPY, JETPY], "B": [OLDEST, OLDEST]},
    "mixed-both": {"A": [JETPY, NEWEST], "B": [OLDEST, JETPY]},
}


async def _pair_checks(pub: Node, sub: Node, tag: str) -> None:
    """What ``pub``'s clients send reaches ``sub``'s, across a gateway."""
    nc_p = await nats.connect(pub.url)
    nc_s = await nats.connect(sub.url)
    try:
        got: list[Msg] = []
        done = asyncio.Event()

        async def cb(msg: Msg) -> None:
            got.append(msg)
            if len(got) == 3:
                done.set()

        await nc_s.subscribe(f"{tag}.plain", cb=cb)
        await nc_s.subscribe(f"{tag}.wild.*", cb=cb)

        async def respond(msg: Msg) -> None:
            assert not msg.reply.startswith("_GR_"), msg.reply  # shown unmapped, as nats-server does
            await msg.respond(b"re:" + msg.data)

        await nc_s.subscribe(f"{tag}.svc", cb=respond)
        await nc_s.flush()
        await _until_interest(nc_p, f"{tag}.svc")
        await nc_p.publish(f"{tag}.plain", b"one")
        await nc_p.publish(f"{tag}.wild.x", b"two")
        await nc_p.publish(f"{tag}.plain", b"three", headers={"X-Tag": tag})
        await asyncio.wait_for(done.wait(), 5)
        assert sorted(m.data for m in got) == [b"one", b"three", b"two"]
        assert next(m for m in got if m.data == b"three").headers == {"X-Tag": tag}
        reply = await nc_p.request(f"{tag}.svc", b"ping", timeout=5)
        assert reply.data == b"re:ping"
        with pytest.raises(NoRespondersError):
            await nc_p.request(f"{tag}.nobody", b"x", timeout=2)
    finally:
        await nc_p.close()
        await nc_s.close()


async def _until_interest(nc: NATS, subject: str, within: float = 10.0) -> None:
    """Until a request on ``subject`` finds a responder (the interest crossed the gateway)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            await nc.request(subject, b"probe", timeout=1)
            return
        except (NoRespondersError, nats.errors.TimeoutError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


@pytest.mark.parametrize("layout", list(LAYOUTS))
async def test_core_nats_across_two_clusters(tmp_path: Path, layout: str) -> None:
    with super_cluster(tmp_path, LAYOUTS[layout]) as clusters:
        nodes = [n for members in clusters.values() for n in members]
        await wait_mesh([n.url for n in nodes], within=20.0)
        for i, (pub, sub) in enumerate(itertools.product(clusters["A"], clusters["B"])):
            await _pair_checks(pub, sub, f"ab{i}")
            await _pair_checks(sub, pub, f"ba{i}")


@pytest.mark.parametrize("layout", ["all-jetpy", "B-is-2.15.1", "B-is-2.9.10"])
async def test_queue_groups_prefer_the_local_cluster(tmp_path: Path, layout: str) -> None:
    with super_cluster(tmp_path, LAYOUTS[layout]) as clusters:
        a0, a1 = clusters["A"]
        b0, b1 = clusters["B"]
        await wait_mesh([n.url for n in (a0, a1, b0, b1)], within=20.0)
        got: dict[str, list[bytes]] = {"A": [], "B": []}
        clients = []
        for node, where in ((a1, "A"), (b1, "B")):
            nc = await nats.connect(node.url)
            clients.append(nc)

            async def cb(msg: Msg, where: str = where) -> None:
                got[where].append(msg.data)

            await nc.subscribe("work", queue="workers", cb=cb)
            await nc.flush()
        try:
            pubs = [await nats.connect(n.url) for n in (a0, b0)]
            clients.extend(pubs)
            await asyncio.sleep(1.0)  # the group's interest crosses routes and gateways
            for i in range(20):
                await pubs[0].publish("work", b"a%d" % i)
                await pubs[1].publish("work", b"b%d" % i)
            for p in pubs:
                await p.flush()
            await _wait(lambda: len(got["A"]) + len(got["B"]) == 40)
            # each cluster's publisher reached its own cluster's member only, each message once
            assert sorted(got["A"]) == sorted(b"a%d" % i for i in range(20))
            assert sorted(got["B"]) == sorted(b"b%d" % i for i in range(20))
            # a group with no member in this cluster: another cluster's member gets it, once
            await clients[1].close()  # B's member leaves; A's publisher keeps A's, B's goes to A
            await asyncio.sleep(1.0)
            for i in range(10):
                await pubs[1].publish("work", b"c%d" % i)
            await pubs[1].flush()
            await _wait(lambda: len(got["A"]) == 30)
            await asyncio.sleep(0.3)
            assert sorted(got["A"][20:]) == sorted(b"c%d" % i for i in range(10))
        finally:
            for nc in clients:
                if not nc.is_closed:
                    await nc.close()


async def _wait(pred: object, within: float = 10.0) -> None:
    assert callable(pred)
    deadline = asyncio.get_running_loop().time() + within
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_implicit_gateways_complete_the_mesh(tmp_path: Path) -> None:
    """A knows B, B knows C, C knows no one: gossip gives every cluster a gateway to every other."""
    layout = {"A": [JETPY], "B": [NEWEST], "C": [JETPY]}
    with super_cluster(tmp_path, layout, known={"A": ["B"], "B": ["C"], "C": []}) as clusters:
        nodes = [members[0] for members in clusters.values()]
        await wait_mesh([n.url for n in nodes], within=30)
        a, _b, c = nodes
        await _pair_checks(a, c, "ac")
        await _pair_checks(c, a, "ca")


async def test_a_killed_gateway_comes_back(tmp_path: Path) -> None:
    with super_cluster(tmp_path, {"A": [JETPY], "B": [JETPY]}) as clusters:
        (a,), (b,) = clusters["A"], clusters["B"]
        await wait_mesh([a.url, b.url], within=20.0)
        conf = b.conf.read_text()
        b.kill()
        await asyncio.sleep(0.5)
        start_node(tmp_path, b, conf)  # the same ports: A's gateway to B dials it again
        await wait_mesh([a.url, b.url], within=20)
        await _pair_checks(a, b, "back")
        await _pair_checks(b, a, "forth")
        assert 'Connecting to explicit gateway "B"' in a.log()
