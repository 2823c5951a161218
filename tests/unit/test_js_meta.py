"""The meta group's state machine: assignments applied in log order, the same results from the
same entries, and a snapshot that restores the whole state."""

from __future__ import annotations

import json

import msgspec

from jetpy.server.jscluster.meta import (
    GLOBAL_ACCOUNT,
    RESULT_CONFLICT,
    RESULT_EXISTS,
    RESULT_MISSING,
    RESULT_OK,
    AddConsumer,
    AddStream,
    ConsumerAssignment,
    MetaMachine,
    RemoveConsumer,
    RemoveStream,
    StreamAssignment,
    UpdateConsumer,
    UpdateStream,
    encode_op,
)

G = GLOBAL_ACCOUNT


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def assigned(self, sa: StreamAssignment) -> None:
        self.events.append(("add", sa.name))

    def unassigned(self, sa: StreamAssignment) -> None:
        self.events.append(("remove", sa.name))

    def updated(self, sa: StreamAssignment, reply: str) -> None:
        self.events.append(("update", f"{sa.name} {sa.config.decode()} {reply}"))

    def restored(self, streams: list[StreamAssignment]) -> None:
        self.events.append(("restored", ",".join(sorted(sa.name for sa in streams))))

    def consumer_assigned(self, ca: ConsumerAssignment) -> None:
        self.events.append(("add consumer", f"{ca.stream} > {ca.name}"))

    def consumer_unassigned(self, ca: ConsumerAssignment, reply: str = "") -> None:
        self.events.append(("remove consumer", f"{ca.stream} > {ca.name}"))

    def consumer_updated(self, ca: ConsumerAssignment, reply: str) -> None:
        self.events.append(("update consumer", f"{ca.stream} > {ca.name} {ca.config.decode()} {reply}"))

    def consumers_restored(self, consumers: list[ConsumerAssignment]) -> None:
        self.events.append(
            ("consumers restored", ",".join(sorted(f"{c.stream}>{c.name}" for c in consumers)))
        )


def _sa(name: str, config: bytes = b'{"name":"x"}') -> StreamAssignment:
    return StreamAssignment(name, config, f"S-R3F-{name}", ["n1", "n2", "n3"], 1, "_INBOX.r")


def test_apply_is_deterministic_and_tells_the_listener() -> None:
    ops = [
        encode_op(AddStream(_sa("A"))),
        encode_op(AddStream(_sa("A"))),  # the same again
        encode_op(AddStream(_sa("A", b'{"name":"y"}'))),  # another config under the name
        encode_op(AddStream(_sa("B"))),
        encode_op(RemoveStream("A")),
        encode_op(RemoveStream("A")),
        b"\xc1garbage",
    ]
    results = []
    for _ in range(2):
        rec = Recorder()
        m = MetaMachine(rec)
        results.append(list(m.apply(1, ops)))
        assert rec.events == [("add", "A"), ("add", "B"), ("remove", "A")]
        assert sorted(m.streams_of(G)) == ["B"]
    assert results[0] == results[1]
    assert results[0][:6] == [RESULT_OK, RESULT_EXISTS, RESULT_CONFLICT, RESULT_OK, RESULT_OK, RESULT_MISSING]
    assert results[0][6] == b"malformed"


def test_snapshot_restores_the_whole_state() -> None:
    m = MetaMachine(Recorder())
    m.apply(1, [encode_op(AddStream(_sa("A"))), encode_op(AddStream(_sa("B")))])
    rec = Recorder()
    other = MetaMachine(rec)
    other.restore(m.snapshot())
    assert other.streams == m.streams
    assert rec.events == [("restored", "A,B"), ("consumers restored", "")]
    other.restore(b"")
    assert other.streams == {}


