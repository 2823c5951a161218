"""Reading messages back from a file store's blocks: one record, or a run of them in bulk.

Owns: the read-ahead cache (one buffer per store: one block's bytes from one offset on), the
``os.pread`` of block files with its read-ahead sizes and error mapping, finding an entry's
record in the write buffer, the cache or the file, turning records into ``StoredMsg`` through
the codec's ``decode_msgs`` (which verifies each), timestamps from record headers, and the
consumers' bulk read ``next_batch`` (one ``pread`` of ``BATCH_READ`` bytes decodes a run of
~1,500 small records).
Must not know: how descriptors are opened or cached, when or how bytes are written (it is handed
the write buffer and a function giving a block's descriptor), subject matching, limits, removal.
Whoever rewrites bytes it may hold calls ``forget``.
"""

from __future__ import annotations

import errno
import os
from bisect import bisect_right
from collections.abc import Callable
from typing import Final

from jetpy.meters import STORE_IO

from .base import ErrCorrupt, ErrStoreIO, StoredMsg
from .index import StoreIndex
from .record import BLOCK_HEADER_SIZE, RecordFields, decode_msgs, longest_record, peek_header
from .segment import NO_SID, Block

__all__ = ["BATCH_READ", "READ_AHEAD", "BlockReader"]

READ_AHEAD: Final = 64 * 1024
"""Bytes read per ``pread`` miss of a single read. A consumer reading sequentially then costs one
syscall per ~400 small records, while the cache stays one buffer per store (payloads are never
kept)."""

BATCH_READ: Final = 256 * 1024
"""Bytes per ``pread`` of :meth:`BlockReader.next_batch` (~1,500 small records)."""


