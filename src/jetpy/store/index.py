"""The file store's in-memory index: which sequence is where, under which subject, and alive.

Owns: the blocks' list (oldest first; the newest, ``active``, takes the appends) and their bases,
the subject table (interned subjects whose ids are reused once released, with a generation for
the wildcard match cache), the stream's counters (messages, bytes, first/last sequence, last
timestamp, what was lost), every walk and count over the blocks' sid columns, the queries of
the ``StreamStore`` protocol that need nothing but these, and the bookkeeping of removing
entries: one, every one below a sequence, all of them, or every one above the durable sequence
after a rollback.
Must not know: files, descriptors, record bytes, the write buffer, durability, limits or TTLs.

The append path (``FileStore.store_msg``) adds an entry without a call: it appends to the active
block's three columns and bumps the block's ``live``, the subject's ``count``/``last`` and the
counters here. Recovery rebuilds what the index holds from the block files (``recovery.py``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterator
from typing import Final

from jetpy.subjects import is_literal, subject_matches
from jetpy.subjects import matches_all as is_all

from .base import SimpleState
from .recovery import Recovered
from .segment import NO_SID, Block, SubjectInfo

__all__ = ["StoreIndex"]

_SMALL_MATCH: Final = 8
"""Up to this many subjects match a filter: search each subject's column with ``array.index``
(C speed); beyond it, one Python pass over the sequences is cheaper."""

_MATCH_CACHE_SIZE: Final = 64  # distinct wildcard filters remembered (consumers reuse theirs)


class StoreIndex:
    """The index of one file store; see the module docstring. The lists and the subject table
    are never replaced, only changed in place, so users may keep references to them."""

    __slots__ = (
        "active",
        "bases",
        "blocks",
        "by_sid",
        "bytes",
        "first_seq",
        "free_sids",
        "last_seq",
        "last_ts",
        "lost",
        "lost_bytes",
        "match_cache",
        "msgs",
        "subj_gen",
        "subjects",
    )

    def __init__(self, rec: Recovered) -> None:
        """Take over what recovery rebuilt; ``rec.blocks`` must not be empty."""
        self.blocks: Final = rec.blocks
        self.bases: Final = [b.base for b in rec.blocks]
        self.active = rec.blocks[-1]
        self.subjects: Final = rec.subjects
        self.by_sid: Final = rec.by_sid
        self.free_sids: Final = [i for i, s in enumerate(rec.by_sid) if s is None]
        self.subj_gen = 0
        self.match_cache: Final[dict[str, tuple[int, list[SubjectInfo]]]] = {}
        self.msgs = rec.msgs
        self.bytes = rec.bytes
        self.first_seq = rec.first_seq
        self.last_seq = rec.last_seq
        self.last_ts = rec.last_ts
        self.lost: Final = rec.lost
        self.lost_bytes = rec.lost_bytes

    # ------------------------------------------------------------------ blocks

    def add_block(self, blk: Block) -> None:
        """Append a new newest block (its base above every sequence handed out); it becomes active."""
        self.blocks.append(blk)
        self.bases.append(blk.base)
        self.active = blk

    def position(self, blk: Block) -> int:
        """Where ``blk`` is in ``blocks``, -1 if it is not there."""
        k = bisect_left(self.bases, blk.base)
        return k if k < len(self.blocks) and self.blocks[k] is blk else -1

    def forget_block(self, k: int) -> None:
        del self.blocks[k]
        del self.bases[k]

    def block_for(self, seq: int) -> Block | None:
        """The block whose index covers ``seq`` (live or not), or None."""
        a = self.active
        if seq >= a.base:
            return a if seq - a.base < len(a.sids) else None
        k = bisect_right(self.bases, seq) - 1
        if k < 0:
            return None
        blk = self.blocks[k]
        return blk if seq - blk.base < len(blk.sids) else None

    def live(self, seq: int) -> bool:
        blk = self.block_for(seq)
        return blk is not None and blk.sids[seq - blk.base] != NO_SID

    def size_of(self, seq: int) -> int:
        """The accounted size of message ``seq`` (0 if the index does not cover it)."""
        blk = self.block_for(seq)
        return blk.lens[seq - blk.base] if blk is not None else 0

    def head(self) -> tuple[int, int]:
        """``(first seq, last seq)``: the first is past the last exactly when there are no messages."""
        return self.first_seq, self.last_seq

    # ------------------------------------------------------------------ the subject table

    def new_subject(self, name: str, enc: bytes, seq: int) -> SubjectInfo:
        if self.free_sids:
            sid = self.free_sids.pop()
        else:
            sid = len(self.by_sid)
            self.by_sid.append(None)
        info = SubjectInfo(name, enc, sid, seq)
        self.by_sid[sid] = info
        self.subjects[name] = info
        self.subj_gen += 1
        return info

    def release_subject(self, info: SubjectInfo) -> None:
        del self.subjects[info.name]
        self.by_sid[info.sid] = None
        self.free_sids.append(info.sid)
        self.subj_gen += 1

    def subject_of(self, seq: int) -> tuple[str, int]:
        """The subject of live message ``seq`` and how many live messages it has."""
        blk = self.block_for(seq)
        assert blk is not None
        info = self.by_sid[blk.sids[seq - blk.base]]
        assert info is not None
        return info.name, info.count

    def matching(self, filter_subject: str) -> list[SubjectInfo]:
        if is_all(filter_subject):
            return list(self.subjects.values())
        if is_literal(filter_subject):
            info = self.subjects.get(filter_subject)
            return [info] if info is not None else []
        cached = self.match_cache.get(filter_subject)
        if cached is not None and cached[0] == self.subj_gen:
            return cached[1]
        res = [info for name, info in self.subjects.items() if subject_matches(filter_subject, name)]
        if len(self.match_cache) >= _MATCH_CACHE_SIZE:
            self.match_cache.clear()
        self.match_cache[filter_subject] = (self.subj_gen, res)
        return res

    # ------------------------------------------------------------------ walks

    def next_live(self, start: int) -> tuple[Block, int] | None:
        blocks = self.blocks
        for j in range(max(bisect_right(self.bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            if not blk.live:
                continue
            sids = blk.sids
            i = start - blk.base if start > blk.base else 0
            n = len(sids)
            while i < n:
                if sids[i] != NO_SID:
                    return blk, i
                i += 1
        return None

    def next_live_seq(self, start: int) -> int:
        r = self.next_live(start)
        return r[0].base + r[1] if r is not None else self.last_seq + 1

    def prev_live(self, seq: int) -> tuple[Block, int] | None:
        blocks = self.blocks
        for j in range(bisect_right(self.bases, seq) - 1, -1, -1):
            blk = blocks[j]
            if not blk.live:
                continue
            sids = blk.sids
            i = min(seq - blk.base, len(sids) - 1)
            while i >= 0:
                if sids[i] != NO_SID:
                    return blk, i
                i -= 1
        return None

    def next_of_sid(self, sid: int, start: int, limit: int | None = None) -> int:
        """First seq >= start carrying subject ``sid`` (at most ``limit``), 0 if none."""
        blocks = self.blocks
        for j in range(max(bisect_right(self.bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            if limit is not None and blk.base > limit:
                break
            i0 = start - blk.base if start > blk.base else 0
            if i0 < len(blk.sids):
                try:
                    return blk.base + blk.sids.index(sid, i0)
                except ValueError:
                    pass
        return 0

    def prev_of_sid(self, sid: int, seq: int) -> int:
        """Last seq < ``seq`` carrying subject ``sid``, 0 if none."""
        end = seq - 1
        blocks = self.blocks
        for j in range(bisect_right(self.bases, end) - 1, -1, -1):
            blk = blocks[j]
            sids = blk.sids
            i = min(end - blk.base, len(sids) - 1)
            while i >= 0:
                if sids[i] == sid:
                    return blk.base + i
                i -= 1
        return 0

    def subj_first(self, info: SubjectInfo) -> int:
        """The subject's first live seq (``info.first`` is a lower bound; tighten it)."""
        f = info.first
        blk = self.block_for(f)
        if blk is not None and blk.sids[f - blk.base] == info.sid:
            return f
        f = self.next_of_sid(info.sid, f, info.last)
        info.first = f
        return f

    def next_match(self, infos: list[SubjectInfo], start: int) -> int:
        """First live seq >= start whose subject is one of ``infos``, 0 if none."""
        infos = [i for i in infos if i.last >= start]
        if not infos:
            return 0
        if len(infos) <= _SMALL_MATCH:
            best = 0
            for info in infos:
                f = self.subj_first(info)
                s = f if start <= f else self.next_of_sid(info.sid, start, info.last)
                if s and (not best or s < best):
                    best = s
            return best
        wanted = {i.sid for i in infos}
        blocks = self.blocks
        for j in range(max(bisect_right(self.bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            sids = blk.sids
            for i in range(start - blk.base if start > blk.base else 0, len(sids)):
                if sids[i] in wanted:
                    return blk.base + i
        return 0

    def matching_seqs(self, filter_subject: str, upper: int) -> Iterator[int]:
        """Live seqs <= upper whose subject matches, ascending, found as they are consumed (a
        block at a time): the caller may remove each one it is given, and blocks may go meanwhile."""
        infos = self.matching(filter_subject)
        if len(infos) == 1:
            info = infos[0]
            sid = info.sid
            s = self.subj_first(info)
            while s and s <= upper:
                yield s
                if self.by_sid[sid] is not info:  # it had no more messages (its id may be reused)
                    return
                s = self.next_of_sid(sid, s + 1, info.last)
            return
        wanted = {i.sid for i in infos}
        if not wanted:
            return
        for blk in list(self.blocks):
            if blk.base > upper:
                break
            base = blk.base
            sids = blk.sids
            yield from [base + i for i, sid in enumerate(sids[: upper - base + 1]) if sid in wanted]

    def nth_newest(self, keep: int) -> int:
        """The seq s such that exactly ``keep`` live messages are >= s."""
        remaining = keep
        for blk in reversed(self.blocks):
            if blk.live < remaining:
                remaining -= blk.live
                continue
            sids = blk.sids
            for i in range(len(sids) - 1, -1, -1):
                if sids[i] != NO_SID:
                    remaining -= 1
                    if remaining == 0:
                        return blk.base + i
        return self.first_seq

    def count_live_from(self, start: int) -> int:
        if start <= self.first_seq:
            return self.msgs
        total = 0
        blocks = self.blocks
        for j in range(max(bisect_right(self.bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            if start <= blk.base:
                total += blk.live
            elif start - blk.base < len(blk.sids):
                tail = blk.sids[start - blk.base :]
                total += len(tail) - tail.count(NO_SID)
        return total

    def count_subjects_from(self, infos: list[SubjectInfo], start: int) -> int:
        if start <= self.first_seq:
            return sum(i.count for i in infos)
        infos = [i for i in infos if i.last >= start]
        if not infos:
            return 0
        if len(infos) == 1 and start <= self.subj_first(infos[0]):
            return infos[0].count
        wanted = {i.sid for i in infos}
        limit = max(i.last for i in infos)
        total = 0
        blocks = self.blocks
        for j in range(max(bisect_right(self.bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            if blk.base > limit:
                break
            col = blk.sids[start - blk.base :] if start > blk.base else blk.sids
            if len(wanted) == 1:
                total += col.count(next(iter(wanted)))
            else:
                counts = Counter(col)
                total += sum(counts[s] for s in wanted)
        return total

    def deleted_list(self, first: int, last: int) -> list[int]:
        """Every seq in ``[first, last]`` without a live message, ascending."""
        out: list[int] = []
        cursor = first
        for blk in self.blocks:
            if blk.end_seq <= cursor:
                continue
            if blk.base > last:
                break
            if blk.base > cursor:
                out.extend(range(cursor, min(blk.base, last + 1)))
            sids = blk.sids
            lo = max(cursor - blk.base, 0)
            hi = min(last - blk.base + 1, len(sids))
            out.extend(blk.base + i for i in range(lo, hi) if sids[i] == NO_SID)
            cursor = blk.end_seq
        if cursor <= last:
            out.extend(range(cursor, last + 1))
        return out

    # ------------------------------------------------------------------ the protocol's index-only queries

    def filtered_state(self, start_seq: int, filter_subject: str) -> SimpleState:
        start = max(start_seq, self.first_seq)
        if not self.msgs or start > self.last_seq:
            return SimpleState()
        if is_all(filter_subject):
            count = self.count_live_from(start)
            r_first = self.next_live(start)
            r_last = self.prev_live(self.last_seq)
            if not count or r_first is None or r_last is None:
                return SimpleState()
            return SimpleState(count, r_first[0].base + r_first[1], r_last[0].base + r_last[1])
        infos = [i for i in self.matching(filter_subject) if i.last >= start]
        count = self.count_subjects_from(infos, start)
        if not count:
            return SimpleState()
        return SimpleState(count, self.next_match(infos, start), max(i.last for i in infos))

    def subjects_state(self, filter_subject: str) -> dict[str, int]:
        return {i.name: i.count for i in self.matching(filter_subject)}

    def num_pending(self, start_seq: int, filter_subject: str, last_per_subject: bool) -> int:
        if last_per_subject:
            return sum(1 for i in self.matching(filter_subject) if i.last >= start_seq)
        if not self.msgs or start_seq > self.last_seq:
            return 0
        if is_all(filter_subject):
            return self.count_live_from(start_seq)
        return self.count_subjects_from(self.matching(filter_subject), start_seq)

    # ------------------------------------------------------------------ removing entries

    def remove(self, blk: Block, i: int, seq: int) -> None:
        """Mark live entry ``i`` of ``blk`` (sequence ``seq``) deleted; a new first seq if it was."""
        sid = blk.sids[i]
        n = blk.lens[i]
        blk.sids[i] = NO_SID
        blk.lens[i] = 0
        blk.live -= 1
        self.msgs -= 1
        self.bytes -= n
        info = self.by_sid[sid]
        assert info is not None
        info.count -= 1
        if info.count == 0:
            self.release_subject(info)
        elif seq == info.last:
            info.last = self.prev_of_sid(sid, seq)
        elif info.count == 1:
            info.first = info.last
        elif seq == info.first:
            info.first = seq + 1
        if seq == self.first_seq:
            self.first_seq = self.next_live_seq(seq + 1) if self.msgs else self.last_seq + 1

    def remove_below(self, seq: int) -> int:
        """Delete every live entry below ``seq``; returns how many there were."""
        removed = 0
        for blk in self.blocks:
            if blk.base >= seq:
                break
            if not blk.live:
                continue
            k = min(seq - blk.base, len(blk.sids))
            counts = Counter(blk.sids[:k])
            counts.pop(NO_SID, None)
            nbytes = sum(blk.lens[:k])
            dead = sum(counts.values())
            blk.sids[:k] = _column(NO_SID, k)
            blk.lens[:k] = _column(0, k)
            blk.live -= dead
            self.msgs -= dead
            self.bytes -= nbytes
            removed += dead
            for sid, c in counts.items():
                info = self.by_sid[sid]
                assert info is not None
                info.count -= c
                if info.count == 0:
                    self.release_subject(info)
                elif info.first < seq:
                    info.first = seq
        self.first_seq = self.next_live_seq(seq) if self.msgs else self.last_seq + 1
        return removed

    def remove_all(self) -> int:
        """Delete every entry (of the active block: the caller drops the others first)."""
        n = self.msgs
        a = self.active
        a.sids = _column(NO_SID, len(a.sids))
        a.lens = _column(0, len(a.lens))
        a.live = 0
        self.subjects.clear()
        self.by_sid.clear()
        self.free_sids.clear()
        self.subj_gen += 1
        self.msgs = self.bytes = 0
        self.first_seq = self.last_seq + 1
        return n

    def forget_after(self, durable_seq: int) -> None:
        """Drop every entry above ``durable_seq``, live or not (a rollback). They are not lost:
        they were never acknowledged, and their publishers are told so."""
        affected: set[int] = set()
        by_sid = self.by_sid
        for blk in self.blocks:
            k = max(durable_seq + 1 - blk.base, 0)
            sids, lens = blk.sids, blk.lens
            for i in range(k, len(sids)):
                sid = sids[i]
                if sid == NO_SID:
                    continue
                info = by_sid[sid]
                assert info is not None
                info.count -= 1
                affected.add(sid)
                self.msgs -= 1
                self.bytes -= lens[i]
                blk.live -= 1
            del blk.offs[k:]
            del lens[k:]
            del sids[k:]
        for sid in affected:
            info = by_sid[sid]
            if info is None:
                continue
            if info.count == 0:
                self.release_subject(info)
            elif info.last > durable_seq:
                info.last = self.prev_of_sid(sid, durable_seq + 1)
        if self.msgs == 0:
            self.first_seq = self.last_seq + 1

    def keep_blocks(self, kept: list[Block]) -> None:
        """Replace the block list with ``kept`` (a rollback's survivors, oldest first)."""
        self.blocks[:] = kept
        self.bases[:] = [b.base for b in kept]
        self.active = kept[-1]


def _column(value: int, n: int) -> array[int]:
    """A column of ``n`` copies of ``value``."""
    return array("I", [value]) * n
