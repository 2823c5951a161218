"""A replicated stream's replica on this server: its member of the stream's Raft group, the
publish path through it, and applying committed messages.

Owns: the entry a published message becomes (:class:`PubEntry`: subject, header length, the
published bytes, the leader's time stamp), proposing it on the leader and answering the
publisher with the leader's own apply result (the PubAck), the state machine every replica
applies entries with (``StreamRegistry.apply_published``: the single server's decide-and-apply),
replaying a log against a store that already holds some of its messages (see the package doc),
and the stream's ``cluster`` block in its info. Must not know: the meta group, placement, the
API's routes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.direct import DirectGet
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.info import stream_info
from jetpy.jetstream.models import ClusterInfo, StreamConfig, StreamInfo
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.stream import EXPIRE_SLICE, DeleteEntry, PurgeEntry, Stream, pub_error
from jetpy.server.jscluster.catchup import (
    CATCHUP_ALL,
    CatchupRequest,
    StreamSnapshot,
    decode_batch,
    decode_snapshot,
    encode,
    last_ts_of,
    write_batch,
)
from jetpy.server.jscluster.copying import CopyBatch, CopyEpoch, Copying, CopyMachine
from jetpy.server.jscluster.report import cluster_block
from jetpy.server.nrg import ProposalError, RaftGroup

__all__ = ["ConfigOp", "DeleteOp", "ExpireOp", "PubBatch", "PurgeOp", "StreamReplica", "log_owned_expiry"]

log = logging.getLogger("jetpy.jetstream")

CATCHUP_RETRY = 0.25  # seconds before asking again when no leader answered
EXPIRE_RETRY = 0.25  # seconds before proposing an expiry again when the last one failed
DIRECT_QUEUE = "_sys_"  # the queue group of a stream's replicas answering its direct gets
DIRECT_POLL = 0.25  # seconds between looks at whether a replica is current, to answer them

Fetch = Callable[[str, bytes], Awaitable[bytes | None]]
"""Ask the stream's other replicas (by stream name) for stored messages: an answer, or None."""
MEMORY_GIVE_UP = 3  # unanswered asks after which a memory stream's leader takes its loss


class PubBatch(msgspec.Struct, array_like=True, frozen=True, gc=False, tag=1):
    """Messages published in one turn of the leader's loop, as the stream's log carries them:
    message ``i`` is ``subjects[i]`` and ``datas[i]`` (the header block, its first
    ``hdr_lens[i]`` bytes, then the payload, as published); ``ts`` the leader's time stamp
    for the first (each next one is one more, or later: see the package doc)."""

    subjects: list[bytes]
    hdr_lens: list[int]
    datas: list[bytes]
    ts: int


class PurgeOp(msgspec.Struct, array_like=True, frozen=True, tag=2):
    """``STREAM.PURGE`` decided by the leader (``PurgeEntry``'s arguments)."""

    subject: str
    seq: int
    keep: int


class DeleteOp(msgspec.Struct, array_like=True, frozen=True, tag=3):
    """``STREAM.MSG.DELETE`` decided by the leader."""

    seq: int
    erase: bool


class ConfigOp(msgspec.Struct, array_like=True, frozen=True, tag=4):
    """A new config (JSON) taking effect at this point of the stream's log on every replica, so
    that every replica applies each message under the same limits."""

    config: bytes


class ExpireOp(msgspec.Struct, array_like=True, frozen=True, tag=7):
    """An expiry decided by the leader: every replica removes what ``max_age`` and the messages'
    TTLs say is due at the entry's time stamp (``ts``, the leader's clock, applied as a message's
    is) and leaves the delete markers that makes, at that time stamp: the same messages and
    markers, at the same sequences, on every replica."""

    ts: int


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(
    PubBatch | PurgeOp | DeleteOp | ConfigOp | CopyEpoch | CopyBatch | ExpireOp
).decode

