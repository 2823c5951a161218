"""Operations on clustered JetStream, on three jetpy server processes and, for the replies, on
three nats-server 2.15.1 processes given the same requests: stream and meta leader stepdowns
(the new leader elected among the others, nats-server's refusals) and the ``cluster`` block of
a stream's info."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from cluster_support import NEWEST, Member, start_member
from conftest import free_port

from .jsapi import connect, meta_ready
from .jsapi import req as _req
from .jsapi import until as _until
from .jscluster import ACCOUNTS, JsCluster

pytestmark = pytest.mark.timeout(120)

STREAM_STEPDOWN = "$JS.API.STREAM.LEADER.STEPDOWN.{}"
HEALTH_QUERIES = ("", "?js-server-only=true", "?js-enabled-only=true")
META_STEPDOWN = "$JS.API.META.LEADER.STEPDOWN"


def _conf(tmp: Path) -> Path:
    conf = tmp / "accounts.conf"
    conf.write_text(ACCOUNTS)
    return conf


def _tagged_confs(tmp: Path) -> str:
    """A config per server n1..n3: the accounts, and the tags az:<i> and ssd (the path, with
    "{name}" for the server's name)."""
    for i in (1, 2, 3):
        (tmp / f"n{i}.conf").write_text(f'{ACCOUNTS}\nserver_tags: ["az:{i}", "ssd"]\n')
    return str(tmp / "{name}.conf")


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("js-ops")


@pytest.fixture(scope="module")
def jetpy_cluster(module_tmp: Path) -> Iterator[JsCluster]:
    root = module_tmp / "jetpy"
    root.mkdir()
    c = JsCluster(root, extra=("-c", _tagged_confs(root)))
    try:
        c.start()
        asyncio.run(_meta_ready(c.urls))
        yield c
    finally:
        c.stop()


@dataclass
class Ref:
    """The reference cluster: its members, and each one's monitoring port."""

    members: list[Member]
    http_ports: list[int]


@pytest.fixture(scope="module")
def reference_cluster(module_tmp: Path) -> Iterator[Ref]:
    """Three nats-server 2.15.1 with JetStream, each its own store, routed to each other."""
    root = module_tmp / "ref"
    root.mkdir()
    conf = _tagged_confs(root)
    ports = [free_port() for _ in range(3)]
    routes = [f"nats-route://127.0.0.1:{p}" for p in ports]
    http_ports = [free_port() for _ in range(3)]
    members: list[Member] = []
    try:
        for i, port in enumerate(ports):
            name = f"n{i + 1}"
            extra = ("-c", conf.format(name=name), "-js", "-sd", str(root / name), "-m", str(http_ports[i]))
            members.append(start_member(root, NEWEST, name, routes, *extra, cluster_port=port))
        asyncio.run(_meta_ready([m.url for m in members]))
        yield Ref(members, http_ports)
    finally:
        for m in members:
            m.kill()


def _connect(url: str, user: str = "app") -> contextlib.AbstractAsyncContextManager[Client]:
    return connect(url, user)


async def _meta_ready(urls: list[str]) -> None:
    """Every server answers the API (its meta group has a leader): whichever test runs first."""
    await meta_ready(urls, user="app")


async def _leader(nc: Client, stream: str) -> str:
    info = await _until(nc, f"$JS.API.STREAM.INFO.{stream}")
    leader: str = info["cluster"]["leader"]
    return leader


def _shape(reply: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between the two servers: type, success, the error (an invalid JSON's
    without Go's decoder's words)."""
    got = {k: reply.get(k) for k in ("type", "success", "error")}
    err = got["error"]
    if err is not None and err["err_code"] == 10025:
        got["error"] = {**err, "description": "invalid JSON"}
    return got


def _unnamed(reply: dict[str, Any], name: str) -> dict[str, Any]:
    """The reply with a server's name in its error replaced (the two clusters pick different
    leaders)."""
    err = reply.get("error")
    if err is None:
        return reply
    return {**reply, "error": {**err, "description": err["description"].replace(f'"{name}"', '"<leader>"')}}


def _healthz(http_port: int, query: str = "") -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz{query}", timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def _jsz(http_port: int, query: str = "") -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/jsz{query}", timeout=5) as r:
        doc: dict[str, Any] = json.load(r)
    return doc


async def _meta_leader(http_port: int, other_than: str = "") -> str:
    """The meta leader /jsz names (once it is not ``other_than``)."""
    for _ in range(100):
        leader: str = (await asyncio.to_thread(_jsz, http_port)).get("meta_cluster", {}).get("leader", "")
        if leader and leader != other_than:
            return leader
        await asyncio.sleep(0.1)
    raise AssertionError("no new meta leader")


async def _stepdown_replies(url: str, http_port: int) -> dict[str, Any]:
    """The same requests to a cluster; the replies (and what followed) keyed by what was asked."""
    out: dict[str, Any] = {}
    async with _connect(url) as nc:
        created = await _until(
            nc, "$JS.API.STREAM.CREATE.OPS", {"name": "OPS", "subjects": ["ops.>"], "num_replicas": 3}
        )
        assert created.get("did_create") is True, created
        await _until(
            nc, "$JS.API.STREAM.CREATE.ONE", {"name": "ONE", "subjects": ["one.>"], "num_replicas": 1}
        )
        leader = await _leader(nc, "OPS")
        out["not found"] = await _req(nc, STREAM_STEPDOWN.format("NOPE"))
        out["r1"] = await _req(nc, STREAM_STEPDOWN.format("ONE"), "{bad")
        out["bad json"] = await _req(nc, STREAM_STEPDOWN.format("OPS"), "{bad")
        out["array"] = await _req(nc, STREAM_STEPDOWN.format("OPS"), "[1]")
        out["preferred unknown"] = await _req(
            nc, STREAM_STEPDOWN.format("OPS"), {"placement": {"preferred": "nX"}}
        )
        out["preferred leader"] = _unnamed(
            await _req(nc, STREAM_STEPDOWN.format("OPS"), {"placement": {"preferred": leader}}), leader
        )
        out["other cluster"] = await _req(nc, STREAM_STEPDOWN.format("OPS"), {"placement": {"cluster": "X"}})
        out["tags"] = await _req(nc, STREAM_STEPDOWN.format("OPS"), {"placement": {"tags": ["nope"]}})
        elected = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.OPS")
        await nc.flush()
        out["stepdown"] = await _req(nc, STREAM_STEPDOWN.format("OPS"))
        await asyncio.sleep(0.5)
        after = await _leader(nc, "OPS")
        out["moved"] = after != leader
        adv = json.loads((await elected.next_msg(timeout=5)).data)
        out["elected advisory"] = (sorted(adv), adv["type"], adv["stream"], adv["leader"] == after)
        out["elected advisory replicas"] = sorted(r["name"] for r in adv["replicas"]) == ["n1", "n2", "n3"]
        await elected.unsubscribe()
        info = await _req(nc, "$JS.API.STREAM.INFO.OPS")
        other = info["cluster"]["replicas"][0]["name"]
        out["preferred"] = await _req(nc, STREAM_STEPDOWN.format("OPS"), {"placement": {"preferred": other}})
        await asyncio.sleep(0.5)
        out["preferred took it"] = await _leader(nc, "OPS") == other
        target = next(n for n in ("n1", "n2", "n3") if n != other)
        tagged = {"placement": {"tags": [f"AZ:{target[1]}"]}}
        out["tags stepdown"] = await _req(nc, STREAM_STEPDOWN.format("OPS"), tagged)
        await asyncio.sleep(0.5)
        out["tagged took it"] = await _leader(nc, "OPS") == target
        info = await _req(nc, "$JS.API.STREAM.INFO.OPS")
        out["cluster keys"] = sorted(info["cluster"])
        out["replica keys"] = sorted({k for r in info["cluster"]["replicas"] for k in r} - {"lag"})
        one = await _req(nc, "$JS.API.STREAM.INFO.ONE")
        out["r1 cluster keys"] = sorted(one["cluster"])
        listed = await _req(nc, "$JS.API.STREAM.LIST")
        out["list cluster keys"] = sorted(sorted(s["cluster"]) for s in listed["streams"])
        jsz = await asyncio.to_thread(_jsz, http_port, "?streams=1&raft=1")
        detail = {d["name"]: d for d in jsz["account_details"][0]["stream_detail"]}
        out["jsz raft group"] = detail["OPS"]["stream_raft_group"] == info["cluster"]["raft_group"]
        out["jsz cluster keys"] = sorted(set(detail["OPS"]["cluster"]) - {"leader_since"})
        out["healthz"] = await asyncio.to_thread(_healthz, http_port)
        meta = jsz["meta_cluster"]
        out["meta_cluster"] = {k: meta[k] for k in ("cluster_size", "quorum_needed")}
        out["meta_cluster named"] = meta["name"] == info["cluster"]["name"]
        out["meta_cluster others"] = sorted(r["name"] for r in meta["replicas"])
        out["meta_cluster peer"] = len(meta["peer"])
        out["meta_cluster keys"] = sorted(meta)
        out["meta_cluster snapshot"] = {k: type(v).__name__ for k, v in meta["snapshot"].items()}
        out["meta_cluster pending"] = (meta["pending"], meta["pending_requests"], meta["pending_infos"])
    async with _connect(url, "sys") as sys_nc:
        out["meta bad json"] = await _req(sys_nc, META_STEPDOWN, "{bad")
        out["meta unknown"] = await _req(sys_nc, META_STEPDOWN, {"placement": {"preferred": "nX"}})
        out["meta other cluster"] = await _req(sys_nc, META_STEPDOWN, {"placement": {"cluster": "X"}})
        before = await _meta_leader(http_port)
        out["meta stepdown"] = await _req(sys_nc, META_STEPDOWN, "garbage")
        after = await _meta_leader(http_port, before)
        out["meta preferred"] = await _req(sys_nc, META_STEPDOWN, {"placement": {"preferred": before}})
        out["meta preferred took it"] = await _meta_leader(http_port, after) == before
    async with _connect(url) as nc:
        with pytest.raises((TimeoutError, nats.errors.TimeoutError)):
            await _req(nc, META_STEPDOWN, "", wait=1.0)  # the system account's only
    return out


async def test_stepdowns_answer_as_nats_server(jetpy_cluster: JsCluster, reference_cluster: Ref) -> None:
    ours = await _stepdown_replies(jetpy_cluster.urls[0], jetpy_cluster.nodes["n1"].http_port)
    theirs = await _stepdown_replies(reference_cluster.members[0].url, reference_cluster.http_ports[0])
    for key, want in theirs.items():
        got = ours[key]
        if isinstance(want, dict) and "type" in want:
            assert _shape(got) == _shape(want), key
        else:
            assert got == want, key


async def _r1_consumer_replies(url: str) -> dict[str, Any]:
    """An R1 durable on an R1 stream and an ephemeral on an R3 stream (R1 consumers, which
    nats-server runs without a Raft group): their create and info replies' ``cluster`` blocks,
    a step-down's refusal, and the state an ack leaves."""
    out: dict[str, Any] = {}
    async with _connect(url) as nc:
        created = await _until(nc, "$JS.API.STREAM.CREATE.R1C", {"name": "R1C", "subjects": ["r1c.>"]})
        home = created["cluster"]["leader"]
        js = nc.jetstream(timeout=5)
        for i in range(3):
            await js.publish(f"r1c.{i}", b"x")
        cfg = {"durable_name": "D", "ack_policy": "explicit"}
        made = await _until(nc, "$JS.API.CONSUMER.CREATE.R1C.D", {"stream_name": "R1C", "config": cfg})
        out["create cluster"] = made["cluster"] == {"name": created["cluster"]["name"], "leader": home}
        out["create replicas"] = made["config"].get("num_replicas", 0)
        sub = await js.pull_subscribe_bind("D", "R1C")
        msgs: list[Any] = []
        while len(msgs) < 3:  # (a fetch under load may hand out fewer than asked)
            msgs += await sub.fetch(3 - len(msgs), timeout=5)
        await msgs[0].ack_sync(timeout=5)
        await sub.unsubscribe()
        info = await _req(nc, "$JS.API.CONSUMER.INFO.R1C.D")
        out["info cluster"] = sorted(info["cluster"])
        out["info acks"] = (info["ack_floor"]["stream_seq"], info["num_ack_pending"], info["num_pending"])
        out["stepdown"] = _shape(await _req(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.R1C.D"))
        await _until(
            nc, "$JS.API.STREAM.CREATE.R3C", {"name": "R3C", "subjects": ["r3c.>"], "num_replicas": 3}
        )
        eph = await _until(
            nc, "$JS.API.CONSUMER.CREATE.R3C", {"stream_name": "R3C", "config": {"ack_policy": "explicit"}}
        )
        out["ephemeral cluster"] = sorted(eph["cluster"])
        out["ephemeral replicas"] = eph["config"].get("num_replicas", 0)
        name = eph["name"]
        out["ephemeral stepdown"] = _shape(await _req(nc, f"$JS.API.CONSUMER.LEADER.STEPDOWN.R3C.{name}"))
    return out


async def test_r1_consumers_answer_as_nats_server(jetpy_cluster: JsCluster, reference_cluster: Ref) -> None:
    ours = await _r1_consumer_replies(jetpy_cluster.urls[0])
    theirs = await _r1_consumer_replies(reference_cluster.members[0].url)
    assert theirs["create cluster"] is True and theirs["info cluster"] == ["leader", "name"]
    assert ours == theirs


async def _placement_replies(url: str, cluster: str) -> dict[str, Any]:
    """Streams created with a placement: where they went, or the refusal."""
    out: dict[str, Any] = {}
    cases: dict[str, dict[str, Any]] = {
        "az2": {"placement": {"tags": ["az:2"]}},
        "az2 upper": {"placement": {"tags": ["AZ:2"]}},
        "az2 r2": {"num_replicas": 2, "placement": {"tags": ["az:2"]}},
        "az2 ssd r2": {"num_replicas": 2, "placement": {"tags": ["az:2", "ssd"]}},
        "ssd r3": {"num_replicas": 3, "placement": {"tags": ["ssd"]}},
        "unknown tag": {"placement": {"tags": ["nope"]}},
        "other cluster": {"placement": {"cluster": "X"}},
        "own cluster": {"placement": {"cluster": cluster}},
        "r4": {"num_replicas": 4},
        "r6": {"num_replicas": 6},
    }
    async with _connect(url) as nc:
        for i, (case, extra) in enumerate(cases.items()):
            name = f"P{i}"
            got = await _until(
                nc, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [f"p{i}"], **extra}
            )
            if "error" in got:
                out[case] = _shape(got)
                continue
            where = got["cluster"]
            out[case] = sorted([where["leader"], *(r["name"] for r in where.get("replicas", []))])
            if case == "own cluster":
                out[case] = len(out[case])
            await _req(nc, f"$JS.API.STREAM.DELETE.{name}")
        upd = {"name": "OPS", "subjects": ["ops.>"], "num_replicas": 3, "placement": {"tags": ["ssd"]}}
        out["placement changed"] = (
            (await _req(nc, "$JS.API.STREAM.UPDATE.OPS", upd)).get("error", {}).get("err_code")
        )  # every server holding it has the tag: it stays
        # a placement no server (or too few) satisfies, or changed with the replicas: refused
        # (each its stream's first move)
        refused = {
            "placement unmatched": (1, ["nope"], 1),
            "placement too few": (3, ["az:1"], 3),
            "placement and replicas": (1, ["ssd"], 3),
        }
        for case, (r, tags, r2) in refused.items():
            mv: dict[str, Any] = {"name": f"MV{r}", "subjects": [f"mv{r}"], "num_replicas": r}
            await _until(nc, f"$JS.API.STREAM.CREATE.MV{r}", mv)
            mv |= {"placement": {"tags": tags}, "num_replicas": r2}
            out[case] = _shape(await _req(nc, f"$JS.API.STREAM.UPDATE.MV{r}", mv))
            await _req(nc, f"$JS.API.STREAM.DELETE.MV{r}")
    return out


async def test_placement_by_tags_and_cluster_as_nats_server(
    jetpy_cluster: JsCluster, reference_cluster: Ref
) -> None:
    ours = await _placement_replies(jetpy_cluster.urls[0], "JSC")
    theirs = await _placement_replies(reference_cluster.members[0].url, "C1")
    assert theirs["az2"] == ["n2"] and theirs["r4"]["error"]["err_code"] == 10005
    assert theirs["placement changed"] is None
    assert theirs["placement unmatched"]["error"]["err_code"] == 10005
    assert ours == theirs


async def _info_request_replies(url: str) -> dict[str, Any]:
    """``STREAM.INFO`` with a body (``subjects_filter``, its ``offset``, ``deleted_details``) on
    an R3 and an R1 stream: the state and paging each answer carries."""
    out: dict[str, Any] = {}
    async with _connect(url) as nc:
        for name, replicas in (("INFQ3", 3), ("INFQ1", 1)):
            cfg = {"name": name, "subjects": [f"{name}.>"], "num_replicas": replicas}
            await _until(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
            for i, sub in enumerate("abacb"):
                await _until(nc, f"{name}.{sub}", str(i))  # a publish's PubAck, once the group leads
            await _req(nc, f"$JS.API.STREAM.MSG.DELETE.{name}", {"seq": 2})
            for case, body in {
                "plain": None,
                "filter": {"subjects_filter": f"{name}.>"},
                "one subject": {"subjects_filter": f"{name}.a"},
                "offset": {"subjects_filter": ">", "offset": 2},
                "deleted": {"deleted_details": True},
                "bad json": "{bad",
            }.items():
                got = await _req(nc, f"$JS.API.STREAM.INFO.{name}", body)
                state = got.get("state", {})
                paging = {k: got.get(k) for k in ("total", "offset", "limit")}
                out[f"{name} {case}"] = (state.get("subjects"), state.get("deleted"), paging, _shape(got))
            await _req(nc, f"$JS.API.STREAM.DELETE.{name}")
    return out


async def test_stream_info_request_fields_as_nats_server(
    jetpy_cluster: JsCluster, reference_cluster: Ref
) -> None:
    ours = await _info_request_replies(jetpy_cluster.urls[0])
    theirs = await _info_request_replies(reference_cluster.members[0].url)
    assert theirs["INFQ3 one subject"][0] == {"INFQ3.a": 2}
    assert theirs["INFQ3 deleted"][1] == [2]
    assert ours == theirs


PEER_REMOVE = "$JS.API.STREAM.PEER.REMOVE.{}"


async def _peer_remove_replies(url: str) -> dict[str, Any]:
    """``STREAM.PEER.REMOVE``'s refusals, the same on both clusters."""
    out: dict[str, Any] = {}
    async with _connect(url) as nc:
        info = await _until(nc, "$JS.API.STREAM.INFO.OPS")
        member = info["cluster"]["leader"]
        out["not found"] = await _req(nc, PEER_REMOVE.format("NOPE"), {"peer": member})
        out["empty"] = await _req(nc, PEER_REMOVE.format("OPS"))
        out["bad json"] = await _req(nc, PEER_REMOVE.format("OPS"), "{bad")
        out["not a member"] = await _req(nc, PEER_REMOVE.format("OPS"), {"peer": "nX"})
        out["no replacement"] = await _req(nc, PEER_REMOVE.format("OPS"), {"peer": member})  # R3 on 3
    return out


async def test_peer_remove_refusals_as_nats_server(jetpy_cluster: JsCluster, reference_cluster: Ref) -> None:
    ours = await _peer_remove_replies(jetpy_cluster.urls[0])
    theirs = await _peer_remove_replies(reference_cluster.members[0].url)
    assert theirs["no replacement"]["error"]["err_code"] == 10075
    assert {k: _shape(v) for k, v in ours.items()} == {k: _shape(v) for k, v in theirs.items()}


def _holders(cluster: JsCluster, stream: str, messages: int) -> list[str]:
    """The servers whose own store holds the stream with that many messages."""
    return sorted(
        n.name for n in cluster.nodes.values() if (n.stream_state(stream) or {}).get("messages") == messages
    )


def _stream_dir(cluster: JsCluster, name: str, stream: str) -> Path:
    return cluster.nodes[name].store / "jetstream" / "$G" / "streams" / stream


async def test_replicas_scaled_up_and_down_and_a_peer_replaced(jetpy_cluster: JsCluster) -> None:
    """1 -> 3 -> 1 replicas by update: the new replicas join and catch up, the removed ones
    leave and their files go; then an R2 stream's peer removed: a replacement is placed on the
    third server and catches up, the removed one's files go."""
    c = jetpy_cluster
    async with _connect(c.urls[0]) as nc:
        js = nc.jetstream(timeout=5)
        await _until(nc, "$JS.API.STREAM.CREATE.SCALE", {"name": "SCALE", "subjects": ["scale.>"]})
        for i in range(50):
            await js.publish(f"scale.{i}", b"x%d" % i)
        [home] = await c.wait_for("one holder", lambda: _holders(c, "SCALE", 50))
        up = await _req(
            nc, "$JS.API.STREAM.UPDATE.SCALE", {"name": "SCALE", "subjects": ["scale.>"], "num_replicas": 3}
        )
        assert up["config"]["num_replicas"] == 3, up
        await c.wait_for("three holders", lambda: _holders(c, "SCALE", 50) == ["n1", "n2", "n3"])
        for i in range(50, 60):  # every replica takes the next ones
            await js.publish(f"scale.{i}", b"x%d" % i)
        await c.wait_for("three holders of 60", lambda: _holders(c, "SCALE", 60) == ["n1", "n2", "n3"])
        info = await _until(nc, "$JS.API.STREAM.INFO.SCALE")
        assert info["cluster"]["leader"] == home
        assert sorted(r["name"] for r in info["cluster"]["replicas"]) == sorted({"n1", "n2", "n3"} - {home})

        down = await _req(
            nc, "$JS.API.STREAM.UPDATE.SCALE", {"name": "SCALE", "subjects": ["scale.>"], "num_replicas": 1}
        )
        assert down["config"]["num_replicas"] == 1, down
        leader = (await _until(nc, "$JS.API.STREAM.INFO.SCALE"))["cluster"]["leader"]
        gone = sorted({"n1", "n2", "n3"} - {leader})
        await c.wait_for(
            "the others' files deleted", lambda: not any(_stream_dir(c, n, "SCALE").exists() for n in gone)
        )
        assert _holders(c, "SCALE", 60) == [leader]
        ack = await js.publish("scale.last", b"last")
        assert ack.seq == 61

        await _until(
            nc, "$JS.API.STREAM.CREATE.TWO", {"name": "TWO", "subjects": ["two.>"], "num_replicas": 2}
        )
        for i in range(20):
            await js.publish(f"two.{i}", b"y")
        two = await c.wait_for(
            "two holders", lambda: _holders(c, "TWO", 20) if len(_holders(c, "TWO", 20)) == 2 else None
        )
        [third] = sorted({"n1", "n2", "n3"} - set(two))
        removed = two[0]
        got = await _req(nc, PEER_REMOVE.format("TWO"), {"peer": removed})
        assert got == {"type": "io.nats.jetstream.api.v1.stream_remove_peer_response", "success": True}
        want = sorted({*two, third} - {removed})
        await c.wait_for("the replacement caught up", lambda: _holders(c, "TWO", 20) == want)
        await c.wait_for(
            "the removed one's files deleted", lambda: not _stream_dir(c, removed, "TWO").exists()
        )
        ack = await js.publish("two.last", b"y")
        assert ack.seq == 21
        await c.wait_for("both hold the next", lambda: _holders(c, "TWO", 21) == want)


SERVER_REMOVE = "$JS.API.SERVER.REMOVE"


async def _consumer_servers(nc: Client, stream: str, name: str, want: list[str]) -> list[str]:
    """The servers the consumer's info's ``cluster`` block names, once they are ``want`` (or
    after 20 s)."""
    got: list[str] = []
    for _ in range(100):
        cl = (await _until(nc, f"$JS.API.CONSUMER.INFO.{stream}.{name}")).get("cluster", {})
        got = sorted({cl.get("leader", ""), *(r["name"] for r in cl.get("replicas", []))} - {""})
        if got == want:
            break
        await asyncio.sleep(0.2)
    return got


async def test_server_remove_refusals_as_nats_server(
    jetpy_cluster: JsCluster, reference_cluster: Ref
) -> None:
    replies = []
    for url in (jetpy_cluster.urls[0], reference_cluster.members[0].url):
        async with _connect(url, "sys") as nc:
            replies.append(
                {
                    "empty": _shape(await _req(nc, SERVER_REMOVE)),
                    "bad json": _shape(await _req(nc, SERVER_REMOVE, "{bad")),
                    "unknown": _shape(await _req(nc, SERVER_REMOVE, {"peer": "nX"})),
                    "no peer": _shape(await _req(nc, SERVER_REMOVE, {})),
                }
            )
    assert replies[0] == replies[1]
    assert replies[1]["unknown"]["error"]["err_code"] == 10044


async def test_server_removed_and_its_streams_placed_elsewhere(tmp_path: Path) -> None:
    """A server taken out of the cluster's JetStream: its R2 stream is placed on the server that
    did not hold it and catches up, its R3 stream keeps its two other replicas, its files go,
    and the meta group is the two others; the streams' durables follow them."""
    c = JsCluster(tmp_path, extra=("-c", str(_conf(tmp_path))))
    try:
        c.start()
        async with _connect(c.urls[0]) as nc:
            js = nc.jetstream(timeout=5)
            await _until(
                nc, "$JS.API.STREAM.CREATE.R3", {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3}
            )
            await _until(
                nc, "$JS.API.STREAM.CREATE.R2", {"name": "R2", "subjects": ["r2.>"], "num_replicas": 2}
            )
            for i in range(30):
                await js.publish(f"r3.{i}", b"x")
                await js.publish(f"r2.{i}", b"y")
            for stream in ("R2", "R3"):
                await _until(
                    nc,
                    f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.D",
                    {"stream_name": stream, "config": {"durable_name": "D", "ack_policy": "explicit"}},
                )
            two = await c.wait_for(
                "R2's holders", lambda: h if len(h := _holders(c, "R2", 30)) == 2 else None
            )
            meta = await _meta_leader(c.nodes["n1"].http_port)
            gone = next(n for n in two if n != meta)
            stays = sorted(set(c.nodes) - {gone})
            async with _connect(c.nodes[meta].url, "sys") as sys_nc:
                got = await _req(sys_nc, SERVER_REMOVE, {"peer": gone})
            assert got == {"type": "io.nats.jetstream.api.v1.meta_server_remove_response", "success": True}
            await c.wait_for("R2 on the two others", lambda: _holders(c, "R2", 30) == stays)
            await c.wait_for(
                "its files deleted",
                lambda: not _stream_dir(c, gone, "R2").exists() and not _stream_dir(c, gone, "R3").exists(),
            )
            assert _holders(c, "R3", 30) == stays
            for stream in ("R2", "R3"):  # the durables on their streams' servers
                assert await _consumer_servers(nc, stream, "D", stays) == stays
            doc = await asyncio.to_thread(_jsz, c.nodes[meta].http_port)
            assert doc["meta_cluster"]["cluster_size"] == 2
            assert [r["name"] for r in doc["meta_cluster"]["replicas"]] == [n for n in stays if n != meta]
            for stream in ("R2", "R3"):
                ack = await js.publish(f"{stream.lower()}.last", b"z")
                assert ack.seq == 31
            created = await _until(
                nc, "$JS.API.STREAM.CREATE.NEW", {"name": "NEW", "subjects": ["new"], "num_replicas": 2}
            )
            assert (
                sorted([created["cluster"]["leader"], *(r["name"] for r in created["cluster"]["replicas"])])
                == stays
            )
    finally:
        c.stop()


async def test_healthz_while_a_stream_is_not_current(tmp_path: Path) -> None:
    """An R2 stream's other server down: the one left cannot have its group current (no
    quorum, no leader) and /healthz says so by the stream's name; back to ok once the other
    server is back and caught up (it fetched what it missed)."""
    c = JsCluster(tmp_path)
    try:
        c.start()
        async with _connect(c.urls[0]) as nc:
            js = nc.jetstream(timeout=5)
            await _until(
                nc, "$JS.API.STREAM.CREATE.HZ", {"name": "HZ", "subjects": ["hz"], "num_replicas": 2}
            )
            for _ in range(10):
                await js.publish("hz", b"x")
            a, b = await c.wait_for(
                "two holders", lambda: h if len(h := _holders(c, "HZ", 10)) == 2 else None
            )
        port = c.nodes[a].http_port
        assert await asyncio.to_thread(_healthz, port) == (200, {"status": "ok"})
        c.kill(b)
        want = (503, {"status": "unavailable", "error": "JetStream stream '$G > HZ' is not current"})
        await c.wait_for("a not current", lambda: _healthz(port) == want)
        assert _healthz(port, "?js-server-only=true") == (200, {"status": "ok"})
        c.start(b)
        await c.wait_for("a healthy again", lambda: _healthz(port) == (200, {"status": "ok"}))
        await c.wait_for("b healthy", lambda: _healthz(c.nodes[b].http_port) == (200, {"status": "ok"}))
    finally:
        c.stop()


LL_NEW = {"durable_name": "NEW", "ack_policy": "explicit"}


async def _leaderless_replies(url: str) -> dict[str, Any]:
    """The replies of a server whose meta group has lost its leader, once they say so: the
    error, or whether the info of stream OPS, which it leads, was given."""
    out: dict[str, Any] = {}
    asks: list[tuple[str, str | dict[str, Any]]] = [
        ("$JS.API.INFO", ""),
        ("$JS.API.STREAM.NAMES", ""),
        ("$JS.API.CONSUMER.NAMES.OPS", ""),
        ("$JS.API.CONSUMER.LIST.OPS", ""),
        ("$JS.API.CONSUMER.DURABLE.CREATE.OPS.NEW", {"stream_name": "OPS", "config": LL_NEW}),
        ("$JS.API.CONSUMER.DELETE.OPS.NOPE", ""),
        ("$JS.API.STREAM.INFO.OPS", ""),
    ]
    async with _connect(url) as nc:
        for subject, body in asks:
            for _ in range(150):
                with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
                    got = await _req(nc, subject, body, wait=0.5)
                    if "error" in got:
                        out[subject] = got
                        break
                    if subject.endswith("OPS"):  # its leader's answer
                        out[subject] = got["config"]["name"]
                        break
                await asyncio.sleep(0.1)
    return out


async def _kill_all_but_a_follower(
    http_port: int, urls: dict[str, str], kill: Callable[[str], None], wait_lost: float
) -> tuple[str, Any]:
    """Make a server that does not lead the meta group the leader of stream OPS, then kill
    every other one: the survivor's name, and the QUORUM_LOST advisory it sends (or None)."""
    leader = await _meta_leader(http_port)
    survivor = next(n for n in urls if n != leader)
    async with _connect(urls[survivor]) as nc:
        if await _leader(nc, "OPS") != survivor:
            got = await _req(nc, STREAM_STEPDOWN.format("OPS"), {"placement": {"preferred": survivor}})
            assert got.get("success"), got
        lost = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.OPS")
        await nc.flush()
        for name in urls:
            if name != survivor:
                kill(name)
        try:
            adv = json.loads((await lost.next_msg(timeout=wait_lost)).data)
        except (TimeoutError, nats.errors.TimeoutError):
            adv = None
    return survivor, adv


async def test_a_server_without_meta_leader_answers_10008(
    jetpy_cluster: JsCluster, reference_cluster: Ref
) -> None:
    """The meta leader and another server gone (last in this module: it takes the clusters
    down): the follower left answers every request 10008 rather than leaving the client to
    time out, but a stream's info if it leads the stream (its group still has its leader)."""
    nodes = jetpy_cluster.nodes
    survivor, lost = await _kill_all_but_a_follower(
        nodes["n1"].http_port, {n.name: n.url for n in nodes.values()}, jetpy_cluster.kill, 5.0
    )
    # the stream's leader alone steps down after an election timeout without a quorum, and says so
    assert lost is not None and lost["type"] == "io.nats.jetstream.advisory.v1.stream_quorum_lost"
    assert lost["stream"] == "OPS" and sorted(r["name"] for r in lost["replicas"]) == sorted(
        set(nodes) - {survivor}
    )
    ours = await _leaderless_replies(nodes[survivor].url)
    ours_health = [await asyncio.to_thread(_healthz, nodes[survivor].http_port, q) for q in HEALTH_QUERIES]
    members = {m.name: m for m in reference_cluster.members}
    ref_survivor, _ = await _kill_all_but_a_follower(
        reference_cluster.http_ports[0],
        {m.name: m.url for m in members.values()},
        lambda name: members[name].kill(),
        0.1,  # nats-server's leader waits 10 s before it gives up: not waited for here
    )
    theirs = await _leaderless_replies(members[ref_survivor].url)
    port = reference_cluster.http_ports[reference_cluster.members.index(members[ref_survivor])]
    theirs_health = [await asyncio.to_thread(_healthz, port, q) for q in HEALTH_QUERIES]
    assert theirs_health[0] == (
        503,
        {"status": "unavailable", "error": "JetStream has not established contact with a meta leader"},
    )
    assert ours_health == theirs_health
    assert theirs["$JS.API.INFO"]["error"]["err_code"] == 10008
    assert ours["$JS.API.INFO"] == theirs["$JS.API.INFO"]
    assert ours["$JS.API.STREAM.NAMES"] == theirs["$JS.API.STREAM.NAMES"]
    for subject in (
        "$JS.API.CONSUMER.NAMES.OPS",
        "$JS.API.CONSUMER.LIST.OPS",
        "$JS.API.CONSUMER.DURABLE.CREATE.OPS.NEW",
        "$JS.API.CONSUMER.DELETE.OPS.NOPE",
    ):
        assert theirs[subject]["error"]["err_code"] == 10008, subject
        assert ours[subject] == theirs[subject], subject
    # the stream's info: given by its leader while it still leads (how long it goes on leading
    # without a quorum differs: nats-server's 10 s, jetpy's election timeout), else 10008
    for reply in (ours, theirs):
        ops = reply["$JS.API.STREAM.INFO.OPS"]
        assert ops == "OPS" or ops["error"]["err_code"] == 10008
