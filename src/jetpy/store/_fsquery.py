"""Read-side queries of the file store, over its in-memory index and block files.

Owns: the subject table (interned subjects and their ids), locating a sequence's block,
reading and verifying one record (``os.pread`` with a single
bounded read-ahead buffer), per-subject first/last maintenance, and every query of the
``StreamStore`` protocol (load_*, state, filtered_state, subjects_state, num_pending).
Must not know: the write buffer's flushing, group commit, rollback or recovery. It is a mixin
of ``FileStore`` and only reads the attributes declared below.
"""

from __future__ import annotations

import errno
import os
import zlib
from bisect import bisect_right
from collections import Counter
from typing import Final

from jetpy.subjects import is_literal, subject_matches
from jetpy.subjects import matches_all as is_all

from .base import (
    FILE_HDR_OVERHEAD,
    ErrCorrupt,
    ErrStoreClosed,
    ErrStoreIO,
    LostData,
    SimpleState,
    StoredMsg,
    StreamState,
)
from .record import RECORD_HEADER, RECORD_OVERHEAD, accounted_size
from .segment import NO_SID, Block, SubjectInfo

__all__ = ["BATCH_READ", "READ_AHEAD", "FileStoreQueries"]

READ_AHEAD: Final = 64 * 1024
"""Bytes read per ``pread`` miss. A consumer reading sequentially then costs one syscall per
~400 small records, while the cache stays one buffer per store (payloads are never kept)."""

BATCH_READ: Final = 256 * 1024
"""Bytes per ``pread`` of :meth:`FileStoreQueries.load_next_batch` (~1,500 small records)."""

_SMALL_MATCH: Final = 8
"""Up to this many subjects match a filter: search each subject's column with ``array.index``
(C speed); beyond it, one Python pass over the sequences is cheaper."""

_MATCH_CACHE_SIZE: Final = 64  # distinct wildcard filters remembered (consumers reuse theirs)

_unpack_hdr = RECORD_HEADER.unpack_from
_HDR_SIZE: Final = RECORD_HEADER.size
_crc32 = zlib.crc32
# zlib.crc32 over data followed by its own CRC-32 (little-endian) always gives this constant
_CRC_RESIDUE: Final = 0x2144DF1C


def _rec_len_at(buf: bytes | bytearray, pos: int) -> int:
    """The ``rec_len`` field of the record starting at ``pos`` (bytes 4..8, little-endian)."""
    return int.from_bytes(buf[pos + 4 : pos + 8], "little")


