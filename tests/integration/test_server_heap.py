"""The server's C heap during bulk reads (``jetpy.heap``): a reply's ~1 MiB buffers reuse pages
the process already has, where glibc's defaults would have the kernel zero and map every page of
every reply anew. Counted as the server process's minor page faults while it serves a 16 MiB
read."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import nats
import pytest

from conftest import JETPY_SERVER, Proc, start_process
from jetpy.spark.bulk import read_bulk
from jetpy.spark.options import ConnOptions
from jetpy.spark.wire import Wire

pytestmark = pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's malloc only"
)

MSGS = 4096
PAYLOAD = b"p" * 4096


def _minflt(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=2000)
    await js.add_stream(name="HEAP", subjects=["heap.>"])
    for i in range(MSGS):
        await js.publish_async(f"heap.{i % 4}", PAYLOAD)
    await js.publish_async_completed()
    await nc.close()


def _read_faults(p: Proc) -> list[int]:
    """The server's page faults while serving the whole stream, read by read (four reads)."""
    asyncio.run(_fill(p.url))
    w = Wire(ConnOptions(servers=(p.url,)))
    try:
        counts = []
        for _ in range(4):
            before = _minflt(p.popen.pid)
            n = sum(c.header.count for c in read_bulk(w, "HEAP", 1, MSGS, (), 8 << 20, 1024))
            assert n == MSGS
            counts.append(_minflt(p.popen.pid) - before)
        return counts
    finally:
        w.close()


def _server(tmp_path: Path, name: str) -> Proc:
    return start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp_path / name)],
        tmp_path / f"{name}.log",
    )


def test_bulk_reads_reuse_the_servers_pages(tmp_path: Path) -> None:
    kept = _server(tmp_path, "kept")
    try:
        faults = _read_faults(kept)
    finally:
        kept.stop(signal.SIGKILL)
    # 16 MiB served, copied four times on its way out: 4,096 pages for each copy made in
    # buffers new to the process (glibc's defaults: 500 to 4,000 faults a read measured, the
    # count depending on how its adapting thresholds stood); with the heap kept, none once the
    # heap has grown to what a read needs (by the second or third read)
    assert min(faults[1:]) < 64, faults