def test_update_keeps_the_placement_and_names_where_to_answer() -> None:
    rec = Recorder()
    m = MetaMachine(rec)
    results = m.apply(
        1,
        [
            encode_op(AddStream(_sa("A"))),
            encode_op(UpdateStream("A", b'{"name":"A2"}', "_INBOX.u")),
            encode_op(UpdateStream("B", b"{}", "")),
        ],
    )
    assert list(results) == [RESULT_OK, RESULT_OK, RESULT_MISSING]
    assert m.streams_of(G)["A"].config == b'{"name":"A2"}' and m.streams_of(G)["A"].peers == [
        "n1",
        "n2",
        "n3",
    ]
    assert m.streams_of(G)["A"].reply == ""  # a restarted server's replay answers nobody's create again
    assert rec.events[-1] == ("update", 'A {"name":"A2"} _INBOX.u')


def _ca(stream: str, name: str, config: bytes = b'{"durable_name":"x"}') -> ConsumerAssignment:
    return ConsumerAssignment(stream, name, config, f"C-R3F-{name}", ["n1", "n2", "n3"], 1, "_INBOX.c")


def test_consumer_assignments_follow_their_stream() -> None:
    ops = [
        encode_op(AddConsumer(_ca("A", "C"))),  # no stream A yet
        encode_op(AddStream(_sa("A"))),
        encode_op(AddConsumer(_ca("A", "C"))),
        encode_op(AddConsumer(_ca("A", "C"))),  # the same again
        encode_op(AddConsumer(_ca("A", "C", b"{}"))),  # another config under the name
        encode_op(AddConsumer(_ca("A", "D"))),
        encode_op(RemoveConsumer("A", "D")),
        encode_op(RemoveConsumer("A", "D")),
    ]
    rec = Recorder()
    m = MetaMachine(rec)
    results = list(m.apply(1, ops))
    assert results == [
        RESULT_MISSING,
        RESULT_OK,
        RESULT_OK,
        RESULT_EXISTS,
        RESULT_CONFLICT,
        RESULT_OK,
        RESULT_OK,
        RESULT_MISSING,
    ]
    assert sorted(m.consumers_of(G)["A"]) == ["C"]

    assert list(m.apply(2, [encode_op(UpdateConsumer("A", "C", b"{}", "_INBOX.u"))])) == [RESULT_OK]
    assert m.consumers_of(G)["A"]["C"].config == b"{}" and m.consumers_of(G)["A"]["C"].reply == ""
    assert rec.events[-1] == ("update consumer", "A > C {} _INBOX.u")
    assert list(m.apply(3, [encode_op(UpdateConsumer("A", "D", b"{}"))])) == [RESULT_MISSING]

    snap = m.snapshot()  # consumers are in the snapshot, restored after their streams
    rec2 = Recorder()
    other = MetaMachine(rec2)
    other.restore(snap)
    assert other.consumers == m.consumers
    assert rec2.events == [("restored", "A"), ("consumers restored", "A>C")]

    m.apply(2, [encode_op(RemoveStream("A"))])  # a deleted stream takes its consumers first
    assert rec.events[-2:] == [("remove consumer", "A > C"), ("remove", "A")]
    assert m.consumers_of(G) == {}


def test_a_snapshot_of_streams_alone_still_restores() -> None:
    rec = Recorder()
    m = MetaMachine(rec)
    m.restore(msgspec.msgpack.encode({"A": _sa("A")}))
    assert sorted(m.streams_of(G)) == ["A"] and m.consumers_of(G) == {}


def _placed_ca(stream: str, name: str, config: str, peers: list[str]) -> ConsumerAssignment:
    return ConsumerAssignment(stream, name, config.encode(), f"C-R3F-{name}", peers, 1)


def _placements(m: MetaMachine, stream: str) -> dict[str, tuple[list[str], list[str], int]]:
    """Each consumer's servers, those that joined, and its config's num_replicas."""
    return {
        n: (ca.peers, ca.joined, json.loads(ca.config).get("num_replicas", 0))
        for n, ca in m.consumers_of(G)[stream].items()
    }


