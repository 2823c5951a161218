"""Stream: one JetStream stream: its config, its store, and what a change to it means.

Owns what happens to a message published on a stream's subjects: the header checks
(``Nats-Expected-*``, ``Nats-TTL``), de-duplication by ``Nats-Msg-Id`` within ``duplicate_window``,
rollups, limits and per-message TTLs (enforced by the store), and the PubAck text; and the split
of every change into *deciding* it (checks against the current state) and *applying* it (the
store and the stream's own state, deterministically, from a ``StreamEntry``): the seam where a
replicated log goes. Also holds the stream's recent-message cache for its consumers.

Must not know: the network, consumers, timers, or when a PubAck may leave (after the fsync, for
file streams: the committer's business). Knows the store only through ``StreamStore``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig, StreamSourceInfo
from jetpy.jetstream.recent import RecentMessages
from jetpy.jetstream.republish import RepublishedMsg, Republisher
from jetpy.jetstream.seek import seq_at_time
from jetpy.jetstream.steps import Steps, run_steps
from jetpy.jetstream.transform import SubjectTransform
from jetpy.protocol.headers import get_header
from jetpy.store.base import (
    ErrMsgTooLarge,
    ErrStoreIO,
    StoredMsg,
    StoreError,
    StoreLimits,
    StreamStore,
)
from jetpy.store.ttl import parse_ttl
from jetpy.subjects import is_valid_subject, subject_matches

__all__ = [
    "EXPIRE_SLICE",
    "DeleteEntry",
    "ExpiryByLog",
    "MsgEntry",
    "OriginsReport",
    "PublishResult",
    "PurgeEntry",
    "SkipEntry",
    "Stream",
    "StreamEntry",
    "limits_of",
    "pub_ack",
    "pub_error",
]

_json = msgspec.json.Encoder()
_time_ns = time.time_ns

DEDUP_BATCH = 1024  # messages read at once when re-learning message ids after a restart
EXPIRE_SLICE = 1024
"""Messages expired at most in one go (a few ms of work on a file stream): a million messages past
``max_age`` at once (a stream that was idle, a lowered ``max_age``) are removed a slice at a time,
other clients served between."""

MAX_HEADER_SIZE = 64 * 1024  # nats-server rejects JetStream messages with larger header blocks (10097)

H_MSG_ID = b"Nats-Msg-Id"
_MSG_ID_KEY = b"\r\n" + H_MSG_ID + b":"  # as get_header finds it
H_EXPECTED_STREAM = b"Nats-Expected-Stream"
H_EXPECTED_LAST_SEQ = b"Nats-Expected-Last-Sequence"
H_EXPECTED_LAST_SUBJ_SEQ = b"Nats-Expected-Last-Subject-Sequence"
H_EXPECTED_LAST_SUBJ_SEQ_SUBJ = b"Nats-Expected-Last-Subject-Sequence-Subject"
H_EXPECTED_LAST_MSG_ID = b"Nats-Expected-Last-Msg-Id"
H_ROLLUP = b"Nats-Rollup"
H_TTL = b"Nats-TTL"
H_STREAM = "Nats-Stream"
H_SUBJECT = "Nats-Subject"
H_SEQUENCE = "Nats-Sequence"
H_LAST_SEQUENCE = "Nats-Last-Sequence"
H_TIME_STAMP = "Nats-Time-Stamp"
H_MSG_SIZE = "Nats-Msg-Size"


class PublishResult(msgspec.Struct, frozen=True, gc=False):
    """What to answer a publish with: an ack (``seq``) or an error; ``durable_seq`` > 0 means the
    ack must wait until the store has synced that sequence. A Struct rather than a dataclass:
    one is built per published message, and a Struct is built in C (about three times faster)."""

    ack: bytes
    durable_seq: int = 0
    stored: StoredMsg | None = None  # exactly what was stored (None: not stored, or a duplicate)
    expires: int = 0  # when its own TTL ends (ns since epoch; 0: none), for the expiry timer
    republish: RepublishedMsg | None = None  # what to publish for the stream's ``republish``
    duplicate: int = 0  # a duplicate's: the sequence the stream holds its message id as


def _ack_format(stream: str, domain: str = "") -> bytes:
    """nats-server's PubAck for ``stream`` as a %-format taking the sequence (it writes these by
    hand, hence the odd spacing; the server's JetStream domain after the stream, when it has
    one). A stream keeps its own, so that an ack is one % per message."""
    head = b'{"stream":"%s", ' % stream.encode()
    if domain:
        head += b'"domain":"%s", ' % domain.encode()
    return head.replace(b"%", b"%%") + b'"seq":%d}'


def pub_ack(stream: str, seq: int, duplicate: bool = False, domain: str = "") -> bytes:
    # byte-for-byte nats-server's PubAck
    ack = _ack_format(stream, domain) % seq
    if duplicate:
        return ack[:-1] + b',"duplicate": true}'
    return ack


def pub_error(stream: str, err: ApiError) -> bytes:
    return b'{"error":%s,"stream":"%s","seq":0}' % (_json.encode(err.to_wire()), stream.encode())


class MsgEntry(msgspec.Struct, frozen=True, gc=False):
    """A publish that was decided (every check passed) and is ready to apply: exactly what each
    copy of the stream stores, so applying it is deterministic (the timestamp was decided too).
    ``rollup`` is ``b""``, ``b"sub"`` or ``b"all"``; ``ttl`` as ``StreamStore.store_msg`` takes it."""

    subject: str
    hdr: bytes
    payload: bytes
    ts: int
    ttl: int = 0
    msg_id: str = ""
    rollup: bytes = b""


class PurgeEntry(msgspec.Struct, frozen=True):
    """``STREAM.PURGE`` decided: nats-server's PurgeEx arguments."""

    subject: str = ""
    seq: int = 0
    keep: int = 0


