"""Mixed clusters, as processes on loopback: two jetpy servers and one nats-server (Debian's
2.9.10, or 2.15.1, which keeps one route to a peer that does not offer route pooling), routed
to one seed so that gossip forms the rest of the mesh across implementations. The same core-NATS
checks run over every pair of servers: plain and wildcard subjects, headers, request/reply, no
responders, queue groups delivered once cluster-wide."""

from __future__ import annotations

import asyncio
import collections
import itertools

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cluster_support import JETPY, NEWEST, OLDEST, Member, process_cluster, start_member, wait_mesh
from conftest import wait_for

pytestmark = pytest.mark.timeout(120)

LAYOUTS = [
    pytest.param([JETPY, OLDEST, JETPY], id="jetpy-seed-2.9.10"),
    pytest.param([OLDEST, JETPY, JETPY], id="2.9.10-seed"),
    pytest.param([JETPY, NEWEST, JETPY], id="jetpy-seed-2.15.1"),
    pytest.param([NEWEST, JETPY, JETPY], id="2.15.1-seed"),
    pytest.param([JETPY, JETPY, JETPY], id="all-jetpy"),
]


async def _clients(members: list[Member]) -> list[NATS]:
    return [await nats.connect(m.url, allow_reconnect=False) for m in members]


async def core_checks(members: list[Member]) -> None:
    """The core-NATS checks every layout must pass."""
    await wait_mesh([m.url for m in members])
    clients = await _clients(members)
    try:
        # every server publishes to a subscriber on every other server
        got: dict[int, list[tuple[str, bytes, dict[str, str] | None]]] = collections.defaultdict(list)
        for i, nc in enumerate(clients):

            async def cb(m: Msg, i: int = i) -> None:
                got[i].append((m.subject, m.data, m.headers))

            await nc.subscribe(f"to.{i}.>", cb=cb)
            await nc.flush()
        await asyncio.sleep(0.5)  # interest reaches every peer
        for (i, pub), j in itertools.product(enumerate(clients), range(len(clients))):
            if i != j:
                await pub.publish(f"to.{j}.from.{i}", f"{i}->{j}".encode(), headers={"Src": str(i)})
            await pub.flush()
        await wait_for(lambda: all(len(got[j]) == len(clients) - 1 for j in range(len(clients))), within=10)
        for j in range(len(clients)):
            assert sorted(got[j]) == [
                (f"to.{j}.from.{i}", f"{i}->{j}".encode(), {"Src": str(i)})
                for i in range(len(clients))
                if i != j
            ]

        # request/reply through every server to a responder on each one, and no responders
        for k, responder in enumerate(clients):

            async def echo(m: Msg, k: int = k) -> None:
                await m.respond(f"{k}:".encode() + m.data)

            await responder.subscribe(f"svc.{k}", cb=echo)
            await responder.flush()
        await asyncio.sleep(0.5)
        for (i, nc), k in itertools.product(enumerate(clients), range(len(clients))):
            reply = await nc.request(f"svc.{k}", f"q{i}".encode(), timeout=3)
            assert reply.data == f"{k}:q{i}".encode()
        for nc in clients:
            with pytest.raises(nats.errors.NoRespondersError):
                await nc.request("svc.nobody", b"x", timeout=3)

        # a queue group with members on every server: each message once, cluster-wide
        counts: collections.Counter[int] = collections.Counter()
        seen: collections.Counter[bytes] = collections.Counter()
        for i, nc in enumerate(clients):

            async def work(m: Msg, i: int = i) -> None:
                counts[i] += 1
                seen[m.data] += 1

            await nc.subscribe("jobs", queue="workers", cb=work)
            await nc.flush()
        await asyncio.sleep(0.5)
        total = 300
        for n in range(total):
            await clients[n % len(clients)].publish("jobs", str(n).encode())
        for nc in clients:
            await nc.flush()
        await wait_for(lambda: sum(counts.values()) >= total, within=10)
        await asyncio.sleep(0.3)
        assert sum(counts.values()) == total and len(seen) == total and set(seen.values()) == {1}
        assert len(counts) == len(clients)  # every server's member took a share
    finally:
        for nc in clients:
            await nc.close()


@pytest.mark.parametrize("kinds", LAYOUTS)
async def test_mixed_cluster_core_nats(tmp_path, kinds: list[str]) -> None:  # type: ignore[no-untyped-def]
    with process_cluster(tmp_path, kinds) as members:
        await core_checks(members)
        for m in members:
            assert m.proc.popen.poll() is None, m.proc.log()
        jetpy_logs = "".join(m.proc.log() for m in members if m.kind == JETPY)
        assert "Traceback" not in jetpy_logs


@pytest.mark.parametrize("ref", [OLDEST, NEWEST])
async def test_mixed_cluster_with_route_authorization(tmp_path, ref: str) -> None:  # type: ignore[no-untyped-def]
    """Every server requires ``ruser:pw`` on its route port: a nats-server seed takes jetpy's
    credentials, jetpy takes the other jetpy's through gossip (its cluster block's), and a
    peer with the wrong password stays out."""
    creds = "ruser:pw"
    members: list[Member] = []
    try:
        seed = start_member(tmp_path, ref, "S0", (), creds=creds)
        members.append(seed)
        members.append(start_member(tmp_path, JETPY, "S1", [seed.route_url_with(creds)], creds=creds))
        members.append(start_member(tmp_path, JETPY, "S2", [seed.route_url_with(creds)], creds=creds))
        await core_checks(members)
        intruder = start_member(tmp_path, JETPY, "S3", [members[1].route_url_with("ruser:nope")], creds=creds)
        members.append(intruder)
        await asyncio.sleep(1.5)
        assert 'authentication error - User "ruser"' in members[1].proc.log()
        assert "Authorization Violation" in intruder.proc.log()
        await wait_mesh([m.url for m in members[:3]])
    finally:
        for m in members:
            m.kill()
