"""``FileStore``: a stream's messages in append-only block files, with group commit.

Owns: the ``StreamStore`` protocol over the parts it composes, opening (directory lock, keys
checked, tail record, recovery, first block; a damaged tail record or an impossible header
refuses to open with ``ErrCorrupt``, a wrong key with ``ErrEncryptionKey``, touching nothing, and
what else was found is in ``recovery_notes``), the append hot path, limits, removal (tombstones,
the durable floor, whole-block removal), purge/compact, consumers/metadata and the lifecycle.
The parts, each in its module: ``StoreIndex`` (index.py: which seq is where, subjects,
counters, the queries), ``BlockReader`` (reader.py: pread, read-ahead, decode, the bulk read),
``GroupCommit`` (writer.py: write buffer, flush, sync, rollback, descriptors), ``Expiry``
(expiry.py: TTLs and max_age), ``FileForms`` (forms.py: plain, compressed or encrypted files
and their keys), ``Compactor`` (sealing.py: sealed blocks compressed off this thread) and
secure erase (erase.py). Byte formats are in ``record.py`` and ``frames.py``, the layout in
``layout.py``, the open-time scan in ``recovery.py``, the tail record in ``tail.py``.
Must not know: the network, asyncio, the JSON API, consumers' delivery logic, wall-clock timers.

Hot paths: ``store_msg``, ``load_msg``, ``load_next_msg`` and ``load_next_batch`` make no more
calls per message than when the store was one class, but for the append's one call to the codec
(``record.append_record``). What they use is bound once in ``_bind``; the counters are read and
bumped on the index through one local. Compression and encryption cost nothing per message:
frames are made per flush (writer.py) and per sealed block (sealing.py).

Threading: every method runs on the owning (event loop) thread except ``sync``, which may run on
one worker thread at a time (see writer.py for what its lock guards).

Deletes: removing the stream's first message needs no record (the active block header's
``floor`` says "everything below is gone"); any other message gets a 34-byte tombstone. A block
whose messages are all gone is unlinked after the next ``sync`` (one in the middle first gets a
range tombstone for its seqs, plus copies of its own tombstones still needed). Deletes are
durable once a ``sync`` covers them, like appends.
"""

from __future__ import annotations

import errno as _errno
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from jetpy.subjects import matches_all as is_all

from .base import (
    MAX_SUBJECT_BYTES,
    PURGE_STEP,
    ErrCorrupt,
    ErrMsgTooLarge,
    ErrStoreClosed,
    ErrStoreIO,
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
    payload_cap,
    purge_ex,
    stream_state,
)
from .bulk import read_file_records
from .consumer_state import FileConsumerStore
from .crypto import StoreKeys
from .erase import Gone, erase_entries
from .expiry import Expiry
from .export import FileExport, take_export
from .fileio import fsync_dir
from .forms import FileForms, read_meta_file
from .index import StoreIndex
from .layout import META_FILE, MSGS_DIR, TAIL_FILE, lock_directory
from .reader import BlockReader
from .record import BLOCK_HEADER_SIZE, RECORD_OVERHEAD, BlockHeader, append_record
from .recovery import read_tombstones, recover
from .runs import append_run
from .sealing import Compactor, remove_leftovers
from .segment import DEFAULT_BLOCK_SIZE, MIN_BLOCK_SIZE, NO_SID, Block, block_size_for
from .tail import Tail, TailFile
from .writer import GroupCommit

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "MAX_WRITE_BUFFER",
    "MIN_BLOCK_SIZE",
    "FileStore",
    "block_size_for",
    "read_meta_file",
]

MAX_WRITE_BUFFER: Final = 1024 * 1024
"""``store_msg`` flushes by itself beyond this many buffered bytes, bounding memory when the caller
flushes rarely; one write of this size still carries thousands of small records per syscall."""

_time_ns = time.time_ns