class DeleteEntry(msgspec.Struct, frozen=True):
    """``STREAM.MSG.DELETE`` decided: remove ``seq``, overwriting its bytes when ``erase``."""

    seq: int
    erase: bool = True


class SkipEntry(msgspec.Struct, frozen=True):
    """Sequences ``seq .. seq+num-1`` used up with no message: a mirror keeping its origin's
    numbers across messages the origin no longer had when they were to be copied."""

    seq: int
    num: int


StreamEntry = MsgEntry | PurgeEntry | DeleteEntry | SkipEntry
"""What changes a stream's contents: the unit a replicated log carries (propose, commit, apply)."""


class OriginsReport(Protocol):
    """What a stream that copies other streams (a mirror, or one with sources) reports about
    them in its info: the host running its copies sets ``Stream.origins`` to one of these."""

    def mirror_info(self, now: int) -> StreamSourceInfo | None: ...

    def sources_info(self, now: int) -> list[StreamSourceInfo]: ...


class ExpiryByLog(Protocol):
    """A stream whose expiry is decided through a replicated log rather than on each server's
    clock (a replicated stream: every replica must remove the same messages and leave the same
    markers at the same points of its log). The expiry timer asks it, for such a stream,
    instead of expiring the store itself."""

    def owns_expiry(self) -> bool:
        """Whether the stream's expiry goes through the log now (its config says so)."""
        ...

    def may_propose_expiry(self) -> bool:
        """Whether this server puts the next expiry in the log now (it leads, and the last one
        it put there has applied)."""
        ...

    def propose_expiry(self) -> None:
        """Put an expiry in the log: every replica expires what is due at its time stamp."""
        ...


