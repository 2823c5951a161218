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


# -- as nats-server 2.10+ takes requests -----------------------------------------------------------


def test_numbers_are_kept_as_requested() -> None:
    w, rec = queue()
    assert add(w, "neg", b'{"batch": 1, "expires": -5}')  # has already expired
    assert add(w, "zero", b'{"batch": -3, "max_bytes": -1, "expires": 1000000000}')
    assert w.serve(Source([]), T0) == 0
    w.expire(T0, 0, 0)
    assert rec.statuses() == [("neg", "408 Request Timeout")]
    w.expire(T0 + S, 0, 0)
    assert rec.sent[-1].status == "408 Request Timeout"
    assert b"Nats-Pending-Messages: -3\r\nNats-Pending-Bytes: -1\r\n" in rec.sent[-1].headers
    # a batch of 0 or less still takes one message
    w2, _ = queue()
    src = Source([msg(1), msg(2)])
    assert add(w2, "z", b'{"batch": 0}')
    assert w2.serve(src, T0) == 1 and len(w2) == 0


def test_a_batch_ending_with_bytes_to_spare_says_so() -> None:
    w, rec = queue()
    src = Source([msg(i, 9) for i in range(1, 4)])
    assert add(w, "a", b'{"batch": 2, "max_bytes": 100}')
    assert w.serve(src, T0) == 2
    assert rec.statuses() == [("a", "409 Batch Completed")]
    assert b"Nats-Pending-Messages: 0\r\nNats-Pending-Bytes: 80\r\n" in rec.sent[-1].headers


def test_no_wait_behind_requests_wanting_everything_is_told_requests_pending() -> None:
    w, rec = queue()
    assert add(w, "a", b'{"batch": 10, "expires": 5000000000}')
    req = w.parse("b", b'{"batch": 1, "no_wait": true}', T0)
    assert req is not None and not w.add(req, T0, 3)  # 3 available, 10 already asked for
    assert rec.statuses() == [("b", "408 Requests Pending")]
    req = w.parse("c", b'{"batch": 1, "no_wait": true}', T0)
    assert req is not None and w.add(req, T0, 11)


def test_no_wait_with_expires_waits_for_a_message_then_ends() -> None:
    w, rec = queue()
    assert add(w, "a", b'{"batch": 5, "no_wait": true, "expires": 5000000000}', nothing=True)
    assert w.serve(Source([]), T0) == 0 and rec.statuses() == []  # nothing yet: it waits
    assert w.serve(Source([msg(1), msg(2)]), T0 + S) == 2
    assert rec.statuses() == [("a", "404 No Messages")] and len(w) == 0


def test_a_full_queue_drops_abandoned_requests_first_and_spares_heartbeat_requesters_the_409() -> None:
    gone: set[str] = set()
    w, rec = queue(max_waiting=1, gone=gone)
    assert add(w, "a", b'{"batch": 1}')
    gone.add("a")  # its requester unsubscribed
    assert add(w, "b", b'{"batch": 1}') and len(w) == 1
    assert not add(w, "c", b'{"batch": 1, "expires": 4000000000, "idle_heartbeat": 1000000000}')
    assert rec.statuses() == []  # full, but a requester with heartbeats is not told (nats-server)
    assert not add(w, "d", b'{"batch": 1}')
    assert rec.statuses() == [("d", "409 Exceeded MaxWaiting")]


def test_a_full_queue_is_swept_at_most_once_a_second() -> None:
    gone: set[str] = set()
    w, rec = queue(max_waiting=1, gone=gone)
    assert add(w, "a", b'{"batch": 1}')
    gone.add("a")
    assert add(w, "b", b'{"batch": 1}')  # swept at T0
    gone.add("b")
    assert not add(w, "c", b'{"batch": 1}', now=T0 + S // 2)  # too soon to sweep again
    assert rec.statuses() == [("c", "409 Exceeded MaxWaiting")]
    assert add(w, "d", b'{"batch": 1}', now=T0 + S + 1)


def test_wrong_field_types_get_go_decoder_errors() -> None:
    w, rec = queue()
    for body in (b'{"expires": "1s"}', b'{"expires": 1.5}', b'{"group": 5}', b'{"no_wait": 1}'):
        assert w.parse("r", body, T0) is None
    assert [s for _, s in rec.statuses()] == [
        "400 Bad Request - json: cannot unmarshal string into Go struct field .expires of type time.Duration",
        "400 Bad Request - json: cannot unmarshal number 1.5 into Go struct field .expires of type time.Duration",
        "400 Bad Request - json: cannot unmarshal number into Go struct field .group of type string",
        "400 Bad Request - json: cannot unmarshal number into Go struct field .no_wait of type bool",
    ]
    req = w.parse("r", b'{"batch": null, "expires": 7}', T0)  # null is the zero value, as in Go
    assert req is not None and req.batch == 0 and req.expires == T0 + 7
