"""A linearizability checker for registers (Wing & Gong's search with Lowe's memoisation, as
Knossos and Porcupine run it), written for the harness's histories.

An operation is invoked at one time and completes at a later one, or never (its outcome is
unknown: a timeout, a server that died). A history is linearizable if every completed operation
can be put at one instant between its invocation and completion, and each unknown one either the
same way or not at all, so that the register's sequential rules explain every result: a read
returns the last value written; a write sets it; a compare-and-set sets ``to`` and succeeds if
the value was ``from``, else fails and changes nothing. Operations that definitely failed are
left out (they did not happen), as are reads whose result is unknown (they changed nothing).

A register is checked on its own (linearizability is compositional), so a history is checked per
key. The search is exponential in the worst case; ``max_steps`` bounds it, and a history it
cannot decide within that is reported as undecided, never as linearizable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Op", "Verdict", "check_register", "check_registers"]

Outcome = Literal["ok", "fail", "info"]


@dataclass(frozen=True)
class Op:
    process: int
    f: Literal["read", "write", "cas"]
    key: str
    value: Any  # read: what it returned; write: what it wrote; cas: (from, to)
    invoke: float
    complete: float | None  # None: never known to complete
    outcome: Outcome  # ok (completed, result known), fail (known not applied), info (unknown)
    result: bool = True  # cas: whether it succeeded (for an ok cas)


@dataclass
class Verdict:
    key: str
    linearizable: bool | None  # None: undecided within the step bound
    ops: int
    steps: int
    detail: str = ""
    witness: list[Op] = field(default_factory=list)  # the longest prefix it could linearize


class _Node:
    __slots__ = ("call", "match", "next", "op", "prev")

    def __init__(self, op: int, call: bool) -> None:
        self.op = op
        self.call = call
        self.match: _Node | None = None
        self.prev: _Node | None = None
        self.next: _Node | None = None


def _step(state: Any, op: Op) -> tuple[bool, Any]:
    """Whether ``op`` can take effect in ``state``, and the state after it."""
    if op.f == "read":
        return op.value == state, state
    if op.f == "write":
        return True, op.value
    frm, to = op.value
    if op.outcome == "info":  # result unknown: it applies if it matches, else it failed
        return True, to if state == frm else state
    if op.result:
        return state == frm, to
    return state != frm, state


def check_register(key: str, ops: Iterable[Op], initial: Any = None, max_steps: int = 2_000_000) -> Verdict:
    todo = [o for o in ops if o.outcome != "fail" and not (o.outcome == "info" and o.f == "read")]
    n = len(todo)
    if n == 0:
        return Verdict(key, True, 0, 0)
    events: list[tuple[float, int, int]] = []  # (time, 0 call / 1 return, op)
    for i, o in enumerate(todo):
        events.append((o.invoke, 0, i))
        events.append((o.complete if o.complete is not None and o.outcome == "ok" else math.inf, 1, i))
    events.sort()
    head = _Node(-1, False)
    prev = head
    calls: dict[int, _Node] = {}
    for _, kind, i in events:
        node = _Node(i, kind == 0)
        if kind == 0:
            calls[i] = node
        else:
            calls[i].match = node
        node.prev = prev
        prev.next = node
        prev = node

    def lift(c: _Node) -> None:
        assert c.prev is not None and c.match is not None
        c.prev.next = c.next
        if c.next is not None:
            c.next.prev = c.prev
        m = c.match
        assert m.prev is not None
        m.prev.next = m.next
        if m.next is not None:
            m.next.prev = m.prev

    def unlift(c: _Node) -> None:
        m = c.match
        assert m is not None and m.prev is not None and c.prev is not None
        m.prev.next = m
        if m.next is not None:
            m.next.prev = m
        c.prev.next = c
        if c.next is not None:
            c.next.prev = c

    state = initial
    linearized = 0
    cache: set[tuple[int, Any]] = set()
    stack: list[tuple[_Node, Any]] = []
    best: list[int] = []
    steps = 0
    entry = head.next
    while head.next is not None:
        steps += 1
        if steps > max_steps:
            return Verdict(key, None, n, steps, f"undecided after {max_steps} steps")
        assert entry is not None
        if entry.call:
            ok, new_state = _step(state, todo[entry.op])
            if ok:
                new_lin = linearized | (1 << entry.op)
                memo = (new_lin, _hashable(new_state))
                if memo not in cache:
                    cache.add(memo)
                    stack.append((entry, state))
                    state = new_state
                    linearized = new_lin
                    lift(entry)
                    if len(stack) > len(best):
                        best = [c.op for c, _ in stack]
                    entry = head.next
                    continue
            entry = entry.next
        else:
            if not stack:
                done = set(best)
                rest = [o for i, o in enumerate(todo) if i not in done and o.outcome == "ok"]
                stuck = min(rest, key=lambda o: o.complete or math.inf) if rest else todo[entry.op]
                return Verdict(
                    key,
                    False,
                    n,
                    steps,
                    f"after the longest explainable prefix of {len(best)} operations, nothing explains "
                    f"{stuck.f} {stuck.value!r} by process {stuck.process} "
                    f"(invoked at {stuck.invoke:.3f}, completed at {stuck.complete or math.inf:.3f})",
                    [todo[i] for i in best],
                )
            c, state = stack.pop()
            linearized &= ~(1 << c.op)
            unlift(c)
            entry = c.next
    return Verdict(key, True, n, steps)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def check_registers(ops: Iterable[Op], initial: Any = None, max_steps: int = 2_000_000) -> list[Verdict]:
    """One verdict per key."""
    by_key: dict[str, list[Op]] = {}
    for o in ops:
        by_key.setdefault(o.key, []).append(o)
    return [check_register(k, v, initial, max_steps) for k, v in sorted(by_key.items())]
