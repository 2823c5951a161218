"""Mirrors and sources as processes: jetpy-server killed with -9 mid-copy and started again
finishes the copy complete and identical, with zero messages lost and zero copied twice
(reported as exact sequence lists), and a mirror far behind its origin copies in bounded memory."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig

from conftest import JETPY_SERVER, Proc, start_process

N = 100_000
PAYLOAD = 200  # bytes: copying 100k messages then takes long enough to be interrupted


def tag(stream: str, seq: int) -> bytes:
    """The start of the payload of message ``seq`` published into ``stream``."""
    return b"%s-%010d" % (stream.encode()[:4].ljust(4, b"_"), seq)


def _jetpy(store: Path, log: Path) -> Proc:
    return start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], log)


async def api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(f"$JS.API.{subject}", data, timeout=10)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


async def count(nc: Client, stream: str) -> int:
    return int((await api(nc, f"STREAM.INFO.{stream}"))["state"]["messages"])


async def fill(nc: Client, stream: str, subject: str, n: int) -> None:
    """``n`` messages into ``stream`` (plain publishes, then waiting until all are stored)."""
    await api(nc, f"STREAM.CREATE.{stream}", {"name": stream, "subjects": [f"{subject}.>"]})
    pad = b"." * (PAYLOAD - 16)
    for i in range(n):
        await nc.publish(f"{subject}.{i % 16}", tag(stream, i + 1) + pad)
        if i % 5000 == 4999:
            await nc.flush()
    await nc.flush()
    await until_holds(nc, stream, n)


async def kill_mid_copy(p: Proc, nc: Client, stream: str, total: int) -> int:
    """Kill -9 the server once ``stream`` holds some but not all of ``total``; how many it held."""
    deadline = time.monotonic() + 60
    while True:
        n = await count(nc, stream)
        if n >= total // 10:
            p.stop(signal.SIGKILL)
            return n
        assert time.monotonic() < deadline, f"{stream} did not start copying"
        await asyncio.sleep(0.005)


async def read_all(nc: Client, stream: str, expect: int) -> list[tuple[int, str, bytes, int, str]]:
    """Every message of ``stream`` (seq, subject, data, timestamp, Nats-Stream-Source) through a
    pull consumer, in order."""
    js = nc.jetstream()
    sub = await js.pull_subscribe("", stream=stream, config=ConsumerConfig(ack_policy=AckPolicy.NONE))
    out: list[tuple[int, str, bytes, int, str]] = []
    while len(out) < expect:
        for m in await sub.fetch(2000, timeout=10):
            ts = int(m.reply.split(".")[7])  # the ack reply's timestamp, in nanoseconds
            src = (m.headers or {}).get("Nats-Stream-Source", "")
            out.append((m.metadata.sequence.stream, m.subject, m.data, ts, src))
    await sub.unsubscribe()
    return out


async def until_holds(nc: Client, stream: str, n: int, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while (got := await count(nc, stream)) < n:
        assert time.monotonic() < deadline, f"{stream} holds {got} of {n}"
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    assert await count(nc, stream) == n  # and not one more


async def test_kill9_mid_mirror_of_100k_then_complete_and_identical(tmp_path: Path) -> None:
    store = tmp_path / "store"
    p = _jetpy(store, tmp_path / "a.log")
    try:
        nc = await nats.connect(p.url, allow_reconnect=False)
        await fill(nc, "O", "o", N)
        await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
        held = await kill_mid_copy(p, nc, "M", N)
        assert 0 < held < N, held  # the kill came mid-copy
        print(f"mirror: killed with {held} of {N} copied")
        await nc.close()
    finally:
        p.stop(signal.SIGKILL)
    q = _jetpy(store, tmp_path / "b.log")
    try:
        nc = await nats.connect(q.url)
        await until_holds(nc, "M", N)
        mirror, origin = await read_all(nc, "M", N), await read_all(nc, "O", N)
        seqs = [m[0] for m in mirror]
        lost = sorted(set(range(1, N + 1)) - set(seqs))
        twice = sorted(s for s, c in Counter(seqs).items() if c > 1)
        differ = [m[0] for m, o in zip(mirror, origin, strict=True) if m[:4] != o[:4]]
        assert (lost, twice, differ) == ([], [], []), (lost[:20], twice[:20], differ[:20])
        print(f"mirror after restart: lost {lost}, twice {twice}, different {differ}")
        info = await api(nc, "STREAM.INFO.M")
        assert (
            info["state"]["first_seq"],
            info["state"]["last_seq"],
            info["state"].get("num_deleted", 0),
        ) == (
            1,
            N,
            0,
        )
        await nc.close()
    finally:
        q.stop(signal.SIGKILL)


async def test_kill9_mid_sourcing_of_two_streams_copies_each_message_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    half = N // 2
    p = _jetpy(store, tmp_path / "a.log")
    try:
        nc = await nats.connect(p.url, allow_reconnect=False)
        await fill(nc, "A", "a", half)
        await fill(nc, "B", "b", half)
        await api(nc, "STREAM.CREATE.S", {"name": "S", "sources": [{"name": "A"}, {"name": "B"}]})
        held = await kill_mid_copy(p, nc, "S", N)
        assert 0 < held < N, held
        print(f"sources: killed with {held} of {N} copied")
        await nc.close()
    finally:
        p.stop(signal.SIGKILL)
    q = _jetpy(store, tmp_path / "b.log")
    try:
        nc = await nats.connect(q.url)
        await until_holds(nc, "S", N)
        copies = await read_all(nc, "S", N)
        origins = Counter((src.split(" ")[0], int(src.split(" ")[1])) for *_, src in copies)
        want = {(name, s) for name in ("A", "B") for s in range(1, half + 1)}
        lost = sorted(want - set(origins))
        twice = sorted(k for k, c in origins.items() if c > 1)
        assert (lost, twice) == ([], []), (lost[:20], twice[:20])
        print(f"sources after restart: lost {lost}, twice {twice}")
        assert [c[0] for c in copies] == list(range(1, N + 1))  # its own numbers, no gaps
        # and the payloads are the origins' (spot checks of both)
        wrong = [
            c[4] for c in copies if not c[2].startswith(tag(c[4].split(" ")[0], int(c[4].split(" ")[1])))
        ]
        assert wrong == []
        await nc.close()
    finally:
        q.stop(signal.SIGKILL)


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


async def test_a_mirror_far_behind_copies_in_bounded_memory(tmp_path: Path) -> None:
    """A mirror 100 MB behind its origin: what it has not copied stays in the origin's store,
    never in the server's memory (the origin's consumer waits on flow control, 512 KB at most
    in flight, and every message is stored as it arrives)."""
    store = tmp_path / "store"
    n, size = 100_000, 1000
    p = _jetpy(store, tmp_path / "a.log")
    try:
        nc = await nats.connect(p.url, allow_reconnect=False)
        await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        pad = b"x" * size
        for i in range(n):
            await nc.publish(f"o.{i % 10}", pad)
            if i % 2000 == 1999:
                await nc.flush()
        await nc.flush()
        await until_holds(nc, "O", n)
        await nc.close()
    finally:
        p.stop()
    q = _jetpy(store, tmp_path / "b.log")  # started again: nothing of O in memory
    try:
        nc = await nats.connect(q.url)
        await asyncio.sleep(0.5)
        base = peak = rss_mb(q.popen.pid)
        await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
        deadline = time.monotonic() + 120
        slowest = 0.0  # another client's round trip meanwhile
        while await count(nc, "M") < n:
            peak = max(peak, rss_mb(q.popen.pid))
            assert time.monotonic() < deadline
            t0 = time.perf_counter()
            await nc.flush()
            slowest = max(slowest, time.perf_counter() - t0)
            await asyncio.sleep(0.01)
        print(
            f"mirroring {n * size // 1_000_000} MB: RSS {base} MB before, {peak} MB at most; "
            f"slowest round trip meanwhile {slowest * 1000:.1f} ms"
        )
        assert peak - base < 48, (base, peak)
        assert slowest < 0.25  # copying goes a flow-control window per loop turn
        await nc.close()
    finally:
        q.stop(signal.SIGKILL)
