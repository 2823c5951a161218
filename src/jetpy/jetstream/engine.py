"""JetStream: the engine that owns every stream, routes published messages into them, answers
the ``$JS.API`` and sends PubAcks at the right moment.

Durability by group commit: a publish into a file stream is appended (buffered) at once and its
ack is parked. One committer task flushes the dirty stores on the event loop, runs every fsync in
a worker thread, and then releases the parked acks: one fsync covers every message appended
since the previous one, and no ack ever leaves before its message is on disk. With
``sync_interval`` set, acks go out at once and a timer syncs periodically (nats-server's
default behaviour, an explicit opt-out here). Memory streams ack at once.

Knows the store through ``StreamStore``/``StoreProvider`` and the network through ``MessageBus``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api import ApiRouter
from jetpy.jetstream.bus import MessageBus, MessageHandler, StoreProvider
from jetpy.jetstream.consumer import Consumer
from jetpy.jetstream.consumer_api import ConsumerApi
from jetpy.jetstream.consumers import ConsumerManager
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig, format_time
from jetpy.jetstream.recent import RecentMessages
from jetpy.jetstream.stream import Stream, limits_of, pub_error
from jetpy.store.base import ErrStoreIO, StoreConfig, StoredMsg, StreamStore
from jetpy.subjects import subjects_overlap

__all__ = ["JetStream", "JetStreamConfig"]

log = logging.getLogger("jetpy.jetstream")

API_PREFIX = "$JS.API.>"


@dataclass(slots=True)
class JetStreamConfig:
    store_dir: str = ""
    max_memory: int = -1
    max_storage: int = -1
    sync_interval: float | None = None  # None: fsync before every ack (group commit)
    server_name: str = ""


class _StreamMeta(msgspec.Struct):
    """What a file stream persists about itself besides its messages."""

    config: StreamConfig
    created: int


def _meta_json(cfg: StreamConfig, created: int) -> bytes:
    return msgspec.json.encode(_StreamMeta(cfg, created))


class _ParkedAck(msgspec.Struct, frozen=True, gc=False):
    """A PubAck waiting for the fsync of its message (one per message published to a durable
    stream: a Struct, as it is built in C)."""

    store: Any
    seq: int
    reply: bytes
    ack: bytes
    stream: str


@dataclass(slots=True)
class ApiStats:
    total: int = 0
    errors: int = 0
    inflight: int = 0


class JetStream:
    def __init__(self, config: JetStreamConfig, bus: MessageBus, stores: StoreProvider) -> None:
        self.config = config
        self.bus = bus
        self.stores = stores
        self.streams: dict[str, Stream] = {}
        self.recent: dict[str, RecentMessages] = {}
        self.api_stats = ApiStats()
        self.router = ApiRouter(self)
        self.consumers = ConsumerManager(self)
        self.router.routes.update(ConsumerApi(self).routes())
        self._subs: dict[str, Any] = {}  # stream name -> its bus subscriptions
        self._api_sub: Any = None
        self._parked: list[_ParkedAck] = []
        self._dirty: set[Any] = set()
        self._commit_wanted = asyncio.Event()
        self._committer: asyncio.Task[None] | None = None
        self._syncer: asyncio.Task[None] | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_at = 0  # when the armed expiry timer fires (ns since epoch; 0: not armed)
        self.commits = 0  # fsync rounds (group commits) since start, for the benchmark notes

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        for store in self.stores.recover():
            self._recover_stream(store)
        self.consumers.start()
        self._api_sub = self.bus.subscribe(API_PREFIX, self.router.handle)
        self._committer = asyncio.create_task(self._commit_loop(), name="jetstream-group-commit")
        if self.config.sync_interval:
            self._syncer = asyncio.create_task(self._sync_loop(self.config.sync_interval), name="jetstream-sync")
        self.schedule_expiry()

    def _recover_stream(self, store: StreamStore) -> None:
        name = store.config.name
        try:
            raw = store.read_meta()
            if raw is None:
                raise ValueError("stream metadata missing")
            meta = msgspec.json.decode(raw, type=_StreamMeta)
        except (ValueError, msgspec.DecodeError) as e:  # keep the data, move it aside, say so
            store.stop()
            where = self.stores.quarantine(name, str(e))
            log.error("stream '%s' metadata unreadable (%s): quarantined at %s, nothing deleted", name, e, where)
            return
        stream = Stream(meta.config, store, created_ns=meta.created)
        # the store was opened without knowing its limits: apply them now
        store.update_limits(limits_of(meta.config))
        stream.rebuild_dedup(time.time_ns())
        self._add(stream)
        self.consumers.durable_upto[id(store)] = store.state().last_seq
        self.consumers.recover(stream)
        cfg = meta.config
        st = store.state()
        log.info("  Restored %d messages for stream '%s'", st.msgs, cfg.name)
        if st.lost is not None and st.lost.msgs:
            log.warning("stream '%s' lost messages on recovery: %s", cfg.name, st.lost.msgs)

    async def stop(self) -> None:
        for task in (self._committer, self._syncer):
            if task is not None:
                task.cancel()
        if self._expiry is not None:
            self._expiry.cancel()
        # final commit: flush and sync everything, release what is parked; then consumer state
        await self._commit_once()
        await self.consumers.stop()
        if self._api_sub is not None:
            self.bus.unsubscribe(self._api_sub)
        for name in list(self._subs):
            for h in self._subs.pop(name):
                self.bus.unsubscribe(h)
        for s in self.streams.values():
            s.store.stop()

    # -- streams --------------------------------------------------------------------------------

    def _add(self, stream: Stream) -> None:
        self.streams[stream.name] = stream
        self.recent[stream.name] = RecentMessages(_store_never_discards(stream.config))
        self._subscribe(stream)

    def _subscribe(self, stream: Stream) -> None:
        handles = []
        for subj in stream.config.subjects:
            handles.append(self.bus.subscribe(subj, self._ingest_for(stream)))
        self._subs[stream.name] = handles

    def _resubscribe(self, stream: Stream) -> None:
        for h in self._subs.pop(stream.name, []):
            self.bus.unsubscribe(h)
        self._subscribe(stream)

    def create_stream(self, cfg: StreamConfig) -> Stream:
        store_cfg = StoreConfig(name=cfg.name, storage=cfg.storage, limits=limits_of(cfg), first_seq=cfg.first_seq or 1)
        store = self.stores.create(store_cfg)
        now = time.time_ns()
        store.write_meta(_meta_json(cfg, now))
        stream = Stream(cfg, store, now)
        self._add(stream)
        self.schedule_expiry()
        return stream

    def update_stream(self, stream: Stream, cfg: StreamConfig) -> None:
        old_subjects = stream.config.subjects
        stream.update_config(cfg)
        # in place: consumers hold this object (the update may also have removed messages)
        self.recent[stream.name].reset(_store_never_discards(cfg))
        stream.store.write_meta(_meta_json(cfg, stream.created_ns))
        if old_subjects != cfg.subjects:
            self._resubscribe(stream)
        for c in stream.consumers.values():
            c.update_config(c.config)  # read paths derive from the stream's config; recounts too
        self.schedule_expiry()

    def delete_stream(self, stream: Stream) -> None:
        self.consumers.close_stream(stream)
        for h in self._subs.pop(stream.name, []):
            self.bus.unsubscribe(h)
        self.streams.pop(stream.name, None)
        self.recent.pop(stream.name, None)
        self._parked = [p for p in self._parked if p.store is not stream.store]
        self._dirty.discard(stream.store)
        stream.store.delete()

    def subjects_overlap(self, cfg: StreamConfig, skip: str = "") -> bool:
        for other in self.streams.values():
            if other.name == skip:
                continue
            for a in cfg.subjects:
                for b in other.config.subjects:
                    if subjects_overlap(a, b):
                        return True
        return False

    # -- publish path ---------------------------------------------------------------------------

    def _ingest_for(self, stream: Stream) -> MessageHandler:
        streams = self.streams
        publish_reply = self.bus.publish_reply
        recent = self.recent[stream.name]  # reset in place by updates; a new stream gets a new ingest

        def ingest(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            if stream.name not in streams:
                return
            res = stream.process(subject, data[:hdr_len] if hdr_len else b"", data)
            stored = res.stored
            if stored is not None:
                # what _stored acts on; none of it for a plain message into a memory stream that
                # nobody consumes yet, where the call is a measurable share of the message's cost
                if stored.hdr or recent.enabled or stream.consumers or stream.config.retention == "interest":
                    self._stored(stream, stored)
                if res.expires and not 0 < self._expiry_at <= res.expires:
                    self.schedule_expiry()  # a per-message TTL ending before the armed timer
            durable_seq = res.durable_seq
            if reply is None or stream.config.no_ack:
                if durable_seq:
                    self._dirty.add(stream.store)
                    self._commit_wanted.set()
            elif not durable_seq:  # memory streams and errors: answered at once
                publish_reply(reply, res.ack)
            elif self.config.sync_interval is None:  # group commit: answered after the fsync
                self._parked.append(_ParkedAck(stream.store, durable_seq, reply, res.ack, stream.name))
                self._dirty.add(stream.store)
                self._commit_wanted.set()
            else:  # periodic sync: answered at once
                self._dirty.add(stream.store)
                publish_reply(reply, res.ack)

        return ingest

    def _stored(self, stream: Stream, stored: StoredMsg) -> None:
        """A new message is in the stream: the recent cache, consumers and retention follow.
        (ingest calls this only when one of them applies: keep its condition in step.)"""
        seq = stored.seq
        recent = self.recent[stream.name]
        if stored.hdr and b"Nats-Rollup" in stored.hdr:
            recent.clear()  # the rollup removed older messages
            self.consumers.stream_changed(stream)
        recent.add(stored)
        if stream.consumers:
            self.consumers.stored(stream, seq, stored.subject)
        if stream.config.retention == "interest" and not any(
            c.matches(stored.subject) for c in stream.consumers.values()
        ):
            # nobody is interested: acknowledged, then not kept (as nats-server)
            stream.store.remove_msg(seq)
            recent.discard(seq)

    def removed(self, stream: Stream) -> None:
        """Messages left the stream by a path the engine drives: caches and counts follow."""
        self.recent[stream.name].clear()
        self.consumers.stream_changed(stream)

    def mark_dirty(self, stream: Stream) -> None:
        """Removals (retention) need a group commit to become durable."""
        if stream.durable:
            self._dirty.add(stream.store)
            self._commit_wanted.set()

    async def _commit_loop(self) -> None:
        while True:
            await self._commit_wanted.wait()
            self._commit_wanted.clear()
            # let the current burst of reads land in this batch: one loop turn, no sleeping
            await asyncio.sleep(0)
            await self._commit_once()

    async def _commit_once(self) -> None:
        parked, self._parked = self._parked, []
        dirty, self._dirty = self._dirty, set()
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
        if syncing:
            loop = asyncio.get_running_loop()
            results = await asyncio.gather(
                *(loop.run_in_executor(None, s.sync) for s in syncing), return_exceptions=True
            )
            for store, res in zip(syncing, results, strict=True):
                if isinstance(res, ErrStoreIO):
                    failed[store] = res
                elif isinstance(res, BaseException):
                    failed[store] = ErrStoreIO(0, detail=str(res))
                else:
                    self.consumers.durable_upto[id(store)] = flushed[store]
            self.commits += 1
        for p in parked:
            err = failed.get(p.store)
            if err is not None and (not err.lost or p.seq in err.lost):
                ack = pub_error(p.stream, ApiError.of(E.STREAM_STORE_FAILED, err=str(err)))
            else:
                ack = p.ack
            self.bus.publish_reply(p.reply, ack)

    async def _sync_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            for s in list(self.streams.values()):
                if s.durable:
                    self._dirty.add(s.store)
            await self._commit_once()

    def persist(self, stream: Stream) -> None:
        """Make an API-driven removal durable before answering (a store's deletes, like its
        appends, are durable only after sync; these requests are rare, so sync inline)."""
        self.removed(stream)
        if stream.durable:
            stream.store.flush()
            stream.store.sync()

    # -- age limits -----------------------------------------------------------------------------

    def schedule_expiry(self) -> None:
        """Arm one timer for the earliest age expiry over all streams. An empty stream's next
        message cannot expire sooner than one max_age from now, so that is its bound."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        now = time.time_ns()
        # a TTL stream with nothing due and no max_age has no bound: its publishes re-arm the timer
        bounds = [
            (t - now if (t := s.store.next_expiry()) is not None else (s.config.max_age or None))
            for s in self.streams.values()
            if s.config.max_age > 0 or s.config.allow_msg_ttl
        ]
        waits = [w for w in bounds if w is not None]
        self._expiry_at = now + max(0, min(waits)) if waits else 0
        if waits:
            self._expiry = asyncio.get_running_loop().call_later(max(0, min(waits)) / 1e9, self._expire)

    def _expire(self) -> None:
        self._expiry = None
        now = time.time_ns()
        for s in self.streams.values():
            if s.config.max_age > 0 or s.config.allow_msg_ttl:
                removed, markers = s.expire(now)
                if removed:
                    self.removed(s)
                    self.mark_dirty(s)
                for marker in markers:  # subject delete markers: new messages for the consumers
                    self._stored(s, marker)
        self.schedule_expiry()

    # -- accounting -----------------------------------------------------------------------------

    def jsz_stats(self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str) -> dict[str, Any]:
        """nats-server's /jsz document (without server_id/now), measured from the streams."""
        mem, sto = self.usage()
        msgs = nbytes = 0
        details = []
        for name in sorted(self.streams):
            s = self.streams[name]
            st = s.store.state()
            msgs += st.msgs
            nbytes += st.bytes
            if streams:
                d: dict[str, Any] = {
                    "name": name,
                    "created": format_time(s.created_ns),
                    "cluster": {"leader": self.config.server_name},
                    "state": msgspec.to_builtins(self.router.stream_info_dict(s)["state"]),
                }
                if config:
                    d["config"] = msgspec.to_builtins(s.config)
                if consumers and s.consumers:
                    d["consumer_detail"] = [
                        self.consumers_info(c, config) for _, c in sorted(s.consumers.items())
                    ]
                details.append(d)
        api = {"total": self.api_stats.total, "errors": self.api_stats.errors}
        usage = {"memory": mem, "storage": sto, "reserved_memory": 0, "reserved_storage": 0, "api": api}
        doc: dict[str, Any] = {
            "config": {
                "max_memory": self.config.max_memory,
                "max_storage": self.config.max_storage,
                "store_dir": self.config.store_dir,
            },
            **{k: v for k, v in usage.items() if k != "api"},
            "accounts": 1,
            "ha_assets": 0,
            "api": api,
            "streams": len(self.streams),
            "consumers": sum(len(s.consumers) for s in self.streams.values()),
            "messages": msgs,
            "bytes": nbytes,
        }
        if (accounts or account) and account in ("", "$G"):
            acc: dict[str, Any] = {"name": "$G", "id": "$G", **usage, "accounts": 1, "ha_assets": 0}
            if streams:
                acc["stream_detail"] = details
            doc["account_details"] = [acc]
        return doc

    def consumers_info(self, c: Consumer, config: bool) -> dict[str, Any]:
        info: dict[str, Any] = msgspec.to_builtins(c.info(format_time(time.time_ns())))
        info.pop("ts", None)
        if not config:
            info.pop("config", None)
        return info  # a single server reports no cluster for consumers (as nats-server)

    def usage(self) -> tuple[int, int]:
        """(memory bytes, storage bytes) used by streams."""
        mem = sto = 0
        for s in self.streams.values():
            b = s.store.state().bytes
            if s.config.storage == "memory":
                mem += b
            else:
                sto += b
        return mem, sto


def _store_never_discards(cfg: StreamConfig) -> bool:
    """Whether a recent-message cache pays and stays true for this stream: only file reads are
    slow enough to be worth it, and only the engine may remove messages (no store limits)."""
    return cfg.storage == "file" and cfg.max_msgs <= 0 and cfg.max_bytes <= 0 and cfg.max_msgs_per_subject <= 0
