"""PatternSet answers what pairwise comparison answers (overlap, covering, within), the pair
nats-server names for overlapping subjects, and near-linear time for 10,000 patterns."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.patterns import (
    PatternSet,
    all_covered,
    all_overlap,
    any_nested,
    first_overlapping_pair,
    overlapping_others,
)
from jetpy.subjects import subject_is_subset, subjects_overlap

# Few distinct tokens so that patterns collide often; "" and a ">" in the middle are invalid
# subjects, which the set must still read as the pairwise functions do.
token = st.sampled_from(["a", "b", "*", ">", ""])
pattern = st.lists(token, min_size=1, max_size=4).map(".".join)
patterns = st.lists(pattern, max_size=8)


@settings(max_examples=400, deadline=None)
@given(patterns, pattern)
def test_queries_agree_with_pairwise(stored: list[str], q: str) -> None:
    ps = PatternSet((p, i) for i, p in enumerate(stored))
    assert sorted(ps.overlapping(q)) == [i for i, p in enumerate(stored) if subjects_overlap(q, p)]
    assert ps.overlaps(q) == any(subjects_overlap(q, p) for p in stored)
    assert sorted(ps.covering(q)) == [i for i, p in enumerate(stored) if subject_is_subset(q, p)]
    assert sorted(ps.within(q)) == [i for i, p in enumerate(stored) if subject_is_subset(p, q)]


@settings(max_examples=400, deadline=None)
@given(patterns)
def test_helpers_agree_with_pairwise(ps: list[str]) -> None:
    n = range(len(ps))
    pairs = [(i, j) for i in n for j in n if i < j and subjects_overlap(ps[i], ps[j])]
    assert first_overlapping_pair(ps) == (min(pairs) if pairs else None)
    assert overlapping_others(ps) == {k for pair in pairs for k in pair}
    assert any_nested(ps) == any(i != j and subject_is_subset(ps[i], ps[j]) for i in n for j in n)
    filters, subjects = ps[:3], ps[3:]
    assert all_covered(subjects, filters) == all(
        any(subject_is_subset(s, f) for f in filters) for s in subjects
    )
    assert all_overlap(filters, subjects) == all(
        any(subjects_overlap(f, s) for s in subjects) for f in filters
    )


@settings(max_examples=200, deadline=None)
@given(patterns)
def test_discard_leaves_nothing_behind(ps: list[str]) -> None:
    s = PatternSet((p, i) for i, p in enumerate(ps))
    s.discard("not.there", 0)
    for i, p in enumerate(ps):
        s.discard(p, i)
        assert i not in set(s.overlapping(p))
    assert len(s) == 0
    assert not list(s.overlapping(">"))


def test_first_pair_is_the_one_nats_server_names() -> None:
    # the first subject that overlaps a later one, with the first such later one
    assert first_overlapping_pair(["a.b", "c.*", "c.d", "a.>"]) == (0, 3)
    assert first_overlapping_pair(["a.>", "b", "a.c", "a.d"]) == (0, 2)
    assert first_overlapping_pair(["x.*", "a.c", "b", "a.>", "x.y"]) == (0, 4)
    assert first_overlapping_pair(["a", "b", "a"]) == (0, 2)
    assert first_overlapping_pair([f"s.{i}" for i in range(1000)]) is None


def test_ten_thousand_patterns_in_linear_time() -> None:
    shapes = {
        "literal": [f"orders.{i}" for i in range(10_000)],
        "mixed": [f"o.{i}.*" if i % 2 else f"e.*.{i}" for i in range(10_000)],
        "tails": [f"t.{i}.>" for i in range(10_000)],
    }
    for name, ps in shapes.items():
        start = time.perf_counter()
        assert first_overlapping_pair(ps) is None
        assert not overlapping_others(ps)
        took = time.perf_counter() - start
        # pairwise this was 50 million comparisons (tens of seconds); a trie takes milliseconds
        assert took < 2.0, (name, took)
