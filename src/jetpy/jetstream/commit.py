"""Committer: when a change to a file stream is on disk, and when its PubAck may leave.

Durability by group commit: a publish into a file stream is appended (buffered) at once and its
ack is parked here. One committer task flushes the dirty stores on the event loop, runs every
fsync in a worker thread, and then releases the parked acks: one fsync covers every message
appended since the previous one, and no ack ever leaves before its message is on disk. With
``sync_interval`` set, acks go out at once and a timer syncs periodically (nats-server's default
behaviour, an explicit opt-out here). Memory streams never get here.

Also knows, per store, the highest sequence known to be on disk (``durable_upto``): durable
consumer state is clamped to it, so a crash can cause redelivery but never a skipped message.
After every commit round that made more of a store durable it calls ``on_commit`` (the
consumers' AckSync confirmations that wait for their message to be synced follow it).

Must not know: streams' rules, consumers, the API. Knows stores through ``StreamStore`` and the
network through ``MessageBus.publish_reply``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.stream import Stream, pub_error
from jetpy.meters import FSYNC_BUCKETS, Histogram
from jetpy.store.base import ErrStoreIO, StreamStore

__all__ = ["Committer"]


class _ParkedAck(msgspec.Struct, frozen=True, gc=False):
    """A PubAck waiting for the fsync of its message (one per message published to a durable
    stream: a Struct, as it is built in C)."""

    store: Any
    seq: int
    reply: bytes
    ack: bytes
    stream: str


class Committer:
    def __init__(self, bus: MessageBus, sync_interval: float | None) -> None:
        self.bus = bus
        self.sync_interval = sync_interval  # None: fsync before every ack (group commit)
        self._parked: list[_ParkedAck] = []
        self._dirty: dict[Any, Stream] = {}  # each store to commit, with its stream
        self._wanted = asyncio.Event()
        self._committer: asyncio.Task[None] | None = None
        self._syncer: asyncio.Task[None] | None = None
        self._durable_upto: dict[int, int] = {}  # id(store) -> highest synced sequence
        self.commits = 0  # fsync rounds (group commits) since start, for the benchmark notes
        self.on_commit: Callable[[], None] | None = None  # after every commit round
        self.fsync_seconds = Histogram(FSYNC_BUCKETS)  # each round's wall time, for /metrics

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, durable_stores: list[StreamStore]) -> None:
        """Start the commit task (and the periodic sync, with ``sync_interval``). A recovered
        store is on disk up to its last sequence."""
        for store in durable_stores:
            self._durable_upto[id(store)] = store.state().last_seq
        self._committer = asyncio.create_task(self._commit_loop(), name="jetstream-group-commit")
        if self.sync_interval:
            self._syncer = asyncio.create_task(self._sync_loop(self.sync_interval), name="jetstream-sync")

    async def stop(self) -> None:
        """Cancel the tasks, then one final commit: everything flushed and synced, every parked
        ack released."""
        for task in (self._committer, self._syncer):
            if task is not None:
                task.cancel()
        await self.commit_once()

    # -- the publish path -----------------------------------------------------------------------

    def park(self, stream: Stream, seq: int, reply: bytes, ack: bytes) -> None:
        """Send ``ack`` to ``reply`` once ``seq`` of the stream's store is on disk (at once, with
        ``sync_interval``: the periodic sync covers it later)."""
        store = stream.store
        if self.sync_interval is None:
            self._parked.append(_ParkedAck(store, seq, reply, ack, stream.name))
            self._dirty[store] = stream
            self._wanted.set()
        else:
            self._dirty[store] = stream
            self.bus.publish_reply(reply, ack)

    def mark_dirty(self, stream: Stream) -> None:
        """Appends without a PubAck, and removals (retention, expiry), become durable at the
        next group commit."""
        if stream.durable:
            self._dirty[stream.store] = stream
            self._wanted.set()

    def sync_now(self, stream: Stream) -> None:
        """Make an API-driven change durable before its reply (a store's deletes, like its
        appends, are durable only after sync; these requests are rare, so sync inline)."""
        if stream.durable:
            stream.store.flush()
            stream.store.sync()

    async def sync_off_loop(self, stream: Stream) -> None:
        """``sync_now`` with the sync in a worker thread: for a change whose sync may be long
        (a large purge writes a tombstone per message), so the loop serves everyone meanwhile."""
        if stream.durable:
            stream.store.flush()
            await asyncio.get_running_loop().run_in_executor(None, stream.store.sync)

    def forget(self, stream: Stream) -> None:
        """The stream is being deleted: nothing of it is committed any more (parked acks are
        dropped, as the stream's answer is gone with it)."""
        store = stream.store
        self._parked = [p for p in self._parked if p.store is not store]
        self._dirty.pop(store, None)
        self._durable_upto.pop(id(store), None)

    def synced(self, store: StreamStore) -> None:
        """``store`` was flushed and synced by its filler (a restore) before it became a stream:
        it is on disk up to its last sequence, as a recovered one is."""
        self._durable_upto[id(store)] = store.state().last_seq

    def durable_upto(self, store: StreamStore) -> int | None:
        """The highest sequence of ``store`` known to be on disk (None: not a durable store, or
        nothing committed yet)."""
        return self._durable_upto.get(id(store))

    # -- group commit ---------------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            # let the current burst of reads land in this batch: one loop turn, no sleeping
            await asyncio.sleep(0)
            await self.commit_once()

    async def commit_once(self) -> None:
        parked, self._parked = self._parked, []
        dirty, self._dirty = self._dirty, {}
        if not dirty and not parked:
            return
        failed: dict[Any, ErrStoreIO] = {}
        flushed: dict[Any, int] = {}
        for store in dirty:
            try:
                flushed[store] = store.flush()
            except ErrStoreIO as e:
                failed[store] = e
        syncing = [s for s in dirty if s not in failed]
        advanced = False
        if syncing:
            loop = asyncio.get_running_loop()
            started = time.perf_counter()
            results = await asyncio.gather(
                *(loop.run_in_executor(None, s.sync) for s in syncing), return_exceptions=True
            )
            self.fsync_seconds.observe(time.perf_counter() - started)
            for store, res in zip(syncing, results, strict=True):
                if isinstance(res, ErrStoreIO):
                    failed[store] = res
                elif isinstance(res, BaseException):
                    failed[store] = ErrStoreIO(0, detail=str(res))
                else:
                    advanced |= flushed[store] > self._durable_upto.get(id(store), 0)
                    self._durable_upto[id(store)] = flushed[store]
            self.commits += 1
            if advanced and self.on_commit is not None:
                self.on_commit()
        for store, fail in failed.items():  # what was rolled back was never stored
            durable = self._durable_upto.get(id(store), 0)
            dirty[store].forget_msg_ids(fail.lost or range(durable + 1, 1 << 64))
        if not parked:
            return
        if failed:
            acks = []
            for p in parked:
                err = failed.get(p.store)
                if err is not None and (not err.lost or p.seq in err.lost):
                    acks.append(pub_error(p.stream, ApiError.of(E.STREAM_STORE_FAILED, err=str(err))))
                else:
                    acks.append(p.ack)
        else:
            acks = [p.ack for p in parked]
        self.bus.publish_replies([p.reply for p in parked], acks)

    async def _sync_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await self.commit_once()  # every store written since the last one is dirty
