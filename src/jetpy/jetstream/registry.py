"""StreamRegistry: the streams of a server, their life cycle, and the publish path into them.

Owns: the streams by name; creating, updating, deleting and recovering them (with the stream
metadata each file stream persists, and keeping one offline when it cannot be read back); the bus
subscription on every stream's subjects and the handler behind it (:func:`ingest_handler`), which
decides and applies a published message, hands its PubAck to the committer and tells the
``StreamEvents`` listener (the consumers' host) what was stored or removed; and the expiry timer.

The publish path flows one way: connection -> broker -> ingest -> ``Stream`` -> store ->
committer -> PubAck, and consumers are woken through ``StreamEvents``.

Must not know: consumers (only the ``StreamEvents`` seam it owns), the API, stores' internals.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import string
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.commit import Committer
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.expiry import ExpiryTimer
from jetpy.jetstream.models import AccountLimits, StreamConfig
from jetpy.jetstream.offline import OfflineStreams
from jetpy.jetstream.ports import MessageBus, MessageHandler, PersistedStream, RunHandler, StoreProvider
from jetpy.jetstream.resources import MSG_SIZE_BOUND, ResourceLimits, ServerResources, stored_size
from jetpy.jetstream.steps import Steps, run_steps
from jetpy.jetstream.stream import MsgEntry, PublishResult, SkipEntry, Stream, limits_of, pub_error
from jetpy.patterns import PatternSet
from jetpy.store.base import LostData, StoreConfig, StoredMsg, StoreError, StreamStore

__all__ = [
    "SUBSCRIBE_STEP",
    "Accept",
    "AcceptMany",
    "StreamEvents",
    "StreamRegistry",
    "acceptor",
    "bulk_acceptor",
    "ingest_handler",
    "new_identity",
    "recovery_line",
]

log = logging.getLogger("jetpy.jetstream")
_time_ns = time.time_ns

SUBSCRIBE_STEP = 250
"""Subjects (un)subscribed per step of a create or update (see ``steps``): about a millisecond."""


class StreamEvents(Protocol):
    """What the registry tells the consumers' host about a stream's contents and life."""

    def stored(self, stream: Stream, msg: StoredMsg) -> None:
        """A new message is in the stream (only called when ``stream.recent`` is on, the
        stream has consumers, retention is interest, or the message has headers)."""

    def stored_many(self, stream: Stream, msgs: list[StoredMsg]) -> None:
        """New messages in the stream, in sequence order, none of them a rollup, in a stream
        whose retention is not interest (called only when ``stream.recent`` is on or the stream
        has consumers): what :meth:`stored` does for each."""

    def removed(self, stream: Stream) -> None:
        """Messages left the stream by a path the server drives (purge, delete, expiry, limits
        lowered by an update)."""

    def updated(self, stream: Stream) -> None:
        """The stream's config changed."""

    def deleting(self, stream: Stream) -> None:
        """The stream is about to be deleted: its consumers go with it."""


class _StreamMeta(msgspec.Struct):
    """What a file stream persists about itself besides its messages."""

    config: StreamConfig
    created: int
    identity: str = ""  # absent in metadata written before identities existed


_IDENTITY_ALPHABET = string.ascii_letters + string.digits
_IDENTITY_LEN = 8


def new_identity() -> str:
    """A new stream's identity: 8 random letters and digits, the form nats-server's has."""
    return "".join(secrets.choice(_IDENTITY_ALPHABET) for _ in range(_IDENTITY_LEN))


def _derived_identity(name: str, created: int) -> str:
    """A stable identity for a stream persisted without one: the same after every restart."""
    digest = hashlib.sha256(f"{name}\x00{created}".encode()).digest()
    return "".join(_IDENTITY_ALPHABET[b % len(_IDENTITY_ALPHABET)] for b in digest[:_IDENTITY_LEN])


class _Subscribed:
    """A stream's ingest handler (and its run handler, where it stores messages as they
    arrive), its subjects (in the registry's index) and its bus subscription on each of them
    while it takes messages from the bus here."""

    __slots__ = ("handler", "handles", "run", "subjects")

    def __init__(self, handler: MessageHandler, run: RunHandler | None) -> None:
        self.handler = handler
        self.run = run
        self.handles: dict[str, Any] = {}
        self.subjects: set[str] = set()


