"""Recovery's scan of a Raft log's segments: what is intact, and what went wrong where.

Owns: reading every segment once at open, validating every record (checksum, contiguity of
indexes), and classifying the first problem: a *torn tail* (the last write before a crash never
completed: nothing valid follows it, so nothing after it was ever synced or acknowledged) or
*damage* (a bad record or a gap with valid records after it: durable entries were lost, which
the node must never hide). Must not know: hard state, snapshots' contents, or what to do about
the problem (``store.py`` quarantines and repairs).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path

from ...raft import Entry, EntryKind
from .records import SEGMENT_HEADER_SIZE, check_record, decode_header, find_next_record

__all__ = ["Problem", "ScanResult", "ScannedSegment", "scan_segments"]

_CONF = int(EntryKind.CONF)


@dataclass
class ScannedSegment:
    path: Path
    base: int
    first: int  # index of offsets[0] (later than base when the head was compacted away)
    offsets: array[int]  # file offset of each kept record, in index order
    end: int  # end of the last kept record: appends continue here


@dataclass
class Problem:
    segment: Path
    offset: int
    reason: str
    torn: bool  # True: a torn tail (truncate it); False: damage (entries lost)


@dataclass
class ScanResult:
    segments: list[ScannedSegment] = field(default_factory=list)
    last_index: int = 0
    term_runs: list[tuple[int, int]] = field(default_factory=list)  # (first index, term)
    confs: list[Entry] = field(default_factory=list)
    problem: Problem | None = None
    highest_seen: int = 0  # the highest index in any valid record, lost ones included
    skipped: list[str] = field(default_factory=list)  # bad bytes that held no needed entry


def scan_segments(files: list[tuple[int, Path]], after: int) -> ScanResult:
    """Scan ``files`` (base, path), sorted by base. Entries at or before ``after`` (the
    snapshot's index) are skipped; the ones after it must follow on without a gap."""
    res = ScanResult(last_index=after)
    expected = after + 1
    for k, (base, path) in enumerate(files):
        data = path.read_bytes()
        end = len(data)
        seg = ScannedSegment(path, base, expected, array("Q"), SEGMENT_HEADER_SIZE)
        if decode_header(data) != base:
            seg.end = 0
            res.segments.append(seg)
            _problem(res, files, k, data, 0, "bad segment header")
            break
        pos = SEGMENT_HEADER_SIZE
        while pos < end:
            r = check_record(data, pos, end)
            if r is None:
                hit = find_next_record(data, pos + 1, end)
                if hit is not None and hit[1][1] <= expected:
                    # Only compacted entries (or nothing) were in the bad bytes: step over them.
                    res.skipped.append(f"{path.name}: bad bytes at {pos}..{hit[0]} (no needed entry)")
                    pos = hit[0]
                    continue
                _problem(res, files, k, data, pos, "record fails its checks")
                break
            n, index, term, kind = r
            res.highest_seen = max(res.highest_seen, index)
            if index <= after and index < expected:
                pos += n  # compacted into the snapshot: not needed
                seg.end = pos
                continue
            if index != expected:
                _problem(res, files, k, data, pos, f"entry {index} where {expected} was expected")
                break
            if not seg.offsets:
                seg.first = index
            seg.offsets.append(pos)
            runs = res.term_runs
            if not runs or runs[-1][1] != term:
                runs.append((index, term))
            if kind == _CONF:
                res.confs.append(Entry(index, term, EntryKind.CONF, data[pos + 24 : pos + n - 4]))
            expected += 1
            pos += n
            seg.end = pos
        res.segments.append(seg)
        if res.problem is not None:
            break
    res.last_index = expected - 1
    return res


def _problem(
    res: ScanResult, files: list[tuple[int, Path]], k: int, data: bytes, pos: int, reason: str
) -> None:
    """Record the first problem: torn if nothing valid follows it anywhere, else damage."""
    seen_after = 0
    hit = find_next_record(data, pos + 1, len(data))
    while hit is not None:
        seen_after = max(seen_after, hit[1][1])
        hit = find_next_record(data, hit[0] + hit[1][0], len(data))
    for _, path in files[k + 1 :]:
        later = path.read_bytes()
        hit = find_next_record(later, SEGMENT_HEADER_SIZE if decode_header(later) else 0, len(later))
        while hit is not None:
            seen_after = max(seen_after, hit[1][1])
            hit = find_next_record(later, hit[0] + hit[1][0], len(later))
    res.highest_seen = max(res.highest_seen, seen_after)
    torn = seen_after == 0 and k == len(files) - 1
    res.problem = Problem(files[k][1], pos, reason, torn)
