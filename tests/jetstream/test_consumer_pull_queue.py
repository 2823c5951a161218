"""WaitingRequests on its own: request limits, no_wait answers, round robin, a lone request's bulk
run, byte budgets, expiry, request heartbeats and what a deleted consumer tells its requesters.
Sans-IO with an invented clock and a fake message source."""

from __future__ import annotations

from jetpy.jetstream.consumers.pull import WaitingRequests

from .delivery_fakes import Recorder, Source, msg

T0 = 1_000_000_000_000
S = 1_000_000_000  # one second, ns


def queue(
    max_waiting: int = 0,
    max_batch: int = 0,
    max_expires: int = 0,
    max_bytes: int = 0,
    gone: set[str] | None = None,
) -> tuple[WaitingRequests, Recorder]:
    rec = Recorder()
    w = WaitingRequests(rec, lambda reply: reply not in (gone or set()))
    w.configure(max_waiting, max_batch, max_expires, max_bytes)
    return w, rec


def add(w: WaitingRequests, reply: str, body: bytes, now: int = T0, nothing: bool = False) -> bool:
    req = w.parse(reply, body, now)
    assert req is not None
    return w.add(req, now, 0 if nothing else 1_000)


def test_a_malformed_request_is_answered_400() -> None:
    w, rec = queue()
    assert w.parse("r", b"{bad", T0) is None
    assert rec.statuses()[0][1].startswith("400 Bad Request")


def test_limits_are_answered_409() -> None:
    w, rec = queue(max_waiting=1, max_batch=10, max_expires=5 * S, max_bytes=100)
    assert not add(w, "a", b'{"batch": 11}')
    assert not add(w, "b", b'{"batch": 1, "expires": 6000000000}')
    assert not add(w, "c", b'{"batch": 1, "max_bytes": 101}')
    assert add(w, "d", b"1")
    assert not add(w, "e", b"1")
    assert rec.statuses() == [
        ("a", "409 Exceeded MaxRequestBatch of 10"),
        ("b", "409 Exceeded MaxRequestExpires of 5s"),
        ("c", "409 Exceeded MaxRequestMaxBytes of 100"),
        ("e", "409 Exceeded MaxWaiting"),
    ]
    assert len(w) == 1


def test_no_wait_with_nothing_available() -> None:
    w, rec = queue()
    assert not add(w, "a", b'{"batch": 5, "no_wait": true}', nothing=True)
    assert rec.statuses() == [("a", "404 No Messages")]
    # with expires it waits (for the expiry, but is answered as soon as it can be)
    assert add(w, "b", b'{"batch": 5, "no_wait": true, "expires": 1000000000}', nothing=True)
    assert len(w) == 1


def test_a_lone_request_takes_a_bulk_run_and_no_wait_is_answered_after() -> None:
    w, rec = queue()
    src = Source([msg(i) for i in range(1, 4)])
    assert add(w, "a", b'{"batch": 5, "no_wait": true}')
    assert w.serve(src, T0) == 3
    assert src.bursts == [3]
    assert len(w) == 0
    assert rec.sent[-1].status == "404 No Messages"  # nats-server 2.10+ (2.9: 408 with what is left)
    assert add(w, "b", b'{"batch": 5, "no_wait": true}')
    assert w.serve(src, T0) == 0
    assert rec.statuses()[-1] == ("b", "404 No Messages")


def test_no_wait_keeps_waiting_while_there_is_no_room() -> None:
    w, _ = queue()
    src = Source([msg(1), msg(2)], room=1)
    assert add(w, "a", b'{"batch": 5, "no_wait": true}')
    assert w.serve(src, T0) == 1
    assert len(w) == 1  # at max_ack_pending: waiting for acks, as nats-server


def test_round_robin_over_waiting_requests() -> None:
    w, _ = queue()
    src = Source([], bulk=False)
    assert add(w, "a", b"2") and add(w, "b", b"3")
    src.msgs = [msg(i) for i in range(1, 10)]
    assert w.serve(src, T0) == 5
    assert src.deliveries == [("a", 1), ("b", 2), ("a", 3), ("b", 4), ("b", 5)]
    assert len(w) == 0


def test_requesters_that_are_gone_are_dropped() -> None:
    w, _ = queue(gone={"a"})
    src = Source([msg(1)])
    assert add(w, "a", b"1") and add(w, "b", b"1")
    assert w.serve(src, T0) == 1
    assert src.deliveries == [("b", 1)]
    assert len(w) == 0


def test_max_bytes_budget() -> None:
    w, rec = queue()
    src = Source([msg(1, 9), msg(2, 9), msg(3, 40)])  # 10, 10 and 41 bytes counted
    assert add(w, "a", b'{"batch": 10, "max_bytes": 25}')
    assert w.serve(src, T0) == 2
    assert rec.statuses() == [("a", "409 Message Size Exceeds MaxBytes")]
    assert b"Nats-Pending-Bytes: 5\r\n" in rec.sent[-1].headers
    # the message that did not fit is the next one out
    assert add(w, "b", b'{"batch": 1, "max_bytes": 100}')
    assert w.serve(src, T0) == 1
    assert src.deliveries[-1] == ("b", 3)


def test_a_spent_byte_budget_ends_the_request() -> None:
    w, rec = queue()
    src = Source([msg(i, 9) for i in range(1, 5)])
    assert add(w, "a", b'{"batch": 10, "max_bytes": 20}')
    assert w.serve(src, T0) == 2
    assert len(w) == 0 and rec.statuses() == []


def test_expiry_and_request_heartbeats() -> None:
    w, rec = queue()
    assert add(w, "a", b'{"batch": 1, "expires": 4000000000, "idle_heartbeat": 1000000000}')
    assert add(w, "b", b'{"batch": 1, "expires": 10000000000}')
    assert w.next_deadline() == T0 + S
    assert not w.expire(T0 + S, 3, 9)
    assert rec.statuses() == [("a", "100 Idle Heartbeat")]
    assert b"Nats-Last-Consumer: 3\r\nNats-Last-Stream: 9\r\n" in rec.sent[-1].headers
    assert w.next_deadline() == T0 + 2 * S
    assert w.serve(Source([]), T0 + 4 * S) == 0  # an expired request is left to expire()
    assert w.expire(T0 + 4 * S, 3, 9)
    assert rec.statuses()[-1] == ("a", "408 Request Timeout")
    assert len(w) == 1 and w.next_deadline() == T0 + 10 * S


def test_closing_tells_requesters_only_when_deleted() -> None:
    w, rec = queue()
    add(w, "a", b"1")
    w.close(deleted=False)
    assert len(w) == 0 and rec.sent == []
    add(w, "b", b"1")
    w.close(deleted=True)
    assert rec.statuses() == [("b", "409 Consumer Deleted")]
