"""Clustered JetStream for accounts other than the global one, on three jetpy server processes
(a config file with accounts A and B with JetStream, L with JetStream limits): each account's
streams and consumers are its own (the same name in two accounts, nothing of one seen from the
other), replicated as the global account's are (a stream's leader killed and restarted loses
nothing), and the account's limits refused as three nats-server 2.15.1 refuse them (at
publish, every replica counted: each stream's bytes times its replicas, as ``$JS.API.INFO``
reports them)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.errors import NoStreamResponseError

from .jsapi import connect as _connect
from .jsapi import publish_when_ready
from .jsapi import req as _req
from .jsapi import until as _until
from .jscluster import JsCluster, JsNode, reference_cluster

pytestmark = pytest.mark.timeout(180)

SNAPSHOT_ENTRIES = 16  # the groups (the meta group's too) compact their logs this often
DURING = 40  # messages published while a stream's leader is down

CONF = """
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: { jetstream: enabled, users: [{user: a, password: a}] }
  B: { jetstream: enabled, users: [{user: b, password: b}] }
  L: {
    jetstream { max_mem: 1M, max_file: 3M, max_streams: 2, max_consumers: 2 }
    users: [{user: l, password: l}]
  }
  M: { jetstream { max_file: 100K }, users: [{user: m, password: m}] }
  N: { jetstream { max_file: 20K }, users: [{user: n, password: n}] }
  O: { jetstream { max_file: 40K }, users: [{user: o, password: o}] }
  P: { jetstream { max_file: 100K }, users: [{user: p, password: p}] }
}
system_account: SYS
"""


def _conf(root: Path) -> str:
    path = root / "accounts.conf"
    path.write_text(CONF)
    return str(path)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("js-accounts")


@pytest.fixture(scope="module")
def jetpy_cluster(module_tmp: Path) -> Iterator[JsCluster]:
    root = module_tmp / "jetpy"
    root.mkdir()
    c = JsCluster(root, snapshot_entries=SNAPSHOT_ENTRIES, extra=("-c", _conf(root)))
    try:
        c.start()
        asyncio.run(_ready(c.urls))
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def reference_urls(module_tmp: Path) -> Iterator[list[str]]:
    """Three nats-server 2.15.1 with JetStream and the same accounts, routed to each other."""
    root = module_tmp / "ref"
    root.mkdir()
    with reference_cluster(root, "-c", _conf(root)) as members:
        urls = [m.url for m in members]
        asyncio.run(_ready(urls))
        yield urls


async def _ready(urls: list[str]) -> None:
    """Every server answers each account's API (the meta group has a leader)."""
    for url in urls:
        for user in ("a", "b", "l"):
            async with _connect(url, user) as nc:
                got = await _until(nc, "$JS.API.INFO")
                assert "error" not in got, got


def _orders(subjects: list[str], replicas: int = 3) -> dict[str, Any]:
    return {"name": "ORDERS", "subjects": subjects, "num_replicas": replicas, "storage": "file"}


def _replica_state(node: JsNode, account: str, stream: str) -> dict[str, Any] | None:
    """The stream's state in the node's own replica, from its /jsz (the account's)."""
    for acc in node.jsz().get("account_details", []):
        if acc.get("name") != account:
            continue
        for s in acc.get("stream_detail", []):
            if s["name"] == stream:
                state: dict[str, Any] = s["state"]
                return state
    return None


async def _publish(nc: Client, subject: str, n: int, prefix: str) -> None:
    js = nc.jetstream()
    for i in range(n):
        for _ in range(100):
            try:
                await js.publish(subject, f"{prefix}{i}".encode(), headers={"Nats-Msg-Id": f"{prefix}{i}"})
                break
            except (TimeoutError, nats.errors.TimeoutError, NoStreamResponseError):
                await asyncio.sleep(0.1)  # no leader yet: the retry is de-duplicated
        else:
            raise AssertionError(f"{prefix}{i} never acknowledged")