def test_consumers_follow_their_stream_placement() -> None:
    """As nats-server 2.15 places them: a durable of num_replicas 0 follows the stream's count,
    others are capped by it (their num_replicas lowered for good), every one keeps the servers
    the stream keeps and takes the stream's new ones in their order; a work-queue stream's
    consumers always have the stream's replicas."""
    rec = Recorder()
    m = MetaMachine(rec)
    three = ["n1", "n2", "n3"]
    ops: list[AddStream | AddConsumer] = [
        AddStream(StreamAssignment("S", b'{"name":"S"}', "S-R3F-S", three, 1)),
        AddConsumer(_placed_ca("S", "D", '{"durable_name":"D"}', three)),
        AddConsumer(_placed_ca("S", "THREE", '{"durable_name":"THREE","num_replicas":3}', three)),
        AddConsumer(_placed_ca("S", "ONE", '{"durable_name":"ONE","num_replicas":1}', ["n3"])),
        AddConsumer(_placed_ca("S", "EPH", '{"name":"EPH"}', ["n2"])),
        AddStream(StreamAssignment("W", b'{"name":"W","retention":"workqueue"}', "S-R3F-W", three, 1)),
        AddConsumer(_placed_ca("W", "WQ", '{"durable_name":"WQ","num_replicas":3}', three)),
    ]
    assert list(m.apply(1, [encode_op(op) for op in ops])) == [RESULT_OK] * len(ops)
    rec.events.clear()

    m.apply(2, [encode_op(UpdateStream("S", b'{"name":"S"}', "", ["n1"]))])
    assert _placements(m, "S") == {
        "D": (["n1"], [], 0),
        "THREE": (["n1"], [], 1),
        "ONE": (["n1"], ["n1"], 1),
        "EPH": (["n1"], ["n1"], 0),
    }
    assert [e[0] for e in rec.events] == ["update"] + ["update consumer"] * 4

    m.apply(3, [encode_op(UpdateStream("S", b'{"name":"S"}', "", three))])
    assert _placements(m, "S") == {
        "D": (three, ["n2", "n3"], 0),
        "THREE": (["n1"], [], 1),
        "ONE": (["n1"], ["n1"], 1),
        "EPH": (["n1"], ["n1"], 0),
    }

    rec.events.clear()
    m.apply(4, [encode_op(UpdateStream("S", b'{"name":"S"}', "", ["n4", "n2", "n3"]))])  # n1 replaced
    assert _placements(m, "S") == {
        "D": (["n2", "n3", "n4"], ["n2", "n3", "n4"], 0),
        "THREE": (["n4"], ["n4"], 1),
        "ONE": (["n4"], ["n4"], 1),
        "EPH": (["n4"], ["n4"], 0),
    }
    m.apply(5, [encode_op(UpdateStream("S", b'{"name":"S"}', "", ["n4", "n2", "n3"]))])  # no change
    assert [e[0] for e in rec.events] == ["update"] + ["update consumer"] * 4 + ["update"]

    wq = b'{"name":"W","retention":"workqueue"}'
    m.apply(6, [encode_op(UpdateStream("W", wq, "", ["n2"]))])
    assert _placements(m, "W") == {"WQ": (["n2"], [], 1)}
    m.apply(7, [encode_op(UpdateStream("W", wq, "", three))])
    assert _placements(m, "W") == {"WQ": (["n2", "n1", "n3"], ["n1", "n3"], 3)}

    # a consumer's own replicas changed by an update: placed where the meta leader says
    m.apply(
        8,
        [
            encode_op(
                UpdateConsumer("S", "ONE", b'{"durable_name":"ONE","num_replicas":3}', "", ["n4", "n3", "n2"])
            )
        ],
    )
    assert _placements(m, "S")["ONE"] == (["n4", "n3", "n2"], ["n4", "n3", "n2"], 3)
    # ... among the servers the stream still has (it may have moved since they were chosen)
    one = b'{"durable_name":"ONE","num_replicas":1}'
    m.apply(9, [encode_op(UpdateConsumer("S", "ONE", one, "", ["n1", "n3"]))])
    assert _placements(m, "S")["ONE"] == (["n3"], ["n3"], 1)