def _meta_json(cfg: StreamConfig, created: int, identity: str) -> bytes:
    return msgspec.json.encode(_StreamMeta(cfg, created, identity))


def _open(found: PersistedStream, domain: str = "") -> Stream | tuple[str, StreamConfig | None]:
    """A persisted stream read back (its store opened, its limits applied, its message ids
    re-learnt), or why it cannot be served and its config if that at least was read. Touches
    nothing but the stream's own files (it runs in a worker thread)."""
    if found.meta is None:
        return found.problem, None
    try:
        meta = msgspec.json.decode(found.meta, type=_StreamMeta)
    except (ValueError, msgspec.DecodeError) as e:
        return f"its metadata does not decode: {e}", None
    try:
        store = found.open()
    except StoreError as e:
        return str(e), meta.config
    try:
        identity = meta.identity or _derived_identity(found.name, meta.created)
        stream = Stream(meta.config, store, created_ns=meta.created, identity=identity, domain=domain)
        # the store was opened without knowing its limits: apply them now
        store.update_limits(limits_of(meta.config))
        store.set_compression(meta.config.compression)
        stream.rebuild_dedup(time.time_ns())
    except StoreError as e:
        store.stop()
        return str(e), meta.config
    return stream


class StreamRegistry:
    def __init__(
        self,
        bus: MessageBus,
        stores: StoreProvider,
        committer: Committer,
        events: StreamEvents,
        max_memory: int = -1,
        max_storage: int = -1,
        *,
        limits: AccountLimits | None = None,
        server: ServerResources | None = None,
        domain: str = "",
    ) -> None:
        """``max_memory``/``max_storage`` are the server's limits (when ``server`` is None: its
        resources are then this registry's alone); ``limits`` the account's own; ``domain``
        the server's JetStream domain, which PubAcks and stream infos name."""
        self.bus = bus
        self.stores = stores
        self.committer = committer
        self.events = events
        self.domain = domain
        self.streams: dict[str, Stream] = {}
        self.expiry = ExpiryTimer(self.streams, self.expired)
        self.resources = ResourceLimits(self.streams, max_memory, max_storage, limits, server)
        self.reserved: set[str] = set()  # names a restore is building a stream under
        self._subs: dict[str, _Subscribed] = {}  # stream name -> its bus subscriptions
        self._subjects: PatternSet[str] = PatternSet()  # every stream's subjects, by stream name
        self.offline = OfflineStreams(bus, self._subjects)  # streams whose files could not be read
        # what handles a stream's published messages: a single server decides and applies them
        # at once; a replicated stream's handler proposes them to its Raft group instead
        self.ingest_factory: Callable[[Stream, StreamRegistry], MessageHandler] = ingest_handler
        # whether a stream takes messages from the bus on this server (a replicated stream: on
        # its leader only, as nats-server's); told again with listen() when that changes
        self.listening: Callable[[Stream], bool] = lambda stream: True

    # -- life cycle -----------------------------------------------------------------------------

    async def recover(self) -> list[Stream]:
        """Open every stream the store provider persisted; returns them (consumers next). One
        that cannot be read back is kept offline, its files untouched (see ``offline``). Each
        is read back in a worker thread (a stream of a million messages takes seconds), so the
        loop serves the clients already connected meanwhile."""
        recovered = []
        for found in self.stores.recover():
            if found.missing:  # never became a stream: moved aside, as it is, and said so
                where = self.stores.quarantine(found.name, found.problem)
                log.error(
                    "stream '%s' %s (a creation or restore that never finished): quarantined at %s,"
                    " nothing deleted",
                    found.name,
                    found.problem,
                    where,
                )
                continue
            opened = await asyncio.to_thread(_open, found, self.domain)
            if isinstance(opened, Stream):
                self._restored(opened)
                recovered.append(opened)
            else:
                self._offline(found.name, *opened)
        return recovered

    def _restored(self, stream: Stream) -> None:
        self._add(stream)
        st = stream.store.state()
        log.info("  Restored %d messages for stream '%s'", st.msgs, stream.name)
        notes = stream.store.recovery_notes()
        if st.lost is not None or notes:
            log.warning("stream '%s' %s", stream.name, recovery_line(st.lost, notes))

    def _offline(self, name: str, reason: str, config: StreamConfig | None) -> None:
        self.offline.add(name, reason, config)
        log.error(
            "stream '%s' is offline: %s; its files are kept as they are, nothing of it is served",
            name,
            reason,
        )

    def delete_offline(self, name: str) -> None:
        """Delete an offline stream's files (an operator's request: the server never does)."""
        self.offline.remove(name)
        self.stores.remove(name)
        log.warning("offline stream '%s' deleted on request", name)

    def stop(self) -> None:
        """Unsubscribe and stop every store (after the committer's final commit)."""
        self.expiry.cancel()
        self.offline.stop()
        for name in list(self._subs):
            for h in self._subs.pop(name).handles.values():
                self.bus.unsubscribe(h)
        for s in self.streams.values():
            s.store.stop()

    def create(self, cfg: StreamConfig) -> Stream:
        return run_steps(self.create_steps(cfg))

    def create_steps(self, cfg: StreamConfig) -> Steps[Stream]:
        """:meth:`create` in steps (one per :data:`SUBSCRIBE_STEP` subjects subscribed)."""
        store_cfg = StoreConfig(
            name=cfg.name,
            storage=cfg.storage,
            limits=limits_of(cfg),
            first_seq=cfg.first_seq or 1,
            compression=cfg.compression,
        )
        store = self.stores.create(store_cfg)
        now = time.time_ns()
        identity = new_identity()
        store.write_meta(_meta_json(cfg, now, identity))
        stream = Stream(cfg, store, now, identity, domain=self.domain)
        self.streams[stream.name] = stream
        self._subs[stream.name] = self._subscribed(stream)
        yield from self._subscribe_to(stream, cfg.subjects)
        self.expiry.schedule()
        return stream

    def adopt(
        self, cfg: StreamConfig, store: StreamStore, created_ns: int, msg_ids: list[tuple[str, int, int]]
    ) -> Stream:
        """Make a store filled elsewhere (a restore) the stream ``cfg`` names: its metadata is
        written, its limits applied, the ``Nats-Msg-Id`` s its writer saw ((id, seq, ts))
        remembered for de-duplication, and it is subscribed as a created stream is."""
        store.update_limits(limits_of(cfg))
        store.set_compression(cfg.compression)
        # a new incarnation of the name: sources of it copy it again rather than risk a skip
        identity = new_identity()
        store.write_meta(_meta_json(cfg, created_ns, identity))
        stream = Stream(cfg, store, created_ns, identity, domain=self.domain)
        stream.rebuild_dedup(time.time_ns(), msg_ids)
        if stream.durable:
            self.committer.synced(store)  # its filler synced it: consumer state may cover it all
        self._add(stream)
        self.expiry.schedule()
        return stream

    def set_identity(self, stream: Stream, identity: str) -> None:
        """Give ``stream`` the identity of its incarnation decided elsewhere (a cluster's
        replicas share their stream's), kept in its metadata."""
        if identity != stream.identity:
            stream.identity = identity
            stream.store.write_meta(_meta_json(stream.config, stream.created_ns, identity))

    def update(self, stream: Stream, cfg: StreamConfig) -> None:
        run_steps(self.update_steps(stream, cfg))

    def update_steps(self, stream: Stream, cfg: StreamConfig) -> Steps[None]:
        """:meth:`update` in steps (one per :data:`SUBSCRIBE_STEP` subjects changed)."""
        old_subjects = stream.config.subjects
        yield from stream.update_config_steps(cfg)
        stream.store.write_meta(_meta_json(cfg, stream.created_ns, stream.identity))
        if old_subjects != cfg.subjects:
            yield from self._subscribe_to(stream, cfg.subjects)
        self.events.updated(stream)
        self.expiry.schedule()

    def delete(self, stream: Stream) -> None:
        run_steps(self.delete_steps(stream))

    def delete_steps(self, stream: Stream) -> Steps[None]:
        """:meth:`delete` in steps (one per :data:`SUBSCRIBE_STEP` subjects unsubscribed)."""
        self.events.deleting(stream)
        self.streams.pop(stream.name, None)  # what still arrives on its subjects is dropped
        if stream.name in self._subs:
            yield from self._subscribe_to(stream, ())
            del self._subs[stream.name]
        self.committer.forget(stream)
        stream.store.delete()

    def _add(self, stream: Stream) -> None:
        self.streams[stream.name] = stream
        self._subs[stream.name] = self._subscribed(stream)
        run_steps(self._subscribe_to(stream, stream.config.subjects))

    def listen(self, stream: Stream) -> None:
        """Subscribe the stream's subjects or not, as :attr:`listening` says now."""
        if self._subs.get(stream.name) is not None and self.streams.get(stream.name) is stream:
            run_steps(self._subscribe_to(stream, stream.config.subjects))

    def _subscribe_to(self, stream: Stream, subjects: Sequence[str]) -> Steps[None]:
        """Make the stream's subjects exactly ``subjects``, and its bus subscriptions those
        too while it is :attr:`listening` (none otherwise): only those that change are touched
        (an update of a stream with many subjects usually changes few)."""
        subbed = self._subs[stream.name]
        handles, known = subbed.handles, subbed.subjects
        wanted = set(subjects)
        listen = wanted if self.listening(stream) else set()
        n = 0
        for subj in [s for s in known if s not in wanted]:
            known.discard(subj)
            self._subjects.discard(subj, stream.name)
            n += 1
            if not n % SUBSCRIBE_STEP:
                yield
        for subj in [s for s in handles if s not in listen]:
            self.bus.unsubscribe(handles.pop(subj))
            n += 1
            if not n % SUBSCRIBE_STEP:
                yield
        for subj in subjects:
            changed = False
            if subj not in known:
                known.add(subj)
                self._subjects.add(subj, stream.name)
                changed = True
            if subj in listen and subj not in handles:
                handles[subj] = self.bus.subscribe(subj, subbed.handler, run=subbed.run)
                changed = True
            if changed:
                n += 1
                if not n % SUBSCRIBE_STEP:
                    yield

    def _subscribed(self, stream: Stream) -> _Subscribed:
        """The stream's handlers: runs of publishes in one call only where a message is stored
        by this server alone as it arrives (see :meth:`acceptor`)."""
        handler = self.ingest_factory(stream, self)
        return _Subscribed(handler, ingest_run_handler(stream, self) if handler_is_local(self) else None)

    # -- queries --------------------------------------------------------------------------------

    def acceptor(self, stream: Stream) -> Accept | None:
        """What takes published messages into ``stream`` here, for a publish that does not come
        through the bus (the bulk publish); None where messages are not stored by this server
        alone as they arrive (a replicated stream proposes them to its group first)."""
        if not handler_is_local(self):
            return None
        return acceptor(stream, self)

    def bulk_acceptor(self, stream: Stream) -> AcceptMany | None:
        """:meth:`acceptor` for runs of records (see :func:`bulk_acceptor`)."""
        if not handler_is_local(self):
            return None
        return bulk_acceptor(stream, self)

    def get(self, name: str) -> Stream | None:
        return self.streams.get(name)

    def require(self, name: str) -> Stream:
        """The stream named so; raises 10194 (offline, with why) or 10059 (no such stream)."""
        s = self.streams.get(name)
        if s is not None:
            return s
        self.refuse_offline(name)
        raise ApiError.of(E.STREAM_NOT_FOUND)

    def refuse_offline(self, name: str) -> None:
        """Raise 10194 if a stream of this name is offline (its name is taken)."""
        off = self.offline.get(name)
        if off is not None:
            raise off.error()

    def subjects_overlap(self, cfg: StreamConfig, skip: str = "") -> bool:
        """Does some subject of ``cfg`` overlap a subject of another stream (not ``skip``)?"""
        index = self._subjects
        return any(owner != skip for subj in cfg.subjects for owner in index.overlapping(subj))

    # -- copies from other streams (mirrors, sources) -------------------------------------------

    def apply_copy(self, stream: Stream, entry: MsgEntry) -> PublishResult:
        """Store a message a mirror or source copied (decided by ``Stream.decide_copy``), with
        what the publish path does after storing (kept in step with :func:`ingest_handler`),
        but no PubAck: its durability is the group commit's business."""
        resources = self.resources
        storage = stream.config.storage
        gauge = resources.gauge(storage)
        if gauge.used >= gauge.limit and resources.exhausted(storage):
            return PublishResult(_exhausted_ack(stream.name))
        acct = resources.account_gauge(storage)
        size = len(entry.subject) + len(entry.hdr) + len(entry.payload)
        if acct.used + size + MSG_SIZE_BOUND > acct.limit and resources.account_exceeded(
            storage, stored_size(storage, len(entry.subject), len(entry.hdr), len(entry.payload))
        ):
            return PublishResult(_account_exceeded_ack(stream.name))
        res = stream.apply_msg(entry)
        stored = res.stored
        if stored is not None:
            gauge.used += size + MSG_SIZE_BOUND
            acct.used += size + MSG_SIZE_BOUND
            if (
                stored.hdr
                or stream.recent.enabled
                or stream.consumer_count
                or stream.config.retention == "interest"
            ):
                self.events.stored(stream, stored)
            if res.expires:
                self.expiry.schedule_before(res.expires)
            rp = res.republish
            if rp is not None:
                self.bus.publish(rp[0], None, rp[2], rp[1])
            self.committer.mark_dirty(stream)
        return res

    def apply_published(
        self, stream: Stream, subject: bytes, hdr: bytes, data: bytes, ts: int
    ) -> PublishResult:
        """Decide and apply a published message at the time ``ts`` (a replicated stream's
        committed entry, on every replica: the same :meth:`Stream.process` a single server runs,
        with the leader's clock), with what the publish path does after storing (kept in step
        with :func:`ingest_handler`). ``data`` holds the header block first, as published. No
        PubAck here: the proposer answers; the store is synced by the next group commit (the
        Raft log, fsynced by a quorum, is what makes the message durable)."""
        resources = self.resources
        gauge = resources.gauge(stream.config.storage)
        if gauge.used >= gauge.limit and resources.exhausted(gauge.storage):
            return PublishResult(_exhausted_ack(stream.name))
        res = stream.process(subject, hdr, data, ts)
        stored = res.stored
        if stored is not None:
            gauge.used += len(subject) + len(data) + MSG_SIZE_BOUND
            if (
                stored.hdr
                or stream.recent.enabled
                or stream.consumer_count
                or stream.config.retention == "interest"
            ):
                self.events.stored(stream, stored)
            if res.expires:
                self.expiry.schedule_before(res.expires)
            rp = res.republish
            if rp is not None:
                self.bus.publish(rp[0], None, rp[2], rp[1])
            self.committer.mark_dirty(stream)
        return res

    def skip(self, stream: Stream, entry: SkipEntry) -> None:
        """Use up sequences with no message (a mirror across its origin's gap)."""
        stream.apply_skip(entry)
        self.committer.mark_dirty(stream)

    # -- what happened to a stream's contents ---------------------------------------------------

    def removed(self, stream: Stream) -> None:
        """Messages left the stream by a path the server drives: caches and counts follow."""
        self.events.removed(stream)

    def expired(self, stream: Stream, removed: int, markers: list[StoredMsg]) -> None:
        """Expiry removed ``removed`` messages and left ``markers`` (the timer's, or an expiry
        a replicated stream's log decided): caches, consumers and durability follow."""
        if removed:
            self.events.removed(stream)
            self.committer.mark_dirty(stream)
        for marker in markers:  # subject delete markers: new messages for the consumers
            self.events.stored(stream, marker)


