"""PendingAcks: a consumer's delivered-but-unacknowledged messages and when they come back.

Owns:

* the pending acks (stream sequence -> :class:`Pending`, in ascending stream order);
* the ack floor (``ack_floor_consumer_seq``, ``ack_floor_stream_seq``: everything at or below it
  is acknowledged) and the rules that move it: only an ack of the message just above the floor
  moves it (nats-server's rule), up to just below the lowest message still pending; with nothing
  pending, up to everything delivered;
* the redelivery deadlines (ack wait, backoff steps, ``-NAK`` delays, ``+WPI``): first deliveries
  share one ack wait, so their deadlines arrive in order and go to a FIFO; the rest go to a heap.
  Entries are never removed when a message is acked or re-armed: a stale one (its message gone,
  or delivered or re-armed since) is skipped when it reaches the head (lazy deletion);
* the redelivery queue: pending messages whose deadline passed (or that were nak'ed), in the
  order they are to be sent again;
* the bulk rule for a run of plain acks (:meth:`PendingAcks.ack_run`).

Must not know: the stream or its store, the network, the consumer's delivery cursor (it asks the
``delivered_upto`` function it is given, only when nothing is left pending), advisories, or what
an ack means for retention. Sans-IO and clock-free: times are given (ns since the epoch).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import msgspec

from jetpy.jetstream.consumers.acks import ack_sequences

__all__ = ["DEFAULT_ACK_WAIT", "EXPIRE_BUDGET", "Pending", "PendingAcks"]

DEFAULT_ACK_WAIT: Final = 30_000_000_000
"""Ack wait of a consumer that sets none (ns): nats-server's default, 30 s."""

EXPIRE_BUDGET: Final = 4096
"""Deadlines one :meth:`PendingAcks.expire` call handles (stale ones included); the rest stay
due, so the consumer's timer fires again at once, after the loop served everyone else: 100,000
ack waits running out together are handled in slices of a few milliseconds."""


class Pending(msgspec.Struct, gc=False):  # a C-level struct: one is made per delivery
    consumer_seq: int  # consumer sequence of the first delivery
    ts: int  # last delivery (or in-progress) time (ns)
    deliveries: int
    deadline: int  # when it is redelivered if not acked (ns)


# a redelivery deadline: (deadline, stream seq, the delivery time it was armed for); live only
# while the message is pending with that very deadline and delivery time
_Deadline = tuple[int, int, int]


