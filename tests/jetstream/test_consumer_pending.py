"""PendingAcks on its own: the pending acks, the ack floor and its rules, redelivery deadlines
(FIFO and heap, stale entries skipped), the redelivery queue and the bulk rule for runs of plain
acks. Sans-IO with an invented clock; "everything delivered" is a value the test moves by hand."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.jetstream.consumers.acks import ack_prefix, ack_reply
from jetpy.jetstream.consumers.pending import DEFAULT_ACK_WAIT, PendingAcks

WAIT = 1_000
T0 = 1_000_000


class Delivered:
    """What a consumer would answer for "everything delivered": (consumer seq, stream seq)."""

    def __init__(self) -> None:
        self.upto = (0, 0)

    def __call__(self) -> tuple[int, int]:
        return self.upto


def tracker(ack_wait: int = WAIT, backoff: list[int] | None = None) -> tuple[PendingAcks, Delivered]:
    d = Delivered()
    return PendingAcks(d, ack_wait, backoff), d


def deliver(acks: PendingAcks, d: Delivered, seqs: list[int], now: int = T0, cseq0: int = 1) -> None:
    for j, seq in enumerate(seqs, cseq0):
        acks.delivered(seq, j, now)
    d.upto = (cseq0 + len(seqs) - 1, seqs[-1])


def subject(sseq: int, cseq: int) -> bytes:
    return ack_reply(ack_prefix("S", "C"), 1, sseq, cseq, 0, 0).encode()


def floor(acks: PendingAcks) -> tuple[int, int]:
    return acks.ack_floor_consumer_seq, acks.ack_floor_stream_seq


def test_ack_wait_and_backoff() -> None:
    acks, _ = tracker(ack_wait=0)
    assert acks.ack_wait(1) == DEFAULT_ACK_WAIT
    acks.configure(5, [10, 20])
    assert [acks.ack_wait(n) for n in (1, 2, 3, 9)] == [10, 20, 20, 20]
    assert acks.first_wait == 10


def test_acks_in_order_move_the_floor_to_everything_delivered() -> None:
    acks, d = tracker()
    deliver(acks, d, [10, 11, 12])
    assert acks.ack_one(10) is not None
    assert floor(acks) == (1, 10)
    assert acks.ack_one(10) is None  # a double ack changes nothing
    acks.ack_one(11)
    acks.ack_one(12)
    assert floor(acks) == (3, 12) and not acks.pending


def test_only_the_message_at_the_floor_moves_it() -> None:
    acks, d = tracker()
    deliver(acks, d, [1, 2, 3, 4])
    acks.ack_one(3)
    assert floor(acks) == (0, 0)
    acks.ack_one(1)
    assert floor(acks) == (1, 1)  # 2 is still pending
    acks.ack_one(2)
    assert floor(acks) == (3, 3)  # up to just below 4


def test_with_nothing_pending_the_floor_is_everything_delivered() -> None:
    acks, d = tracker()
    deliver(acks, d, [5])
    d.upto = (1, 9)  # the cursor moved past messages the filter skipped
    acks.ack_one(5)
    assert floor(acks) == (1, 9)


def test_ack_upto_acks_everything_up_to_it() -> None:
    acks, d = tracker()
    deliver(acks, d, [1, 2, 3, 4])
    assert acks.ack_upto(2, 2) == [1, 2]
    assert floor(acks) == (2, 2)
    assert acks.ack_upto(1, 1) is None  # at or below the floor
    assert acks.ack_upto(4, 4) == [3, 4]
    assert floor(acks) == (4, 4) and not acks.pending


def test_set_floor() -> None:
    acks, _ = tracker()
    acks.set_floor(0, 41)
    assert floor(acks) == (0, 41)


def test_deadlines_come_in_order_and_stale_ones_are_skipped() -> None:
    acks, d = tracker()
    deliver(acks, d, [1, 2], now=T0)
    deliver(acks, d, [3], now=T0 + 10, cseq0=3)
    assert acks.next_deadline() == T0 + WAIT
    acks.ack_one(1)
    acks.ack_one(2)
    assert acks.next_deadline() == T0 + 10 + WAIT  # the acked ones' entries are dropped
    acks.in_progress(3, T0 + 500)  # +WPI re-arms it
    assert acks.next_deadline() == T0 + 500 + WAIT
    acks.ack_one(3)
    assert acks.next_deadline() is None


def test_expire_queues_redeliveries_and_gives_up_at_max_deliver() -> None:
    acks, d = tracker()
    deliver(acks, d, [1, 2, 3])
    p2 = acks.pending[2]
    acks.redelivered(p2, 2, T0)  # 2 was delivered twice
    given_up: list[tuple[int, int]] = []
    assert not acks.expire(T0 + WAIT - 1, 2, lambda s, n: given_up.append((s, n)))
    assert acks.expire(T0 + WAIT, 2, lambda s, n: given_up.append((s, n)))
    assert given_up == [(2, 2)]
    assert 2 not in acks.pending
    assert list(acks.redeliver_queue) == [1, 3] and acks.num_queued() == 2
    # a redelivery re-arms from its own delivery time, with the next backoff step
    taken = acks.next_redelivery()
    assert taken is not None and taken[0] == 1
    assert acks.redelivered(taken[1], 1, T0 + 2 * WAIT) == 2
    assert acks.pending[1].deadline == T0 + 3 * WAIT


def test_identical_heap_entries_give_up_once() -> None:
    acks, d = tracker()
    deliver(acks, d, [1])
    p = acks.pending[1]
    acks.redeliver_at(p, 1, T0 + 5)
    acks.redeliver_at(p, 1, T0 + 5)  # the same nak twice
    given_up: list[tuple[int, int]] = []
    acks.expire(T0 + 5, 1, lambda s, n: given_up.append((s, n)))
    assert given_up == [(1, 1)]


def test_the_redelivery_queue_skips_acked_messages_and_takes_one_back() -> None:
    acks, d = tracker()
    deliver(acks, d, [1, 2, 3])
    for s in (2, 1, 3, 2):
        acks.queue_redelivery(s)
    assert list(acks.redeliver_queue) == [2, 1, 3]  # once each
    acks.ack_one(2)
    assert acks.num_queued() == 2
    taken = acks.next_redelivery()
    assert taken is not None and taken[0] == 1
    acks.put_back(1)
    taken = acks.next_redelivery()
    assert taken is not None and taken[0] == 1
    acks.drop(3)
    assert acks.next_redelivery() is None and not acks.redeliver_queue


def test_restore_and_persisted_round_trip() -> None:
    acks, d = tracker(backoff=[WAIT, 2 * WAIT])
    acks.restore(4, 9, {12: (6, T0), 10: (5, T0 + 1)}, {12: 1})
    assert floor(acks) == (4, 9)
    assert list(acks.pending) == [10, 12]
    assert acks.pending[12].deliveries == 2 and acks.pending[12].deadline == T0 + 2 * WAIT
    assert acks.num_redelivered() == 1
    assert acks.persisted() == ({10: (5, T0 + 1), 12: (6, T0)}, {12: 1})
    assert acks.next_deadline() == T0 + 1 + WAIT
    d.upto = (6, 12)
    acks.ack_one(10)
    assert floor(acks) == (5, 11)


def test_a_run_ignores_what_is_not_an_ack_subject() -> None:
    acks, d = tracker()
    deliver(acks, d, [1, 2])
    assert not acks.ack_run([b"$JS.ACK.S.C.x.1.1.0.0", b"foo", subject(7, 7)])
    assert acks.ack_run([b"foo", subject(1, 1)])
    assert floor(acks) == (1, 1)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 12),
    acked=st.lists(st.integers(1, 12), max_size=20),
    queued=st.lists(st.integers(1, 12), max_size=4),
    seed=st.integers(0, 2**32),
)
def test_a_run_of_acks_equals_acking_one_by_one(
    n: int, acked: list[int], queued: list[int], seed: int
) -> None:
    """ack_run's single floor update ends where ack_one one by one does, from any floor."""
    rnd = random.Random(seed)
    seqs = sorted(rnd.sample(range(1, 40), n))
    pre = [rnd.choice(seqs) for _ in range(rnd.randrange(n + 1))]  # acked before the run
    one, d1 = tracker()
    run, d2 = tracker()
    for acks, d in ((one, d1), (run, d2)):
        deliver(acks, d, seqs)
        for s in pre:
            acks.ack_one(s)
        for i in queued:
            if i <= n:
                acks.queue_redelivery(seqs[i - 1])
    subjects = [subject(seqs[i - 1], i) for i in acked if i <= n]
    expect = [one.ack_one(seqs[i - 1]) is not None for i in acked if i <= n]
    assert run.ack_run(subjects) == any(expect)
    assert floor(run) == floor(one)
    assert run.pending == one.pending
    assert run.num_queued() == one.num_queued()