async def test_two_accounts_each_have_their_own_orders(jetpy_cluster: JsCluster) -> None:
    """ORDERS in A and ORDERS in B (the same subjects): R3 each, published and consumed in its
    account, each account's API seeing its own streams only."""
    urls = jetpy_cluster.urls
    async with _connect(urls[0], "a") as na, _connect(urls[1], "b") as nb:
        for nc in (na, nb):
            got = await _until(nc, "$JS.API.STREAM.CREATE.ORDERS", _orders(["orders.>"]))
            assert "error" not in got, got
            assert len(got["cluster"]["replicas"]) == 2
        got = await _until(nb, "$JS.API.STREAM.CREATE.ONLYB", {"name": "ONLYB", "subjects": ["b.only"]})
        assert "error" not in got, got
        await _publish(na, "orders.new", 7, "a")
        await _publish(nb, "orders.new", 3, "b")

        a_info = await _until(na, "$JS.API.STREAM.INFO.ORDERS")
        b_info = await _until(nb, "$JS.API.STREAM.INFO.ORDERS")
        assert a_info["state"]["messages"] == 7 and b_info["state"]["messages"] == 3
        assert a_info["cluster"]["leader"] and b_info["cluster"]["leader"]

        # isolation: A's API knows nothing of B's streams
        names = await _until(na, "$JS.API.STREAM.NAMES")
        assert names["streams"] == ["ORDERS"] and names["total"] == 1
        names = await _until(nb, "$JS.API.STREAM.NAMES")
        assert names["streams"] == ["ONLYB", "ORDERS"]
        missing = await _until(na, "$JS.API.STREAM.INFO.ONLYB")
        assert missing["error"]["err_code"] == 10059
        listed = await _until(na, "$JS.API.STREAM.LIST")
        assert [s["config"]["name"] for s in listed["streams"]] == ["ORDERS"]
        assert listed["streams"][0]["state"]["messages"] == 7
        a_acct = await _until(na, "$JS.API.INFO")
        assert a_acct["streams"] == 1

        # consumers of each account's ORDERS: R3 durables, each delivering its account's messages
        for nc, prefix, count in ((na, "a", 7), (nb, "b", 3)):
            js = nc.jetstream()
            sub = await js.pull_subscribe("orders.>", durable="WORK", stream="ORDERS")
            msgs = await sub.fetch(count, timeout=10)
            assert [m.data.decode() for m in msgs] == [f"{prefix}{i}" for i in range(count)]
            for m in msgs:
                await m.ack_sync()
            info = await _until(nc, "$JS.API.CONSUMER.INFO.ORDERS.WORK")
            assert info["ack_floor"]["stream_seq"] == count and len(info["cluster"]["replicas"]) == 2
        b_consumers = await _until(nb, "$JS.API.CONSUMER.NAMES.ORDERS")
        assert b_consumers["consumers"] == ["WORK"]

        # each server holds each account's replica in the account's own store
        for node in jetpy_cluster.nodes.values():
            assert (node.store / "jetstream" / "A" / "streams" / "ORDERS").is_dir()
            assert (node.store / "jetstream" / "B" / "streams" / "ORDERS").is_dir()
            a_state, b_state = _replica_state(node, "A", "ORDERS"), _replica_state(node, "B", "ORDERS")
            assert a_state is not None and b_state is not None
        await _until(nb, "$JS.API.STREAM.DELETE.ONLYB")
        assert (await _until(na, "$JS.API.STREAM.INFO.ORDERS"))["state"]["messages"] == 7


