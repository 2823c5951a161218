"""A replicated consumer's state machine: changes applied in log order give the same state on
every replica, a deposed leader's changes (another epoch) change nothing, a whole state replaces
the pending acks, and a snapshot restores all of it; and the '@' form a JetStream delivery
crosses a route in."""

from __future__ import annotations

import msgspec

from jetpy.server.broker import split_shown
from jetpy.server.jscluster.consumers import ConsumerReplica, LeadOp, StateOp
from jetpy.server.jscluster.meta import ConsumerAssignment

_enc = msgspec.msgpack.Encoder().encode


def _replica() -> ConsumerReplica:
    ca = ConsumerAssignment("S", "C", b'{"durable_name":"C"}', "C-R3F-x", ["n1", "n2", "n3"], 1)
    return ConsumerReplica(ca, None)  # type: ignore[arg-type]  # the state machine needs no server


def _ops() -> list[bytes]:
    return [
        _enc(LeadOp("e1")),
        # seqs 1-3 delivered (3 twice), then 1 acked
        _enc(StateOp("e1", 3, 3, 0, 0, [1, 1, 100, 1, 2, 2, 100, 1, 3, 3, 100, 2], [])),
        _enc(StateOp("e1", 3, 3, 1, 1, [], [1])),
        _enc(LeadOp("e2")),  # a new leader
        _enc(StateOp("e1", 9, 9, 9, 9, [], [2, 3])),  # the deposed one's, too late
        _enc(StateOp("e2", 4, 4, 1, 1, [4, 4, 200, 1], [])),
        b"\xc1",
    ]


def test_changes_apply_in_order_and_a_deposed_leaders_change_nothing() -> None:
    results = []
    states = []
    for _ in range(2):
        r = _replica()
        results.append(list(r.apply(1, _ops())))
        states.append(r.state())
    assert results[0] == results[1] == [b"ok", b"ok", b"ok", b"ok", b"stale", b"ok", b"malformed"]
    st = states[0]
    assert st == states[1]
    assert (st.delivered_consumer_seq, st.delivered_stream_seq) == (4, 4)
    assert (st.ack_floor_consumer_seq, st.ack_floor_stream_seq) == (1, 1)
    assert st.pending == {2: (2, 100), 3: (3, 100), 4: (4, 200)}
    assert st.redelivered == {3: 1}


def test_a_whole_state_replaces_the_pending_acks_and_a_snapshot_restores_it() -> None:
    r = _replica()
    r.apply(1, _ops())
    r.apply(2, [_enc(StateOp("e2", 5, 5, 3, 3, [5, 5, 300, 3], [], full=True))])
    assert r.pending == {5: (5, 300)} and r.redelivered == {5: 2}
    other = _replica()
    other.restore(r.snapshot())
    assert other.state() == r.state() and other.epoch == "e2"
    assert other.apply(3, [_enc(StateOp("e1", 0, 0, 0, 0, [], [5]))]) == [b"stale"]


def test_a_routed_delivery_names_its_subject_after_the_ack_reply() -> None:
    assert split_shown(b"$JS.ACK.S.C.1.2.2.1700000000.0@orders.new") == (
        b"$JS.ACK.S.C.1.2.2.1700000000.0",
        b"orders.new",
    )
    assert split_shown(b"_INBOX.abc@x") is None  # only JetStream ack replies carry one
    assert split_shown(b"$JS.ACK.S.C.1.2.2.1700000000.0") is None
    assert split_shown(b"$JS.ACK.S.C.1.2.2.1700000000.0@") is None
