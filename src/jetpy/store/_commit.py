"""Group commit for the file store: write buffer -> OS -> stable storage, and rollback.

Owns: appending tombstones to the write buffer, ``flush`` (one ``pwrite`` of the buffer plus the
active block's header slot), ``sync`` (``fdatasync`` of every dirty block and the directory, safe
on a worker thread), deferred unlinking of dead blocks once what covers them is durable, the
rollback after a failed write/fsync, and the bounded pool of block descriptors.
Must not know: limits, purge semantics, queries, recovery. A mixin of ``FileStore``.

What ``self._lock`` protects (shared with the sync thread): ``_dirty``, every block's
``flushed``/``durable``/``wseq``, ``_active``, ``_flushed_seq``/``_durable_seq``, the
pending-unlink lists, ``_dlog_flushed``, ``_epoch``, ``_fail``, ``_sync_busy`` and deferred
closes. It is never held across ``fdatasync``. ``_epoch`` changes on every rollback, so a sync
that was in flight when one happened knows its result is void.
"""

from __future__ import annotations

import errno as _errno
import os
import threading
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Final

from ._fsquery import FileStoreQueries
from .base import ErrStoreIO
from .consumer_state import fsync_dir
from .record import (
    BLOCK_HEADER_SIZE,
    RECORD_OVERHEAD,
    BlockHeader,
    encode_block_header,
    encode_range_tombstone,
    encode_tombstone,
)
from .recovery import MAX_LOST_REPORTED
from .segment import NO_SID, Block

__all__ = ["MAX_OPEN_SEALED", "GroupCommit"]

MAX_OPEN_SEALED: Final = 64
"""Descriptors kept open for sealed (non-active) blocks, least recently used evicted: a terabyte
stream has ~100k blocks and must not need as many descriptors."""