class Stream:
    """One stream. Changes go through two steps, the seam replication builds on: :meth:`decide`
    (checks against the current state; a refusal or duplicate is answered without changing
    anything) and :meth:`apply` (the decided change, applied deterministically to the store and
    to the stream's own state). A single server decides and applies at once (:meth:`process`)."""

    def __init__(
        self, config: StreamConfig, store: StreamStore, created_ns: int, identity: str = "", domain: str = ""
    ) -> None:
        self.config = config
        self.name = config.name
        self.store = store
        self.created_ns = created_ns
        # which incarnation of this name it is: a stream deleted and created again gets a new one
        # (nats-server's Nats-Stream-Identity), so those copying it can tell
        self.identity = identity
        self.durable = config.storage == "file"
        self.domain = domain  # the server's JetStream domain ("" without one)
        self._ack_format = _ack_format(self.name, domain)  # the PubAck, but for its sequence
        self._dup_format = self._ack_format[:-1] + b',"duplicate": true}'  # a duplicate's (pub_ack)
        # Nats-Msg-Id -> (seq, ts_ns), oldest first, trimmed to duplicate_window
        self._dedup: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._last_msg_id = ""
        # the newest messages, for consumers that keep up (their host maintains the contents)
        self.recent = RecentMessages(_store_never_discards(config))
        self.consumer_count = 0  # kept by the consumers' host (the publish path reads it)
        self.direct_count = 0  # of those, the internal ones of mirrors and sources: not reported
        # who expires its messages when its expiry is decided through a replicated log (None:
        # the server's expiry timer, on this server's clock)
        self.expiry_by_log: ExpiryByLog | None = None
        self.origins: OriginsReport | None = None  # set while it copies other streams
        self._derive(config)

    def _derive(self, config: StreamConfig) -> None:
        """What the publish path reads, derived once per config."""
        self._plain_limit = _plain_limit(config)
        st = config.subject_transform
        # the input subject transform: a stored subject is the published one, mapped
        self._map_subject = SubjectTransform(st.src, st.dest).map if st is not None and st.dest else None
        rp = config.republish
        self._republish = Republisher(self.name, rp) if rp is not None and rp.dest else None

    # -- config ---------------------------------------------------------------------------------

    def matches(self, subject: str) -> bool:
        return any(subject_matches(f, subject) for f in self.config.subjects)

    def update_config(self, config: StreamConfig, now_ns: int | None = None) -> None:
        """Apply a new config; lowered limits (max_age included) take effect at once, as
        nats-server's UpdateConfig does, so the update's reply already shows their effect."""
        run_steps(self.update_config_steps(config, now_ns))

    def update_config_steps(self, config: StreamConfig, now_ns: int | None = None) -> Steps[None]:
        """:meth:`update_config` in steps: lowered limits may remove a million messages, a few
        thousand per step (the new limits hold for what is stored in between)."""
        self.config = config
        self._derive(config)
        # in place: consumers hold this object (the update may also have removed messages)
        self.recent.reset(_store_never_discards(config))
        self.store.set_compression(config.compression)
        yield from self.store.update_limits_steps(limits_of(config))
        by_log = self.expiry_by_log
        if config.max_age > 0 and (by_log is None or not by_log.owns_expiry()):
            # (an expiry decided through the log waits for its next entry there)
            now = time.time_ns() if now_ns is None else now_ns
            while self.store.expire(now, EXPIRE_SLICE) == EXPIRE_SLICE:
                yield

    # -- publish --------------------------------------------------------------------------------

    def process(self, subject: bytes, hdr: bytes, data: bytes, now_ns: int | None = None) -> PublishResult:
        """Decide and apply one published message (hdr may be empty); returns the ack to send."""
        now = _time_ns() if now_ns is None else now_ns
        if not hdr and len(data) <= self._plain_limit:
            # the common case: no header, so nothing to decide but what _plain_limit says
            subj = subject.decode()
            if self._map_subject is not None:
                subj = self._map_subject(subj)
            return self._store(subj, b"", data, now, 0, "", b"")
        decided = self.decide(subject, hdr, data, now)
        if isinstance(decided, PublishResult):
            return decided
        return self.apply_msg(decided)

    def process_many(
        self,
        subjects: list[bytes],
        hdrs: list[bytes],
        payloads: list[bytes],
        start: int,
        stop: int,
        now: int,
        out: list[StoredMsg | PublishResult],
    ) -> int:
        """:meth:`process` of the records ``start .. stop-1`` (record i: ``subjects[i]``, its
        header block ``hdrs[i]``, ``b""`` for none, and its payload ``payloads[i]``), all at time
        ``now``, while each needs no rule beyond its size and its ``Nats-Msg-Id``: the same
        decisions, the attribute lookups and the de-duplication window's trim paid once. Appends
        each record's outcome to ``out`` (its ``StoredMsg`` when stored, else the answer) and
        returns the index of the first record left to :meth:`process` (``stop`` when none is):
        one with other ``Nats-*`` headers, too large, or every record of a sealed stream or one
        that republishes."""
        if self._republish is not None:
            return start
        limit = self._plain_limit  # -1 when sealed: every record goes to process()
        dedup = self._dedup
        self._trim_dedup(now)
        simple_id = _simple_id
        append = out.append
        names: dict[bytes, str] = {}  # a published subject -> the one it is stored under
        # the run decided to be stored: records a .. i-1 (a run is stored before any other
        # outcome is appended, so it is always consecutive records), their message ids
        a = start
        ids: list[str] = []
        in_run: set[str] = set()
        for i in range(start, stop):
            hdr = hdrs[i]
            if hdr:
                if len(hdr) > MAX_HEADER_SIZE or len(payloads[i]) > limit:
                    stop = i
                    break
                msg_id = simple_id(hdr)
                if msg_id is None:
                    stop = i
                    break
                if msg_id:
                    if msg_id in in_run:  # a duplicate of a record of this run: stored first
                        self._store_run(subjects, hdrs, payloads, a, i, ids, names, now, out)
                        a = i
                        in_run.clear()
                    seen = dedup.get(msg_id)
                    if seen is not None:
                        if i > a:
                            self._store_run(subjects, hdrs, payloads, a, i, ids, names, now, out)
                            in_run.clear()
                        append(self._duplicate(seen[0]))
                        a = i + 1
                        continue
                    in_run.add(msg_id)
            elif len(payloads[i]) > limit:
                stop = i
                break
            else:
                msg_id = ""
            ids.append(msg_id)
        if stop > a:
            self._store_run(subjects, hdrs, payloads, a, stop, ids, names, now, out)
        return stop

    def _store_run(
        self,
        published: list[bytes],
        all_hdrs: list[bytes],
        all_payloads: list[bytes],
        a: int,
        b: int,
        msg_ids: list[str],
        names: dict[bytes, str],
        now: int,
        out: list[StoredMsg | PublishResult],
    ) -> None:
        """Store records ``a .. b-1``, which ``process_many`` decided to store (``msg_ids``:
        theirs, ``""`` for none), in order, at ``now`` (the store's runs in one call,
        ``store_many``; any message it leaves alone through ``store_msg``); record their
        message ids, append their outcomes to ``out``, and empty ``msg_ids``."""
        raw = published[a:b]
        for subject in set(raw).difference(names):  # the stored subjects, each mapped once
            subj = subject.decode()
            names[subject] = self._map_subject(subj) if self._map_subject is not None else subj
        subjects = list(map(names.__getitem__, raw))
        hdrs = all_hdrs[a:b]
        payloads = all_payloads[a:b]
        store = self.store
        dedup = self._dedup
        n = len(subjects)
        k = 0
        while k < n:
            got = store.store_many(subjects, hdrs, payloads, k, now)
            if got:
                first = store.state().last_seq - got + 1
                e = k + got
                seqs = range(first, first + got)
                out.extend(
                    [
                        StoredMsg(subj, seq, now, hdr, payload)
                        for subj, seq, hdr, payload in zip(
                            subjects[k:e], seqs, hdrs[k:e], payloads[k:e], strict=True
                        )
                    ]
                )
                ids = msg_ids[k:e]
                if "" in ids:
                    dedup.update((mid, (seq, now)) for mid, seq in zip(ids, seqs, strict=True) if mid)
                else:
                    dedup.update(zip(ids, [(seq, now) for seq in seqs], strict=True))
                last = next((mid for mid in reversed(ids) if mid), "")
                if last:
                    self._last_msg_id = last
                k = e
                continue
            subj = subjects[k]
            try:
                seq, ts = store.store_msg(subj, hdrs[k], payloads[k], now, 0)
            except StoreError as err:
                out.append(self._store_failed(err))
            else:
                msg_id = msg_ids[k]
                if msg_id:
                    dedup[msg_id] = (seq, ts)
                    self._last_msg_id = msg_id
                out.append(StoredMsg(subj, seq, ts, hdrs[k], payloads[k]))
            k += 1
        msg_ids.clear()

    def decide(self, subject: bytes, hdr: bytes, data: bytes, now: int) -> MsgEntry | PublishResult:
        """Check a published message against the stream's config and state: the entry to apply,
        or the answer when it is refused or a duplicate (nothing changes then)."""
        cfg = self.config
        subj = subject.decode()
        if self._map_subject is not None:
            subj = self._map_subject(subj)  # every check sees the subject it is stored under
        try:
            if cfg.sealed:
                raise ApiError.of(E.STREAM_SEALED)
            if cfg.max_msg_size >= 0 and len(data) - len(hdr) > cfg.max_msg_size:
                raise ApiError.of(E.STREAM_MESSAGE_EXCEEDS_MAXIMUM)
            if not hdr:
                return MsgEntry(subj, b"", data, now)
            checked = self._check_headers(subj, hdr, now)
        except ApiError as e:
            return PublishResult(pub_error(self.name, e))
        if isinstance(checked, PublishResult):
            return checked  # a duplicate: acknowledged again, not stored
        msg_id, rollup, ttl = checked
        return MsgEntry(subj, hdr, data[len(hdr) :], now, ttl, msg_id, rollup)

    def apply(self, entry: StreamEntry) -> PublishResult | int | bool | None:
        """Apply a decided change: a message (its PublishResult), a purge (how many messages
        went), a delete (whether the message was there) or a skip."""
        if isinstance(entry, MsgEntry):
            return self.apply_msg(entry)
        if isinstance(entry, PurgeEntry):
            return self.apply_purge(entry)
        if isinstance(entry, SkipEntry):
            self.apply_skip(entry)
            return None
        return self.apply_delete(entry)

    def apply_msg(self, e: MsgEntry) -> PublishResult:
        return self._store(e.subject, e.hdr, e.payload, e.ts, e.ttl, e.msg_id, e.rollup)

    def apply_purge(self, e: PurgeEntry) -> int:
        return self.store.purge(e.subject, e.seq, e.keep)

    def purge_steps(self, e: PurgeEntry) -> Steps[int]:
        """:meth:`apply_purge` in steps (a large purge yields to other work between them)."""
        return self.store.purge_steps(e.subject, e.seq, e.keep)

    def apply_delete(self, e: DeleteEntry) -> bool:
        return self.store.erase_msg(e.seq) if e.erase else self.store.remove_msg(e.seq)

    def apply_skip(self, e: SkipEntry) -> None:
        self.store.skip_msgs(e.seq, e.num)

    def decide_copy(self, subject: str, hdr: bytes, payload: bytes, ts: int) -> MsgEntry | PublishResult:
        """Check a message copied from another stream (by a mirror, at the origin's ``ts``, or
        from a source). As nats-server 2.15 takes them: the stream's own limits and its input
        transform apply; a ``Nats-TTL`` is kept even where this stream would refuse one from a
        publisher; ``Nats-Msg-Id`` is not de-duplicated (the copy keeps its place in its origin's
        order); a rollup rolls up only where this stream allows rollups, and is never refused.
        The caller has taken the ``Nats-Expected-*`` headers out: they were checked upstream."""
        cfg = self.config
        if self._map_subject is not None:
            subject = self._map_subject(subject)
        try:
            if cfg.sealed:
                raise ApiError.of(E.STREAM_SEALED)
            if cfg.max_msg_size >= 0 and len(payload) > cfg.max_msg_size:
                raise ApiError.of(E.STREAM_MESSAGE_EXCEEDS_MAXIMUM)
            if len(hdr) > MAX_HEADER_SIZE:
                raise ApiError.of(E.STREAM_HEADER_EXCEEDS_MAXIMUM)
            ttl = 0
            rollup = b""
            if hdr:
                raw_ttl = get_header(hdr, H_TTL)
                if raw_ttl is not None:
                    try:
                        ttl = parse_ttl(raw_ttl)
                    except ValueError:
                        raise ApiError.of(E.MESSAGE_TTL_INVALID) from None
                if cfg.allow_rollup_hdrs and not cfg.deny_purge:
                    r = get_header(hdr, H_ROLLUP) or b""
                    rollup = r if r in (b"sub", b"all") else b""
        except ApiError as e:
            return PublishResult(pub_error(self.name, e))
        return MsgEntry(subject, hdr, payload, ts, ttl, "", rollup)

    def _store(
        self, subj: str, hdr: bytes, payload: bytes, ts: int, ttl: int, msg_id: str, rollup: bytes
    ) -> PublishResult:
        """Applying a message: the store, the de-duplication record, the rollup, the republish."""
        rp = self._republish
        dest = rp.destination(subj) if rp is not None else None
        last = 0
        if dest is not None:  # republish names the subject's previous sequence
            prev = self.store.load_last_msg(subj)
            last = prev.seq if prev is not None else 0
        try:
            seq, ts = self.store.store_msg(subj, hdr, payload, ts, ttl)
        except StoreError as e:
            return self._store_failed(e)
        if msg_id:
            self._dedup[msg_id] = (seq, ts)
            self._last_msg_id = msg_id
        if rollup and seq > 1:  # remove what is below the rollup (a seq of 1 would mean "no bound")
            self.store.purge(subj if rollup == b"sub" else "", seq, 0)
        return PublishResult(
            self._ack_format % seq,
            seq if self.durable else 0,
            StoredMsg(subj, seq, ts, hdr, payload),
            ts + ttl if ttl > 0 else 0,
            None if dest is None or rp is None else rp.message(dest, subj, seq, ts, hdr, payload, last),
        )

    def stored_ack(self, seq: int) -> bytes:
        """The PubAck of a message stored as ``seq`` (what :meth:`process` answers it with)."""
        return self._ack_format % seq

    def _store_failed(self, e: StoreError) -> PublishResult:
        """The answer to a message the store refused: too large, the limits (discard new), or
        an I/O failure (whose rolled-back sequences' message ids are forgotten)."""
        if isinstance(e, ErrMsgTooLarge):
            return PublishResult(pub_error(self.name, ApiError.of(E.STREAM_MESSAGE_EXCEEDS_MAXIMUM)))
        if isinstance(e, ErrStoreIO) and e.lost:
            self.forget_msg_ids(e.lost)
        return PublishResult(pub_error(self.name, ApiError.of(E.STREAM_STORE_FAILED, err=str(e))))

    def _duplicate(self, seq: int) -> PublishResult:
        """The answer to a message whose id the stream holds as ``seq``: acknowledged again."""
        return PublishResult(self._dup_format % seq, seq if self.durable else 0, duplicate=seq)

    def _check_headers(self, subject: str, hdr: bytes, now: int) -> tuple[str, bytes, int] | PublishResult:
        """The ``Nats-*`` headers' checks, in nats-server's order: (message id, rollup, TTL) to
        store the message with, or the ack of the duplicate it is; raises ApiError."""
        cfg = self.config
        if len(hdr) > MAX_HEADER_SIZE:
            raise ApiError.of(E.STREAM_HEADER_EXCEEDS_MAXIMUM)
        simple = _simple_id(hdr)
        if simple is not None:  # no other rule applies
            if not simple:
                return "", b"", 0
            self._trim_dedup(now)
            seen = self._dedup.get(simple)
            if seen is not None:
                return self._duplicate(seen[0])
            return simple, b"", 0
        expected = get_header(hdr, H_EXPECTED_STREAM)
        if expected is not None and expected.decode() != self.name:
            raise ApiError.of(E.STREAM_NOT_MATCH)
        ttl = 0
        raw_ttl = get_header(hdr, H_TTL)
        if raw_ttl is not None:  # nats-server 2.11: checked before de-duplication
            try:
                ttl = parse_ttl(raw_ttl)
                bad_ttl = False
            except ValueError:
                bad_ttl = True
            if ttl or bad_ttl:
                if not cfg.allow_msg_ttl:
                    raise ApiError.of(E.MESSAGE_TTL_DISABLED)
                if bad_ttl:
                    raise ApiError.of(E.MESSAGE_TTL_INVALID)
        msg_id = ""
        mid = get_header(hdr, H_MSG_ID)
        if mid:
            msg_id = mid.decode()
            self._trim_dedup(now)
            seen = self._dedup.get(msg_id)
            if seen is not None:
                return self._duplicate(seen[0])
        last_seq = get_header(hdr, H_EXPECTED_LAST_SEQ)
        if last_seq is not None:
            st_last = self.store.state().last_seq
            if _as_int(last_seq) != st_last:
                raise ApiError.of(E.STREAM_WRONG_LAST_SEQUENCE, seq=st_last)
        last_subj_seq = get_header(hdr, H_EXPECTED_LAST_SUBJ_SEQ)
        # nats-server 2.11+: the subject (or filter) whose last sequence is meant, if not this one
        on_subject = get_header(hdr, H_EXPECTED_LAST_SUBJ_SEQ_SUBJ)
        if on_subject is not None and last_subj_seq is None:
            raise ApiError.of(E.STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID)
        if last_subj_seq is not None:
            filt = on_subject.decode(errors="replace") if on_subject else subject
            last = self.store.load_last_msg(filt) if is_valid_subject(filt) else None
            have = last.seq if last is not None else 0
            if _as_int(last_subj_seq) != have:
                raise ApiError.of(E.STREAM_WRONG_LAST_SEQUENCE, seq=have)
        last_id = get_header(hdr, H_EXPECTED_LAST_MSG_ID)
        if last_id is not None and last_id.decode() != self._last_msg_id:
            raise ApiError.of(E.STREAM_WRONG_LAST_MSG_ID, id=self._last_msg_id)
        rollup = get_header(hdr, H_ROLLUP) or b""
        if rollup:
            if not cfg.allow_rollup_hdrs:
                raise ApiError.of(E.STREAM_ROLLUP_FAILED, err="rollup not permitted")
            if rollup not in (b"sub", b"all"):
                # nats-server 2.9 drops the publish without an answer; later versions say this
                raise ApiError.of(E.STREAM_ROLLUP_FAILED, err=f"rollup value invalid: {_go_quote(rollup)}")
        return msg_id, rollup, ttl

    # -- expiry ---------------------------------------------------------------------------------

    def expire(self, now_ns: int, limit: int = EXPIRE_SLICE) -> tuple[int, list[StoredMsg]]:
        """Remove what max_age and per-message TTLs say is due at ``now_ns``, at most ``limit``
        messages (0: all). Returns how many messages went (``limit``: more may be due) and the
        delete markers the store left (as stored messages, so the engine hands them to consumers
        like any other new message)."""
        store = self.store
        before = store.state().last_seq if self.config.subject_delete_marker_ttl > 0 else 0
        removed = store.expire(now_ns, limit)
        markers: list[StoredMsg] = []
        if before:
            for seq in range(before + 1, store.state().last_seq + 1):
                m = store.load_msg(seq)
                if m is not None:
                    markers.append(m)
        return removed, markers

    def _trim_dedup(self, now: int) -> None:
        window = self.config.duplicate_window
        dedup = self._dedup
        while dedup:
            first = next(iter(dedup.values()))
            if now - first[1] <= window:
                break
            dedup.popitem(last=False)

    def forget_msg_ids(self, lost: Sequence[int]) -> None:
        """The store rolled back the sequences ``lost`` (a write or sync failed; their publishes
        got an error): their message ids were never stored, so a retry of one is a new message,
        not a duplicate acknowledged for a message that is not there."""
        dedup = self._dedup
        gone = [mid for mid, (seq, _ts) in dedup.items() if seq in lost]
        for mid in gone:
            del dedup[mid]
        if gone and self._last_msg_id in gone:
            self._last_msg_id = next(reversed(dedup), "")

    def rebuild_dedup(self, now: int, seen: Iterable[tuple[str, int, int]] | None = None) -> None:
        """After a restart: re-learn message ids published within the duplicate window, from
        the store (only the messages inside the window are read, in bulk), or from ``seen``
        ((id, seq, ts) in sequence order, gathered by whoever wrote the messages: a restore,
        which must not read a large stream again on the loop)."""
        window = self.config.duplicate_window
        if window <= 0:
            return
        for mid, seq, ts in self._msg_ids(now - window) if seen is None else seen:
            if now - ts <= window:
                self._dedup[mid] = (seq, ts)
                self._last_msg_id = mid

    def relearn_msg_ids(self, at: int) -> None:
        """Forget the message ids and re-learn those within the duplicate window of the time
        ``at`` (a replicated stream replaying its log decides duplicates as of its entries'
        times, not the clock's)."""
        self._dedup.clear()
        self._last_msg_id = ""
        self.rebuild_dedup(at)

    def _msg_ids(self, since: int) -> Iterator[tuple[str, int, int]]:
        """(id, seq, ts) of the stored messages from time ``since`` on that carry an id."""
        st = self.store.state()
        if st.msgs == 0 or st.last_ts < since:
            return
        seq = seq_at_time(self.store, since, st.first_seq, st.last_seq)
        while True:
            batch = self.store.load_next_batch("", seq, DEDUP_BATCH)
            if not batch:
                break
            seq = batch[-1].seq + 1
            for msg in batch:
                if not msg.hdr:
                    continue
                mid = get_header(msg.hdr, H_MSG_ID)
                if mid:
                    yield mid.decode(), msg.seq, msg.ts


