"""Replicated consumers follow their stream's placement, on jetpy server processes: a stream
scaled 3 -> 1 -> 3 takes its consumers with it (a durable with ``num_replicas`` 0 follows the
count, an R3 one is capped at R1 for good, an R1 one moves to the stream's server), a peer
removed by ``STREAM.PEER.REMOVE`` is replaced in the consumer's group too, and a consumer's own
``num_replicas`` changes by update; through it all nats-py goes on consuming, and the
consumer's state (delivered, ack floor, pending) is kept: nothing acknowledged is delivered
again, nothing is skipped, even after kill -9 of the consumer's new leader. The ``cluster``
blocks and ``num_replicas`` are those nats-server 2.15.1 gives in the same steps."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.client import JetStreamContext

from .jsapi import connect, publish_when_ready
from .jsapi import req as _req
from .jsapi import until as _until
from .jscluster import JsCluster, reference_cluster

pytestmark = pytest.mark.timeout(180)

CONSUMER_INFO = "$JS.API.CONSUMER.INFO.{}.{}"
ACK_WAIT = 300 * 10**9  # what is pending stays pending through the test


def _connect(url: str) -> contextlib.AbstractAsyncContextManager[Client]:
    return connect(url, reconnect_wait=0.2)


async def _stream_placed(nc: Client, stream: str, servers: set[str], within: float = 30.0) -> None:
    """Until the stream's info names exactly ``servers`` (a server that joined is listed once
    its leader has it as a member)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        cl = (await _until(nc, f"$JS.API.STREAM.INFO.{stream}")).get("cluster", {})
        seen = {cl.get("leader"), *(r["name"] for r in cl.get("replicas", []))}
        if seen == servers:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"stream {stream} on {seen}, not {servers}")
        await asyncio.sleep(0.2)


