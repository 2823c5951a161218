"""Rebuilding a file store's index from its block files on open, checked against its tail record.

Owns: the open-time scan — read every ``*.blk``, validate every record, re-synchronise past
damaged ones, truncate a torn tail of the newest block, apply tombstones and the durable floor,
check the blocks against the tail record (``tail.py``) and the headers against what is possible,
and work out exactly which sequences were lost, with a line saying why for each thing found
wrong (``Recovered.notes``). There is no index file to trust or to go stale: the blocks are the
only truth for what is stored, and the tail record for where the stream must end.
Must not know: limits, the write path, group commit, consumers.

Rules (see record.py and tail.py for the formats):

* ``last_seq`` = max(the tail record's hwm, highest seq of any valid record or range
  tombstone, newest block's base - 1, every possible header's hwm). Nothing is acknowledged
  before the tail record covers it, so a deleted, emptied or cut-short newest block, or a
  deleted ``msgs/``, never makes an acknowledged sequence reusable: its sequences are lost.
* ``floor`` = max(the tail record's floor, every header's floor): every seq below it is
  deleted, whatever records say. Without a tail record and with no readable header at all,
  the oldest block's base (nothing below it can be proven lost).
* A header that cannot have been written (floor above hwm + 1 or above the stream's end, an
  hwm at or past the next block's base, above the tail record's for a block sealed before it,
  or beyond what the newest block can hold) and a block without a valid header slot (unless it
  is the newest and younger than the tail record: a creation a crash cut short) raise
  ``ErrCorrupt``: the store does not open on a guess, and nothing is modified.
* A seq in ``[floor, last_seq]`` is *accounted for* when a valid message record (live or erased)
  or a tombstone (single or range) names it. Every other seq in that window is **lost** (a
  corrupt record, a truncated tail, a missing block file) and is reported in ``lost`` — never
  silently dropped, never reused. A write that failed and was rolled back is not lost: it was
  never acknowledged, and a range tombstone accounts for its sequences.
* Inside one block, message sequences are consecutive from its base by construction, so a jump
  after a damaged region is believed only if the damaged bytes could have held the skipped
  records; anything else (a duplicate, an older seq, an absurd jump) is ignored as bogus.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from .base import ErrCorrupt
from .crypto import StoreKeys
from .fileio import pread_all
from .frames import is_framed, parse_framed
from .record import (
    BLOCK_HEADER_SIZE,
    FLAG_ERASED,
    FLAG_RANGE,
    FLAG_TOMBSTONE,
    RECORD_OVERHEAD,
    BlockHeader,
    check_record,
    decode_block_header,
    find_next_record,
    header_offset,
    index_parts,
    range_end,
    record_headers,
)
from .segment import NO_SID, Block, SubjectInfo, block_name, list_blocks
from .tail import Tail
from .ttl import H_TTL, msg_ttl

__all__ = ["MAX_LOST_REPORTED", "Recovered", "read_tombstones", "recover"]

_MISSING: Final = 0xFFFFFFFE  # scan-time marker: no record seen for this seq (yet)

CAPACITY_BYTES: Final = 8 * 1024 * 1024
"""Bytes a block is taken to hold at most when judging whether its header's high-water mark is
possible (the store's own block size if larger): the default block size."""

# A lost list longer than this is cut short: whatever the damage, recovery must not allocate
# billions of ints (a header claiming an absurd hwm is refused before that, see ``_bounds``).
MAX_LOST_REPORTED: Final = 1 << 20


@dataclass
class Recovered:
    blocks: list[Block]
    subjects: dict[str, SubjectInfo]
    by_sid: list[SubjectInfo | None]
    last_seq: int
    last_ts: int
    floor: int
    first_seq: int
    msgs: int
    bytes: int
    lost: list[int] = field(default_factory=list)
    lost_bytes: int = 0
    # (seq, ts, ttl ns) of messages whose headers give them a TTL (ttl.msg_ttl); some may be
    # deleted by tombstones: the store keeps the live ones
    ttls: list[tuple[int, int, int]] = field(default_factory=list)
    # what the scan found wrong and what was made of it, one line each (the store's log):
    # damaged or short block files (the offline checker reports those record by record), then
    # everything else (missing or cut-short blocks against the tail record, headers ahead of
    # their records)
    damaged: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # framed blocks: (block, file offset, size) of frames a newer copy replaced (an erase a
    # crash interrupted): the store destroys them once open
    superseded: list[tuple[Block, int, int]] = field(default_factory=list)
    # blocks whose file is not sealed with the current key (plaintext while there is a key, or
    # written with the previous key): the store rewrites them once open
    rekey: list[Block] = field(default_factory=list)


def _scan_block(
    blk: Block,
    data: bytes,
    sid_of: dict[bytes, int],
    singles: list[int],
    ranges: list[tuple[int, int]],
    ttls: list[tuple[int, int, int]] | None = None,
) -> tuple[int, int, int, int | None]:
    """Index one block's records. Returns (max seq seen, its ts, bad bytes, torn-tail offset)."""
    size = len(data)
    offs, lens, sids = blk.offs, blk.lens, blk.sids
    expected = blk.base
    pos = BLOCK_HEADER_SIZE
    good_end = pos
    max_seq = -1
    max_ts = 0
    bad = 0
    tail: int | None = None
    while pos < size:
        v = check_record(data, pos, size)
        if v is None:
            nxt = find_next_record(data, pos, size)
            stop = size if nxt is None else nxt
            bad += stop - pos
            if nxt is None:
                tail = pos
                break
            pos = nxt
            continue
        rec_len, flags, seq, ts, sl, hl = v
        if flags & FLAG_TOMBSTONE:
            blk.tombs += 1
            if flags & FLAG_RANGE:
                end = range_end(data, pos)
                ranges.append((seq, end))
                seq = end
            else:
                singles.append(seq)
            if seq > max_seq:
                max_seq, max_ts = seq, 0
        else:
            gap = seq - expected
            if 0 <= gap <= (pos - good_end) // RECORD_OVERHEAD:
                if gap:
                    sids.extend([_MISSING] * gap)
                    offs.extend([0] * gap)
                    lens.extend([0] * gap)
                offs.append(pos)
                if flags & FLAG_ERASED:
                    lens.append(0)
                    sids.append(NO_SID)
                else:
                    subj, acct = index_parts(data, pos, rec_len, sl, hl)
                    sid = sid_of.get(subj)
                    if sid is None:
                        sid = sid_of[subj] = len(sid_of)
                    lens.append(acct)
                    sids.append(sid)
                    if hl and ttls is not None:  # a TTL lives in the message's own headers
                        hdr = record_headers(data, pos, sl, hl)
                        if H_TTL in hdr:
                            try:
                                ttl = msg_ttl(hdr)
                            except ValueError:
                                ttl = 0
                            if ttl:
                                ttls.append((seq, ts, ttl))
                expected = seq + 1
                if seq >= max_seq:
                    max_seq, max_ts = seq, ts
        pos += rec_len
        good_end = pos
    blk.size = blk.flushed = blk.durable = size if tail is None else tail
    return max_seq, max_ts, bad, tail


def read_tombstones(data: bytes, singles: list[int], ranges: list[tuple[int, int]]) -> None:
    """Collect the tombstones of one block file's bytes (used before deleting a middle block)."""
    pos = BLOCK_HEADER_SIZE
    size = len(data)
    while pos < size:
        v = check_record(data, pos, size)
        if v is None:
            nxt = find_next_record(data, pos, size)
            if nxt is None:
                return
            pos = nxt
            continue
        rec_len, flags, seq = v[0], v[1], v[2]
        if flags & FLAG_TOMBSTONE:
            if flags & FLAG_RANGE:
                ranges.append((seq, range_end(data, pos)))
            else:
                singles.append(seq)
        pos += rec_len


def _read_and_fsync(path: Path, sync: bool = True) -> bytes:
    """A block's bytes, after making them durable (``sync``): whatever a crashed process left in
    the page cache is treated as stored from now on, so it must not vanish at the next power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if sync:
            os.fsync(fd)
        return pread_all(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _truncate(path: Path, size: int) -> None:
    try:
        os.truncate(path, size)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass  # read-only media: appends will overwrite from ``size`` anyway


def _block_of(blocks: list[Block], bases: list[int], seq: int) -> Block | None:
    i = bisect_right(bases, seq) - 1
    if i < 0:
        return None
    blk = blocks[i]
    return blk if seq < blk.end_seq else None


def recover(
    msgdir: Path,
    fresh_first_seq: int,
    tail: Tail | None = None,
    block_size: int = 0,
    read_only: bool = False,
    keys: StoreKeys | None = None,
    context: str = "",
) -> Recovered:
    """Scan ``msgdir`` and rebuild the store's in-memory state (see the module rules), checked
    against the store's tail record if it has one. Raises ``ErrCorrupt`` when a block's header
    is damaged or impossible (the stream must not be served from guesses), OSError when a block
    cannot be read, ``ErrEncryptionKey`` when a framed block was written with another key than
    ``keys`` (before anything is truncated). Framed blocks (frames.py) are scanned as their
    logical bytes; ``context`` is their key context (crypto.py). ``read_only`` (the offline
    checker): nothing is synced or truncated."""
    found = list_blocks(msgdir) if msgdir.is_dir() else []
    blocks: list[Block] = []
    headers: list[tuple[Block, BlockHeader]] = []
    headerless: list[Block] = []  # at least a header's worth of bytes, but no valid slot
    sid_of: dict[bytes, int] = {}
    singles: list[int] = []
    ranges: list[tuple[int, int]] = []
    notes: list[str] = []
    damaged: list[str] = []
    bad_bytes = 0
    max_seq = -1
    max_seq_ts = 0
    ttls: list[tuple[int, int, int]] = []
    cut: tuple[Path, int] | None = None  # the newest block's torn tail, cut once all is checked
    superseded: list[tuple[Block, int, int]] = []
    rekey: list[Block] = []
    for n, (base, path) in enumerate(found):
        data = _read_and_fsync(path, not read_only)
        blk = Block(path, base)
        framed_cut: int | None = None
        if is_framed(data[:80]):
            try:
                parsed = parse_framed(data, base, keys, context, path.name)
            except ErrCorrupt:
                if n < len(found) - 1 or (tail is not None and base <= tail.block):
                    raise
                # the newest block, younger than the tail record: a creation a crash cut short
                notes.append(f"{path.name}: a new block whose key header never reached the disk")
                if not read_only:
                    _truncate(path, 0)  # nothing was ever stored in it: it starts again, plain
                blk.size = blk.flushed = blk.durable = 0
                blocks.append(blk)
                if keys is not None:
                    rekey.append(blk)
                continue
            blk.frames = parsed.table
            blk.pdurable = parsed.table.end
            framed_cut = parsed.cut
            data = bytes(parsed.data)
            damaged.extend(parsed.notes)
            for pos, length, why in parsed.bad:
                what = "torn tail" if pos == parsed.cut else "damaged frame"
                damaged.append(f"{path.name}: {what} at offset {pos} ({length} bytes): {why}")
            superseded.extend((blk, pos, size) for pos, size in parsed.superseded)
            if keys is not None and (parsed.table.fc is None or parsed.table.fc.stale):
                rekey.append(blk)
        elif keys is not None:
            rekey.append(blk)
        hdr = decode_block_header(data[:BLOCK_HEADER_SIZE], base)
        if hdr is not None:
            headers.append((blk, hdr))
            blk.hdr_gen = hdr.gen
        elif len(data) >= BLOCK_HEADER_SIZE:
            headerless.append(blk)
        if len(data) < BLOCK_HEADER_SIZE:
            notes.append(
                f"{path.name} is {len(data)} bytes, shorter than its {BLOCK_HEADER_SIZE}-byte header"
            )
            blk.size = blk.flushed = blk.durable = len(data)
            blocks.append(blk)
            continue
        bmax, bts, bad, torn = _scan_block(blk, data, sid_of, singles, ranges, ttls)
        if blk.frames is not None:  # frames hold whole records: the file's end is the frames'
            blk.size = blk.flushed = blk.durable = len(data)
            torn = framed_cut
        bad_bytes += bad
        if bad:
            where = (
                f"a torn tail at offset {torn}"
                if torn is not None and bad == len(data) - torn
                else "damaged records"
            )
            damaged.append(f"{path.name}: {bad} bytes of {where} could not be read")
        if bmax > max_seq:
            max_seq, max_seq_ts = bmax, bts
        if torn is not None and n == len(found) - 1:
            cut = (path, torn)
        blocks.append(blk)

    evidence = max(max_seq, blocks[-1].base - 1) if blocks else -1
    if tail is not None or blocks:
        capacity = max(block_size, CAPACITY_BYTES) // RECORD_OVERHEAD + 1
        last_seq, floor = _bounds(tail, blocks, headers, headerless, evidence, capacity, notes)
    else:  # a new store
        last_seq = max(fresh_first_seq, 1) - 1
        floor = last_seq + 1
    if (
        cut is not None and not read_only
    ):  # a torn tail of the newest block: cut it so appends continue from valid data
        _truncate(*cut)
    last_ts = 0
    if max_seq == last_seq:
        last_ts = max_seq_ts
    if not last_ts and tail is not None and tail.hwm == last_seq:
        last_ts = tail.last_ts
    if not last_ts:
        last_ts = max((h.last_ts for _b, h in headers if h.hwm == last_seq), default=0)
    bases = [b.base for b in blocks]

    # Tombstones: single ones delete (or account for) their seq; ranges only account for gaps.
    extra_cover: set[int] = set()
    for t in singles:
        blk_t = _block_of(blocks, bases, t)
        if blk_t is None:
            extra_cover.add(t)
            continue
        i = t - blk_t.base
        blk_t.sids[i] = NO_SID
        blk_t.lens[i] = 0
    for a, b in ranges:
        for j in range(max(bisect_right(bases, a) - 1, 0), len(blocks)):
            blk = blocks[j]
            if blk.base > b:
                break
            lo, hi = max(a, blk.base), min(b, blk.end_seq - 1)
            for s in range(lo, hi + 1):
                if blk.sids[s - blk.base] == _MISSING:
                    blk.sids[s - blk.base] = NO_SID

    # The durable floor: everything below it is gone, records or not.
    for blk in blocks:
        k = min(floor - blk.base, len(blk.sids))
        if k > 0:
            blk.sids[:k] = array("I", [NO_SID]) * k
            blk.lens[:k] = array("I", [0]) * k

    # Lost: unaccounted seqs inside blocks, then gaps between/after blocks not covered by ranges.
    lost: list[int] = []

    def add_lost(seq: int) -> None:
        if len(lost) < MAX_LOST_REPORTED:
            lost.append(seq)

    covered = sorted(ranges)
    lo_bound = max(floor, 1)
    cursor = lo_bound
    for nb in [*blocks, None]:
        gap_end = (nb.base - 1) if nb is not None else last_seq
        if gap_end >= cursor:
            gone = _uncovered(cursor, gap_end, covered, extra_cover)
            for s in gone:
                add_lost(s)
            if gone and nb is not None:
                notes.append(f"no block file holds sequences {gone[0]}-{gone[-1]}")
        if nb is None:
            break
        blk = nb
        sids = blk.sids
        if _MISSING in sids:
            for i, sid in enumerate(sids):
                if sid == _MISSING:
                    sids[i] = NO_SID
                    if blk.base + i >= lo_bound:
                        add_lost(blk.base + i)
        cursor = max(cursor, blk.end_seq)
    lost.sort()

    # Subjects and counters from the surviving index.
    names = [b.decode("utf-8", "surrogateescape") for b in sid_of]
    encs = list(sid_of)
    counts: Counter[int] = Counter()
    for blk in blocks:
        c = Counter(blk.sids)
        c.pop(NO_SID, None)
        counts.update(c)
        blk.live = len(blk.sids) - blk.sids.count(NO_SID)
    by_sid: list[SubjectInfo | None] = [None] * len(names)
    subjects: dict[str, SubjectInfo] = {}
    first_seq = last_seq + 1
    msgs = 0
    total_bytes = 0
    for blk in blocks:
        msgs += blk.live
        total_bytes += sum(blk.lens)
    need = set(counts)
    for blk in blocks:  # first occurrence of every subject, and the stream's first seq
        if not need and first_seq <= last_seq:
            break
        for i, sid in enumerate(blk.sids):
            if sid == NO_SID:
                continue
            if first_seq > last_seq:
                first_seq = blk.base + i
            if sid in need:
                need.discard(sid)
                info = SubjectInfo(names[sid], encs[sid], sid, blk.base + i)
                info.count = counts[sid]
                by_sid[sid] = info
                subjects[info.name] = info
            if not need:
                break
    need = set(counts)
    for blk in reversed(blocks):  # last occurrence of every subject
        if not need:
            break
        sids = blk.sids
        for i in range(len(sids) - 1, -1, -1):
            sid = sids[i]
            if sid in need:
                need.discard(sid)
                info_l = by_sid[sid]
                assert info_l is not None
                info_l.last = blk.base + i
                if not need:
                    break
    if msgs == 0:
        first_seq = last_seq + 1
    return Recovered(
        blocks=blocks,
        subjects=subjects,
        by_sid=by_sid,
        last_seq=last_seq,
        last_ts=last_ts,
        floor=floor,
        first_seq=first_seq,
        msgs=msgs,
        bytes=total_bytes,
        lost=lost,
        lost_bytes=bad_bytes,
        ttls=ttls,
        damaged=damaged,
        notes=notes,
        superseded=superseded,
        rekey=rekey,
    )


def _bounds(
    tail: Tail | None,
    blocks: list[Block],
    headers: list[tuple[Block, BlockHeader]],
    headerless: list[Block],
    evidence: int,
    capacity: int,
    notes: list[str],
) -> tuple[int, int]:
    """``(last_seq, floor)`` from the records' ``evidence`` (the highest sequence a record names,
    or the newest block's base - 1), the tail record and the block headers, after checking
    every header is possible (else ``ErrCorrupt``):

    * ``floor <= hwm + 1`` (a stream's first sequence is at most one past its last);
    * a block that is not the newest has ``hwm`` below the next block's base (it was sealed
      before that block was started), and if it is older than the tail record's block, at most
      the tail record's ``hwm`` (its header was on disk when the tail record was written);
    * the newest block's ``hwm`` is within what the block could ever hold (``capacity``
      sequences from its base): it may be above the records, after a crash cut short a commit
      whose header reached the disk before its records, but never by more than that;
    * a block without a valid header slot is damage, unless it is the newest and younger than
      the tail record (created by a commit that a crash cut short).
    """
    bases = {b.base: i for i, b in enumerate(blocks)}
    newest = blocks[-1] if blocks else None
    last_seq = max(evidence, tail.hwm if tail is not None else -1)
    floor = tail.floor if tail is not None else 0
    for blk, hdr in headers:
        name = blk.path.name
        at = header_offset(hdr)
        i = bases[blk.base]
        if hdr.floor > hdr.hwm + 1:
            raise ErrCorrupt(
                f"{name} at offset {at}: impossible header: floor {hdr.floor} above hwm {hdr.hwm} + 1"
            )
        if blk is not newest:
            bound, why = blocks[i + 1].base - 1, f"the next block starts at {blocks[i + 1].base}"
            if tail is not None and blk.base < tail.block and tail.hwm < bound:
                bound, why = tail.hwm, f"the tail record says {tail.hwm}"
        else:
            bound, why = blk.base - 1 + capacity, f"the block holds at most {capacity} sequences"
        if hdr.hwm > bound:
            raise ErrCorrupt(f"{name} at offset {at}: impossible header: hwm {hdr.hwm}, but {why}")
        if hdr.hwm > last_seq:
            notes.append(
                f"{name}: header says sequences up to {hdr.hwm} were stored, the records end at {evidence}"
            )
            last_seq = hdr.hwm
        floor = max(floor, hdr.floor)
    for blk in headerless:
        if blk is not newest or (tail is not None and blk.base <= tail.block):
            raise ErrCorrupt(f"{blk.path.name} at offset 0: no valid header slot (both fail their checksum)")
    if tail is None and blocks and not headers:
        floor = blocks[0].base  # no evidence of anything below the oldest block
    for blk, hdr in headers:
        if hdr.floor > last_seq + 1:
            raise ErrCorrupt(
                f"{blk.path.name} at offset {header_offset(hdr)}: impossible header: floor {hdr.floor}"
                f" above the last sequence {last_seq} + 1"
            )
    if tail is not None and tail.hwm >= floor:  # (else everything it knew of is deleted)
        held = next((b for b in blocks if b.base == tail.block), None)
        if held is None:
            if tail.size > BLOCK_HEADER_SIZE or tail.hwm >= tail.block:
                what = "msgs/ holds no block files" if not blocks else f"{block_name(tail.block)} is missing"
                notes.append(
                    f"{what}; the tail record says it held {tail.size} bytes, up to sequence {tail.hwm}"
                )
        elif held.size < tail.size:
            notes.append(
                f"{held.path.name} holds {held.size} valid bytes, {tail.size - held.size} fewer than the tail record"
                " says: what they held (messages, deletions) is gone"
            )
    return last_seq, floor


def _uncovered(lo: int, hi: int, ranges: list[tuple[int, int]], singles: set[int]) -> list[int]:
    """Seqs in ``[lo, hi]`` named by neither a range tombstone nor a single tombstone."""
    out: list[int] = []
    s = lo
    for a, b in ranges:
        if b < s:
            continue
        if a > hi:
            break
        out.extend(x for x in range(s, min(a, hi + 1)) if x not in singles)
        s = max(s, b + 1)
        if len(out) > MAX_LOST_REPORTED or s > hi:
            break
    if s <= hi and len(out) <= MAX_LOST_REPORTED:
        out.extend(x for x in range(s, min(hi + 1, s + MAX_LOST_REPORTED + 1)) if x not in singles)
    return out
