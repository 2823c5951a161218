"""``FileStore``: a stream's messages in append-only block files, with group commit.

Owns: opening (directory lock, recovery, first block), the append hot path (encode into one
in-memory write buffer), block rolling, limits enforcement, removal (tombstones, the durable
floor, whole-block removal), purge/compact/expire, consumers/metadata and the lifecycle.
Group commit and rollback live in ``_commit.py``; queries and the subject table in
``_fsquery.py``; byte formats in ``record.py``; the open-time scan in ``recovery.py``; per-block
index columns in ``segment.py``.
Must not know: the network, asyncio, the JSON API, consumers' delivery logic, wall-clock timers.

Directory layout::

    <dir>/LOCK                      flock'ed while a FileStore has the directory open
    <dir>/meta.dat                  stream config bytes (framed, see consumer_state.py)
    <dir>/msgs/<first seq>.blk      message blocks (see record.py); no index file: recovery
                                    rebuilds the index from the blocks on every open
    <dir>/obs/<consumer>/o.dat      consumer state; meta.dat beside it

Threading: every method runs on the owning (event loop) thread except ``sync``, which may run on
one worker thread at a time. ``self._lock`` guards only what both touch — the dirty-block set,
flush/durable offsets, the pending-unlink lists, the failure flag — and is never held across a
syscall that waits for the disk.

Deletes: removing the stream's first message needs no record — the ``floor`` in the active
block's header (rewritten by ``flush``, made durable by ``sync``) says "everything below is
gone". Removing any other message appends a 34-byte tombstone. A block whose messages are all
gone is unlinked after the next ``sync``: a block at the head needs nothing more; one in the
middle first gets a range tombstone for its seqs, plus copies of its own tombstones still
needed by live blocks. Deletes are durable once a ``sync`` covers them, like appends.
"""

from __future__ import annotations

import errno as _errno
import fcntl
import heapq
import os
import shutil
import struct
import threading
import time
import zlib
from array import array
from bisect import bisect_left
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Final

from ._commit import GroupCommit
from .base import (
    FILE_HDR_OVERHEAD,
    MAX_PAYLOAD,
    MAX_SUBJECT_BYTES,
    ErrMsgTooLarge,
    ErrStoreClosed,
    ErrStoreIO,
    ErrStoreLocked,
    StoreConfig,
    StoreLimits,
    check_discard_new,
)
from .consumer_state import (
    META_MAGIC,
    FileConsumerStore,
    fsync_dir,
    read_framed,
    write_framed_atomic,
)
from .record import (
    BLOCK_HEADER_SIZE,
    MAGIC,
    RECORD_HEADER,
    RECORD_OVERHEAD,
    VERSION,
    BlockHeader,
    encode_erased,
)
from .recovery import read_tombstones, recover
from .segment import NO_SID, Block, SubjectInfo
from .ttl import is_marker, store_markers

__all__ = ["DEFAULT_BLOCK_SIZE", "MAX_WRITE_BUFFER", "MIN_BLOCK_SIZE", "FileStore"]

DEFAULT_BLOCK_SIZE: Final = 8 * 1024 * 1024
"""Roll to a new block past this size. nats-server's maximum for limits streams: large enough that
per-block costs (a file, a descriptor, a header) vanish per message, small enough that a dead
block frees its space soon and that reading one block to carry its tombstones stays cheap."""

MIN_BLOCK_SIZE: Final = 1024
"""Smallest accepted ``block_size`` (tests use tiny blocks to exercise rolling and removal)."""

MAX_WRITE_BUFFER: Final = 1024 * 1024
"""``store_msg`` flushes by itself beyond this many buffered bytes, bounding memory when the caller
flushes rarely; one write of this size still carries thousands of small records per syscall."""

_MSGS_DIR: Final = "msgs"
_OBS_DIR: Final = "obs"
_META_FILE: Final = "meta.dat"
_LOCK_FILE: Final = "LOCK"  # flock'ed while open: two writers on one directory would corrupt it


def _lock_directory(directory: Path) -> int:
    """Take an exclusive advisory lock on ``directory/LOCK``; -1 if the media cannot hold one."""
    path = directory / _LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return -1  # read-only media without a lock file: nobody can write here anyway
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise ErrStoreLocked(f"{ErrStoreLocked.description}: {directory}") from exc
    return fd

