"""Rewriting whole block files: sealed blocks compressed off the publish path, blocks re-encrypted.

Owns: building a block's framed file (frames.py) from its logical bytes, in chunks that end at
record boundaries (each compressed with S2 and/or sealed with the store's current key),
writing it beside the block as ``<block>.new`` and syncing it, the one worker thread that does
this for every store (``SealJob``), and reading a block's logical bytes from its own descriptor
(the worker never uses the store's). Must not know: when a copy may replace its block (the
writer's ``install`` decides, on the store's thread, and renames it over the block), the
index beyond a block's record offsets, limits, the network.

A copy is made from the block as it was when the job was taken (its write counter ``wseq``); an
erase of that block meanwhile makes the copy void (``install`` refuses it and removes it), so an
erased record is never brought back by a compression. A crash leaves at most a ``.new`` file
beside an intact block: the next open removes it (it was never the only copy).
"""

from __future__ import annotations

import os
import threading
from array import array
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Final

from .crypto import FileCipher
from .fileio import fsync_dir, pread_all, write_synced
from .frames import DATA_START, FrameTable, chunk_bounds, encode_frame, framed_prefix
from .record import BLOCK_HEADER_SIZE
from .segment import BLOCK_SUFFIX, Block

__all__ = [
    "NEW_SUFFIX",
    "Compactor",
    "SealJob",
    "build_framed",
    "read_logical",
    "remove_leftovers",
    "write_copy",
]

NEW_SUFFIX: Final = ".new"
"""A block's rewritten copy, before it is renamed over the block."""

_pool: ThreadPoolExecutor | None = None


def _workers() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        # one thread for every store: compression is background work, and one block at a time
        # keeps what it takes from the publishers' two cores bounded
        _pool = ThreadPoolExecutor(1, thread_name_prefix="jetpy-seal")
    return _pool


def build_framed(
    logical: bytes,
    fc: FileCipher | None,
    key_header: bytes,
    record_offs: array[int],
    compress: bool,
) -> tuple[bytes, FrameTable]:
    """A framed file holding ``logical`` (a block's logical bytes: its header slots, then its
    records) and the table of its frames. Chunks end where records start (``record_offs``)."""
    prefix, table = framed_prefix(fc, key_header, logical[64:BLOCK_HEADER_SIZE])
    table.packed = compress
    out = bytearray(prefix)
    off, slot = table.slot(0, logical[:64])
    out[off : off + len(slot)] = slot
    pieces = []
    at = BLOCK_HEADER_SIZE
    for bound in chunk_bounds(BLOCK_HEADER_SIZE, len(logical), record_offs):
        if bound > at:
            pieces.append(encode_frame(at, memoryview(logical)[at:bound], 0, fc, compress))
        at = bound
    frames = b"".join(pieces)
    table.end = DATA_START
    table.appended(frames)
    out += frames
    return bytes(out), table


def read_logical(fd: int, frames: FrameTable | None, size: int, name: str) -> bytes:
    """A block's logical bytes up to ``size`` through the descriptor ``fd``."""
    if frames is None:
        return pread_all(fd, size)
    return frames.read_header(fd) + frames.read(fd, BLOCK_HEADER_SIZE, size, name)


def write_copy(path: Path, data: bytes) -> Path:
    """Write ``data`` as ``<path>.new``, synced; returns its path. Raises OSError."""
    tmp = path.with_name(path.name + NEW_SUFFIX)
    write_synced(tmp, data)
    return tmp


def remove_leftovers(msgdir: Path) -> list[str]:
    """Remove ``*.blk.new`` copies a crash left (each beside its intact block); their names."""
    gone: list[str] = []
    if not msgdir.is_dir():
        return gone
    for name in os.listdir(msgdir):
        if name.endswith(BLOCK_SUFFIX + NEW_SUFFIX):
            try:
                os.unlink(msgdir / name)
                gone.append(name)
            except OSError:
                pass
    if gone:
        fsync_dir(msgdir)
    return gone


class SealJob:
    """One block's compressed (and sealed) copy, made on the worker thread."""

    __slots__ = ("_compress", "_fc", "_frames", "_header", "_offs", "_path", "_size", "blk", "future", "wseq")

    def __init__(self, blk: Block, fc: FileCipher | None, key_header: bytes, compress: bool) -> None:
        """Taken on the store's thread: the block as of now (its size, frames and record
        offsets are copied or are not changed before ``install``)."""
        self.blk = blk
        self.wseq = blk.wseq
        self._path = blk.path
        self._size = blk.flushed
        self._frames = blk.frames
        self._offs = blk.offs[:]
        self._fc = fc
        self._header = key_header
        self._compress = compress
        self.future: Future[tuple[Path, FrameTable] | None] = _workers().submit(self._run)

    def _run(self) -> tuple[Path, FrameTable] | None:
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except OSError:
            return None  # removed meanwhile: nothing to do
        try:
            logical = read_logical(fd, self._frames, self._size, self._path.name)
        except Exception:  # a damaged frame: the block stays as it is, its reader reports it
            return None
        finally:
            os.close(fd)
        if len(logical) != self._size:
            return None
        data, table = build_framed(logical, self._fc, self._header, self._offs, self._compress)
        try:
            return write_copy(self._path, data), table
        except OSError:
            try:
                os.unlink(self._path.with_name(self._path.name + NEW_SUFFIX))
            except OSError:
                pass
            return None


