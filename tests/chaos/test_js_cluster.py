"""Clustered JetStream with three server processes on loopback: the meta group places streams,
each replicated stream is a Raft group, a PubAck means a quorum has the message on disk and it
applied, and nothing acknowledged is lost when the stream's leader is killed and comes back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.errors import APIError

from jetpy.store.base import StoreConfig
from jetpy.store.filestore import FileStore

from .jsapi import create_stream as _create
from .jsapi import publish_until_acked as _publish_until_acked
from .jscluster import JsCluster

pytestmark = pytest.mark.timeout(180)


async def test_r3_stream_survives_its_leader_killed(cluster: JsCluster) -> None:
    nc = await nats.connect(servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        js = nc.jetstream(timeout=2)
        info = await _create(js, name="ORDERS", subjects=["orders.>"], num_replicas=3)
        assert info.cluster.name == "JSC"  # type: ignore[attr-defined]
        acked: dict[int, bytes] = {}
        acks = await asyncio.gather(*(js.publish(f"orders.{i}", b"m%d" % i, timeout=10) for i in range(1000)))
        for i, a in enumerate(acks):
            acked[a.seq] = b"m%d" % i
        assert sorted(acked) == list(range(1, 1001))

        si = await js.stream_info("ORDERS")
        assert si.state.messages == 1000
        assert si.cluster is not None and si.cluster.leader in cluster.nodes
        others = sorted(set(cluster.nodes) - {str(si.cluster.leader)})
        assert sorted(str(r.name) for r in si.cluster.replicas or []) == others
        for node in cluster.nodes.values():  # every replica has them in its own store
            await cluster.wait_for(
                f"{node.name} has 1000",
                lambda n=node: (n.stream_state("ORDERS") or {}).get("messages") == 1000,
            )

        old = si.cluster.leader
        cluster.kill(old)
        for i in range(1000, 1200):
            seq = await _publish_until_acked(js, f"orders.{i}", b"m%d" % i, f"id-{i}")
            acked[seq] = b"m%d" % i
        si = await js.stream_info("ORDERS")
        assert si.cluster is not None and si.cluster.leader != old
        assert si.state.messages == 1200 and si.state.last_seq == 1200

        cluster.start(old)  # catches up from the new leader's log
        await cluster.wait_for(
            f"{old} caught up",
            lambda: (cluster.nodes[old].stream_state("ORDERS") or {}).get("last_seq") == 1200,
        )
        seq = await _publish_until_acked(js, "orders.last", b"last", "id-last")
        acked[seq] = b"last"
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has all",
                lambda n=node: (n.stream_state("ORDERS") or {}).get("messages") == 1201,
            )
    finally:
        await nc.close()
    cluster.stop()
    for node in cluster.nodes.values():  # read back from every replica's files: nothing acked lost
        store = FileStore(node.store / "jetstream" / "$G" / "streams" / "ORDERS", StoreConfig(name="ORDERS"))
        try:
            assert store.state().msgs == len(acked) == 1201
            for seq, payload in acked.items():
                m = store.load_msg(seq)
                assert m is not None and m.data == payload, (node.name, seq)
        finally:
            store.stop()


async def test_placement_names_delete_and_refusals(cluster: JsCluster) -> None:
    async with await nats.connect(servers=cluster.urls) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="ONE", subjects=["one"], num_replicas=1)
        ack = await js.publish("one", b"x")
        assert ack.seq == 1
        holders = [n for n in cluster.nodes.values() if n.stream_state("ONE") is not None]
        assert len(holders) == 1  # an R1 stream is on one server

        with pytest.raises(APIError) as e:
            await js.add_stream(name="FIVE", subjects=["five"], num_replicas=5)
        assert e.value.err_code == 10005  # more replicas than servers: no suitable peers
        with pytest.raises(APIError) as e:
            await js.add_stream(name="OTHER", subjects=["one"])
        assert e.value.err_code == 10065
        await _create(js, name="THREE", subjects=["three"], num_replicas=3)
        again = await js.add_stream(name="THREE", subjects=["three"], num_replicas=3)  # identical: ok
        assert again.config.name == "THREE"
        with pytest.raises(APIError) as e:
            await js.add_stream(name="THREE", subjects=["three", "more"], num_replicas=3)
        assert e.value.err_code == 10058
        names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"{}", timeout=3)).data)
        assert names["streams"] == ["ONE", "THREE"] and names["total"] == 2
        for i in range(5):
            await js.publish("three", b"%d" % i)
        cfg = (await js.stream_info("THREE")).config
        cfg.max_msgs = 2
        cfg.subjects = ["three", "tres"]
        updated = await js.update_stream(cfg)  # answered by the stream's leader once applied
        assert updated.config.max_msgs == 2 and updated.state.messages == 2
        for node in cluster.nodes.values():  # every replica applied it at the same point
            await cluster.wait_for(
                f"{node.name} trimmed THREE",
                lambda n=node: (n.stream_state("THREE") or {}).get("messages") == 2,
            )
        assert (await js.publish("tres", b"x")).seq == 6
        cfg.name, cfg.num_replicas = "NOPE", 3
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.update_stream(cfg)
        listed = {str(si.config.name): si for si in await js.streams_info()}  # STREAM.LIST, from the leaders
        assert sorted(listed) == ["ONE", "THREE"]
        assert listed["ONE"].state.messages == 1 and listed["THREE"].state.messages == 2
        assert listed["THREE"].cluster is not None and len(listed["THREE"].cluster.replicas or []) == 2
        account = await js.account_info()  # what the cluster stores: each replica counted
        assert account.streams == 2 and account.consumers == 0 and account.memory == 0
        assert account.storage == listed["ONE"].state.bytes + 3 * listed["THREE"].state.bytes
        await _unpin_on_the_consumers_leader(nc, cluster)
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.stream_info("NOPE")

        assert await js.delete_stream("THREE")
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} dropped THREE", lambda n=node: n.stream_state("THREE") is None
            )


async def _unpin_on_the_consumers_leader(nc: Client, cluster: JsCluster) -> None:
    """CONSUMER.UNPIN, asked of any server, is done by the consumer's leader (its engine holds
    the pins): the pin a pull was given is released, an unknown group refused (10160)."""
    cfg: dict[str, Any] = {"durable_name": "P", "ack_policy": "explicit", "priority_groups": ["g"]}
    cfg.update(priority_policy="pinned_client", num_replicas=3)
    body = json.dumps({"stream_name": "THREE", "config": cfg}).encode()
    created = json.loads((await nc.request("$JS.API.CONSUMER.CREATE.THREE.P", body, timeout=5)).data)
    assert "error" not in created, created
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.THREE.P", b'{"batch": 1, "group": "g"}', reply=inbox)
    got = await sub.next_msg(timeout=5)
    pin = (got.headers or {}).get("Nats-Pin-Id", "")
    assert pin, got.headers

    async def pinned() -> str:
        info = json.loads((await nc.request("$JS.API.CONSUMER.INFO.THREE.P", b"", timeout=5)).data)
        return str(info["priority_groups"][0].get("pinned_client_id", ""))

    assert await pinned() == pin
    for url in cluster.urls:  # from every server: answered once, by the leader
        async with await nats.connect(url) as other:
            req = b'{"group": "g"}'
            unpin = json.loads((await other.request("$JS.API.CONSUMER.UNPIN.THREE.P", req, timeout=5)).data)
            assert unpin == {"type": "io.nats.jetstream.api.v1.consumer_unpin_response"}
    assert await pinned() == ""
    bad = json.loads((await nc.request("$JS.API.CONSUMER.UNPIN.THREE.P", b'{"group": "x"}', timeout=5)).data)
    assert bad["error"]["err_code"] == 10160
    await sub.unsubscribe()


async def test_whole_cluster_restarts_and_goes_on(cluster: JsCluster) -> None:
    """Purge, delete and get through the stream's leader; then every server stopped and started
    again: the meta group and the stream come back from their logs (each replica replays its
    stream's log against what its store holds, a purge or delete already there not applied
    again), the sequence goes on where it was and de-duplication still knows the ids."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="LOG", subjects=["log.*"], num_replicas=3)
        for i in range(50):
            assert await _publish_until_acked(js, "log.a", b"%d" % i, f"id-{i}") == i + 1
        assert await _publish_until_acked(js, "log.a", b"dup", "id-5") == 6  # refused: a duplicate
        assert await js.delete_msg("LOG", 10)
        with pytest.raises(APIError):
            await js.delete_msg("LOG", 10)  # gone already
        assert await js.purge_stream("LOG", keep=30)
        for i in range(50, 60):
            await _publish_until_acked(js, "log.b", b"%d" % i, f"id-{i}")
        got = await js.get_msg("LOG", 25)
        assert got.data == b"24" and got.subject == "log.a"
        before = await js.stream_info("LOG")
        assert (before.state.messages, before.state.first_seq, before.state.last_seq) == (40, 21, 60)

        cluster.stop()
        cluster.start()
        assert await _publish_until_acked(js, "log.b", b"again", "id-59") == 60  # a duplicate
        assert await _publish_until_acked(js, "log.b", b"60", "id-60") == 61
        si = await js.stream_info("LOG")
        assert (si.state.messages, si.state.first_seq, si.state.last_seq) == (41, 21, 61)
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has 41", lambda n=node: (n.stream_state("LOG") or {}).get("messages") == 41
            )


