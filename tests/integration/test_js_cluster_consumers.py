"""Replicated consumers on three clustered JetStream server processes on loopback (every process
killed by its PID): the meta group assigns consumers to the stream's servers, the consumer's
leader runs the consumer and replicates its state through the consumer's Raft group, so that
after kill -9 of its leader (and the stream's) a new leader goes on: nothing acknowledged
(AckSync confirmed) is delivered again, nothing is skipped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import APIError

from chaos.jscluster import JsCluster

pytestmark = pytest.mark.timeout(120)

RETRY = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,  # no leader subscribed yet (an election)
    nats.js.errors.ServiceUnavailableError,  # no JetStream API subscribed yet (a server starting)
)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[JsCluster]:
    c = JsCluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.stop()


async def _retry(what: str, call: Any, tries: int = 150) -> Any:
    """``call()`` until it is answered (a leader is being elected meanwhile)."""
    for _ in range(tries):
        try:
            return await call()
        except RETRY:
            await asyncio.sleep(0.1)
        except APIError as e:
            if e.err_code != 10008:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: never answered")


async def _api(nc: NATS, subject: str, body: bytes = b"") -> dict[str, Any]:
    async def ask() -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((await nc.request(subject, body, timeout=2)).data)
        return doc

    got: dict[str, Any] = await _retry(subject, ask)
    return got


async def _stream(js: JetStreamContext, **cfg: Any) -> None:
    await _retry("stream create", lambda: js.add_stream(**cfg))


async def _publish(js: JetStreamContext, subject: str, data: bytes, msg_id: str) -> int:
    async def pub() -> int:
        ack = await js.publish(subject, data, timeout=1, headers={"Nats-Msg-Id": msg_id})
        return int(ack.seq)

    return int(await _retry(f"publish {msg_id}", pub, 300))


async def test_r3_durable_pull_consumer_survives_its_leaders_killed(cluster: JsCluster) -> None:
    nc = await nats.connect(servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        js = nc.jetstream(timeout=3)
        await _stream(js, name="Q", subjects=["q.>"], num_replicas=3)
        cfg = ConsumerConfig(durable_name="W", ack_policy=AckPolicy.EXPLICIT, ack_wait=2, max_ack_pending=50)
        ci = await _retry("consumer create", lambda: js.add_consumer("Q", cfg))
        assert ci.name == "W" and ci.cluster is not None and ci.cluster.leader in cluster.nodes
        assert len(ci.cluster.replicas or []) == 2

        acked: set[int] = set()  # confirmed by AckSync: must never come again
        unsure: set[int] = set()  # acked, unconfirmed (the leader died): may come again, or not
        seen: dict[int, int] = {}  # stream seq -> deliveries seen
        total = 0

        async def publish(n: int) -> None:
            nonlocal total
            for _ in range(n):
                total += 1
                await _publish(js, f"q.{total}", b"%d" % total, f"m{total}")

        async def consume(until: int, rounds: int = 200) -> None:
            """Fetch and AckSync until every message up to ``until`` was acked."""
            sub = await js.pull_subscribe_bind("W", "Q")
            for _ in range(rounds):
                if (acked | unsure) >= set(range(1, until + 1)):
                    return
                try:
                    msgs = await sub.fetch(20, timeout=1)
                except RETRY:
                    continue
                for m in msgs:
                    seq = m.metadata.sequence.stream
                    assert seq not in acked, f"{seq} acknowledged, then delivered again"
                    seen[seq] = seen.get(seq, 0) + 1
                    try:
                        await m.ack_sync(timeout=1)
                    except RETRY:
                        unsure.add(seq)  # not confirmed: it may come again
                        continue
                    acked.add(seq)
            raise AssertionError(f"only {len(acked)} of {until} acknowledged")

        await publish(100)
        await consume(40)
        ci = await _retry("info", lambda: js.consumer_info("Q", "W"))
        assert ci.cluster is not None
        victim = str(ci.cluster.leader)
        cluster.kill(victim)  # the consumer's leader, mid-way
        await consume(70)
        await publish(50)
        cluster.start(victim)
        si = await _retry("stream info", lambda: js.stream_info("Q"))
        assert si.cluster is not None
        cluster.kill(str(si.cluster.leader))  # then the stream's
        await consume(110)
        await publish(50)
        cluster.start(str(si.cluster.leader))
        await consume(200)
        for _ in range(10):  # acks lost with a leader: those messages come again (ack_wait 2s)
            ci = await _retry("info", lambda: js.consumer_info("Q", "W"))
            if ci.num_ack_pending == 0:
                break
            unsure.clear()
            await consume(200, rounds=3)
        assert set(seen) == set(range(1, 201))  # nothing skipped
        ci = await _until(js, lambda c: c.ack_floor.stream_seq == 200 and c.num_ack_pending == 0)
        assert ci.num_pending == 0 and ci.delivered.stream_seq == 200
        assert ci.cluster is not None and ci.cluster.leader in cluster.nodes
    finally:
        await nc.close()


async def _until(js: JetStreamContext, check: Any) -> Any:
    for _ in range(100):
        ci = await _retry("info", lambda: js.consumer_info("Q", "W"))
        if check(ci):
            return ci
        await asyncio.sleep(0.1)
    raise AssertionError(f"consumer state never as expected: {ci}")


async def test_push_r1_delete_info_and_refusals(cluster: JsCluster) -> None:
    async with await nats.connect(servers=cluster.urls) as nc:
        js = nc.jetstream(timeout=3)
        await _stream(js, name="S", subjects=["s.>"], num_replicas=3)
        for i in range(10):
            await _publish(js, f"s.{i}", b"%d" % i, f"s{i}")

        # an R1 durable on the R3 stream: one server holds it
        one = await _retry(
            "R1 create", lambda: js.add_consumer("S", ConsumerConfig(durable_name="ONE", num_replicas=1))
        )
        assert one.cluster is not None and one.cluster.replicas in (None, [])
        assert one.config.num_replicas == 1 and one.num_pending == 10

        # a push consumer: its leader delivers to a subscriber on any server
        got: list[int] = []
        done = asyncio.Event()

        async def on_msg(m: Any) -> None:
            got.append(m.metadata.sequence.stream)
            await m.ack()
            if len(got) == 10:
                done.set()

        psub = await js.subscribe("s.>", durable="PUSH", stream="S", cb=on_msg, manual_ack=True)
        await asyncio.wait_for(done.wait(), 10)
        assert got == list(range(1, 11))
        await psub.unsubscribe()

        # info, names and list from every server (each asks the leaders)
        for url in cluster.urls:
            async with await nats.connect(url) as nc1:
                info = await _api(nc1, "$JS.API.CONSUMER.INFO.S.ONE")
                assert info["name"] == "ONE" and info["cluster"]["leader"] == one.cluster.leader
                names = await _api(nc1, "$JS.API.CONSUMER.NAMES.S", b"{}")
                assert names["consumers"] == ["ONE", "PUSH"] and names["total"] == 2
        assert (await js.account_info()).consumers == 2
        listed = {c.name: c for c in await js.consumers_info("S")}
        assert sorted(listed) == ["ONE", "PUSH"]
        delivered = listed["PUSH"].delivered
        assert listed["ONE"].num_pending == 10 and delivered is not None and delivered.stream_seq == 10
        for _ in range(50):  # the push consumer's plain acks reach its leader
            floor = (await js.consumer_info("S", "PUSH")).ack_floor
            if floor is not None and floor.stream_seq == 10:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the push consumer's acks never arrived")

        # pause and resume through the meta group; the consumer's leader pauses it
        until = "2099-01-01T00:00:00Z"
        paused = await _api(nc, "$JS.API.CONSUMER.PAUSE.S.ONE", json.dumps({"pause_until": until}).encode())
        assert paused["paused"] is True and paused["pause_until"] == until
        for _ in range(50):
            if (await _api(nc, "$JS.API.CONSUMER.INFO.S.ONE")).get("paused"):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the consumer's leader never paused it")
        resumed = await _api(nc, "$JS.API.CONSUMER.PAUSE.S.ONE", b"{}")
        assert resumed["paused"] is False
        nope = await _api(nc, "$JS.API.CONSUMER.PAUSE.S.NOPE", b"{}")
        assert nope["error"]["err_code"] == 10014

        # advisories from the consumer's leader, on whichever server listens (ADV's only: ONE's
        # resume advisory above may still be on its way from its leader)
        adv = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.*.S.ADV")
        await nc.flush()
        await _retry("ADV create", lambda: js.add_consumer("S", ConsumerConfig(durable_name="ADV")))
        created = json.loads((await adv.next_msg(timeout=3)).data)
        assert (created["action"], created["consumer"]) == ("create", "ADV")
        assert await js.delete_consumer("S", "ADV")
        deleted = json.loads((await adv.next_msg(timeout=3)).data)
        assert (deleted["action"], deleted["consumer"]) == ("delete", "ADV")
        await adv.unsubscribe()

        # the same create again is answered by its leader, a change too, more replicas too (the
        # new ones join its group)
        again = await js.add_consumer("S", ConsumerConfig(durable_name="ONE", num_replicas=1))
        assert again.name == "ONE"
        changed = await js.add_consumer("S", ConsumerConfig(durable_name="ONE", num_replicas=1, ack_wait=9))
        assert changed.config.ack_wait == 9 and changed.num_pending == 10  # by its leader, running it
        assert (await js.consumer_info("S", "ONE")).config.ack_wait == 9
        more = await js.add_consumer("S", ConsumerConfig(durable_name="ONE", num_replicas=3, ack_wait=9))
        assert more.config.num_replicas == 3 and more.num_pending == 10
        for _ in range(200):  # its two new replicas joined and caught up
            ci = await _retry("info", lambda: js.consumer_info("S", "ONE"))
            if ci.cluster is not None and [r.current for r in ci.cluster.replicas or []] == [True, True]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"ONE not on three servers: {ci.cluster}")
        assert ci.num_pending == 10
        with pytest.raises(APIError) as e:  # the single server's update rules
            await js.add_consumer(
                "S", ConsumerConfig(durable_name="ONE", num_replicas=1, ack_policy=AckPolicy.ALL)
            )
        assert e.value.err_code == 10012
        await _stream(js, name="I", subjects=["i.>"], num_replicas=3, retention="interest")
        with pytest.raises(APIError) as e:  # an interest stream's consumers have its replicas
            await js.add_consumer("I", ConsumerConfig(durable_name="X", num_replicas=1))
        assert e.value.err_code == 10134
        every = await js.add_consumer("I", ConsumerConfig())  # an ephemeral one too
        assert every.cluster is not None and len(every.cluster.replicas or []) == 2
        with pytest.raises(APIError) as e:
            await js.add_consumer("S", ConsumerConfig(durable_name="BIG", num_replicas=5))
        assert e.value.err_code == 10126  # more replicas than the stream's
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.consumer_info("S", "NOPE")
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.consumer_info("NOPE", "ONE")

        # delete: gone everywhere, its groups too
        assert await js.delete_consumer("S", "ONE")
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.consumer_info("S", "ONE")
        names = await _api(nc, "$JS.API.CONSUMER.NAMES.S", b"{}")
        assert names["consumers"] == ["PUSH"]
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.delete_consumer("S", "ONE")
        # an ephemeral consumer (R1) goes once its inactive threshold passes, through the meta group
        eph = await js.add_consumer("S", ConsumerConfig(inactive_threshold=0.5))
        assert eph.name and eph.cluster is not None and not eph.cluster.replicas
        for _ in range(50):
            names = await _api(nc, "$JS.API.CONSUMER.NAMES.S", b"{}")
            if eph.name not in names["consumers"]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the inactive ephemeral consumer was never deleted")

        # KV and object store buckets with replicas: 3, a watcher and an ordered consumer
        kv = await _retry("kv", lambda: js.create_key_value(bucket="B", replicas=3, history=2))
        await kv.put("a", b"1")
        await kv.put("a", b"2")
        watcher = await kv.watchall()
        first = await watcher.updates(timeout=3)
        assert first is not None and (first.key, first.value) == ("a", b"2")
        assert await watcher.updates(timeout=3) is None  # the initial values are done
        await kv.put("b", b"3")
        update = await watcher.updates(timeout=3)
        assert update is not None and (update.key, update.value) == ("b", b"3")
        await watcher.stop()
        assert [e.value for e in await kv.history("a")] == [b"1", b"2"]
        ordered = await js.subscribe("$KV.B.>", ordered_consumer=True)
        assert [(await ordered.next_msg(timeout=3)).data for _ in range(3)] == [b"1", b"2", b"3"]
        await ordered.unsubscribe()
        slow = nc.jetstream(timeout=15)  # each chunk's PubAck waits for a quorum's fsync (loaded runs)
        obj = await _retry("object store", lambda: slow.create_object_store("O", replicas=3))
        await obj.put("f", b"x" * 300_000)
        assert (await obj.get("f")).data == b"x" * 300_000

        # a work-queue stream's consumer: what it acknowledged leaves every replica
        await _stream(js, name="WQ", subjects=["wq.>"], num_replicas=3, retention="workqueue")
        for i in range(20):
            await _publish(js, f"wq.{i}", b"%d" % i, f"wq{i}")
        wq = await js.pull_subscribe("wq.>", durable="WORK", stream="WQ")
        worked: set[int] = set()
        while len(worked) < 20:
            for m in await wq.fetch(20 - len(worked), timeout=3):
                await m.ack_sync()
                worked.add(m.metadata.sequence.stream)
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} removed the acked work",
                lambda n=node: (n.stream_state("WQ") or {}).get("messages") == 0,
            )
        assert (await js.stream_info("WQ")).state.last_seq == 20

        # a deleted stream takes its consumers
        assert await js.delete_stream("WQ")
        assert await js.delete_key_value("B")  # (the watchers' consumers)
        assert await js.delete_object_store("O")  # (its reader's)
        assert await js.delete_stream("S")
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} dropped the consumers' groups",
                lambda n=node: not any(g.startswith("C-") for g in n.wal_first()),
            )


async def test_work_queue_removals_lost_in_a_stream_leader_change_are_made_again(
    cluster: JsCluster,
) -> None:
    """A work-queue stream's leader steps down again and again while its consumer takes acks:
    the consumer's group commits them, but removals proposed while the stream's group has no
    leader cannot be taken. The consumer's leader removes what was acknowledged anyway, once
    the stream has a leader (such messages were left on every replica before)."""
    nc = await nats.connect(servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    try:
        js = nc.jetstream(timeout=2)
        await _stream(js, name="WQ", subjects=["wq.>"], num_replicas=3, retention="workqueue")
        n = 300
        for i in range(n):
            await _publish(js, f"wq.{i}", b"%d" % i, f"wq{i}")
        cfg = ConsumerConfig(durable_name="W", ack_policy=AckPolicy.EXPLICIT, ack_wait=30)
        await _retry("consumer create", lambda: js.add_consumer("WQ", cfg))
        sub = await js.pull_subscribe_bind("W", "WQ")
        msgs: list[Any] = []
        while len(msgs) < n:
            msgs += await _retry("fetch", lambda k=n - len(msgs): sub.fetch(k, timeout=3))

        async def step_downs() -> None:
            for _ in range(4):
                with contextlib.suppress(Exception):
                    await nc.request("$JS.API.STREAM.LEADER.STEPDOWN.WQ", b"", timeout=2)
                await asyncio.sleep(0.3)

        downs = asyncio.create_task(step_downs())
        for m in msgs:
            await _retry("ack", m.ack_sync)
            await asyncio.sleep(0.004)
        await downs
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} removed the acked work",
                lambda n=node: (n.stream_state("WQ") or {}).get("messages") == 0,
                within=30,
            )
    finally:
        await nc.close()


@pytest.fixture
async def compacting(tmp_path: Path) -> AsyncIterator[JsCluster]:
    c = JsCluster(tmp_path, snapshot_entries=16)  # every group snapshots and compacts often
    try:
        c.start()
        yield c
    finally:
        c.stop()


async def test_stepdown_and_whole_cluster_restart_from_snapshots(compacting: JsCluster) -> None:
    cluster = compacting
    acked: set[int] = set()

    async def consume(js: JetStreamContext, n: int) -> None:
        sub = await js.pull_subscribe_bind("W", "Q")
        goal = len(acked) + n
        for _ in range(100):
            if len(acked) >= goal:
                return
            try:
                msgs = await sub.fetch(min(10, goal - len(acked)), timeout=1)
            except RETRY:
                continue
            for m in msgs:
                seq = m.metadata.sequence.stream
                assert seq not in acked, f"{seq} acknowledged, then delivered again"
                await m.ack_sync(timeout=2)
                acked.add(seq)
        raise AssertionError(f"{len(acked)} acknowledged, not {goal}")

    async with await nats.connect(servers=cluster.urls) as nc:
        js = nc.jetstream(timeout=3)
        await _stream(js, name="Q", subjects=["q.>"], num_replicas=3)
        cfg = ConsumerConfig(durable_name="W", ack_policy=AckPolicy.EXPLICIT, ack_wait=30)
        await _retry("consumer create", lambda: js.add_consumer("Q", cfg))
        for i in range(100):
            await _publish(js, f"q.{i}", b"x", f"q{i}")
        await consume(js, 50)

        before = await js.consumer_info("Q", "W")
        assert before.cluster is not None
        down = await _api(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.Q.W")
        assert down["success"] is True, down
        after = await _until(
            js, lambda c: c.cluster is not None and c.cluster.leader != before.cluster.leader
        )
        assert after.ack_floor.stream_seq == 50 and after.num_pending == 50  # the same state
        await consume(js, 20)
        missing = await _api(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.Q.NOPE")
        assert missing["error"]["err_code"] == 10014

        # a pull request waiting at a leader that steps down is told so, as nats-server tells it
        idle = ConsumerConfig(durable_name="IDLE", filter_subject="q.none", ack_policy=AckPolicy.EXPLICIT)
        await _retry("IDLE create", lambda: js.add_consumer("Q", idle))
        inbox = nc.new_inbox()
        waiting = await nc.subscribe(inbox)
        await nc.publish(
            "$JS.API.CONSUMER.MSG.NEXT.Q.IDLE", b'{"batch":1,"expires":10000000000}', reply=inbox
        )
        for _ in range(100):  # the request waits at the leader
            if (await js.consumer_info("Q", "IDLE")).num_waiting == 1:
                break
            await asyncio.sleep(0.05)
        assert (await _api(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.Q.IDLE"))["success"] is True
        told = await waiting.next_msg(timeout=5)
        assert told.headers is not None and told.headers.get("Status") == "409"
        assert told.headers.get("Description") == "Leadership Change"

    compacted = [
        g
        for n in cluster.nodes.values()
        for g, first in n.wal_first().items()
        if g.startswith("C-") and first > 1
    ]
    assert compacted, "the consumer's group never compacted its log"
    cluster.stop()
    cluster.start()
    async with await nats.connect(servers=cluster.urls) as nc:
        js = nc.jetstream(timeout=3)
        ci = await _until(js, lambda c: c.num_pending == 30)
        assert ci.ack_floor.stream_seq == 70 and ci.delivered.stream_seq == 70 and ci.num_ack_pending == 0
        await consume(js, 30)
        assert acked == set(range(1, 101))


@pytest.fixture
async def slow_ticks(tmp_path: Path) -> AsyncIterator[JsCluster]:
    c = JsCluster(tmp_path, tick=0.2)  # a lease of 1 s, a leader cut off steps down after 2 s
    try:
        c.start()
        yield c
    finally:
        c.stop()


async def test_a_read_while_the_leaders_lease_lapsed_is_answered_once_it_holds(
    slow_ticks: JsCluster,
) -> None:
    """A stream's leader that has not heard a quorum within its lease (a leader just elected,
    a loop that stalled) waits for it before it answers a read: such a read (an object put's
    first MSG.GET, just after the bucket's create) went unanswered before."""
    cluster = slow_ticks
    async with await nats.connect(servers=cluster.urls) as nc:
        js = nc.jetstream(timeout=3)
        await _stream(js, name="S", subjects=["s.>"], num_replicas=3)
        await _publish(js, "s.1", b"one", "one")
        leader = (await _retry("info", lambda: js.stream_info("S"))).cluster.leader
        followers = [n for n in cluster.nodes.values() if n.name != leader]
        async with await nats.connect(cluster.nodes[leader].url) as near:
            for node in followers:  # the leader hears nobody: its lease lapses after 1 s
                assert node.popen is not None
                os.kill(node.popen.pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(1.3)
                ask = asyncio.create_task(near.request("$JS.API.STREAM.MSG.GET.S", b'{"seq": 1}', timeout=5))
                await asyncio.sleep(0.3)
            finally:
                for node in followers:
                    assert node.popen is not None
                    os.kill(node.popen.pid, signal.SIGCONT)
            got = json.loads((await ask).data)
        assert got["message"]["seq"] == 1 and got["message"]["subject"] == "s.1"