class PendingAcks:
    """``delivered_upto()``: (consumer seq, stream seq) of everything delivered so far, where the
    floor goes when nothing is left pending."""

    def __init__(
        self,
        delivered_upto: Callable[[], tuple[int, int]],
        ack_wait: int = 0,
        backoff: list[int] | None = None,
    ) -> None:
        self._delivered_upto = delivered_upto
        # pending and redeliver_queue are never rebound: a caller may keep them (read-only)
        self.pending: dict[int, Pending] = {}  # stream seq -> pending ack, ascending
        self.ack_floor_consumer_seq = 0
        self.ack_floor_stream_seq = 0
        # stream seqs due for redelivery, in order (read-only outside: may hold acked seqs, which
        # next_redelivery skips); _queued: the live ones, for de-duplication
        self.redeliver_queue: deque[int] = deque()
        self._queued: set[int] = set()
        self._order: deque[int] = deque()  # pending stream seqs, ascending, lazily pruned
        self._first_deadlines: deque[_Deadline] = deque()  # first deliveries' (one ack wait: a FIFO)
        self._other_deadlines: list[_Deadline] = []  # a heap: naks with delay, backoff, restored state
        # the stream seqs whose pending ack changed since take_changes (None: not recorded; a
        # replicated consumer's leader records them to replicate its state as changes)
        self.journal: set[int] | None = None
        self.configure(ack_wait, backoff or [])

    def configure(self, ack_wait: int, backoff: list[int]) -> None:
        """The consumer's ack wait (0: the default) and backoff steps; deadlines already armed keep
        their time."""
        self._ack_wait = ack_wait or DEFAULT_ACK_WAIT
        self._backoff = backoff
        self.first_wait = self.ack_wait(1)

    def ack_wait(self, deliveries: int) -> int:
        """How long the ``deliveries``-th delivery of a message waits for its ack (ns)."""
        backoff = self._backoff
        if backoff:
            return backoff[min(deliveries, len(backoff)) - 1]
        return self._ack_wait

    # -- state ----------------------------------------------------------------------------------

    def restore(
        self,
        floor_consumer_seq: int,
        floor_stream_seq: int,
        pending: Mapping[int, tuple[int, int]],
        redelivered: Mapping[int, int],
    ) -> None:
        """Start from persisted state: the floor, pending ``{stream seq: (consumer seq, ts)}`` and
        ``{stream seq: redeliveries}``; every deadline is re-armed from its delivery time."""
        self.ack_floor_consumer_seq = floor_consumer_seq
        self.ack_floor_stream_seq = floor_stream_seq
        for sseq in sorted(pending):
            cseq, ts = pending[sseq]
            dc = redelivered.get(sseq, 0) + 1
            self.pending[sseq] = p = Pending(cseq, ts, dc, ts + self.ack_wait(dc))
            self._order.append(sseq)
            heapq.heappush(self._other_deadlines, (p.deadline, sseq, ts))

    def persisted(self) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
        """What :meth:`restore` takes back: pending ``{stream seq: (consumer seq, ts)}`` and
        ``{stream seq: redeliveries}`` of the messages delivered more than once."""
        return self.persist(self.pending)

    @staticmethod
    def persist(pending: Mapping[int, Pending]) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
        """:meth:`persisted` of a copy of :attr:`pending` (one pass over every entry: the part of
        a snapshot that may run on a worker thread)."""
        return (
            {s: (p.consumer_seq, p.ts) for s, p in pending.items()},
            {s: p.deliveries - 1 for s, p in pending.items() if p.deliveries > 1},
        )

    def take_changes(self) -> tuple[list[int], list[int]]:
        """What changed since the last call (``journal`` on): the pending acks set or changed,
        flat ``[stream seq, consumer seq, ts, deliveries, ...]``, and the stream seqs no longer
        pending."""
        touched = self.journal
        if not touched:
            return [], []
        self.journal = set()
        pending = self.pending
        upserts: list[int] = []
        gone: list[int] = []
        for seq in sorted(touched):
            p = pending.get(seq)
            if p is None:
                gone.append(seq)
            else:
                upserts += (seq, p.consumer_seq, p.ts, p.deliveries)
        return upserts, gone

    def num_redelivered(self) -> int:
        return sum(1 for p in self.pending.values() if p.deliveries > 1)

    # -- deliveries -----------------------------------------------------------------------------

    def delivered(self, seq: int, consumer_seq: int, now: int) -> None:
        """A first delivery of stream sequence ``seq``."""
        deadline = now + self.first_wait
        self.pending[seq] = Pending(consumer_seq, now, 1, deadline)
        self._order.append(seq)
        self._first_deadlines.append((deadline, seq, now))
        if self.journal is not None:
            self.journal.add(seq)

    def delivered_run(self, seqs: list[int], consumer_seq: int, now: int) -> None:
        """First deliveries of ``seqs`` (ascending), numbered from ``consumer_seq`` on: what
        :meth:`delivered` does for each, in one pass."""
        deadline = now + self.first_wait
        pending = self.pending
        for j, seq in enumerate(seqs, consumer_seq):
            pending[seq] = Pending(j, now, 1, deadline)
        self._order.extend(seqs)
        self._first_deadlines.extend([(deadline, seq, now) for seq in seqs])
        if self.journal is not None:
            self.journal.update(seqs)

    def redelivered(self, p: Pending, seq: int, now: int) -> int:
        """Pending message ``seq`` (``p``) is sent again now; returns its delivery count."""
        p.deliveries += 1
        dc = p.deliveries
        p.ts = now
        backoff = self._backoff  # ack_wait(dc), inline: once per redelivery
        p.deadline = now + (backoff[min(dc, len(backoff)) - 1] if backoff else self._ack_wait)
        heapq.heappush(self._other_deadlines, (p.deadline, seq, now))
        if self.journal is not None:
            self.journal.add(seq)
        return dc

    def in_progress(self, seq: int, now: int) -> None:
        """``+WPI``: the ack wait of pending message ``seq`` starts again now."""
        p = self.pending.get(seq)
        if p is not None:
            p.ts = now
            p.deadline = now + self.ack_wait(p.deliveries)
            heapq.heappush(self._other_deadlines, (p.deadline, seq, now))
            if self.journal is not None:
                self.journal.add(seq)

    def redeliver_at(self, p: Pending, seq: int, deadline: int) -> None:
        """``-NAK`` with a delay: pending message ``seq`` (``p``) comes back at ``deadline``."""
        p.deadline = deadline
        heapq.heappush(self._other_deadlines, (deadline, seq, p.ts))

    # -- the redelivery queue -------------------------------------------------------------------

    def queue_redelivery(self, seq: int) -> None:
        """Send pending message ``seq`` again as soon as possible (once, however often asked)."""
        if seq not in self._queued:
            self._queued.add(seq)
            self.redeliver_queue.append(seq)

    def next_redelivery(self) -> tuple[int, Pending] | None:
        """Take the next queued redelivery that is still pending, or None."""
        queue, queued, pending = self.redeliver_queue, self._queued, self.pending
        while queue:
            seq = queue.popleft()
            queued.discard(seq)
            p = pending.get(seq)
            if p is not None:
                return seq, p
        return None

    def put_back(self, seq: int) -> None:
        """Undo :meth:`next_redelivery` of ``seq`` (taken, then not sent): first in line again."""
        self.redeliver_queue.appendleft(seq)
        self._queued.add(seq)

    def num_queued(self) -> int:
        """How many queued redeliveries are still pending (acked ones leave the queue lazily)."""
        pending = self.pending
        return sum(1 for seq in self._queued if seq in pending)

    # -- deadlines ------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """The earliest live redelivery deadline (stale entries are dropped on the way)."""
        fifo, heap = self._first_deadlines, self._other_deadlines
        pending = self.pending
        while fifo:  # each acked first delivery leaves an entry here to drop
            deadline, seq, ts = fifo[0]
            p = pending.get(seq)
            if p is not None and p.ts == ts and p.deadline == deadline:
                break
            fifo.popleft()
        while heap:
            deadline, seq, ts = heap[0]
            p = pending.get(seq)
            if p is not None and p.ts == ts and p.deadline == deadline:
                break
            heapq.heappop(heap)
        if fifo:
            return min(fifo[0][0], heap[0][0]) if heap else fifo[0][0]
        return heap[0][0] if heap else None

    def expire(
        self, now: int, max_deliver: int, give_up: Callable[[int, int], None], limit: int = EXPIRE_BUDGET
    ) -> bool:
        """Handle the deadlines at or before ``now``, earliest first, at most ``limit`` of them
        (the rest stay due): queue the message for redelivery, or, once it has been delivered
        ``max_deliver`` times (> 0), tell ``give_up(seq, deliveries)`` and :meth:`drop` it.
        Returns whether any was dropped."""
        fifo, heap = self._first_deadlines, self._other_deadlines
        pending = self.pending
        dropped = False
        for _ in range(limit):
            if fifo and fifo[0][0] <= now and (not heap or fifo[0][0] <= heap[0][0]):
                deadline, seq, ts = fifo.popleft()
            elif heap and heap[0][0] <= now:
                deadline, seq, ts = heapq.heappop(heap)
            else:
                return dropped
            p = pending.get(seq)
            if p is None or p.ts != ts or p.deadline != deadline:
                continue
            if max_deliver > 0 and p.deliveries >= max_deliver:
                give_up(seq, p.deliveries)
                self.drop(seq)
                dropped = True
                continue
            self.queue_redelivery(seq)
        return dropped

    # -- acks -----------------------------------------------------------------------------------

    def ack_one(self, seq: int) -> Pending | None:
        """An explicit ack of stream sequence ``seq``: what was pending for it (None if nothing
        was)."""
        p = self.pending.pop(seq, None)
        if p is None:
            return None
        if self.journal is not None:
            self.journal.add(seq)
        self._advance_floor(p.consumer_seq)
        if self._queued:
            self._queued.discard(seq)
        return p

    def ack_upto(self, seq: int, consumer_seq: int) -> list[int] | None:
        """An ack under ``ack_policy: all`` of (``seq``, ``consumer_seq``): everything pending up
        to ``seq`` is acknowledged. Returns those stream sequences, or None for an ack at or
        below the floor (nothing to do)."""
        if consumer_seq <= self.ack_floor_consumer_seq:
            return None
        done: list[int] = []
        order, pending = self._order, self.pending
        while order and order[0] <= seq:
            s = order.popleft()
            if pending.pop(s, None) is not None:
                done.append(s)
        if self.journal is not None:
            self.journal.update(done)
        self.ack_floor_consumer_seq = max(self.ack_floor_consumer_seq, consumer_seq)
        self.ack_floor_stream_seq = max(self.ack_floor_stream_seq, seq)
        if not pending:
            self._advance_floor(consumer_seq)
        if self._queued:
            self._queued.difference_update(done)
        return done

    def ack_run(self, subjects: Iterable[bytes]) -> bool:
        """A run of plain explicit acks (their ack subjects as received; others are ignored), in
        order, applied as :meth:`ack_one` would one by one, in one pass with one floor update:
        the floor moves iff one of them acked the message just above it, or nothing is left
        pending. Returns whether any of them acked a pending message."""
        pending = self.pending
        queued = self._queued
        floor_next = self.ack_floor_consumer_seq + 1  # an ack of this consumer sequence moves the floor
        moved = done = False
        journal = self.journal
        for subject in subjects:
            seqs = ack_sequences(subject)
            if seqs is None:
                continue  # not an ack subject
            p = pending.pop(seqs[0], None)
            if p is not None:
                done = True
                if journal is not None:
                    journal.add(seqs[0])
                if p.consumer_seq == floor_next:
                    moved = True
                if queued:
                    queued.discard(seqs[0])
        if done and (moved or not pending):
            self._advance_floor(self.ack_floor_consumer_seq + 1)
        return done

    def drop(self, seq: int) -> bool:
        """Give up on pending message ``seq`` (gone from the stream, or out of deliveries), as if
        acked; returns whether it was pending."""
        self._queued.discard(seq)
        return self.ack_one(seq) is not None

    def set_floor(self, consumer_seq: int, seq: int) -> None:
        """Put the floor at (``consumer_seq``, ``seq``): just below where a new consumer starts,
        or, under ``ack_policy: none`` (a delivery is its own ack), at the last delivery."""
        self.ack_floor_consumer_seq = consumer_seq
        self.ack_floor_stream_seq = seq

    def _advance_floor(self, consumer_seq: int) -> None:
        """After the message of ``consumer_seq`` left pending: everything below the lowest pending
        message is acknowledged (pending is ordered by stream sequence); with nothing pending,
        everything delivered is."""
        pending = self.pending
        if not pending:
            self._order.clear()
            floor_c, floor_s = self._delivered_upto()
        else:
            if consumer_seq != self.ack_floor_consumer_seq + 1:
                return  # only the message at the floor moves it (nats-server's rule)
            order = self._order
            while order[0] not in pending:
                order.popleft()
            first = order[0]
            floor_c, floor_s = pending[first].consumer_seq - 1, first - 1
        if floor_c > self.ack_floor_consumer_seq:
            self.ack_floor_consumer_seq = floor_c
        if floor_s > self.ack_floor_stream_seq:
            self.ack_floor_stream_seq = floor_s
