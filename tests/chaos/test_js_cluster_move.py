"""A stream moved by an update of its placement, on five jetpy servers with tags: its servers
that the new placement does not allow replaced by others that it does (nats-server 2.15.1's
move), every message and its durable consumer's state kept, publishes going on meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig

from .jsapi import connect, until
from .jscluster import ACCOUNTS, JsCluster

pytestmark = pytest.mark.timeout(180)

# n1..n3 "a", n3..n5 "b": a stream on "a" moves off n1 and n2 to n4 and n5, keeping n3;
# n1 alone "d", n5 alone "c": an R1 stream moves from n1 to n5
TAGS = {"n1": ["a", "d"], "n2": ["a"], "n3": ["a", "b"], "n4": ["b"], "n5": ["b", "c"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JsCluster]:
    root = tmp_path_factory.mktemp("js-move")
    for name, tags in TAGS.items():
        (root / f"{name}.conf").write_text(f"{ACCOUNTS}\nserver_tags: {json.dumps(tags)}\n")
    c = JsCluster(root, size=5, extra=("-c", str(root / "{name}.conf")))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _connect(url: str) -> contextlib.AbstractAsyncContextManager[Client]:
    return connect(url, "app")


async def _req(nc: Client, subject: str, body: dict[str, Any] | None = None, within: float = 30.0) -> Any:
    """The reply once there is one without error 10008 (the meta group forming)."""
    return await until(nc, subject, body, within, each=2.0)


def _holders(c: JsCluster, stream: str, messages: int) -> list[str]:
    return sorted(
        n.name for n in c.nodes.values() if (n.stream_state(stream) or {}).get("messages") == messages
    )


def _stream_dir(c: JsCluster, name: str, stream: str) -> Path:
    return c.nodes[name].store / "jetstream" / "$G" / "streams" / stream


def _servers(info: dict[str, Any]) -> list[str]:
    cl = info.get("cluster", {})
    return sorted({cl.get("leader", ""), *(r["name"] for r in cl.get("replicas", []))} - {""})


async def _publish(nc: Client, subject: str, i: int) -> int:
    """Publish message ``i`` (its id de-duplicates a retry) until a PubAck comes; its sequence."""
    js = nc.jetstream(timeout=2)
    while True:
        try:
            ack = await js.publish(subject, b"m%d" % i, headers={"Nats-Msg-Id": f"{subject}-{i}"})
            return ack.seq
        except (nats.errors.Error, TimeoutError):
            await asyncio.sleep(0.1)


async def _until_servers(nc: Client, subject: str, want: list[str], within: float = 30.0) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for _ in range(int(within / 0.2)):
        info = await _req(nc, subject)
        if _servers(info) == want and all(r.get("current") for r in info["cluster"].get("replicas", [])):
            return info
        await asyncio.sleep(0.2)
    raise AssertionError(f"{subject}: on {_servers(info)}, not {want}: {info}")


async def _acked(nc: Client, stream: str, durable: str, count: int) -> None:
    js = nc.jetstream(timeout=5)
    sub = await js.pull_subscribe_bind(durable, stream)
    got = 0
    while got < count:
        for m in await sub.fetch(count - got, timeout=5):
            await m.ack_sync(timeout=5)
            got += 1
    await sub.unsubscribe()


async def _next(nc: Client, stream: str, durable: str) -> int:
    """The sequence of the consumer's next delivery."""
    js = nc.jetstream(timeout=5)
    sub = await js.pull_subscribe_bind(durable, stream)
    for _ in range(20):
        with contextlib.suppress(nats.errors.TimeoutError, TimeoutError):
            [m] = await sub.fetch(1, timeout=2)
            await sub.unsubscribe()
            return m.metadata.sequence.stream
    raise AssertionError("no delivery")