MAX_JOBS: Final = 4
"""Copies a store has in the making at once: each is a whole block written beside its block
(``.new``), so this bounds the extra disk a backlog of sealed blocks takes while it is
compressed."""


class Compactor:
    """One store's sealed blocks waiting to be compressed, and the copies being made.

    Runs on the store's thread: ``sealed`` queues a block the store just sealed; ``step`` (from
    ``enable`` and every flush, when ``busy``) puts finished copies in place through
    ``install`` and starts copies of queued blocks that are durable (``clean``) and not
    compressed yet, up to ``MAX_JOBS`` at a time (the one worker thread makes them in turn).
    Copies are not put in place while an export is reading the store (``exports``): an export
    reads blocks as they were when it was taken. ``stop`` waits for the copies being made and
    puts them in place: an idle store's backlog is done by its next flush or its stop."""

    __slots__ = ("_clean", "_exports", "_header", "_install", "_live", "_lock", "jobs", "on", "queue")

    def __init__(
        self,
        live: Callable[[Block], bool],
        clean: Callable[[Block], bool],
        header: Callable[[int], tuple[FileCipher | None, bytes]],
        install: Callable[[Block, Path, FrameTable, int], bool],
    ) -> None:
        """``live(blk)``: the block is still a sealed block of the store; ``clean(blk)``: all
        of it is durable; ``header(base)``: the cipher and key header of a new copy (marked
        PACKED); ``install``: the writer's."""
        self._live = live
        self._clean = clean
        self._header = header
        self._install = install
        self.on = False
        self.queue: list[Block] = []
        self.jobs: list[SealJob] = []
        self._exports = 0
        self._lock = threading.Lock()  # exports are closed on their reader's thread

    @property
    def exports(self) -> int:
        return self._exports

    def export_opened(self) -> None:
        with self._lock:
            self._exports += 1

    def export_closed(self) -> None:
        with self._lock:
            self._exports -= 1

    @property
    def busy(self) -> bool:
        return bool(self.queue) or bool(self.jobs)

    def enable(self, on: bool, sealed: list[Block]) -> None:
        """Compress from now on (every block of ``sealed`` not compressed yet is queued), or stop
        queueing blocks (what is compressed stays so: it is read as it is)."""
        self.on = on
        if on:
            queued = set(self.queue)
            self.queue.extend(b for b in sealed if not _packed(b) and b not in queued)
            self.step()
        else:
            self.queue.clear()

    def sealed(self, blk: Block) -> None:
        if self.on:
            self.queue.append(blk)

    def step(self) -> None:
        while self.jobs and self.jobs[0].future.done() and not self.exports:
            self._finish(self.jobs.pop(0))
        keep: list[Block] = []
        while self.queue and len(self.jobs) < MAX_JOBS:
            blk = self.queue.pop(0)
            if not self._live(blk) or _packed(blk) or any(j.blk is blk for j in self.jobs):
                continue
            if not self._clean(blk):
                keep.append(blk)  # its sync comes first; a later flush looks again
                continue
            fc, header = self._header(blk.base)
            self.jobs.append(SealJob(blk, fc, header, True))
        self.queue[:0] = keep

    def _finish(self, job: SealJob) -> None:
        done = job.future.result()
        if done is None:
            return
        tmp, table = done
        if not self._install(job.blk, tmp, table, job.wseq) and self._live(job.blk):
            self.queue.append(job.blk)  # written to meanwhile (an erase): compress it again

    def settle(self) -> None:
        """Compress every queued block that is durable now, waiting for the worker."""
        while self.jobs or self.queue:
            for job in self.jobs:
                job.future.result()
            if self.exports:
                return
            before = (len(self.queue), len(self.jobs))
            self.step()
            if not self.jobs and before == (len(self.queue), 0):
                return  # what is left is not durable yet

    def stop(self) -> None:
        """Wait for the copies being made and put them in place (the store is about to close);
        blocks still queued are compressed after the next open."""
        for job in self.jobs:
            if self.exports:
                _discard(job)
            else:
                job.future.result()
                self._finish(job)
        self.jobs.clear()
        self.queue.clear()


def _packed(blk: Block) -> bool:
    return blk.frames is not None and blk.frames.packed


def _discard(job: SealJob) -> None:
    done = job.future.result()
    if done is not None:
        try:
            os.unlink(done[0])
        except OSError:
            pass
