"""Taking a stream's snapshot and sending it: nats-server's chunked, flow-controlled protocol.

Owns what happens after ``$JS.API.STREAM.SNAPSHOT`` is answered: the snapshot is taken at the
instant of the request (:func:`take`: the store's consistent export, the stream's config and
state, the durable consumers' config and state), then :class:`SnapshotSender` reads the export in
a worker thread, builds the archive (``archive.py``) and sends it to the request's deliver
subject in chunks, as nats-server 2.14+ does:

* chunks of ``chunk_size`` bytes (default 128 KiB, clamped to 1 KiB..1 MiB), each with the reply
  subject ``$JS.SNAPSHOT.ACK.<stream>.<id>.<chunk length>.<chunk number>``; the client answers
  each with an empty message;
* at most ``window_size / chunk_size`` chunks unanswered (window default 8 MiB, clamped to
  1 KiB..32 MiB, at least one chunk); with the window full and no answer for
  :data:`ACK_TIMEOUT`, the snapshot stops with an empty message carrying ``NATS/1.0 408 No Flow
  Response``;
* the last data chunk has no reply subject, and the end is an empty message with the header
  ``NATS/1.0 204``. A snapshot that fails on the way (a damaged store) ends with an empty message
  carrying ``NATS/1.0 500 <reason>`` instead, so a client never takes a partial backup for a
  whole one (jetpy's own archive would be refused on restore anyway: it has no end frame).

The event loop only ever copies a chunk into the bus: reading, encoding and compressing run in a
worker thread, so other clients are served while a large stream is backed up.
Must not know: the API envelope (``api/snapshot.py``), the archive's bytes, the consumers' internals.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import string
import time
from dataclasses import dataclass, field
from typing import Any, Final

from jetpy.jetstream.archive import ArchiveConsumer, ArchiveMeta, ArchiveState, ArchiveWriter
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.stream import Stream
from jetpy.protocol.headers import encode_headers
from jetpy.store.base import StoreError, StoreExport
from jetpy.version import VERSION

__all__ = [
    "ACK_TIMEOUT",
    "DEFAULT_CHUNK",
    "DEFAULT_WINDOW",
    "SnapshotSender",
    "Taken",
    "clamp",
    "friendly_bytes",
    "nuid",
    "take",
    "take_with",
]

log = logging.getLogger("jetpy.jetstream")

DEFAULT_CHUNK: Final = 128 * 1024
DEFAULT_WINDOW: Final = 8 * 1024 * 1024
CHUNK_RANGE: Final = (1024, 1024 * 1024)
WINDOW_RANGE: Final = (1024, 32 * 1024 * 1024)
ACK_TIMEOUT: Final = 5.0
"""Seconds the sender waits for a chunk's answer while the window is full (nats-server's)."""
INTEREST_WAIT: Final = 2.0
"""Seconds the sender waits for a subscriber on the deliver subject before sending anyway."""

EOF: Final = encode_headers([], 204)
NO_FLOW: Final = encode_headers([], 408, "No Flow Response")

_NUID_ALPHABET: Final = string.ascii_letters + string.digits


def nuid() -> str:
    """A unique token for an internal subject (22 characters, as nats-server's nuid)."""
    return "".join(secrets.choice(_NUID_ALPHABET) for _ in range(22))


def clamp(value: int, default: int, bounds: tuple[int, int]) -> int:
    """``value`` (0 means ``default``) within ``bounds``, as nats-server clamps snapshot sizes."""
    return min(max(bounds[0], value or default), bounds[1])


def friendly_bytes(n: int) -> str:
    """Bytes as nats-server's logs print them (1000-based: ``1.04 MB``)."""
    if n < 1000:
        return f"{n} B"
    for unit in ("KB", "MB", "GB", "TB", "PB"):
        n_f = n / 1000
        if n_f < 1000 or unit == "PB":
            return f"{n_f:.2f} {unit}"
        n = int(n_f)
    return f"{n} B"


@dataclass
class Taken:
    """A snapshot as taken at the instant of the request; messages still to be read."""

    meta: ArchiveMeta
    export: StoreExport
    consumers: list[ArchiveConsumer] = field(default_factory=list)


def take(stream: Stream, consumers: ConsumerManager | None) -> Taken:
    """The stream's snapshot now (``consumers`` None: without them), on the loop: the export,
    the state and the consumers' state all describe the same instant."""
    archived: list[ArchiveConsumer] = []
    if consumers is not None:
        for c in sorted(consumers.consumers(stream).values(), key=lambda c: c.name):
            if c.config.durable_name:  # ephemeral consumers belong to their client's session
                archived.append(ArchiveConsumer(c.name, c.config, c.created_ns, c.snapshot()))
    return take_with(stream, archived)


def take_with(stream: Stream, consumers: list[ArchiveConsumer]) -> Taken:
    """The stream's snapshot now with ``consumers`` as they are now (their states taken by
    the caller on the loop at the same instant: a cluster's from its consumers' replicas)."""
    store = stream.store
    export = store.export()
    st = store.state()
    meta = ArchiveMeta(
        config=stream.config,
        created=stream.created_ns,
        state=ArchiveState(st.msgs, st.bytes, st.first_seq, st.last_seq, st.last_ts),
        taken=time.time_ns(),
        server=VERSION,
    )
    return Taken(meta, export, consumers)


class _NoFlow(Exception):
    pass


class SnapshotSender:
    """Sends one taken snapshot to a deliver subject; see the module docstring."""

    def __init__(
        self, bus: MessageBus, stream: str, taken: Taken, deliver: str, chunk_size: int, window_size: int
    ) -> None:
        self.bus = bus
        self.stream = stream
        self.taken = taken
        self.deliver = deliver
        self.chunk = clamp(chunk_size, DEFAULT_CHUNK, CHUNK_RANGE)
        window = max(clamp(window_size, DEFAULT_WINDOW, WINDOW_RANGE), self.chunk)
        self.max_inflight = window // self.chunk
        self.ack_prefix = f"$JS.SNAPSHOT.ACK.{stream}.{nuid()}"
        self.inflight = 0
        self.sent = 0
        self._acked = asyncio.Event()
        self._writer = ArchiveWriter()

    def _on_ack(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if self.inflight > 0:
            self.inflight -= 1
        self._acked.set()

    async def run(self) -> None:
        start = time.monotonic()
        log.info("Starting snapshot for stream '$G > %s'", self.stream)
        sub: Any = self.bus.subscribe(self.ack_prefix + ".>", self._on_ack)
        try:
            await self._send()
        except _NoFlow:
            self.bus.publish(self.deliver, None, b"", NO_FLOW)
            log.warning(
                "Snapshot for stream '$G > %s' failed after %.3fs: no flow response",
                self.stream,
                time.monotonic() - start,
            )
            return
        except StoreError as e:
            self.bus.publish(self.deliver, None, b"", encode_headers([], 500, f"snapshot failed: {e}"))
            log.warning("Snapshot of stream '$G > %s' failed: %s", self.stream, e)
            return
        except Exception as e:  # a bug: the client hears the snapshot failed, never a whole one
            self.bus.publish(
                self.deliver, None, b"", encode_headers([], 500, "snapshot failed: internal error")
            )
            log.error("Snapshot of stream '$G > %s' failed", self.stream, exc_info=e)
            return
        finally:
            self.bus.unsubscribe(sub)
            self.taken.export.close()
        log.info(
            "Completed snapshot of %s for stream '$G > %s' in %.3fs",
            friendly_bytes(self.taken.meta.state.bytes),
            self.stream,
            time.monotonic() - start,
        )

    def _produce(self) -> bytes | None:
        """The archive's next bytes (worker thread): about a frame of messages, or None at the end."""
        msgs = self.taken.export.read(1024 * 1024)
        return self._writer.messages(msgs) if msgs else None

    async def _send(self) -> None:
        bus, deliver = self.bus, self.deliver
        if not bus.has_interest(deliver):  # nats-server waits a moment for the client's subscription
            changed = asyncio.Event()
            watch = bus.watch_interest(deliver, changed.set)
            try:
                async with asyncio.timeout(INTEREST_WAIT):
                    while not bus.has_interest(deliver):
                        changed.clear()
                        await changed.wait()
            except TimeoutError:
                pass
            finally:
                bus.unwatch_interest(watch)
        w = self._writer
        buf = bytearray(w.header(self.taken.meta))
        done = False
        index = 0
        while True:
            while len(buf) < self.chunk and not done:
                more = await asyncio.to_thread(self._produce)
                if more is None:
                    for c in self.taken.consumers:
                        buf += w.consumer(c)
                    buf += w.end()
                    done = True
                else:
                    buf += more
            piece = bytes(buf[: self.chunk])
            del buf[: self.chunk]
            if done and not buf:  # the last chunk: no answer asked for
                bus.publish(deliver, None, piece)
                self.sent += len(piece)
                break
            await self._window()
            index += 1
            self.inflight += 1
            bus.publish(deliver, f"{self.ack_prefix}.{len(piece)}.{index}", piece)
            self.sent += len(piece)
        bus.publish(deliver, None, b"", EOF)

    async def _window(self) -> None:
        """Wait while the window is full; :class:`_NoFlow` if no answer comes in time."""
        while self.inflight >= self.max_inflight:
            self._acked.clear()
            try:
                await asyncio.wait_for(self._acked.wait(), ACK_TIMEOUT)
            except TimeoutError:
                raise _NoFlow() from None
