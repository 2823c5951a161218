"""A large stream backed up and restored: every message comes back, and the server keeps serving.

A stream of ``SIZE`` bytes (4 KiB messages on 16 subjects, every tenth with headers, a few
deleted) is filled on one jetpy server, backed up with the client `jetpy stream backup` uses,
restored on a second server, and both servers' stores are then compared message by message
(sequence, subject, headers, payload, timestamp) once they are stopped. While the snapshot is
sent and while the restore is applied, another client's round trips stay under 100 ms.

`make test` runs the 48 MiB slice; the 1 GiB run is ``make test-backup-1g`` (``JETPY_BACKUP_1G=1``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, Proc, cpu_waits, start_process, waited_since
from jetpy.cli.backup_protocol import backup_stream, restore_stream
from jetpy.store import FileStore, StoreConfig

MAX_RTT = 0.100
MSG = 4096
SUBJECTS = 16
DELETED = (2, 3, 1000, 1001, 1002)

SIZES = [
    pytest.param(48 * 1024 * 1024, id="48MiB"),
    pytest.param(
        1024 * 1024 * 1024,
        id="1GiB",
        marks=[
            pytest.mark.skipif(
                not os.environ.get("JETPY_BACKUP_1G"), reason="the 1 GiB run: make test-backup-1g"
            ),
            pytest.mark.timeout(3600),
        ],
    ),
]


@asynccontextmanager
async def round_trips(nc: Client, pid: int) -> AsyncIterator[list[float]]:
    """``nc``'s PING/PONG round trips with the server ``pid`` for as long as the block runs, each
    less the time the server's threads waited meanwhile for a CPU other processes had (conftest's
    waited_since: tests run beside others)."""
    rtts: list[float] = []
    done = asyncio.Event()

    async def ping() -> None:
        while not done.is_set():
            waited, start = cpu_waits(pid), time.perf_counter()
            await nc.flush(timeout=60)
            rtts.append(time.perf_counter() - start - waited_since(pid, waited))
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ping())
    try:
        yield rtts
    finally:
        done.set()
        await task


async def fill(nc: Client, total: int) -> int:
    """Publish ``total`` bytes of messages without acks (fast), then wait until all are stored."""
    js = nc.jetstream()
    await js.add_stream(name="BIG", subjects=["big.>"])
    n = total // MSG
    for i in range(n):
        body = os.urandom(MSG)  # incompressible: the archive is as large as the stream
        if i % 10 == 0:
            await nc.publish(f"big.{i % SUBJECTS}", body, headers={"N": str(i)})
        else:
            await nc.publish(f"big.{i % SUBJECTS}", body)
        if i % 2000 == 0:
            await nc.flush(timeout=60)
    await nc.flush(timeout=60)
    for _ in range(6000):
        if (await js.stream_info("BIG")).state.messages == n:
            break
        await asyncio.sleep(0.05)
    for seq in DELETED:
        await js.delete_msg("BIG", seq)
    return n


def server(tmp_path: Path, name: str) -> Proc:
    return start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp_path / name)],
        tmp_path / f"{name}.log",
    )


def compare_stores(a: Path, b: Path, n: int) -> None:
    """The two stopped servers' stores hold the same messages, down to the nanosecond."""
    sa = FileStore(a / "jetstream" / "$G" / "streams" / "BIG", StoreConfig("BIG"))
    sb = FileStore(b / "jetstream" / "$G" / "streams" / "BIG", StoreConfig("BIG"))
    try:
        assert sa.state() == sb.state()
        assert sa.state().msgs == n - len(DELETED)
        seq = count = 0
        while True:
            xa = sa.load_next_batch("", seq + 1, 2000)
            xb = sb.load_next_batch("", seq + 1, 2000)
            assert xa == xb
            if not xa:
                break
            count += len(xa)
            seq = xa[-1].seq
        assert count == n - len(DELETED)
    finally:
        sa.stop()
        sb.stop()


@pytest.mark.parametrize("size", SIZES)
async def test_a_large_stream_restores_every_message_while_the_server_serves(
    size: int, tmp_path: Path
) -> None:
    one, two = server(tmp_path, "one"), server(tmp_path, "two")
    try:
        nc, other = await nats.connect(one.url), await nats.connect(one.url)
        nc2, other2 = await nats.connect(two.url), await nats.connect(two.url)
        n = await fill(nc, size)
        t0 = time.perf_counter()
        async with round_trips(other, one.popen.pid) as rtts:
            result = await backup_stream(nc, "BIG", tmp_path / "bk")
        backup_s = time.perf_counter() - t0
        assert result.bytes > size // 2 and max(rtts) < MAX_RTT, (len(rtts), max(rtts))
        backup_rtt = max(rtts)
        t0 = time.perf_counter()
        async with round_trips(other2, two.popen.pid) as rtts:
            info = (await restore_stream(nc2, tmp_path / "bk", chunk_size=1024 * 1024)).info
        restore_s = time.perf_counter() - t0
        assert info["state"]["messages"] == n - len(DELETED)
        assert max(rtts) < MAX_RTT, (len(rtts), max(rtts))
        print(
            json.dumps(
                {
                    "size": size,
                    "backup_s": round(backup_s, 2),
                    "backup_max_rtt": round(backup_rtt, 4),
                    "restore_s": round(restore_s, 2),
                    "restore_max_rtt": round(max(rtts), 4),
                }
            )
        )
        for c in (nc, other, nc2, other2):
            await c.close()
    finally:
        one.stop(signal.SIGTERM)
        two.stop(signal.SIGTERM)
    compare_stores(tmp_path / "one", tmp_path / "two", n)
