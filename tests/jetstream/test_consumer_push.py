"""PushDelivery on its own: interest, the push loop (bulk runs of PUSH_BURST, else one by one),
flow control (request after FC_WINDOW bytes, stalled at twice that until answered) and idle
heartbeats. Sans-IO with an invented clock and a fake message source."""

from __future__ import annotations

from jetpy.jetstream.consumers.delivery import PUMP_BUDGET
from jetpy.jetstream.consumers.push import (
    DIRECT_FC_WINDOW,
    FC_WINDOW,
    PUSH_BURST,
    PushDelivery,
    flow_control_prefix,
)

from .delivery_fakes import Recorder, Source, msg

T0 = 1_000_000
HB = 5_000


def push(flow_control: bool = False, idle_heartbeat: int = 0) -> tuple[PushDelivery, Recorder]:
    rec = Recorder()
    p = PushDelivery("S", "C", rec, T0)
    p.configure("deliver", flow_control, idle_heartbeat)
    return p, rec


def test_nothing_goes_out_while_nobody_listens() -> None:
    p, _ = push()
    src = Source([msg(1)])
    assert p.pump(src, T0) == 0
    p.set_active(True, T0)
    assert p.pump(src, T0) == 1
    assert src.deliveries == [("deliver", 1)]


def test_bulk_runs_are_push_burst_long_and_one_by_one_otherwise() -> None:
    p, _ = push()
    p.set_active(True, T0)
    src = Source([msg(i) for i in range(1, PUSH_BURST + 11)])
    assert p.pump(src, T0) == PUSH_BURST + 10
    assert src.bursts == [PUSH_BURST, 10]
    slow = Source([msg(i) for i in range(1, 4)], bulk=False)
    assert p.pump(slow, T0) == 3
    assert slow.bursts == [] and [s for _, s in slow.deliveries] == [1, 2, 3]


def test_flow_control_asks_after_a_window_and_stalls_at_two() -> None:
    p, rec = push(flow_control=True)
    p.set_active(True, T0)
    size = 64 * 1024
    n = 4 * FC_WINDOW // size  # more than two windows' worth
    src = Source([msg(i, size - 1) for i in range(1, n + 1)], bulk=False)  # subject "s" + data
    sent = p.pump(src, T0)
    assert sent == 2 * FC_WINDOW // size  # stalled at twice the window
    requests = [s for s in rec.sent if s.status == "100 FlowControl Request"]
    assert len(requests) == 1
    reply = requests[0].reply
    assert reply == flow_control_prefix("S", "C") + "1" and requests[0].route == "deliver"
    assert p.stalled() and p.pump(src, T0) == 0
    assert not p.flow_control_reply(reply + "0")  # not the outstanding request
    assert p.flow_control_reply(reply)
    assert not p.stalled()
    assert p.pump(src, T0) == sent  # the next two windows
    assert [s.reply for s in rec.sent if s.status == "100 FlowControl Request"][1] == flow_control_prefix(
        "S", "C"
    ) + "2"


def test_a_direct_consumer_has_a_smaller_window() -> None:
    """A mirror's or source's own consumer: its receiver answers on the next loop turn, so a
    small window is what one loop turn copies at most."""
    rec = Recorder()
    p = PushDelivery("S", "C", rec, T0)
    p.configure("deliver", True, 0, DIRECT_FC_WINDOW)
    p.set_active(True, T0)
    size = 1024
    src = Source([msg(i, size - 1) for i in range(1, 4 * FC_WINDOW // size)], bulk=False)
    assert p.pump(src, T0) == 2 * DIRECT_FC_WINDOW // size
    assert p.stalled()


def test_flow_control_counts_bulk_runs_too() -> None:
    p, rec = push(flow_control=True)
    p.set_active(True, T0)
    size = 1024
    src = Source([msg(i, size - 1) for i in range(1, 4 * FC_WINDOW // size)])
    sent = p.pump(src, T0)
    assert sent == min(PUMP_BUDGET, 2 * FC_WINDOW // size)  # a pump sends at most its budget
    while src.more:  # the consumer's host pumps it again on the next loop turn
        src.more = False
        sent += p.pump(src, T0)
    # a bulk run is counted after it went out: the stall is checked between runs
    assert sent == 2 * FC_WINDOW // size
    assert set(src.bursts) == {PUSH_BURST}
    assert sum(1 for s in rec.sent if s.status == "100 FlowControl Request") == 1


def test_a_new_subscriber_voids_outstanding_flow_control() -> None:
    p, _ = push(flow_control=True)
    p.set_active(True, T0)
    size = 64 * 1024
    src = Source([msg(i, size - 1) for i in range(1, 4 * FC_WINDOW // size)], bulk=False)
    p.pump(src, T0)
    assert p.stalled()
    p.set_active(False, T0 + 1)
    p.set_active(True, T0 + 2)
    assert not p.stalled()


def test_idle_heartbeats() -> None:
    p, rec = push(idle_heartbeat=HB)
    assert p.heartbeat_deadline() is None  # nobody listens
    p.set_active(True, T0)
    assert p.heartbeat_deadline() == T0 + HB
    assert not p.heartbeat_due(T0 + HB - 1)
    p.pump(Source([msg(1)]), T0 + 10)  # a delivery resets the idle time
    assert p.heartbeat_deadline() == T0 + 10 + HB
    assert p.heartbeat_due(T0 + 10 + HB)
    p.heartbeat(T0 + 10 + HB, 7, 42)
    hb = rec.sent[-1]
    assert hb.route == "deliver" and hb.status == "100 Idle Heartbeat"
    assert b"Nats-Last-Consumer: 7\r\n" in hb.headers and b"Nats-Last-Stream: 42\r\n" in hb.headers
    assert b"Nats-Consumer-Stalled" not in hb.headers
    assert p.heartbeat_deadline() == T0 + 10 + 2 * HB


def test_a_heartbeat_names_the_flow_control_delivery_is_stalled_on() -> None:
    p, rec = push(flow_control=True, idle_heartbeat=HB)
    p.set_active(True, T0)
    size = 64 * 1024
    p.pump(Source([msg(i, size - 1) for i in range(1, 4 * FC_WINDOW // size)], bulk=False), T0)
    fc = next(s.reply for s in rec.sent if s.status == "100 FlowControl Request")
    p.heartbeat(T0 + HB, 1, 1)
    assert f"Nats-Consumer-Stalled: {fc}\r\n".encode() in rec.sent[-1].headers


def test_inactivity_counts_from_when_the_last_listener_left() -> None:
    p, _ = push()
    assert p.inactive_deadline(100) == T0 + 100
    p.set_active(True, T0 + 5)
    assert p.inactive_deadline(100) is None
    p.set_active(False, T0 + 50)
    assert p.inactive_deadline(100) == T0 + 150