class FileStoreQueries:
    """Queries shared by ``FileStore``; see the module docstring."""

    _blocks: list[Block]
    _bases: list[int]
    _active: Block
    _subjects: dict[str, SubjectInfo]
    _by_sid: list[SubjectInfo | None]
    _subj_gen: int
    _free_sids: list[int]
    _match_cache: dict[str, tuple[int, list[SubjectInfo]]]
    _msgs: int
    _bytes: int
    _first_seq: int
    _last_seq: int
    _last_ts: int
    _lost: list[int]
    _lost_bytes: int
    _first_ts_cache: tuple[int, int]
    _rc: tuple[Block, int, bytes] | None
    _wbuf: bytearray
    _closed: bool

    def _fd(self, blk: Block) -> int:
        raise NotImplementedError

    def _check_read(self) -> None:
        if self._closed:
            raise ErrStoreClosed()

    # ------------------------------------------------------------------ locating and reading

    def _block_for(self, seq: int) -> Block | None:
        """The block whose index covers ``seq`` (live or not), or None."""
        a = self._active
        if seq >= a.base:
            return a if seq - a.base < len(a.sids) else None
        k = bisect_right(self._bases, seq) - 1
        if k < 0:
            return None
        blk = self._blocks[k]
        return blk if seq - blk.base < len(blk.sids) else None

    def _record(self, blk: Block, i: int) -> bytes | memoryview:
        """The raw bytes of entry ``i``'s record (from the write buffer, cache or disk).

        The index keeps the accounted size, which is the record length or 4 bytes less (see
        ``record.accounted_size``); the record's own length field decides, and is checked."""
        off = blk.offs[i]
        if off >= blk.flushed:
            start = off - blk.flushed
            wb = self._wbuf
            return bytes(wb[start : start + _rec_len_at(wb, start)])
        c = self._rc
        if c is not None and c[0] is blk:
            d = off - c[1]
            data = c[2]
            if d >= 0 and d + 8 <= len(data):
                rl = _rec_len_at(data, d)
                if d + rl <= len(data):
                    return memoryview(data)[d : d + rl]
        n = blk.lens[i] + FILE_HDR_OVERHEAD  # the longest the record can be
        data = self._read_at(blk, i, off, READ_AHEAD)
        rl = _rec_len_at(data, 0) if len(data) >= 8 else n + 1
        if rl > len(data) or rl > n:
            raise ErrCorrupt(f"short read in {blk.path.name} at offset {off}", [blk.base + i])
        return memoryview(data)[:rl]

    def _msg_at(self, blk: Block, i: int, seq: int) -> StoredMsg:
        rec = self._record(blk, i)
        n = len(rec)
        if n < RECORD_OVERHEAD:
            raise ErrCorrupt(f"record of seq {seq} failed its checksum", [seq])
        _m, _v, flags, _r, rec_len, rseq, ts, sl, hl = _unpack_hdr(rec, 0)
        if (
            rec_len != n
            or rseq != seq
            or flags
            or accounted_size(rec_len, hl) != blk.lens[i]
            or _crc32(rec[: n - 4]) != int.from_bytes(rec[n - 4 : n], "little")
        ):
            raise ErrCorrupt(f"record of seq {seq} failed its checksum", [seq])
        a = _HDR_SIZE + sl
        b = a + hl
        info = self._by_sid[blk.sids[i]]
        assert info is not None
        return StoredMsg(info.name, seq, ts, bytes(rec[a:b]), bytes(rec[b : n - 4]))

    def _first_ts(self) -> int:
        seq = self._first_seq
        cached = self._first_ts_cache
        if cached[0] == seq:
            return cached[1]
        blk = self._block_for(seq)
        if blk is None:
            return 0
        ts: int = _unpack_hdr(self._record(blk, seq - blk.base), 0)[6]
        self._first_ts_cache = (seq, ts)
        return ts

    # ------------------------------------------------------------------ the subject table

    def _new_subject(self, name: str, enc: bytes, seq: int) -> SubjectInfo:
        if self._free_sids:
            sid = self._free_sids.pop()
        else:
            sid = len(self._by_sid)
            self._by_sid.append(None)
        info = SubjectInfo(name, enc, sid, seq)
        self._by_sid[sid] = info
        self._subjects[name] = info
        self._subj_gen += 1
        return info

    def _release_subject(self, info: SubjectInfo) -> None:
        del self._subjects[info.name]
        self._by_sid[info.sid] = None
        self._free_sids.append(info.sid)
        self._subj_gen += 1

    # ------------------------------------------------------------------ index walks

    def _next_live(self, start: int) -> tuple[Block, int] | None:
        blocks = self._blocks
        for j in range(max(bisect_right(self._bases, start) - 1, 0), len(blocks)):
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

    def _next_live_seq(self, start: int) -> int:
        r = self._next_live(start)
        return r[0].base + r[1] if r is not None else self._last_seq + 1

    def _prev_live(self, seq: int) -> tuple[Block, int] | None:
        blocks = self._blocks
        for j in range(bisect_right(self._bases, seq) - 1, -1, -1):
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

    def _next_of_sid(self, sid: int, start: int, limit: int | None = None) -> int:
        """First seq >= start carrying subject ``sid`` (at most ``limit``), 0 if none."""
        blocks = self._blocks
        for j in range(max(bisect_right(self._bases, start) - 1, 0), len(blocks)):
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

    def _prev_of_sid(self, sid: int, seq: int) -> int:
        """Last seq < ``seq`` carrying subject ``sid``, 0 if none."""
        end = seq - 1
        blocks = self._blocks
        for j in range(bisect_right(self._bases, end) - 1, -1, -1):
            blk = blocks[j]
            sids = blk.sids
            i = min(end - blk.base, len(sids) - 1)
            while i >= 0:
                if sids[i] == sid:
                    return blk.base + i
                i -= 1
        return 0

    def _subj_first(self, info: SubjectInfo) -> int:
        """The subject's first live seq (``info.first`` is a lower bound; tighten it)."""
        f = info.first
        blk = self._block_for(f)
        if blk is not None and blk.sids[f - blk.base] == info.sid:
            return f
        f = self._next_of_sid(info.sid, f, info.last)
        info.first = f
        return f

    def _matching(self, filter_subject: str) -> list[SubjectInfo]:
        if is_all(filter_subject):
            return list(self._subjects.values())
        if is_literal(filter_subject):
            info = self._subjects.get(filter_subject)
            return [info] if info is not None else []
        cached = self._match_cache.get(filter_subject)
        if cached is not None and cached[0] == self._subj_gen:
            return cached[1]
        res = [info for name, info in self._subjects.items() if subject_matches(filter_subject, name)]
        if len(self._match_cache) >= _MATCH_CACHE_SIZE:
            self._match_cache.clear()
        self._match_cache[filter_subject] = (self._subj_gen, res)
        return res

    def _next_match(self, infos: list[SubjectInfo], start: int) -> int:
        """First live seq >= start whose subject is one of ``infos``, 0 if none."""
        infos = [i for i in infos if i.last >= start]
        if not infos:
            return 0
        if len(infos) <= _SMALL_MATCH:
            best = 0
            for info in infos:
                f = self._subj_first(info)
                s = f if start <= f else self._next_of_sid(info.sid, start, info.last)
                if s and (not best or s < best):
                    best = s
            return best
        wanted = {i.sid for i in infos}
        blocks = self._blocks
        for j in range(max(bisect_right(self._bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            sids = blk.sids
            for i in range(start - blk.base if start > blk.base else 0, len(sids)):
                if sids[i] in wanted:
                    return blk.base + i
        return 0

    def _matching_seqs(self, filter_subject: str, upper: int) -> list[int]:
        """Live seqs <= upper whose subject matches, ascending."""
        infos = self._matching(filter_subject)
        out: list[int] = []
        if len(infos) == 1:
            info = infos[0]
            s = self._subj_first(info)
            while s and s <= upper:
                out.append(s)
                s = self._next_of_sid(info.sid, s + 1, info.last)
            return out
        wanted = {i.sid for i in infos}
        if not wanted:
            return out
        for blk in self._blocks:
            if blk.base > upper:
                break
            base = blk.base
            out.extend(base + i for i, sid in enumerate(blk.sids) if sid in wanted and base + i <= upper)
        return out

    def _nth_newest(self, keep: int) -> int:
        """The seq s such that exactly ``keep`` live messages are >= s."""
        remaining = keep
        for blk in reversed(self._blocks):
            if blk.live < remaining:
                remaining -= blk.live
                continue
            sids = blk.sids
            for i in range(len(sids) - 1, -1, -1):
                if sids[i] != NO_SID:
                    remaining -= 1
                    if remaining == 0:
                        return blk.base + i
        return self._first_seq

    def _count_live_from(self, start: int) -> int:
        if start <= self._first_seq:
            return self._msgs
        total = 0
        blocks = self._blocks
        for j in range(max(bisect_right(self._bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            if start <= blk.base:
                total += blk.live
            elif start - blk.base < len(blk.sids):
                tail = blk.sids[start - blk.base :]
                total += len(tail) - tail.count(NO_SID)
        return total

    def _count_subjects_from(self, infos: list[SubjectInfo], start: int) -> int:
        if start <= self._first_seq:
            return sum(i.count for i in infos)
        infos = [i for i in infos if i.last >= start]
        if not infos:
            return 0
        if len(infos) == 1 and start <= self._subj_first(infos[0]):
            return infos[0].count
        wanted = {i.sid for i in infos}
        limit = max(i.last for i in infos)
        total = 0
        blocks = self._blocks
        for j in range(max(bisect_right(self._bases, start) - 1, 0), len(blocks)):
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

    # ------------------------------------------------------------------ the protocol's queries

    def load_msg(self, seq: int) -> StoredMsg | None:
        if self._closed:
            raise ErrStoreClosed()
        blk = self._block_for(seq)
        if blk is None:
            return None
        i = seq - blk.base
        if blk.sids[i] == NO_SID:
            return None
        return self._msg_at(blk, i, seq)

    def _load(self, seq: int) -> StoredMsg | None:
        if not seq:
            return None
        blk = self._block_for(seq)
        assert blk is not None
        return self._msg_at(blk, seq - blk.base, seq)

    def load_next_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None:
        self._check_read()
        if not self._msgs:
            return None
        start = max(start_seq, self._first_seq)
        if start > self._last_seq:
            return None
        if is_all(filter_subject):
            r = self._next_live(start)
            return self._msg_at(r[0], r[1], r[0].base + r[1]) if r is not None else None
        return self._load(self._next_match(self._matching(filter_subject), start))

    def load_next_batch(self, filter_subject: str, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """Up to ``max_msgs`` messages with seq >= ``start_seq`` matching the filter, in order.

        The consumer's bulk read: without a filter it walks the index and decodes the records
        of a block from one large ``pread`` each (records of consecutive sequences sit back to
        back), verifying each as :meth:`_msg_at` does. A record that fails verification ends
        the batch early, or raises as ``load_msg`` would when it is the first one."""
        self._check_read()
        out: list[StoredMsg] = []
        if max_msgs <= 0 or not self._msgs:
            return out
        start = max(start_seq, self._first_seq)
        if start > self._last_seq:
            return out
        if not is_all(filter_subject):
            infos = self._matching(filter_subject)
            while len(out) < max_msgs:
                seq = self._next_match(infos, start)
                m = self._load(seq)
                if m is None:
                    break
                out.append(m)
                start = seq + 1
            return out
        blocks = self._blocks
        by_sid = self._by_sid
        append = out.append
        last_sid, name = -1, ""  # consecutive messages often share a subject
        for j in range(max(bisect_right(self._bases, start) - 1, 0), len(blocks)):
            blk = blocks[j]
            if not blk.live:
                continue
            sids, offs, lens = blk.sids, blk.offs, blk.lens
            base, flushed = blk.base, blk.flushed
            i = start - base if start > base else 0
            n = len(sids)
            chunk: bytes = b""
            coff = 0
            rc = self._rc
            if rc is not None and rc[0] is blk:  # the previous bulk read often covers the start
                coff, chunk = rc[1], rc[2]
            clen = len(chunk)
            stop = min(n, i + max_msgs - len(out))
            while i < stop:
                sid = sids[i]
                if sid == NO_SID:
                    i += 1
                    stop = min(n, stop + 1)
                    continue
                seq = base + i
                off = offs[i]
                d = off - coff
                if off >= flushed or d < 0 or d + _HDR_SIZE > clen:
                    if off >= flushed:  # still in the write buffer
                        append(self._msg_at(blk, i, seq))
                        i += 1
                        continue
                    chunk, coff, d = self._read_at(blk, i, off, BATCH_READ), off, 0
                    clen = len(chunk)
                _m, _v, flags, _r, rec_len, rseq, ts, sl, hl = _unpack_hdr(chunk, d)
                end = d + rec_len
                if end > clen and d:  # the record runs past this read: read from it
                    chunk, coff, d = self._read_at(blk, i, off, BATCH_READ), off, 0
                    clen = len(chunk)
                    _m, _v, flags, _r, rec_len, rseq, ts, sl, hl = _unpack_hdr(chunk, 0)
                    end = rec_len
                if (
                    end > clen
                    or rseq != seq
                    or flags
                    or rec_len < RECORD_OVERHEAD
                    or (rec_len if hl else rec_len - FILE_HDR_OVERHEAD) != lens[i]
                    or _crc32(chunk[d:end]) != _CRC_RESIDUE  # the CRC over a record and its CRC
                ):
                    if out:
                        return out  # the bad record is reported by the next read, on its own
                    return [self._msg_at(blk, i, seq)]  # raises ErrCorrupt
                a = d + _HDR_SIZE + sl
                b = a + hl
                if sid != last_sid:
                    info = by_sid[sid]
                    assert info is not None
                    name, last_sid = info.name, sid
                append(StoredMsg(name, seq, ts, chunk[a:b], chunk[b : end - 4]))
                i += 1
            if len(out) >= max_msgs:
                return out
            start = base + n
        return out

    def _read_at(self, blk: Block, i: int, off: int, ahead: int) -> bytes:
        """Read block ``blk`` from entry ``i``'s record (at ``off``) on: that record at least,
        ``ahead`` bytes if the block has them. The result becomes the read cache (``_rc``)."""
        want = min(max(blk.lens[i] + FILE_HDR_OVERHEAD, ahead), blk.flushed - off)
        try:
            data = os.pread(self._fd(blk), want, off)
        except OSError as exc:  # read errors are not sticky: the next read tries again
            raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {blk.path.name}: {exc}") from exc
        self._rc = (blk, off, data)
        return data

    def load_last_msg(self, filter_subject: str) -> StoredMsg | None:
        self._check_read()
        if not self._msgs:
            return None
        if is_all(filter_subject):
            r = self._prev_live(self._last_seq)
            return self._msg_at(r[0], r[1], r[0].base + r[1]) if r is not None else None
        infos = self._matching(filter_subject)
        return self._load(max((i.last for i in infos), default=0))

    def state(self, deleted_details: bool = False) -> StreamState:
        self._check_read()
        n = self._msgs
        first, last = self._first_seq, self._last_seq
        if n == 0 and last == 0:
            first = 0
        deleted: list[int] | None = None
        if deleted_details:
            deleted = self._deleted_list(first, last) if n else []
        lost = LostData(list(self._lost), self._lost_bytes) if (self._lost or self._lost_bytes) else None
        return StreamState(
            msgs=n,
            bytes=self._bytes,
            first_seq=first,
            first_ts=self._first_ts() if n else 0,
            last_seq=last,
            last_ts=self._last_ts,
            num_subjects=len(self._subjects),
            num_deleted=(last - first + 1 - n) if n else 0,
            deleted=deleted,
            lost=lost,
        )

    def _deleted_list(self, first: int, last: int) -> list[int]:
        out: list[int] = []
        cursor = first
        for blk in self._blocks:
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

    def filtered_state(self, start_seq: int, filter_subject: str) -> SimpleState:
        self._check_read()
        start = max(start_seq, self._first_seq)
        if not self._msgs or start > self._last_seq:
            return SimpleState()
        if is_all(filter_subject):
            count = self._count_live_from(start)
            r_first = self._next_live(start)
            r_last = self._prev_live(self._last_seq)
            if not count or r_first is None or r_last is None:
                return SimpleState()
            return SimpleState(count, r_first[0].base + r_first[1], r_last[0].base + r_last[1])
        infos = [i for i in self._matching(filter_subject) if i.last >= start]
        count = self._count_subjects_from(infos, start)
        if not count:
            return SimpleState()
        return SimpleState(count, self._next_match(infos, start), max(i.last for i in infos))

    def subjects_state(self, filter_subject: str) -> dict[str, int]:
        self._check_read()
        return {i.name: i.count for i in self._matching(filter_subject)}

    def num_pending(self, start_seq: int, filter_subject: str, last_per_subject: bool) -> int:
        self._check_read()
        if last_per_subject:
            return sum(1 for i in self._matching(filter_subject) if i.last >= start_seq)
        if not self._msgs or start_seq > self._last_seq:
            return 0
        if is_all(filter_subject):
            return self._count_live_from(start_seq)
        return self._count_subjects_from(self._matching(filter_subject), start_seq)
