"""AckSync means durable: the confirmation of an ack with a reply (nats-py's ``ack_sync``, the
double ack) leaves only once the consumer state covering the ack is on disk.

Checked on the files themselves: as soon as ``ack_sync`` returns, the durable consumer's
``o.dat`` (read with the store's own reader) already holds the ack, with the default group
commit and with ``sync_interval`` (where the stream's own sync is asked for first, as the state
may only cover messages the stream has synced). Plain acks stay paced and cheap; a memory
stream's consumer confirms at once. The crash itself is ``tests/faults/test_consumer_acksync.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, StorageType

import jetpy
from jetpy.store.base import ConsumerState
from jetpy.store.consumer_state import read_consumer_state

pytestmark = pytest.mark.asyncio


def _state(store_dir: Path, stream: str, consumer: str) -> ConsumerState:
    path = store_dir / "jetstream" / "$G" / "streams" / stream / "obs" / consumer / "o.dat"
    st = read_consumer_state(path)
    assert st is not None, f"{path} does not exist"
    return st


def _covers(st: ConsumerState, seq: int) -> bool:
    """Does the written state say stream sequence ``seq`` is acknowledged?"""
    return seq <= st.delivered_stream_seq and seq not in st.pending


async def _acks_are_on_disk_when_confirmed(store_dir: Path, sync_interval: float | None = None) -> None:
    async with jetpy.Server(port=0, store_dir=str(store_dir), sync_interval=sync_interval) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="A", subjects=["a"])
        for i in range(60):
            await js.publish("a", b"%d" % i)
        await js.add_consumer("A", ConsumerConfig(durable_name="D", ack_policy=AckPolicy.EXPLICIT))
        sub = await js.pull_subscribe("a", durable="D", stream="A")
        msgs = await sub.fetch(60, timeout=2)
        # one at a time: each confirmation finds its own ack on disk
        for m in msgs[:10]:
            await m.ack_sync()
            assert _covers(_state(store_dir, "A", "D"), m.metadata.sequence.stream)
        # many at once (one state write confirms them all): every one is on disk when it returns
        await asyncio.gather(*(m.ack_sync() for m in msgs[10:50]))
        st = _state(store_dir, "A", "D")
        assert all(_covers(st, m.metadata.sequence.stream) for m in msgs[10:50])
        # the ones never acked are still pending on disk
        assert sorted(st.pending) == [m.metadata.sequence.stream for m in msgs[50:]]
        # a repeated AckSync (already acked; nats-py refuses to send it twice) is confirmed too
        assert (await nc.request(msgs[0].reply, b"", timeout=2)).data == b""
        await nc.close()


async def test_ack_sync_is_confirmed_after_the_state_covering_it_is_written(tmp_path: Path) -> None:
    await _acks_are_on_disk_when_confirmed(tmp_path / "js")


async def test_ack_sync_waits_for_the_stream_sync_with_sync_interval(tmp_path: Path) -> None:
    """With ``sync_interval`` the messages themselves are synced only every 2 minutes: an AckSync
    asks for the stream's sync at once and is confirmed by the state written after it (a state
    may never cover a message the stream has not synced)."""
    await _acks_are_on_disk_when_confirmed(tmp_path / "js", sync_interval=120.0)


async def test_memory_stream_consumer_confirms_at_once(tmp_path: Path) -> None:
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="M", subjects=["m"], storage=StorageType.MEMORY)
        await js.publish("m", b"x")
        sub = await js.pull_subscribe("m", durable="D", stream="M")
        (msg,) = await sub.fetch(1, timeout=2)
        await msg.ack_sync()
        info = await js.consumer_info("M", "D")
        assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 1
        await nc.close()


async def test_a_forged_ack_sync_is_confirmed_without_waiting_or_syncing(tmp_path: Path) -> None:
    """An AckSync on an ack subject naming a sequence never delivered (past the stream's end)
    changes nothing: it is confirmed by the next state write, and never waits for (or keeps
    asking for) a stream sync that could not cover it."""
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="A", subjects=["a"])
        await js.publish("a", b"x")
        await js.add_consumer("A", ConsumerConfig(durable_name="D", ack_policy=AckPolicy.EXPLICIT))
        assert srv.jetstream is not None
        fsyncs = srv.jetstream.fsync_seconds.count
        reply = await nc.request("$JS.ACK.A.D.1.999999.999999.0.0", b"", timeout=2)
        assert reply.data == b""
        await asyncio.sleep(0.3)
        assert srv.jetstream.fsync_seconds.count - fsyncs <= 1  # no loop of stream commits
        info = await js.consumer_info("A", "D")
        assert info.num_pending == 1 and info.ack_floor.stream_seq == 0
        await nc.close()