BATCH_MSGS = 512  # messages in one proposal at most (nats-server's 512 per entry)...
BATCH_BYTES = 256 << 10  # ...and bytes of them (its 256 KiB)
ACK_SEP = b"\n"  # between the acks of a batch in its result (JSON never holds a raw newline)


def log_owned_expiry(stream: Stream) -> bool:
    """Whether a stream's expiry goes through its log (:meth:`StreamReplica.owns_expiry`) by its
    config alone: replicated, with ``max_age`` or per-message TTLs. Until its replica takes it
    (a restart) such a stream expires nothing on this server's clock."""
    cfg = stream.config
    return _expires(cfg) and (cfg.num_replicas or 1) > 1


def _expires(cfg: StreamConfig) -> bool:
    return cfg.max_age > 0 or cfg.allow_msg_ttl


class StreamReplica:
    """This server's replica of one replicated stream (see the module doc)."""

    def __init__(
        self, stream: Stream, registry: StreamRegistry, bus: MessageBus, cluster: str, fetch: Fetch
    ) -> None:
        self.stream = stream
        self.registry = registry
        self.bus = bus
        self.cluster = cluster
        self.group: RaftGroup | None = None  # set once its member started
        self.answered_create = False  # its first leader answers the create (once)
        self.assigned_config = b""  # the config the meta group holds for it (JSON)
        self.traffic_account = ""  # the account its group's traffic crosses (the system account)
        self.assigned_peers: list[str] = []  # the servers the meta group places it on
        self.consumer_count: Callable[[], int] = lambda: 0  # its consumers, as the meta group holds them
        self.domain = ""  # the server's JetStream domain: direct gets are answered under it too
        self._last_ts = 0  # the newest time stamp proposed or applied: each new one is later
        # A message's time stamp as applied: its entry's, or one more than the previous one's
        # (the same on every replica: a function of the log), so the time stamps in the store
        # rise with the log. The store's last one when the replica started says which entries
        # it has decided already (replaying the log: see the package doc).
        self._applied_ts = 0
        self._store_ts = stream.store.state().last_ts
        self._replayed_config: bytes | None = None  # the newest config met while replaying
        if self._store_ts:  # duplicates are decided as of the entries' times, not the clock's
            stream.relearn_msg_ids(self._store_ts)
        self._apply = registry.apply_published
        self._publish_reply = bus.publish_reply
        self._publish_replies = bus.publish_replies
        self._fetch = fetch
        # catching up with a leader's snapshot: the snapshot, the entries applied meanwhile
        # (applied once the store has the snapshot's messages), the task fetching them
        self._behind: StreamSnapshot | None = None
        self._held: list[bytes] = []
        self._catchup: asyncio.Task[None] | None = None
        # the batch being gathered in this turn of the loop (the leader): proposed at its end
        self._subjects: list[bytes] = []
        self._hdr_lens: list[int] = []
        self._datas: list[bytes] = []
        self._replies: list[bytes | None] = []
        self._batch_bytes = 0
        self._direct = DirectGet({}, bus, self._direct_answerer)
        self._direct_subs: list[object] = []
        self._direct_timer: asyncio.TimerHandle | None = None
        # a mirror's or sources' copies (:mod:`.copying`): applied here, made by the leader
        self.copies = CopyMachine(self)
        self.copier: Copying | None = None
        self._expiring = False  # an expiry this server proposed that has not applied yet
        stream.expiry_by_log = self

    # -- the publish path (the leader) ------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        g = self.group
        return g is not None and g.is_leader

    def ingest(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """A message published on the stream's subjects: the leader gathers it into the batch
        this turn of the loop proposes (only the leader subscribes them; one that has just
        stepped down drops what still arrives, and its publisher retries)."""
        group = self.group
        if group is None or not group.is_leader:
            return
        if self._behind is not None:  # a new leader still fetching messages: not yet
            if reply is not None and not self.stream.config.no_ack:
                self._publish_reply(reply, self._unavailable(RuntimeError("catching up")))
            return
        subjects = self._subjects
        if not subjects:
            asyncio.get_running_loop().call_soon(self._propose_batch)
        subjects.append(bytes(subject))
        self._hdr_lens.append(hdr_len)
        self._datas.append(bytes(data))
        self._replies.append(reply)
        self._batch_bytes += len(data)
        if len(subjects) >= BATCH_MSGS or self._batch_bytes >= BATCH_BYTES:
            self._propose_batch()

    def _propose_batch(self) -> None:
        """Propose the gathered messages as one item; answer each publisher once it applied."""
        subjects = self._subjects
        if not subjects:
            return  # proposed already (it was full)
        replies = self._replies
        if self.stream.config.no_ack:
            replies = [None] * len(replies)
        item = _encode(PubBatch(subjects, self._hdr_lens, self._datas, self.stamp(len(subjects))))
        self._subjects, self._hdr_lens, self._datas, self._replies = [], [], [], []
        self._batch_bytes = 0
        group = self.group
        try:
            if group is None:
                raise ProposalError("the stream's group is not started")
            fut = group.propose_nowait(item)
        except ProposalError as exc:
            self._fail(replies, exc)
            return
        fut.add_done_callback(lambda f: self._answer(f, replies))

    def stamp(self, count: int) -> int:
        """The leader's time stamp for an entry of ``count`` messages (later than any before)."""
        now = time.time_ns()
        ts = now if now > self._last_ts else self._last_ts + 1
        self._last_ts = ts + count - 1
        return ts

    def _answer(self, fut: asyncio.Future[list[bytes]], replies: list[bytes | None]) -> None:
        exc = fut.exception() if not fut.cancelled() else None
        if fut.cancelled() or exc is not None:
            if isinstance(exc, ProposalError) and exc.definite:
                self._fail(replies, exc)
            # otherwise their fate is unknown: no answer (a publisher times out, as with
            # nats-server; a retry is de-duplicated if it carries a Nats-Msg-Id), since an
            # error would say it was not stored
            return
        acks = fut.result()[0]
        if not acks:
            return  # applied while catching up (held): answered by nobody, as unknown
        answered = [
            (reply, ack)
            for reply, ack in zip(replies, acks.split(ACK_SEP), strict=True)
            if reply is not None and ack
        ]
        if answered:
            self._publish_replies([reply for reply, _ in answered], [ack for _, ack in answered])

    def _fail(self, replies: list[bytes | None], exc: Exception) -> None:
        err = self._unavailable(exc)
        for reply in replies:
            if reply is not None:
                self._publish_reply(reply, err)

    def _unavailable(self, exc: Exception) -> bytes:
        log.debug("stream '%s': a publish was not replicated: %s", self.stream.name, exc)
        return pub_error(self.stream.name, ApiError.of(E.CLUSTER_NOT_AVAIL))

    # -- the state machine (every replica) ---------------------------------------------------------

    async def propose_change(self, op: PurgeOp | DeleteOp | ConfigOp) -> bytes:
        """Replicate a purge, a delete or a config (the leader, for the API); its result once
        applied here: how many messages were purged, whether the message was there, 1."""
        g = self.group
        if g is None or not g.is_leader or self._behind is not None:
            raise ApiError.of(E.CLUSTER_NOT_AVAIL)
        try:
            return await g.propose(_encode(op))
        except ProposalError as exc:
            log.warning("stream '%s': a change was not replicated: %s", self.stream.name, exc)
            raise ApiError.of(E.CLUSTER_NOT_AVAIL) from None

    @property
    def behind(self) -> bool:
        """Still fetching the messages of a leader's snapshot from the leader."""
        return self._behind is not None

    @property
    def group_name(self) -> str:
        g = self.group
        return g.name if g is not None else ""

    @property
    def serving(self) -> bool:
        """Its member started and its store holds what the group applied: consumers read it."""
        return self.group is not None and self._behind is None

    @property
    def current(self) -> bool:
        """Serving, and applied all it knows is committed (/healthz)."""
        g = self.group
        return g is not None and self._behind is None and g.status().current

    def founded_from_store(self) -> None:
        """This replica founds its stream's group over what its store holds (an R1 stream scaled
        up): that is the state before the log's first entry, not a replay's to skip; the
        group's first snapshot hands it to the members that join (``snapshot_before_join``)."""
        self._applied_ts = self._last_ts = self._store_ts

    async def remove_acked(self, seqs: list[int]) -> None:
        """What a work-queue consumer acknowledged, removed through the stream's log (its group
        takes the proposal to its leader), every replica at the same point. One that fails
        leaves the messages stored until the consumer's leader sweeps them again
        (``ConsumerReplica._sweep``); none removes a message not acknowledged."""
        g = self.group
        if g is None:
            return
        try:
            await g.propose_many([_encode(DeleteOp(seq, False)) for seq in seqs])
        except ProposalError as exc:
            log.warning(
                "stream '%s': %d acknowledged messages not removed: %s", self.stream.name, len(seqs), exc
            )

    @property
    def replaying(self) -> bool:
        """Whether the store holds a message from a later entry than the last one applied."""
        if self.copies.is_mirror:  # its time stamps are its origin's
            return self.copies.replaying
        return self._applied_ts < self._store_ts

    def apply(self, index: int, items: Sequence[bytes]) -> Sequence[bytes]:
        if self._behind is not None:  # applied once the store has the snapshot's messages
            self._held.extend(items)
            return [b""] * len(items)
        out = []
        for item in items:
            e = _decode(item)
            if self._replayed_config is not None and not self.replaying:
                self._set_config(self._replayed_config)  # the replay is over: the newest one
                self._replayed_config = None
            if isinstance(e, ConfigOp):
                if self.replaying:
                    self._replayed_config = e.config
                    out.append(b"")
                else:
                    out.append(self._set_config(e.config))
                continue
            if isinstance(e, CopyEpoch | CopyBatch):
                out.append(self.copies.apply(e))
                continue
            if isinstance(e, ExpireOp):
                out.append(self._expire(e))
                continue
            if not isinstance(e, PubBatch):
                out.append(self._change(e))
                continue
            out.append(self._apply_batch(e))
        return out

    def _apply_batch(self, b: PubBatch) -> bytes:
        """Each message decided and applied as a single server does; their acks, one per
        message (empty: decided before a restart), joined by :data:`ACK_SEP`."""
        apply, stream, store_ts = self._apply, self.stream, self._store_ts
        ts, applied = b.ts, self._applied_ts
        acks = []
        for subject, hdr_len, data in zip(b.subjects, b.hdr_lens, b.datas, strict=True):
            applied = ts if ts > applied else applied + 1
            if applied <= store_ts:
                acks.append(b"")  # decided before the restart: stored then, or refused then
                continue
            acks.append(apply(stream, subject, data[:hdr_len] if hdr_len else b"", data, applied).ack)
        self._applied_ts = applied
        if applied > self._last_ts:
            self._last_ts = applied
        return ACK_SEP.join(acks)

    def next_stamp(self, ts: int) -> int | None:
        """The time stamp the next message of an entry stamped ``ts`` applies at (as in
        :meth:`_apply_batch`); None when the store holds it already (decided before a restart)."""
        applied = ts if ts > self._applied_ts else self._applied_ts + 1
        self._applied_ts = applied
        if applied > self._last_ts:
            self._last_ts = applied
        return None if applied <= self._store_ts else applied

    def _set_config(self, raw: bytes) -> bytes:
        cfg = msgspec.json.decode(raw, type=StreamConfig)
        if cfg != self.stream.config:
            old = self.stream.config
            registry = self.registry
            registry.update(self.stream, cfg)  # lowered limits take effect at once
            registry.removed(self.stream)
            registry.committer.mark_dirty(self.stream)
            if self.copier is not None and (cfg.mirror, cfg.sources) != (old.mirror, old.sources):
                self.copier.config_changed()
        return b"1"

    def _change(self, op: PurgeOp | DeleteOp) -> bytes:
        """A purge or a delete on this replica. While the log is replayed against a store that
        holds later messages, its effect is in the store already: applied again it would
        remove those later messages, so it is skipped."""
        if self.replaying:
            return b""
        stream, registry = self.stream, self.registry
        if isinstance(op, PurgeOp):
            result = stream.apply_purge(PurgeEntry(op.subject, op.seq, op.keep))
        else:
            result = int(stream.apply_delete(DeleteEntry(op.seq, op.erase)))
        if result:
            registry.removed(stream)
            registry.committer.mark_dirty(stream)
        return b"%d" % result

    # -- expiry through the log (see the package doc) ------------------------------------------

    def owns_expiry(self) -> bool:
        """A replicated stream expires through its log. Each server's own timer would leave
        delete markers at different sequences on different replicas (nats-server's leader, too,
        proposes its markers); and even expiry that only removes changes what the next entries
        are decided against (``Nats-Expected-Last-Subject-Sequence``, ``discard: new`` at a
        limit), so a replica that expired a message sooner or later than the others (one
        restarted, expiring before it replays its log) would decide them otherwise."""
        return _expires(self.stream.config)

    def may_propose_expiry(self) -> bool:
        return not self._expiring and self._behind is None and self.is_leader

    def propose_expiry(self) -> None:
        g = self.group
        if g is None:
            return
        self._expiring = True
        try:
            fut = g.propose_nowait(_encode(ExpireOp(self.stamp(1))))
        except ProposalError as exc:
            self._expiry_failed(exc)
            return
        fut.add_done_callback(self._expiry_applied)

    def _expiry_applied(self, fut: asyncio.Future[list[bytes]]) -> None:
        exc = fut.exception() if not fut.cancelled() else None
        if fut.cancelled() or exc is not None:
            self._expiry_failed(exc)
            return
        self._expiring = False
        self.registry.expiry.schedule()  # what is due next (at once if a slice was not all)

    def _expiry_failed(self, exc: BaseException | None) -> None:
        """Not applied (no quorum, not leading any more): asked again a while later, by
        whichever server leads then."""
        log.debug("stream '%s': an expiry was not replicated: %s", self.stream.name, exc)

        def again() -> None:
            self._expiring = False
            self.registry.expiry.schedule()

        asyncio.get_running_loop().call_later(EXPIRE_RETRY, again)

    def _expire(self, op: ExpireOp) -> bytes:
        """An expiry on this replica, at the entry's time stamp (skipped while the log is
        replayed over a store that holds what it did: see the package doc)."""
        ts = self.next_stamp(op.ts)
        if ts is None:
            return b""
        stream = self.stream
        removed, markers = stream.expire(ts, EXPIRE_SLICE)
        if removed or markers:
            self.registry.expired(stream, removed, markers)
        return b"%d" % removed

    # -- snapshots and catching up (see catchup's module doc) ----------------------------------

    def snapshot(self) -> bytes:
        """The store synced, described (no message in it); while still catching up, the
        snapshot being caught up with and every entry applied since."""
        behind = self._behind
        if behind is not None:
            return encode(msgspec.structs.replace(behind, held=[*behind.held, *self._held]))
        store = self.stream.store
        store.flush()
        store.sync()  # the log is compacted behind this: the store must hold it on disk
        st = store.state(deleted_details=True)
        return encode(
            StreamSnapshot(
                st.first_seq,
                st.last_seq,
                self._applied_ts,
                st.deleted or [],
                msgspec.json.encode(self.stream.config),
                copy_epoch=self.copies.epoch,
                last_ts=st.last_ts,
            )
        )

    def restore(self, data: bytes) -> None:
        """At start, this replica's own snapshot (its store holds that much already); or the
        leader's, when this one fell behind what the leader's log holds: the store drops what
        the leader had removed and fetches the messages it lacks before any later entry
        applies."""
        if not data:
            return
        snap = decode_snapshot(data)
        self._applied_ts = snap.ts
        self.copies.restored(snap.copy_epoch, snap.last_seq)
        self._last_ts = max(self._last_ts, snap.ts)
        if snap.config and snap.config != msgspec.json.encode(self.stream.config):
            self._set_config(snap.config)
        store = self.stream.store
        st = store.state()
        removed = 0
        if st.first_seq < snap.first_seq and (st.msgs or st.last_seq < snap.first_seq - 1):
            # moved on to the snapshot's empty store: with its last message's time stamp (that
            # of the store's own last message, older, would take its entries for undecided)
            empty = snap.first_seq > snap.last_seq
            removed += store.compact(snap.first_seq, last_ts_of(snap) if empty else 0)
        for seq in snap.deleted:
            if seq <= st.last_seq:
                removed += store.remove_msg(seq)
        if removed:
            self.registry.removed(self.stream)
            self.registry.committer.mark_dirty(self.stream)
        self._behind, self._held = snap, []
        if self._direct_subs:
            self._direct_off()
        if self._catchup is not None:
            self._catchup.cancel()
        if store.state().last_seq >= snap.last_seq:
            self._caught_up()
        else:
            log.info(
                "stream '%s': fetching messages %d-%d from the leader",
                self.stream.name,
                store.state().last_seq + 1,
                snap.last_seq,
            )
            self._catchup = asyncio.get_running_loop().create_task(self._catching_up(snap))

    async def _catching_up(self, snap: StreamSnapshot) -> None:
        try:
            await self._catch_up(snap)
        except asyncio.CancelledError:
            raise
        except Exception:  # the replica stays behind (refusing to lead publishes): said
            log.exception("stream '%s': catching up with the leader failed", self.stream.name)

    async def _catch_up(self, snap: StreamSnapshot) -> None:
        """Fetch the snapshot's messages, and on through whatever the answering replica holds
        (see ``catchup``'s module doc): what it removed after the snapshot was removed by later
        entries, and those, applied here, would be decided without the messages they saw."""
        store, name = self.stream.store, self.stream.name
        nxt = store.state().last_seq + 1
        misses = 0
        while True:
            raw = await self._fetch(name, encode(CatchupRequest(nxt, CATCHUP_ALL)))
            if raw is None:
                misses += 1
                if (
                    misses >= MEMORY_GIVE_UP
                    and nxt <= snap.last_seq
                    and self.is_leader
                    and self.stream.config.storage == "memory"
                ):
                    # no replica holds them: every server restarted, and memory is gone
                    log.warning(
                        "stream '%s': messages %d-%d are lost (a memory stream that every "
                        "replica restarted); its sequence goes on after them",
                        name,
                        nxt,
                        snap.last_seq,
                    )
                    store.skip_msgs(nxt, snap.last_seq - nxt + 1, last_ts_of(snap))
                    break
                await asyncio.sleep(CATCHUP_RETRY)
                continue
            misses = 0
            try:
                batch = decode_batch(raw)
            except (msgspec.DecodeError, ValueError):
                log.warning("stream '%s': a malformed catch-up batch", name)
                await asyncio.sleep(CATCHUP_RETRY)
                continue
            got = write_batch(store, batch, CATCHUP_ALL)
            self.registry.committer.mark_dirty(self.stream)
            if got > snap.last_seq and not batch.more:
                break  # the snapshot's messages, and all the answer's store held
            if got == nxt:
                await asyncio.sleep(CATCHUP_RETRY)  # the leader has not applied them yet
            nxt = got
        self._catchup = None
        self._caught_up()

    def _caught_up(self) -> None:
        """The store holds the snapshot's messages: what was applied meanwhile applies now."""
        snap = self._behind
        assert snap is not None
        held = [*snap.held, *self._held]
        self._behind, self._held = None, []
        stream = self.stream
        self._store_ts = max(self._store_ts, stream.store.state().last_ts)
        stream.relearn_msg_ids(max(self._applied_ts, self._store_ts))
        self.registry.removed(stream)  # counts and caches follow the store
        self.registry.expiry.schedule()  # fetched messages may expire (max_age, their TTLs)
        if held:
            self.apply(0, held)
        if self.group is not None and self._direct_timer is None and not self._direct_subs:
            self.direct_when_current()

    def close(self) -> None:
        """Stop fetching, copying, expiring and answering direct gets (the replica stops or
        goes: a stream held locally then expires on this server's clock)."""
        if self.stream.expiry_by_log is self:
            self.stream.expiry_by_log = None
        if self.copier is not None:
            self.copier.stop()
        task, self._catchup = self._catchup, None
        if task is not None:
            task.cancel()
        if self._direct_timer is not None:
            self._direct_timer.cancel()
            self._direct_timer = None
        self._direct_off()

    # -- direct gets (one replica answers each) -----------------------------------------------------

    def direct_when_current(self) -> None:
        """Answer the stream's direct gets (``$JS.API.DIRECT.GET.<stream>[.>]``, and under the
        JetStream domain's prefix, ``$JS.<domain>.API.DIRECT.GET...``, in the queue
        group :data:`DIRECT_QUEUE` of its replicas, so one answers each, as nats-server's) once
        this replica has applied all it knows is committed; not while it fetches messages."""
        self._direct_timer = None
        g = self.group
        if g is None:
            return
        if not self._direct_subs and self._behind is None and g.status().current:
            name = self.stream.name
            subscribe = self.bus.subscribe
            handle = self._direct.handle
            self._direct_subs = [
                subscribe(f"$JS.API.DIRECT.GET.{name}", handle, DIRECT_QUEUE),
                subscribe(f"$JS.API.DIRECT.GET.{name}.>", handle, DIRECT_QUEUE),
            ]
            if self.domain:  # the same under the JetStream domain's prefix
                on_domain = self._direct.handle_domain
                self._direct_subs += [
                    subscribe(f"$JS.{self.domain}.API.DIRECT.GET.{name}", on_domain, DIRECT_QUEUE),
                    subscribe(f"$JS.{self.domain}.API.DIRECT.GET.{name}.>", on_domain, DIRECT_QUEUE),
                ]
        if not self._direct_subs:
            self._direct_timer = asyncio.get_running_loop().call_later(DIRECT_POLL, self.direct_when_current)

    def _direct_off(self) -> None:
        subs, self._direct_subs = self._direct_subs, []
        for sub in subs:
            self.bus.unsubscribe(sub)

    def _direct_answerer(self, name: str) -> Stream | None:
        s = self.stream
        return s if name == s.name and s.config.allow_direct else None

    # -- info ---------------------------------------------------------------------------------------

    def info(self, *, deleted_details: bool = False, subjects: dict[str, int] | None = None) -> StreamInfo:
        """The stream's info with its ``cluster`` block (what its leader answers) and the count
        of its consumers the cluster holds (each its own group, not this replica's engine's);
        ``deleted_details`` and ``subjects`` as ``info.stream_info``'s."""
        si = stream_info(self.stream, deleted_details=deleted_details, subjects=subjects)
        state = msgspec.structs.replace(si.state, consumer_count=self.consumer_count())
        return msgspec.structs.replace(si, state=state, cluster=self.cluster_info())

    def cluster_info(self) -> ClusterInfo:
        """The stream's ``cluster`` block, as its leader reports it (its peers' health from the
        group's own view of them)."""
        g = self.group
        return cluster_block(
            self.cluster,
            g.status() if g is not None else None,
            g.names if g is not None else {},
            (self.stream.config.num_replicas or 1) > 1,
            self.traffic_account,
        )
