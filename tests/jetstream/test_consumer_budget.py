"""No consumer request holds the loop: every delivery loop stops after ``PUMP_BUDGET`` messages
and says so (``more``), and ``PendingAcks.expire`` handles at most its limit of deadlines per
call, so a pull request for 100,000 messages, a push backlog or 100,000 ack waits running out
at once are worked through in slices, the loop serving others in between. Sans-IO: the push and
pull loops with a fake source, the pending acks with an invented clock, and a consumer on a
memory stream."""

from __future__ import annotations

from typing import Any

from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.delivery import PUMP_BUDGET
from jetpy.jetstream.consumers.pending import EXPIRE_BUDGET, PendingAcks
from jetpy.jetstream.consumers.pull import WaitingRequests
from jetpy.jetstream.consumers.push import PushDelivery
from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.validate import check_consumer_config, check_stream_config
from jetpy.store import MemoryStore, StoreConfig, StoredMsg

from .delivery_fakes import Recorder, Source, msg

T0 = 1_000_000_000_000
N = 3 * PUMP_BUDGET + 5


def test_a_large_pull_request_is_served_in_slices_and_no_wait_is_not_answered_early() -> None:
    rec = Recorder()
    w = WaitingRequests(rec, lambda reply: True)
    w.configure(0, 0, 0, 0)
    for reply, body in (("big", b'{"batch": %d}' % N), ("nw", b'{"batch": 1, "no_wait": true}')):
        req = w.parse(reply, body, T0)
        assert req is not None and w.add(req, T0, N + 1)  # what there is: N + 1 messages
    src = Source([msg(i) for i in range(1, N + 2)])
    slices = []
    while True:
        src.more = False
        slices.append(w.serve(src, T0))
        if not src.more:
            break
        assert rec.statuses() == []  # no 404/408 for the no_wait request while more is left
    assert slices[:3] == [PUMP_BUDGET] * 3 and sum(slices) == N + 1
    assert [to for to, _ in src.deliveries].count("big") == N


def test_a_push_backlog_is_sent_in_slices() -> None:
    p = PushDelivery("S", "C", Recorder(), T0)
    p.configure("dlv", False, 0)
    p.set_active(True, T0)
    for bulk in (True, False):
        src = Source([msg(i) for i in range(1, N + 1)], bulk=bulk)
        slices = []
        while True:
            src.more = False
            slices.append(p.pump(src, T0))
            if not src.more:
                break
        assert slices[:3] == [PUMP_BUDGET] * 3 and sum(slices) == N


def test_expire_handles_at_most_its_limit_and_leaves_the_rest_due() -> None:
    acks = PendingAcks(lambda: (0, 0), ack_wait=10)
    acks.delivered_run(list(range(1, 10_001)), 1, T0)
    handled = 0
    while True:
        acks.expire(T0 + 10, 0, lambda s, d: None, limit=3000)
        queued = acks.num_queued()
        assert queued - handled <= 3000
        if queued == handled:
            break
        handled = queued
        if handled < 10_000:
            assert acks.next_deadline() == T0 + 10  # still due: the host's timer fires again at once
    assert handled == 10_000


class Host:
    def __init__(self) -> None:
        self.sent = 0

    def send(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes) -> None:
        self.sent += 1

    def send_batch(self, route: str, msgs: list[StoredMsg], replies: list[bytes]) -> None:
        self.sent += len(msgs)

    def has_interest(self, subject: str) -> bool:
        return True

    def advisory(self, subject: str, body: dict[str, Any]) -> None:
        pass

    def acked(self, consumer: Consumer, seqs: list[int]) -> None:
        pass

    def state_changed(self, consumer: Consumer) -> None:
        pass

    def confirm(self, consumer: Consumer, reply: str, stream_seq: int) -> None:
        pass


def test_a_redelivery_storm_of_removed_messages_is_dropped_in_slices() -> None:
    n = EXPIRE_BUDGET + PUMP_BUDGET
    scfg = check_stream_config(StreamConfig(name="S", subjects=["s"], storage="memory"))
    store = MemoryStore(StoreConfig("S", "memory"))
    for _ in range(n):
        store.store_msg("s", b"", b"x")
    s = Stream(scfg, store, T0)
    cfg = check_consumer_config(
        scfg, ConsumerConfig(durable_name="D", ack_policy="explicit", ack_wait=10, max_ack_pending=-1)
    )
    host = Host()
    c = Consumer(s, "D", cfg, T0, host, T0)
    c.request("inbox", b'{"batch": %d}' % n, T0)
    pumps = 1
    while c.more:
        c.pump(T0)
        pumps += 1
    assert host.sent == n and len(c.pending) == n and pumps == n // PUMP_BUDGET
    store.purge()
    c.stream_changed()
    c.request("inbox", b'{"batch": 10}', T0 + 20)
    ticks = pumps = 0
    while c.pending:
        c.tick(T0 + 20)  # expires a slice of deadlines, then drops a slice of gone messages
        ticks += 1
        while c.more:
            c.pump(T0 + 20)
            pumps += 1
        assert ticks < 100
    assert ticks == 2 and pumps >= n // PUMP_BUDGET - 2 and host.sent == n
