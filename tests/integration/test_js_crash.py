"""Crash tests: jetpy-server killed with SIGKILL loses no acknowledged message and no delete."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

from conftest import JETPY_SERVER, Proc, start_process


def _jetpy(store: Path, log: Path) -> Proc:
    """jetpy-server as a process on a fixed store dir, so a test can kill and restart it."""
    return start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], log)


async def test_kill9_while_publishing_keeps_every_acked_message(tmp_path: Path) -> None:
    store = tmp_path / "store"
    p = _jetpy(store, tmp_path / "a.log")
    acked: list[int] = []
    enough = asyncio.Event()
    try:
        nc = await nats.connect(p.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="C", subjects=["c"])

        async def publisher() -> None:
            i = 0
            while True:
                futs = [await js.publish_async("c", str(i + k).encode()) for k in range(50)]
                for f in futs:
                    ack = await f
                    acked.append(ack.seq)
                if len(acked) >= 2000:
                    enough.set()
                i += 50

        task = asyncio.create_task(publisher())
        await asyncio.wait_for(enough.wait(), 60)
        p.stop(signal.SIGKILL)  # mid-stream: some publishes are in flight, unacked
        task.cancel()
        try:
            await task
        except BaseException:  # the connection died under it: expected
            pass
        await nc.close()
    finally:
        p.stop(signal.SIGKILL)
    q = _jetpy(store, tmp_path / "b.log")
    try:
        nc = await nats.connect(q.url)
        js = nc.jetstream()
        si = await js.stream_info("C")
        assert si.state.last_seq >= max(acked)
        assert si.state.messages >= len(acked)
        for seq in (acked[0], acked[len(acked) // 2], acked[-1]):
            msg = await js.get_msg("C", seq)
            assert msg.seq == seq
        # a new publish never reuses an acknowledged sequence
        assert (await js.publish("c", b"after")).seq > max(acked)
        await nc.close()
    finally:
        q.stop(signal.SIGKILL)


async def test_kill9_after_delete_and_purge_keeps_them_deleted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    p = _jetpy(store, tmp_path / "a.log")
    try:
        nc = await nats.connect(p.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="K", subjects=["k.*"])
        for i in range(20):
            await js.publish(f"k.{i % 2}", str(i).encode())
        await js.delete_msg("K", 3)  # seq 3 is i=2, on k.0
        await js.purge_stream("K", subject="k.1")
        await nc.close()
    finally:
        p.stop(signal.SIGKILL)
    q = _jetpy(store, tmp_path / "b.log")
    try:
        nc = await nats.connect(q.url)
        js = nc.jetstream()
        si = await js.stream_info("K", subjects_filter=">")
        assert si.state.subjects == {"k.0": 9}
        try:
            await js.get_msg("K", 3)
            raise AssertionError("deleted message came back after a crash")
        except NotFoundError:
            pass
        await nc.close()
    finally:
        q.stop(signal.SIGKILL)
