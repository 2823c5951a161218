"""seek.seq_at_time: the first position at or after a time, over gaps and at both ends; and the
two results its callers derive from it (a consumer's start, direct get's next stored message)."""

from __future__ import annotations

from jetpy.jetstream.api.direct import seq_from_time
from jetpy.jetstream.seek import seq_at_time
from jetpy.store.base import StoreConfig
from jetpy.store.memory import MemoryStore


def store(times: list[int], deleted: tuple[int, ...] = ()) -> MemoryStore:
    s = MemoryStore(StoreConfig(name="S", storage="memory"))
    for t in times:
        s.store_msg("s", b"", b"", t)
    for seq in deleted:
        s.remove_msg(seq)
    return s


def search(s: MemoryStore, t: int) -> int:
    st = s.state()
    return seq_at_time(s, t, st.first_seq, st.last_seq)


def test_first_at_or_after() -> None:
    s = store([10, 20, 20, 30])
    assert [search(s, t) for t in (0, 10, 11, 20, 21, 30, 31)] == [1, 1, 2, 2, 4, 4, 5]


def test_gaps_are_skipped() -> None:
    s = store([10, 20, 30, 40, 50], deleted=(2, 3))
    assert search(s, 15) == 2  # a deleted sequence: the next stored message is 4
    assert seq_from_time(s, 15) == 4
    assert search(s, 45) == 5 and seq_from_time(s, 45) == 5
    assert search(s, 60) == 6 and seq_from_time(s, 60) == 6


def test_an_empty_store() -> None:
    s = store([])
    assert search(s, 5) == s.state().first_seq
    assert seq_from_time(s, 5) == s.state().last_seq + 1
