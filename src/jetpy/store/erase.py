"""Secure erase: destroying the bytes of removed messages where they lie, in every block form.

Owns turning a set of index entries of one block into erased records (record.py's ERASED form:
same length, subject, headers and payload zeroed) wherever their bytes are: in the write buffer,
in place in a plain file (a run of consecutive records is one write), or, in a framed file
(compressed or encrypted, frames.py), by rewriting each frame holding one and destroying the old
frame (``GroupCommit.rewrite_frames``). Used by ``erase_msg`` (STREAM.MSG.DELETE without
``no_erase``) and by purges, for the blocks that stay (a block file removed whole is unlinked).
Must not know: which messages to erase or why, the index beyond one block's columns.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Final

from .base import Steps
from .index import StoreIndex
from .reader import BlockReader
from .record import encode_erased, peek_header
from .segment import NO_SID, Block
from .writer import GroupCommit

__all__ = ["ERASE_STEP", "Gone", "erase_entries", "finish_erases"]

ERASE_STEP: Final = 2048  # records a purge erases between two pauses (~8 µs each in place)


def erase_entries(
    blk: Block, entries: Sequence[int], rd: BlockReader, w: GroupCommit, make_durable: Callable[[], None]
) -> int:
    """Overwrite the records of ``blk``'s entries ``entries`` (ascending) with erased records.
    ``make_durable()`` flushes and syncs the store (a framed file's rewrite needs all that was
    flushed to be durable first). Returns how many were erased (a damaged record is left as it
    is). Raises ErrStoreIO, ErrCorrupt."""
    if not entries:
        return 0
    offs = blk.offs
    a = offs[entries[0]]
    last = entries[-1]
    # (removed entries' sizes are 0 in the index: the next record, or the block's end, bounds it)
    b = offs[last + 1] if last + 1 < len(offs) and offs[last + 1] > offs[last] else blk.size
    span = rd.span(blk, a, b)
    patches: list[tuple[int, bytes]] = []
    for i in entries:
        off = offs[i]
        fields = peek_header(span, off - a)
        if fields is None:
            continue
        rec_len, flags, seq, ts, sl, hl = fields
        if seq != blk.base + i or flags or off - a + rec_len > len(span):
            continue  # not the record the entry expects (damaged): nothing to erase
        patches.append((off, encode_erased(seq, ts, rec_len, sl, hl)))
    if not patches:
        return 0
    if blk.frames is not None:
        make_durable()  # everything, these records too, is in frames and durable now
        w.rewrite_frames(blk, patches, blk.frames.packed, rd.span)
        return len(patches)
    flushed = blk.flushed
    runs: list[tuple[int, bytearray]] = []
    for off, data in patches:
        if off >= flushed:  # still in the write buffer
            w.overwrite(blk, off, data)
        elif runs and runs[-1][0] + len(runs[-1][1]) == off:
            runs[-1][1].extend(data)
        else:
            runs.append((off, bytearray(data)))
    for off, run in runs:
        w.overwrite(blk, off, bytes(run))
    return len(patches)


def finish_erases(superseded: Sequence[tuple[Block, int, int]]) -> None:
    """Destroy the frames (``(block, file offset, size)``) that an erase's rewrite replaced and
    a crash kept from being destroyed (recovery found both copies, the newer wins)."""
    for blk, pos, size in superseded:
        assert blk.frames is not None
        try:
            fd = os.open(blk.path, os.O_RDWR)
        except OSError:
            return  # read-only media
        try:
            blk.frames.destroy(fd, pos, size)
            os.fdatasync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


class Gone:
    """What a purge removes from blocks that may stay, erased once it is done (a block removed
    whole is unlinked: nothing of it is left in a store file)."""

    __slots__ = ("_by_block", "_ix")

    def __init__(self, ix: StoreIndex) -> None:
        self._ix = ix
        self._by_block: dict[Block, list[int]] = {}

    def one(self, seq: int) -> None:
        """``seq`` is about to be removed."""
        blk = self._ix.block_for(seq)
        if blk is not None and blk.sids[seq - blk.base] != NO_SID:
            self._by_block.setdefault(blk, []).append(seq - blk.base)

    def below(self, seq: int) -> None:
        """Everything below ``seq`` is about to go: note the live entries of the blocks that may
        stay (the one holding ``seq - 1``, and the active one)."""
        ix = self._ix
        for blk in {ix.block_for(seq - 1), ix.active}:
            if blk is None or not blk.live:
                continue
            sids = blk.sids
            stop = min(seq - blk.base, len(sids))
            self._by_block.setdefault(blk, []).extend(i for i in range(max(stop, 0)) if sids[i] != NO_SID)

    def erase_steps(self, rd: BlockReader, w: GroupCommit, make_durable: Callable[[], None]) -> Steps:
        """Erase what was noted, yielding after every :data:`ERASE_STEP` records (a filtered
        purge of a large stream erases hundreds of thousands in place). Between steps a block
        may have been removed whole (nothing left to erase) or put in another form (each step
        reads and writes it as it is then). Returns how many were erased."""
        erased = 0
        by_block, self._by_block = self._by_block, {}
        for blk, noted in by_block.items():
            entries = sorted(set(noted))
            for at in range(0, len(entries), ERASE_STEP):
                if self._ix.position(blk) < 0:
                    break
                erased += erase_entries(blk, entries[at : at + ERASE_STEP], rd, w, make_durable)
                yield
        return erased
