"""The register linearizability checker on histories whose answer is known: it must accept the
good ones (concurrency resolved either way, unknown outcomes that may or may not have applied)
and reject the bad ones (a stale read, two successful compare-and-sets from the same value, a
read of a value nobody wrote, a lost write)."""

from __future__ import annotations

import random
from typing import Any

from .linearizable import Op, check_register


def op(
    p: int, f: Any, value: Any, t0: float, t1: float | None, outcome: Any = "ok", result: bool = True
) -> Op:
    return Op(p, f, "k", value, t0, t1, outcome, result)


def verdict(*ops: Op) -> bool | None:
    return check_register("k", ops).linearizable


def test_sequential_histories() -> None:
    assert verdict(op(0, "write", 1, 0, 1), op(0, "read", 1, 2, 3))
    assert verdict(op(0, "read", None, 0, 1), op(0, "write", 1, 2, 3), op(1, "read", 1, 4, 5))
    assert verdict(op(0, "write", 1, 0, 1), op(1, "cas", (1, 2), 2, 3), op(0, "read", 2, 4, 5))
    assert verdict(op(0, "write", 1, 0, 1), op(1, "cas", (3, 2), 2, 3, result=False), op(0, "read", 1, 4, 5))


def test_concurrent_operations_may_take_effect_in_either_order() -> None:
    # a read overlapping a write may see the old or the new value
    assert verdict(op(0, "write", 1, 0, 10), op(1, "read", None, 1, 2))
    assert verdict(op(0, "write", 1, 0, 10), op(1, "read", 1, 1, 2))
    # two overlapping writes, then reads that see the one that came last
    assert verdict(op(0, "write", 1, 0, 5), op(1, "write", 2, 1, 6), op(2, "read", 1, 7, 8))
    assert verdict(op(0, "write", 1, 0, 5), op(1, "write", 2, 1, 6), op(2, "read", 2, 7, 8))


def test_unknown_outcomes_may_or_may_not_have_applied() -> None:
    # a write that timed out can explain a later read ...
    assert verdict(op(0, "write", 7, 0, None, "info"), op(1, "read", 7, 5, 6))
    # ... or have never happened
    assert verdict(op(0, "write", 7, 0, None, "info"), op(1, "read", None, 5, 6))
    # a compare-and-set of unknown outcome, applied
    assert verdict(op(0, "write", 1, 0, 1), op(1, "cas", (1, 2), 2, None, "info"), op(0, "read", 2, 5, 6))
    # definite failures are left out: they did not happen
    assert verdict(op(0, "write", 9, 0, 1, "fail"), op(1, "read", None, 2, 3))


def test_a_stale_read_is_caught() -> None:
    assert verdict(op(0, "write", 1, 0, 1), op(0, "write", 2, 2, 3), op(1, "read", 1, 4, 5)) is False


def test_two_successful_cas_from_the_same_value_are_caught() -> None:
    v = check_register(
        "k",
        [op(0, "write", 0, 0, 1), op(1, "cas", (0, 1), 2, 3), op(2, "cas", (0, 2), 4, 5)],
    )
    assert v.linearizable is False and "cas" in v.detail


def test_a_read_of_a_value_nobody_wrote_is_caught() -> None:
    assert verdict(op(0, "write", 1, 0, 1), op(1, "read", 5, 2, 3)) is False


def test_a_lost_acknowledged_write_is_caught() -> None:
    # acknowledged at 1, then every later read sees the value before it
    assert (
        verdict(
            op(0, "write", 0, 0, 1), op(1, "write", 1, 2, 3), op(2, "read", 0, 4, 5), op(2, "read", 0, 6, 7)
        )
        is False
    )


def test_a_failed_cas_must_have_seen_another_value() -> None:
    assert verdict(op(0, "write", 3, 0, 1), op(1, "cas", (3, 4), 2, 3, result=False)) is False


def test_a_long_concurrent_valid_history_is_decided_quickly() -> None:
    """A simulated register serving five processes with overlapping operations: linearizable by
    construction (each takes effect at a random instant inside its interval)."""
    rng = random.Random(7)
    state: Any = None
    ops: list[Op] = []
    t = 0.0
    pending: list[tuple[float, Op]] = []
    for i in range(400):
        t += rng.random()
        p = i % 5
        f = rng.choice(["read", "write", "cas"])
        start = t
        end = t + rng.random() * 3
        # the instant it takes effect: now (invocations are in time order, effects too)
        if f == "read":
            ops.append(op(p, "read", state, start, end))
        elif f == "write":
            state = i
            ops.append(op(p, "write", i, start, end))
        else:
            frm = rng.choice([state, -1])
            ok = frm == state
            if ok:
                state = i
            ops.append(op(p, "cas", (frm, i), start, end, result=ok))
    del pending
    v = check_register("k", ops)
    assert v.linearizable is True, v.detail
