"""R1 consumers on a cluster of three jetpy server processes: the single server's consumer on
the server it is placed on, with no Raft group (as nats-server 2.15.1 runs them), its state in
its own file there (kept across a kill and restart); scaled up to R3 from that state (the new
replicas join its group) and down to R1 again (the group's files dropped, the state kept)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from .jsapi import connect
from .jscluster import JsCluster

pytestmark = pytest.mark.timeout(240)


def _connect(url: str) -> contextlib.AbstractAsyncContextManager[Client]:
    return connect(url, reconnect_wait=0.1)


async def _until(nc: Client, subject: str, body: str | dict[str, Any] = "", within: float = 30.0) -> Any:
    """The reply once there is one without an error of a cluster still settling (10008: the
    meta group forming, 10014: the consumer not running again yet after a restart)."""
    data = (body if isinstance(body, str) else json.dumps(body)).encode()
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            got = json.loads((await nc.request(subject, data, timeout=1.0)).data)
            if got.get("error", {}).get("err_code") not in (10008, 10014):
                return got
        except (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError):
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no answer to {subject}")
        await asyncio.sleep(0.2)


def _raft_groups(c: JsCluster, name: str) -> set[str]:
    """The Raft groups the server runs."""
    return set(c.nodes[name].raftz())


def _consumer_groups(c: JsCluster) -> list[str]:
    """Every consumer group any server runs or has files of."""
    found = {g for n in c.nodes if c.nodes[n].alive for g in _raft_groups(c, n) if g.startswith("C-")}
    found |= {p.name for n in c.nodes.values() for p in n.store.rglob("C-R*F-*")}
    return sorted(found)


def _acks(info: dict[str, Any]) -> tuple[int, int, int]:
    """Delivered and ack floor stream sequences, pending acks."""
    return info["delivered"]["stream_seq"], info["ack_floor"]["stream_seq"], info["num_ack_pending"]


async def _fetch_and_ack_sync(nc: Client, stream: str, durable: str, n: int, acks: int) -> list[int]:
    """Fetch ``n`` messages and ack the first ``acks`` with a confirmation (on disk once
    answered); the stream sequences fetched."""
    js = nc.jetstream(timeout=5)
    sub = await js.pull_subscribe_bind(durable, stream)
    msgs: list[Any] = []
    while len(msgs) < n:  # (a fetch under load may hand out fewer than asked)
        msgs += await sub.fetch(n - len(msgs), timeout=5)
    for m in msgs[:acks]:
        await m.ack_sync(timeout=5)
    await sub.unsubscribe()
    return [m.metadata.sequence.stream for m in msgs]


async def test_r1_consumer_runs_without_a_group_and_keeps_its_acks_across_a_restart(
    cluster: JsCluster,
) -> None:
    c = cluster
    async with _connect(c.urls[0]) as nc:
        created = await _until(
            nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "num_replicas": 1}
        )
        home = created["cluster"]["leader"]
        js = nc.jetstream(timeout=5)
        for i in range(20):
            await js.publish(f"s.{i}", b"m%d" % i)
        made = await _until(
            nc,
            "$JS.API.CONSUMER.CREATE.S.D",
            {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}},
        )
        assert made["cluster"] == {"name": "JSC", "leader": home}, made  # nats-server's R1 block
        assert made["config"]["num_replicas"] == 0 and made["num_pending"] == 20
        assert _consumer_groups(c) == []  # no Raft group, on no server, no group files
        # its own state file in the stream's store, as a single server's durable's
        assert list(c.nodes[home].store.rglob("obs/D")), "no consumer file"

        got = await _fetch_and_ack_sync(nc, "S", "D", 10, 6)
        assert got == list(range(1, 11))
        info = await _until(nc, "$JS.API.CONSUMER.INFO.S.D")
        assert _acks(info) == (10, 6, 4)
        for url in c.urls:  # answered by its server, asked on any
            async with _connect(url) as nc1:
                assert (await _until(nc1, "$JS.API.CONSUMER.INFO.S.D"))["cluster"]["leader"] == home
        step = json.loads((await nc.request("$JS.API.CONSUMER.LEADER.STEPDOWN.S.D", b"", timeout=5)).data)
        assert step["success"] is True, step  # nothing to do: nats-server 2.15 says success

        # an ephemeral on an R3 stream (nats-server's are always R1): no group either
        await _until(nc, "$JS.API.STREAM.CREATE.R3", {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3})
        for i in range(5):
            await js.publish(f"r3.{i}", b"e%d" % i)
        eph = await js.pull_subscribe("r3.>", stream="R3")
        msgs: list[Any] = []
        while len(msgs) < 5:
            msgs += await eph.fetch(5 - len(msgs), timeout=5)
        assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4, 5]
        for m in msgs:
            await m.ack_sync(timeout=5)
        assert _consumer_groups(c) == []

    c.kill(home)  # SIGKILL: what was confirmed is on disk
    c.start(home)
    async with _connect(c.urls[0]) as nc:
        info = await _until(nc, "$JS.API.CONSUMER.INFO.S.D", within=60)
        assert _acks(info) == (10, 6, 4) and info["num_pending"] == 10, info
        assert info["cluster"] == {"name": "JSC", "leader": home}
        got = await _fetch_and_ack_sync(nc, "S", "D", 10, 10)
        assert got == list(range(11, 21))  # where it stopped, not from the start
        info = await _until(nc, "$JS.API.CONSUMER.INFO.S.D")
        assert _acks(info) == (20, 6, 4)  # 7..10 still pending: delivered again after ack_wait
    assert _consumer_groups(c) == []

    async with _connect(c.urls[1]) as nc:  # deleted: its file goes too
        gone = await _until(nc, "$JS.API.CONSUMER.DELETE.S.D")
        assert gone.get("success") is True, gone
        await c.wait_for("its file gone", lambda: not list(c.nodes[home].store.rglob("obs/D")))


async def test_r1_consumer_scaled_up_and_down_keeps_its_state(cluster: JsCluster) -> None:
    c = cluster
    cfg: dict[str, Any] = {"durable_name": "U", "ack_policy": "explicit", "num_replicas": 1}
    async with _connect(c.urls[0]) as nc:
        await _until(nc, "$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["t.>"], "num_replicas": 3})
        js = nc.jetstream(timeout=5)
        for i in range(20):
            await js.publish(f"t.{i}", b"m%d" % i)
        made = await _until(nc, "$JS.API.CONSUMER.CREATE.T.U", {"stream_name": "T", "config": cfg})
        home = made["cluster"]["leader"]
        assert _consumer_groups(c) == []
        assert await _fetch_and_ack_sync(nc, "T", "U", 10, 5) == list(range(1, 11))
        # two more, each on a server of its own (the least loaded): two of the three run on
        # a follower of the stream, and deliver from its replica what the stream committed
        servers = {home}
        for name in ("V", "W"):
            other = await _until(
                nc,
                f"$JS.API.CONSUMER.CREATE.T.{name}",
                {"stream_name": "T", "config": {**cfg, "durable_name": name}},
            )
            servers.add(other["cluster"]["leader"])
            assert await _fetch_and_ack_sync(nc, "T", name, 20, 20) == list(range(1, 21))
            assert _acks(await _until(nc, f"$JS.API.CONSUMER.INFO.T.{name}")) == (20, 20, 0)
        assert servers == set(c.nodes), servers
        assert _consumer_groups(c) == []

        # plain acks on a follower's R1 consumer: on disk a moment later (the replica's store
        # synced for them), kept across a kill -9 of its server
        stream_leader = (await _until(nc, "$JS.API.STREAM.INFO.T"))["cluster"]["leader"]
        on = {(await _until(nc, f"$JS.API.CONSUMER.INFO.T.{n}"))["cluster"]["leader"]: n for n in "VW"}
        server, name = next((s, n) for s, n in on.items() if s != stream_leader)
        for i in range(20, 30):
            await js.publish(f"t.{i}", b"m%d" % i)
        sub = await js.pull_subscribe_bind(name, "T")
        fetched = 0
        while fetched < 10:
            for m in await sub.fetch(10 - fetched, timeout=5):
                await m.ack()
                fetched += 1
        await sub.unsubscribe()
        for _ in range(50):
            if _acks(await _until(nc, f"$JS.API.CONSUMER.INFO.T.{name}")) == (30, 30, 0):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"{name}'s acks never arrived")
        await asyncio.sleep(2.5)
        c.kill(server)
        c.start(server)
        info = await _until(nc, f"$JS.API.CONSUMER.INFO.T.{name}", within=60)
        assert _acks(info) == (30, 30, 0) and info["cluster"]["leader"] == server, info

        up = await _until(
            nc, "$JS.API.CONSUMER.CREATE.T.U", {"stream_name": "T", "config": {**cfg, "num_replicas": 3}}
        )
        assert up["config"]["num_replicas"] == 3 and up["cluster"]["leader"] == home, up
        assert _acks(up) == (10, 5, 5)
        groups = _consumer_groups(c)
        assert len(groups) == 1 and groups[0].startswith("C-R1F-"), groups  # the assignment's name

        def joined() -> bool:
            return all(groups[0] in _raft_groups(c, n) for n in c.nodes)

        await c.wait_for("the new replicas in its group", joined)
        for _ in range(100):
            info = await _until(nc, "$JS.API.CONSUMER.INFO.T.U")
            if [r["current"] for r in info["cluster"].get("replicas") or []] == [True, True]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"U not on three servers: {info['cluster']}")
        assert _acks(info) == (10, 5, 5)

        # its leadership handed to a server that joined (so the one it settles on has its
        # state from the group alone), acks through the group, then down to one server: the
        # group goes, the state stays
        step = await _until(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.T.U")
        assert step.get("success") is True, step
        for _ in range(100):
            info = await _until(nc, "$JS.API.CONSUMER.INFO.T.U")
            if info["cluster"]["leader"] != home:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("U's leadership never moved")
        sub = await js.pull_subscribe_bind("U", "T")
        msgs = await sub.fetch(2, timeout=5)
        msgs += await sub.fetch(1, timeout=5) if len(msgs) < 2 else []
        assert [m.metadata.sequence.stream for m in msgs] == [11, 12]
        for m in msgs:
            await m.ack_sync(timeout=5)
        await sub.unsubscribe()
        down = await _until(nc, "$JS.API.CONSUMER.CREATE.T.U", {"stream_name": "T", "config": cfg})
        assert down["config"]["num_replicas"] == 1, down
        await c.wait_for("its group and files gone everywhere", lambda: _consumer_groups(c) == [], within=30)
        info = await _until(nc, "$JS.API.CONSUMER.INFO.T.U")
        last = info["cluster"]["leader"]
        assert last != home  # the leader is kept
        assert info["cluster"] == {"name": "JSC", "leader": last}, info
        assert _acks(info) == (12, 5, 5)

    c.kill(last)  # R1 again: its state from its file
    c.start(last)
    async with _connect(c.urls[0]) as nc:
        info = await _until(nc, "$JS.API.CONSUMER.INFO.T.U", within=60)
        assert _acks(info) == (12, 5, 5) and info["cluster"] == {"name": "JSC", "leader": last}, info
        assert await _fetch_and_ack_sync(nc, "T", "U", 18, 18) == list(range(13, 31))
    assert _consumer_groups(c) == []


async def test_r1_consumer_moved_with_its_r1_stream_keeps_its_state(cluster: JsCluster) -> None:
    """``STREAM.PEER.REMOVE`` of an R1 stream's server: its R1 consumer follows the stream (its
    old server founds its group from its state, the new one joins, leads, settles as R1)."""
    c = cluster
    cfg = {"durable_name": "D", "ack_policy": "explicit"}
    async with _connect(c.urls[0]) as nc:
        created = await _until(
            nc, "$JS.API.STREAM.CREATE.M", {"name": "M", "subjects": ["m.>"], "num_replicas": 1}
        )
        home = created["cluster"]["leader"]
        js = nc.jetstream(timeout=5)
        for i in range(20):
            await js.publish(f"m.{i}", b"m%d" % i)
        await _until(nc, "$JS.API.CONSUMER.CREATE.M.D", {"stream_name": "M", "config": cfg})
        assert await _fetch_and_ack_sync(nc, "M", "D", 10, 5) == list(range(1, 11))
        moved = json.loads(
            (
                await nc.request(
                    "$JS.API.STREAM.PEER.REMOVE.M", json.dumps({"peer": home}).encode(), timeout=5
                )
            ).data
        )
        assert moved.get("success") is True, moved

        async def settled() -> dict[str, Any] | None:
            info: dict[str, Any] = await _until(nc, "$JS.API.CONSUMER.INFO.M.D")
            if info.get("cluster", {}).get("leader") in (None, home) or _consumer_groups(c):
                return None
            return info

        for _ in range(200):
            info = await settled()
            if info is not None:
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"D never settled on another server: {_consumer_groups(c)}")
        new = info["cluster"]["leader"]
        assert info["cluster"] == {"name": "JSC", "leader": new}, info
        assert _acks(info) == (10, 5, 5)
        assert (await _until(nc, "$JS.API.STREAM.INFO.M"))["cluster"]["leader"] == new
        assert not list(c.nodes[home].store.rglob("obs/D"))  # the old server's file gone
        assert await _fetch_and_ack_sync(nc, "M", "D", 10, 10) == list(range(11, 21))