async def _placed(
    nc: Client, stream: str, name: str, servers: set[str], within: float = 30.0
) -> dict[str, Any]:
    """The consumer's info once its ``cluster`` block names exactly ``servers``, every replica
    current, no change under way."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        info: dict[str, Any] = await _until(nc, CONSUMER_INFO.format(stream, name))
        cl = info.get("cluster", {})
        reps = cl.get("replicas", [])
        if (
            cl.get("leader")
            and {cl["leader"], *(r["name"] for r in reps)} == servers
            and all(r["current"] for r in reps)
            and "desired" not in cl  # nats-server's, while its group changes
        ):
            return info
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{name} not placed on {sorted(servers)}: {cl}")
        await asyncio.sleep(0.2)


def _consumer_dirs(c: JsCluster, name: str) -> list[Path]:
    return sorted(c.nodes[name].store.rglob("C-R*"))


def _state(info: dict[str, Any]) -> tuple[int, int, int]:
    return info["delivered"]["stream_seq"], info["ack_floor"]["stream_seq"], info["num_ack_pending"]


async def _stream_leader(nc: Client, stream: str) -> str:
    info = await _until(nc, f"$JS.API.STREAM.INFO.{stream}")
    leader: str = info["cluster"]["leader"]
    return leader


async def _create(nc: Client, stream: str, name: str, **extra: Any) -> None:
    got = await _until(
        nc,
        f"$JS.API.CONSUMER.CREATE.{stream}.{name}",
        {"stream_name": stream, "config": {"durable_name": name, "ack_policy": "explicit", **extra}},
    )
    assert "error" not in got, got


async def _fetch(js: JetStreamContext, sub: Any, n: int, within: float = 30.0) -> list[Any]:
    """``n`` messages, fetched as they come (a leader being elected answers nothing for a while)."""
    got: list[Any] = []
    deadline = asyncio.get_running_loop().time() + within
    while len(got) < n:
        try:
            got += await sub.fetch(n - len(got), timeout=1.0)
        except (TimeoutError, nats.errors.TimeoutError):
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{len(got)} of {n} fetched")
    return got


async def test_consumers_follow_their_stream_scaled_down_and_up(tmp_path: Path) -> None:
    c = JsCluster(tmp_path)
    try:
        c.start()
        all3 = {"n1", "n2", "n3"}
        async with _connect(c.urls[0]) as nc:
            js = nc.jetstream(timeout=5)
            got = await _until(
                nc, "$JS.API.STREAM.CREATE.F", {"name": "F", "subjects": ["f.>"], "num_replicas": 3}
            )
            assert "error" not in got, got
            for i in range(30):
                await publish_when_ready(js, f"f.{i}", b"m%d" % i)
            await _create(nc, "F", "D", ack_wait=ACK_WAIT)  # num_replicas 0: the stream's
            await _create(nc, "F", "THREE", num_replicas=3)
            await _create(nc, "F", "ONE", num_replicas=1)
            sub = await js.pull_subscribe_bind("D", "F")
            msgs = await _fetch(js, sub, 10)
            assert [m.metadata.sequence.stream for m in msgs] == list(range(1, 11))
            for m in msgs[:6]:
                await m.ack_sync()
            await msgs[6].nak()  # delivered again at once: its delivery count is state too
            [again] = await _fetch(js, sub, 1)
            assert (again.metadata.sequence.stream, again.metadata.num_delivered) == (7, 2)
            before = await _placed(nc, "F", "D", all3)
            assert _state(before) == (10, 6, 4) and before["num_redelivered"] == 1

            leader = await _stream_leader(nc, "F")
            down = await _req(
                nc, "$JS.API.STREAM.UPDATE.F", {"name": "F", "subjects": ["f.>"], "num_replicas": 1}
            )
            assert down["config"]["num_replicas"] == 1, down
            d = await _placed(nc, "F", "D", {leader})
            assert d["config"].get("num_replicas", 0) == 0 and not d["cluster"].get("replicas")
            assert _state(d) == (10, 6, 4) and d["num_redelivered"] == 1
            three = await _placed(nc, "F", "THREE", {leader})
            assert three["config"]["num_replicas"] == 1  # capped, as nats-server rewrites it
            one = await _placed(nc, "F", "ONE", {leader})
            assert one["config"]["num_replicas"] == 1
            others = sorted(all3 - {leader})
            await c.wait_for(
                "the others' consumer files deleted", lambda: not any(_consumer_dirs(c, n) for n in others)
            )
            # consuming goes on from where it was: the next ones, nothing acked again
            msgs = await _fetch(js, sub, 5)
            assert [m.metadata.sequence.stream for m in msgs] == list(range(11, 16))
            for m in msgs:
                await m.ack_sync()

            up = await _req(
                nc, "$JS.API.STREAM.UPDATE.F", {"name": "F", "subjects": ["f.>"], "num_replicas": 3}
            )
            assert up["config"]["num_replicas"] == 3, up
            d = await _placed(nc, "F", "D", all3)
            assert d["cluster"]["leader"] == leader
            assert _state(d) == (15, 6, 4) and d["num_redelivered"] == 1
            for name in ("THREE", "ONE"):  # R1 now: they stay where they are
                info = await _placed(nc, "F", name, {leader})
                assert info["config"]["num_replicas"] == 1
            # an R1 consumer made R3 by an update, and back
            r3 = await _req(
                nc,
                "$JS.API.CONSUMER.CREATE.F.ONE",
                {
                    "stream_name": "F",
                    "config": {"durable_name": "ONE", "ack_policy": "explicit", "num_replicas": 3},
                },
            )
            assert r3["config"]["num_replicas"] == 3, r3
            await _placed(nc, "F", "ONE", all3)
            got = await _until(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.F.ONE")
            assert got.get("success"), got
            one_leader = await _consumer_leader(nc, "F", "ONE", all3 - {leader})
            r1 = await _req(
                nc,
                "$JS.API.CONSUMER.CREATE.F.ONE",
                {
                    "stream_name": "F",
                    "config": {"durable_name": "ONE", "ack_policy": "explicit", "num_replicas": 1},
                },
            )
            assert r1["config"]["num_replicas"] == 1, r1
            await _placed(nc, "F", "ONE", {one_leader})  # where it was led from

            # the new replicas hold the state: the leader killed, another leads with it
            c.kill(leader)
            rest = all3 - {leader}
            deadline = asyncio.get_running_loop().time() + 30
            while True:
                async with _connect(c.nodes[sorted(rest)[0]].url) as nc2:
                    info = await _until(nc2, CONSUMER_INFO.format("F", "D"))
                if info.get("cluster", {}).get("leader") in rest:
                    break
                assert asyncio.get_running_loop().time() < deadline, info
                await asyncio.sleep(0.2)
            assert _state(info) == (15, 6, 4) and info["num_redelivered"] == 1, info
        async with _connect(c.nodes[sorted(rest)[0]].url) as nc:
            js = nc.jetstream(timeout=5)
            sub = await js.pull_subscribe_bind("D", "F")
            msgs = await _fetch(js, sub, 15)
            assert [m.metadata.sequence.stream for m in msgs] == list(range(16, 31))
    finally:
        c.stop()


async def _stream_servers(nc: Client, stream: str, count: int, within: float = 30.0) -> set[str]:
    """The stream's servers once it has ``count``, every one current, no change under way."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        cl = (await _until(nc, f"$JS.API.STREAM.INFO.{stream}")).get("cluster", {})
        reps = cl.get("replicas", [])
        servers = {cl.get("leader"), *(r["name"] for r in reps)} - {None, ""}
        if len(servers) == count and "desired" not in cl and all(r["current"] for r in reps):
            return {str(s) for s in servers}
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{stream} not on {count} servers: {cl}")
        await asyncio.sleep(0.2)