def test_two_accounts_each_have_a_stream_of_the_same_name() -> None:
    """Assignments are the account's: the same name in two accounts is two streams, each
    updated, given consumers and removed in its own account only."""
    rec = Recorder()
    m = MetaMachine(rec)
    a = msgspec.structs.replace(_sa("ORDERS"), account="A", group="S-R3F-a")
    b = msgspec.structs.replace(_sa("ORDERS", b'{"name":"other"}'), account="B", group="S-R3F-b")
    ca = msgspec.structs.replace(_ca("ORDERS", "C"), account="A")
    results = m.apply(
        1,
        [
            encode_op(AddStream(a)),
            encode_op(AddStream(b)),  # another config: no conflict, another account
            encode_op(AddConsumer(ca)),
            encode_op(UpdateStream("ORDERS", b"{}", "", account="B")),
            encode_op(RemoveConsumer("ORDERS", "C", account="B")),  # B's stream has no C
            encode_op(RemoveStream("ORDERS")),  # the global account has none
        ],
    )
    assert list(results) == [RESULT_OK, RESULT_OK, RESULT_OK, RESULT_OK, RESULT_MISSING, RESULT_MISSING]
    assert m.streams_of("A")["ORDERS"].config == b'{"name":"x"}'
    assert m.streams_of("B")["ORDERS"].config == b"{}"
    assert list(m.consumers_of("A")["ORDERS"]) == ["C"] and m.consumers_of("B") == {}
    assert sorted(sa.account for sa in m.all_streams()) == ["A", "B"]

    other = MetaMachine(Recorder())
    other.restore(m.snapshot())
    assert other.streams == m.streams and other.consumers == m.consumers

    m.apply(2, [encode_op(RemoveStream("ORDERS", "A"))])  # takes A's consumer, leaves B's stream
    assert rec.events[-2:] == [("remove consumer", "ORDERS > C"), ("remove", "ORDERS")]
    assert m.streams_of("A") == {} and list(m.streams_of("B")) == ["ORDERS"]


class _OldStreamAssignment(msgspec.Struct, frozen=True):
    name: str
    config: bytes
    group: str
    peers: list[str]
    created: int
    reply: str = ""
    joined: list[str] = []


class _OldAddStream(msgspec.Struct, frozen=True, tag="add_stream"):
    assignment: _OldStreamAssignment


class _OldRemoveStream(msgspec.Struct, frozen=True, tag="remove_stream"):
    name: str


class _OldState(msgspec.Struct, frozen=True, array_like=True):
    streams: dict[str, _OldStreamAssignment]
    consumers: dict[str, dict[str, ConsumerAssignment]]


def test_entries_and_snapshots_from_before_accounts_are_the_global_accounts() -> None:
    """A meta log written before assignments named their account still reads: its entries
    and snapshots are the global account's."""
    old = _OldStreamAssignment("A", b'{"name":"A"}', "S-R3F-A", ["n1"], 1)
    m = MetaMachine(Recorder())
    enc = msgspec.msgpack.Encoder()
    assert list(m.apply(1, [enc.encode(_OldAddStream(old))])) == [RESULT_OK]
    assert m.streams_of(G)["A"].account == G
    assert list(m.apply(2, [enc.encode(_OldRemoveStream("A"))])) == [RESULT_OK]
    assert m.streams_of(G) == {}

    rec = Recorder()
    other = MetaMachine(rec)
    other.restore(enc.encode(_OldState({"A": old}, {"A": {"C": _ca("A", "C")}})))
    assert other.streams_of(G)["A"].account == G and other.consumers_of(G)["A"]["C"].account == G
    assert rec.events == [("restored", "A"), ("consumers restored", "A>C")]