class FileStore:
    """A ``StreamStore`` persisted under ``directory`` (created if missing)."""

    def __init__(
        self, directory: str | os.PathLike[str], config: StoreConfig, keys: StoreKeys | None = None
    ) -> None:
        """Open (or create) the store; with ``keys`` every file is encrypted (crypto.py): those
        written in plaintext or with the previous key are re-encrypted now, and a file written
        with another key refuses the store (``ErrEncryptionKey``) before anything is changed."""
        self._dir = Path(directory)
        msgdir = self._dir / MSGS_DIR
        self._dir_lock = -1
        self._forms = forms = FileForms(self._dir, keys)
        blocks: list[Block] = []
        tail_file: TailFile | None = None
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._dir_lock = lock_directory(self._dir)
            # every key is checked before anything is written: a wrong key changes nothing
            checks = forms.check()
            tail = checks.tail
            if isinstance(tail, str):
                raise ErrCorrupt(tail)
            rec = recover(
                msgdir, config.first_seq, tail, config.block_size, keys=keys, context=forms.context("msgs")
            )
            remove_leftovers(msgdir)
            self._notes = [*rec.damaged, *rec.notes]
            if tail is None and (rec.blocks or (self._dir / META_FILE).exists()):
                self._notes.insert(
                    0, f"{TAIL_FILE} is missing: the newest block could not be checked against it"
                )
            if not msgdir.is_dir():
                msgdir.mkdir()
                fsync_dir(self._dir)
                fsync_dir(self._dir.parent)
            blocks = rec.blocks
            created = None
            if not blocks:
                base = rec.last_seq + 1
                created = Block.create(msgdir, BlockHeader(base, base - 1, base, 0, 1), forms.new_block(base))
                blocks.append(created)
            elif blocks[-1].size < BLOCK_HEADER_SIZE:  # its header is rewritten below, appends follow it
                blocks[-1].size = blocks[-1].flushed = BLOCK_HEADER_SIZE
            self._ix = ix = StoreIndex(rec)
            forms.opened(rec, checks)
            tail_file = self._open_tail(tail, checks.tail_rekey)
            new_framed = forms.new_block if keys is not None else None
            self._w = w = GroupCommit(ix, msgdir, self._forget_reads, tail_file, new_framed)
            self._rd = BlockReader(ix, w.wbuf, w.fd)
            self._seal = Compactor(self._sealed_live, w.is_clean, forms.packed, w.install)
            self._expiry = Expiry(
                live=ix.live,
                head=ix.head,
                ts_of=self._rd.ts_of,
                subject_of=ix.subject_of,
                hdr_of=self._hdr_of,
                remove=self._remove_seq,
                store_msg=self.store_msg,
            )
            self._bind()
            self._cfg = config
            self._set_limits(config.limits)
            self._seal.enable(config.compression == "s2", ix.blocks[:-1])
            if created is not None:
                w.created(created)
            ix.active.open()
            for seq, ts, ttl in rec.ttls:
                if ix.live(seq):
                    self._expiry.add(seq, ts, ttl)
            if ix.active.end_seq <= ix.last_seq:
                w.set_roll_pending()  # a torn tail or rolled-back seqs: never append over them
            for blk in list(ix.blocks[:-1]):
                if blk.live == 0:
                    self._drop_block(blk)
            self._enforce_all()
            try:  # make the recovered view (floor, hwm, truncations) durable; fails on read-only media
                self.flush()
                self.sync()
            except ErrStoreIO:
                pass
        except BaseException as exc:
            for blk in blocks:
                if blk.fd >= 0:
                    os.close(blk.fd)
            if tail_file is not None:
                tail_file.close()
            self._release_dir_lock()
            if isinstance(exc, OSError):
                raise ErrStoreIO(exc.errno or _errno.EIO, None, f"opening {self._dir}: {exc}") from exc
            raise

    def _sealed_live(self, blk: Block) -> bool:
        ix = self._ix
        return ix.position(blk) >= 0 and blk is not ix.active

    def _open_tail(self, found: Tail | None, rekey: bool = False) -> TailFile | None:
        """The store's tail record (forms.py), created from the recovered view if there was
        none. None on read-only media."""
        ix = self._ix
        try:
            return self._forms.open_tail(
                found, rekey, Tail(ix.last_seq, ix.first_seq, ix.last_ts, ix.active.base, 0)
            )
        except OSError as exc:
            if exc.errno not in (_errno.EROFS, _errno.EACCES, _errno.EPERM):
                raise
            self._notes.append(f"{TAIL_FILE} cannot be written ({exc.strerror}): serving reads only")
            return None

    def _bind(self) -> None:
        """Bind what the hot paths use, once (see the module docstring)."""
        ix, rd = self._ix, self._rd
        self._subjects = ix.subjects
        self._wbuf = self._w.wbuf
        self._block_for = ix.block_for
        self._new_subject = ix.new_subject
        self._subj_first = ix.subj_first
        self._msg_at = rd.msg_at

    def _forget_reads(self, blk: Block | None) -> None:
        self._rd.forget(blk)

    # ------------------------------------------------------------------ configuration

    @property
    def config(self) -> StoreConfig:
        return self._cfg

    @property
    def directory(self) -> Path:
        return self._dir

    def _set_limits(self, lim: StoreLimits) -> None:
        self._lim = lim
        self._cfg = msgspec.structs.replace(self._cfg, limits=lim)
        # for the blocks started from now on
        self._block_size = max(self._cfg.block_size or block_size_for(lim.max_bytes), MIN_BLOCK_SIZE)
        self._max_payload = payload_cap(lim)
        self._discard_new = lim.discard == "new"
        self._max_per = max(lim.max_msgs_per_subject, 0)
        self._max_msgs = max(lim.max_msgs, 0)  # enforced whatever the discard policy, as nats-server
        self._max_bytes = max(lim.max_bytes, 0)
        self._enforce = bool(self._max_per or self._max_msgs or self._max_bytes)

    def update_limits(self, limits: StoreLimits) -> None:
        finish(self.update_limits_steps(limits))

    def update_limits_steps(self, limits: StoreLimits) -> Steps:
        self._check_write()
        self._set_limits(limits)
        return self._enforce_steps()

    def _enforce_all(self) -> None:
        finish(self._enforce_steps())

    def _enforce_steps(self) -> Steps:
        """Remove the oldest messages (of a subject, then of the stream) until every limit
        holds, yielding every ``PURGE_STEP`` removals."""
        n = 0
        if self._max_per:
            for info in list(self._subjects.values()):
                while info.count > self._max_per:
                    self._remove_seq(self._subj_first(info))
                    n += 1
                    if not n % PURGE_STEP:
                        yield
        ix = self._ix
        while (self._max_msgs and ix.msgs > self._max_msgs) or (
            self._max_bytes and ix.bytes > self._max_bytes
        ):
            self._remove_seq(ix.first_seq)
            n += 1
            if not n % PURGE_STEP:
                yield
        return n

    def _enforce_totals(self) -> None:
        ix = self._ix
        mm = self._max_msgs
        while mm and ix.msgs > mm:
            self._remove_seq(ix.first_seq)
        mb = self._max_bytes
        while mb and ix.bytes > mb:
            self._remove_seq(ix.first_seq)

    # ------------------------------------------------------------------ guards

    def _check_read(self) -> None:
        if self._w.closed:
            raise ErrStoreClosed()

    def _check_write(self, roll: bool = False) -> None:
        w = self._w
        if not w.guard:
            return
        if w.closed:
            raise ErrStoreClosed()
        fail = w.fail
        if fail is not None:
            raise w.rollback(fail)
        if roll and w.roll_pending:
            last = self._ix.last_seq
            self._roll(last + 1, last)

    # ------------------------------------------------------------------ the hot path

    def store_msg(
        self, subject: str, hdr: bytes, data: bytes, ts: int | None = None, ttl: int = 0
    ) -> tuple[int, int]:
        if self._w.guard:
            self._check_write(roll=True)
        info = self._subjects.get(subject)
        hl = len(hdr)
        pl = hl + len(data)
        if pl > self._max_payload:
            raise ErrMsgTooLarge()
        if info is None:
            enc = subject.encode()
            sl = len(enc)
            if sl > MAX_SUBJECT_BYTES:
                raise ErrMsgTooLarge("subject too long")
        else:
            enc = info.enc
            sl = info.slen
        ix = self._ix
        if self._discard_new:
            check_discard_new(
                self._lim,
                ix.msgs,
                ix.bytes,
                info.count if info is not None else None,
                lambda: ix.size_of(self._subj_first(info)) if info is not None else 0,
                pl,
                True,
            )
        rec_len = RECORD_OVERHEAD + sl + pl  # the record's length (record.py)
        seq = ix.last_seq + 1
        if ts is None:
            ts = _time_ns()
        blk = ix.active
        off = blk.size
        end = off + rec_len
        if end > self._block_size and off > BLOCK_HEADER_SIZE:
            self._roll(seq, seq - 1)
            blk = ix.active
            off = blk.size
            end = off + rec_len
        if info is None:
            info = self._new_subject(subject, enc, seq)
        buf = self._wbuf
        acct = append_record(buf, seq, ts, enc, hdr, data, sl, hl, rec_len)
        blk.offs.append(off)
        blk.lens.append(acct)
        blk.sids.append(info.sid)
        blk.size = end
        blk.live += 1
        info.count += 1
        info.last = seq
        ix.msgs += 1
        ix.bytes += acct
        ix.last_seq = seq
        ix.last_ts = ts
        if ttl:
            self._expiry.add(seq, ts, ttl)
        if len(buf) >= MAX_WRITE_BUFFER:
            self.flush()
        if self._enforce:
            mp = self._max_per
            if mp and info.count > mp:
                while info.count > mp:
                    self._remove_seq(self._subj_first(info))
            if self._max_msgs or self._max_bytes:
                self._enforce_totals()
        return seq, ts

    def store_many(
        self, subjects: list[str], hdrs: list[bytes], payloads: list[bytes], start: int, ts: int
    ) -> int:
        """:meth:`store_msg` (no TTL, at ``ts``) of messages ``start ..`` of the lists in one
        call (runs.py: where a run stops); none where limits or a failed write have a say.
        Returns how many it stored, as sequences ``last_seq + 1 ..`` (``last_seq`` before)."""
        if self._w.guard or self._discard_new or self._enforce:
            return 0
        room = MAX_WRITE_BUFFER - len(self._wbuf)
        return append_run(
            self._ix,
            self._wbuf,
            room,
            self._max_payload,
            self._block_size,
            subjects,
            hdrs,
            payloads,
            start,
            ts,
        )

    def _roll(self, base: int, hwm: int) -> None:
        """Seal the active block and start ``<base>.blk``; a sealed block without messages goes,
        one with messages is compressed off this thread if the stream says so."""
        old = self._w.roll(base, hwm)
        if old.live == 0:
            self._drop_block(old)
        else:
            self._seal.sealed(old)

    # ------------------------------------------------------------------ reads

    def load_msg(self, seq: int) -> StoredMsg | None:
        if self._w.closed:
            raise ErrStoreClosed()
        blk = self._block_for(seq)
        if blk is None:
            return None
        i = seq - blk.base
        if blk.sids[i] == NO_SID:
            return None
        return self._msg_at(blk, i)

    def _load(self, seq: int) -> StoredMsg | None:
        if not seq:
            return None
        blk = self._block_for(seq)
        assert blk is not None
        return self._msg_at(blk, seq - blk.base)

    def load_next_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None:
        if self._w.closed:
            raise ErrStoreClosed()
        ix = self._ix
        if not ix.msgs:
            return None
        start = max(start_seq, ix.first_seq)
        if start > ix.last_seq:
            return None
        if is_all(filter_subject):
            r = ix.next_live(start)
            return self._msg_at(r[0], r[1]) if r is not None else None
        return self._load(ix.next_match(ix.matching(filter_subject), start))

    def load_next_batch(self, filter_subject: str, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """Up to ``max_msgs`` messages with seq >= ``start_seq`` matching the filter, in order:
        without a filter the reader's bulk read (``BlockReader.next_batch``)."""
        self._check_read()
        ix = self._ix
        if max_msgs <= 0 or not ix.msgs:
            return []
        start = max(start_seq, ix.first_seq)
        if start > ix.last_seq:
            return []
        if is_all(filter_subject):
            return self._rd.next_batch(start, max_msgs)
        out: list[StoredMsg] = []
        infos = ix.matching(filter_subject)
        while len(out) < max_msgs:
            seq = ix.next_match(infos, start)
            m = self._load(seq)
            if m is None:
                break
            out.append(m)
            start = seq + 1
        return out

    def read_records(
        self, start_seq: int, end_seq: int, filters: Sequence[str], max_bytes: int
    ) -> StoredRecords:
        """The bulk read (``bulk.py``): records handed out as they lie in the block files."""
        self._check_read()
        ix = self._ix
        wanted = None
        if filters and not any(is_all(f) for f in filters):
            wanted = frozenset(info.sid for f in filters for info in ix.matching(f))
            if len(wanted) == len(ix.subjects):
                wanted = None
        return read_file_records(ix, self._rd.span, start_seq, end_seq, wanted, max_bytes)

    def load_last_msg(self, filter_subject: str) -> StoredMsg | None:
        self._check_read()
        ix = self._ix
        if not ix.msgs:
            return None
        if is_all(filter_subject):
            r = ix.prev_live(ix.last_seq)
            return self._msg_at(r[0], r[1]) if r is not None else None
        return self._load(max((i.last for i in ix.matching(filter_subject)), default=0))

    def state(self, deleted_details: bool = False) -> StreamState:
        self._check_read()
        ix = self._ix
        return stream_state(
            ix.msgs,
            ix.bytes,
            ix.first_seq,
            ix.last_seq,
            ix.last_ts,
            len(ix.subjects),
            self._rd.first_ts,
            ix.deleted_list if deleted_details else None,
            ix.lost,
            ix.lost_bytes,
        )

    def filtered_state(self, start_seq: int, filter_subject: str) -> SimpleState:
        self._check_read()
        return self._ix.filtered_state(start_seq, filter_subject)

    def subjects_state(self, filter_subject: str) -> dict[str, int]:
        self._check_read()
        return self._ix.subjects_state(filter_subject)

    def num_pending(self, start_seq: int, filter_subject: str, last_per_subject: bool) -> int:
        self._check_read()
        return self._ix.num_pending(start_seq, filter_subject, last_per_subject)

    # ------------------------------------------------------------------ removal

    def remove_msg(self, seq: int) -> bool:
        self._check_write()
        return self._remove_seq(seq)

    def erase_msg(self, seq: int) -> bool:
        self._check_write()
        if not self._ix.live(seq):
            return False
        blk = self._block_for(seq)
        assert blk is not None
        erased = erase_entries(blk, [seq - blk.base], self._rd, self._w, self._durable_now)
        self._remove_seq(seq, tombstone=not erased)
        return True

    def _durable_now(self) -> None:
        """Flush and sync on this thread (an erase in a framed block needs it)."""
        self._w.flush()
        self._w.sync()

    def _remove_seq(self, seq: int, tombstone: bool = True) -> bool:
        blk = self._block_for(seq)
        if blk is None or blk.sids[seq - blk.base] == NO_SID:
            return False
        i = seq - blk.base
        never = self._expiry.never
        if never:
            never.discard(seq)
        ix = self._ix
        head = seq == ix.first_seq
        ix.remove(blk, i, seq)
        if head:
            self._drop_dead_head()
        else:
            if tombstone:
                self._w.tombstone(seq)
            if blk.live == 0 and blk is not ix.active:
                self._drop_block(blk)
        return True

    def _drop_dead_head(self) -> None:
        blocks = self._ix.blocks
        while len(blocks) > 1 and blocks[0].live == 0:
            self._drop_block(blocks[0])

    def _drop_block(self, blk: Block) -> None:
        """Forget a non-active block with no live messages; unlink it after the next sync."""
        ix = self._ix
        k = ix.position(blk)
        if k < 0 or blk is ix.active:
            return
        if k > 0:  # in the middle: its seqs must stay accounted for once the file is gone
            singles: list[int] = []
            ranges: list[tuple[int, int]] = []
            if blk.tombs:
                try:
                    data = self._rd.read_block(blk)
                except ErrStoreIO:
                    return  # keep the block; it is retried when its neighbours go
                read_tombstones(data, singles, ranges)
            w = self._w
            if blk.end_seq > blk.base:
                w.range_tombstone(blk.base, blk.end_seq - 1)
            floor = ix.first_seq
            for t in singles:
                if t >= floor and not (blk.base <= t < blk.end_seq) and ix.block_for(t) is not None:
                    w.tombstone(t)
            for a, b in ranges:
                a = max(a, floor)
                if a <= b:
                    w.range_tombstone(a, b)
        ix.forget_block(k)
        self._w.retire(blk)

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        return finish(self.purge_steps(subject, seq, keep))

    def purge_steps(self, subject: str = "", seq: int = 0, keep: int = 0) -> Steps:
        """A purge destroys what it removes (erase.py) in the block files that stay; emptied ones go."""
        self._check_write()
        ix = self._ix
        gone = Gone(ix)

        def remove(s: int) -> bool:
            gone.one(s)
            return self._remove_seq(s)

        def compact(s: int) -> int:
            gone.below(s)
            return self.compact(s)

        def purge_all() -> int:
            gone.below(ix.last_seq + 1)
            return self._purge_all()

        n = yield from purge_ex(
            subject,
            seq,
            keep,
            msgs=ix.msgs,
            first_seq=ix.first_seq,
            last_seq=ix.last_seq,
            purge_all=purge_all,
            compact=compact,
            nth_newest=ix.nth_newest,
            matching_seqs=ix.matching_seqs,
            matching_count=lambda s: sum(info.count for info in ix.matching(s)),
            remove=remove,
        )
        yield from gone.erase_steps(self._rd, self._w, self._durable_now)
        return n

    def _purge_all(self) -> int:
        ix = self._ix
        for blk in list(ix.blocks):
            if blk is not ix.active:
                blk.live = 0
                self._drop_block(blk)
        self._expiry.clear()
        return ix.remove_all()

    def compact(self, seq: int, last_ts: int = 0) -> int:
        self._check_write()
        ix = self._ix
        if seq > ix.last_seq + 1:
            ix.last_ts = last_ts or ix.last_ts  # in the new block's header, with its hwm
            self._roll(seq, seq - 1)
            n = self._purge_all()
            ix.last_seq = seq - 1
            ix.first_seq = seq
            return n
        if seq <= ix.first_seq or not ix.msgs:
            return 0
        removed = ix.remove_below(seq)
        self._drop_dead_head()
        self._expiry.forget_below(seq)
        return removed

    def skip_msgs(self, seq: int, num: int, last_ts: int = 0) -> None:
        self._check_write(roll=True)
        ix = self._ix
        if seq != ix.last_seq + 1:
            raise ErrWrongSequence()
        if num <= 0:
            return
        end = seq + num - 1
        ix.last_ts = last_ts or ix.last_ts  # in the next block's header, with its hwm
        if not ix.msgs:
            self.compact(end + 1)
            return
        # the skipped seqs live in no block: the next block starts after them, and a range
        # tombstone in it accounts for them (recovery would otherwise report them lost)
        self._roll(end + 1, end)
        self._w.range_tombstone(seq, end)
        ix.last_seq = end

    # ------------------------------------------------------------------ expiry

    def _hdr_of(self, seq: int) -> bytes:
        blk = self._block_for(seq)
        assert blk is not None
        return self._msg_at(blk, seq - blk.base).hdr

    def expire(self, now_ns: int, limit: int = 0) -> int:
        self._check_write()
        return self._expiry.expire(self._lim, now_ns, limit)

    def next_expiry(self) -> int | None:
        self._check_read()
        return self._expiry.next_at(self._lim.max_age)

    # ------------------------------------------------------------------ durability

    def flush(self) -> int:
        """Write buffered records to the OS; returns the highest sequence now written. Also
        where a sealed block's compressed copy, made meanwhile, is put in place."""
        self._check_write()
        done = self._w.flush()
        if self._seal.busy:
            self._seal.step()
        return done

    def sync(self) -> None:
        """fdatasync everything flushed before this call; safe on a worker thread (see writer.py)."""
        self._w.sync()

    # ------------------------------------------------------------------ compression

    def set_compression(self, compression: str) -> None:
        """``"s2"``: sealed blocks are rewritten in compressed chunks, on a worker thread, those
        sealed already included; ``"none"``: blocks sealed from now on stay as they are (what is
        compressed stays compressed, and readable)."""
        self._check_read()
        self._cfg = msgspec.structs.replace(self._cfg, compression=compression_of(compression))
        self._seal.enable(compression == "s2", self._ix.blocks[:-1])

    def settle(self) -> None:
        """Finish every pending compression now (it otherwise completes in the background,
        put in place at a later flush): what tests and benchmarks wait for."""
        self._check_write()
        self._w.flush()
        self._w.sync()
        self._seal.settle()

    # ------------------------------------------------------------------ consumers, metadata, lifecycle

    def export(self) -> FileExport:
        """See ``export.py``: the write buffer goes to the OS, then the blocks are taken."""
        self.flush()
        seal = self._seal
        exp = take_export(self._ix.blocks, self._w.fd, self._ix.by_sid, self._dir.name, seal.export_closed)
        seal.export_opened()  # no compressed copy replaces a block while the export reads it
        return exp

    def consumer_store(self, name: str) -> FileConsumerStore:
        self._check_read()
        return self._forms.consumer_store(name)

    def consumer_names(self) -> list[str]:
        self._check_read()
        return self._forms.consumer_names()

    def recovery_notes(self) -> list[str]:
        """What opening found wrong with the files and what was made of it, one line each."""
        return list(self._notes)

    def write_meta(self, meta: bytes) -> None:
        self._check_read()
        self._forms.write_meta(meta)

    def read_meta(self) -> bytes | None:
        self._check_read()
        return read_meta_file(self._dir, self._forms.keys)

    def abandon(self) -> None:
        """Close every file without flushing, syncing or unlinking: what a crash leaves behind.

        For crash tests only; the store is unusable afterwards."""
        self._w.close()
        self._release_dir_lock()

    def _release_dir_lock(self) -> None:
        if self._dir_lock >= 0:
            os.close(self._dir_lock)  # closing the descriptor drops the flock
            self._dir_lock = -1

    def stop(self) -> None:
        """Flush, sync and close. Raises ErrStoreIO (after rolling back) if the data could not be
        made durable; the store is closed either way."""
        w = self._w
        if w.closed:
            return
        err: ErrStoreIO | None = None
        try:
            self._seal.stop()
            self.flush()
            self.sync()
        except ErrStoreIO as exc:
            err = exc
            fail = w.fail
            if fail is not None:
                try:
                    w.rollback(fail)
                except OSError:
                    pass
        w.close()
        self._release_dir_lock()
        if err is not None:
            raise err

    def delete(self) -> None:
        """Close and remove the whole stream directory."""
        try:
            self.stop()
        except ErrStoreIO:
            pass
        shutil.rmtree(self._dir, ignore_errors=True)
        try:
            fsync_dir(self._dir.parent)
        except OSError:
            pass
