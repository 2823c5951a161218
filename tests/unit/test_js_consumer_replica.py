"""A replicated consumer's state machine: changes applied in log order give the same state on
every replica, a deposed leader's changes (another epoch) change nothing, a whole state replaces
the pending acks, and a snapshot restores all of it; what each change acknowledged is told to
the server and the state says which messages the consumer still wants (interest retention);
and the '@' form a JetStream delivery crosses a route in."""

from __future__ import annotations

import msgspec

from jetpy.server.broker import split_shown
from jetpy.server.jscluster.consumers import ConsumerReplica, LeadOp, StateOp
from jetpy.server.jscluster.meta import AddConsumer, ConsumerAssignment, encode_op
from jetpy.store.base import ConsumerState

_enc = msgspec.msgpack.Encoder().encode


class _Told:
    """What the state machine tells its server: what each applied change acknowledged."""

    def __init__(self) -> None:
        self.acknowledged_: list[tuple[str, int, int, list[int]]] = []

    def acknowledged(self, stream: str, old_floor: int, new_floor: int, gone: list[int]) -> None:
        self.acknowledged_.append((stream, old_floor, new_floor, gone))


def _replica(config: bytes = b'{"durable_name":"C"}', told: _Told | None = None) -> ConsumerReplica:
    ca = ConsumerAssignment("S", "C", config, "C-R3F-x", ["n1", "n2", "n3"], 1)
    return ConsumerReplica(ca, told or _Told())  # type: ignore[arg-type]  # no server needed


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


def test_what_a_change_acknowledged_is_told_and_what_the_consumer_still_wants() -> None:
    told = _Told()
    r = _replica(b'{"durable_name":"C","filter_subject":"i.a.*"}', told)
    assert r.wants(1, "i.a.x")  # nothing applied yet: everything on its subjects is wanted
    assert not r.wants(1, "i.b.x")  # not on its subjects
    r.apply(1, _ops())
    assert told.acknowledged_ == [("S", 0, 0, []), ("S", 0, 1, [1]), ("S", 1, 1, [])]
    # floor 1, delivered 4, pending 2, 3, 4
    assert not r.wants(1, "i.a.x")  # at the ack floor
    assert r.wants(2, "i.a.x") and r.wants(4, "i.a.x")  # pending
    assert r.wants(5, "i.a.x")  # not delivered yet
    r.apply(2, [_enc(StateOp("e2", 5, 5, 1, 1, [], [3]))])
    assert told.acknowledged_[-1] == ("S", 1, 1, [3])
    assert not r.wants(3, "i.a.x") and not r.wants(5, "i.a.x")  # delivered, no longer pending
    # one delivering the last message per subject alike: its starts yet to deliver lie above
    # its last delivery, what it passed over below that it never delivers
    last = _replica(b'{"durable_name":"C","deliver_policy":"last_per_subject"}')
    last.apply(1, _ops())
    last.apply(2, [_enc(StateOp("e2", 5, 5, 1, 1, [], [3]))])
    assert not last.wants(1, "x") and not last.wants(3, "x") and not last.wants(5, "x")
    assert last.wants(2, "x") and last.wants(6, "x")


def test_a_restored_consumer_starts_from_its_assignments_state_on_every_replica() -> None:
    """A consumer restored from a backup: every replica starts from the archive's state, which
    goes through the meta log (msgpack) whole, and the log's changes apply on top of it."""

    st = ConsumerState(7, 9, 5, 6, pending={8: (6, 100), 9: (7, 200)}, redelivered={8: 1})
    ca = ConsumerAssignment("S", "C", b'{"durable_name":"C"}', "C-R3F-x", ["n1"], 1, state=st)
    op = msgspec.msgpack.decode(encode_op(AddConsumer(ca)), type=AddConsumer)
    assert op.assignment.state == st
    replicas = [ConsumerReplica(op.assignment, _Told()) for _ in range(2)]  # type: ignore[arg-type]
    for r in replicas:
        assert r.state() == st
        r.apply(1, [_enc(LeadOp("e1")), _enc(StateOp("e1", 7, 9, 6, 8, [], [8]))])
    assert replicas[0].state() == replicas[1].state()
    assert replicas[0].pending == {9: (7, 200)} and replicas[0].counters == (7, 9, 6, 8)
    assert _replica().state() == ConsumerState(0, 0, 0, 0)  # a new one: nothing
