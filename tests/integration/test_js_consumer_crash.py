"""Crash tests for consumers: jetpy-server killed with SIGKILL while a durable pull consumer acks.

What jetpy promises (``jetstream/consumers/persist.py``): a durable consumer's state is written
in the background and never runs ahead of what the stream has synced, so after a crash it may
redeliver messages whose ack was not confirmed, but it never skips one (and an AckSync-confirmed
ack never comes back: ``tests/faults/test_consumer_acksync.py``). What is checked here: every
message not acknowledged before the kill is delivered again after the restart, and none whose
AckSync was confirmed. A clean restart keeps durable consumers' config and state exactly;
ephemeral consumers do not come back.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import NotFoundError

from conftest import JETPY_SERVER, Proc, start_process

MESSAGES = 400


def _jetpy(store: Path, log: Path) -> Proc:
    return start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], log)


async def _ack_until_killed(p: Proc, acked: set[int], confirmed: set[int], rng: random.Random) -> None:
    """Fetch and ack (some confirmed, some not, some never) until the server dies under us;
    ``acked`` gets every message an ack was sent for, ``confirmed`` those confirmed."""
    nc = await nats.connect(p.url, allow_reconnect=False)
    js = nc.jetstream()
    sub = await js.pull_subscribe("k", durable="D", stream="K")
    kill_after = rng.uniform(0.05, 0.6)

    async def work() -> None:
        while True:
            for m in await sub.fetch(rng.randint(1, 30), timeout=2):
                r = rng.random()
                if r < 0.5:
                    acked.add(m.metadata.sequence.stream)
                    await m.ack_sync()
                    confirmed.add(m.metadata.sequence.stream)
                elif r < 0.9:
                    acked.add(m.metadata.sequence.stream)  # sent, not confirmed: it may have happened
                    await m.ack()
                # else: left unacked, redelivered after ack_wait

    task = asyncio.create_task(work())
    await asyncio.sleep(kill_after)
    p.stop(signal.SIGKILL)
    task.cancel()
    try:
        await task
    except BaseException:  # the connection died under it: expected
        pass
    try:
        await nc.close()
    except Exception:
        pass


async def _drain(p: Proc) -> set[int]:
    """Everything the consumer delivers after a restart (acking it), until it runs dry twice
    past the ack wait (so unacked messages have come back)."""
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    sub = await js.pull_subscribe("k", durable="D", stream="K")
    seen: set[int] = set()
    idle = 0
    while idle < 2:
        try:
            msgs = await sub.fetch(100, timeout=0.7)
        except TimeoutError:  # nats-py's own, or asyncio's when its deadline is spent
            idle += 1
            continue
        idle = 0
        for m in msgs:
            seen.add(m.metadata.sequence.stream)
            await m.ack_sync()
    await nc.close()
    return seen


async def test_kill9_while_acking_never_skips_a_message(tmp_path: Path) -> None:
    store = tmp_path / "store"
    rng = random.Random(0xC0FFEE)
    p = _jetpy(store, tmp_path / "0.log")
    try:
        nc = await nats.connect(p.url)
        js = nc.jetstream()
        await js.add_stream(name="K", subjects=["k"])
        futs = [await js.publish_async("k", b"x%d" % i) for i in range(MESSAGES)]
        assert [(await f).seq for f in futs] == list(range(1, MESSAGES + 1))
        await js.add_consumer(
            "K", ConsumerConfig(durable_name="D", ack_policy=AckPolicy.EXPLICIT, ack_wait=0.5)
        )
        await nc.close()
        acked: set[int] = set()
        confirmed: set[int] = set()
        for round_ in range(3):
            await _ack_until_killed(p, acked, confirmed, rng)
            p = _jetpy(store, tmp_path / f"{round_ + 1}.log")
        seen = await _drain(p)
        missing = set(range(1, MESSAGES + 1)) - acked - seen
        assert not missing, f"skipped after a crash: {sorted(missing)[:20]}"
        back = confirmed & seen
        assert not back, f"confirmed acks redelivered after a crash: {sorted(back)[:20]}"
        assert acked, "the kill came before any ack: the test checked nothing"
        nc = await nats.connect(p.url)
        info = await nc.jetstream().consumer_info("K", "D")
        assert info.num_ack_pending == 0 and info.num_pending == 0
        assert info.ack_floor.stream_seq == MESSAGES
        await nc.close()
    finally:
        p.stop(signal.SIGKILL)


async def test_clean_restart_keeps_durable_consumers_and_drops_ephemerals(tmp_path: Path) -> None:
    store = tmp_path / "store"
    p = _jetpy(store, tmp_path / "a.log")
    try:
        nc = await nats.connect(p.url)
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.*"])
        for i in range(20):
            await js.publish(f"r.{i % 2}", b"%d" % i)
        cfg = ConsumerConfig(
            durable_name="D",
            ack_policy=AckPolicy.EXPLICIT,
            filter_subject="r.1",
            max_deliver=5,
            ack_wait=30,
            description="kept",
            max_ack_pending=50,
        )
        await js.add_consumer("R", cfg)
        eph = await js.add_consumer("R", ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, inactive_threshold=60))
        sub = await js.pull_subscribe("r.1", durable="D", stream="R")
        msgs = await sub.fetch(6, timeout=2)
        for m in msgs[:2]:
            await m.ack_sync()
        await msgs[4].ack_sync()
        await msgs[3].nak()
        before = await js.consumer_info("R", "D")
        await nc.close()
    finally:
        assert p.stop(signal.SIGTERM) == 0
    q = _jetpy(store, tmp_path / "b.log")
    try:
        nc = await nats.connect(q.url)
        js = nc.jetstream()
        after = await js.consumer_info("R", "D")
        assert after.config == before.config
        assert after.created == before.created
        assert (after.delivered.consumer_seq, after.delivered.stream_seq) == (
            before.delivered.consumer_seq,
            before.delivered.stream_seq,
        )
        assert (after.ack_floor.consumer_seq, after.ack_floor.stream_seq) == (
            before.ack_floor.consumer_seq,
            before.ack_floor.stream_seq,
        )
        assert after.num_ack_pending == before.num_ack_pending == 3
        assert after.num_pending == before.num_pending == 4
        try:
            await js.consumer_info("R", eph.name)
            raise AssertionError("an ephemeral consumer came back after a restart")
        except NotFoundError:
            pass
        names = (await nc.request("$JS.API.CONSUMER.NAMES.R", b"", timeout=2)).data
        assert b'"consumers":["D"]' in names
        # delivery resumes where it stopped: the four never delivered (the pending ones come
        # back after their ack wait)
        sub = await js.pull_subscribe("r.1", durable="D", stream="R")
        got = await sub.fetch(10, timeout=1)
        assert [m.metadata.sequence.stream for m in got] == [14, 16, 18, 20]
        assert [m.metadata.sequence.consumer for m in got] == [7, 8, 9, 10]
        await nc.close()
    finally:
        q.stop(signal.SIGKILL)