async def test_an_accounts_stream_leader_killed_and_restarted(jetpy_cluster: JsCluster) -> None:
    """Account A's stream goes on while its leader is down (a new leader, publishes acked, its
    log compacted past what the killed server had), and the restarted server's replica catches
    up from a snapshot and the messages fetched on the account's own catch-up subject; B's
    stream of the same name keeps its own messages on every server."""
    urls = jetpy_cluster.urls
    async with _connect(urls[0], "a") as na, _connect(urls[0], "b") as nb:
        for nc in (na, nb):
            got = await _until(
                nc, "$JS.API.STREAM.CREATE.KILLED", {"name": "KILLED", "subjects": ["k.>"], "num_replicas": 3}
            )
            assert "error" not in got, got
        await _publish(na, "k.x", 5, "before")
        await _publish(nb, "k.x", 2, "b")
        info = await _until(na, "$JS.API.STREAM.INFO.KILLED")
        leader, group = info["cluster"]["leader"], info["cluster"]["raft_group"]
    jetpy_cluster.kill(leader)
    alive = next(n for n in jetpy_cluster.nodes.values() if n.name != leader)
    try:
        async with _connect(alive.url, "a") as na:
            await _publish(na, "k.x", DURING, "during")
            info = await _until(na, "$JS.API.STREAM.INFO.KILLED")
            assert info["state"]["messages"] == 5 + DURING
            assert info["cluster"]["leader"] != leader
            now_leading = jetpy_cluster.nodes[info["cluster"]["leader"]]
            await jetpy_cluster.wait_for(
                "the new leader's log compacted",
                lambda: now_leading.wal_first().get(group, 0) > SNAPSHOT_ENTRIES,
            )
    finally:
        jetpy_cluster.start(leader)
    node = jetpy_cluster.nodes[leader]

    def caught_up() -> bool:
        state = _replica_state(node, "A", "KILLED")
        return state is not None and state["messages"] == 5 + DURING

    await jetpy_cluster.wait_for("the restarted replica to catch up", caught_up, within=30)
    restarted = node.log.read_text(errors="replace").rsplit("==== start\n", 1)[-1]
    assert "stream 'KILLED': fetching messages" in restarted  # behind the leader's snapshot
    for n in jetpy_cluster.nodes.values():
        b_state = _replica_state(n, "B", "KILLED")
        assert b_state is not None and b_state["messages"] == 2
    async with _connect(node.url, "a") as na:
        js = na.jetstream()
        sub = await js.pull_subscribe("k.>", durable="AFTER", stream="KILLED")
        msgs = await sub.fetch(5 + DURING, timeout=10)
        want = [f"before{i}" for i in range(5)] + [f"during{i}" for i in range(DURING)]
        assert [m.data.decode() for m in msgs] == want


# Each step: the request in account L and what it leaves (the stream made, or the refusal).
LIMIT_STEPS: list[tuple[str, dict[str, Any]]] = [
    # max_consumers of a stream above the account's: 10026
    ("L1", {"name": "L1", "subjects": ["l1"], "max_consumers": 5}),
    # max_bytes reserved times the replicas: 3 x 1M fits max_file 3M
    ("L1", {"name": "L1", "subjects": ["l1"], "num_replicas": 3, "max_bytes": 1_000_000}),
    # nothing left of max_file: 10047
    ("L2", {"name": "L2", "subjects": ["l2"], "num_replicas": 1, "max_bytes": 1000}),
    # max_mem 1M: an R3 memory stream of 400k reserves 1.2M: 10028
    ("L2", {"name": "L2", "subjects": ["l2"], "num_replicas": 3, "storage": "memory", "max_bytes": 400_000}),
    ("L2", {"name": "L2", "subjects": ["l2"], "num_replicas": 1, "storage": "memory"}),
    # max_streams 2: 10027
    ("L3", {"name": "L3", "subjects": ["l3"]}),
]


