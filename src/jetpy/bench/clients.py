"""The building blocks every benchmark mode shares: connections, live counters, deadlines, the
fast core publisher and a counting subscriber.

Owns how nats-py is driven for speed: ``publish`` only appends to nats-py's pending buffer (its
flusher task writes whole batches when the loop is free, or when the buffer passes its limit), so
the publishing loop never awaits a round trip; one ``flush`` at the end waits for the server to have
everything. Subscriptions have their pending limits disabled, because a benchmark that drops
messages in the client would measure nothing.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from jetpy.bench.options import ConnectSettings

__all__ = [
    "BenchError",
    "Counters",
    "CountingSubscriber",
    "Deadline",
    "connect",
    "flush_timeout",
    "make_payload",
    "publish_core",
]

CONNECT_TIMEOUT = 5  # seconds; nats-py takes an int
PROGRESS_CHUNK = 1024  # publishes between counter updates and deadline checks (cheap, still smooth)
FLUSH_GRACE = 5.0  # seconds a final flush may take beyond the measured phase's deadline
MAX_NOTES = 5  # distinct error texts kept for the report; the count keeps going


class BenchError(Exception):
    """The benchmark could not run (cannot connect, stream cannot be created, ...)."""


@dataclass(slots=True)
class Counters:
    """Live progress, written by the clients and read by the progress display."""

    pub_target: int = 0
    recv_target: int = 0
    published: int = 0
    received: int = 0
    pub_label: str = "publish"
    errors: int = 0
    notes: list[str] = field(default_factory=list)

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.notes) < MAX_NOTES and text not in self.notes:
            self.notes.append(text)


class Deadline:
    """A hard bound on the measured phase (monotonic clock)."""

    __slots__ = ("_at",)

    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self._at


def flush_timeout(deadline: Deadline) -> int:
    # nats-py's flush() takes whole seconds
    return max(1, int(deadline.remaining() + FLUSH_GRACE))


def make_payload(size: int) -> bytes:
    """The same printable pattern natsbench sends ('abc...z' repeated)."""
    return bytes(ord("a") + i % 26 for i in range(size))


async def connect(settings: ConnectSettings, name: str, counters: Counters) -> NATS:
    """One connection per client, as nats bench: no reconnects, so a failure shows as a failure."""

    connected = False
    attempts: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        if connected:
            counters.error(f"{name}: {type(exc).__name__}: {exc}")
        else:
            attempts.append(exc)  # a failed connect attempt: reported once, below

    servers = [s.strip() for s in settings.server.split(",") if s.strip()]
    kwargs: dict[str, Any] = {}
    if settings.user is not None:
        kwargs["user"] = settings.user
    if settings.password is not None:
        kwargs["password"] = settings.password
    if settings.creds is not None:
        kwargs["user_credentials"] = settings.creds
    try:
        # nats-py keeps retrying an unreachable server forever at max_reconnect_attempts=0, even
        # with allow_reconnect off; 1 (two attempts, no back-off) makes it give up, and the outer
        # bound makes sure of it.
        nc: NATS = await asyncio.wait_for(
            nats.connect(
                servers=servers,
                name=name,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0,
                connect_timeout=CONNECT_TIMEOUT,
                error_cb=on_error,
                **kwargs,
            ),
            2 * CONNECT_TIMEOUT * len(servers) + 1,
        )
    except Exception as exc:
        cause = attempts[-1] if attempts else exc
        raise BenchError(f"cannot connect to {settings.server}: {type(cause).__name__}: {cause}") from exc
    connected = True
    return nc


async def publish_core(
    nc: NATS, subject: str, payload: bytes, count: int, deadline: Deadline, counters: Counters
) -> int:
    """Publish ``count`` messages as fast as nats-py allows, then flush; returns how many were sent."""
    sent = 0
    try:
        while sent < count:
            n = min(PROGRESS_CHUNK, count - sent)
            for _ in range(n):
                await nc.publish(subject, payload)
            sent += n
            counters.published += n
            if deadline.expired():
                counters.error("publisher stopped at the deadline (--timeout)")
                break
        await nc.flush(timeout=flush_timeout(deadline))
    except Exception as exc:
        counters.error(f"publish: {type(exc).__name__}: {exc}")
    return sent


class CountingSubscriber:
    """Counts messages and remembers when the last expected one arrived."""

    __slots__ = ("_counters", "count", "done", "last", "target")

    def __init__(self, target: int, counters: Counters) -> None:
        self.target = target
        self.count = 0
        self.last = 0.0
        self.done = asyncio.Event()
        self._counters = counters
        if target == 0:
            self.done.set()

    async def on_msg(self, msg: Msg) -> None:
        self.count += 1
        self._counters.received += 1
        if self.count == self.target:
            self.last = time.perf_counter()
            self.done.set()

    def end(self) -> float:
        """When this subscriber finished: its last message, or now if it never got them all."""
        return self.last if self.count >= self.target and self.last else time.perf_counter()