async def test_memory_stream_replica_rebuilt_and_leader_replaced(cluster: JsCluster) -> None:
    """An R3 memory stream's replica that restarts is rebuilt from the stream's log; after kill
    -9 of the stream's leader another takes publishes within a few election timeouts."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="MEM", subjects=["mem"], num_replicas=3, storage="memory")
        for i in range(10):
            await js.publish("mem", b"%d" % i)
        si = await js.stream_info("MEM")
        assert si.cluster is not None
        leader = str(si.cluster.leader)
        follower = next(n for n in cluster.nodes if n != leader)
        cluster.kill(follower)
        cluster.start(follower)
        await cluster.wait_for(
            "the memory replica rebuilt",
            lambda: (cluster.nodes[follower].stream_state("MEM") or {}).get("messages") == 10,
        )
        cluster.kill(leader)
        started = time.monotonic()
        seq = await _publish_until_acked(js, "mem", b"after", "after")
        took = time.monotonic() - started
        assert seq == 11
        assert took < 10 * cluster.tick * 10, f"no new leader taking publishes for {took:.2f}s"


async def test_leader_killed_under_concurrent_publishes_loses_nothing(cluster: JsCluster) -> None:
    """Publishers keep 100 publishes in flight (unique ids, retried until acknowledged) while the
    stream's leader is killed -9 and restarted: every acknowledged message is in every replica
    once, at the sequence its ack gave."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="FLOW", subjects=["flow"], num_replicas=3)
        si = await js.stream_info("FLOW")
        assert si.cluster is not None
        leader = str(si.cluster.leader)
        acked: dict[int, bytes] = {}
        sem = asyncio.Semaphore(100)
        some_acked = asyncio.Event()

        async def one(i: int) -> None:
            async with sem:
                seq = await _publish_until_acked(js, "flow", b"p%d" % i, f"flow-{i}")
                assert seq not in acked, f"two acknowledgements for sequence {seq}"
                acked[seq] = b"p%d" % i
                if len(acked) >= 300:
                    some_acked.set()

        work = asyncio.gather(*(one(i) for i in range(1500)))
        await some_acked.wait()
        cluster.kill(leader)
        await asyncio.sleep(0.3)
        cluster.start(leader)
        await work
        assert sorted(acked) == list(range(1, 1501))  # each once: retries were de-duplicated
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has all", lambda n=node: (n.stream_state("FLOW") or {}).get("messages") == 1500
            )
    cluster.stop()
    for node in cluster.nodes.values():
        store = FileStore(node.store / "jetstream" / "$G" / "streams" / "FLOW", StoreConfig(name="FLOW"))
        try:
            for seq, payload in acked.items():
                m = store.load_msg(seq)
                assert m is not None and m.data == payload, (node.name, seq)
        finally:
            store.stop()


