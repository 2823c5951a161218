"""``purge_steps``: a purge in pieces, with stores, reads and removals in between, ends exactly as
``purge`` would have at its start (for both stores), and never removes what came after it."""

from __future__ import annotations

import pytest

from jetpy.store import StreamStore
from jetpy.store.base import COMPACT_STEP, PURGE_STEP
from jetpy.store.erase import ERASE_STEP
from jetpy.store.memory import MemoryStore

from .conftest import MakeStore

N = 3 * COMPACT_STEP // 2  # more than one step of each kind


def fill(s: StreamStore, n: int) -> None:
    for i in range(n):
        s.store_msg(f"p.{i % 3}", b"", b"x")


def run_interleaved(
    s: StreamStore, subject: str = "", seq: int = 0, keep: int = 0
) -> tuple[int, int, list[int]]:
    """Run a purge's steps, storing a message after each; returns (purged, steps, stored)."""
    steps = s.purge_steps(subject, seq, keep)
    stored: list[int] = []
    n = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return int(done.value), n, stored
        n += 1
        stored.append(s.store_msg("p.1", b"", b"during")[0])


@pytest.mark.parametrize(
    ("subject", "seq", "keep", "left"),
    [
        ("", 0, 0, 0),  # everything: one step
        ("", N - 10, 0, 11),  # compact below a sequence
        ("", 0, 25, 25),  # keep the newest
        ("p.1", 0, 0, N - N // 3),  # one subject
        ("p.*", 0, 0, 0),  # a wildcard over every subject
        ("p.1", 0, 7, N - N // 3 + 7),  # one subject, keeping its newest
        ("p.>", N // 2, 0, N - N // 2 + 1),  # a wildcard below a sequence
    ],
)
def test_a_purge_in_steps_spares_what_came_after_it(
    make_store: MakeStore, subject: str, seq: int, keep: int, left: int
) -> None:
    s = make_store(block_size=1 << 20)
    fill(s, N)
    purged, steps, stored = run_interleaved(s, subject, seq, keep)
    assert purged == N - left
    assert steps >= 1 or purged <= PURGE_STEP or (not subject and not seq and not keep)
    st = s.state()
    assert st.msgs == left + len(stored) and st.last_seq == N + len(stored)
    assert all(m is not None and m.data == b"during" for m in map(s.load_msg, stored))


def test_steps_are_bounded(make_store: MakeStore) -> None:
    s = make_store(block_size=1 << 20)
    fill(s, N)
    _purged, steps, _stored = run_interleaved(s, "p.0")
    removals = (N // 3) // PURGE_STEP
    if isinstance(s, MemoryStore):
        assert steps == removals
    else:  # then the removed records are erased, ERASE_STEP at a time in each of the few blocks
        least = -(-(N // 3) // ERASE_STEP)
        assert least <= steps - removals <= least + 8
    s2 = make_store(block_size=1 << 20)
    fill(s2, N)
    _purged, steps, _stored = run_interleaved(s2, "", N)
    compactions = (N - 1) // COMPACT_STEP
    if isinstance(s2, MemoryStore):
        assert steps == compactions
    else:  # then what is removed from the block that stays (1 MiB of records) is erased
        assert compactions < steps <= compactions + (1 << 20) // ERASE_STEP


def test_a_purge_past_the_end_happens_at_once(make_store: MakeStore) -> None:
    s = make_store()
    fill(s, 100)
    purged, steps, _stored = run_interleaved(s, "", 10**6)
    assert (purged, steps) == (100, 0)
    assert s.store_msg("p.x", b"", b"next")[0] == 10**6