def _shape(info: dict[str, Any], home: str) -> dict[str, Any]:
    """What a consumer's info says of its placement, comparable across servers."""
    cl = info["cluster"]
    return {
        "num_replicas": info["config"].get("num_replicas", 0),
        "cluster": sorted(cl),
        "replicas": sorted(tuple(sorted(set(r) - {"lag"})) for r in cl.get("replicas", [])),
        "led from the scaled-down stream's server": cl.get("leader") == home,
        "state": _state(info),
    }


async def _scale_steps(url: str) -> dict[str, Any]:
    """An R3 stream with three durables (num_replicas 0, 3 and 1, the first with acked and
    pending messages), scaled to 1 and back to 3: each consumer's shape after each step."""
    out: dict[str, Any] = {}
    async with _connect(url) as nc:
        js = nc.jetstream(timeout=5)
        got = await _until(
            nc, "$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"], "num_replicas": 3}
        )
        assert "error" not in got, got
        for i in range(10):
            await publish_when_ready(js, f"g.{i}", b"x")
        await _create(nc, "G", "D0", ack_wait=ACK_WAIT)
        await _create(nc, "G", "D3", num_replicas=3)
        await _create(nc, "G", "D1", num_replicas=1)
        sub = await js.pull_subscribe_bind("D0", "G")
        for m in (await _fetch(js, sub, 6))[:3]:
            await m.ack_sync()
        home = ""  # the stream's server once scaled down: the R1 consumers stay there
        for step, replicas in (("down", 1), ("up", 3)):
            got = await _req(
                nc, "$JS.API.STREAM.UPDATE.G", {"name": "G", "subjects": ["g.>"], "num_replicas": replicas}
            )
            assert got["config"]["num_replicas"] == replicas, got
            servers = await _stream_servers(nc, "G", replicas)
            home = home or next(iter(servers))
            out[f"{step} D0"] = _shape(await _placed(nc, "G", "D0", servers), home)
            for name in ("D3", "D1"):
                out[f"{step} {name}"] = _shape(await _placed(nc, "G", name, {home}), home)
    return out


