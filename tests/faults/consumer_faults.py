"""Helpers of the consumer fault tests: a jetpy server as a process on a file store, a durable
pull consumer driven with AckSync until the server is killed, and a drain after the restart that
says exactly which messages came back.

What the tests hold jetpy to: a message whose AckSync was confirmed is never delivered again
(not even after kill -9), and no message that was never acknowledged is skipped. Each run is
reported as a :class:`AckRun` so a failure names the sequences, not a count.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from dataclasses import dataclass, field
from pathlib import Path

import nats
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from conftest import JETPY_SERVER, Proc, start_process

__all__ = [
    "DURABLE",
    "STREAM",
    "AckRun",
    "Damage",
    "ack_some",
    "consume_until_killed",
    "damage",
    "drain",
    "fault_runs",
    "jetpy",
    "publish",
]

STREAM = "F"
SUBJECT = "f.x"
DURABLE = "D"
ACK_WAIT = 1.0  # seconds: after a restart, messages delivered but never acked come back quickly


def fault_runs(default: int) -> int:
    """How many runs a fault test makes: ``JETPY_FAULT_RUNS`` (``make faults-consumer``) or the
    fast slice's ``default``."""
    return int(os.environ.get("JETPY_FAULT_RUNS", default))


def jetpy(store: Path, log: Path) -> Proc:
    return start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], log)


async def publish(p: Proc, n: int, *, consumer: bool = True) -> None:
    """Stream ``F`` with ``n`` messages, and (``consumer``) the durable pull consumer ``D``."""
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    await js.add_stream(name=STREAM, subjects=[SUBJECT])
    futs = [await js.publish_async(SUBJECT, b"m%d" % i) for i in range(n)]
    assert [(await f).seq for f in futs] == list(range(1, n + 1))
    if consumer:
        cfg = ConsumerConfig(durable_name=DURABLE, ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT)
        await js.add_consumer(STREAM, cfg)
    await nc.close()


@dataclass
class AckRun:
    """One run: what was confirmed before the kill, what else was sent, what came back."""

    confirmed: set[int] = field(default_factory=set)  # AckSync answered before the kill
    sent: set[int] = field(default_factory=set)  # every ack sent (confirmed or not)
    after: set[int] = field(default_factory=set)  # delivered after the restart

    def redelivered_confirmed(self) -> list[int]:
        return sorted(self.confirmed & self.after)

    def skipped(self, total: int) -> list[int]:
        """Messages never acknowledged that the restarted consumer did not deliver."""
        return sorted(set(range(1, total + 1)) - self.sent - self.after)

    def report(self, total: int) -> str:
        red, skip = self.redelivered_confirmed(), self.skipped(total)
        return (
            f"{len(self.confirmed)} acks confirmed, {len(self.sent)} sent; after the restart "
            f"{len(self.after)} delivered; confirmed acks redelivered: {len(red)} {red[:20]}; "
            f"skipped: {len(skip)} {skip[:20]}"
        )


async def consume_until_killed(p: Proc, run: AckRun, rng: random.Random, kill_after: float) -> None:
    """Fetch batches and AckSync every message of each batch at once (so many confirmations wait
    on one state write) until the server is killed with SIGKILL ``kill_after`` seconds in."""
    nc = await nats.connect(p.url, allow_reconnect=False)
    js = nc.jetstream()
    sub = await js.pull_subscribe(SUBJECT, durable=DURABLE, stream=STREAM)

    async def ack(m: Msg) -> None:
        seq = m.metadata.sequence.stream
        run.sent.add(seq)
        await m.ack_sync(timeout=5)
        run.confirmed.add(seq)

    async def work() -> None:
        while True:
            msgs = await sub.fetch(rng.randint(1, 64), timeout=2)
            await asyncio.gather(*(ack(m) for m in msgs), return_exceptions=True)

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


async def drain(p: Proc, durable: str = DURABLE) -> set[int]:
    """Everything ``durable`` delivers after a restart (each acked), until it has been idle for
    longer than the ack wait (so what was delivered and never acked has come back)."""
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(SUBJECT, durable=durable, stream=STREAM)
    seen: set[int] = set()
    idle = 0.0
    while idle < ACK_WAIT * 2:
        try:
            msgs = await sub.fetch(256, timeout=0.5)
        except TimeoutError:  # nats-py raises both its own and the builtin one
            idle += 0.5
            continue
        idle = 0.0
        for m in msgs:
            seen.add(m.metadata.sequence.stream)
            await m.ack()
    await nc.close()
    return seen


# ----------------------------------------------------------------------------- damaged files


@dataclass
class Damage:
    """One change to one file: what was done, and whether the bytes changed at all (zeroing bytes
    that were zero already changes nothing)."""

    file: str
    kind: str
    detail: str
    changed: bool


def damage(path: Path, kind: str, rng: random.Random) -> Damage:
    """Apply one fault to ``path``: ``flip`` (1 to 3 random bits), ``zero`` (a random range of up
    to 64 bytes), ``truncate`` (to a random shorter length) or ``delete``."""
    if kind == "delete":
        path.unlink()
        return Damage(path.name, kind, "", True)
    data = bytearray(path.read_bytes())
    before = bytes(data)
    if kind == "flip":
        bits = sorted(rng.sample(range(len(data) * 8), rng.randint(1, 3)))
        for b in bits:
            data[b // 8] ^= 1 << (b % 8)
        detail = "bits " + ",".join(map(str, bits))
    elif kind == "zero":
        start = rng.randrange(len(data))
        end = min(len(data), start + rng.randint(1, 64))
        data[start:end] = bytes(end - start)
        detail = f"bytes {start}..{end - 1}"
    elif kind == "truncate":
        del data[rng.randrange(len(data)) :]
        detail = f"to {len(data)} bytes"
    else:
        raise ValueError(kind)
    path.write_bytes(bytes(data))
    return Damage(path.name, kind, detail, bytes(data) != before)


async def ack_some(p: Proc, confirm: int, leave: int) -> set[int]:
    """``D`` AckSyncs its first ``confirm`` messages and takes ``leave`` more without acking;
    returns the confirmed sequences."""
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(SUBJECT, durable=DURABLE, stream=STREAM)
    confirmed: set[int] = set()
    while len(confirmed) < confirm:
        msgs = await sub.fetch(min(100, confirm - len(confirmed)), timeout=2)
        await asyncio.gather(*(m.ack_sync(timeout=5) for m in msgs))
        confirmed |= {m.metadata.sequence.stream for m in msgs}
    if leave:
        await sub.fetch(leave, timeout=2)
    await nc.close()
    return confirmed