Accept = Callable[[bytes, bytes, bytes], PublishResult]
"""Takes one published message into a stream: ``(subject, header block or b"", header block +
payload)`` -> what to answer it with (see :func:`acceptor`)."""


def acceptor(stream: Stream, registry: StreamRegistry) -> Accept:
    """What a single server does with a message published to ``stream``, but for its answer:
    the server's and the account's storage limits, :meth:`Stream.process` (the stream's rules),
    and what follows a store (the limits' gauges, the consumers' host told, the expiry timer,
    ``republish``). The publish path (:func:`ingest_handler`) and the bulk publish share it."""
    process = stream.process
    stored_event = registry.events.stored
    expiry = registry.expiry
    publish = registry.bus.publish
    recent = stream.recent  # reset in place by updates; a new stream gets a new handler
    resources = registry.resources
    storage = stream.config.storage
    gauge = resources.gauge(storage)  # the server's
    acct = resources.account_gauge(storage)  # the account's
    exhausted = PublishResult(_exhausted_ack(stream.name))
    exceeded = PublishResult(_account_exceeded_ack(stream.name))

    def accept(subject: bytes, hdr: bytes, data: bytes) -> PublishResult:
        if gauge.used >= gauge.limit and resources.exhausted(storage):
            return exhausted
        size = len(subject) + len(data) + MSG_SIZE_BOUND
        if acct.used + size > acct.limit and resources.account_exceeded(
            storage, stored_size(storage, len(subject), len(hdr), len(data) - len(hdr))
        ):
            return exceeded
        res = process(subject, hdr, data)
        stored = res.stored
        if stored is not None:
            gauge.used += size
            acct.used += size
            # what the listener acts on; none of it for a plain message into a memory stream
            # that nobody consumes yet, where the call is a measurable share of the cost
            if stored.hdr or recent.enabled or stream.consumer_count or stream.config.retention == "interest":
                stored_event(stream, stored)
            if res.expires:
                expiry.schedule_before(res.expires)  # a per-message TTL ending before the timer
            rp = res.republish
            if rp is not None:
                publish(rp[0], None, rp[2], rp[1])
        return res

    return accept