async def test_r3_stream_moved_by_tags_with_its_messages_and_consumer(cluster: JsCluster) -> None:
    c = cluster
    async with _connect(c.urls[0]) as nc:
        cfg = {"name": "MOVE", "subjects": ["move.>"], "num_replicas": 3, "placement": {"tags": ["a"]}}
        created = await _req(nc, "$JS.API.STREAM.CREATE.MOVE", cfg)
        assert _servers(created) == ["n1", "n2", "n3"], created
        for i in range(100):
            assert await _publish(nc, "move.x", i) == i + 1
        await nc.jetstream(timeout=5).add_consumer(
            "MOVE", ConsumerConfig(durable_name="D", ack_policy=AckPolicy.EXPLICIT)
        )
        await _acked(nc, "MOVE", "D", 30)
        # led from a server it leaves: its leadership is handed to a new one during the move
        if (await _req(nc, "$JS.API.STREAM.INFO.MOVE"))["cluster"]["leader"] != "n1":
            body = {"placement": {"preferred": "n1"}}
            down = await _req(nc, "$JS.API.STREAM.LEADER.STEPDOWN.MOVE", body)
            assert down.get("success"), down
        assert (await _req(nc, "$JS.API.STREAM.INFO.MOVE"))["cluster"]["leader"] == "n1"

        async def publishing() -> list[int]:
            return [await _publish(nc, "move.y", i) for i in range(100)]

        c.kill("n4")  # placed, but not there yet: the move goes on until it is
        meanwhile = asyncio.create_task(publishing())
        await asyncio.sleep(0.2)
        moved = await _req(nc, "$JS.API.STREAM.UPDATE.MOVE", {**cfg, "placement": {"tags": ["b"]}})
        assert moved.get("error") is None and moved["config"]["placement"] == {"tags": ["b"]}, moved
        again = await _req(nc, "$JS.API.STREAM.UPDATE.MOVE", cfg)  # moving back meanwhile
        assert again["error"]["err_code"] == 10124, again  # nats-server 2.15.1's refusal
        await asyncio.sleep(1)
        c.start("n4")
        seqs = await meanwhile
        assert seqs == list(range(101, 201))  # none lost, none twice

        info = await _until_servers(nc, "$JS.API.STREAM.INFO.MOVE", ["n3", "n4", "n5"])
        assert info["state"]["messages"] == 200 and info["state"]["last_seq"] == 200
        await c.wait_for("the new servers hold all", lambda: _holders(c, "MOVE", 200) == ["n3", "n4", "n5"])
        await c.wait_for(
            "the old servers' files deleted",
            lambda: not any(_stream_dir(c, n, "MOVE").exists() for n in ("n1", "n2")),
        )
        ci = await _until_servers(nc, "$JS.API.CONSUMER.INFO.MOVE.D", ["n3", "n4", "n5"])
        assert ci["ack_floor"]["stream_seq"] == 30 and ci["num_pending"] == 170, ci
        assert await _next(nc, "MOVE", "D") == 31
        assert await _publish(nc, "move.z", 0) == 201
        await c.wait_for(
            "every replica takes the next", lambda: _holders(c, "MOVE", 201) == ["n3", "n4", "n5"]
        )


async def test_r1_stream_moved_by_tags(cluster: JsCluster) -> None:
    c = cluster
    async with _connect(c.urls[1]) as nc:
        cfg = {"name": "SOLO", "subjects": ["solo.>"], "placement": {"tags": ["d"]}}
        created = await _req(nc, "$JS.API.STREAM.CREATE.SOLO", cfg)
        assert _servers(created) == ["n1"], created
        for i in range(50):
            await _publish(nc, "solo.x", i)
        await nc.jetstream(timeout=5).add_consumer(
            "SOLO", ConsumerConfig(durable_name="S", ack_policy=AckPolicy.EXPLICIT)
        )
        await _acked(nc, "SOLO", "S", 10)
        moved = await _req(nc, "$JS.API.STREAM.UPDATE.SOLO", {**cfg, "placement": {"tags": ["c"]}})
        assert moved.get("error") is None and moved["config"]["placement"] == {"tags": ["c"]}, moved
        info = await _until_servers(nc, "$JS.API.STREAM.INFO.SOLO", ["n5"])
        assert info["state"]["messages"] == 50
        await c.wait_for("n5 holds it alone", lambda: _holders(c, "SOLO", 50) == ["n5"])
        await c.wait_for("n1's files deleted", lambda: not _stream_dir(c, "n1", "SOLO").exists())
        ci = await _until_servers(nc, "$JS.API.CONSUMER.INFO.SOLO.S", ["n5"])
        assert ci["ack_floor"]["stream_seq"] == 10, ci
        assert await _next(nc, "SOLO", "S") == 11
        assert await _publish(nc, "solo.x", 50) == 51

        # no server has the tags: refused as nats-server 2.15.1 does, the stream where it was
        bad = await _req(nc, "$JS.API.STREAM.UPDATE.SOLO", {**cfg, "placement": {"tags": ["zzz"]}})
        assert bad["error"]["err_code"] == 10005, bad
        assert _servers(await _req(nc, "$JS.API.STREAM.INFO.SOLO")) == ["n5"]
