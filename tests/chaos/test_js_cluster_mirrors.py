"""Mirrors and sources on a cluster, on three jetpy server processes: the stream's leader copies,
every copy goes through the stream's group, and copying goes on where the group left off while
its leader is killed -9 and restarted or steps down, with no gap and no duplicate: an R1 and an
R3 mirror end with their origin's messages under its sequences, every replica the same; a
stream with sources (a filter, subject transforms) holds each sourced message exactly once. The
create answers and infos of a mirror and a stream with sources are those of a 3-node nats-server
2.15.1 cluster."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.client import JetStreamContext

from jetpy.jetstream.origin import retry_backoff
from jetpy.jetstream.sources import api_hash

from .jsapi import connect
from .jsapi import until as _until
from .jscluster import ACCOUNTS, JsCluster, reference_cluster

pytestmark = pytest.mark.timeout(240)

STEPDOWN = "$JS.API.STREAM.LEADER.STEPDOWN.{}"
TOTAL = 400  # messages published into the origins while the copying leaders are upset


def _connect(url: str) -> contextlib.AbstractAsyncContextManager[Client]:
    return connect(url, reconnect_wait=0.2)


async def _create(nc: Client, cfg: dict[str, Any]) -> None:
    got = await _until(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
    assert got.get("did_create") is True, got


async def _info(nc: Client, stream: str) -> dict[str, Any]:
    info: dict[str, Any] = await _until(nc, f"$JS.API.STREAM.INFO.{stream}")
    assert "error" not in info, info
    return info


async def _publish(js: JetStreamContext, subjects: list[str]) -> None:
    """Publish one message on each subject, each retried until acknowledged (its Nats-Msg-Id
    keeps a retry from being stored twice)."""
    for i, subject in enumerate(subjects):
        while True:
            try:
                await js.publish(
                    subject, f"m{i}".encode(), timeout=2.0, headers={"Nats-Msg-Id": f"{subject}-{i}"}
                )
                break
            except (nats.errors.Error, TimeoutError):
                await asyncio.sleep(0.1)
        if i % 20 == 0:
            await asyncio.sleep(0.02)  # spread over the upsets


async def _messages(nc: Client, stream: str) -> dict[int, tuple[str, bytes, dict[str, str]]]:
    """Every message the stream holds (by its leader): sequence -> (subject, data, headers)."""
    info = await _info(nc, stream)
    st = info["state"]
    out: dict[int, tuple[str, bytes, dict[str, str]]] = {}
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        got = await _until(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        if "error" in got:
            assert got["error"]["err_code"] == 10037, got  # a skipped sequence
            continue
        m = got["message"]
        hdrs: dict[str, str] = {}
        if m.get("hdrs"):
            for line in base64.b64decode(m["hdrs"]).decode().split("\r\n")[1:]:
                if ": " in line:
                    k, v = line.split(": ", 1)
                    hdrs[k] = v
        out[seq] = (m["subject"], base64.b64decode(m.get("data") or ""), hdrs)
    return out


async def _upset(c: JsCluster, nc: Client, stream: str) -> None:
    """Kill -9 the stream's leader, restart it, then make the new leader step down."""
    leader = (await _info(nc, stream))["cluster"]["leader"]
    c.kill(leader)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(c.start, leader)
    for _ in range(100):
        info = await _info(nc, stream)
        if info["cluster"].get("leader") and info["cluster"]["leader"] != leader:
            break
        await asyncio.sleep(0.1)
    got = await _until(nc, STEPDOWN.format(stream))
    assert got.get("success") is True, got


async def _same_everywhere(c: JsCluster, stream: str, want: dict[str, Any], replicas: int) -> None:
    """Every replica's own store holds what ``want`` (a state) says."""
    keys = ("messages", "bytes", "first_seq", "last_seq")

    def check() -> bool:
        states = [n.stream_state(stream) for n in c.nodes.values()]
        held = [s for s in states if s is not None]
        return len(held) == replicas and all(
            {k: s[k] for k in keys} == {k: want[k] for k in keys} for s in held
        )

    await c.wait_for(f"every replica of {stream} to hold {want}", check, within=30)


