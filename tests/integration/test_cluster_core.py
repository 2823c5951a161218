"""Core NATS across a cluster of jetpy servers (in this process, real sockets, nats-py as the
client): pub/sub with wildcards and headers across routes, request/reply and no responders,
queue groups delivered once cluster-wide, interest following subscriptions in both directions,
no message delivered twice over a full mesh, and gossip forming that mesh from one seed route."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cluster_support import embedded_cluster
from conftest import wait_for
from jetpy.server.app import Server

pytestmark = pytest.mark.timeout(60)


async def _connect(srv: Server) -> NATS:
    return await nats.connect(srv.client_url, allow_reconnect=False)


async def _interest(servers: list[Server], subject: bytes, n: int = 1) -> None:
    """Wait until every server sees at least ``n`` matches for ``subject`` (local or remote)."""

    def known() -> bool:
        return all(_members(s, subject) >= n for s in servers)

    await wait_for(known)


def _members(srv: Server, subject: bytes) -> int:
    plain, groups = srv.broker.subs.match(subject)
    return len(plain) + sum(map(len, groups))


async def test_gossip_builds_a_full_mesh_from_one_seed() -> None:
    async with embedded_cluster(4) as servers:
        ids = {s.server_id for s in servers}
        for s in servers:
            assert s.cluster is not None
            assert set(s.cluster.remotes) == ids - {s.server_id}
            # one route per peer: duplicates were closed
            assert len([r for r in s.cluster.routes.values() if r.registered]) == 3


async def test_pub_sub_wildcards_headers_across_routes() -> None:
    async with embedded_cluster(3) as servers:
        a, b, c = [await _connect(s) for s in servers]
        got: dict[str, list[tuple[str, bytes, dict[str, str] | None]]] = collections.defaultdict(list)

        def recorder(name: str):  # type: ignore[no-untyped-def]
            async def cb(m: Msg) -> None:
                got[name].append((m.subject, m.data, m.headers))

            return cb

        await b.subscribe("orders.*", cb=recorder("b-star"))
        await b.subscribe("orders.>", cb=recorder("b-gt"))
        await c.subscribe("orders.eu", cb=recorder("c-eu"))
        await b.flush()
        await c.flush()
        await _interest(servers, b"orders.eu", 3)
        await a.publish("orders.eu", b"one")
        await a.publish("orders.us.west", b"two", headers={"Trace": "x1", "K": "V"})
        await a.flush()
        await wait_for(lambda: len(got["b-gt"]) == 2 and len(got["c-eu"]) == 1)
        await asyncio.sleep(0.1)  # nothing more arrives
        assert got["b-star"] == [("orders.eu", b"one", None)]
        assert got["b-gt"] == [
            ("orders.eu", b"one", None),
            ("orders.us.west", b"two", {"Trace": "x1", "K": "V"}),
        ]
        assert got["c-eu"] == [("orders.eu", b"one", None)]
        for nc in (a, b, c):
            await nc.close()


async def test_request_reply_and_no_responders_across_routes() -> None:
    async with embedded_cluster(3) as servers:
        a, b, c = [await _connect(s) for s in servers]

        async def echo(m: Msg) -> None:
            await m.respond(b"echo:" + m.data)

        await c.subscribe("svc.echo", cb=echo)
        await c.flush()
        await _interest(servers, b"svc.echo")
        reply = await a.request("svc.echo", b"hi", timeout=2)
        assert reply.data == b"echo:hi"
        reply = await b.request("svc.echo", b"there", timeout=2)
        assert reply.data == b"echo:there"
        # nobody anywhere: the requester's own server answers 503 at once
        with pytest.raises(nats.errors.NoRespondersError):
            await a.request("svc.nobody", b"x", timeout=2)
        for nc in (a, b, c):
            await nc.close()


async def test_queue_group_gets_each_message_once_cluster_wide() -> None:
    async with embedded_cluster(3) as servers:
        clients = [await _connect(s) for s in servers]
        counts: collections.Counter[str] = collections.Counter()
        seen: collections.Counter[bytes] = collections.Counter()

        for i, nc in enumerate(clients):
            for k in range(2):  # two members on every server

                async def cb(m: Msg, who: str = f"s{i}m{k}") -> None:
                    counts[who] += 1
                    seen[m.data] += 1

                await nc.subscribe("work", queue="workers", cb=cb)
            await nc.flush()
        await _interest(servers, b"work", 6)
        total = 600
        pub = clients[0]
        for n in range(total):
            await pub.publish("work", str(n).encode())
        await pub.flush()
        await wait_for(lambda: sum(counts.values()) >= total, within=10)
        await asyncio.sleep(0.2)
        assert sum(counts.values()) == total  # once per message, cluster-wide
        assert all(v == 1 for v in seen.values()) and len(seen) == total
        # every member gets a share: a peer's members weigh as much as local ones
        assert len(counts) == 6 and min(counts.values()) > total / 6 / 3, counts
        for nc in clients:
            await nc.close()


async def test_interest_follows_subscriptions_and_the_mesh_has_no_loops() -> None:
    async with embedded_cluster(3) as servers:
        a, b, c = [await _connect(s) for s in servers]
        got: list[bytes] = []

        async def cb(m: Msg) -> None:
            got.append(m.data)

        sub = await c.subscribe("events.>", cb=cb)
        await c.flush()
        await _interest(servers, b"events.x")
        await a.publish("events.x", b"1")
        await b.publish("events.x", b"2")
        await a.flush()
        await b.flush()
        await wait_for(lambda: len(got) == 2)
        await asyncio.sleep(0.2)
        assert sorted(got) == [b"1", b"2"]  # once each, over a full mesh
        await sub.unsubscribe()
        await c.flush()
        await wait_for(lambda: not any(s.broker.subs.has_interest(b"events.x") for s in servers))
        # UNSUB with a maximum: the interest goes when the last one is delivered
        limited = await c.subscribe("events.max", cb=cb)
        await limited.unsubscribe(limit=2)  # UNSUB <sid> 2
        await c.flush()
        await _interest(servers, b"events.max")
        for n in range(5):
            await a.publish("events.max", b"m%d" % n)
        await a.flush()
        await wait_for(lambda: not servers[0].broker.subs.has_interest(b"events.max"))
        await wait_for(lambda: len(got) == 4)
        assert got[-2:] == [b"m0", b"m1"]
        for nc in (a, b, c):
            await nc.close()


async def test_a_closed_clients_interest_leaves_the_cluster() -> None:
    async with embedded_cluster(2) as servers:
        a = await _connect(servers[0])
        b = await _connect(servers[1])
        await b.subscribe("gone.soon", queue="q")
        await b.subscribe("gone.soon")
        await b.flush()
        await _interest(servers, b"gone.soon", 2)
        await b.close()
        await wait_for(lambda: not servers[0].broker.subs.has_interest(b"gone.soon"))
        await a.close()


async def test_async_info_tells_clients_the_cluster_urls() -> None:
    async with embedded_cluster(3) as servers:
        nc = await nats.connect(servers[0].client_url)
        urls = {f"127.0.0.1:{s.port}" for s in servers}
        await wait_for(lambda: {f"{u.hostname}:{u.port}" for u in nc.servers} == urls)
        assert {f"{u.hostname}:{u.port}" for u in nc.discovered_servers} == urls - {
            f"127.0.0.1:{servers[0].port}"
        }
        await nc.close()


async def test_replies_crossing_a_route_in_runs_reach_exactly_their_subscribers() -> None:
    """A burst of replies to one inbox crosses the route as a run of sibling subjects: each
    still goes to exactly the subscriptions it matches, before and after interest changes."""
    async with embedded_cluster(2) as servers:
        a, a2, b = await _connect(servers[0]), await _connect(servers[0]), await _connect(servers[1])

        async def answer(m: Msg) -> None:
            await b.publish(m.reply, m.data)

        await b.subscribe("svc", cb=answer)
        await b.flush()
        await _interest(servers, b"svc")

        async def burst() -> list[tuple[str, bytes]]:
            for i in range(300):
                await a.publish("svc", b"%d" % i, reply=f"_INBOX.t.{i}")
            await a.flush()
            return [(f"_INBOX.t.{i}", b"%d" % i) for i in range(300)]

        async def received(sub: Any, n: int) -> list[tuple[str, bytes]]:
            msgs = [await sub.next_msg(timeout=5) for _ in range(n)]
            with pytest.raises(nats.errors.TimeoutError):
                await sub.next_msg(timeout=0.2)
            return [(m.subject, m.data) for m in msgs]

        inbox = await a.subscribe("_INBOX.t.*")
        await a.flush()
        await _interest(servers, b"_INBOX.t.1")
        want = await burst()
        assert await received(inbox, 300) == want
        # a subscription to one of the subjects: that one reply goes to both
        literal = await a2.subscribe("_INBOX.t.7")
        await a2.flush()
        await _interest(servers, b"_INBOX.t.7", 2)
        want = await burst()
        assert await received(inbox, 300) == want
        assert await received(literal, 1) == [("_INBOX.t.7", b"7")]
        # both go, another takes every inbox: nothing reaches the old ones
        everything = await a2.subscribe("_INBOX.>")
        await inbox.unsubscribe()
        await literal.unsubscribe()
        await a.flush()
        await a2.flush()
        await wait_for(lambda: _members(servers[0], b"_INBOX.t.7") == 1)
        await _interest(servers, b"_INBOX.t.1")
        want = await burst()
        assert await received(everything, 300) == want
        # a receiver that leaves within a run (UNSUB with a maximum) gets no more than its due
        limited = await b.subscribe("svc.five")
        await limited.unsubscribe(limit=5)  # UNSUB <sid> 5
        await b.flush()
        await _interest(servers, b"svc.five")
        (held,), _ = servers[1].broker.subs.match(b"svc.five")
        for i in range(100):
            await a.publish("svc.five", b"%d" % i, reply=f"_INBOX.t.{i}")
        await a.flush()
        assert [m.data for m in [await limited.next_msg(timeout=5) for _ in range(5)]] == [
            b"0",
            b"1",
            b"2",
            b"3",
            b"4",
        ]
        await wait_for(lambda: _members(servers[1], b"svc.five") == 0)
        assert servers[1].broker.subs.match(b"svc.five") == ([], [])
        await asyncio.sleep(0.2)  # (all 100 are in)
        assert held.delivered == 5  # the server sent it no more
        # the same for an inbox that takes three replies of a run of them
        three = await a.subscribe("_INBOX.m.*")
        await three.unsubscribe(limit=3)
        await a.flush()
        await _interest(servers, b"_INBOX.m.1")
        held = next(s for s in servers[0].broker.subs.match(b"_INBOX.m.1")[0] if s.subject == b"_INBOX.m.*")
        for i in range(100):
            await a.publish("svc", b"%d" % i, reply=f"_INBOX.m.{i}")
        await a.flush()
        assert [(await three.next_msg(timeout=5)).data for _ in range(3)] == [b"0", b"1", b"2"]
        assert len(await received(everything, 100)) == 100  # (all 100 are in)
        assert held.delivered == 3
        for nc in (a, a2, b):
            await nc.close()