async def _limit_replies(url: str) -> list[Any]:
    """Account L's replies to :data:`LIMIT_STEPS`, then to a third consumer of L2 (its
    max_consumers is the account's 2)."""
    got: list[Any] = []
    async with _connect(url, "l") as nc:
        for name, cfg in LIMIT_STEPS:
            reply = await _until(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
            got.append(reply.get("error") or {"created": reply["config"]["name"]})
        for durable in ("C1", "C2", "C3"):
            reply = await _until(
                nc,
                f"$JS.API.CONSUMER.CREATE.L2.{durable}",
                {"stream_name": "L2", "config": {"durable_name": durable}},
            )
            got.append(reply.get("error") or {"created": reply["name"]})
        acct = await _until(nc, "$JS.API.INFO")
        got.append(
            {k: acct["limits"][k] for k in ("max_memory", "max_storage", "max_streams", "max_consumers")}
        )
    return got


async def test_account_limits_refused_as_nats_server_refuses_them(
    jetpy_cluster: JsCluster, reference_urls: list[str]
) -> None:
    ours = await _limit_replies(jetpy_cluster.urls[2])
    theirs = await _limit_replies(reference_urls[2])
    assert ours == theirs
    codes = [r.get("err_code") for r in ours[: len(LIMIT_STEPS) + 3]]
    assert codes == [10026, None, 10047, 10028, None, 10027, None, None, 10026]


async def _fill(url: str) -> tuple[int, Any, int]:
    """Account M (max_file 100K) publishes 1000-byte messages to an R3 file stream, each once
    acknowledged, until one is refused: how many were stored, the refusal, and the stream's
    bytes then. Then, until the account's storage in ``$JS.API.INFO`` is the stream's bytes
    on each of its three servers (its servers' reports arrived)."""
    async with _connect(url, "m") as nc:
        got = await _until(
            nc, "$JS.API.STREAM.CREATE.FILL", {"name": "FILL", "subjects": ["m.x"], "num_replicas": 3}
        )
        assert "error" not in got, got
        for i in range(100):
            reply = await _req(nc, "m.x", "x" * 1000)
            if "error" in reply:
                stored = (await _until(nc, "$JS.API.STREAM.INFO.FILL"))["state"]["bytes"]
                deadline = asyncio.get_running_loop().time() + 20
                while (acct := await _until(nc, "$JS.API.INFO"))["storage"] != 3 * stored:
                    assert asyncio.get_running_loop().time() < deadline, (acct, stored)
                    await asyncio.sleep(0.2)
                return i, reply, stored
            assert reply["seq"] == i + 1, reply
    raise AssertionError("never refused")


MSG = 1033  # a 1000-byte payload on a 3-byte subject (m.x, o.2, o1a...), as a file store counts it


async def test_account_storage_limit_refuses_publishes_as_nats_server(
    jetpy_cluster: JsCluster, reference_urls: list[str]
) -> None:
    """An account's max_file on a cluster: account M's R3 stream is refused with nats-server
    2.15.1's error (10002) once the next message would take the account past 100K, every
    replica counted: the stream's bytes times 3, the new message times 3. jetpy's leader counts
    its own stream exactly, so the 33rd of these 1033-byte messages is refused (32 x 3 x 1033
    + 3 x 1033 > 100K >= 31 x 3 x 1033 + 3 x 1033), and the account's storage in
    ``$JS.API.INFO`` at the refusal (every replica's bytes) is within its limit."""
    ours = await _fill(jetpy_cluster.urls[1])
    theirs = await _fill(reference_urls[1])
    assert ours[1] == theirs[1]
    assert ours[1]["error"]["err_code"] == 10002
    assert ours[0] == 32 and ours[2] == 32 * MSG
    assert 3 * ours[2] <= 100_000 < 3 * ours[2] + 3 * MSG  # INFO's storage then: 99,168
    # nats-server counts every replica from its servers' usage reports (its own replica at
    # once, the followers' from their servers' next reports), so its count depends on how many
    # reports arrived during the fill: never before jetpy's (every replica counted: its steady
    # state), never past the leader's replica counted alone (93 x 1033 + 3 x 1033 <= 100K:
    # the 95th refused)
    assert 32 <= theirs[0] <= 94, theirs
    assert theirs[2] == theirs[0] * MSG


async def _settled(url: str) -> list[Any]:
    """Account P (max_file 100K): 40 messages of 1033 bytes in an R1 stream (41,320 bytes),
    the stream scaled to R3, and once ``$JS.API.INFO`` shows every replica's bytes (123,960)
    and the servers' usage reports have gone round, one more publish: the replies."""
    async with _connect(url, "p") as nc:
        cfg = {"name": "SETTLED", "subjects": ["p.x"], "num_replicas": 1}
        got = await _until(nc, "$JS.API.STREAM.CREATE.SETTLED", cfg)
        assert "error" not in got, got
        assert await publish_when_ready(nc.jetstream(), "p.x", b"x" * 1000) == 1
        for i in range(1, 40):
            assert (await _req(nc, "p.x", "x" * 1000))["seq"] == i + 1
        scaled = await _until(nc, "$JS.API.STREAM.UPDATE.SETTLED", cfg | {"num_replicas": 3})
        deadline = asyncio.get_running_loop().time() + 30
        while (acct := await _until(nc, "$JS.API.INFO"))["storage"] != 3 * 40 * MSG:
            assert asyncio.get_running_loop().time() < deadline, acct
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.5)  # past nats-server's 1.5 s usage tick and jetpy's 1 s reports
        reply = await _req(nc, "p.x", "x" * 1000)
        return [scaled.get("error") or scaled["config"]["num_replicas"], reply]