async def _caught_up(
    nc: Client, stream: str, origin_state: dict[str, Any], within: float = 60.0
) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        info = await _info(nc, stream)
        st = info["state"]
        if st["last_seq"] == origin_state["last_seq"] and st["messages"] == origin_state["messages"]:
            return info
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{stream} did not catch up: {st} vs {origin_state}")
        await asyncio.sleep(0.2)


async def _reported(nc: Client, stream: str, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The stream's ``mirror`` block once ``ok`` says so (a new leader's consumer on the origin is
    set up, and heard from, a moment after it is elected; or, when its setups failed while the
    origin's leaders were killed, after nats-server's back-off: 10 s more per failure so far, so
    up to a minute for five failures on a loaded machine)."""
    deadline = time.monotonic() + 5 * retry_backoff(1) + 15
    while True:
        mirror: dict[str, Any] = (await _info(nc, stream))["mirror"]
        if ok(mirror):
            return mirror
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    raise AssertionError(f"{stream}'s mirror report: {mirror}")


async def test_mirrors_copy_through_leader_kills_and_stepdowns(tmp_path: Path) -> None:
    c = JsCluster(tmp_path)
    try:
        c.start()
        async with _connect(c.nodes["n1"].url) as nc:
            js = nc.jetstream(timeout=5.0)
            await _create(nc, {"name": "ORIGIN", "subjects": ["orig.>"], "num_replicas": 3})
            await _create(nc, {"name": "M3", "mirror": {"name": "ORIGIN"}, "num_replicas": 3})
            await _create(nc, {"name": "M1", "mirror": {"name": "ORIGIN"}, "num_replicas": 1})
            subjects = [f"orig.{i % 7}" for i in range(TOTAL)]
            publishing = asyncio.create_task(_publish(js, subjects))
            await asyncio.sleep(1.0)
            await _upset(c, nc, "M3")
            await _upset(c, nc, "M3")
            await publishing
            # a message the origin no longer has when it is due reads as deleted in the mirror
            origin = (await _info(nc, "ORIGIN"))["state"]
            assert origin["messages"] == TOTAL, origin
            m3 = await _caught_up(nc, "M3", origin)
            m1 = await _caught_up(nc, "M1", origin)
            for name in ("M3", "M1"):  # the leader's report, once its consumer is heard from
                mirror = await _reported(nc, name, lambda r: 0 <= r["active"] < 5 * 10**9)
                assert mirror["name"] == "ORIGIN" and mirror["lag"] == 0, mirror
                assert "error" not in mirror, mirror
            want = await _messages(nc, "ORIGIN")
            for name in ("M3", "M1"):
                got = await _messages(nc, name)
                assert {s: (m[0], m[1]) for s, m in got.items()} == {s: (m[0], m[1]) for s, m in want.items()}
            await _same_everywhere(c, "M3", m3["state"], 3)
            await _same_everywhere(c, "M1", m1["state"], 1)
    finally:
        c.stop()


async def test_sources_keep_their_positions_through_leader_changes(tmp_path: Path) -> None:
    c = JsCluster(tmp_path)
    try:
        c.start()
        async with _connect(c.nodes["n2"].url) as nc:
            js = nc.jetstream(timeout=5.0)
            await _create(nc, {"name": "A", "subjects": ["a.>"], "num_replicas": 3})
            await _create(nc, {"name": "B", "subjects": ["b.>"], "num_replicas": 1})
            await _create(
                nc,
                {
                    "name": "AGG",
                    "num_replicas": 3,
                    "sources": [
                        {"name": "A", "filter_subject": "a.keep.>"},
                        {"name": "B", "subject_transforms": [{"src": "b.>", "dest": "agg.b.>"}]},
                    ],
                },
            )
            a_subjects = [f"a.{'keep' if i % 3 else 'drop'}.{i}" for i in range(TOTAL)]
            b_subjects = [f"b.{i}" for i in range(TOTAL // 2)]
            publishing = asyncio.gather(_publish(js, a_subjects), _publish(js, b_subjects))
            await asyncio.sleep(1.0)
            await _upset(c, nc, "AGG")
            await _upset(c, nc, "AGG")
            await publishing
            wanted = {("A", i + 1) for i, s in enumerate(a_subjects) if ".keep." in s}
            wanted |= {("B", i + 1) for i in range(len(b_subjects))}
            deadline = asyncio.get_running_loop().time() + 60
            while (await _info(nc, "AGG"))["state"]["messages"] < len(wanted):
                assert asyncio.get_running_loop().time() < deadline, "AGG did not get every message"
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # nothing more arrives (a duplicate would)
            info = await _info(nc, "AGG")
            got = await _messages(nc, "AGG")
            assert info["state"]["messages"] == len(wanted), info["state"]
            copied = []
            for subject, data, hdrs in got.values():
                origin, seq = hdrs["Nats-Stream-Source"].split(" ")[:2]
                copied.append((origin, int(seq)))
                if origin == "A":
                    assert subject == a_subjects[int(seq) - 1] and data == f"m{int(seq) - 1}".encode()
                else:
                    assert subject == "agg." + b_subjects[int(seq) - 1]
            assert len(copied) == len(set(copied)), "a message was copied twice"
            assert set(copied) == wanted
            # in each origin's order
            for name in ("A", "B"):
                seqs = [s for o, s in copied if o == name]
                assert seqs == sorted(seqs)
            assert [s["name"] for s in info["sources"]] == ["A", "B"]
            assert all(s["lag"] == 0 and "error" not in s for s in info["sources"]), info["sources"]
            await _same_everywhere(c, "AGG", info["state"], 3)
    finally:
        c.stop()


async def test_origin_rules_direct_gets_and_sources_changed_by_update(tmp_path: Path) -> None:
    """The origin's rules are checked against the cluster's streams (message size, cycles);
    a mirror's leader answers its origin's direct gets (``mirror_direct``); a source added by an
    update starts, one removed stops."""
    c = JsCluster(tmp_path)
    try:
        c.start()
        async with _connect(c.nodes["n3"].url) as nc:
            js = nc.jetstream(timeout=5.0)
            await _create(nc, {"name": "O", "subjects": ["o.>"], "num_replicas": 3, "max_msg_size": 100})
            await _create(nc, {"name": "D", "subjects": ["d.>"], "num_replicas": 1, "allow_direct": True})
            small = {"name": "SMALL", "mirror": {"name": "O"}, "num_replicas": 3, "max_msg_size": 10}
            got = await _until(nc, "$JS.API.STREAM.CREATE.SMALL", small)
            assert got["error"]["err_code"] == 10030, got  # smaller messages than the origin's
            cycle = {"name": "O2", "subjects": ["x.>"], "sources": [{"name": "O2"}], "num_replicas": 3}
            got = await _until(nc, "$JS.API.STREAM.CREATE.O2", cycle)
            assert "error" in got, got
            # mirror_direct, taken from the origin: the mirror's leader answers the origin's
            # direct gets too once caught up (their Nats-Stream header names who answered)
            for i in range(3):
                await js.publish(f"d.{i}", f"{i}".encode())
            md = await _until(nc, "$JS.API.STREAM.CREATE.MD", {"name": "MD", "mirror": {"name": "D"}})
            assert md["config"]["mirror_direct"] is True, md
            await _until_messages(nc, "MD", 3)
            answered: set[str] = set()
            for _ in range(200):
                msg = await nc.request("$JS.API.DIRECT.GET.D.d.1", b"", timeout=2.0)
                assert msg.data == b"1" and msg.headers is not None, (msg.data, msg.headers)
                answered.add(msg.headers["Nats-Stream"])
                if answered == {"D", "MD"}:
                    break
            assert answered == {"D", "MD"}, answered
            # sources changed by an update
            await _create(nc, {"name": "S", "subjects": ["s.>"], "num_replicas": 3})
            await _create(nc, {"name": "AGG", "num_replicas": 3, "sources": [{"name": "O"}]})
            for i in range(5):
                await js.publish(f"o.{i}", b"o")
                await js.publish(f"s.{i}", b"s")
            await _until_messages(nc, "AGG", 5)
            both = {"name": "AGG", "num_replicas": 3, "sources": [{"name": "O"}, {"name": "S"}]}
            got = await _until(nc, "$JS.API.STREAM.UPDATE.AGG", both)
            assert "error" not in got, got
            await _until_messages(nc, "AGG", 10)
            only_s = {"name": "AGG", "num_replicas": 3, "sources": [{"name": "S"}]}
            got = await _until(nc, "$JS.API.STREAM.UPDATE.AGG", only_s)
            assert "error" not in got, got
            await _until_messages(nc, "AGG", 10)
            await js.publish("o.9", b"o")
            await js.publish("s.9", b"s")
            await _until_messages(nc, "AGG", 11)
            await asyncio.sleep(1.0)
            info = await _info(nc, "AGG")
            assert info["state"]["messages"] == 11, info["state"]  # O is no longer copied
            assert [s["name"] for s in info["sources"]] == ["S"]
            got = await _messages(nc, "AGG")
            copied = [tuple(h["Nats-Stream-Source"].split(" ")[:2]) for _s, _d, h in got.values()]
            assert sorted(copied) == sorted(
                [("O", str(i)) for i in range(1, 6)] + [("S", str(i)) for i in range(1, 7)]
            )
            for name in ("AGG", "MD"):
                got = await _until(nc, f"$JS.API.STREAM.DELETE.{name}")
                assert got.get("success") is True, got
            got = await _until(nc, "$JS.API.CONSUMER.DELETE.S.NOPE")
            assert got["error"]["err_code"] == 10014, got
            got = await _until(nc, "$JS.API.CONSUMER.DELETE.NOPE.NOPE")
            assert got["error"]["err_code"] == 10059, got
    finally:
        c.stop()


async def _until_messages(nc: Client, stream: str, count: int, within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while (info := await _info(nc, stream))["state"]["messages"] < count:
        assert asyncio.get_running_loop().time() < deadline, f"{stream} never held {count} messages: {info}"
        await asyncio.sleep(0.1)


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """What of a create answer or stream info must be nats-server's: the config, the state's
    counts, the mirror and sources blocks without their timing, the cluster block's shape."""
    out: dict[str, Any] = {k: doc.get(k) for k in ("type", "error", "did_create", "names")}
    if "config" in doc:
        cfg = dict(doc["config"])
        cfg.pop("created", None)
        cfg.pop("metadata", None)  # nats-server's own (versions)
        out["config"] = cfg
        st = doc["state"]
        out["state"] = {k: st[k] for k in ("messages", "first_seq", "last_seq", "consumer_count")}
        for block in ("mirror", "sources"):
            got = doc.get(block)
            items = [got] if isinstance(got, dict) else got or []
            out[block] = [{k: v for k, v in item.items() if k != "active"} for item in items]
        cl = doc.get("cluster") or {}
        out["cluster"] = (bool(cl.get("leader")), len(cl.get("replicas") or []))
    return out


