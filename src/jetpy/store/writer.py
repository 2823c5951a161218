"""Group commit for the file store: write buffer -> OS -> stable storage, and rollback.

Owns: the write buffer (records appended by ``FileStore.store_msg`` through the codec, and the
tombstones appended here), ``flush`` (one ``pwrite`` of the buffer plus a rewrite of the active
block's older header slot when hwm/floor/last_ts changed), ``sync`` (``fdatasync`` of every dirty
block and of the directory, and at the same time the tail record's rewrite and sync on a
helper thread: one sync's wait per group commit; safe on a worker thread), creating the next block when the active
one is full, retiring dead blocks (unlinked once what covers them is durable), in-place
rewrites (erase), the rollback after a failed write or fsync, and the bounded pool of block
descriptors. Must not know: limits, purge semantics, queries, record decoding, recovery.

What ``self.lock`` protects (shared with the sync thread): the dirty set, every block's
``flushed``/``durable``/``wseq``, the index's ``active`` block, ``flushed_seq``/``durable_seq``,
the pending-unlink lists, the flushed part of the tombstone log, the epoch, ``fail``, the
sync-busy flag and deferred closes. It is never held across ``fdatasync``. The epoch changes on
every rollback, so a sync that was in flight when one happened knows its result is void.

The guard: ``guard`` is true exactly when the owning thread must look before writing (the store
is closed, a sync failed on the worker thread, or the next append must start a new block), so
the append path tests one attribute.
"""

from __future__ import annotations

import errno as _errno
import os
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from jetpy.meters import STORE_IO

from .base import ErrStoreIO
from .crypto import FileCipher
from .fileio import fsync_dir
from .frames import DATA_START, FrameTable, chunk_bounds
from .index import StoreIndex
from .record import (
    BLOCK_HEADER_SIZE,
    RECORD_OVERHEAD,
    BlockHeader,
    encode_block_header,
    encode_range_tombstone,
    encode_tombstone,
)
from .segment import Block
from .tail import TailFile

__all__ = ["MAX_OPEN_SEALED", "GroupCommit"]

TAIL_SYNC_THREADS: Final = 4
"""Threads that rewrite and sync tail records while the stores' syncs wait on their blocks
(stores sync in parallel; more would only queue on the disk)."""

_tail_pool: ThreadPoolExecutor | None = None
_tail_pool_lock: Final = threading.Lock()


def _tail_syncs() -> ThreadPoolExecutor:
    global _tail_pool
    with _tail_pool_lock:
        if _tail_pool is None:
            _tail_pool = ThreadPoolExecutor(TAIL_SYNC_THREADS, thread_name_prefix="jetpy-tail-sync")
        return _tail_pool


MAX_OPEN_SEALED: Final = 64
"""Descriptors kept open for sealed (non-active) blocks, least recently used evicted: a terabyte
stream has ~100k blocks and must not need as many descriptors."""