class GroupCommit(FileStoreQueries):
    """Flush/sync/rollback half of ``FileStore``; see the module docstring."""

    _msgdir: Path
    _lock: threading.Lock
    _sync_mutex: threading.Lock
    _lru: OrderedDict[Block, None]
    _flushed_seq: int
    _durable_seq: int
    _hdr_written: tuple[int, int, int] | None
    _dirty: set[Block]
    _dir_dirty: bool
    _await_flush: list[Block]
    _await_sync: list[Block]
    _dlog_a: array[int]
    _dlog_b: array[int]
    _dlog_flushed: int
    _epoch: int
    _fail: OSError | None
    _sync_busy: bool
    _deferred_close: list[int]
    _roll_pending: bool
    _guard: bool

    def _check_write(self, roll: bool = False) -> None:
        raise NotImplementedError

    def _reguard_locked(self) -> None:
        self._guard = self._closed or self._fail is not None or self._roll_pending

    def _append_tombstone(self, seq: int) -> None:
        self._wbuf += encode_tombstone(seq)
        self._active.size += RECORD_OVERHEAD
        self._active.tombs += 1
        self._dlog_a.append(seq)
        self._dlog_b.append(seq)

    def _append_range(self, first: int, last: int) -> None:
        rec = encode_range_tombstone(first, last)
        self._wbuf += rec
        self._active.size += len(rec)
        self._active.tombs += 1
        self._dlog_a.append(first)
        self._dlog_b.append(last)

    def _write_out(self) -> None:
        """Hand the write buffer to the OS (pwrite at the active block's flushed offset)."""
        buf = self._wbuf
        if not buf:
            return
        blk = self._active
        total = len(buf)
        try:
            done = os.pwrite(blk.fd, buf, blk.flushed)
            while done < total:
                n = os.pwrite(blk.fd, memoryview(buf)[done:], blk.flushed + done)
                if n <= 0:
                    raise OSError(_errno.ENOSPC, "no progress writing block")
                done += n
        except OSError as exc:
            raise self._rollback(exc) from exc
        with self._lock:
            blk.flushed += total
            blk.wseq += 1
            self._dirty.add(blk)
        buf.clear()

    def _write_header(self, vals: tuple[int, int, int]) -> None:
        """Rewrite the active block's older header slot with (hwm, floor, last_ts).

        Done on every flush that changed them, so that a process crash (page cache intact)
        keeps head deletions and the high-water mark; ``sync`` makes it durable with the
        records because it fdatasyncs the same file."""
        blk = self._active
        gen = blk.hdr_gen + 1
        off, slot = encode_block_header(BlockHeader(blk.base, *vals, gen))
        try:
            if os.pwrite(blk.fd, slot, off) != len(slot):
                raise OSError(_errno.EIO, "short write of block header")
        except OSError as exc:
            raise self._rollback(exc) from exc
        blk.hdr_gen = gen
        self._hdr_written = vals
        with self._lock:
            blk.wseq += 1
            self._dirty.add(blk)

    def flush(self) -> int:
        """Write buffered records to the OS; returns the highest sequence now written."""
        self._check_write()
        self._write_out()
        vals = (self._last_seq, self._first_seq, self._last_ts)
        if vals != self._hdr_written:
            self._write_header(vals)
        with self._lock:
            self._flushed_seq = self._last_seq
            self._await_sync.extend(self._await_flush)
            self._await_flush.clear()
            self._dlog_flushed = len(self._dlog_a)
        return self._flushed_seq

    def sync(self) -> None:
        """fdatasync everything flushed before this call; safe on a worker thread (see module doc)."""
        with self._sync_mutex:
            with self._lock:
                if self._closed:
                    return
                fail = self._fail
                if fail is not None:
                    raise ErrStoreIO(
                        fail.errno or _errno.EIO,
                        range(self._durable_seq + 1, self._flushed_seq + 1),
                        "an earlier sync failed",
                    )
                epoch = self._epoch
                self._dirty = {b for b in self._dirty if b.fd >= 0}  # no descriptor, nothing unsynced
                targets = [(b, b.fd, b.flushed, b.wseq) for b in self._dirty]
                unlinks = list(self._await_sync)
                dir_dirty = self._dir_dirty
                if not targets and not unlinks and not dir_dirty:
                    return
                self._dir_dirty = False
                dlog_n = self._dlog_flushed
                target_seq = self._flushed_seq
                prev_durable = self._durable_seq
                self._sync_busy = True
            try:
                fds: list[int] = []
                for _b, fd, _off, _w in targets:
                    if fd not in fds:
                        fds.append(fd)
                for fd in fds:
                    os.fdatasync(fd)
                if dir_dirty:
                    fsync_dir(self._msgdir)
            except OSError as exc:
                with self._lock:
                    self._sync_busy = False
                    self._dir_dirty = self._dir_dirty or dir_dirty
                    if epoch == self._epoch and self._fail is None:
                        self._fail = exc
                        self._reguard_locked()
                    self._close_deferred_locked()
                raise ErrStoreIO(exc.errno or _errno.EIO, range(prev_durable + 1, target_seq + 1), "sync") from exc
            with self._lock:
                self._sync_busy = False
                if epoch != self._epoch:
                    self._close_deferred_locked()
                    raise ErrStoreIO(_errno.EIO, range(prev_durable + 1, target_seq + 1), "rolled back during sync")
                for b, _fd, off, ws in targets:
                    if off > b.durable:
                        b.durable = off
                    if b.wseq == ws:
                        self._dirty.discard(b)
                if target_seq > self._durable_seq:
                    self._durable_seq = target_seq
                del self._dlog_a[:dlog_n]
                del self._dlog_b[:dlog_n]
                self._dlog_flushed -= dlog_n
                for b in unlinks:
                    self._await_sync.remove(b)
                self._close_deferred_locked()
            if unlinks:
                for b in unlinks:
                    try:
                        os.unlink(b.path)
                    except OSError:
                        pass  # already gone, or unremovable: recovery treats it as dead anyway
                try:
                    fsync_dir(self._msgdir)
                except OSError:
                    pass

    def _rollback(self, exc: OSError) -> ErrStoreIO:
        """Undo everything not yet durable after a failed write/fsync; returns the error to raise.

        Runs on the owning thread. Truncates every block to its durable size, drops index
        entries above the durable sequence, re-appends the tombstones that were lost with the
        buffer, and arranges for the next message to start a fresh block so the rolled-back
        sequences are never handed out again.
        """
        with self._lock:
            self._epoch += 1
            self._fail = None
            durable_seq = self._durable_seq
            self._await_flush.extend(self._await_sync)
            self._await_sync.clear()
            self._dlog_flushed = 0
        self._wbuf.clear()
        self._rc = None
        lost: list[int] = []
        affected: set[int] = set()
        kept: list[Block] = []
        last = self._blocks[-1]
        for blk in self._blocks:
            k = max(durable_seq + 1 - blk.base, 0)
            if k < len(blk.sids):
                self._forget_entries(blk, k, affected, lost)
            if blk.base > durable_seq and blk is not last:
                self._lru.pop(blk, None)
                with self._lock:
                    self._dirty.discard(blk)
                    self._close_fd_locked(blk)
                try:
                    os.unlink(blk.path)
                except OSError:
                    pass
                continue
            if blk.size > blk.durable or blk.flushed > blk.durable:
                keep = max(blk.durable, BLOCK_HEADER_SIZE)
                try:
                    os.ftruncate(self._fd(blk), keep)
                except OSError:
                    pass  # later appends overwrite from ``keep``; recovery ignores stale bytes
                blk.size = blk.flushed = keep
                with self._lock:
                    blk.wseq += 1
                    self._dirty.add(blk)
            kept.append(blk)
        self._blocks = kept
        self._bases = [b.base for b in kept]
        for sid in affected:
            info = self._by_sid[sid]
            if info is None:
                continue
            if info.count == 0:
                self._release_subject(info)
            elif info.last > durable_seq:
                info.last = self._prev_of_sid(sid, durable_seq + 1)
        if self._msgs == 0:
            self._first_seq = self._last_seq + 1
        self._lost.extend(lost[: max(MAX_LOST_REPORTED - len(self._lost), 0)])
        self._hdr_written = None
        with self._lock:
            self._active = kept[-1]
            self._lru.pop(self._active, None)
            self._active.open()
            self._flushed_seq = durable_seq
            self._roll_pending = self._active.end_seq <= self._last_seq
            self._reguard_locked()
        pending = list(zip(self._dlog_a, self._dlog_b, strict=True))
        self._dlog_a = array("Q")
        self._dlog_b = array("Q")
        for a, b in pending:
            if a == b:
                if a <= durable_seq:
                    self._append_tombstone(a)
            else:
                self._append_range(a, b)
        return ErrStoreIO(exc.errno or _errno.EIO, range(durable_seq + 1, self._last_seq + 1), str(exc))

    def _forget_entries(self, blk: Block, k: int, affected: set[int], lost: list[int]) -> None:
        """Drop index entries ``k..`` of ``blk`` (rolled back), live or not."""
        sids, lens = blk.sids, blk.lens
        for i in range(k, len(sids)):
            lost.append(blk.base + i)
            sid = sids[i]
            if sid == NO_SID:
                continue
            info = self._by_sid[sid]
            assert info is not None
            info.count -= 1
            affected.add(sid)
            self._msgs -= 1
            self._bytes -= lens[i]
            blk.live -= 1
            blk.live_bytes -= lens[i]
        del blk.offs[k:]
        del blk.lens[k:]
        del blk.sids[k:]

    # ------------------------------------------------------------------ descriptors

    def _fd(self, blk: Block) -> int:
        fd = blk.fd
        if fd >= 0:
            if blk in self._lru:
                self._lru.move_to_end(blk)
            return fd
        fd = blk.open()
        if blk is not self._active:
            self._lru[blk] = None
            self._evict_fds()
        return fd

    def _evict_fds(self) -> None:
        while len(self._lru) > MAX_OPEN_SEALED:
            victim = next((b for b in self._lru if b not in self._dirty), None)
            if victim is None:
                return
            del self._lru[victim]
            with self._lock:
                self._close_fd_locked(victim)

    def _close_fd_locked(self, blk: Block) -> None:
        if blk.fd >= 0:
            if self._sync_busy:
                self._deferred_close.append(blk.fd)  # the sync thread may be fdatasync-ing it
            else:
                os.close(blk.fd)
            blk.fd = -1

    def _close_deferred_locked(self) -> None:
        for fd in self._deferred_close:
            try:
                os.close(fd)
            except OSError:
                pass
        self._deferred_close.clear()