async def test_account_storage_settled_counts_every_replica_as_nats_server(
    jetpy_cluster: JsCluster, reference_urls: list[str]
) -> None:
    """nats-server's steady state: once its servers' usage reports have arrived, every replica
    counts. An R1 stream of 41,320 bytes scaled to R3 holds 123,960 bytes of replicas, past
    the account's 100K, and the next publish is refused with 10002 by both (counted once, as
    before, 41,320 + 3 x 1033 would fit)."""
    ours = await _settled(jetpy_cluster.urls[2])
    theirs = await _settled(reference_urls[2])
    assert ours == theirs
    assert ours[0] == 3 and ours[1]["error"]["err_code"] == 10002


async def test_account_storage_reported_is_the_storage_enforced(jetpy_cluster: JsCluster) -> None:
    """Account O (max_file 40K): an R1 stream on one server holds 10 messages (10 x 1033),
    then an R3 stream led by another server (one holding no replica of the first: it counts
    the first from its server's report) takes 9 before the 10th would pass 40K (10 x 1033 +
    9 x 3 x 1033 + 3 x 1033 > 40000; 12 without the first stream counted, 26 with the R3
    stream's bytes counted once). ``$JS.API.INFO``'s storage at the refusal is what the leader
    counted: within the limit, and past it by the refused message."""
    async with _connect(jetpy_cluster.urls[0], "o") as nc:
        got = await _until(nc, "$JS.API.STREAM.CREATE.O2", _orders(["o.2"]) | {"name": "O2"})
        assert "error" not in got, got
        led = got["cluster"]["leader"]
        elsewhere: dict[str, str] = {}
        for name in ("O1A", "O1B", "O1C"):
            got = await _until(
                nc, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [name.lower()]}
            )
            assert "error" not in got, got
            elsewhere[name] = got["cluster"]["leader"]
        first = next((n for n, server in elsewhere.items() if server != led), None)
        assert first is not None, (led, elsewhere)  # the least loaded servers take R1 streams
        for _ in range(10):
            assert "error" not in await _req(nc, first.lower(), "x" * 1000)
        await asyncio.sleep(2.5)  # the first one's server has reported it
        taken = 0
        while "error" not in (reply := await _req(nc, "o.2", "x" * 1000)):
            taken += 1
            assert taken < 40, "never refused"
        assert reply["error"]["err_code"] == 10002
        assert taken == 9
        acct = await _until(nc, "$JS.API.INFO")
        assert acct["storage"] == 10 * MSG + 3 * taken * MSG  # 38,221
        assert acct["storage"] <= 40_000 < acct["storage"] + 3 * MSG


async def test_account_storage_limit_counts_streams_led_on_other_servers(jetpy_cluster: JsCluster) -> None:
    """Account N (max_file 20K): what its R1 stream on one server holds counts at the leader
    of its R1 stream on another server (the servers report their replicas' bytes): 10 messages
    there (10 x 1032: a 2-byte subject), then the other stream takes 9 before the 10th would
    pass 20K (19 without the first stream counted). R1 streams count their bytes once, as on a single
    server."""
    async with _connect(jetpy_cluster.urls[0], "n") as nc:
        leaders: dict[str, str] = {}
        for name in ("N1", "N2", "N3"):
            got = await _until(
                nc, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [name.lower()]}
            )
            assert "error" not in got, got
            leaders[name] = got["cluster"]["leader"]
        first = "N1"
        second = next(n for n in ("N2", "N3") if leaders[n] != leaders[first])
        for _ in range(10):
            assert "error" not in await _req(nc, first.lower(), "x" * 1000)
        await asyncio.sleep(2.5)  # the first one's server has reported it
        taken = 0
        while "error" not in (reply := await _req(nc, second.lower(), "x" * 1000)):
            taken += 1
            assert taken < 30, "never refused"
        assert reply["error"]["err_code"] == 10002
        assert taken == 9  # 10 x 1032 + 9 x 1032 + 1032 > 20000 >= 10 x 1032 + 8 x 1032 + 1032
        acct = await _until(nc, "$JS.API.INFO")
        assert acct["storage"] == 19 * 1032  # every stream R1: its bytes once