class BlockReader:
    """Reads one file store's records; see the module docstring."""

    __slots__ = ("_fd_of", "_first_ts", "_ix", "_names", "_rc", "_wbuf")

    def __init__(self, index: StoreIndex, wbuf: bytearray, fd_of: Callable[[Block], int]) -> None:
        self._ix = index
        self._names = index.by_sid  # never replaced, only changed in place
        self._wbuf = wbuf  # records at or past a block's ``flushed`` offset are still here
        self._fd_of = fd_of
        self._rc: tuple[Block, int, bytes] | None = None  # read-ahead cache: (block, offset, bytes)
        self._first_ts = (0, 0)  # (seq, ts) of the first message when last asked

    def forget(self, blk: Block | None = None) -> None:
        """Drop the read-ahead cache (only if it holds ``blk``'s bytes, when one is given): its
        bytes were rewritten, or their file is going away."""
        if blk is None or (self._rc is not None and self._rc[0] is blk):
            self._rc = None

    # ------------------------------------------------------------------ raw bytes

    def read_at(self, blk: Block, i: int, off: int, ahead: int) -> bytes:
        """Read block ``blk`` from entry ``i``'s record (at ``off``) on: that record at least,
        ``ahead`` bytes if the block has them. The result becomes the read-ahead cache."""
        want = min(max(longest_record(blk.lens[i]), ahead), blk.flushed - off)
        frames = blk.frames
        try:
            if frames is None:
                data = os.pread(self._fd_of(blk), want, off)
            else:
                data = frames.read(self._fd_of(blk), off, off + want, blk.path.name)
        except OSError as exc:  # read errors are not sticky: the next read tries again
            raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {blk.path.name}: {exc}") from exc
        except ErrCorrupt as exc:
            raise ErrCorrupt(str(exc).removeprefix(f"{ErrCorrupt.description}: "), [blk.base + i]) from exc
        self._rc = (blk, off, data)
        STORE_IO.read(len(data))
        return data

    def read_block(self, blk: Block) -> bytes:
        """Every flushed byte of ``blk`` (to carry its tombstones before its file goes); a
        framed block's logical bytes (its header region zeros)."""
        try:
            if blk.frames is None:
                return os.pread(self._fd_of(blk), blk.flushed, 0)
            return bytes(BLOCK_HEADER_SIZE) + self.span(blk, BLOCK_HEADER_SIZE, blk.flushed)
        except OSError as exc:
            raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {blk.path.name}: {exc}") from exc

    def span(self, blk: Block, a: int, b: int) -> bytes:
        """Logical bytes ``[a, b)`` of ``blk`` (``a`` past its header), whatever its file's
        form: from the file up to its flushed end, then the write buffer. Every reader of
        records that is not this class's own (an erase, the bulk read) reads through here: a
        framed file's raw bytes are frames, never records. Raises ErrStoreIO, ErrCorrupt."""
        flushed = blk.flushed
        out = b""
        if a < flushed:
            hi = min(b, flushed)
            frames = blk.frames
            try:
                if frames is None:
                    out = os.pread(self._fd_of(blk), hi - a, a)
                else:
                    out = frames.read(self._fd_of(blk), a, hi, blk.path.name)
            except OSError as exc:
                raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {blk.path.name}: {exc}") from exc
            STORE_IO.read(len(out))
            if len(out) < hi - a:
                raise ErrCorrupt(f"{blk.path.name} ends at {a + len(out)}, before its records do")
        if b > flushed:
            out += self._wbuf[max(a - flushed, 0) : b - flushed]
        return out

    def header_at(self, blk: Block, i: int) -> RecordFields:
        """The header fields of entry ``i``'s record, unverified (a timestamp, an erase); from the
        write buffer, or from the cache or a fresh read holding the whole record."""
        off = blk.offs[i]
        if off >= blk.flushed:
            fields = peek_header(self._wbuf, off - blk.flushed)
            if fields is not None:
                return fields
        c = self._rc
        if c is not None and c[0] is blk:
            d = off - c[1]
            fields = peek_header(c[2], d)
            if fields is not None and d + fields[0] <= len(c[2]):
                return fields
        data = self.read_at(blk, i, off, READ_AHEAD)
        fields = peek_header(data, 0)
        if fields is not None and fields[0] <= len(data) and fields[0] <= longest_record(blk.lens[i]):
            return fields
        raise ErrCorrupt(f"short read in {blk.path.name} at offset {off}", [blk.base + i])

    # ------------------------------------------------------------------ messages

    def msg_at(self, blk: Block, i: int) -> StoredMsg:
        """The message of live entry ``i`` of ``blk``, verified; ErrCorrupt if it fails."""
        off = blk.offs[i]
        flushed = blk.flushed
        out: list[StoredMsg] = []
        if off >= flushed:
            start = off - flushed
            buf = bytes(self._wbuf[start : start + longest_record(blk.lens[i])])
            decode_msgs(buf, off, blk.offs, blk.lens, blk.sids, self._names, blk.base, i, 1, out, NO_SID)
        else:
            c = self._rc
            if c is not None and c[0] is blk:
                decode_msgs(
                    c[2], c[1], blk.offs, blk.lens, blk.sids, self._names, blk.base, i, 1, out, NO_SID
                )
            if not out:
                buf = self.read_at(blk, i, off, READ_AHEAD)
                decode_msgs(buf, off, blk.offs, blk.lens, blk.sids, self._names, blk.base, i, 1, out, NO_SID)
        if out:
            return out[0]
        seq = blk.base + i
        raise ErrCorrupt(f"record of seq {seq} failed its checksum", [seq])

    def next_batch(self, start: int, max_msgs: int) -> list[StoredMsg]:
        """Up to ``max_msgs`` live messages from ``start`` on, in order (the consumers' bulk read).

        Records of consecutive sequences sit back to back, so a run is decoded from one large
        read. A record that fails verification ends the batch early, or raises ErrCorrupt as
        ``msg_at`` would when it is the first one."""
        ix = self._ix
        out: list[StoredMsg] = []
        blocks = ix.blocks
        names = self._names
        for j in range(max(bisect_right(ix.bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            if not blk.live:
                continue
            offs, lens, sids, base = blk.offs, blk.lens, blk.sids, blk.base
            n = len(sids)
            i = start - base if start > base else 0
            chunk, coff = b"", -1
            rc = self._rc
            if rc is not None and rc[0] is blk:  # the previous bulk read often covers the start
                chunk, coff = rc[2], rc[1]
            while True:
                i = decode_msgs(
                    chunk, coff, offs, lens, sids, names, base, i, max_msgs - len(out), out, NO_SID
                )
                if len(out) >= max_msgs:
                    return out
                if i >= n:
                    break
                off = offs[i]
                if off == coff:  # a run that begins with this record could not decode it
                    if out:
                        return out  # the bad record is reported by the next read, on its own
                    raise ErrCorrupt(f"record of seq {base + i} failed its checksum", [base + i])
                if off >= blk.flushed:  # still in the write buffer
                    begin = off - blk.flushed
                    chunk = bytes(self._wbuf[begin : begin + max(longest_record(lens[i]), BATCH_READ)])
                else:
                    chunk = self.read_at(blk, i, off, BATCH_READ)
                coff = off
            start = base + n
        return out

    # ------------------------------------------------------------------ timestamps

    def first_ts(self) -> int:
        """The timestamp of the stream's first message (0 if the index does not cover it)."""
        seq = self._ix.first_seq
        cached = self._first_ts
        if cached[0] == seq:
            return cached[1]
        blk = self._ix.block_for(seq)
        if blk is None:
            return 0
        ts = self.header_at(blk, seq - blk.base)[3]
        self._first_ts = (seq, ts)
        return ts

    def ts_of(self, seq: int) -> int:
        """The timestamp of live message ``seq``."""
        if seq == self._ix.first_seq:
            return self.first_ts()
        blk = self._ix.block_for(seq)
        assert blk is not None
        return self.header_at(blk, seq - blk.base)[3]