_pack_hdr = RECORD_HEADER.pack
_pack_crc = struct.Struct("<I").pack
_crc32 = zlib.crc32
_join = b"".join
_time_ns = time.time_ns


class FileStore(GroupCommit):
    """A ``StreamStore`` persisted under ``directory`` (created if missing)."""

    def __init__(self, directory: str | os.PathLike[str], config: StoreConfig) -> None:
        self._dir = Path(directory)
        self._msgdir = self._dir / _MSGS_DIR
        self._obsdir = self._dir / _OBS_DIR
        self._dir_lock = -1
        try:
            if not self._msgdir.is_dir():
                self._msgdir.mkdir(parents=True, exist_ok=True)
                fsync_dir(self._dir)
                fsync_dir(self._dir.parent)
            self._dir_lock = _lock_directory(self._dir)
            self._open(config)
        except BaseException as exc:
            for blk in getattr(self, "_blocks", []):
                if blk.fd >= 0:
                    os.close(blk.fd)
            self._release_dir_lock()
            if isinstance(exc, OSError):
                raise ErrStoreIO(exc.errno or _errno.EIO, None, f"opening {self._dir}: {exc}") from exc
            raise

    def _open(self, config: StoreConfig) -> None:
        self._cfg = config
        self._block_size = max(config.block_size or DEFAULT_BLOCK_SIZE, MIN_BLOCK_SIZE)
        self._lock = threading.Lock()
        self._sync_mutex = threading.Lock()  # one sync at a time; the owning thread never takes it

        rec = recover(self._msgdir, config.first_seq)
        self._blocks: list[Block] = rec.blocks
        self._bases: list[int] = [b.base for b in self._blocks]
        self._subjects: dict[str, SubjectInfo] = rec.subjects
        self._by_sid: list[SubjectInfo | None] = rec.by_sid
        self._free_sids: list[int] = [i for i, s in enumerate(rec.by_sid) if s is None]
        self._subj_gen = 0
        self._match_cache: dict[str, tuple[int, list[SubjectInfo]]] = {}
        self._msgs = rec.msgs
        self._bytes = rec.bytes
        self._first_seq = rec.first_seq
        self._last_seq = rec.last_seq
        self._last_ts = rec.last_ts
        self._lost: list[int] = rec.lost
        self._lost_bytes = rec.lost_bytes
        self._first_ts_cache = (0, 0)
        self._rc: tuple[Block, int, bytes] | None = None  # read-ahead cache: (block, offset, bytes)
        self._lru: OrderedDict[Block, None] = OrderedDict()
        self._wbuf = bytearray()

        # Group-commit bookkeeping (shared with the sync thread under self._lock).
        self._flushed_seq = self._last_seq
        self._durable_seq = self._last_seq
        self._hdr_written: tuple[int, int, int] | None = None  # (hwm, floor, last_ts) in the active header
        self._dirty: set[Block] = set()  # blocks written since their last fdatasync
        self._dir_dirty = False
        self._await_flush: list[Block] = []  # dropped blocks whose covering tombstones are buffered
        self._await_sync: list[Block] = []  # ... flushed; unlink after the next successful sync
        # Tombstones (first, last) written since the last sync, re-appended if a rollback cuts them
        # off; two u64 columns so a long stretch without sync costs 16 bytes per delete.
        self._dlog_a = array("Q")
        self._dlog_b = array("Q")
        self._dlog_flushed = 0
        self._epoch = 0
        self._fail: OSError | None = None
        self._sync_busy = False
        self._deferred_close: list[int] = []
        self._closed = False
        self._roll_pending = False
        self._guard = False

        # per-message TTL, as in MemoryStore: (expires at, seq) for positive TTLs (stale entries
        # skipped when popped) and the "never" seqs; rebuilt from the recovered headers below
        self._ttl_heap: list[tuple[int, int]] = []
        self._never: set[int] = set()

        self._set_limits(config.limits)
        if not self._blocks:
            base = self._last_seq + 1
            blk = Block.create(self._msgdir, BlockHeader(base, base - 1, base, 0, 1))
            self._blocks.append(blk)
            self._bases.append(base)
            self._dirty.add(blk)
            self._dir_dirty = True
        self._active = self._blocks[-1]
        self._active.open()
        for seq, ts, ttl in rec.ttls:
            if self._live(seq):
                if ttl > 0:
                    self._ttl_heap.append((ts + ttl, seq))
                else:
                    self._never.add(seq)
        heapq.heapify(self._ttl_heap)
        if self._active.end_seq <= self._last_seq:
            self._roll_pending = True  # torn tail or rolled-back seqs: never append over them
        self._guard = self._roll_pending
        for blk in list(self._blocks[:-1]):
            if blk.live == 0:
                self._drop_block(blk)
        self._enforce_all()
        try:  # make the recovered view (floor, hwm, truncations) durable; fails on read-only media
            self.flush()
            self.sync()
        except ErrStoreIO:
            pass

    # ------------------------------------------------------------------ configuration

    @property
    def config(self) -> StoreConfig:
        return self._cfg

    @property
    def directory(self) -> Path:
        return self._dir

    def _set_limits(self, lim: StoreLimits) -> None:
        self._lim = lim
        self._cfg = StoreConfig(self._cfg.name, self._cfg.storage, lim, self._cfg.first_seq, self._cfg.block_size)
        self._max_payload = min(lim.max_msg_size, MAX_PAYLOAD) if lim.max_msg_size > 0 else MAX_PAYLOAD
        self._discard_new = lim.discard == "new"
        self._max_per = max(lim.max_msgs_per_subject, 0)
        self._max_msgs = max(lim.max_msgs, 0)  # enforced whatever the discard policy, as nats-server
        self._max_bytes = max(lim.max_bytes, 0)
        self._enforce = bool(self._max_per or self._max_msgs or self._max_bytes)

    def update_limits(self, limits: StoreLimits) -> None:
        self._check_write()
        self._set_limits(limits)
        self._enforce_all()

    def _enforce_all(self) -> None:
        if self._max_per:
            for info in list(self._subjects.values()):
                while info.count > self._max_per:
                    self._remove_seq(self._subj_first(info))
        self._enforce_totals()

    def _enforce_totals(self) -> None:
        mm = self._max_msgs
        while mm and self._msgs > mm:
            self._remove_seq(self._first_seq)
        mb = self._max_bytes
        while mb and self._bytes > mb:
            self._remove_seq(self._first_seq)

    # ------------------------------------------------------------------ guards

    def _check_read(self) -> None:
        if self._closed:
            raise ErrStoreClosed()

    def _check_write(self, roll: bool = False) -> None:
        if not self._guard:
            return
        if self._closed:
            raise ErrStoreClosed()
        fail = self._fail
        if fail is not None:
            raise self._rollback(fail)
        if roll and self._roll_pending:
            self._roll(self._last_seq + 1, self._last_seq)

    # ------------------------------------------------------------------ the hot path

    def store_msg(
        self, subject: str, hdr: bytes, data: bytes, ts: int | None = None, ttl: int = 0
    ) -> tuple[int, int]:
        if self._guard:
            self._check_write(roll=True)
        info = self._subjects.get(subject)
        hl = len(hdr)
        pl = hl + len(data)
        if pl > self._max_payload:
            raise ErrMsgTooLarge()
        if info is None:
            enc = subject.encode()
            if len(enc) > MAX_SUBJECT_BYTES:
                raise ErrMsgTooLarge("subject too long")
        else:
            enc = info.enc
        rec_len = RECORD_OVERHEAD + len(enc) + pl
        acct = rec_len if hl else rec_len - FILE_HDR_OVERHEAD  # record.accounted_size, inlined
        if self._discard_new:
            check_discard_new(
                self._lim, self._msgs, self._bytes, info.count if info is not None else None,
                lambda: self._size_of(self._subj_first(info)) if info is not None else 0, pl, True,
            )
        seq = self._last_seq + 1
        if ts is None:
            ts = _time_ns()
        blk = self._active
        off = blk.size
        if off + rec_len > self._block_size and off > BLOCK_HEADER_SIZE:
            self._roll(seq, seq - 1)
            blk = self._active
            off = blk.size
        if info is None:
            info = self._new_subject(subject, enc, seq)
        rec = _join((_pack_hdr(MAGIC, VERSION, 0, 0, rec_len, seq, ts, len(enc), hl), enc, hdr, data))
        buf = self._wbuf
        buf += rec
        buf += _pack_crc(_crc32(rec))
        blk.offs.append(off)
        blk.lens.append(acct)
        blk.sids.append(info.sid)
        blk.size = off + rec_len
        blk.live += 1
        blk.live_bytes += acct
        info.count += 1
        info.last = seq
        self._msgs += 1
        self._bytes += acct
        self._last_seq = seq
        self._last_ts = ts
        if ttl:
            if ttl > 0:
                heapq.heappush(self._ttl_heap, (ts + ttl, seq))
            else:
                self._never.add(seq)
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

    def _size_of(self, seq: int) -> int:
        """The accounted size of message ``seq`` (0 if the index does not cover it)."""
        blk = self._block_for(seq)
        return blk.lens[seq - blk.base] if blk is not None else 0

    def _roll(self, base: int, hwm: int) -> None:
        """Seal the active block and start ``<base>.blk`` (base > every seq handed out so far)."""
        self._write_out()
        floor = self._first_seq if self._msgs else base
        try:
            blk = Block.create(self._msgdir, BlockHeader(base, hwm, floor, self._last_ts, 1))
        except OSError as exc:
            raise ErrStoreIO(exc.errno or _errno.EIO, None, f"creating block {base}: {exc}") from exc
        old = self._active
        self._hdr_written = None
        with self._lock:
            self._blocks.append(blk)
            self._bases.append(base)
            self._active = blk
            self._dirty.add(blk)
            self._dir_dirty = True
            self._roll_pending = False
            self._reguard_locked()
        if old.live == 0:
            self._drop_block(old)
        elif old.fd >= 0:
            self._lru[old] = None
            self._evict_fds()

    # ------------------------------------------------------------------ removal

    def remove_msg(self, seq: int) -> bool:
        self._check_write()
        return self._remove_seq(seq)

    def erase_msg(self, seq: int) -> bool:
        self._check_write()
        blk = self._block_for(seq)
        if blk is None:
            return False
        i = seq - blk.base
        if blk.sids[i] == NO_SID:
            return False
        off = blk.offs[i]
        rec = self._record(blk, i)
        _m, _v, _f, _r, n, _s, ts, sl, hl = RECORD_HEADER.unpack_from(rec)
        new = encode_erased(seq, ts, n, sl, hl)
        if off >= blk.flushed:
            start = off - blk.flushed
            self._wbuf[start : start + n] = new
        else:
            try:
                if os.pwrite(self._fd(blk), new, off) != n:
                    raise OSError(_errno.EIO, "short write while erasing")
            except OSError as exc:
                raise self._rollback(exc) from exc
            with self._lock:
                blk.wseq += 1
                self._dirty.add(blk)
            self._rc = None
        self._remove_at(blk, i, seq, tombstone=False)
        return True

    def _remove_seq(self, seq: int) -> bool:
        blk = self._block_for(seq)
        if blk is None:
            return False
        i = seq - blk.base
        if blk.sids[i] == NO_SID:
            return False
        self._remove_at(blk, i, seq)
        return True

    def _remove_at(self, blk: Block, i: int, seq: int, tombstone: bool = True) -> None:
        if self._never:
            self._never.discard(seq)
        sid = blk.sids[i]
        n = blk.lens[i]
        blk.sids[i] = NO_SID
        blk.lens[i] = 0
        blk.live -= 1
        blk.live_bytes -= n
        self._msgs -= 1
        self._bytes -= n
        info = self._by_sid[sid]
        assert info is not None
        info.count -= 1
        if info.count == 0:
            self._release_subject(info)
        elif seq == info.last:
            info.last = self._prev_of_sid(sid, seq)
        elif info.count == 1:
            info.first = info.last
        elif seq == info.first:
            info.first = seq + 1
        if seq == self._first_seq:
            self._advance_first(seq)
        else:
            if tombstone:
                self._append_tombstone(seq)
            if blk.live == 0 and blk is not self._active:
                self._drop_block(blk)

    def _advance_first(self, removed: int) -> None:
        """The first message was removed: find the next live one and drop dead head blocks."""
        self._first_seq = self._next_live_seq(removed + 1) if self._msgs else self._last_seq + 1
        while len(self._blocks) > 1 and self._blocks[0].live == 0:
            self._drop_block(self._blocks[0])

    def _drop_block(self, blk: Block) -> None:
        """Forget a non-active block with no live messages; unlink it after the next sync."""
        k = bisect_left(self._bases, blk.base)
        if k >= len(self._blocks) or self._blocks[k] is not blk or blk is self._active:
            return
        if k > 0:  # in the middle: its seqs must stay accounted for once the file is gone
            singles: list[int] = []
            ranges: list[tuple[int, int]] = []
            if blk.tombs:
                try:
                    data = os.pread(self._fd(blk), blk.flushed, 0)
                except OSError:
                    return  # keep the block; it is retried when its neighbours go
                read_tombstones(data, singles, ranges)
            if blk.end_seq > blk.base:
                self._append_range(blk.base, blk.end_seq - 1)
            floor = self._first_seq
            for t in singles:
                if t >= floor and not (blk.base <= t < blk.end_seq) and self._block_for(t) is not None:
                    self._append_tombstone(t)
            for a, b in ranges:
                a = max(a, floor)
                if a <= b:
                    self._append_range(a, b)
        del self._blocks[k]
        del self._bases[k]
        self._lru.pop(blk, None)
        if self._rc is not None and self._rc[0] is blk:
            self._rc = None
        with self._lock:
            self._dirty.discard(blk)
            self._await_flush.append(blk)
            self._close_fd_locked(blk)

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        self._check_write()
        if subject == "" or subject == ">":
            if keep <= 0 and seq <= 1:
                return self._purge_all()
            if seq > 1:
                return self.compact(seq)
            if keep > 0:
                if keep >= self._msgs:
                    return 0
                return self.compact(self._nth_newest(keep))
            return 0
        upper = seq - 1 if seq > 1 else self._last_seq
        victims = self._matching_seqs(subject, upper)
        if keep > 0:
            total = sum(info.count for info in self._matching(subject))
            if keep >= total:
                return 0
            victims = victims[: total - keep]
        for s in victims:
            self._remove_seq(s)
        return len(victims)

    def _purge_all(self) -> int:
        n = self._msgs
        for blk in list(self._blocks):
            if blk is not self._active:
                blk.live = 0
                self._drop_block(blk)
        a = self._active
        a.sids = array("I", [NO_SID]) * len(a.sids)
        a.lens = array("I", [0]) * len(a.lens)
        a.live = a.live_bytes = 0
        self._subjects.clear()
        self._by_sid.clear()
        self._free_sids.clear()
        self._subj_gen += 1
        self._msgs = self._bytes = 0
        self._first_seq = self._last_seq + 1
        self._ttl_heap.clear()
        self._never.clear()
        return n

    def compact(self, seq: int) -> int:
        self._check_write()
        if seq > self._last_seq + 1:
            self._roll(seq, seq - 1)
            n = self._purge_all()
            self._last_seq = seq - 1
            self._first_seq = seq
            return n
        if seq <= self._first_seq or not self._msgs:
            return 0
        removed = 0
        for blk in list(self._blocks):
            if blk.base >= seq:
                break
            if not blk.live:
                continue
            k = min(seq - blk.base, len(blk.sids))
            counts = Counter(blk.sids[:k])
            counts.pop(NO_SID, None)
            nbytes = sum(blk.lens[:k])
            dead = sum(counts.values())
            blk.sids[:k] = array("I", [NO_SID]) * k
            blk.lens[:k] = array("I", [0]) * k
            blk.live -= dead
            blk.live_bytes -= nbytes
            self._msgs -= dead
            self._bytes -= nbytes
            removed += dead
            for sid, c in counts.items():
                info = self._by_sid[sid]
                assert info is not None
                info.count -= c
                if info.count == 0:
                    self._release_subject(info)
                elif info.first < seq:
                    info.first = seq
        self._advance_first(seq - 1)
        if self._never:
            self._never = {s for s in self._never if s >= seq}
        return removed

    def _live(self, seq: int) -> bool:
        blk = self._block_for(seq)
        return blk is not None and blk.sids[seq - blk.base] != NO_SID

    def _ts_of(self, seq: int) -> int:
        """The timestamp of a live message (from its record header)."""
        if seq == self._first_seq:
            return self._first_ts()
        blk = self._block_for(seq)
        assert blk is not None
        return int(RECORD_HEADER.unpack_from(self._record(blk, seq - blk.base))[6])

    def expire(self, now_ns: int) -> int:
        self._check_write()
        marker_ttl = self._lim.subject_delete_marker_ttl
        emptied: list[str] = []
        removed = 0
        heap = self._ttl_heap
        while heap and heap[0][0] <= now_ns:
            seq = heapq.heappop(heap)[1]
            if self._live(seq):
                self._expire_one(seq, marker_ttl, emptied)
                removed += 1
        max_age = self._lim.max_age
        if max_age > 0:
            cutoff = now_ns - max_age
            if not self._never:
                while self._msgs and self._first_ts() <= cutoff:
                    self._expire_one(self._first_seq, marker_ttl, emptied)
                    removed += 1
            else:  # step over "never" messages, as nats-server does
                seq = self._first_seq
                while self._msgs and seq <= self._last_seq:
                    if self._live(seq):
                        if self._ts_of(seq) > cutoff:
                            break
                        if seq not in self._never:
                            self._expire_one(seq, marker_ttl, emptied)
                            removed += 1
                    seq += 1
        store_markers(self, [s for s in emptied if s not in self._subjects], marker_ttl, now_ns)
        return removed

    def _expire_one(self, seq: int, marker_ttl: int, emptied: list[str]) -> None:
        blk = self._block_for(seq)
        assert blk is not None
        i = seq - blk.base
        if marker_ttl > 0:
            info = self._by_sid[blk.sids[i]]
            if info is not None and info.count == 1 and not is_marker(self._msg_at(blk, i, seq).hdr):
                emptied.append(info.name)
        self._remove_at(blk, i, seq)

    def next_expiry(self) -> int | None:
        self._check_read()
        best: int | None = None
        heap = self._ttl_heap
        while heap and not self._live(heap[0][1]):
            heapq.heappop(heap)
        if heap:
            best = heap[0][0]
        if self._lim.max_age > 0 and self._msgs:
            seq = self._first_seq
            if self._never:
                while seq <= self._last_seq and (seq in self._never or not self._live(seq)):
                    seq += 1
            if seq <= self._last_seq:
                at = self._ts_of(seq) + self._lim.max_age
                best = at if best is None else min(best, at)
        return best

    # ------------------------------------------------------------------ consumers, metadata, lifecycle

    def consumer_store(self, name: str) -> FileConsumerStore:
        self._check_read()
        try:
            return FileConsumerStore(self._obsdir, name)
        except OSError as exc:
            raise ErrStoreIO(exc.errno or _errno.EIO, None, f"consumer directory {name}: {exc}") from exc

    def consumer_names(self) -> list[str]:
        self._check_read()
        if not self._obsdir.is_dir():
            return []
        return sorted(p.name for p in self._obsdir.iterdir() if p.is_dir())

    def write_meta(self, meta: bytes) -> None:
        self._check_read()
        try:
            write_framed_atomic(self._dir / _META_FILE, META_MAGIC, bytes(meta))
        except OSError as exc:
            raise ErrStoreIO(exc.errno or _errno.EIO, None, f"writing {_META_FILE}: {exc}") from exc

    def read_meta(self) -> bytes | None:
        self._check_read()
        return read_framed(self._dir / _META_FILE, META_MAGIC)

    def abandon(self) -> None:
        """Close every file without flushing, syncing or unlinking: what a crash leaves behind.

        For crash tests only; the store is unusable afterwards."""
        with self._sync_mutex, self._lock:
            self._closed = True
            self._reguard_locked()
            for blk in self._blocks:
                self._close_fd_locked(blk)
            for blk in self._await_flush + self._await_sync:
                self._close_fd_locked(blk)
            self._close_deferred_locked()
            self._lru.clear()
        self._release_dir_lock()

    def _release_dir_lock(self) -> None:
        if self._dir_lock >= 0:
            os.close(self._dir_lock)  # closing the descriptor drops the flock
            self._dir_lock = -1

    def stop(self) -> None:
        """Flush, sync and close. Raises ErrStoreIO (after rolling back) if the data could not be
        made durable; the store is closed either way."""
        if self._closed:
            return
        err: ErrStoreIO | None = None
        try:
            self.flush()
            self.sync()
        except ErrStoreIO as exc:
            err = exc
            fail = self._fail
            if fail is not None:
                try:
                    self._rollback(fail)
                except OSError:
                    pass
        with self._sync_mutex, self._lock:
            self._closed = True
            self._reguard_locked()
            for blk in self._blocks:
                self._close_fd_locked(blk)
            self._close_deferred_locked()
            self._lru.clear()
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
