"""The file store's bulk read: its message records handed out as they lie in the block files.

Owns ``FileStore.read_records`` (``StreamStore.read_records``): finding the runs of wanted index
entries (live, in the range, on a wanted subject), reading each run's bytes at once (one
``pread`` of a plain file, or the frames holding them; the write buffer for what is not flushed) and handing them out with the entries'
block offsets, untouched. Records are never decoded or copied one by one here: an unfiltered
read costs a few array slices and one ``pread`` per run, so its cost per message is the bytes'
copy. Checking each record (magic, sequence, CRC-32) is left to whoever decodes them: the bulk
read's reader verifies every record it turns into a message, which covers the disk, this
server's memory and the network at once (see ``jetstream/api/bulk.py``).

A run is a stretch of consecutive entries handed out together: its bytes go from its first
record to the end of its last, which may include tombstones written between them (never a
removed message: those are entries, and end a run) and, after a record with headers, 4 bytes of
what follows (``record.longest_record``). Filtered reads make runs of the matching entries,
read through a window of ``READ_WINDOW`` bytes so that dense matches cost one ``pread`` per
window, not one per message.
Records are handed out as the block's *logical* bytes (frames.py): a compressed or encrypted
block's frames are decoded by ``BlockReader.span`` first, so what is handed out is always plain
records, each with its CRC-32 over the plain record (what readers check), never a file's raw
frames.
Must not know: the network, the bulk reply's framing, subject matching (it gets subject ids).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Final

from .base import BULK_MAX_EXAMINED, StoredRecords
from .index import StoreIndex
from .record import longest_record
from .segment import NO_SID, Block

__all__ = ["READ_WINDOW", "read_file_records"]

READ_WINDOW: Final = 1024 * 1024
"""Bytes read at once for a filtered read's runs: one ``pread`` serves every match within it."""

_U32_MAX: Final = 0xFFFFFFFF
_SMALL_MATCH: Final = 8
"""Up to this many wanted subjects, each one's entries are found with ``array.index`` (C speed);
more are matched by one Python pass over the entries."""


