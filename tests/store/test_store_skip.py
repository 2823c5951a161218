"""``skip_msgs``: sequences used up without a message (a mirror keeping its origin's numbers
across the origin's gaps, a replica copying another's store), held to one contract over both
stores, across a reopen; and the store's ``last_ts`` when its last sequence has no message."""

from __future__ import annotations

import pytest

from jetpy.store import ErrWrongSequence, StoreLimits, StreamStore

from .conftest import Reopen


def _fill(store: StreamStore, n: int) -> None:
    for i in range(n):
        store.store_msg("a", b"", b"x%d" % i, ts=1000 + i)


def test_skip_in_the_middle_reads_as_deleted(store: StreamStore, reopen: Reopen) -> None:
    _fill(store, 2)
    store.skip_msgs(3, 4)
    assert store.store_msg("a", b"", b"after")[0] == 7
    store = reopen(store)
    st = store.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted, st.deleted) == (3, 1, 7, 4, [3, 4, 5, 6])
    assert st.lost is None  # accounted for, not lost
    assert [store.load_msg(s) for s in range(3, 7)] == [None] * 4
    assert store.load_next_msg("", 3) is not None and store.load_next_msg("", 3).seq == 7  # type: ignore[union-attr]
    assert store.store_msg("a", b"", b"next")[0] == 8


def test_skip_at_the_end_survives_reopen(store: StreamStore, reopen: Reopen) -> None:
    _fill(store, 3)
    store.skip_msgs(4, 2)
    store.flush()
    store.sync()
    store = reopen(store)
    st = store.state()
    assert (st.msgs, st.last_seq, st.num_deleted, st.lost) == (3, 5, 2, None)
    assert store.store_msg("a", b"", b"x")[0] == 6


def test_skip_on_an_empty_store_moves_the_first_sequence(store: StreamStore, reopen: Reopen) -> None:
    store.skip_msgs(1, 9)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 10, 9)
    assert store.store_msg("a", b"", b"x")[0] == 10
    store = reopen(store)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted) == (1, 10, 10, 0)


def test_skips_in_a_row_and_between_messages(store: StreamStore, reopen: Reopen) -> None:
    _fill(store, 1)
    store.skip_msgs(2, 1)
    store.skip_msgs(3, 2)
    store.store_msg("a", b"", b"x")
    store.skip_msgs(6, 100)
    store.store_msg("a", b"", b"y")
    store = reopen(store)
    st = store.state(deleted_details=True)
    assert (st.msgs, st.last_seq, st.num_deleted) == (3, 106, 103)
    assert st.deleted == [2, 3, 4, *range(6, 106)]
    assert st.lost is None
    assert [m.seq for m in store.load_next_batch("", 1, 10)] == [1, 5, 106]


def test_skip_must_follow_the_last_sequence(store: StreamStore) -> None:
    _fill(store, 2)
    with pytest.raises(ErrWrongSequence):
        store.skip_msgs(5, 1)
    with pytest.raises(ErrWrongSequence):
        store.skip_msgs(2, 1)
    store.skip_msgs(3, 0)  # nothing to skip
    assert store.state().last_seq == 2


def test_removing_around_a_skip_keeps_it_accounted(store: StreamStore, reopen: Reopen) -> None:
    _fill(store, 2)  # 1, 2
    store.skip_msgs(3, 3)  # 3..5
    _fill(store, 2)  # 6, 7
    store.skip_msgs(8, 2)  # 8, 9
    _fill(store, 1)  # 10
    for seq in (6, 7, 2):  # the block between the skips empties and goes
        assert store.remove_msg(seq)
    store = reopen(store)
    st = store.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.lost) == (2, 1, 10, None)
    assert st.deleted == [2, 3, 4, 5, 6, 7, 8, 9]
    assert store.remove_msg(1)
    store = reopen(store)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.lost) == (1, 10, 10, None)


def test_a_skip_given_the_last_time_stamp_keeps_it_across_reopen(store: StreamStore, reopen: Reopen) -> None:
    """A replica copying another's store past its removed last message: the time stamp of that
    message is the store's ``last_ts`` (what decides which log entries it holds), durably."""
    _fill(store, 3)  # time stamps 1000..1002
    store.skip_msgs(4, 2, last_ts=5000)
    assert store.state().last_ts == 5000
    store = reopen(store)
    st = store.state()
    assert (st.msgs, st.last_seq, st.last_ts, st.lost) == (3, 5, 5000, None)
    store.skip_msgs(6, 1)  # none given: as it was
    assert store.state().last_ts == 5000
    assert store.store_msg("a", b"", b"x", ts=6000)[0] == 7
    assert store.state().last_ts == 6000


@pytest.mark.parametrize("how", ["skip", "compact"])
def test_an_empty_store_moved_on_with_the_last_time_stamp_keeps_it(
    store: StreamStore, reopen: Reopen, how: str
) -> None:
    """An emptied store moved past its end (a replica given a snapshot of an emptied store)."""
    _fill(store, 2)
    assert store.remove_msg(1) and store.remove_msg(2)
    if how == "skip":
        store.skip_msgs(3, 7, last_ts=7000)
    else:
        assert store.compact(10, last_ts=7000) == 0
    store.flush()
    store.sync()
    store = reopen(store)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.last_ts) == (0, 10, 9, 7000)
    assert store.compact(20) == 0  # none given: as it was
    st = reopen(store).state()
    assert (st.first_seq, st.last_seq, st.last_ts) == (20, 19, 7000)


@pytest.mark.parametrize("how", ["remove", "purge", "expire"])
def test_the_last_time_stamp_outlives_the_last_message(store: StreamStore, reopen: Reopen, how: str) -> None:
    """A work queue's removal, a purge, an expiry: the last message goes, its time stamp stays
    the store's ``last_ts``, across a reopen."""
    _fill(store, 4)  # time stamps 1000..1003
    if how == "remove":
        for seq in range(1, 5):
            assert store.remove_msg(seq)
    elif how == "purge":
        assert store.purge() == 4
    else:
        store.update_limits(StoreLimits(max_age=10))
        assert store.expire(5000) == 4
    store.flush()
    store.sync()
    store = reopen(store)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.last_ts) == (0, 5, 4, 1003)
