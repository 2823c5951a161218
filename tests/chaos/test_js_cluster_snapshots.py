"""Clustered JetStream's snapshots and compaction with three server processes on loopback: each
group (the meta group, every stream's) snapshots its state every few entries and compacts its
log; a replica that was down while its leader compacted past it fetches the messages it lacks
from the leader, and a whole cluster restarted after compaction comes back from its snapshots
and what follows them."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

from jetpy.store.base import StoreConfig
from jetpy.store.filestore import FileStore

from .jsapi import create_stream as _create
from .jsapi import publish_until_acked as _publish_until_acked
from .jscluster import JsCluster

pytestmark = pytest.mark.timeout(180)

SNAPSHOT_ENTRIES = 16


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[JsCluster]:
    c = JsCluster(tmp_path, snapshot_entries=SNAPSHOT_ENTRIES)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _store(node_store: Path, name: str) -> FileStore:
    return FileStore(node_store / "jetstream" / "$G" / "streams" / name, StoreConfig(name=name))


async def _purge(js: Any, stream: str) -> None:
    """Purge ``stream`` once answered (a loaded machine can leave the meta group or the
    stream's group without a leader for a while: 10008 or no answer)."""
    for _ in range(100):
        try:
            await js.purge_stream(stream)
            return
        except (TimeoutError, nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
            await asyncio.sleep(0.2)
    raise AssertionError(f"{stream} was never purged")


def _summary(state: dict[str, object] | None) -> tuple[object, ...]:
    s = state or {}
    return (s.get("messages"), s.get("first_seq"), s.get("last_seq"), s.get("num_deleted"))


async def test_replica_down_while_the_leader_compacts_catches_up(cluster: JsCluster) -> None:
    """A follower is killed; the stream takes hundreds of entries, a delete and a subject purge,
    and its leader compacts its log past everything the follower has; back, the follower gets
    the leader's snapshot, fetches the messages it lacks from the leader (removed ones skipped),
    then applies what follows; it then leads the stream with nothing acknowledged lost."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="SNAP", subjects=["snap.*"], num_replicas=3)
        acked: dict[int, tuple[str, bytes]] = {}

        async def publish(i: int) -> None:
            subject = "snap.b" if i % 3 == 0 else "snap.a"
            seq = await _publish_until_acked(js, subject, b"p%d" % i, f"id-{i}")
            acked[seq] = (subject, b"p%d" % i)

        for i in range(40):
            await publish(i)
        si = await js.stream_info("SNAP")
        assert si.cluster is not None
        leader = str(si.cluster.leader)
        follower = next(n for n in sorted(cluster.nodes) if n != leader)
        cluster.kill(follower)

        for i in range(40, 300):
            await publish(i)
        assert await js.delete_msg("SNAP", 60)
        acked.pop(60)
        await js.purge_stream("SNAP", subject="snap.b", seq=200)  # snap.b below 200 goes
        for seq in [s for s, (subj, _) in acked.items() if subj == "snap.b" and s < 200]:
            acked.pop(seq)
        for i in range(300, 340):
            await publish(i)
        first = cluster.nodes[leader].wal_first()
        group = next(g for g in first if g != "_meta_")
        assert first[group] > 300, f"the leader's log was not compacted: {first}"

        want = _summary(cluster.nodes[leader].stream_state("SNAP"))
        assert want[0] == len(acked)
        cluster.start(follower)
        await cluster.wait_for(
            f"{follower} caught up", lambda: _summary(cluster.nodes[follower].stream_state("SNAP")) == want
        )
        log = cluster.nodes[follower].log.read_text(errors="replace").rsplit("==== start\n", 1)[-1]
        assert "fetching messages" in log  # from the leader, past its snapshot
        for i in range(340, 350):
            await publish(i)

        cluster.kill(leader)  # the caught-up follower or the third server leads now
        for i in range(350, 360):
            await publish(i)
        cluster.start(leader)
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has all",
                lambda n=node: (n.stream_state("SNAP") or {}).get("messages") == len(acked),
            )
    cluster.stop()
    for node in cluster.nodes.values():  # every replica's files: each acked message, at its seq
        store = _store(node.store, "SNAP")
        try:
            assert store.state().msgs == len(acked), node.name
            for seq, (subject, payload) in acked.items():
                m = store.load_msg(seq)
                assert m is not None and (m.subject, m.data) == (subject, payload), (node.name, seq)
            assert store.load_msg(60) is None
        finally:
            store.stop()


async def test_whole_cluster_restarts_after_compaction(cluster: JsCluster) -> None:
    """The meta group and a stream's group compact their logs; every server stopped and started
    again comes back from its snapshots (the streams that exist, the sequence, the ids it
    de-duplicates) and replays only the entries after them."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="KEEP", subjects=["keep"], num_replicas=3)
        for i in range(12):  # the meta group's entries: creates and deletes
            await js.add_stream(name=f"T{i}", subjects=[f"t.{i}"], num_replicas=1)
        for i in range(0, 12, 2):
            await js.delete_stream(f"T{i}")
        for i in range(100):
            assert await _publish_until_acked(js, "keep", b"%d" % i, f"id-{i}") == i + 1
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} compacted", lambda n=node: n.wal_first().get("_meta_", 0) > SNAPSHOT_ENTRIES
            )
            assert max(node.wal_first().values()) > 50  # KEEP's group too

        cluster.stop()
        cluster.start()
        assert await _publish_until_acked(js, "keep", b"again", "id-99") == 100  # a duplicate
        assert await _publish_until_acked(js, "keep", b"100", "id-100") == 101
        want = sorted(["KEEP", *[f"T{i}" for i in range(1, 12, 2)]])
        for _ in range(50):  # a stream whose leader is not elected yet is only named in "missing"
            names = sorted(str(s.config.name) for s in await js.streams_info())
            if names == want:
                break
            await asyncio.sleep(0.2)
        assert names == want
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has 101", lambda n=node: (n.stream_state("KEEP") or {}).get("messages") == 101
            )
    cluster.stop()
    for node in cluster.nodes.values():
        store = _store(node.store, "KEEP")
        try:
            for seq in range(1, 101):
                m = store.load_msg(seq)
                assert m is not None and m.data == b"%d" % (seq - 1), (node.name, seq)
        finally:
            store.stop()


