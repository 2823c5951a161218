"""JetStream benchmarks: acknowledged publishing into a stream, and push or pull consumption.

Owns the stream's lifecycle (``--stream``, default ``benchstream``: any stream of that name is
replaced, and it is deleted afterwards whatever happens) and the JetStream choreography:

* publishers send plain PUBs with a unique reply subject per message (``<inbox>.<n>``) on one
  wildcard subscription and keep at most ``--window`` PubAcks outstanding. Every reply is checked
  (a PubAck names the stream and has no error), so counts are exact, and nats-py's per-message
  futures and JSON decoding stay off the hot path;
* ``--push``: every subscriber has its own ephemeral push consumer and receives every message;
* ``--pull``: subscribers share one durable pull consumer, requesting ``--batch`` at a time
  (pipelined raw pull requests, see ``_PullWorker``), so every message is delivered once across them;
* with ``--pub 0`` the stream is filled before the clock starts and only consumption is timed.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
from nats.js.errors import NotFoundError
from nats.js.manager import JetStreamManager

from jetpy.bench.clients import (
    BenchError,
    Counters,
    CountingSubscriber,
    Deadline,
    connect,
    flush_timeout,
)
from jetpy.bench.options import AckKind, BenchOptions, ConnectSettings, ConsumerKind, Mode, split
from jetpy.bench.stats import BenchResult, ClientSample, SideStats

__all__ = ["run_jetstream"]

PULL_DURABLE = "jetpy-bench-pull"
MAX_ACK_PENDING = 20_000  # enough to keep a consumer streaming with explicit acks (natsbench's value)
PULL_EXPIRES = 2.0  # seconds a pull request waits for messages before the server expires it
API_PREFIX = "$JS.API"
STATUS_HEADER = "Status"  # nats-py's name for the code of a status message ("NATS/1.0 408 ...")
PENDING_HEADER = "Nats-Pending-Messages"  # unfilled part of an expired pull request
API_TIMEOUT = 10.0  # seconds for stream/consumer management requests


@dataclass(slots=True)
class _AckWindow:
    """Outstanding PubAcks of one publisher."""

    window: int
    counters: Counters
    sent: int = 0
    replies: int = 0
    acks: int = 0
    errors: int = 0
    finished: bool = False
    space: asyncio.Event = field(default_factory=asyncio.Event)  # set when the window has room
    all_in: asyncio.Event = field(default_factory=asyncio.Event)  # set when every reply arrived

    async def on_reply(self, msg: Msg) -> None:
        self.replies += 1
        # A PubAck is {"stream":...,"seq":...}; an error reply carries "error"; a no-responders
        # status has an empty body. Byte checks keep JSON decoding off the hot path.
        if b'"stream"' in msg.data and b'"error"' not in msg.data:
            self.acks += 1
            self.counters.published += 1
        else:
            self.errors += 1
            self.counters.error(f"publish not acknowledged: {bytes(msg.data[:200])!r} {msg.headers or ''}")
        if self.sent - self.replies < self.window:
            self.space.set()
        if self.finished and self.replies >= self.sent:
            self.all_in.set()


async def js_publish(
    nc: NATS, subject: str, payload: bytes, count: int, window: int, deadline: Deadline, counters: Counters
) -> tuple[int, float]:
    """Publish ``count`` messages with acks; returns (acknowledged, end time)."""
    prefix = nc.new_inbox() + "."
    w = _AckWindow(window, counters)
    sub = await nc.subscribe(prefix + "*", cb=w.on_reply, pending_msgs_limit=0, pending_bytes_limit=0)
    try:
        await nc.flush()
        while w.sent < count:
            if w.sent - w.replies >= window:
                w.space.clear()
                try:
                    await asyncio.wait_for(w.space.wait(), deadline.remaining())
                except TimeoutError:
                    counters.error("publisher stopped at the deadline waiting for PubAcks (--timeout)")
                    break
                continue
            await nc.publish(subject, payload, reply=prefix + str(w.sent))
            w.sent += 1
        await nc.flush(timeout=flush_timeout(deadline))
        w.finished = True
        if w.replies < w.sent:
            try:
                await asyncio.wait_for(w.all_in.wait(), deadline.remaining() + 1.0)
            except TimeoutError:
                counters.error(f"{w.sent - w.replies} PubAcks never arrived")
        end = time.perf_counter()
    except Exception as exc:
        counters.error(f"js publish: {type(exc).__name__}: {exc}")
        end = time.perf_counter()
    finally:
        await sub.unsubscribe()
    return w.acks, end


async def _recreate_stream(jsm: JetStreamManager, opts: BenchOptions) -> None:
    try:
        await jsm.delete_stream(opts.stream)
    except NotFoundError:
        pass
    try:
        await jsm.add_stream(
            name=opts.stream,
            subjects=[opts.subject],
            storage=StorageType(opts.storage.value),
            num_replicas=1,
        )
    except Exception as exc:
        raise BenchError(f"cannot create stream {opts.stream}: {type(exc).__name__}: {exc}") from exc


def _consumer_config(opts: BenchOptions, durable: str | None) -> ConsumerConfig:
    explicit = opts.ack is AckKind.EXPLICIT
    return ConsumerConfig(
        durable_name=durable,
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT if explicit else AckPolicy.NONE,
        max_ack_pending=MAX_ACK_PENDING if explicit else None,
        filter_subject=opts.subject,
    )


class _PushCounter(CountingSubscriber):
    __slots__ = ("explicit",)

    def __init__(self, target: int, counters: Counters, explicit: bool) -> None:
        super().__init__(target, counters)
        self.explicit = explicit

    async def on_msg(self, msg: Msg) -> None:
        if self.explicit:
            await msg.ack()
        await super().on_msg(msg)


@dataclass(slots=True)
class _PullShared:
    """What the pull workers share: the messages still to fetch and when the last arrived."""

    target: int
    received: int = 0
    last: float = 0.0
    wakers: list[asyncio.Event] = field(default_factory=list)

    def finish(self) -> None:
        self.last = time.perf_counter()
        for w in self.wakers:
            w.set()


class _PullWorker:
    """One worker of the shared durable pull consumer, pipelining raw pull requests.

    nats-py's ``fetch()`` waits for each message separately and tops out near 20k msgs/s, which
    would measure the client. Instead the worker keeps about 1.5 batches requested
    (``$JS.API.CONSUMER.MSG.NEXT``) and counts deliveries in a callback, asking for the next batch
    when half of the outstanding one has arrived. A 408/409 status (request expired, consumer
    changed) returns its unfilled count in ``Nats-Pending-Messages``.
    """

    def __init__(self, nc: NATS, opts: BenchOptions, shared: _PullShared, counters: Counters) -> None:
        self.nc, self.opts, self.shared, self.counters = nc, opts, shared, counters
        self.explicit = opts.ack is AckKind.EXPLICIT
        self.outstanding = 0
        self.got = 0
        self.wake = asyncio.Event()
        shared.wakers.append(self.wake)

    async def on_msg(self, msg: Msg) -> None:
        if msg.headers and STATUS_HEADER in msg.headers and not msg.data:
            status = msg.headers.get(STATUS_HEADER, "")
            if status in ("408", "409"):
                self.outstanding -= int(msg.headers.get(PENDING_HEADER, "0") or 0)
            elif status not in ("100", "404"):  # 100 = heartbeat, 404 = no messages (no_wait)
                self.counters.error(f"pull request: status {status} {msg.headers.get('Description', '')}")
            self.wake.set()
            return
        if self.explicit:
            await msg.ack()
        self.outstanding -= 1
        self.got += 1
        self.shared.received += 1
        self.counters.received += 1
        if self.shared.received == self.shared.target:
            self.shared.finish()
        elif self.outstanding <= self.opts.batch // 2:
            self.wake.set()

    async def run(self, deadline: Deadline) -> int:
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=self.on_msg, pending_msgs_limit=0, pending_bytes_limit=0)
        next_subject = f"{API_PREFIX}.CONSUMER.MSG.NEXT.{self.opts.stream}.{PULL_DURABLE}"
        request = json.dumps({"batch": self.opts.batch, "expires": int(PULL_EXPIRES * 1e9)}).encode()
        try:
            while self.shared.received < self.shared.target and not deadline.expired():
                if self.outstanding <= self.opts.batch // 2:
                    await self.nc.publish(next_subject, request, reply=inbox)
                    self.outstanding += self.opts.batch
                    continue
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), min(PULL_EXPIRES, deadline.remaining()))
                except TimeoutError:
                    self.outstanding = 0  # an expiry status got lost: ask again rather than stall
            await self.nc.flush(timeout=flush_timeout(deadline))  # every ack reaches the server
        finally:
            await sub.unsubscribe()
        return self.got


async def run_jetstream(
    opts: BenchOptions, settings: ConnectSettings, counters: Counters, payload: bytes
) -> BenchResult:
    async with AsyncExitStack() as stack:
        admin = await connect(settings, "jetpy-bench-admin", counters)
        stack.push_async_callback(admin.close)
        jsm = admin.jsm(timeout=API_TIMEOUT)
        await _recreate_stream(jsm, opts)
        try:
            return await _measure(opts, settings, counters, payload, jsm, stack)
        finally:
            try:
                await jsm.delete_stream(opts.stream)
            except Exception as exc:
                counters.error(f"cannot delete stream {opts.stream}: {type(exc).__name__}: {exc}")


async def _measure(
    opts: BenchOptions,
    settings: ConnectSettings,
    counters: Counters,
    payload: bytes,
    jsm: JetStreamManager,
    stack: AsyncExitStack,
) -> BenchResult:
    prefill_rate: float | None = None
    if opts.mode is Mode.JS_CONSUME:
        counters.pub_label, counters.pub_target = "prefill", opts.msgs
        pnc = await connect(settings, "jetpy-bench-prefill", counters)
        try:
            t0 = time.perf_counter()
            acks, end = await js_publish(
                pnc, opts.subject, payload, opts.msgs, opts.window, Deadline(opts.timeout), counters
            )
            prefill_rate = acks / (end - t0) if end > t0 else 0.0
        finally:
            await pnc.close()
        if acks != opts.msgs:
            raise BenchError(f"prefill incomplete: {acks} of {opts.msgs} messages acknowledged")
    else:
        counters.pub_target = opts.msgs
    counters.recv_target = opts.expected_received

    sub_conns: list[NATS] = []
    for i in range(opts.subs):
        nc = await connect(settings, f"jetpy-bench-{opts.consumer.value}-{i + 1}", counters)
        stack.push_async_callback(nc.close)
        sub_conns.append(nc)
    pub_conns: list[NATS] = []
    for i in range(opts.pubs):
        nc = await connect(settings, f"jetpy-bench-jspub-{i + 1}", counters)
        stack.push_async_callback(nc.close)
        pub_conns.append(nc)

    pushers: list[_PushCounter] = []
    pull_shared = _PullShared(target=opts.msgs)
    explicit = opts.ack is AckKind.EXPLICIT

    async def start_consumers() -> None:
        if opts.consumer is ConsumerKind.PULL:
            await jsm.add_consumer(opts.stream, config=_consumer_config(opts, PULL_DURABLE))
            return
        for nc in sub_conns:
            p = _PushCounter(opts.msgs, counters, explicit)
            await nc.jetstream(timeout=API_TIMEOUT).subscribe(
                opts.subject,
                stream=opts.stream,
                cb=p.on_msg,
                manual_ack=True,
                config=_consumer_config(opts, None),
                pending_msgs_limit=0,
                pending_bytes_limit=0,
            )
            pushers.append(p)

    # Consuming a prefilled stream is timed from consumer creation (push delivery starts there);
    # with concurrent publishers the consumers must exist before the first publish.
    if sub_conns and opts.mode is not Mode.JS_CONSUME:
        await start_consumers()
    deadline = Deadline(opts.timeout)
    start = time.perf_counter()
    if sub_conns and opts.mode is Mode.JS_CONSUME:
        await start_consumers()

    async def publisher(nc: NATS, count: int) -> tuple[int, float]:
        return await js_publish(nc, opts.subject, payload, count, opts.window, deadline, counters)

    pull_tasks = [
        asyncio.ensure_future(_PullWorker(nc, opts, pull_shared, counters).run(deadline))
        for nc in (sub_conns if opts.consumer is ConsumerKind.PULL else [])
    ]
    try:
        pub_results = await asyncio.gather(
            *(publisher(nc, c) for nc, c in zip(pub_conns, split(opts.msgs, opts.pubs), strict=True))
        )
        pull_counts = await asyncio.gather(*pull_tasks)
    finally:
        for t in pull_tasks:
            t.cancel()
    if pushers:
        try:
            await asyncio.wait_for(
                asyncio.gather(*(p.done.wait() for p in pushers)), deadline.remaining() + 1.0
            )
        except TimeoutError:
            counters.error("push consumers did not receive every message before the deadline")
        for nc in sub_conns:
            await nc.flush(timeout=flush_timeout(deadline))  # every ack reaches the server

    stored = (await jsm.stream_info(opts.stream)).state.messages
    if stored != opts.msgs:
        counters.error(f"stream holds {stored} messages, expected {opts.msgs}")

    pub_side = None
    if pub_results:
        pub_side = SideStats(
            clients=tuple(ClientSample(acks, end - start, opts.size) for acks, end in pub_results),
            elapsed_s=max(end for _, end in pub_results) - start,
            size=opts.size,
        )
    sub_side = None
    received_ok = True
    if pushers:
        ends = [p.end() for p in pushers]
        sub_side = SideStats(
            clients=tuple(
                ClientSample(p.count, e - start, opts.size) for p, e in zip(pushers, ends, strict=True)
            ),
            elapsed_s=max(ends) - start,
            size=opts.size,
        )
        received_ok = all(p.count == opts.msgs for p in pushers)
    elif pull_tasks:
        end = pull_shared.last or time.perf_counter()
        sub_side = SideStats(
            clients=tuple(ClientSample(n, end - start, opts.size) for n in pull_counts),
            elapsed_s=end - start,
            size=opts.size,
        )
        received_ok = pull_shared.received == opts.msgs
    elapsed = max(s.elapsed_s for s in (pub_side, sub_side) if s is not None)
    pub_ok = pub_side is None or pub_side.msgs == opts.msgs
    return BenchResult(
        options=opts,
        server=settings.server,
        elapsed_s=elapsed,
        pub=pub_side,
        sub=sub_side,
        latency=None,
        errors=counters.errors,
        complete=counters.errors == 0 and pub_ok and received_ok,
        prefill_msgs_per_s=prefill_rate,
        notes=tuple(counters.notes),
    )