AcceptMany = Callable[[list[bytes], list[bytes], list[bytes], int, int], list[StoredMsg | PublishResult]]
"""Takes records ``start .. stop-1`` (``(subjects, header blocks, payloads, start, stop)``, a
header block ``b""`` for none) into a stream, in order: each one's ``StoredMsg`` when stored,
else its answer (see :func:`bulk_acceptor`)."""


def bulk_acceptor(stream: Stream, registry: StreamRegistry) -> AcceptMany:
    """:func:`acceptor` for runs of records (the bulk publish), each taken exactly as ``accept``
    takes it. Records that need no rule beyond their size and ``Nats-Msg-Id`` go through
    :meth:`Stream.process_many`, the storage limits checked once for the rest of the run when
    it fits under them whole (no per-message check could refuse one of them then), the
    consumers' host told once per run; any other record, a run that does not fit, and every
    record of an interest stream (whose messages nobody wants go as they are stored) go through
    ``accept``."""
    accept = acceptor(stream, registry)
    process_many = stream.process_many
    stored_many = registry.events.stored_many
    recent = stream.recent
    resources = registry.resources
    storage = stream.config.storage
    gauge = resources.gauge(storage)
    acct = resources.account_gauge(storage)

    def one(subjects: list[bytes], hdrs: list[bytes], payloads: list[bytes], i: int) -> PublishResult:
        hdr = hdrs[i]
        return accept(subjects[i], hdr, hdr + payloads[i] if hdr else payloads[i])

    def accept_many(
        subjects: list[bytes], hdrs: list[bytes], payloads: list[bytes], start: int, stop: int
    ) -> list[StoredMsg | PublishResult]:
        out: list[StoredMsg | PublishResult] = []
        i = start
        while i < stop:
            bound = _bytes(subjects, hdrs, payloads, i, stop) + (stop - i) * MSG_SIZE_BOUND
            if (
                stream.config.retention == "interest"
                or gauge.used + bound >= gauge.limit
                or acct.used + bound > acct.limit
            ):
                out.extend(one(subjects, hdrs, payloads, j) for j in range(i, stop))
                break
            k = len(out)
            j = process_many(subjects, hdrs, payloads, i, stop, _time_ns(), out)
            chunk = out[k:]
            if list(map(type, chunk)).count(StoredMsg) == len(chunk):  # all stored (in C)
                run = cast("list[StoredMsg]", chunk)
            else:
                run = [r for r in chunk if type(r) is StoredMsg]
            if run:
                if len(run) == j - i:
                    size = _bytes(subjects, hdrs, payloads, i, j)
                else:
                    size = sum(
                        len(subjects[n]) + len(hdrs[n]) + len(payloads[n])
                        for n in range(i, j)
                        if type(out[k + n - i]) is StoredMsg
                    )
                size += len(run) * MSG_SIZE_BOUND
                gauge.used += size
                acct.used += size
                if recent.enabled or stream.consumer_count:
                    stored_many(stream, run)
            if j < stop:
                out.append(one(subjects, hdrs, payloads, j))
                j += 1
            i = j
        return out

    return accept_many


