"""R1 streams on a cluster of three jetpy server processes: a plain local stream on the server
it is placed on, with no Raft group (as nats-server 2.15.1 runs them), answering the cluster's
requests as a replicated stream's leader does; scaled up to R3 from what its store holds (the
new replicas fetch its messages) and down to R1 again (its group's files dropped)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from .jsapi import connect
from .jsapi import req as _req
from .jsapi import until as _until
from .jscluster import JsCluster

pytestmark = pytest.mark.timeout(180)


def _connect(url: str) -> contextlib.AbstractAsyncContextManager[Client]:
    return connect(url, reconnect_wait=0.1)


def _raft_groups(c: JsCluster, name: str) -> set[str]:
    """The Raft groups the server runs."""
    return set(c.nodes[name].raftz())


def _group_dirs(c: JsCluster, name: str, group: str) -> list[Path]:
    return list(c.nodes[name].store.rglob(group))


def _holders(c: JsCluster, stream: str, messages: int) -> list[str]:
    """The servers whose own store holds the stream with that many messages."""
    return sorted(
        n.name for n in c.nodes.values() if (n.stream_state(stream) or {}).get("messages") == messages
    )


def _detail(c: JsCluster, name: str, stream: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{c.nodes[name].http_port}/jsz?streams=true&raft=true"
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.load(r)
    for acc in doc.get("account_details", []):
        for sd in acc.get("stream_detail", []):
            if sd["name"] == stream:
                found: dict[str, Any] = sd
                return found
    raise AssertionError(f"{name} has no stream {stream}")


async def test_r1_stream_runs_without_a_group_and_answers_as_a_leader(cluster: JsCluster) -> None:
    c = cluster
    async with _connect(c.urls[0]) as nc:
        created = await _until(
            nc,
            "$JS.API.STREAM.CREATE.ONE",
            {"name": "ONE", "subjects": ["one.>"], "num_replicas": 1, "allow_direct": True},
        )
        assert created.get("did_create") is True, created
        home = created["cluster"]["leader"]
        assert created["cluster"] == {"name": "JSC", "leader": home}  # nats-server's R1 block
        js = nc.jetstream(timeout=5)
        for i in range(20):
            ack = await js.publish(f"one.{i % 4}", b"m%d" % i)
            assert ack.seq == i + 1
        assert _holders(c, "ONE", 20) == [home]
        group = [g for g in _raft_groups(c, home) if g.startswith("S-R1F-")]
        assert group == [], group  # no Raft group: the store alone
        detail = _detail(c, home, "ONE")
        assert detail["cluster"] == {"name": "JSC", "leader": home}
        assert detail["stream_raft_group"].startswith("S-R1F-")  # the assignment's, as nats-server
        assert _group_dirs(c, home, detail["stream_raft_group"]) == []

    for url in c.urls:  # every server's client reaches the stream's server for its requests
        async with _connect(url) as nc:
            info = await _until(nc, "$JS.API.STREAM.INFO.ONE")
            assert info["cluster"] == {"name": "JSC", "leader": home}
            assert info["state"]["messages"] == 20
            got = await _req(nc, "$JS.API.STREAM.MSG.GET.ONE", {"seq": 3})
            assert got["message"]["subject"] == "one.2"
            direct = await nc.request("$JS.API.DIRECT.GET.ONE", json.dumps({"seq": 4}).encode(), timeout=5)
            assert direct.data == b"m3" and direct.headers is not None
            assert direct.headers["Nats-Sequence"] == "4"

    async with _connect(c.urls[1]) as nc:
        js = nc.jetstream(timeout=5)
        purged = await _req(nc, "$JS.API.STREAM.PURGE.ONE", {"filter": "one.0"})
        assert purged == {
            "type": "io.nats.jetstream.api.v1.stream_purge_response",
            "success": True,
            "purged": 5,
        }
        deleted = await _req(nc, "$JS.API.STREAM.MSG.DELETE.ONE", {"seq": 2})
        assert deleted.get("success") is True, deleted
        missing = await _req(nc, "$JS.API.STREAM.MSG.DELETE.ONE", {"seq": 2})
        assert missing["error"]["err_code"] == 10057, missing
        updated = await _req(
            nc,
            "$JS.API.STREAM.UPDATE.ONE",
            {"name": "ONE", "subjects": ["one.>"], "num_replicas": 1, "allow_direct": True, "max_msgs": 10},
        )
        assert updated["config"]["max_msgs"] == 10 and updated["cluster"]["leader"] == home, updated
        assert updated["state"]["messages"] == 10
        other = next(n for n in c.nodes if n != home)
        not_member = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.ONE", {"peer": other})
        assert not_member["error"]["err_code"] == 10040, not_member
        stepdown = await _req(nc, "$JS.API.STREAM.LEADER.STEPDOWN.ONE")
        assert stepdown == {
            "type": "io.nats.jetstream.api.v1.stream_leader_stepdown_response",
            "success": True,
        }

        # a durable consumer reads it from any server
        sub = await js.pull_subscribe("one.>", "D", stream="ONE")
        msgs = await sub.fetch(10, timeout=5)
        assert [m.metadata.sequence.stream for m in msgs] == [8, 10, 11, 12, 14, 15, 16, 18, 19, 20]
        for m in msgs:
            await m.ack_sync()

        # a work-queue R1 stream: what its consumer acknowledged is removed
        await _until(
            nc,
            "$JS.API.STREAM.CREATE.WQ",
            {"name": "WQ", "subjects": ["wq"], "num_replicas": 1, "retention": "workqueue"},
        )
        for i in range(6):
            await js.publish("wq", b"w%d" % i)
        wq = await js.pull_subscribe("wq", "W", stream="WQ")
        for m in await wq.fetch(4, timeout=5):
            await m.ack_sync()
        await c.wait_for("the acknowledged ones removed", lambda: _holders(c, "WQ", 2))

    c.kill(home)  # kill -9: it comes back from its store, no log to replay
    c.start(home)
    async with _connect(c.urls[2]) as nc:
        info = await _until(nc, "$JS.API.STREAM.INFO.ONE")
        assert info["cluster"] == {"name": "JSC", "leader": home}
        assert (info["state"]["messages"], info["state"]["last_seq"]) == (10, 20)
        js = nc.jetstream(timeout=5)
        ack = await js.publish("one.x", b"after")
        assert ack.seq == 21
        cinfo = await _until(nc, "$JS.API.CONSUMER.INFO.ONE.D")
        assert cinfo["ack_floor"]["stream_seq"] == 20, cinfo
    assert not [g for g in _raft_groups(c, home) if g.startswith("S-R1F-")]


async def test_r1_scaled_up_from_its_store_and_down_again(cluster: JsCluster) -> None:
    """R1 -> R3: the holder founds the group over its store, the two new replicas fetch its
    messages; R3 -> R1: the group goes (its files too), the stream is a plain local one again;
    messages published before and after each step read back from every replica."""
    c = cluster
    async with _connect(c.urls[0]) as nc:
        js = nc.jetstream(timeout=5)
        cfg: dict[str, Any] = {"name": "S", "subjects": ["s.>"], "num_replicas": 1}
        created = await _until(nc, "$JS.API.STREAM.CREATE.S", cfg)
        home = created["cluster"]["leader"]
        for i in range(30):
            await js.publish(f"s.{i}", b"a%d" % i, headers={"Nats-Msg-Id": f"a{i}"})
        await _req(nc, "$JS.API.STREAM.MSG.DELETE.S", {"seq": 7})  # a gap the replicas keep

        up = await _req(nc, "$JS.API.STREAM.UPDATE.S", {**cfg, "num_replicas": 3})
        assert up["config"]["num_replicas"] == 3 and up["cluster"]["leader"] == home, up
        await c.wait_for("three holders", lambda: _holders(c, "S", 29) == ["n1", "n2", "n3"])
        for i in range(30, 40):
            await js.publish(f"s.{i}", b"a%d" % i)
        dup = await js.publish("s.0", b"again", headers={"Nats-Msg-Id": "a0"})
        assert dup.duplicate and dup.seq == 1  # the store's ids carried into the group
        await c.wait_for("three holders of 39", lambda: _holders(c, "S", 39) == ["n1", "n2", "n3"])
        for n in c.nodes:
            assert n in _holders(c, "S", 39)
            st = c.nodes[n].stream_state("S") or {}
            assert (st["first_seq"], st["last_seq"], st["num_deleted"]) == (1, 40, 1), (n, st)
        info = await _until(nc, "$JS.API.STREAM.INFO.S")
        assert info["cluster"]["leader"] == home
        assert sorted(r["name"] for r in info["cluster"]["replicas"]) == sorted(set(c.nodes) - {home})
        group = info["cluster"]["raft_group"]
        assert all(group in _raft_groups(c, n) for n in c.nodes)

        down = await _req(nc, "$JS.API.STREAM.UPDATE.S", {**cfg, "num_replicas": 1})
        assert down["config"]["num_replicas"] == 1, down
        last = (await _until(nc, "$JS.API.STREAM.INFO.S"))["cluster"]["leader"]

        def settled() -> bool:
            return not any(group in _raft_groups(c, n) or _group_dirs(c, n, group) for n in c.nodes)

        await c.wait_for("the group and its files gone everywhere", settled)
        assert _holders(c, "S", 39) == [last]
        info = await _until(nc, "$JS.API.STREAM.INFO.S")
        assert info["cluster"] == {"name": "JSC", "leader": last}
        for i in range(40, 45):
            ack = await js.publish(f"s.{i}", b"a%d" % i)
            assert ack.seq == i + 1
        got = await _req(nc, "$JS.API.STREAM.MSG.GET.S", {"seq": 35})
        assert got["message"]["subject"] == "s.34"

    c.kill(last)  # the local stream comes back from its store
    c.start(last)
    async with _connect(c.urls[0]) as nc:
        info = await _until(nc, "$JS.API.STREAM.INFO.S")
        assert info["cluster"] == {"name": "JSC", "leader": last}
        assert (info["state"]["messages"], info["state"]["last_seq"]) == (44, 45)
    assert not any(_group_dirs(c, n, group) for n in c.nodes)


async def test_r1_stream_moved_by_peer_remove_keeps_its_messages(cluster: JsCluster) -> None:
    """``STREAM.PEER.REMOVE`` of an R1 stream's server: as nats-server 2.15.1 it answers success
    and places the stream on another server, but with its messages (nats-server's new server
    starts empty and leaderless): the old one founds the stream's group over its store, the new
    one joins and fetches them, takes the lead, removes the old one and holds it as R1."""
    c = cluster
    async with _connect(c.urls[0]) as nc:
        js = nc.jetstream(timeout=5)
        cfg: dict[str, Any] = {"name": "M", "subjects": ["m.>"], "num_replicas": 1}
        home = (await _until(nc, "$JS.API.STREAM.CREATE.M", cfg))["cluster"]["leader"]
        for i in range(25):
            await js.publish(f"m.{i}", b"v%d" % i, headers={"Nats-Msg-Id": f"v{i}"})
        not_member = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.M", {"peer": "nX"})
        assert not_member["error"]["err_code"] == 10040, not_member
        moved = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.M", {"peer": home})
        assert moved == {"type": "io.nats.jetstream.api.v1.stream_remove_peer_response", "success": True}

        def settled() -> list[str] | None:
            holders = _holders(c, "M", 25)
            if len(holders) != 1 or holders[0] == home:
                return None
            if any(g.startswith("S-R1F-") for n in c.nodes for g in _raft_groups(c, n)):
                return None
            return holders

        [new] = await c.wait_for("the stream on another server alone, no group", settled, within=40)
        assert c.nodes[home].stream_state("M") is None  # the old server's copy deleted
        info = await _until(nc, "$JS.API.STREAM.INFO.M")
        assert info["cluster"] == {"name": "JSC", "leader": new}
        dup = await js.publish("m.0", b"again", headers={"Nats-Msg-Id": "v0"})
        assert dup.duplicate and dup.seq == 1
        ack = await js.publish("m.x", b"after")
        assert ack.seq == 26
        other = next(n for n in c.nodes if n not in (home, new))
        assert c.nodes[other].stream_state("M") is None

    c.kill(new)
    c.start(new)
    async with _connect(c.urls[0]) as nc:
        info = await _until(nc, "$JS.API.STREAM.INFO.M")
        assert info["cluster"] == {"name": "JSC", "leader": new}
        assert (info["state"]["messages"], info["state"]["last_seq"]) == (26, 26)
        got = await _req(nc, "$JS.API.STREAM.MSG.GET.M", {"seq": 13})
        assert got["message"]["subject"] == "m.12"


SYS_ACCOUNTS = """
authorization { users: [{user: app, password: app}] }
accounts { SYS: { users: [{user: sys, password: sys}] } }
system_account: SYS
no_auth_user: app
"""


async def test_server_removed_moves_its_r1_stream_with_its_messages(tmp_path: Path) -> None:
    """``SERVER.REMOVE`` of a server holding an R1 stream: the stream goes to another server
    with its messages, and its durable follows it with its acknowledgements."""
    conf = tmp_path / "accounts.conf"
    conf.write_text(SYS_ACCOUNTS)
    c = JsCluster(tmp_path, extra=("-c", str(conf)))
    try:
        c.start()
        async with _connect(c.urls[0]) as nc:
            js = nc.jetstream(timeout=5)
            homes = {}
            for name in ("A", "B", "C"):  # the least loaded server each: one on every server
                cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": 1}
                homes[name] = (await _until(nc, f"$JS.API.STREAM.CREATE.{name}", cfg))["cluster"]["leader"]
            assert sorted(homes.values()) == sorted(c.nodes)
            meta = (await asyncio.to_thread(c.nodes["n1"].jsz))["meta_cluster"]["leader"]
            name, gone = next((s, h) for s, h in homes.items() if h != meta)
            subject = f"{name.lower()}.x"
            for i in range(20):
                await js.publish(subject, b"%d" % i)
            sub = await js.pull_subscribe(subject, "D", stream=name)
            for m in await sub.fetch(5, timeout=5):
                await m.ack_sync()
            sys_url = c.nodes[meta].url.replace("nats://", "nats://sys:sys@")
            async with _connect(sys_url) as sys_nc:
                got = await _req(sys_nc, "$JS.API.SERVER.REMOVE", {"peer": gone})
            assert got == {"type": "io.nats.jetstream.api.v1.meta_server_remove_response", "success": True}

            def moved() -> list[str] | None:
                holders = _holders(c, name, 20)
                return holders if len(holders) == 1 and holders[0] != gone else None

            [new] = await c.wait_for("the stream on another server with its messages", moved, within=40)
            await c.wait_for("the old copy deleted", lambda: c.nodes[gone].stream_state(name) is None)
            info = await _until(nc, f"$JS.API.STREAM.INFO.{name}")
            assert info["cluster"] == {"name": "JSC", "leader": new}
            assert (await js.publish(subject, b"after")).seq == 21
            cinfo = await _until(nc, f"$JS.API.CONSUMER.INFO.{name}.D")
            assert cinfo["cluster"]["leader"] == new and cinfo["ack_floor"]["stream_seq"] == 5, cinfo
            msgs = await sub.fetch(16, timeout=10)
            assert [m.metadata.sequence.stream for m in msgs] == list(range(6, 22))
    finally:
        c.stop()


async def test_r1_kv_bucket_and_object_store_on_a_cluster(cluster: JsCluster) -> None:
    """A KV bucket and an object store of one replica (R1 streams held locally): puts, gets,
    history, a watcher, from a client of another server."""
    async with _connect(cluster.urls[0]) as nc:
        js = nc.jetstream(timeout=5)
        for _ in range(100):  # the meta group forming
            try:
                kv = await js.create_key_value(bucket="K", replicas=1, history=3)
                break
            except (TimeoutError, nats.errors.TimeoutError, nats.js.errors.APIError):
                await asyncio.sleep(0.2)
        else:
            raise AssertionError("no meta leader")
        info = await _until(nc, "$JS.API.STREAM.INFO.KV_K")
        assert set(info["cluster"]) == {"name", "leader"}
    async with _connect(cluster.urls[1]) as nc:
        js = nc.jetstream(timeout=5)
        kv = await js.key_value("K")
        await kv.put("a", b"1")
        await kv.put("a", b"2")
        watcher: Any = await kv.watchall()  # nats-py leaves its methods untyped
        first = await watcher.updates(timeout=3)
        assert first is not None and (first.key, first.value) == ("a", b"2")
        assert await watcher.updates(timeout=3) is None
        await kv.put("b", b"3")
        update = await watcher.updates(timeout=3)
        assert update is not None and (update.key, update.value) == ("b", b"3")
        await watcher.stop()
        assert (await kv.get("a")).value == b"2"
        assert [e.value for e in await kv.history("a")] == [b"1", b"2"]
        obj = await js.create_object_store("O", replicas=1)
        await obj.put("f", b"x" * 300_000)
        assert (await obj.get("f")).data == b"x" * 300_000
