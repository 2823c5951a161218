"""Rebuilding a file store's index from its block files on open.

Owns: the open-time scan — read every ``*.blk``, validate every record, re-synchronise past
damaged ones, truncate a torn tail of the newest block, apply tombstones and the durable floor,
and work out exactly which sequences were lost. There is no index file to trust or to go stale:
the blocks are the only truth and this scan derives everything else.
Must not know: limits, the write path, group commit, consumers.

Rules (see record.py for the formats):

* ``last_seq`` = max(header hwm of every block, highest seq of any valid record, newest
  block's base - 1). Records are only acknowledged after a sync that also made the header's hwm
  durable, so a torn or truncated tail can never make an acknowledged sequence reusable.
* ``floor`` = max(header floor): every seq below it is deleted, whatever records say. With no
  readable header at all, the oldest block's base (nothing below it can be proven lost).
* A seq in ``[floor, last_seq]`` is *accounted for* when a valid message record (live or erased)
  or a tombstone (single or range) names it. Every other seq in that window is **lost** (a
  corrupt record, a truncated tail, a missing block file, a write that was rolled back) and is
  reported in ``lost`` — never silently dropped, never reused.
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

from .record import (
    BLOCK_HEADER_SIZE,
    FLAG_ERASED,
    FLAG_RANGE,
    FLAG_TOMBSTONE,
    RECORD_OVERHEAD,
    check_record,
    decode_block_header,
    find_next_record,
    index_parts,
    range_end,
    record_headers,
)
from .segment import NO_SID, Block, SubjectInfo, list_blocks
from .ttl import H_TTL, msg_ttl

__all__ = ["MAX_LOST_REPORTED", "Recovered", "read_tombstones", "recover"]

_MISSING: Final = 0xFFFFFFFE  # scan-time marker: no record seen for this seq (yet)

# A lost list longer than this is cut short (the count stays exact in ``lost_count``): a damaged
# header claiming an absurd hwm must not make recovery allocate billions of ints.
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


def _read_and_fsync(path: Path) -> bytes:
    """A block's bytes, after making them durable: whatever a crashed process left in the page
    cache is treated as stored from now on, so it must not vanish at the next power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        size = os.fstat(fd).st_size
        chunks = []
        done = 0
        while done < size:
            chunk = os.pread(fd, size - done, done)
            if not chunk:
                break
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _block_of(blocks: list[Block], bases: list[int], seq: int) -> Block | None:
    i = bisect_right(bases, seq) - 1
    if i < 0:
        return None
    blk = blocks[i]
    return blk if seq < blk.end_seq else None


def recover(msgdir: Path, fresh_first_seq: int) -> Recovered:
    """Scan ``msgdir`` and rebuild the store's in-memory state (see the module rules)."""
    found = list_blocks(msgdir)
    blocks: list[Block] = []
    sid_of: dict[bytes, int] = {}
    singles: list[int] = []
    ranges: list[tuple[int, int]] = []
    hwm = 0
    floor = 0
    last_ts = 0
    hwm_ts = 0
    bad_bytes = 0
    max_seq = -1
    any_header = False
    ttls: list[tuple[int, int, int]] = []
    for n, (base, path) in enumerate(found):
        data = _read_and_fsync(path)
        blk = Block(path, base)
        hdr = decode_block_header(data[:BLOCK_HEADER_SIZE], base)
        if hdr is not None:
            any_header = True
            if hdr.hwm >= hwm:
                hwm, hwm_ts = hdr.hwm, hdr.last_ts
            floor = max(floor, hdr.floor)
            blk.hdr_gen = hdr.gen
        if len(data) < BLOCK_HEADER_SIZE:
            blk.size = blk.flushed = blk.durable = len(data)
            blocks.append(blk)
            continue
        bmax, bts, bad, tail = _scan_block(blk, data, sid_of, singles, ranges, ttls)
        bad_bytes += bad
        if bmax > max_seq:
            max_seq, last_ts = bmax, bts
        if tail is not None and n == len(found) - 1:
            # A torn tail of the newest block: cut it so appends continue from valid data.
            try:
                os.truncate(path, tail)
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError:
                pass  # read-only media: appends will overwrite from ``tail`` anyway
        blocks.append(blk)

    if blocks and not any_header:
        floor = blocks[0].base  # no evidence of anything below the oldest block
    last_seq = max(hwm, max_seq, blocks[-1].base - 1) if blocks else max(fresh_first_seq, 1) - 1
    if hwm > max_seq or (hwm == max_seq and not last_ts):
        last_ts = hwm_ts
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
            for s in _uncovered(cursor, gap_end, covered, extra_cover):
                add_lost(s)
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
    )


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