def _bytes(subjects: list[bytes], hdrs: list[bytes], payloads: list[bytes], i: int, j: int) -> int:
    """The subject and message bytes of records ``i .. j-1`` (what ``accept`` counts of each)."""
    return sum(map(len, subjects[i:j])) + sum(map(len, hdrs[i:j])) + sum(map(len, payloads[i:j]))


def ingest_handler(stream: Stream, registry: StreamRegistry) -> MessageHandler:
    """The bus handler on a stream's subjects: the publish hot path, once per message."""
    streams = registry.streams
    name = stream.name
    accept = acceptor(stream, registry)
    committer = registry.committer
    park = committer.park
    mark_dirty = committer.mark_dirty
    publish_reply = registry.bus.publish_reply

    def ingest(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if name not in streams:
            return
        res = accept(subject, data[:hdr_len] if hdr_len else b"", data)
        durable_seq = res.durable_seq
        if reply is None or stream.config.no_ack:
            if durable_seq:
                mark_dirty(stream)
        elif not durable_seq:  # memory streams, refusals and errors: answered at once
            publish_reply(reply, res.ack)
        else:
            park(stream, durable_seq, reply, res.ack)

    return ingest


def ingest_run_handler(stream: Stream, registry: StreamRegistry) -> RunHandler:
    """:func:`ingest_handler` for a publisher's run of messages with replies to one of the
    stream's subjects (its async window): taken through :func:`bulk_acceptor`, each exactly as
    ``ingest`` takes it, and the answers due at once sent in one call (the others parked for the
    group commit, as ``ingest`` parks them)."""
    streams = registry.streams
    name = stream.name
    accept_many = bulk_acceptor(stream, registry)
    committer = registry.committer
    park = committer.park
    mark_dirty = committer.mark_dirty
    publish_replies = registry.bus.publish_replies
    stored_ack = stream.stored_ack

    def ingest_run(subject: bytes, replies: list[bytes], hdr_lens: list[int], datas: list[bytes]) -> None:
        if name not in streams:
            return
        n = len(datas)
        if any(hdr_lens):
            hdrs = [d[:h] for d, h in zip(datas, hdr_lens, strict=True)]
            payloads = [d[h:] if h else d for d, h in zip(datas, hdr_lens, strict=True)]
        else:
            hdrs = [b""] * n
            payloads = datas
        results = accept_many([subject] * n, hdrs, payloads, 0, n)
        durable = stream.durable
        no_ack = stream.config.no_ack
        to: list[bytes] = []  # the answers sent at once
        acks: list[bytes] = []
        dirty = False
        for reply, res in zip(replies, results, strict=True):
            if type(res) is StoredMsg:
                seq = res.seq
                ack = stored_ack(seq)
                durable_seq = seq if durable else 0
            else:
                res = cast("PublishResult", res)
                ack = res.ack
                durable_seq = res.durable_seq
            if no_ack:
                dirty = dirty or durable_seq > 0
            elif not durable_seq:  # memory streams, refusals and errors: answered at once
                to.append(reply)
                acks.append(ack)
            else:
                park(stream, durable_seq, reply, ack)
        if dirty:
            mark_dirty(stream)
        if to:
            publish_replies(to, acks)

    return ingest_run


def handler_is_local(registry: StreamRegistry) -> bool:
    """Whether this server stores a published message alone, as it arrives (not so where a
    replicated stream's group decides first)."""
    return registry.ingest_factory is ingest_handler


def _exhausted_ack(stream: str) -> bytes:
    """The answer to a publish while the server's limit for the stream's storage is used up."""
    return pub_error(stream, ApiError.of(E.INSUFFICIENT_RESOURCES))


def _account_exceeded_ack(stream: str) -> bytes:
    """The answer to a publish that would take the account past its limit for the storage."""
    return pub_error(stream, ApiError.of(E.ACCOUNT_RESOURCES_EXCEEDED))


def recovery_line(lost: LostData | None, notes: Sequence[str]) -> str:
    """What a stream's recovery found, as one bounded log line: the lost sequences as ranges
    and the store's notes on why."""
    what = "recovered with problems"
    if lost is not None and lost.msgs:
        what = f"lost {len(lost.msgs)} messages on recovery: {lost.ranges()}"
    return f"{what} ({'; '.join(notes)})" if notes else what
