"""No request blocks the loop: a second client is served within 100 ms while a stream with
10,000 subjects is created, updated and deleted, and while a consumer with 100,000 pending acks
is inspected, redelivers, serves a 100,000-message pull request and is deleted (jetpy as a
subprocess, as operators run it).

Before subject checks used a trie and large configs were worked on in slices, the create held
every other client for 20-25 s and the update for ~50 s (pairwise overlap checks). The streams
here are memory streams, so what is measured is the work on subjects, not disk latency.

A round trip is measured less the time the server's threads waited for a CPU that other processes
had (round_trip): the tests run beside others, and what they check is the server's own work.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from asyncio.subprocess import PIPE, Process
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, Proc, cpu_waits, free_port, start_process, waited_since

# one after another on one test worker (make pytest): each is heavy on the CPU (up to a million
# messages published), and two at once would measure each other
pytestmark = pytest.mark.xdist_group("js-api-latency")

MAX_RTT = 0.100  # what another client's round trip may take while the big request is worked on
PING_EVERY = 0.005


async def round_trip(nc: Client, pid: int) -> float:
    """One PING/PONG of ``nc`` with the server ``pid``: its wall time less the time the server's
    loop or one of its threads (or this test's, whichever is longer) waited meanwhile for a CPU
    taken by the machine's other work (other tests run beside this one). What is left is the time the server's own work (its computing, a blocking call,
    the GIL held by its threads) kept the answer waiting."""
    me = os.getpid()
    waited, waited_here = cpu_waits(pid), cpu_waits(me)
    start = time.perf_counter()
    await nc.flush(timeout=60)
    took = time.perf_counter() - start
    # the longest of the waits (the server's threads: its loop, or a worker holding the GIL
    # the loop needs; this test's): they may overlap
    return took - max(waited_since(pid, waited), waited_since(me, waited_here))


@asynccontextmanager
async def round_trips(nc: Client, pid: int) -> AsyncIterator[list[float]]:
    """Measure ``nc``'s round trips (see round_trip) for as long as the block runs."""
    rtts: list[float] = []
    done = asyncio.Event()

    async def ping() -> None:
        while not done.is_set():
            rtts.append(await round_trip(nc, pid))
            await asyncio.sleep(PING_EVERY)

    task = asyncio.create_task(ping())
    await asyncio.sleep(0.05)
    try:
        yield rtts
    finally:
        await asyncio.sleep(0.05)
        done.set()
        await task


async def api(nc: Client, subject: str, body: Any = b"") -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return json.loads((await nc.request(subject, raw, timeout=60)).data)


async def while_served(other: Client, pid: int, work: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    async with round_trips(other, pid) as rtts:
        result = await work()
    assert rtts, "the other client was never served"
    return result, max(rtts)


async def test_other_clients_are_served_during_a_10k_subject_create_update_delete(
    jetpy_proc: Proc,
) -> None:
    pid = jetpy_proc.popen.pid
    nc = await nats.connect(jetpy_proc.url)
    other = await nats.connect(jetpy_proc.url)
    # literal subjects and wildcards on either side: both kinds of overlap check
    subjects = [
        f"orders.{i}.*" if i % 3 == 1 else f"events.*.{i}" if i % 3 else f"s.{i}" for i in range(10_000)
    ]
    cfg = {"name": "BIG", "subjects": subjects, "storage": "memory"}

    created, rtt = await while_served(other, pid, lambda: api(nc, "$JS.API.STREAM.CREATE.BIG", cfg))
    assert "error" not in created and len(created["config"]["subjects"]) == 10_000
    assert rtt < MAX_RTT, f"create: {rtt * 1000:.0f} ms"

    updated, rtt = await while_served(
        other,
        pid,
        lambda: api(nc, "$JS.API.STREAM.UPDATE.BIG", {**cfg, "subjects": [*subjects[1:], "new.>"]}),
    )
    assert "error" not in updated and updated["config"]["subjects"][-1] == "new.>"
    assert rtt < MAX_RTT, f"update: {rtt * 1000:.0f} ms"
    # the update took effect: the removed subject is no longer stored, the new one is
    assert (await nc.request("new.x", b"1", timeout=5)).data == b'{"stream":"BIG", "seq":1}'
    assert (await nc.request("events.x.2", b"2", timeout=5)).data == b'{"stream":"BIG", "seq":2}'
    try:
        await nc.request("s.0", b"3", timeout=0.5)
        raise AssertionError("s.0 was removed from the stream")
    except nats.errors.NoRespondersError:
        pass

    # a conflicting stream is still refused, naming nothing, as nats-server
    clash = await api(nc, "$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["orders.4.x"]})
    assert clash["error"]["err_code"] == 10065

    deleted, rtt = await while_served(other, pid, lambda: api(nc, "$JS.API.STREAM.DELETE.BIG"))
    assert deleted == {"type": "io.nats.jetstream.api.v1.stream_delete_response", "success": True}
    assert rtt < MAX_RTT, f"delete: {rtt * 1000:.0f} ms"
    await nc.close()
    await other.close()


async def test_requests_behind_a_large_one_are_answered_in_order(jetpy_proc: Proc) -> None:
    nc = await nats.connect(jetpy_proc.url)
    subjects = [f"q.{i}" for i in range(5_000)]
    big = nc.request(
        "$JS.API.STREAM.CREATE.Q",
        json.dumps({"name": "Q", "subjects": subjects, "storage": "memory"}).encode(),
        timeout=60,
    )
    info = nc.request("$JS.API.STREAM.INFO.Q", b"", timeout=60)  # sent after: sees the stream
    overlapping = nc.request(
        "$JS.API.STREAM.CREATE.R", json.dumps({"name": "R", "subjects": ["q.*"]}).encode(), timeout=60
    )
    created, got, refused = (json.loads(m.data) for m in await asyncio.gather(big, info, overlapping))
    assert "error" not in created
    assert got["config"]["name"] == "Q" and len(got["config"]["subjects"]) == 5_000
    assert refused["error"]["err_code"] == 10065
    await nc.close()


# A subscriber in its own process: 100,000 deliveries handled in the test's process would delay
# the other client's round trips there, not in the server. Counts messages on SUBJECT until
# TARGET, after publishing REQUEST (if any) with SUBJECT as its reply; then exits.
_SINK = """
import asyncio, sys
import nats

async def main(url, subject, target, request, body):
    nc = await nats.connect(url)
    done, n = asyncio.Event(), 0

    async def count(m):
        nonlocal n
        n += 1
        if n >= target:
            done.set()

    await nc.subscribe(subject, cb=count, pending_msgs_limit=-1, pending_bytes_limit=-1)
    if request:
        await nc.publish(request, body.encode(), reply=subject)
    await nc.flush()
    print("ready", flush=True)
    await done.wait()
    await nc.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]))
"""


async def sink(
    procs: list[Process], url: str, subject: str, target: int, request: str = "", body: str = ""
) -> Process:
    """Start a subscriber process (see ``_SINK``, added to ``procs`` for the clean-up); returns
    once it is subscribed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SINK, url, subject, str(target), request, body, stdout=PIPE
    )
    procs.append(proc)
    assert proc.stdout is not None
    assert await proc.stdout.readline() == b"ready\n"
    return proc


async def test_other_clients_are_served_while_a_consumer_with_100k_pending_is_worked_on(
    jetpy_proc: Proc,
) -> None:
    """Consumer operations whose cost grows with pending acks and redeliveries: INFO of a
    consumer with 100,000 pending acks, 100,000 ack waits running out together (a redelivery
    storm), a pull request for 100,000 messages, and deleting consumers of an interest stream
    (the messages nobody wants any more are swept: here 100,000). Each keeps another client's
    round trip under 100 ms (they used to hold every client for 0.3-0.7 s)."""
    procs: list[Process] = []
    try:
        await _pending_100k(jetpy_proc.url, jetpy_proc.popen.pid, procs)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def _pending_100k(url: str, pid: int, procs: list[Process]) -> None:
    n = 100_000
    nc = await nats.connect(url)
    other = await nats.connect(url)
    await api(nc, "$JS.API.STREAM.CREATE.I", {"name": "I", "subjects": ["i"], "retention": "interest"})
    push = {"durable_name": "D", "ack_policy": "explicit", "deliver_subject": "dlv", "max_ack_pending": -1}
    await api(
        nc, "$JS.API.CONSUMER.CREATE.I.D", {"stream_name": "I", "config": {**push, "ack_wait": 2 * 10**9}}
    )
    pull = {"durable_name": "P", "ack_policy": "explicit", "max_ack_pending": -1}
    await api(nc, "$JS.API.CONSUMER.CREATE.I.P", {"stream_name": "I", "config": pull})
    delivered = await sink(procs, url, "dlv", 2 * n)  # every message, then all of them once more
    for i in range(n):
        await nc.publish("i", b"x" * 16)
        if i % 10_000 == 0:
            await nc.flush()
    await nc.flush()
    info = await api(nc, "$JS.API.CONSUMER.INFO.I.D")
    while info["num_ack_pending"] < n:  # D holds 100,000 pending acks
        info = await api(nc, "$JS.API.CONSUMER.INFO.I.D")

    info, rtt = await while_served(other, pid, lambda: api(nc, "$JS.API.CONSUMER.INFO.I.D"))
    assert info["num_ack_pending"] == n
    assert rtt < MAX_RTT, f"info: {rtt * 1000:.0f} ms"

    _, rtt = await while_served(other, pid, delivered.wait)  # the ack wait runs out for all at once
    assert rtt < MAX_RTT, f"redelivery of 100k: {rtt * 1000:.0f} ms"

    body = json.dumps({"batch": n, "expires": 60_000_000_000})
    pulled = await sink(procs, url, "inbox", n, "$JS.API.CONSUMER.MSG.NEXT.I.P", body)
    _, rtt = await while_served(other, pid, pulled.wait)
    assert rtt < MAX_RTT, f"a pull request for 100k: {rtt * 1000:.0f} ms"

    # P still wants all 100,000: deleting D sweeps them all and keeps them
    deleted, rtt = await while_served(other, pid, lambda: api(nc, "$JS.API.CONSUMER.DELETE.I.D"))
    assert deleted["success"] is True
    assert rtt < MAX_RTT, f"delete of D: {rtt * 1000:.0f} ms"
    assert (await api(nc, "$JS.API.STREAM.INFO.I"))["state"]["messages"] == n
    # nobody wants them once P is gone: the sweep removes them before the reply
    deleted, rtt = await while_served(other, pid, lambda: api(nc, "$JS.API.CONSUMER.DELETE.I.P"))
    assert deleted["success"] is True
    assert rtt < MAX_RTT, f"delete of P: {rtt * 1000:.0f} ms"
    assert (await api(nc, "$JS.API.STREAM.INFO.I"))["state"]["messages"] == 0
    await nc.close()
    await other.close()


async def test_other_clients_are_served_while_a_million_message_stream_is_purged(jetpy_proc: Proc) -> None:
    """Lowered limits and purges of a file stream of 1M messages work in slices and sync off the
    loop: before, the update held every other client for ~0.5 s and a purge by subject of half
    the stream for ~0.7-0.8 s."""
    pid = jetpy_proc.popen.pid
    nc = await nats.connect(jetpy_proc.url)
    other = await nats.connect(jetpy_proc.url)
    js = nc.jetstream()
    await js.add_stream(name="P", subjects=["p.*"])
    await js.add_consumer("P", durable_name="D")
    payload = bytes(64)
    for i in range(1_000_000):
        await nc.publish(f"p.{i % 2}", payload)
        if not i % 20_000:
            await nc.flush(timeout=60)
    await nc.flush(timeout=60)
    deadline = time.monotonic() + 60
    while (await js.stream_info("P")).state.messages < 1_000_000:
        assert time.monotonic() < deadline, "the stream did not fill up"
        await asyncio.sleep(0.1)
    # lowered limits remove the oldest quarter
    cfg = {"name": "P", "subjects": ["p.*"], "max_msgs": 750_000}
    resp, rtt = await while_served(other, pid, partial(api, nc, "$JS.API.STREAM.UPDATE.P", cfg))
    assert resp["state"]["messages"] == 750_000 and resp["state"]["first_seq"] == 250_001
    assert rtt < MAX_RTT, f"update: {rtt * 1000:.0f} ms"
    for body, purged, left in [
        ({"filter": "p.1"}, 375_000, 375_000),  # one removal (and tombstone) per message
        ({"keep": 100_000}, 275_000, 100_000),  # the head compacted away
        ({}, 100_000, 0),  # everything
    ]:
        resp, rtt = await while_served(other, pid, partial(api, nc, "$JS.API.STREAM.PURGE.P", body))
        assert resp == {
            "type": "io.nats.jetstream.api.v1.stream_purge_response",
            "success": True,
            "purged": purged,
        }
        assert rtt < MAX_RTT, f"purge {body}: {rtt * 1000:.0f} ms"
        info = await js.stream_info("P")
        assert (info.state.messages, info.state.last_seq) == (left, 1_000_000)
    await nc.close()
    await other.close()


async def test_connected_clients_are_served_while_a_large_stream_is_recovered(tmp_path: Path) -> None:
    """Streams are read back at start in a worker thread: a client that connected before
    JetStream was ready is served meanwhile. Before, the loop held every connection until the
    last stream was read back (seconds for a million messages)."""
    store = tmp_path / "store"
    p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], tmp_path / "a.log"
    )
    try:
        nc = await nats.connect(p.url)
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.*"])
        for i in range(300_000):
            await nc.publish(f"r.{i % 2}", bytes(64))
            if not i % 20_000:
                await nc.flush(timeout=60)
        await nc.flush(timeout=60)
        assert (await js.stream_info("R")).state.messages == 300_000  # core publishes, then a request
        await nc.close()
    finally:
        p.stop()
    port = free_port()
    log = tmp_path / "b.log"
    popen = start_on(port, store, log)
    try:
        deadline = time.monotonic() + 30
        while True:  # as soon as the port is open
            assert time.monotonic() < deadline and popen.poll() is None, log.read_text()
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.002)
                continue
            w.close()
            break
        nc = await nats.connect(f"nats://127.0.0.1:{port}", connect_timeout=10, allow_reconnect=False)
        rtts: list[float] = []
        while b"Server is ready" not in log.read_bytes():
            rtts.append(await round_trip(nc, popen.pid))
            await asyncio.sleep(PING_EVERY)
        assert len(rtts) >= 5, f"served only {len(rtts)} round trips while the stream was read back"
        assert max(rtts) < MAX_RTT, f"{max(rtts) * 1000:.0f} ms"
        assert b"Restored 300000 messages for stream 'R'" in log.read_bytes()
        await nc.close()
    finally:
        popen.send_signal(signal.SIGTERM)
        popen.wait(10)


def start_on(port: int, store: Path, log: Path) -> subprocess.Popen[bytes]:
    """jetpy-server on a known port (its listener opens before JetStream is ready)."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [*JETPY_SERVER, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def _fill(nc: Client, stream: str, subject: str, n: int) -> None:
    """Publish ``n`` 64-byte messages on ``subject``.0/.1 and wait until the stream holds them."""
    js = nc.jetstream()
    for i in range(n):
        await nc.publish(f"{subject}.{i % 2}", bytes(64))
        if not i % 20_000:
            await nc.flush(timeout=60)
    await nc.flush(timeout=60)
    deadline = time.monotonic() + 60
    while (await js.stream_info(stream)).state.messages < n:
        assert time.monotonic() < deadline, "the stream did not fill up"
        await asyncio.sleep(0.05)


async def test_other_clients_are_served_while_a_lowered_max_age_removes_300k(jetpy_proc: Proc) -> None:
    """A lowered ``max_age`` that puts 300,000 messages past it removes them a slice at a time
    while the update is worked on; another client's round trip stays under 100 ms."""
    pid = jetpy_proc.popen.pid
    nc = await nats.connect(jetpy_proc.url)
    other = await nats.connect(jetpy_proc.url)
    await nc.jetstream().add_stream(name="X", subjects=["x.*"])
    await _fill(nc, "X", "x", 300_000)
    await asyncio.sleep(1.1)
    cfg = {"name": "X", "subjects": ["x.*"], "max_age": 1_000_000_000}
    resp, rtt = await while_served(other, pid, partial(api, nc, "$JS.API.STREAM.UPDATE.X", cfg))
    assert resp["state"]["messages"] == 0 and resp["state"]["last_seq"] == 300_000
    assert rtt < MAX_RTT, f"update to a lower max_age: {rtt * 1000:.0f} ms"
    await nc.close()
    await other.close()


async def test_clients_are_served_while_messages_aged_out_during_a_stop_expire(tmp_path: Path) -> None:
    """The expiry timer removes at most a slice of messages per stream, then lets the loop serve
    everyone before the next: 200,000 messages that aged out while the server was stopped expire
    together at start, and a connected client's round trip stays under 100 ms throughout (the
    timer used to remove them all in one go on the loop)."""
    store = tmp_path / "store"
    p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], tmp_path / "a.log"
    )
    max_age = 8.0
    try:
        nc = await nats.connect(p.url)
        await nc.jetstream().add_stream(name="E", subjects=["e.*"], max_age=max_age)
        filled = time.monotonic()
        await _fill(nc, "E", "e", 200_000)
        assert time.monotonic() - filled < max_age - 1, "filling took longer than max_age"
        await nc.close()
    finally:
        p.stop()
    await asyncio.sleep(max(0.0, filled + max_age + 0.5 - time.monotonic()))
    port = free_port()
    log = tmp_path / "b.log"
    popen = start_on(port, store, log)
    try:
        deadline = time.monotonic() + 30
        while True:  # as soon as the port is open
            assert time.monotonic() < deadline and popen.poll() is None, log.read_text()
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.002)
                continue
            w.close()
            break
        nc = await nats.connect(f"nats://127.0.0.1:{port}", connect_timeout=10, allow_reconnect=False)
        rtts: list[float] = []
        left = -1
        while left != 0:
            assert time.monotonic() < deadline + 30, f"{left} messages still there"
            rtts.append(await round_trip(nc, popen.pid))
            if b"Server is ready" in log.read_bytes():
                left = (await nc.jetstream().stream_info("E")).state.messages
            await asyncio.sleep(PING_EVERY)
        assert max(rtts) < MAX_RTT, f"{max(rtts) * 1000:.0f} ms"
        await nc.close()
    finally:
        popen.send_signal(signal.SIGTERM)
        popen.wait(10)
