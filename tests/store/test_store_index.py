"""StoreIndex on its own: blocks' columns and the subject table in memory, no files, no bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from jetpy.store import SimpleState
from jetpy.store.index import StoreIndex
from jetpy.store.recovery import Recovered
from jetpy.store.segment import NO_SID, Block, SubjectInfo

SIZE = 10  # accounted size of every entry


def make_index(*blocks: tuple[int, list[str | None]]) -> StoreIndex:
    """An index over blocks given as (base, subject of each entry or None when deleted)."""
    by_name: dict[str, SubjectInfo] = {}
    by_sid: list[SubjectInfo | None] = []
    out: list[Block] = []
    last = 0
    for base, entries in blocks:
        blk = Block(Path(f"/nonexistent/{base}.blk"), base)
        for i, name in enumerate(entries):
            seq = base + i
            blk.offs.append(128 + 40 * i)
            if name is None:
                blk.lens.append(0)
                blk.sids.append(NO_SID)
                continue
            info = by_name.get(name)
            if info is None:
                info = by_name[name] = SubjectInfo(name, name.encode(), len(by_sid), seq)
                by_sid.append(info)
            info.count += 1
            info.last = seq
            blk.lens.append(SIZE)
            blk.sids.append(info.sid)
            blk.live += 1
        out.append(blk)
        last = base + len(entries) - 1
    live = [b.base + i for b in out for i, s in enumerate(b.sids) if s != NO_SID]
    rec = Recovered(
        blocks=out,
        subjects=by_name,
        by_sid=by_sid,
        last_seq=last,
        last_ts=0,
        floor=0,
        first_seq=live[0] if live else last + 1,
        msgs=len(live),
        bytes=SIZE * len(live),
    )
    return StoreIndex(rec)


@pytest.fixture
def ix() -> StoreIndex:
    #                 1    2     3    4     5          6    7     8
    return make_index((1, ["a", "b", None, "a"]), (5, ["c.x", None, "c.y", "a"]))


def test_locating_and_walking(ix: StoreIndex) -> None:
    assert ix.block_for(3) is ix.blocks[0] and ix.block_for(6) is ix.active and ix.block_for(9) is None
    assert [s for s in range(10) if ix.live(s)] == [1, 2, 4, 5, 7, 8]
    assert ix.size_of(4) == SIZE and ix.size_of(3) == 0 and ix.size_of(99) == 0
    assert ix.next_live_seq(3) == 4 and ix.next_live_seq(9) == 9
    r = ix.prev_live(6)
    assert r is not None and r[0].base + r[1] == 5
    assert ix.deleted_list(1, 8) == [3, 6] and ix.deleted_list(1, 11) == [3, 6, 9, 10, 11]
    assert ix.nth_newest(2) == 7 and ix.count_live_from(4) == 4
    assert ix.head() == (1, 8)


def test_subjects_and_filters(ix: StoreIndex) -> None:
    assert ix.subjects_state(">") == {"a": 3, "b": 1, "c.x": 1, "c.y": 1}
    assert ix.subjects_state("c.*") == {"c.x": 1, "c.y": 1}
    assert ix.subject_of(8) == ("a", 3)
    assert list(ix.matching_seqs("a", 7)) == [1, 4] and list(ix.matching_seqs("c.>", 99)) == [5, 7]
    assert ix.next_match(ix.matching("c.*"), 6) == 7
    assert ix.filtered_state(2, "a") == SimpleState(2, 4, 8)
    assert ix.filtered_state(1, "") == SimpleState(6, 1, 8)
    assert ix.num_pending(5, "a", last_per_subject=False) == 1
    assert ix.num_pending(5, ">", last_per_subject=True) == 3  # a, c.x, c.y have a message >= 5


def test_wildcard_match_cache_follows_the_subject_table(ix: StoreIndex) -> None:
    assert [i.name for i in ix.matching("c.*")] == ["c.x", "c.y"]
    ix.new_subject("c.z", b"c.z", 9)
    assert [i.name for i in ix.matching("c.*")] == ["c.x", "c.y", "c.z"]


def test_released_subject_ids_are_reused(ix: StoreIndex) -> None:
    b = ix.subjects["b"]
    ix.remove(ix.blocks[0], 1, 2)
    assert "b" not in ix.subjects and ix.by_sid[b.sid] is None
    assert ix.new_subject("d", b"d", 9).sid == b.sid


def test_remove_keeps_counters_subject_bounds_and_the_first_seq(ix: StoreIndex) -> None:
    a = ix.subjects["a"]
    ix.remove(ix.blocks[0], 0, 1)  # the first message: the head moves to the next live one
    assert (ix.first_seq, ix.msgs, ix.bytes) == (2, 5, 5 * SIZE)
    assert ix.subj_first(a) == 4
    ix.remove(ix.active, 3, 8)  # a subject's last message: its last moves back
    assert a.last == 4 and a.count == 1
    ix.remove(ix.blocks[0], 1, 2)
    assert ix.first_seq == 4 and ix.blocks[0].live == 1


def test_remove_below_and_remove_all(ix: StoreIndex) -> None:
    assert ix.remove_below(6) == 4
    assert (ix.first_seq, ix.msgs) == (7, 2) and set(ix.subjects) == {"c.y", "a"}
    assert ix.subj_first(ix.subjects["a"]) == 8
    assert ix.remove_all() == 2
    assert (ix.msgs, ix.bytes, ix.first_seq, ix.last_seq, ix.subjects) == (0, 0, 9, 8, {})
    assert not ix.active.live and set(ix.active.sids) == {NO_SID}


def test_forget_after_a_rollback(ix: StoreIndex) -> None:
    ix.forget_after(5)
    # never acknowledged (their publishers get an error), so not lost; never handed out again
    assert ix.lost == [] and (ix.msgs, ix.last_seq) == (4, 8)
    assert len(ix.active.sids) == 1 and ix.subjects["a"].last == 4 and "c.y" not in ix.subjects
    assert ix.live(5) and not ix.live(7)


def test_blocks_are_added_kept_and_forgotten(ix: StoreIndex) -> None:
    first, second = ix.blocks
    third = Block(Path("/nonexistent/9.blk"), 9)
    ix.add_block(third)
    assert ix.active is third and ix.bases == [1, 5, 9] and ix.position(second) == 1
    ix.forget_block(1)
    assert ix.position(second) == -1 and ix.bases == [1, 9]
    ix.keep_blocks([first])
    assert ix.active is first and ix.blocks == [first] and ix.bases == [1]
