"""Core NATS benchmarks: publish only, publish/subscribe fan-out, and request/reply latency.

Owns the choreography of each core mode: connect every client first, register subscriptions and
flush them (so the server knows them before the clock starts), start the clock, run the clients
concurrently, stop each client's clock when it is done. The message count is split across
publishers (requesters); every subscriber must receive every message.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from jetpy.bench.clients import (
    Counters,
    CountingSubscriber,
    Deadline,
    connect,
    flush_timeout,
    publish_core,
)
from jetpy.bench.options import BenchOptions, ConnectSettings, Mode, split
from jetpy.bench.stats import BenchResult, ClientSample, Latency, SideStats

__all__ = ["run_core"]

REQUEST_TIMEOUT = 5.0  # seconds one request may wait for its reply before it counts as an error
REPLY_QUEUE = "jetpy-bench-repliers"  # repliers share a queue group: each request is answered once


async def _connect_all(
    stack: AsyncExitStack, settings: ConnectSettings, prefix: str, n: int, counters: Counters
) -> list[NATS]:
    conns: list[NATS] = []
    for i in range(n):
        nc = await connect(settings, f"jetpy-bench-{prefix}-{i + 1}", counters)
        stack.push_async_callback(nc.close)
        conns.append(nc)
    return conns


async def run_core(
    opts: BenchOptions, settings: ConnectSettings, counters: Counters, payload: bytes
) -> BenchResult:
    if opts.mode is Mode.REQUEST:
        return await _run_request(opts, settings, counters, payload)
    return await _run_pubsub(opts, settings, counters, payload)


async def _run_pubsub(
    opts: BenchOptions, settings: ConnectSettings, counters: Counters, payload: bytes
) -> BenchResult:
    counters.pub_target = opts.msgs
    counters.recv_target = opts.expected_received
    async with AsyncExitStack() as stack:
        sub_conns = await _connect_all(stack, settings, "sub", opts.subs, counters)
        subscribers = [CountingSubscriber(opts.msgs, counters) for _ in sub_conns]
        for nc, s in zip(sub_conns, subscribers, strict=True):
            await nc.subscribe(opts.subject, cb=s.on_msg, pending_msgs_limit=0, pending_bytes_limit=0)
            await nc.flush()
        pub_conns = await _connect_all(stack, settings, "pub", opts.pubs, counters)
        counts = split(opts.msgs, opts.pubs)
        deadline = Deadline(opts.timeout)

        start = time.perf_counter()

        async def publisher(nc: NATS, count: int) -> tuple[int, float]:
            sent = await publish_core(nc, opts.subject, payload, count, deadline, counters)
            return sent, time.perf_counter()

        pub_results = await asyncio.gather(
            *(publisher(nc, c) for nc, c in zip(pub_conns, counts, strict=True))
        )
        if subscribers:
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(s.done.wait() for s in subscribers)), deadline.remaining() + 1.0
                )
            except TimeoutError:
                counters.error("subscribers did not receive every message before the deadline")
        sub_ends = [s.end() for s in subscribers]

    pub_side = SideStats(
        clients=tuple(ClientSample(sent, end - start, opts.size) for sent, end in pub_results),
        elapsed_s=max(end for _, end in pub_results) - start,
        size=opts.size,
    )
    sub_side = None
    if subscribers:
        sub_side = SideStats(
            clients=tuple(
                ClientSample(s.count, e - start, opts.size)
                for s, e in zip(subscribers, sub_ends, strict=True)
            ),
            elapsed_s=max(sub_ends) - start,
            size=opts.size,
        )
    elapsed = max([pub_side.elapsed_s, sub_side.elapsed_s if sub_side else 0.0])
    complete = (
        counters.errors == 0 and pub_side.msgs == opts.msgs and all(s.count == opts.msgs for s in subscribers)
    )
    return BenchResult(
        options=opts,
        server=settings.server,
        elapsed_s=elapsed,
        pub=pub_side,
        sub=sub_side,
        latency=None,
        errors=counters.errors,
        complete=complete,
        notes=tuple(counters.notes),
    )


async def _run_request(
    opts: BenchOptions, settings: ConnectSettings, counters: Counters, payload: bytes
) -> BenchResult:
    counters.pub_target = opts.msgs
    counters.pub_label = "request"
    async with AsyncExitStack() as stack:
        replier_conns = await _connect_all(stack, settings, "replier", opts.repliers, counters)
        replied = 0

        async def reply(msg: Msg) -> None:
            nonlocal replied
            replied += 1
            await msg.respond(msg.data)

        for nc in replier_conns:
            await nc.subscribe(
                opts.subject, queue=REPLY_QUEUE, cb=reply, pending_msgs_limit=0, pending_bytes_limit=0
            )
            await nc.flush()
        req_conns = await _connect_all(stack, settings, "req", opts.pubs, counters)
        counts = split(opts.msgs, opts.pubs)
        deadline = Deadline(opts.timeout)

        start = time.perf_counter()

        async def requester(nc: NATS, count: int) -> tuple[list[int], float]:
            lat: list[int] = []
            for _ in range(count):
                if deadline.expired():
                    counters.error("requester stopped at the deadline (--timeout)")
                    break
                t0 = time.perf_counter_ns()
                try:
                    await nc.request(opts.subject, payload, timeout=REQUEST_TIMEOUT)
                except Exception as exc:
                    counters.error(f"request: {type(exc).__name__}: {exc}")
                    continue
                lat.append(time.perf_counter_ns() - t0)
                counters.published += 1
            return lat, time.perf_counter()

        results = await asyncio.gather(*(requester(nc, c) for nc, c in zip(req_conns, counts, strict=True)))
        for nc in replier_conns:
            # the last responses must leave the repliers before their connections close
            await nc.flush(timeout=flush_timeout(deadline))

    samples = [ns for lat, _ in results for ns in lat]
    req_side = SideStats(
        clients=tuple(ClientSample(len(lat), end - start, opts.size) for lat, end in results),
        elapsed_s=max(end for _, end in results) - start,
        size=opts.size,
    )
    return BenchResult(
        options=opts,
        server=settings.server,
        elapsed_s=req_side.elapsed_s,
        pub=req_side,
        sub=None,
        latency=Latency.from_ns(samples),
        errors=counters.errors,
        complete=counters.errors == 0 and len(samples) == opts.msgs and replied >= opts.msgs,
        notes=tuple(counters.notes),
    )