class _Area:
    """The records area being built: its parts, the records' offsets and ``base``."""

    __slots__ = ("base", "offsets", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.offsets = array("I")
        self.base = -1
        self.size = 0

    def add(self, data: bytes, offs: array[int], start: int) -> None:
        """Append a run's bytes (the run's first record at block offset ``start``) and its
        records' block offsets."""
        if self.base < 0:
            self.base = start  # the first run's offsets are handed out as they are
            self.offsets = offs
        else:
            delta = start - self.size - self.base  # offsets - delta: positions past the area's base
            if delta == 0:
                self.offsets.extend(offs)
            elif max(offs) - delta <= _U32_MAX and min(offs) - delta >= 0:
                self.offsets.extend([o - delta for o in offs])
            else:  # cannot happen with blocks under 4 GB, but never hand out a wrapped offset
                self.offsets = array("I", [o - self.base for o in self.offsets])
                self.base = 0
                self.offsets.extend([o - start + self.size for o in offs])
        self.parts.append(data)
        self.size += len(data)

    def result(self, next_seq: int) -> StoredRecords:
        return StoredRecords(self.parts, self.offsets, max(self.base, 0), self.size, next_seq)


Span = Callable[[Block, int, int], bytes]
"""``span(blk, a, b)``: logical bytes ``[a, b)`` of a block, from its file (a framed file's frames
decoded) and the write buffer (``BlockReader.span``)."""


def _run_end(blk: Block, k: int) -> int:
    """Where the bytes of a run whose last entry is ``k - 1`` end."""
    offs = blk.offs
    end = min(offs[k - 1] + longest_record(blk.lens[k - 1]), blk.size)
    return min(end, offs[k]) if k < len(offs) else end


def _unfiltered(area: _Area, span: Span, blk: Block, i: int, stop: int, max_bytes: int) -> int:
    """Hand out the live entries of ``blk`` in ``[i, stop)``, run by run, until the area is full;
    returns the entry where it stopped."""
    sids, offs = blk.sids, blk.offs
    dense = blk.live == len(sids)  # no deleted entry: one run, nothing to look for
    while i < stop:
        if area.size >= max_bytes:
            return i
        if not dense:
            while i < stop and sids[i] == NO_SID:
                i += 1
            if i >= stop:
                return stop
        lo = offs[i]
        k = bisect_left(offs, lo + max_bytes - area.size, i + 1, stop)  # as far as the bytes allow
        if not dense:
            try:
                k = sids.index(NO_SID, i, k)
            except ValueError:
                pass
        area.add(span(blk, lo, _run_end(blk, k)), offs[i:k], lo)
        i = k
    return stop


def _filtered(
    area: _Area, span: Span, blk: Block, i: int, stop: int, wanted: frozenset[int], max_bytes: int
) -> int:
    """Hand out the entries of ``blk`` in ``[i, stop)`` on a wanted subject, record by record
    (consecutive ones as one run), until the area is full; returns the entry where it stopped.
    The per-record steps are inlined: this loop runs once per message handed out."""
    sids, offs, lens = blk.sids, blk.offs, blk.lens
    n = len(sids)
    size_end = blk.size
    one = next(iter(wanted)) if len(wanted) == 1 else -1
    index = sids.index
    several = len(wanted) <= _SMALL_MATCH
    if area.base < 0:
        area.base = 0
    parts, offsets = area.parts, area.offsets
    append_part, append_off = parts.append, offsets.append
    win, wlo, whi = b"", 0, 0  # the window's bytes and the block offsets they cover
    size = area.size
    try:
        while i < stop:
            if size >= max_bytes:
                return i
            if one >= 0:
                try:
                    a = index(one, i, stop)
                except ValueError:
                    return stop
            elif several:
                a = stop
                for sid in wanted:
                    try:
                        a = index(sid, i, a)
                    except ValueError:
                        pass
                if a >= stop:
                    return stop
            else:
                a = i
                while a < stop and sids[a] not in wanted:
                    a += 1
                if a >= stop:
                    return stop
            k = a + 1
            while k < stop and (sids[k] == one if one >= 0 else sids[k] in wanted):
                k += 1  # consecutive matches: one run
            lo = offs[a]
            if k > a + 1:
                k = bisect_left(offs, lo + max_bytes - size, a + 1, k)
            hi = lens[k - 1] + offs[k - 1] + 4
            if k < n:
                nxt = offs[k]
                if nxt < hi:
                    hi = nxt
            if hi > size_end:
                hi = size_end
            if lo < wlo or hi > whi:
                win = span(blk, lo, max(min(lo + READ_WINDOW, size_end), hi))
                wlo, whi = lo, lo + len(win)
            base = area.base
            if base + size + hi - lo > _U32_MAX:
                area.offsets = offsets = array("I", [o - base for o in offsets])
                area.base = base = 0
                append_off = offsets.append
            delta = lo - size - base
            append_off(lo - delta)
            for r in range(a + 1, k):
                append_off(offs[r] - delta)
            append_part(win[lo - wlo : hi - wlo])
            size += hi - lo
            i = k
        return stop
    finally:
        area.size = size


def read_file_records(
    ix: StoreIndex,
    span: Span,
    start: int,
    end: int,
    wanted: frozenset[int] | None,
    max_bytes: int,
) -> StoredRecords:
    """``StreamStore.read_records`` over a file store's index: ``wanted`` is the set of subject
    ids to hand out (None: every subject)."""
    area = _Area()
    seq = max(start, ix.first_seq, 1)
    end = min(end, ix.last_seq)
    done = max(start, end + 1)  # next_seq once the whole range was looked at
    if not ix.msgs or seq > end or (wanted is not None and not wanted):
        return area.result(done)
    budget = BULK_MAX_EXAMINED
    blocks = ix.blocks
    for j in range(max(bisect_right(ix.bases, seq) - 1, 0), len(blocks)):
        blk = blocks[j]
        base = blk.base
        if base > end:
            break
        n = len(blk.sids)
        i = seq - base if seq > base else 0
        if not blk.live or i >= n:
            seq = max(seq, base + n)
            continue
        whole = min(end - base + 1, n)
        stop = min(whole, i + budget)
        budget -= stop - i
        if wanted is None:
            at = _unfiltered(area, span, blk, i, stop, max_bytes)
        else:
            at = _filtered(area, span, blk, i, stop, wanted, max_bytes)
        seq = base + at
        if at < whole:  # the area is full, or as many entries were looked at as one call may
            return area.result(seq)
    return area.result(done)
