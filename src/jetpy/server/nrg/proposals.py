"""Proposals in flight: packed into entries on the leader, forwarded to it from the others, and
matched with their results when their entry applies.

Owns: the unit of proposing (:class:`Unit`: items that go into one entry together, never split,
with whoever waits for their results), the leader's queue and its packing into entries of at
most ``max_entry_items`` / ``max_entry_bytes`` (many proposals per entry: one fsync and one
append message carry them all), the waiting list by log index (a result only for an entry of
the same term at that index; another term there means the proposal was replaced and is lost),
and the requests forwarded to the leader with their answers. Must not know: the network, the
store or Raft's state; ``group`` wires it to them.

A waiter is a :class:`~asyncio.Future` of the unit's results (a proposal made on this server) or
a :class:`Remote` (a unit forwarded here by another member, answered on its reply subject).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from jetpy.server.nrg.machine import (
    ProposalBusy,
    ProposalError,
    ProposalLost,
    ProposalRefused,
    ProposalUnknown,
)
from jetpy.server.nrg.wire import Status, encode_answer

__all__ = ["Forwarded", "Pending", "Remote", "Unit", "error_for", "status_for"]

FORWARD_TIMEOUT: Final = 30.0
"""Seconds a forwarded request is remembered without an answer (its proposers' own timeouts are
usually shorter; past this the answer could only be for nobody)."""


class Remote:
    """A unit another member forwarded: answered once, on ``reply``."""

    __slots__ = ("answered", "reply", "send")

    def __init__(self, reply: bytes, send: Callable[[bytes, bytes], None]) -> None:
        self.reply = reply
        self.send = send
        self.answered = False

    def done(self, results: list[bytes]) -> None:
        if not self.answered:
            self.answered = True
            self.send(self.reply, encode_answer(Status.OK, "", results))

    def fail(self, status: Status, detail: str) -> None:
        if not self.answered:
            self.answered = True
            self.send(self.reply, encode_answer(status, detail))


Waiter = asyncio.Future[list[bytes]] | Remote


class Unit:
    __slots__ = ("items", "size", "waiter")

    def __init__(self, items: list[bytes], waiter: Waiter) -> None:
        self.items = items
        self.waiter = waiter
        self.size = sum(map(len, items))


def status_for(exc: ProposalError) -> Status:
    if isinstance(exc, ProposalLost):
        return Status.LOST
    if isinstance(exc, ProposalBusy):
        return Status.DROPPED
    return Status.REFUSED


def error_for(status: Status, detail: str) -> ProposalError:
    if status is Status.LOST:
        return ProposalLost(detail)
    if status is Status.DROPPED:
        return ProposalBusy(detail)
    if status is Status.REFUSED:
        return ProposalRefused(detail)
    return ProposalUnknown(detail)


def settle(waiter: Waiter, results: list[bytes]) -> None:
    if isinstance(waiter, Remote):
        waiter.done(results)
    elif not waiter.done():
        waiter.set_result(results)


def fail(waiter: Waiter, exc: ProposalError) -> None:
    if isinstance(waiter, Remote):
        if exc.definite:  # an outcome this member does not know is not answered: the sender's times out
            waiter.fail(status_for(exc), str(exc))
    elif not waiter.done():
        waiter.set_exception(exc)


class Pending:
    """The leader's queue of units, and every unit waiting for its entry to apply."""

    __slots__ = ("max_bytes", "max_items", "queue", "queued_bytes", "waiting")

    def __init__(self, max_items: int, max_bytes: int) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.queue: list[Unit] = []
        self.queued_bytes = 0
        # log index -> (term, units in the entry there)
        self.waiting: dict[int, tuple[int, list[Unit]]] = {}

    def add(self, unit: Unit) -> None:
        self.queue.append(unit)
        self.queued_bytes += unit.size

    def next_entry(self) -> list[Unit]:
        """Whole units from the head of the queue for one entry (at least one), taken off it."""
        queue = self.queue
        n = items = size = 0
        for u in queue:
            if n and (items + len(u.items) > self.max_items or size + u.size > self.max_bytes):
                break
            n += 1
            items += len(u.items)
            size += u.size
        taken = queue[:n]
        del queue[:n]
        self.queued_bytes -= size
        return taken

    def take_all(self) -> list[Unit]:
        queue, self.queue, self.queued_bytes = self.queue, [], 0
        return queue

    def proposed(self, index: int, term: int, units: list[Unit]) -> None:
        self.waiting[index] = (term, units)

    def applied(self, index: int, term: int, results: list[bytes] | None) -> None:
        """The entry at ``index`` applied with ``results`` (None: not a proposal's entry)."""
        got = self.waiting.pop(index, None)
        if got is None:
            return
        wanted, units = got
        if wanted != term:
            lost = ProposalLost(f"entry {index} of term {wanted} was replaced by term {term}'s")
            for u in units:
                fail(u.waiter, lost)
            return
        pos = 0
        for u in units:
            n = len(u.items)
            settle(u.waiter, results[pos : pos + n] if results is not None else [])
            pos += n

    def covered_by_snapshot(self, index: int) -> None:
        """A leader's snapshot replaced the log through ``index``: what waited there may or may
        not have been applied (the snapshot does not say)."""
        for i in [i for i in self.waiting if i <= index]:
            _, units = self.waiting.pop(i)
            for u in units:
                fail(u.waiter, ProposalUnknown(f"entry {i} was covered by a snapshot"))

    def fail_all(self, exc: ProposalError) -> None:
        for u in self.take_all():
            fail(u.waiter, exc)
        waiting, self.waiting = self.waiting, {}
        for _, units in waiting.values():
            for u in units:
                fail(u.waiter, exc)


class Forwarded:
    """Requests this member forwarded to the leader, by request id, until answered."""

    __slots__ = ("_next", "requests")

    def __init__(self) -> None:
        self._next = 0
        # id -> (units, when sent, the member it went to)
        self.requests: dict[int, tuple[list[Unit], float, str]] = {}

    def next_id(self) -> int:
        self._next += 1
        return self._next

    def add(self, units: list[Unit], to: str) -> int:
        rid = self.next_id()
        self.requests[rid] = (units, time.monotonic(), to)
        return rid

    def pop(self, rid: int) -> list[Unit] | None:
        got = self.requests.pop(rid, None)
        return got[0] if got is not None else None

    def expire(self, now: float) -> list[Unit]:
        """Units of requests unanswered for ``FORWARD_TIMEOUT``: their fate is unknown."""
        old = [rid for rid, (_, at, _) in self.requests.items() if now - at > FORWARD_TIMEOUT]
        out: list[Unit] = []
        for rid in old:
            out += self.requests.pop(rid)[0]
        return out

    def to(self, member: str) -> list[int]:
        return [rid for rid, (_, _, dst) in self.requests.items() if dst == member]