async def _peer_remove_steps(url: str) -> dict[str, Any]:
    """On four servers, an R3 stream with two durables (num_replicas 0 with acked and pending
    messages, and 3): the server leading the first removed from the stream; each consumer's
    shape after, and whether it left the removed server for the stream's new one."""
    out: dict[str, Any] = {}
    async with _connect(url) as nc:
        js = nc.jetstream(timeout=5)
        got = await _until(
            nc, "$JS.API.STREAM.CREATE.R", {"name": "R", "subjects": ["r.>"], "num_replicas": 3}
        )
        assert "error" not in got, got
        for i in range(10):
            await publish_when_ready(js, f"r.{i}", b"x")
        await _create(nc, "R", "D0", ack_wait=ACK_WAIT)
        await _create(nc, "R", "D3", num_replicas=3)
        sub = await js.pull_subscribe_bind("D0", "R")
        for m in (await _fetch(js, sub, 6))[:3]:
            await m.ack_sync()
        before = await _stream_servers(nc, "R", 3)
        removed = await _consumer_leader(nc, "R", "D0", before)
        got = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.R", {"peer": removed})
        assert got.get("success"), got
        for _ in range(150):
            after = await _stream_servers(nc, "R", 3)
            if removed not in after:
                break
            await asyncio.sleep(0.2)
        assert removed not in after
        for name in ("D0", "D3"):
            info = await _placed(nc, "R", name, after)
            out[name] = _shape(info, "")
    return out


@pytest.mark.parametrize("steps", ["scale", "peer remove"])
async def test_consumers_placed_as_nats_server_places_them(tmp_path: Path, steps: str) -> None:
    """The same steps on jetpy servers and nats-server 2.15.1: the consumers' ``num_replicas``,
    ``cluster`` blocks' fields, replicas and state after a stream's scale-down 3 -> 1 and
    scale-up 1 -> 3 (three servers), and after the server leading one was removed from the
    stream by ``STREAM.PEER.REMOVE`` (four servers), are the same."""
    size, run = (3, _scale_steps) if steps == "scale" else (4, _peer_remove_steps)
    c = JsCluster(tmp_path / "jetpy", size=size)
    try:
        c.start()
        ours = await run(c.urls[0])
    finally:
        c.stop()
    (tmp_path / "ref").mkdir()
    with reference_cluster(tmp_path / "ref", size=size) as members:
        theirs = await run(members[0].url)
    if steps == "scale":
        assert theirs["down D3"]["num_replicas"] == 1 and theirs["up D0"]["replicas"]
    else:
        assert theirs["D0"]["state"] == (6, 3, 3) and len(theirs["D3"]["replicas"]) == 2
    assert ours == theirs


async def _consumer_leader(nc: Client, stream: str, name: str, among: set[str], within: float = 30.0) -> str:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        info = await _until(nc, CONSUMER_INFO.format(stream, name))
        leader = info.get("cluster", {}).get("leader", "")
        if leader in among:
            return str(leader)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no leader among {sorted(among)}: {info.get('cluster')}")
        await asyncio.sleep(0.2)