async def test_api_goes_on_when_the_meta_leader_is_killed(cluster: JsCluster) -> None:
    """The meta leader killed -9: another server leads the meta group and answers the API."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=2)
        await _create(js, name="BEFORE", subjects=["before"], num_replicas=3)

        def meta_leader() -> str | None:
            for node in cluster.nodes.values():
                url = f"http://127.0.0.1:{node.http_port}/raftz?group=_meta_"
                try:
                    with urllib.request.urlopen(url, timeout=2) as r:
                        doc = json.load(r)
                except OSError:
                    continue
                if doc["$SYS"]["_meta_"]["state"] == "LEADER":
                    return node.name
            return None

        old = await cluster.wait_for("a meta leader", meta_leader)
        cluster.kill(old)
        await cluster.wait_for("another meta leader", lambda: (meta_leader() or old) != old)
        await _create(js, name="AFTER", subjects=["after"], num_replicas=3)  # two of three up
        assert (await js.publish("after", b"x")).seq == 1
        names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"{}", timeout=3)).data)
        assert names["streams"] == ["AFTER", "BEFORE"]
        cluster.start(old)
        await cluster.wait_for(
            f"{old} holds AFTER",
            lambda: (cluster.nodes[old].stream_state("AFTER") or {}).get("messages") == 1,
        )


async def test_each_publish_of_a_batch_gets_its_own_answer(cluster: JsCluster) -> None:
    """Publishes arriving together are proposed as one batch and applied in order; each is
    answered with its own outcome: stored, a duplicate, a failed expectation."""
    async with await nats.connect(servers=cluster.urls) as nc:
        js = nc.jetstream(timeout=5)
        await _create(js, name="MIX", subjects=["mix.*"], num_replicas=3)

        async def outcome(coro: Any) -> tuple[object, ...]:
            try:
                ack = await coro
                return ("ok", ack.seq, bool(ack.duplicate))
            except APIError as e:
                return ("err", e.err_code)

        got = await asyncio.gather(
            *(
                outcome(js.publish(subject, b"x", headers=headers))
                for subject, headers in [
                    ("mix.a", {"Nats-Msg-Id": "one"}),
                    ("mix.b", None),
                    ("mix.a", {"Nats-Msg-Id": "one"}),  # a duplicate of the first
                    ("mix.c", {"Nats-Expected-Last-Sequence": "1"}),  # the last is 2 by now
                    ("mix.c", {"Nats-Expected-Last-Sequence": "2"}),
                    *[(f"mix.{i}", None) for i in range(200)],
                ]
            )
        )
        assert got[:5] == [
            ("ok", 1, False),
            ("ok", 2, False),
            ("ok", 1, True),
            ("err", 10071),
            ("ok", 3, False),
        ]
        assert [g[1] for g in got[5:]] == list(range(4, 204))


async def test_direct_get_answered_by_one_replica(cluster: JsCluster) -> None:
    """A direct get of an R3 stream is answered once, by one of its replicas (their queue
    group), from a client on any server; the last message of a subject too."""
    conns = [await nats.connect(url) for url in cluster.urls]
    try:
        js = conns[0].jetstream(timeout=5)
        await _create(js, name="DG", subjects=["dg.*"], num_replicas=3, allow_direct=True)
        for i in range(5):
            await js.publish(f"dg.{i % 2}", b"v%d" % i)
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has 5", lambda n=node: (n.stream_state("DG") or {}).get("messages") == 5
            )
        await asyncio.sleep(1.0)  # every replica current, subscribed
        for nc in conns:
            for subject, body, want in [
                ("$JS.API.DIRECT.GET.DG", b'{"seq": 3}', b"v2"),
                ("$JS.API.DIRECT.GET.DG.dg.1", b"", b"v3"),
            ]:
                inbox = nc.new_inbox()
                sub = await nc.subscribe(inbox)
                await nc.publish(subject, body, reply=inbox)
                got = []
                with contextlib.suppress(nats.errors.TimeoutError):
                    while True:
                        got.append(await sub.next_msg(timeout=0.5))
                await sub.unsubscribe()
                assert [m.data for m in got] == [want], (subject, [m.headers for m in got])
        msg = await js.get_msg("DG", 4, direct=True)
        assert msg.data == b"v3"
    finally:
        for nc in conns:
            await nc.close()


def _local_subs(node: Any, subject: str) -> int:
    """The server's own subscriptions matching ``subject`` (not its routes' interest, which
    /subsz lists with the account as the sid)."""
    url = f"http://127.0.0.1:{node.http_port}/subsz?subs=1&test={subject}"
    with urllib.request.urlopen(url, timeout=5) as r:
        return sum(1 for s in json.load(r).get("subscriptions_list") or [] if not s["sid"])


async def test_only_the_leader_subscribes_the_stream_subjects(cluster: JsCluster) -> None:
    """The stream's subjects are subscribed on its leader's server alone (a publish elsewhere
    is routed there only); after kill -9 of the leader, on the new leader's."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="ONLY", subjects=["only.>"], num_replicas=3)
        si = await js.stream_info("ONLY")
        assert si.cluster is not None
        leader = str(si.cluster.leader)
        assert {n: _local_subs(node, "only.x") for n, node in cluster.nodes.items()} == {
            n: int(n == leader) for n in cluster.nodes
        }
        cluster.kill(leader)
        await _publish_until_acked(js, "only.x", b"x", "x")
        si = await js.stream_info("ONLY")
        assert si.cluster is not None and si.cluster.leader != leader
        new = str(si.cluster.leader)
        assert {n: _local_subs(node, "only.x") for n, node in cluster.nodes.items() if n != leader} == {
            n: int(n == new) for n in cluster.nodes if n != leader
        }