async def test_memory_replica_restarted_after_compaction_fetches_its_messages(cluster: JsCluster) -> None:
    """An R3 memory stream's replica restarts with its own snapshot and an empty store: it
    fetches the snapshot's messages from the leader before applying the log's tail."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="MEM", subjects=["mem"], num_replicas=3, storage="memory")
        for i in range(60):
            assert await _publish_until_acked(js, "mem", b"%d" % i, f"m-{i}") == i + 1
        si = await js.stream_info("MEM")
        assert si.cluster is not None
        leader = str(si.cluster.leader)
        follower = next(n for n in sorted(cluster.nodes) if n != leader)
        want = _summary(cluster.nodes[leader].stream_state("MEM"))
        assert want[:3] == (60, 1, 60)
        group = next(g for g in cluster.nodes[follower].wal_first() if g != "_meta_")
        await cluster.wait_for(
            "the follower's log compacted",
            lambda: cluster.nodes[follower].wal_first()[group] > SNAPSHOT_ENTRIES,
        )
        cluster.kill(follower)
        cluster.start(follower)
        await cluster.wait_for(
            "the memory replica rebuilt",
            lambda: _summary(cluster.nodes[follower].stream_state("MEM")) == want,
        )
        assert await _publish_until_acked(js, "mem", b"m-59", "m-59") == 60  # still a duplicate


async def test_memory_stream_after_every_server_restarted(cluster: JsCluster) -> None:
    """Every server of an R3 memory stream restarted after its log was compacted: no replica
    holds the messages any more, the leader says they are lost and the stream goes on after
    their sequences (nats-server keeps no memory stream's messages across restarts either)."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="GONE", subjects=["gone"], num_replicas=3, storage="memory")
        for i in range(40):
            await _publish_until_acked(js, "gone", b"%d" % i, f"g-{i}")
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} compacted", lambda n=node: max(n.wal_first().values()) > SNAPSHOT_ENTRIES
            )
        cluster.stop()
        cluster.start()
        seq = await _publish_until_acked(js, "gone", b"after", "after")
        assert seq > 40
        si = await js.stream_info("GONE")
        st = si.state
        assert st.last_seq == seq and st.first_seq > 1  # those its snapshot named are gone...
        assert st.messages == st.last_seq - st.first_seq + 1  # ...those its log held came back
        for node in cluster.nodes.values():  # the other replicas caught up with the leader
            await cluster.wait_for(
                f"{node.name} in step",
                lambda n=node: (n.stream_state("GONE") or {}).get("messages") == st.messages,
            )


