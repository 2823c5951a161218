"""Restoring a stream from a backup: the receiving end of ``$JS.API.STREAM.RESTORE``.

Owns one restore from the moment its deliver subject is handed out (``$JS.SNAPSHOT.RESTORE.
<stream>.<id>``, nats-server's) to the final answer. As with nats-server, the client sends the
backup as requests on that subject, chunk by chunk, each answered with an empty message once it
is taken; an empty chunk ends the upload and is answered with a ``stream_create_response``: the
restored stream's info, or error 10062 ``restore failed: <reason>``.

Unlike nats-server, which stages the upload in a file and unpacks it at the end, each chunk is
verified and applied as it arrives (``archive.ArchiveReader`` in a worker thread, the messages
stored in slices of ``steps.SLICE`` on the loop), into a store that is not yet a stream: nothing
can see it, publish to it or consume from it. Only when the whole archive was read, every
message, gap and consumer is in place and the result matches the backup's own state is it made
durable and adopted as the stream, with its consumers. Meanwhile the name is reserved: a
``STREAM.CREATE`` of it answers 10058 (name in use), as the store's directory is taken. Whatever fails before that (a damaged,
truncated or foreign backup, a chunk without a reply subject, the server's storage limit, a
client that stops sending for :data:`STALL_TIMEOUT`) deletes the store: nothing is half created.
A chunk that fails is answered with the error response at once (nats.go's jsm.go takes any API
error body as the end), and later chunks find nobody listening.

Sequences are restored exactly: the head of the stream by ``compact``, a gap in the middle by
storing a placeholder and removing it (so the store itself keeps the gap, as it keeps any
deleted message), the time of a deleted last message by the placeholder's timestamp. Limits are
applied once everything is in (the backup may hold more than a smaller config now allows).

Must not know: the API envelope (``api/snapshot.py``), the archive's bytes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from jetpy.jetstream import errors as E
from jetpy.jetstream.archive import ArchiveConsumer, ArchiveError, ArchiveMeta, ArchiveReader
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.snapshots import friendly_bytes, nuid
from jetpy.jetstream.steps import Steps, paced
from jetpy.jetstream.stream import H_MSG_ID, Stream
from jetpy.protocol.headers import get_header
from jetpy.store.base import StoreConfig, StoredMsg, StoreError, StreamStore
from jetpy.store.ttl import msg_ttl

__all__ = ["STALL_TIMEOUT", "RestoreSession"]

log = logging.getLogger("jetpy.jetstream")

STALL_TIMEOUT: Final = 5.0
"""Seconds without a chunk (after the last one was answered) before a restore is abandoned."""

MAX_QUEUED: Final = 64 * 1024 * 1024
"""Bytes of chunks a restore holds before it has answered them: the client is to wait for each
answer (nats.go does), and one that does not cannot make the server buffer without bound."""

_PLACEHOLDER: Final = "_jetpy.restore.gap"


class _Failed(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.description)
        self.error = error


def _restore_error(reason: str) -> _Failed:
    return _Failed(ApiError.of(E.STREAM_RESTORE, err=reason))


class RestoreSession:
    """One restore into ``cfg`` (already validated as a create would be); see the module doc.
    ``consumers`` None: the archive's consumers are not created but left in
    :attr:`restored_consumers` for the caller (a cluster's, which assigns them)."""

    def __init__(
        self,
        bus: MessageBus,
        registry: StreamRegistry,
        consumers: ConsumerManager | None,
        cfg: StreamConfig,
        answer: Callable[[str, Stream | ApiError], None],
        done: Callable[[RestoreSession], None],
    ) -> None:
        self.bus = bus
        self.registry = registry
        self.consumers = consumers
        self.cfg = cfg
        self.name = cfg.name
        self.deliver = f"$JS.SNAPSHOT.RESTORE.{cfg.name}.{nuid()}"
        self._answer = answer  # (reply subject, the restored stream or the error): the final reply
        self._done = done
        self._reader = ArchiveReader()
        self._store: StreamStore | None = None
        self._chunks: deque[tuple[str, bytes]] = deque()
        self._queued = 0  # bytes in ``_chunks``
        self._arrived = asyncio.Event()
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None
        self._failed: str | None = None  # set by a chunk without a reply subject, or one too many
        self._failed_reply = ""  # the reply subject of the chunk that was one too many
        self._last = 0  # last sequence stored (placeholders included)
        self._live = 0  # messages stored and not placeholders
        self._stored_bytes = 0
        self._consumers: list[ArchiveConsumer] = []
        self.restored_consumers: list[ArchiveConsumer] = []
        self._msg_ids: list[tuple[str, int, int]] = []  # (Nats-Msg-Id, seq, ts): the dedup window
        self._start = time.monotonic()

    def start(self) -> None:
        """Listen on the deliver subject (before the API answers with it) and start working."""
        log.info("Starting restore for stream '$G > %s'", self.name)
        self.registry.reserved.add(self.name)  # STREAM.CREATE of the name is refused until it ends
        self._sub = self.bus.subscribe(self.deliver, self._on_chunk)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"restore-{self.name}")

    async def stop(self) -> None:
        """The server is going: abandon the restore (its store is deleted)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def _on_chunk(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if reply is None:
            self._failed = f"restore for stream '$G > {self.name}' requires reply subject for each chunk"
        elif self._queued + len(data) - hdr_len > MAX_QUEUED:
            self._failed = f"restore for stream '$G > {self.name}' got chunks faster than it answered them"
            self._failed_reply = reply.decode()
        else:
            self._chunks.append((reply.decode(), data[hdr_len:]))
            self._queued += len(data) - hdr_len
        self._arrived.set()

    async def _next_chunk(self) -> tuple[str, bytes]:
        while True:
            if self._failed:
                raise _restore_error(self._failed)
            if self._chunks:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), STALL_TIMEOUT)
            except TimeoutError:
                raise _restore_error(f"restore for stream '$G > {self.name}' is stalled") from None
        reply, chunk = self._chunks.popleft()
        self._queued -= len(chunk)
        return reply, chunk

    async def _run(self) -> None:
        reply = ""
        try:
            while True:
                reply, chunk = await self._next_chunk()
                if not chunk:
                    stream = await self._finish()
                    self._answer(reply, stream)
                    log.info(
                        "Completed restore of %s for stream '$G > %s' in %.3fs",
                        friendly_bytes(self._reader.received),
                        self.name,
                        time.monotonic() - self._start,
                    )
                    return
                await self._apply_chunk(chunk)
                self.bus.publish(reply, None, b"")
                reply = ""  # answered
        except (_Failed, ApiError) as f:
            error = f.error if isinstance(f, _Failed) else f
            self._discard()
            log.warning(
                "Restore failed for %s for stream '$G > %s' in %.3fs: %s",
                friendly_bytes(self._reader.received),
                self.name,
                time.monotonic() - self._start,
                error.description,
            )
            reply = reply or self._failed_reply
            if reply:
                self._answer(reply, error)
        except asyncio.CancelledError:
            self._discard()
            raise
        except Exception as e:  # a bug must not leave a half-built store behind
            self._discard()
            log.error("restore of stream '%s' failed", self.name, exc_info=e)
            if reply:
                self._answer(reply, ApiError.of(E.STREAM_RESTORE, err="internal error"))
        finally:
            self.registry.reserved.discard(self.name)
            self.bus.unsubscribe(self._sub)
            self._done(self)

    def _discard(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.delete()
            except StoreError as e:
                log.error("restore of stream '%s': could not remove the partial store: %s", self.name, e)

    # -- applying the archive -------------------------------------------------------------------

    async def _apply_chunk(self, chunk: bytes) -> None:
        try:
            items = await asyncio.to_thread(self._reader.feed, chunk)
        except ArchiveError as e:
            raise _restore_error(str(e)) from None
        for item in items:
            if isinstance(item, ArchiveMeta):
                self._begin(item)
            elif isinstance(item, list):
                await paced(self._store_msgs(item))
            elif isinstance(item, ArchiveConsumer):
                self._consumers.append(item)
        self._check_resources()

    def _check_resources(self) -> None:
        """The server's limit for the stream's storage holds what is restored so far (10023)."""
        resources = self.registry.resources
        gauge = resources.gauge(self.cfg.storage)
        if (
            gauge.used + self._stored_bytes > gauge.limit
            and resources.recount(self.cfg.storage) + self._stored_bytes > gauge.limit
        ):
            raise _Failed(ApiError.of(E.INSUFFICIENT_RESOURCES))

    def _begin(self, meta: ArchiveMeta) -> None:
        if meta.config.name != self.name:
            raise _restore_error(f"the backup is of stream '{meta.config.name}', not '{self.name}'")
        if self.registry.get(self.name) is not None:
            raise _Failed(ApiError.of(E.STREAM_NAME_EXIST_RESTORE_FAILED))
        try:
            store = self.registry.stores.create(StoreConfig(name=self.name, storage=self.cfg.storage))
        except StoreError as e:
            raise _restore_error(str(e)) from None
        self._store = store
        if store.state().last_seq:
            raise _restore_error(f"the store directory of stream '{self.name}' is not empty")
        st = meta.state
        if st.msgs:
            if st.first_seq > 1:
                store.compact(st.first_seq)
                self._last = st.first_seq - 1
        elif st.last_seq:  # no messages left, the sequence and its time go on
            self._gap(store, st.last_seq, st.last_ts)

    def _store_msgs(self, msgs: list[StoredMsg]) -> Steps[None]:
        store = self._store
        assert store is not None
        for i, m in enumerate(msgs, 1):
            if m.seq != self._last + 1:
                self._gap(store, m.seq - 1, 0)
            try:
                ttl = msg_ttl(m.hdr)
            except ValueError:
                ttl = 0
            try:
                seq, _ = store.store_msg(m.subject, m.hdr, m.data, m.ts, ttl)
            except StoreError as e:
                raise _restore_error(f"storing seq {m.seq}: {e}") from None
            if seq != m.seq:
                raise _restore_error(f"seq {m.seq} was stored as {seq}")
            self._last = seq
            self._live += 1
            self._stored_bytes += len(m.subject) + len(m.hdr) + len(m.data)
            if m.hdr:
                mid = get_header(m.hdr, H_MSG_ID)
                if mid:
                    self._msg_ids.append((mid.decode(errors="replace"), seq, m.ts))
            if not i % 256:
                yield

    def _gap(self, store: StreamStore, upto: int, last_ts: int) -> None:
        """Leave the sequences after the last one stored up to ``upto`` without messages; with
        ``last_ts``, ``upto`` is the stream's last sequence and that its time."""
        if self._live == 0 and upto > self._last + 1:
            store.compact(upto)  # nothing live to lose: the next message gets ``upto``
            self._last = upto - 1
        while self._last < upto:
            seq, _ = store.store_msg(
                _PLACEHOLDER, b"", b"", (last_ts or None) if self._last + 1 == upto else None
            )
            store.remove_msg(seq)
            self._last = seq

    async def _finish(self) -> Stream:
        try:
            self._reader.finish()
        except ArchiveError as e:
            raise _restore_error(str(e)) from None
        meta = self._reader.meta
        store = self._store
        assert meta is not None and store is not None
        st = meta.state
        if self._last < st.last_seq:
            self._gap(store, st.last_seq, st.last_ts)
        got = store.state()
        if (got.msgs, got.last_seq) != (st.msgs, st.last_seq) or (st.msgs and got.first_seq != st.first_seq):
            raise _restore_error(
                f"restored {got.msgs} messages up to seq {got.last_seq}, the backup holds {st.msgs} up to {st.last_seq}"
            )
        try:
            await asyncio.to_thread(self._sync, store)
        except StoreError as e:
            raise _restore_error(str(e)) from None
        return self._adopt(meta, store)

    @staticmethod
    def _sync(store: StreamStore) -> None:
        store.flush()
        store.sync()

    def _adopt(self, meta: ArchiveMeta, store: StreamStore) -> Stream:
        """Make the restored store the stream, with its consumers: one step on the loop, after
        the checks that other requests may have changed the answer to while this one ran."""
        cfg, reg = self.cfg, self.registry
        if reg.get(self.name) is not None:
            raise _Failed(ApiError.of(E.STREAM_NAME_EXIST_RESTORE_FAILED))
        if reg.subjects_overlap(cfg):
            raise _Failed(ApiError.of(E.STREAM_SUBJECT_OVERLAP))
        reg.resources.check_create(cfg)
        stream = reg.adopt(cfg, store, meta.created, self._msg_ids)
        self._store = None  # the stream owns it now
        reg.resources.recount(cfg.storage)
        if self.consumers is None:
            self.restored_consumers = list(self._consumers)
            return stream
        for c in self._consumers:
            self.consumers.create(stream, c.name, c.config, c.created, c.state)
        return stream
