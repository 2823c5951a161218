"""The CI slice of the deterministic simulation: thousands of seeded runs, every checker on.

A failure names its seeds; ``python -m tests.raft.sim --seed N -v`` (``--storm`` for the second
test) replays one exactly with a trace. ``make raft-sim SEEDS=N`` runs longer searches.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .sim import Plan, SimFailure, run_seed

RANDOM_SEEDS = 2000
STORM_SEEDS = 400
PARTS = 4  # the random plans' seeds in interleaved parts, which parallel test workers share


def _run(seeds: range, plan: Callable[[int], Plan]) -> int:
    failures: list[str] = []
    commits = 0
    for seed in seeds:
        try:
            commits += run_seed(seed, plan(seed)).commits
        except SimFailure as exc:
            failures.append(str(exc))
    assert not failures, f"{len(failures)} of {len(seeds)} seeds failed:\n" + "\n".join(failures[:10])
    return commits


@pytest.mark.parametrize("part", range(PARTS))
def test_random_plans_keep_every_invariant(part: int) -> None:
    seeds = range(part, RANDOM_SEEDS, PARTS)
    commits = _run(seeds, Plan.random)
    assert commits > 50 * len(seeds)  # the runs did commit work, not just elect leaders


def test_crash_storms_keep_every_invariant() -> None:
    commits = _run(range(STORM_SEEDS), Plan.storm)
    assert commits > 10 * STORM_SEEDS


def test_one_seed_replays_exactly() -> None:
    a, b = run_seed(1234), run_seed(1234)
    assert (a.now, a.delivered, a.commits, a.applied) == (b.now, b.delivered, b.commits, b.applied)
    assert a.leaders == b.leaders
