"""Hypothesis: the parser only ever raises ProtocolError, and how bytes are split into reads never
changes what it yields."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_support import flat

from jetpy.protocol import Parser, ProtocolError
from jetpy.protocol.connect import ConnectOptions
from jetpy.protocol.ops import CONNECT, PING, PONG, PUB, SUB, UNSUB, Op

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-$", min_size=1, max_size=6).map(str.encode)
subject = st.lists(token, min_size=1, max_size=4).map(b".".join)
payload = st.binary(max_size=200) | st.sampled_from([b"", b"\r\n", b"PING\r\n", b"PUB x 1\r\ny\r\n"])
sep = st.sampled_from([b" ", b"\t", b"  ", b" \t "])
eol = st.sampled_from([b"\r\n", b"\n"])


@st.composite
def rendered_op(draw: st.DrawFn) -> tuple[bytes, Op]:
    """One op as some client might send it, and what the parser must yield for it."""
    kind = draw(st.sampled_from(["pub", "sub", "unsub", "ping", "pong", "connect"]))
    s1, s2, s3 = draw(sep), draw(sep), draw(sep)
    end = draw(eol)
    if kind == "pub":
        subj, data = draw(subject), draw(payload)
        reply = draw(st.none() | subject)
        size = b"%d" % len(data)
        middle = subj + s2 + (reply + s3 if reply else b"")
        return b"PUB" + s1 + middle + size + end + data + b"\r\n", (PUB, subj, reply, 0, data, size)
    if kind == "sub":
        subj, queue, sid = draw(subject), draw(st.none() | token), draw(token)
        middle = subj + s2 + (queue + s3 if queue else b"")
        return b"SUB" + s1 + middle + sid + end, (SUB, subj, queue, sid)
    if kind == "unsub":
        sid, mx = draw(token), draw(st.none() | st.integers(0, 999_999_999))
        if mx is None:
            return b"UNSUB" + s1 + sid + end, (UNSUB, sid, 0)
        return b"UNSUB" + s1 + sid + s2 + b"%d" % mx + end, (UNSUB, sid, mx)
    if kind == "ping":
        return b"PING" + end, (PING,)
    if kind == "pong":
        return b"PONG" + end, (PONG,)
    verbose = draw(st.booleans())
    return b'CONNECT {"verbose":%s}' % (b"true" if verbose else b"false") + end, (
        CONNECT,
        ConnectOptions(verbose=verbose),
    )


def feed_split(data: bytes, cuts: list[int]) -> list[Op]:
    p = Parser()
    ops: list[Op] = []
    last = 0
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        ops.extend(p.feed(data[last:cut]))
        last = cut
    return flat(ops)


def outcome(data: bytes, cuts: list[int]) -> tuple[list[Op], str | None, bool]:
    """(ops yielded, error text, raised?) — anything but ProtocolError escapes and fails the test."""
    p = Parser()
    ops: list[Op] = []
    last = 0
    try:
        for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
            ops.extend(p.feed(data[last:cut]))
            last = cut
    except ProtocolError as e:
        return flat([*ops, *e.ops]), e.err, True
    return flat(ops), None, False


@FUZZ
@given(st.binary(max_size=600), st.lists(st.integers(min_value=0), max_size=8))
def test_random_bytes_only_raise_protocol_error(data: bytes, cuts: list[int]) -> None:
    outcome(data, [])
    outcome(data, cuts)


@FUZZ
@given(
    st.lists(rendered_op(), min_size=1, max_size=8),
    st.lists(
        st.tuples(st.integers(min_value=0), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"]))
    ),
    st.lists(st.integers(min_value=0), max_size=8),
)
def test_mutated_streams_only_raise_protocol_error(
    ops: list[tuple[bytes, Op]], mutations: list[tuple[int, int, str]], cuts: list[int]
) -> None:
    data = bytearray(b"".join(raw for raw, _ in ops))
    for at, byte, how in mutations:
        i = at % (len(data) + 1)
        if how == "insert":
            data.insert(i, byte)
        elif i < len(data):
            if how == "set":
                data[i] = byte
            else:
                del data[i]
    outcome(bytes(data), [])
    outcome(bytes(data), cuts)


@FUZZ
@given(st.lists(rendered_op(), min_size=1, max_size=10), st.lists(st.integers(min_value=0), max_size=10))
def test_valid_streams_parse_the_same_however_split(ops: list[tuple[bytes, Op]], cuts: list[int]) -> None:
    data = b"".join(raw for raw, _ in ops)
    expected = [op for _, op in ops]
    assert feed_split(data, []) == expected
    assert feed_split(data, cuts) == expected
    # one byte at a time takes the general path for every op: it must agree with the fast path
    assert feed_split(data, list(range(len(data)))) == expected


repeated_pub = st.sampled_from(
    [
        (b"PUB a 1\r\nx\r\n", (PUB, b"a", None, 0, b"x", b"1")),
        (b"PUB a 1\r\ny\r\n", (PUB, b"a", None, 0, b"y", b"1")),
        (b"PUB a 2\r\n\r\n\r\n", (PUB, b"a", None, 0, b"\r\n", b"2")),
        (b"PUB a 01\r\nz\r\n", (PUB, b"a", None, 0, b"z", b"01")),
        (b"PUB b 1\r\nx\r\n", (PUB, b"b", None, 0, b"x", b"1")),
        (b"PUB a r 1\r\nx\r\n", (PUB, b"a", b"r", 0, b"x", b"1")),
        # requests of one size (a JetStream publisher) take the size-specific path after two
        (b"PUB a r2 1\r\n\n\r\n", (PUB, b"a", b"r2", 0, b"\n", b"1")),
        (b"PUB b r 2\r\nxy\r\n", (PUB, b"b", b"r", 0, b"xy", b"2")),
        (b"PUB a r 01\r\nz\r\n", (PUB, b"a", b"r", 0, b"z", b"01")),
        (b"PUB a\tr 1\r\nx\r\n", (PUB, b"a", b"r", 0, b"x", b"1")),
        (b"PUB a 0\r\n\r\n", (PUB, b"a", None, 0, b"", b"0")),
        (b"PING\r\n", (PING,)),
    ]
)


@FUZZ
@given(st.lists(repeated_pub, min_size=1, max_size=30), st.lists(st.integers(min_value=0), max_size=10))
def test_streams_of_repeated_pubs(ops: list[tuple[bytes, Op]], cuts: list[int]) -> None:
    # a publisher streaming to a subject repeats the same control line: the parser's shortcut
    # for an identical line must agree with parsing it
    data = b"".join(raw for raw, _ in ops)
    expected = [op for _, op in ops]
    assert feed_split(data, []) == expected
    assert feed_split(data, cuts) == expected


@FUZZ
@given(
    st.lists(repeated_pub, min_size=1, max_size=10), st.binary(min_size=1, max_size=6), st.integers(0, 200)
)
def test_repeated_pubs_then_damage(ops: list[tuple[bytes, Op]], junk: bytes, at: int) -> None:
    data = b"".join(raw for raw, _ in ops)
    i = at % (len(data) + 1)
    damaged = data[:i] + junk + data[i:]
    assert outcome(damaged, []) == outcome(damaged, [i, i + len(junk)])


@FUZZ
@given(st.lists(rendered_op(), min_size=1, max_size=10), st.lists(st.integers(min_value=0), max_size=4))
def test_op_names_in_any_case_parse_the_same(ops: list[tuple[bytes, Op]], cuts: list[int]) -> None:
    lowered = b"".join(raw[:5].lower() + raw[5:] if not raw.startswith(b"CONNECT") else raw for raw, _ in ops)
    assert feed_split(lowered, cuts) == [op for _, op in ops]


@FUZZ
@given(st.binary(max_size=300), st.lists(st.integers(min_value=0), max_size=8))
def test_errors_do_not_depend_on_how_bytes_arrive(data: bytes, cuts: list[int]) -> None:
    # a stream of valid ops followed by garbage: the verdict on the garbage is the same however
    # the stream is split (early detection may only move *when* it is reported)
    prefix = b"SUB a 1\r\nPUB a 2\r\nhi\r\n"
    whole = outcome(prefix + data, [])
    split = outcome(prefix + data, cuts)
    assert whole[2] == split[2]
    if whole[2]:
        assert whole[1] == split[1]
    assert whole[0] == split[0]