async def test_fetched_messages_keep_their_ttl(cluster: JsCluster) -> None:
    """A message with its own TTL fetched by a replica after its leader's snapshot expires there
    when it does on the leader."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="TTL", subjects=["ttl"], num_replicas=3, allow_msg_ttl=True)
        await _publish_until_acked(js, "ttl", b"first", "t-first")
        si = await js.stream_info("TTL")
        assert si.cluster is not None
        leader = str(si.cluster.leader)
        follower = next(n for n in sorted(cluster.nodes) if n != leader)
        cluster.kill(follower)
        # (retried: a client on the killed server may have written it to the dead socket; its
        # TTL outlasts the 40 publishes and the follower's start even on a busy machine, or the
        # follower would never fetch it)
        await _publish_until_acked(js, "ttl", b"short", "t-short", {"Nats-TTL": "10s"})
        for i in range(40):
            await _publish_until_acked(js, "ttl", b"%d" % i, f"t-{i}")
        cluster.start(follower)
        await cluster.wait_for(
            f"{follower} caught up",
            lambda: (cluster.nodes[follower].stream_state("TTL") or {}).get("messages") == 42,
        )
        log = cluster.nodes[follower].log.read_text(errors="replace").rsplit("==== start\n", 1)[-1]
        assert "fetching messages" in log
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"the short one expired on {node.name}",
                lambda n=node: (n.stream_state("TTL") or {}).get("messages") == 41,
            )


async def test_kv_updates_across_a_followers_catch_up_keep_the_replicas_equal(cluster: JsCluster) -> None:
    """A KV bucket (one message per key: each write removes the key's last) under writes and
    revision-checked updates while a follower is killed and restarted, catching up from the
    leader's snapshot each time: the messages the leader removed after its snapshot decide the
    updates that follow it, so the follower fetches past the snapshot's last sequence, and every
    replica ends with the same sequences (a follower that stopped at the snapshot's last one
    refused updates the leader had stored, and its sequences fell behind the leader's)."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        for _ in range(100):
            try:
                kv = await js.create_key_value(bucket="REG", replicas=3, history=1, direct=False)
                break
            except (TimeoutError, nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
                await asyncio.sleep(0.2)
        else:
            raise AssertionError("no meta leader")
        stop = asyncio.Event()
        stored = 0

        async def writer(w: int) -> None:
            nonlocal stored
            n = 0
            while not stop.is_set():
                n += 1
                key = f"k{n % 3}"
                try:
                    if n % 2:
                        await kv.put(key, b"%d-%d" % (w, n))
                    else:
                        await kv.update(key, b"%d-%d" % (w, n), last=(await kv.get(key)).revision)
                    stored += 1
                except nats.js.errors.KeyWrongLastSequenceError:
                    pass  # another writer's came first
                except (nats.errors.Error, nats.js.errors.Error, TimeoutError):
                    await asyncio.sleep(0.05)

        writers = [asyncio.create_task(writer(w)) for w in range(4)]
        try:
            for _ in range(3):
                await asyncio.sleep(1.5)
                leader = (await js.stream_info("KV_REG")).cluster.leader  # type: ignore[union-attr]
                victim = next(n for n in sorted(cluster.nodes) if n != leader)
                cluster.kill(victim)
                await asyncio.sleep(0.7)
                cluster.start(victim)
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.gather(*writers)
        assert stored > 100

        def agreed() -> dict[str, dict[str, Any] | None] | None:
            states = {n: x.stream_state("KV_REG") for n, x in cluster.nodes.items()}
            return states if len({_summary(v) for v in states.values()}) == 1 else None

        states = await cluster.wait_for("every replica at one last sequence", agreed)
        assert _summary(next(iter(states.values())))[0] == 3, states


async def test_a_paused_leader_resumed_answers_no_stale_kv_get(cluster: JsCluster) -> None:
    """The bucket's leader is paused (SIGSTOP) past an election, a new value is written through
    the new leader, and a get waits at the paused server; resumed, that server must not answer
    from the state it had as leader (its lease is gone: ``RaftGroup.in_lease``): the get sees
    the new value, or nobody answers it."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        for _ in range(100):
            try:
                kv = await js.create_key_value(bucket="LEASE", replicas=3, history=1, direct=False)
                break
            except (TimeoutError, nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
                await asyncio.sleep(0.2)
        else:
            raise AssertionError("no meta leader")
        for round_ in range(3):
            old = b"old-%d" % round_
            await kv.put("k", old)
            leader = (await js.stream_info("KV_LEASE")).cluster.leader  # type: ignore[union-attr]
            assert leader is not None
            paused = cluster.nodes[leader].popen
            assert paused is not None
            others = [n.url for name, n in cluster.nodes.items() if name != leader]
            async with await nats.connect(cluster.nodes[leader].url) as at_paused:
                stale = nats.js.kv.KeyValue(
                    name="LEASE",
                    stream="KV_LEASE",
                    pre="$KV.LEASE.",
                    js=at_paused.jetstream(timeout=3),
                    direct=False,
                )
                paused.send_signal(signal.SIGSTOP)
                try:
                    async with await nats.connect(servers=others) as elsewhere:
                        kv2 = nats.js.kv.KeyValue(
                            name="LEASE",
                            stream="KV_LEASE",
                            pre="$KV.LEASE.",
                            js=elsewhere.jetstream(timeout=1),
                            direct=False,
                        )
                        new = b"new-%d" % round_
                        for _ in range(100):
                            try:
                                await kv2.put("k", new)
                                break
                            except (nats.errors.Error, nats.js.errors.Error, TimeoutError):
                                await asyncio.sleep(0.1)
                        get = asyncio.create_task(stale.get("k"))
                        await asyncio.sleep(0.3)  # the get waits at the paused server
                finally:
                    paused.send_signal(signal.SIGCONT)
                try:
                    entry = await get
                except (nats.errors.Error, nats.js.errors.Error, TimeoutError):
                    continue  # nobody answered in time: not a stale read
                assert entry.value == new, (round_, entry.value)


async def test_a_catch_up_past_a_removed_last_message_applies_no_entry_twice(cluster: JsCluster) -> None:
    """A follower down while its leader compacted gets the leader's snapshot, then the entries
    after it: a message published and then deleted (the store's last one, as a work queue
    removes what was acknowledged). It fetches through all the leader's store holds, whose last
    sequence is that removed message's: the store must then know it decided the entry that
    published it, so neither that entry nor, after a kill -9, its replay stores the message
    again at a new sequence (the replica held it a second time, the others did not)."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="GONE", subjects=["gone.*"], num_replicas=3)
        assert await _publish_until_acked(js, "gone.a", b"0", "id-0") == 1
        si = await js.stream_info("GONE")
        assert si.cluster is not None
        leader = cluster.nodes[str(si.cluster.leader)]
        follower = next(n for n in sorted(cluster.nodes) if n != leader.name)
        cluster.kill(follower)
        group = next(g for g in leader.wal_first() if g.startswith("S-"))
        seq = 1
        for i in range(1, 3 * SNAPSHOT_ENTRIES):
            seq = await _publish_until_acked(js, "gone.a", b"%d" % i, f"id-{i}")
        first = leader.wal_first()[group]
        assert first > 1, "the leader's log was not compacted"
        while leader.wal_first()[group] == first:  # on to a snapshot just taken: none follows
            seq = await _publish_until_acked(js, "gone.a", b"%d" % seq, f"id-{seq}")
        last = await _publish_until_acked(js, "gone.b", b"doomed", "doomed")
        assert last == seq + 1
        assert await js.delete_msg("GONE", last)
        want = _summary(leader.stream_state("GONE"))
        assert want == (seq, 1, last, 1)

        def everywhere(summary: tuple[object, ...]) -> bool:
            return all(_summary(n.stream_state("GONE")) == summary for n in cluster.nodes.values())

        cluster.start(follower)
        node = cluster.nodes[follower]
        await cluster.wait_for(f"{follower} caught up", lambda: _summary(node.stream_state("GONE")) == want)
        log = node.log.read_text(errors="replace").rsplit("==== start\n", 1)[-1]
        assert "fetching messages" in log
        # the next message, at the next sequence on every replica (after what each applied)
        assert await _publish_until_acked(js, "gone.a", b"after", "after") == last + 1
        await cluster.wait_for("the next on every replica", lambda: everywhere((seq + 1, 1, last + 1, 1)))

        cluster.kill(follower)  # its log replays the entries after the snapshot
        cluster.start(follower)
        assert await _publish_until_acked(js, "gone.a", b"again", "again") == last + 2
        await cluster.wait_for("the next after the replay", lambda: everywhere((seq + 2, 1, last + 2, 1)))
    cluster.stop()
    store = _store(cluster.nodes[follower].store, "GONE")
    try:
        assert store.load_msg(last) is None and store.state().last_seq == last + 2
        assert [store.load_msg(s).data for s in (last + 1, last + 2)] == [b"after", b"again"]  # type: ignore[union-attr]
    finally:
        store.stop()


async def test_a_replica_given_a_snapshot_of_an_emptied_work_queue_takes_its_last_time_stamp(
    cluster: JsCluster,
) -> None:
    """A work queue's every message acknowledged (so removed) while a follower was down, and the
    leader's log compacted past it onto a snapshot of the emptied store: the follower moves its
    store on to the snapshot's sequence with the time stamp of the leader's last message (not
    its own last message's, older, which said it had not decided the entries in between), and
    keeps it across a kill -9: every replica's state is the same, its last time stamp too."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="WQ", subjects=["wq.*"], num_replicas=3, retention="workqueue")
        sub = await js.pull_subscribe("wq.*", durable="W", stream="WQ")
        for i in range(5):
            assert await _publish_until_acked(js, "wq.a", b"%d" % i, f"id-{i}") == i + 1
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has 5", lambda n=node: (n.stream_state("WQ") or {}).get("messages") == 5
            )
        si = await js.stream_info("WQ")
        assert si.cluster is not None
        leader = cluster.nodes[str(si.cluster.leader)]
        follower = next(n for n in sorted(cluster.nodes) if n != leader.name)
        cluster.kill(follower)
        for i in range(5, 40):
            await _publish_until_acked(js, "wq.a", b"%d" % i, f"id-{i}")
        done: set[int] = set()
        while len(done) < 40:
            for m in await sub.fetch(40 - len(done), timeout=3):
                await m.ack_sync()
                done.add(m.metadata.sequence.stream)
        await cluster.wait_for(
            "the work done", lambda: (leader.stream_state("WQ") or {}).get("messages") == 0
        )
        for _ in range(3 * SNAPSHOT_ENTRIES):  # entries of the emptied store: snapshots of it
            await _purge(js, "WQ")
        want = leader.stream_state("WQ")
        assert want is not None and _summary(want) == (0, 41, 40, None)

        def same(s: dict[str, Any] | None) -> bool:
            return s is not None and (_summary(s), s["last_ts"]) == (_summary(want), want["last_ts"])

        node = cluster.nodes[follower]
        cluster.start(follower)
        await cluster.wait_for(f"{follower} at the leader's state", lambda: same(node.stream_state("WQ")))
        cluster.kill(follower)
        cluster.start(follower)
        await cluster.wait_for(f"{follower} restarted", lambda: same(node.stream_state("WQ")))
        assert await _publish_until_acked(js, "wq.b", b"next", "next") == 41
        for n in cluster.nodes.values():
            await cluster.wait_for(
                f"{n.name} has the next", lambda n=n: _summary(n.stream_state("WQ")) == (1, 41, 41, None)
            )


async def test_an_emptied_work_queue_replayed_after_kill_9_stores_nothing_again(cluster: JsCluster) -> None:
    """Every message of a work queue acknowledged, so removed, then every server killed -9:
    each comes back from its snapshot and replays its log's tail over its emptied store (whose
    last time stamp is its removed last message's), storing none of those messages again."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="WQ", subjects=["wq.*"], num_replicas=3, retention="workqueue")
        sub = await js.pull_subscribe("wq.*", durable="W", stream="WQ")
        for i in range(SNAPSHOT_ENTRIES + 5):
            await _publish_until_acked(js, "wq.a", b"%d" % i, f"id-{i}")
        done: set[int] = set()
        while len(done) < SNAPSHOT_ENTRIES + 5:
            for m in await sub.fetch(SNAPSHOT_ENTRIES + 5 - len(done), timeout=3):
                await m.ack_sync()
                done.add(m.metadata.sequence.stream)
        want = (0, SNAPSHOT_ENTRIES + 6, SNAPSHOT_ENTRIES + 5, None)
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} emptied", lambda n=node: _summary(n.stream_state("WQ")) == want
            )
        last_ts = {n.stream_state("WQ")["last_ts"] for n in cluster.nodes.values()}  # type: ignore[index]
        assert len(last_ts) == 1
        for name in cluster.nodes:
            cluster.kill(name)
        cluster.start()
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} back", lambda n=node: (n.stream_state("WQ") or {}).get("last_seq")
            )
        for node in cluster.nodes.values():
            st = node.stream_state("WQ")
            assert st is not None and (_summary(st), st["last_ts"]) == (want, *last_ts), node.name
        # once each replayed its log (before the next entry), the next message is the only one
        assert await _publish_until_acked(js, "wq.b", b"next", "next") == SNAPSHOT_ENTRIES + 6
        after = (1, SNAPSHOT_ENTRIES + 6, SNAPSHOT_ENTRIES + 6, None)
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has the next only", lambda n=node: _summary(n.stream_state("WQ")) == after
            )