def _simple_id(hdr: bytes) -> str | None:
    """The message id of a header block (``""``: none) when it is the block's only ``Nats-*``
    header, so that no rule but de-duplication applies (keys match with their case); None when
    other ``Nats-*`` headers need their checks. One scan tells the common case."""
    nats = hdr.count(b"Nats-")
    if not nats:
        return ""
    if nats == 1:  # get_header(hdr, H_MSG_ID), inline: once per message of a bulk publish
        i = hdr.find(_MSG_ID_KEY)
        if i >= 0:
            i += len(_MSG_ID_KEY)
            j = hdr.find(b"\r\n", i)
            return hdr[i : j if j >= 0 else len(hdr)].strip().decode()
    return None


def _go_quote(raw: bytes) -> str:
    """Go's ``%q`` of a header value (printable ASCII as is, the rest escaped)."""
    text = raw.decode(errors="replace")
    return msgspec.json.encode(text).decode()


def _as_int(raw: bytes) -> int:
    try:
        return int(raw)
    except ValueError:
        return -1


def limits_of(cfg: StreamConfig) -> StoreLimits:
    return StoreLimits(
        max_msgs=cfg.max_msgs,
        max_bytes=cfg.max_bytes,
        max_age=cfg.max_age,
        max_msgs_per_subject=cfg.max_msgs_per_subject,
        max_msg_size=cfg.max_msg_size,
        discard=cfg.discard,
        discard_new_per_subject=cfg.discard_new_per_subject,
        subject_delete_marker_ttl=cfg.subject_delete_marker_ttl,
    )


def _store_never_discards(cfg: StreamConfig) -> bool:
    """Whether a recent-message cache pays and stays true for this stream: only file reads are
    slow enough to be worth it, and only the server may remove messages (no store limits)."""
    return (
        cfg.storage == "file" and cfg.max_msgs <= 0 and cfg.max_bytes <= 0 and cfg.max_msgs_per_subject <= 0
    )


_NO_LIMIT = 1 << 62


def _plain_limit(cfg: StreamConfig) -> int:
    """The largest message without headers that needs no decision beyond its size (-1: every
    message is decided, as a sealed stream refuses them all)."""
    if cfg.sealed:
        return -1
    return cfg.max_msg_size if cfg.max_msg_size >= 0 else _NO_LIMIT