async def test_a_domain_prefix_reaches_the_api_and_the_replicas_direct_gets(tmp_path: Path) -> None:
    """With a JetStream domain, the cluster's API and its replicas' direct gets are answered
    under ``$JS.<domain>.API.`` too (once each), as nats-server answers them."""
    conf = tmp_path / "domain.conf"
    conf.write_text("jetstream { domain: hub }\n")
    c = JsCluster(tmp_path / "c", extra=("-c", str(conf)))
    try:
        c.start()
        async with await nats.connect(c.urls[1]) as nc:
            js = nc.jetstream(timeout=5, domain="hub")
            await _create(js, name="DD", subjects=["dd.*"], num_replicas=3, allow_direct=True)
            for i in range(3):
                await js.publish(f"dd.{i}", b"v%d" % i)
            info = await js.stream_info("DD")
            assert info.state.messages == 3 and info.cluster is not None
            await asyncio.sleep(1.0)  # every replica current, subscribed
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish("$JS.hub.API.DIRECT.GET.DD", b'{"seq": 2}', reply=inbox)
            got = []
            with contextlib.suppress(nats.errors.TimeoutError):
                while True:
                    got.append(await sub.next_msg(timeout=0.5))
            assert [m.data for m in got] == [b"v1"]
            msg = await js.get_msg("DD", 3, direct=True)
            assert msg.data == b"v2"
    finally:
        c.stop()