class GroupCommit:
    """The write side of one file store; see the module docstring."""

    __slots__ = (
        "_await_flush",
        "_await_sync",
        "_deferred_close",
        "_dir_dirty",
        "_dirty",
        "_dlog_a",
        "_dlog_b",
        "_dlog_flushed",
        "_epoch",
        "_forget_reads",
        "_hdr_written",
        "_ix",
        "_lru",
        "_msgdir",
        "_new_framed",
        "_sync_busy",
        "_tail",
        "_tail_lock",
        "_tail_vals",
        "closed",
        "durable_seq",
        "fail",
        "flushed_seq",
        "guard",
        "lock",
        "roll_pending",
        "sync_mutex",
        "wbuf",
    )

    def __init__(
        self,
        index: StoreIndex,
        msgdir: Path,
        forget_reads: Callable[[Block | None], None],
        tail: TailFile | None = None,
        new_framed: Callable[[int], tuple[FileCipher, bytes] | None] | None = None,
    ) -> None:
        """``forget_reads(blk)`` is called whenever bytes a reader may have cached are rewritten
        or their file goes away (None: any block's). ``tail``: the store's tail record, rewritten
        by every successful ``sync`` (see tail.py). ``new_framed(base)``: the cipher and key
        header of a new block (an encrypted store's blocks are framed files, frames.py); None:
        new blocks are plain files."""
        self._ix = index
        self._new_framed = new_framed
        self._msgdir = msgdir
        self._forget_reads = forget_reads
        self.wbuf: Final = bytearray()  # records not yet handed to the OS, all for the active block
        self.lock: Final = threading.Lock()
        self.sync_mutex: Final = threading.Lock()  # one sync at a time; the owning thread never takes it
        self._lru: OrderedDict[Block, None] = OrderedDict()
        self.flushed_seq = index.last_seq
        self.durable_seq = index.last_seq
        self._hdr_written: tuple[int, int, int] | None = None  # (hwm, floor, last_ts) in the active header
        self._dirty: set[Block] = set()  # blocks written since their last fdatasync
        self._dir_dirty = False
        self._await_flush: list[Block] = []  # retired blocks whose covering tombstones are buffered
        self._await_sync: list[Block] = []  # ... flushed; unlink after the next successful sync
        # Tombstones (first, last) written since the last sync, re-appended if a rollback cuts them
        # off; two u64 columns so a long stretch without sync costs 16 bytes per delete.
        self._dlog_a = array("Q")
        self._dlog_b = array("Q")
        self._dlog_flushed = 0
        self._epoch = 0
        self.fail: OSError | None = None  # a failed sync, applied (rolled back) by the owning thread
        self._sync_busy = False
        self._deferred_close: list[int] = []
        self.closed = False
        self.roll_pending = False  # the next append must start a new block
        self.guard = False
        self._tail = tail
        # (hwm, floor, last_ts, newest block's base, its flushed size) as of the last flush: what
        # the tail record says once the sync covering that flush has made it durable
        self._tail_vals: tuple[int, int, int, int, int] | None = None
        # held while the tail record is written, by a sync and by a rollback: a rollback never
        # leaves the record claiming bytes it cut (see ``rollback``)
        self._tail_lock: Final = threading.Lock()

    def _reguard_locked(self) -> None:
        self.guard = self.closed or self.fail is not None or self.roll_pending

    def set_roll_pending(self) -> None:
        """Never append to the active block again (a torn tail or rolled-back seqs end it)."""
        with self.lock:
            self.roll_pending = True
            self._reguard_locked()

    # ------------------------------------------------------------------ appending

    def tombstone(self, seq: int) -> None:
        buf = self.wbuf
        buf += encode_tombstone(seq)
        active = self._ix.active
        active.size += RECORD_OVERHEAD
        active.tombs += 1
        self._dlog_a.append(seq)
        self._dlog_b.append(seq)

    def range_tombstone(self, first: int, last: int) -> None:
        rec = encode_range_tombstone(first, last)
        buf = self.wbuf
        buf += rec
        active = self._ix.active
        active.size += len(rec)
        active.tombs += 1
        self._dlog_a.append(first)
        self._dlog_b.append(last)

    def overwrite(self, blk: Block, off: int, data: bytes) -> None:
        """Replace the bytes at ``off`` of ``blk`` in place (an erase), wherever they are now."""
        if off >= blk.flushed:
            start = off - blk.flushed
            self.wbuf[start : start + len(data)] = data
            return
        try:
            if os.pwrite(self.fd(blk), data, off) != len(data):
                raise OSError(_errno.EIO, "short write while erasing")
        except OSError as exc:
            raise self.rollback(exc) from exc
        with self.lock:
            blk.wseq += 1
            self._dirty.add(blk)
        self._forget_reads(None)

    def rewrite_frames(
        self,
        blk: Block,
        patches: list[tuple[int, bytes]],
        compress: bool,
        read: Callable[[Block, int, int], bytes],
    ) -> None:
        """An erase in a framed block (frames.py): each frame holding a patch (``(logical
        offset, bytes)``) is appended again with the patch applied and made durable, then the old
        frame is destroyed in place. ``read(blk, a, b)`` gives logical bytes. The caller has
        made everything flushed durable first, so this sync moves nothing else. Raises
        ErrStoreIO (nothing changed) if the replacements cannot be made durable."""
        frames = blk.frames
        assert frames is not None
        by_frame: dict[int, list[tuple[int, bytes]]] = {}
        for off, data in patches:
            k = frames.frame_of(off)
            if k >= 0:
                by_frame.setdefault(k, []).append((off, data))
        if not by_frame:
            return
        end0 = frames.end
        olds: list[tuple[int, int, int, int]] = []
        fd = self.fd(blk)
        try:
            for k, ps in sorted(by_frame.items()):
                lpos, llen = frames.frame_span(k)
                cur = bytearray(read(blk, lpos, lpos + llen))
                for off, data in ps:
                    cur[off - lpos : off - lpos + len(data)] = data
                olds.append(frames.rewrite(fd, k, bytes(cur), compress))
            with self.sync_mutex:
                os.fdatasync(fd)
        except OSError as exc:
            frames.undo(olds, end0)
            self._forget_reads(blk)
            try:
                os.ftruncate(fd, end0)
            except OSError:
                pass
            raise ErrStoreIO(exc.errno or _errno.EIO, None, f"erasing in {blk.path.name}: {exc}") from exc
        with self.lock:
            blk.pdurable = max(blk.pdurable, frames.end)
        for _k, pos, size, _gen in olds:
            try:
                frames.destroy(fd, pos, size)
            except OSError:
                pass  # the replacement is durable: the next open destroys what is left (recovery)
        with self.lock:
            blk.wseq += 1
            self._dirty.add(blk)
        self._forget_reads(blk)

    def is_clean(self, blk: Block) -> bool:
        """Whether everything written to ``blk`` is durable."""
        with self.lock:
            return blk not in self._dirty

    def install(self, blk: Block, tmp: Path, frames: FrameTable, wseq: int) -> bool:
        """Put a rewritten (compressed) copy of sealed block ``blk``, made from it as of
        ``wseq``, in its place: renamed over it if the block is still there, sealed, clean and
        unchanged since, and read through ``frames`` from then on; else the copy is removed.
        Runs on the owning thread; the rename is made durable by the next sync."""
        ix = self._ix
        with self.lock:
            ok = (
                ix.position(blk) >= 0
                and blk is not ix.active
                and blk.wseq == wseq
                and blk not in self._dirty
                and not self.closed
            )
            if ok:
                try:
                    os.rename(tmp, blk.path)
                except OSError:
                    ok = False
            if ok:
                self._lru.pop(blk, None)
                self._close_fd_locked(blk)
                blk.frames = frames
                blk.pdurable = frames.end
                blk.wseq += 1
                self._dir_dirty = True
        if not ok:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        self._forget_reads(blk)
        return True

    # ------------------------------------------------------------------ blocks

    def created(self, blk: Block) -> None:
        """``blk`` was just created (its file and its directory entry are not durable yet)."""
        with self.lock:
            self._dirty.add(blk)
            self._dir_dirty = True

    def roll(self, base: int, hwm: int) -> Block:
        """Seal the active block and start ``<base>.blk`` (base > every seq handed out so far)
        with high-water mark ``hwm``; returns the sealed block, whose descriptor stays in the
        pool if it still has messages."""
        self.write_out()
        ix = self._ix
        floor = ix.first_seq if ix.msgs else base
        header = BlockHeader(base, hwm, floor, ix.last_ts, 1)
        framed = self._new_framed(base) if self._new_framed is not None else None
        try:
            try:
                blk = Block.create(self._msgdir, header, framed)
            except OSError as exc:
                if exc.errno != _errno.ENOSPC or not self._reclaim_empty_active():
                    raise
                blk = Block.create(self._msgdir, header, framed)
        except OSError as exc:
            raise ErrStoreIO(exc.errno or _errno.EIO, None, f"creating block {base}: {exc}") from exc
        old = ix.active
        self._hdr_written = None
        with self.lock:
            ix.add_block(blk)
            self._dirty.add(blk)
            self._dir_dirty = True
            self.roll_pending = False
            self._reguard_locked()
        if old.live and old.fd >= 0:
            self._lru[old] = None
            self._evict_fds()
        return old

    def _reclaim_empty_active(self) -> bool:
        """On a full disk, the space of a stream that is empty (purged) but whose only block
        still holds its old records: once its floor is durable (header and tail record say
        every sequence is deleted), the block file goes, so the next one can be created. False
        if the stream is not in that state (nothing is touched then)."""
        ix = self._ix
        if ix.msgs or len(ix.blocks) != 1:
            return False
        old = ix.active
        self.flush()
        self.sync()  # on the owning thread, unlike every other sync: this is a full disk's rare path
        self._lru.pop(old, None)
        self._forget_reads(old)
        with self.lock:
            self._dirty.discard(old)
            self._close_fd_locked(old)
        try:
            os.unlink(old.path)
            fsync_dir(self._msgdir)
        except OSError:
            return False
        return True

    def retire(self, blk: Block) -> None:
        """Forget a block the index no longer has: close it, unlink it after the next sync."""
        self._lru.pop(blk, None)
        self._forget_reads(blk)
        with self.lock:
            self._dirty.discard(blk)
            self._await_flush.append(blk)
            self._close_fd_locked(blk)

    # ------------------------------------------------------------------ flush and sync

    def write_out(self) -> None:
        """Hand the write buffer to the OS (pwrite at the active block's flushed offset)."""
        buf = self.wbuf
        if not buf:
            return
        blk = self._ix.active
        total = len(buf)
        frames = blk.frames
        if frames is not None:
            self._write_frames(blk, buf)
            return
        try:
            done = os.pwrite(blk.fd, buf, blk.flushed)
            while done < total:
                n = os.pwrite(blk.fd, memoryview(buf)[done:], blk.flushed + done)
                if n <= 0:
                    raise OSError(_errno.ENOSPC, "no progress writing block")
                done += n
        except OSError as exc:
            raise self.rollback(exc) from exc
        with self.lock:
            blk.flushed += total
            blk.wseq += 1
            self._dirty.add(blk)
        buf.clear()
        STORE_IO.wrote(total)

    def _write_frames(self, blk: Block, buf: bytearray) -> None:
        """``write_out`` for a framed block: the buffer as frames of about ``FRAME_TARGET``
        bytes (cut where records start: the index knows where), encrypted, in one write."""
        frames = blk.frames
        assert frames is not None
        start = blk.flushed
        end = start + len(buf)
        view = memoryview(buf)
        pieces = []
        at = start
        for bound in chunk_bounds(start, end, blk.offs):
            pieces.append((at, view[at - start : bound - start]))
            at = bound
        data = frames.encode(pieces)
        del pieces, view
        try:
            done = 0
            while done < len(data):
                n = os.pwrite(blk.fd, memoryview(data)[done:], frames.end + done)
                if n <= 0:
                    raise OSError(_errno.ENOSPC, "no progress writing block")
                done += n
        except OSError as exc:
            raise self.rollback(exc) from exc
        with self.lock:
            frames.appended(data)
            blk.flushed = end
            blk.wseq += 1
            self._dirty.add(blk)
        buf.clear()
        STORE_IO.wrote(len(data))

    def _write_header(self, vals: tuple[int, int, int]) -> None:
        """Rewrite the active block's older header slot with (hwm, floor, last_ts).

        Done on every flush that changed them, so that a process crash (page cache intact)
        keeps head deletions and the high-water mark; ``sync`` makes it durable with the
        records because it fdatasyncs the same file."""
        blk = self._ix.active
        gen = blk.hdr_gen + 1
        off, slot = encode_block_header(BlockHeader(blk.base, *vals, gen))
        if blk.frames is not None:
            off, slot = blk.frames.slot(gen % 2, slot)
        try:
            if os.pwrite(blk.fd, slot, off) != len(slot):
                raise OSError(_errno.EIO, "short write of block header")
        except OSError as exc:
            raise self.rollback(exc) from exc
        blk.hdr_gen = gen
        self._hdr_written = vals
        with self.lock:
            blk.wseq += 1
            self._dirty.add(blk)

    def flush(self) -> int:
        """Write buffered records to the OS; returns the highest sequence now written."""
        self.write_out()
        ix = self._ix
        vals = (ix.last_seq, ix.first_seq, ix.last_ts)
        if vals != self._hdr_written:
            self._write_header(vals)
        with self.lock:
            self.flushed_seq = ix.last_seq
            self._tail_vals = (*vals, ix.active.base, ix.active.flushed)
            self._await_sync.extend(self._await_flush)
            self._await_flush.clear()
            self._dlog_flushed = len(self._dlog_a)
        return self.flushed_seq

    def sync(self) -> None:
        """fdatasync everything flushed before this call; safe on a worker thread (see module doc)."""
        with self.sync_mutex:
            with self.lock:
                if self.closed:
                    return
                fail = self.fail
                if fail is not None:
                    raise ErrStoreIO(
                        fail.errno or _errno.EIO,
                        range(self.durable_seq + 1, self.flushed_seq + 1),
                        "an earlier sync failed",
                    )
                epoch = self._epoch
                self._dirty = {b for b in self._dirty if b.fd >= 0}  # no descriptor, nothing unsynced
                targets = [
                    (b, b.fd, b.flushed, b.frames.end if b.frames is not None else 0, b.wseq)
                    for b in self._dirty
                ]
                unlinks = list(self._await_sync)
                dir_dirty = self._dir_dirty
                if not targets and not unlinks and not dir_dirty:
                    return
                self._dir_dirty = False
                dlog_n = self._dlog_flushed
                target_seq = self.flushed_seq
                tail_vals = self._tail_vals
                prev_durable = self.durable_seq
                self._sync_busy = True
            try:
                fds: list[int] = []
                for _b, fd, _off, _pend, _w in targets:
                    if fd not in fds:
                        fds.append(fd)
                tail_job = None
                if self._tail is not None and tail_vals is not None:
                    # the tail record is synced while the blocks are: one sync's wait, not two
                    tail_job = _tail_syncs().submit(self._write_tail, epoch, tail_vals)
                try:
                    for fd in fds:
                        os.fdatasync(fd)
                    if dir_dirty:
                        fsync_dir(self._msgdir)
                finally:
                    tail_err = tail_job.exception() if tail_job is not None else None
                if tail_err is not None:
                    raise tail_err
            except OSError as exc:
                with self.lock:
                    self._sync_busy = False
                    self._dir_dirty = self._dir_dirty or dir_dirty
                    if epoch == self._epoch and self.fail is None:
                        self.fail = exc
                        self._reguard_locked()
                    self._close_deferred_locked()
                raise ErrStoreIO(
                    exc.errno or _errno.EIO, range(prev_durable + 1, target_seq + 1), "sync"
                ) from exc
            with self.lock:
                self._sync_busy = False
                if epoch != self._epoch:
                    self._close_deferred_locked()
                    raise ErrStoreIO(
                        _errno.EIO, range(prev_durable + 1, target_seq + 1), "rolled back during sync"
                    )
                for b, _fd, off, pend, ws in targets:
                    if off > b.durable:
                        b.durable = off
                    if pend > b.pdurable:
                        b.pdurable = pend
                    if b.wseq == ws:
                        self._dirty.discard(b)
                if target_seq > self.durable_seq:
                    self.durable_seq = target_seq
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

    def _write_tail(self, epoch: int, vals: tuple[int, int, int, int, int]) -> None:
        """Rewrite the tail record for the sync of ``epoch`` (not after a rollback voided it)."""
        tail = self._tail
        assert tail is not None
        with self._tail_lock:
            if epoch == self._epoch:
                tail.write(*vals)

    # ------------------------------------------------------------------ rollback

    def rollback(self, exc: OSError) -> ErrStoreIO:
        """Undo everything not yet durable after a failed write/fsync; returns the error to raise.

        Runs on the owning thread. Drops index entries above the durable sequence, truncates
        every block to its durable size, re-appends the tombstones that were lost with the
        buffer, and arranges for the next message to start a fresh block so the rolled-back
        sequences are never handed out again.
        """
        with self._tail_lock:  # a sync writing the tail record finishes first, or sees the epoch
            return self._rollback(exc)

    def _rollback(self, exc: OSError) -> ErrStoreIO:
        with self.lock:
            self._epoch += 1
            self.fail = None
            durable_seq = self.durable_seq
            self._await_flush.extend(self._await_sync)
            self._await_sync.clear()
            self._dlog_flushed = 0
        self.wbuf.clear()
        self._forget_reads(None)
        ix = self._ix
        ix.forget_after(durable_seq)
        kept: list[Block] = []
        last = ix.blocks[-1]
        for blk in ix.blocks:
            if blk.base > durable_seq and blk is not last:
                self._lru.pop(blk, None)
                with self.lock:
                    self._dirty.discard(blk)
                    self._close_fd_locked(blk)
                try:
                    os.unlink(blk.path)
                except OSError:
                    pass
                continue
            frames = blk.frames
            if frames is not None and frames.end > max(blk.pdurable, DATA_START):
                pkeep = max(blk.pdurable, DATA_START)
                try:
                    os.ftruncate(self.fd(blk), pkeep)
                except OSError:
                    pass  # later appends overwrite from ``pkeep``; recovery ignores stale frames
                frames.cut(pkeep)
                with self.lock:
                    blk.wseq += 1
                    self._dirty.add(blk)
            if blk.size > blk.durable or blk.flushed > blk.durable:
                keep = max(blk.durable, BLOCK_HEADER_SIZE)
                if frames is None:
                    try:
                        os.ftruncate(self.fd(blk), keep)
                    except OSError:
                        pass  # later appends overwrite from ``keep``; recovery ignores stale bytes
                blk.size = blk.flushed = keep
                with self.lock:
                    blk.wseq += 1
                    self._dirty.add(blk)
            kept.append(blk)
        self._hdr_written = None
        with self.lock:
            ix.keep_blocks(kept)
            self._lru.pop(ix.active, None)
            ix.active.open()
            self.flushed_seq = durable_seq
            self.roll_pending = ix.active.end_seq <= ix.last_seq
            self._reguard_locked()
        self._tail_after_rollback(durable_seq)
        pending = list(zip(self._dlog_a, self._dlog_b, strict=True))
        del self._dlog_a[:]
        del self._dlog_b[:]
        skipped = (durable_seq + 1, ix.last_seq)  # never acknowledged: answered with an error
        for a, b in pending:
            if a == b:
                if a <= durable_seq:
                    self.tombstone(a)
            elif (a, b) != skipped:
                self.range_tombstone(a, b)
        if ix.last_seq > durable_seq:
            # the rolled-back sequences are never handed out again, and were never stored: a range
            # tombstone says so, so that no restart reports them as lost
            self.range_tombstone(*skipped)
        return ErrStoreIO(exc.errno or _errno.EIO, range(durable_seq + 1, ix.last_seq + 1), str(exc))

    def _tail_after_rollback(self, durable_seq: int) -> None:
        """A sync whose blocks were cut by this rollback may have written the tail record already:
        bring it back to what the blocks still hold (best effort: a failure here leaves a record
        that over-reports, never one that hides a loss)."""
        tail = self._tail
        last = tail.last if tail is not None else None
        if tail is None or last is None:
            return
        held = next((b for b in self._ix.blocks if b.base == last.block), None)
        if last.hwm <= durable_seq and held is not None and held.size >= last.size:
            return
        newest = self._ix.blocks[-1]
        try:
            tail.write(durable_seq, min(last.floor, durable_seq + 1), 0, newest.base, newest.size)
        except OSError:
            pass

    # ------------------------------------------------------------------ descriptors

    def fd(self, blk: Block) -> int:
        """``blk``'s descriptor, opened if needed; sealed blocks share a bounded LRU pool."""
        fd = blk.fd
        if fd >= 0:
            if blk in self._lru:
                self._lru.move_to_end(blk)
            return fd
        fd = blk.open()
        if blk is not self._ix.active:
            self._lru[blk] = None
            self._evict_fds()
        return fd

    def _evict_fds(self) -> None:
        while len(self._lru) > MAX_OPEN_SEALED:
            victim = next((b for b in self._lru if b not in self._dirty), None)
            if victim is None:
                return
            del self._lru[victim]
            with self.lock:
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

    def close(self) -> None:
        """Close every descriptor and refuse further writes; nothing is flushed or synced here."""
        with self.sync_mutex, self.lock:
            self.closed = True
            self._reguard_locked()
            for blk in [*self._ix.blocks, *self._await_flush, *self._await_sync]:
                self._close_fd_locked(blk)
            self._close_deferred_locked()
            self._lru.clear()
            if self._tail is not None:
                self._tail.close()
