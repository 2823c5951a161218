"""``MemoryStore``: the in-memory stream store and the oracle every other store is tested against.

Owns: messages held as Python objects in a dict keyed by sequence, per-subject bookkeeping as a
doubly linked list threaded through the entries (so the oldest/newest message of a subject is
O(1) to find and to remove), and the limit/purge semantics written as plainly as possible.
The rules both stores share (purge, discard new, the state they report: ``base.py``; expiry:
``expiry.py``) run here over this store's own primitives.
Must not know: files, durability (``flush``/``sync`` are no-ops), the network or the JSON API.
When this store and ``FileStore`` disagree, this one is presumed right.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence

import msgspec

from jetpy.subjects import is_literal, subject_matches
from jetpy.subjects import matches_all as is_all

from .base import (
    BULK_MAX_EXAMINED,
    MAX_SUBJECT_BYTES,
    MEMORY_MSG_OVERHEAD,
    PURGE_STEP,
    ErrMsgTooLarge,
    ErrStoreClosed,
    ErrWrongSequence,
    SimpleState,
    Steps,
    StoreConfig,
    StoredMsg,
    StoredRecords,
    StoreLimits,
    StreamState,
    check_discard_new,
    compression_of,
    finish,
    msg_size,
    payload_cap,
    purge_ex,
    stream_state,
)
from .consumer_state import MemoryConsumerStore, validate_name
from .expiry import Expiry
from .export import MemoryExport
from .record import RECORD_OVERHEAD, append_record

_time_ns = time.time_ns

__all__ = ["MemoryStore"]


class _Entry(msgspec.Struct, gc=False):
    """One message plus its neighbours on the same subject (0 = none). A Struct: one is built
    per stored message, and a Struct is built in C, three times faster than a slots class."""

    msg: StoredMsg
    size: int
    prev: int
    nxt: int = 0


class _Subj:
    __slots__ = ("count", "first", "last", "slen")

    def __init__(self, seq: int, slen: int = 0) -> None:
        self.count = 0
        self.first = seq
        self.last = seq
        self.slen = slen  # the subject's length in UTF-8 bytes


class MemoryStore:
    """A ``StreamStore`` that keeps everything in memory."""

    def __init__(self, config: StoreConfig) -> None:
        self._cfg = config
        self._lim = config.limits
        # Sizes and the discard-new edge follow config.storage: "memory" in a server, "file" when
        # this store is the oracle the file store is tested against.
        self._file_rules = config.storage == "file"
        self._set_limits(config.limits)
        self._msgs: dict[int, _Entry] = {}
        self._subjects: dict[str, _Subj] = {}
        first = max(config.first_seq, 1)
        self._first = first  # first live seq, or last + 1 when empty
        self._last = first - 1
        self._last_ts = 0
        self._bytes = 0
        self._closed = False
        self._consumers: dict[str, MemoryConsumerStore] = {}
        self._meta: bytes | None = None
        self._expiry = Expiry(
            live=self._msgs.__contains__,
            head=self._head,
            ts_of=self._ts_of,
            subject_of=self._subject_of,
            hdr_of=self._hdr_of,
            remove=self._remove,
            store_msg=self.store_msg,
        )

    # ------------------------------------------------------------------ helpers

    @property
    def config(self) -> StoreConfig:
        return self._cfg

    def _check_open(self) -> None:
        if self._closed:
            raise ErrStoreClosed()

    def _remove(self, seq: int) -> bool:
        e = self._msgs.pop(seq, None)
        if e is None:
            return False
        never = self._expiry.never
        if never:
            never.discard(seq)
        self._bytes -= e.size
        subj = e.msg.subject
        ss = self._subjects[subj]
        ss.count -= 1
        if ss.count == 0:
            del self._subjects[subj]
        else:
            if e.prev:
                self._msgs[e.prev].nxt = e.nxt
            else:
                ss.first = e.nxt
            if e.nxt:
                self._msgs[e.nxt].prev = e.prev
            else:
                ss.last = e.prev
        if seq == self._first:
            if not self._msgs:
                self._first = self._last + 1
            else:
                s = seq + 1
                while s not in self._msgs:
                    s += 1
                self._first = s
        return True

    def _enforce_subject(self, ss: _Subj) -> None:
        max_per = self._lim.max_msgs_per_subject
        while max_per > 0 and ss.count > max_per:
            self._remove(ss.first)

    def _enforce_totals(self) -> None:
        lim = self._lim
        while lim.max_msgs > 0 and len(self._msgs) > lim.max_msgs:
            self._remove(self._first)
        while lim.max_bytes > 0 and self._bytes > lim.max_bytes:
            self._remove(self._first)

    def _matching(self, filter_subject: str) -> list[tuple[str, _Subj]]:
        if not is_all(filter_subject) and is_literal(filter_subject):
            ss = self._subjects.get(filter_subject)
            return [(filter_subject, ss)] if ss is not None else []
        return [(s, ss) for s, ss in self._subjects.items() if subject_matches(filter_subject, s)]

    # ------------------------------------------------------------------ writes

    def store_many(
        self, subjects: list[str], hdrs: list[bytes], payloads: list[bytes], start: int, ts: int
    ) -> int:
        return 0  # a memory store's append is store_msg's: nothing to gain in a run

    def store_msg(
        self, subject: str, hdr: bytes, data: bytes, ts: int | None = None, ttl: int = 0
    ) -> tuple[int, int]:
        # the hot path of memory streams: checks and bookkeeping inline, limits only when set
        if self._closed:
            raise ErrStoreClosed()
        payload = len(hdr) + len(data)
        if payload > self._max_payload:
            raise ErrMsgTooLarge()
        ss = self._subjects.get(subject)
        if ss is None:
            sl = len(subject.encode())
            if sl > MAX_SUBJECT_BYTES:
                raise ErrMsgTooLarge("subject too long")
        else:
            sl = ss.slen
        if self._file_rules:
            size = msg_size("file", subject, hdr, data)
        else:
            size = MEMORY_MSG_OVERHEAD + sl + payload
        if self._discard_new:
            check_discard_new(
                self._lim,
                len(self._msgs),
                self._bytes,
                ss.count if ss is not None else None,
                lambda: self._msgs[ss.first].size if ss is not None else 0,
                payload,
                self._file_rules,
            )
        seq = self._last + 1
        if ts is None:
            ts = _time_ns()
        msgs = self._msgs
        if ss is None:
            ss = self._subjects[subject] = _Subj(seq, sl)
            msgs[seq] = _Entry(StoredMsg(subject, seq, ts, hdr, data), size, 0)
        else:
            last = ss.last
            msgs[seq] = _Entry(StoredMsg(subject, seq, ts, hdr, data), size, last)
            msgs[last].nxt = seq
        ss.count += 1
        ss.last = seq
        self._bytes += size
        self._last = seq
        self._last_ts = ts
        if ttl:
            self._expiry.add(seq, ts, ttl)
        if self._enforce:
            self._enforce_subject(ss)
            self._enforce_totals()
        return seq, ts

    def remove_msg(self, seq: int) -> bool:
        self._check_open()
        return self._remove(seq)

    def erase_msg(self, seq: int) -> bool:
        # Nothing outlives the Python objects; dropping the only reference is the erase.
        return self.remove_msg(seq)

    def _purge_all(self) -> int:
        n = len(self._msgs)
        self._msgs.clear()
        self._subjects.clear()
        self._bytes = 0
        self._first = self._last + 1
        self._expiry.clear()
        return n

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        return finish(self.purge_steps(subject, seq, keep))

    def purge_steps(self, subject: str = "", seq: int = 0, keep: int = 0) -> Steps:
        self._check_open()
        return purge_ex(
            subject,
            seq,
            keep,
            msgs=len(self._msgs),
            first_seq=self._first,
            last_seq=self._last,
            purge_all=self._purge_all,
            compact=self.compact,
            nth_newest=lambda k: sorted(self._msgs)[-k],
            matching_seqs=self._matching_seqs,
            matching_count=lambda f: sum(ss.count for _, ss in self._matching(f)),
            remove=self._remove,
        )

    def _matching_seqs(self, filter_subject: str, upper: int) -> list[int]:
        return sorted(
            s for s, e in self._msgs.items() if s <= upper and subject_matches(filter_subject, e.msg.subject)
        )

    def compact(self, seq: int, last_ts: int = 0) -> int:
        self._check_open()
        if seq > self._last + 1:
            n = self._purge_all()
            self._last = seq - 1
            self._first = seq
            if last_ts:
                self._last_ts = last_ts
            return n
        below = []
        for s in self._msgs:  # in sequence order: messages are only ever added at the end
            if s >= seq:
                break
            below.append(s)
        for s in below:
            self._remove(s)
        return len(below)

    def skip_msgs(self, seq: int, num: int, last_ts: int = 0) -> None:
        self._check_open()
        if seq != self._last + 1:
            raise ErrWrongSequence()
        if num <= 0:
            return
        self._last = seq + num - 1
        if last_ts:
            self._last_ts = last_ts
        if not self._msgs:
            self._first = self._last + 1

    def _set_limits(self, limits: StoreLimits) -> None:
        self._lim = limits
        self._max_payload = payload_cap(limits)
        self._discard_new = limits.discard == "new"
        self._enforce = limits.max_msgs_per_subject > 0 or limits.max_msgs > 0 or limits.max_bytes > 0

    def update_limits(self, limits: StoreLimits) -> None:
        finish(self.update_limits_steps(limits))

    def set_compression(self, compression: str) -> None:
        """Nothing of a memory store is on disk: the setting is kept in its config only."""
        self._check_open()
        c = self._cfg
        self._cfg = StoreConfig(
            c.name, c.storage, c.limits, c.first_seq, c.block_size, compression_of(compression)
        )

    def update_limits_steps(self, limits: StoreLimits) -> Steps:
        self._check_open()
        self._set_limits(limits)
        self._cfg = StoreConfig(
            self._cfg.name,
            self._cfg.storage,
            limits,
            self._cfg.first_seq,
            self._cfg.block_size,
            self._cfg.compression,
        )
        return self._enforce_steps()

    def _enforce_steps(self) -> Steps:
        n = 0
        lim = self._lim
        per = lim.max_msgs_per_subject
        for ss in list(self._subjects.values()):
            while per > 0 and ss.count > per:
                self._remove(ss.first)
                n += 1
                if not n % PURGE_STEP:
                    yield
        while (lim.max_msgs > 0 and len(self._msgs) > lim.max_msgs) or (
            lim.max_bytes > 0 and self._bytes > lim.max_bytes
        ):
            self._remove(self._first)
            n += 1
            if not n % PURGE_STEP:
                yield
        return n

    # the primitives the shared expiry policy walks (expiry.py)

    def _head(self) -> tuple[int, int]:
        return self._first, self._last

    def _ts_of(self, seq: int) -> int:
        return self._msgs[seq].msg.ts

    def _subject_of(self, seq: int) -> tuple[str, int]:
        subject = self._msgs[seq].msg.subject
        return subject, self._subjects[subject].count

    def _hdr_of(self, seq: int) -> bytes:
        return self._msgs[seq].msg.hdr

    def expire(self, now_ns: int, limit: int = 0) -> int:
        self._check_open()
        return self._expiry.expire(self._lim, now_ns, limit)

    def next_expiry(self) -> int | None:
        self._check_open()
        return self._expiry.next_at(self._lim.max_age)

    # ------------------------------------------------------------------ reads

    def load_msg(self, seq: int) -> StoredMsg | None:
        self._check_open()
        e = self._msgs.get(seq)
        return e.msg if e is not None else None

    def load_next_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None:
        self._check_open()
        if not self._msgs:
            return None
        start = max(start_seq, self._first)
        if is_all(filter_subject):
            for s in range(start, self._last + 1):
                e = self._msgs.get(s)
                if e is not None:
                    return e.msg
            return None
        subs = self._matching(filter_subject)
        if not subs:
            return None
        if len(subs) == 1:
            ss = subs[0][1]
            if start <= ss.first:
                return self._msgs[ss.first].msg
            if start > ss.last:
                return None
        end = max(ss.last for _, ss in subs)
        names = {s for s, _ in subs}
        for s in range(start, end + 1):
            e = self._msgs.get(s)
            if e is not None and e.msg.subject in names:
                return e.msg
        return None

    def load_next_batch(self, filter_subject: str, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """Up to ``max_msgs`` messages with seq >= ``start_seq`` matching the filter, in order."""
        self._check_open()
        out: list[StoredMsg] = []
        if max_msgs <= 0 or not self._msgs:
            return out
        start = max(start_seq, self._first)
        if is_all(filter_subject):
            get = self._msgs.get
            for s in range(start, self._last + 1):
                e = get(s)
                if e is not None:
                    out.append(e.msg)
                    if len(out) >= max_msgs:
                        break
            return out
        while len(out) < max_msgs:
            m = self.load_next_msg(filter_subject, start)
            if m is None:
                break
            out.append(m)
            start = m.seq + 1
        return out

    def read_records(
        self, start_seq: int, end_seq: int, filters: Sequence[str], max_bytes: int
    ) -> StoredRecords:
        """The bulk read: each message encoded as the file store's record (its CRC computed
        now: nothing here was ever checksummed), one after the other."""
        self._check_open()
        seq = max(start_seq, self._first, 1)
        end = min(end_seq, self._last)
        done = max(start_seq, end + 1)
        names = None
        if filters and not any(is_all(f) for f in filters):
            names = {s for f in filters for s, _ in self._matching(f)}
        buf = bytearray()
        offsets = array("I")
        if names is not None and not names:
            return StoredRecords([], offsets, 0, 0, done)
        stop = min(end, seq + BULK_MAX_EXAMINED - 1)
        get = self._msgs.get
        while seq <= stop:
            if len(buf) >= max_bytes:
                return StoredRecords([bytes(buf)], offsets, 0, len(buf), seq)
            e = get(seq)
            seq += 1
            if e is None:
                continue
            m = e.msg
            if names is not None and m.subject not in names:
                continue
            enc = m.subject.encode()
            sl, hl = len(enc), len(m.hdr)
            offsets.append(len(buf))
            append_record(
                buf, m.seq, m.ts, enc, m.hdr, m.data, sl, hl, RECORD_OVERHEAD + sl + hl + len(m.data)
            )
        return StoredRecords([bytes(buf)], offsets, 0, len(buf), done if stop >= end else seq)

    def load_last_msg(self, filter_subject: str) -> StoredMsg | None:
        self._check_open()
        if not self._msgs:
            return None
        if is_all(filter_subject):
            s = self._last
            while s not in self._msgs:
                s -= 1
            return self._msgs[s].msg
        subs = self._matching(filter_subject)
        if not subs:
            return None
        return self._msgs[max(ss.last for _, ss in subs)].msg

    def state(self, deleted_details: bool = False) -> StreamState:
        self._check_open()
        return stream_state(
            len(self._msgs),
            self._bytes,
            self._first,
            self._last,
            self._last_ts,
            len(self._subjects),
            lambda: self._msgs[self._first].msg.ts,
            (lambda a, b: [s for s in range(a, b + 1) if s not in self._msgs]) if deleted_details else None,
            [],
            0,
        )

    def filtered_state(self, start_seq: int, filter_subject: str) -> SimpleState:
        self._check_open()
        start = max(start_seq, self._first)
        seqs = (
            [
                s
                for s in range(start, self._last + 1)
                if (e := self._msgs.get(s)) is not None and subject_matches(filter_subject, e.msg.subject)
            ]
            if self._msgs
            else []
        )
        if not seqs:
            return SimpleState()
        return SimpleState(msgs=len(seqs), first=seqs[0], last=seqs[-1])

    def subjects_state(self, filter_subject: str) -> dict[str, int]:
        self._check_open()
        return {s: ss.count for s, ss in self._matching(filter_subject)}

    def num_pending(self, start_seq: int, filter_subject: str, last_per_subject: bool) -> int:
        self._check_open()
        if last_per_subject:
            return sum(1 for _, ss in self._matching(filter_subject) if ss.last >= start_seq)
        if start_seq <= self._first:
            return sum(ss.count for _, ss in self._matching(filter_subject))
        return self.filtered_state(start_seq, filter_subject).msgs

    # ------------------------------------------------------------------ durability (no-ops)

    def flush(self) -> int:
        self._check_open()
        return self._last

    def sync(self) -> None:
        return None

    # ------------------------------------------------------------------ consumers, metadata

    def export(self) -> MemoryExport:
        self._check_open()
        return MemoryExport(list(self._msgs.values()))

    def consumer_store(self, name: str) -> MemoryConsumerStore:
        self._check_open()
        validate_name(name)
        cs = self._consumers.get(name)
        if cs is None:
            cs = self._consumers[name] = MemoryConsumerStore(name, on_delete=self._consumers.pop)
        return cs

    def consumer_names(self) -> list[str]:
        self._check_open()
        return sorted(self._consumers)

    def write_meta(self, meta: bytes) -> None:
        self._check_open()
        self._meta = bytes(meta)

    def read_meta(self) -> bytes | None:
        self._check_open()
        return self._meta

    def recovery_notes(self) -> list[str]:
        return []

    def stop(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self._closed = True
        self._msgs.clear()
        self._subjects.clear()
        self._consumers.clear()
        self._meta = None