async def _copy_steps(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with _connect(url) as nc:
        js = nc.jetstream(timeout=5.0)
        await _create(nc, {"name": "ORIGIN", "subjects": ["o.>"], "num_replicas": 3})
        for i in range(6):
            await js.publish(f"o.{'a' if i % 2 else 'b'}", f"{i}".encode())
        mirror = {"name": "M", "mirror": {"name": "ORIGIN"}, "num_replicas": 3}
        out["mirror created"] = await _until(nc, "$JS.API.STREAM.CREATE.M", mirror)
        sources = {"name": "AGG", "sources": [{"name": "ORIGIN", "filter_subject": "o.a"}], "num_replicas": 3}
        out["sources created"] = await _until(nc, "$JS.API.STREAM.CREATE.AGG", sources)
        await _until_messages(nc, "M", 6)
        await _until_messages(nc, "AGG", 3)
        for name in ("M", "AGG"):  # the leader's report, once its consumer is heard from
            for _ in range(100):
                info = await _info(nc, name)
                blocks = [info["mirror"]] if "mirror" in info else info["sources"]
                if all(b["active"] >= 0 and b["lag"] == 0 for b in blocks):
                    break
                await asyncio.sleep(0.1)
            out[f"{name} info"] = info
        out["ORIGIN info"] = await _info(nc, "ORIGIN")
        out["ORIGIN consumers"] = {"names": (await _until(nc, "$JS.API.CONSUMER.NAMES.ORIGIN"))["consumers"]}
    return {k: _comparable(v) for k, v in out.items()}


async def test_mirror_and_sources_info_as_nats_server_gives_them(tmp_path: Path) -> None:
    conf = tmp_path / "accounts.conf"
    conf.write_text(ACCOUNTS)
    with reference_cluster(tmp_path, "-c", str(conf)) as members:
        want = await _copy_steps(members[0].url.replace("nats://", "nats://app:app@"))
    c = JsCluster(tmp_path / "jetpy", extra=("-c", str(conf)))
    try:
        c.start()
        got = await _copy_steps(c.nodes["n1"].url.replace("nats://", "nats://app:app@"))
    finally:
        c.stop()
    assert got == want


async def test_mirror_promoted_takes_publishes_and_replays_after_restarts(tmp_path: Path) -> None:
    """An update removing ``mirror`` makes it a stream of its own: copying stops, publishes on
    its new subjects are stored after the copies, and every replica, restarted, holds the same."""
    c = JsCluster(tmp_path)
    try:
        c.start()
        async with _connect(c.nodes["n1"].url) as nc:
            js = nc.jetstream(timeout=5.0)
            await _create(nc, {"name": "O", "subjects": ["o.>"], "num_replicas": 3})
            await _create(nc, {"name": "M", "mirror": {"name": "O"}, "num_replicas": 3})
            for i in range(5):
                await js.publish(f"o.{i}", b"o")
            await _until_messages(nc, "M", 5)
            await _until(nc, "$JS.API.STREAM.PURGE.M", {"keep": 2})  # in the log before the publishes
            promoted = {"name": "M", "subjects": ["m.>"], "num_replicas": 3}
            got = await _until(nc, "$JS.API.STREAM.UPDATE.M", promoted)
            assert "error" not in got and "mirror" not in got["config"], got
            for i in range(3):
                ack = await js.publish(f"m.{i}", b"m")
                assert ack.stream == "M" and ack.seq == 6 + i, ack
            await js.publish("o.9", b"o")
            await asyncio.sleep(1.0)
            info = await _info(nc, "M")
            assert (info["state"]["messages"], info["state"]["last_seq"]) == (5, 8), info["state"]
            assert "mirror" not in info
            for name in list(c.nodes):  # each replica replays its log against its store
                c.kill(name)
                await asyncio.to_thread(c.start, name)
                await asyncio.sleep(0.5)
            for i in range(3, 5):
                await _until(nc, "$JS.API.STREAM.INFO.M")
                ack = await js.publish(f"m.{i}", b"m")
                assert ack.seq == 6 + i, ack
            info = await _info(nc, "M")
            assert (info["state"]["messages"], info["state"]["last_seq"]) == (7, 10), info["state"]
            await _same_everywhere(c, "M", info["state"], 3)
    finally:
        c.stop()


async def test_compacted_logs_gaps_and_a_full_stream(tmp_path: Path) -> None:
    """With logs compacted every few entries: a mirror's follower down while its origin is
    published into catches up from its leader's snapshot and holds the same as the others, with
    the origin's deleted messages skipped in the mirror's sequences; a source into a full stream
    (discard new) shows the refusal and, once room is made, copies on with no gap."""
    c = JsCluster(tmp_path, snapshot_entries=16)
    try:
        c.start()
        async with _connect(c.nodes["n1"].url) as nc:
            js = nc.jetstream(timeout=5.0)
            await _create(nc, {"name": "O", "subjects": ["o.>"], "num_replicas": 3})
            for i in range(10):
                await js.publish(f"o.{i}", f"{i}".encode())
            for seq in (3, 4, 10):
                got = await _until(nc, "$JS.API.STREAM.MSG.DELETE.O", {"seq": seq})
                assert got.get("success") is True, got
            await _create(nc, {"name": "M", "mirror": {"name": "O"}, "num_replicas": 3})
            await _until_messages(nc, "M", 7)
            info = await _info(nc, "M")
            follower = next(r["name"] for r in info["cluster"]["replicas"])
            c.kill(follower)
            subjects = [f"o.{i}" for i in range(10, 10 + TOTAL)]
            await _publish(js, subjects)
            origin = (await _info(nc, "O"))["state"]
            await _caught_up(nc, "M", origin)
            await asyncio.to_thread(c.start, follower)
            info = await _caught_up(nc, "M", origin)
            assert info["state"]["num_deleted"] == 3, info["state"]
            await _same_everywhere(c, "M", info["state"], 3)
            want = await _messages(nc, "O")
            got = await _messages(nc, "M")
            assert {s: m[:2] for s, m in got.items()} == {s: m[:2] for s, m in want.items()}
            # a full stream
            await _create(
                nc,
                {
                    "name": "FULL",
                    "num_replicas": 3,
                    "max_msgs": 5,
                    "discard": "new",
                    "sources": [{"name": "O", "filter_subject": "o.1"}],
                },
            )
            for _ in range(7):
                await js.publish("o.1", b"again")
            await _until_messages(nc, "FULL", 5)
            for _ in range(100):
                src = (await _info(nc, "FULL"))["sources"][0]
                if "error" in src:
                    break
                await asyncio.sleep(0.1)
            assert src["error"]["description"] == "maximum messages exceeded", src
            got = await _until(nc, "$JS.API.STREAM.PURGE.FULL")
            assert got.get("purged") == 5, got
            await _until_messages(nc, "FULL", 3, within=60)
            await asyncio.sleep(1.0)
            st = (await _info(nc, "FULL"))["state"]
            assert (st["messages"], st["first_seq"], st["last_seq"]) == (3, 6, 8), st
            copied = [
                int(h["Nats-Stream-Source"].split(" ")[1])
                for _s, _d, h in (await _messages(nc, "FULL")).values()
            ]
            o_now = await _messages(nc, "O")
            ones = [s for s, m in o_now.items() if m[0] == "o.1"]
            assert copied == ones[5:], (copied, ones)
            await _same_everywhere(c, "FULL", st, 3)
    finally:
        c.stop()


async def test_external_mirror_and_source_through_a_domain_prefix(tmp_path: Path) -> None:
    """A mirror and a source whose origin is named by an ``external`` API prefix (the cluster's
    own JetStream domain, ``$JS.hub.API``) copy through it, with deliveries under the prefix
    given; the source's copies name the prefix's hash in their ``Nats-Stream-Source``."""
    conf = tmp_path / "domain.conf"
    conf.write_text("jetstream { domain: hub }\n")
    c = JsCluster(tmp_path, extra=("-c", str(conf)))
    try:
        c.start()
        async with _connect(c.nodes["n2"].url) as nc:
            js = nc.jetstream(timeout=5.0)
            await _create(nc, {"name": "O", "subjects": ["o.>"], "num_replicas": 3})
            for i in range(20):
                await js.publish(f"o.{i % 3}", f"{i}".encode())
            external = {"api": "$JS.hub.API", "deliver": "hub.deliver"}
            await _create(
                nc, {"name": "XM", "num_replicas": 3, "mirror": {"name": "O", "external": external}}
            )
            await _create(
                nc, {"name": "XS", "num_replicas": 3, "sources": [{"name": "O", "external": external}]}
            )
            await _until_messages(nc, "XM", 20)
            await _until_messages(nc, "XS", 20)
            await _upset(c, nc, "XS")
            await _publish(js, [f"o.{i % 3}" for i in range(20, 30)])
            # a consumer create lost with a killed server is asked again after the origin's
            # RESPONSE_WAIT (30 s, as a single server's mirror waits): more than 30 s here
            await _until_messages(nc, "XM", 30, within=75)
            await _until_messages(nc, "XS", 30, within=75)
            await asyncio.sleep(1.0)
            info = await _info(nc, "XS")
            assert info["state"]["messages"] == 30, info["state"]
            assert info["sources"][0]["external"] == external, info["sources"]
            got = await _messages(nc, "XS")
            origins = {h["Nats-Stream-Source"].split(" ")[0] for _s, _d, h in got.values()}
            assert origins == {"O:" + api_hash("$JS.hub.API")}, origins
            await _same_everywhere(c, "XM", (await _info(nc, "XM"))["state"], 3)
    finally:
        c.stop()