async def test_peer_removed_under_the_consumer_leader_then_its_new_leader_killed(tmp_path: Path) -> None:
    """Four servers, an R3 stream and an R3 durable pull consumer with acked and pending
    messages: the server leading the consumer is removed from the stream; the consumer goes on
    the stream's new servers with its state and its files leave the removed one; then the
    consumer's new leader is killed -9: whatever an ack_sync confirmed is never delivered again,
    and every message is delivered."""
    c = JsCluster(tmp_path, size=4)
    total = 40
    try:
        c.start()
        async with _connect(c.urls[0]) as nc:
            js = nc.jetstream(timeout=5)
            got = await _until(
                nc, "$JS.API.STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"], "num_replicas": 3}
            )
            assert "error" not in got, got
            for i in range(total):
                await publish_when_ready(js, f"p.{i}", b"m%d" % i)
            await _create(nc, "P", "D", ack_wait=3 * 10**9)
            sub = await js.pull_subscribe_bind("D", "P")
            msgs = await _fetch(js, sub, 10)
            assert [m.metadata.sequence.stream for m in msgs] == list(range(1, 11))
            confirmed: dict[int, float] = {}  # stream seq -> when its ack_sync returned
            for m in msgs[:6]:
                await m.ack_sync()
                confirmed[m.metadata.sequence.stream] = asyncio.get_running_loop().time()
            stream = await _until(nc, "$JS.API.STREAM.INFO.P")
            holders = {stream["cluster"]["leader"], *(r["name"] for r in stream["cluster"]["replicas"])}
            removed = await _consumer_leader(nc, "P", "D", holders)
            assert _consumer_dirs(c, removed)

            got = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.P", {"peer": removed})
            assert got == {"type": "io.nats.jetstream.api.v1.stream_remove_peer_response", "success": True}
            now = (holders - {removed}) | (set(c.nodes) - holders)
            info = await _placed(nc, "P", "D", now)
            assert info["cluster"]["leader"] != removed
            assert _state(info) == (10, 6, 4)
            assert info["config"].get("num_replicas", 0) == 0
            await c.wait_for(
                "the removed server's consumer files deleted", lambda: not _consumer_dirs(c, removed)
            )
            await _stream_placed(nc, "P", now)  # the new server known to the stream's leader too

            victim = await _consumer_leader(nc, "P", "D", now)
        survivor = sorted(now - {victim})[0]
        deliveries: list[tuple[int, float]] = [(m.metadata.sequence.stream, 0.0) for m in msgs]
        async with _connect(c.nodes[survivor].url) as nc:
            js = nc.jetstream(timeout=5)
            sub = await js.pull_subscribe_bind("D", "P")
            killed = False
            deadline = asyncio.get_running_loop().time() + 90
            while len(confirmed) < total:
                assert asyncio.get_running_loop().time() < deadline, sorted(
                    set(range(1, total + 1)) - set(confirmed)
                )
                try:
                    batch = await sub.fetch(5, timeout=1.0)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                for m in batch:
                    seq = m.metadata.sequence.stream
                    deliveries.append((seq, asyncio.get_running_loop().time()))
                    try:
                        await m.ack_sync(timeout=2)
                    except (TimeoutError, nats.errors.TimeoutError):
                        continue  # not confirmed: it may come again
                    confirmed.setdefault(seq, asyncio.get_running_loop().time())
                if not killed and len(confirmed) >= 20:
                    c.kill(victim)
                    killed = True
            assert killed
            # nothing confirmed was delivered after its confirmation
            again = [(seq, at) for seq, at in deliveries if seq in confirmed and at > confirmed[seq]]
            assert not again, again
            final = await _consumer_leader(nc, "P", "D", now - {victim})
            assert final != victim
            ci = await _until(nc, CONSUMER_INFO.format("P", "D"))
            assert ci["ack_floor"]["stream_seq"] == total and ci["num_ack_pending"] == 0, ci
    finally:
        c.stop()


async def test_scaled_down_and_straight_back_up(tmp_path: Path) -> None:
    """3 -> 1 -> 3 with no wait in between (the servers left out may still be leaving when
    they are placed again): the stream and its consumer end on the three servers, their state
    whole."""
    c = JsCluster(tmp_path)
    all3 = {"n1", "n2", "n3"}
    try:
        c.start()
        async with _connect(c.urls[0]) as nc:
            js = nc.jetstream(timeout=5)
            got = await _until(
                nc, "$JS.API.STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"], "num_replicas": 3}
            )
            assert "error" not in got, got
            for i in range(20):
                await publish_when_ready(js, f"b.{i}", b"x")
            await _create(nc, "B", "D", ack_wait=ACK_WAIT)
            sub = await js.pull_subscribe_bind("D", "B")
            msgs = await _fetch(js, sub, 8)
            for m in msgs[:5]:
                await m.ack_sync()
            for round in range(3):
                for replicas in (1, 3):
                    got = await _req(
                        nc,
                        "$JS.API.STREAM.UPDATE.B",
                        {"name": "B", "subjects": ["b.>"], "num_replicas": replicas},
                    )
                    assert got["config"]["num_replicas"] == replicas, (round, got)
            assert await _stream_servers(nc, "B", 3) == all3
            info = await _placed(nc, "B", "D", all3)
            assert _state(info) == (8, 5, 3)
            await c.wait_for(
                "every server holding the stream",
                lambda: all((n.stream_state("B") or {}).get("messages") == 20 for n in c.nodes.values()),
            )
            await c.wait_for(
                "every server holding the consumer", lambda: all(len(_consumer_dirs(c, n)) == 1 for n in all3)
            )
            msgs = await _fetch(js, sub, 12)
            assert [m.metadata.sequence.stream for m in msgs] == list(range(9, 21))
    finally:
        c.stop()
