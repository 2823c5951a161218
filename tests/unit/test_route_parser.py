"""The sans-IO route parser and the route wire values: every op and every error, each fed three
ways (whole, byte by byte, and with the first bytes of a following op behind it), as nats-server
2.9 reads a route; hypothesis checks that only ProtocolError ever escapes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.protocol import ProtocolError
from jetpy.protocol.encode import msg_tail
from jetpy.protocol.errors import ERR_MAX_CONTROL_LINE, ERR_UNKNOWN_OP
from jetpy.protocol.ops import CONNECT, ERR, INFO, OK, PING, PONG, Op
from jetpy.protocol.route import (
    A_SUB,
    A_UNSUB,
    GATEWAY,
    LEAF,
    R_MSG,
    R_MSGS,
    R_REQS,
    R_SIBS,
    R_SUB,
    R_UNSUB,
    ROUTE,
    RouteParser,
)
from jetpy.protocol.route_wire import (
    decode_route_connect,
    decode_route_info,
    info_line,
    msg_head,
    queue_msg,
    sub_line,
    unsub_line,
)

TRAILERS = (b"R", b"RMSG $G f 5\r\nhel", b"RS+ $G", b"INFO {", b"PING")
LEAF_TRAILERS = (b"L", b"LMSG f 5\r\nhel", b"LS+ f", b"INFO {", b"PING")


def flat(ops: list[Op]) -> list[Op]:
    """Runs (R_MSGS, R_SIBS, R_REQS) as the single messages they stand for: how reads split decides the
    runs."""
    out: list[Op] = []
    for op in ops:
        if op[0] == R_MSGS:
            out.extend((R_MSG, op[1], op[2], None, None, 0, d, s) for d, s in zip(op[3], op[4], strict=True))
        elif op[0] == R_REQS:
            out.extend(
                (R_MSG, op[1], op[2], r, None, 0, d, s) for r, d, s in zip(op[3], op[4], op[5], strict=True)
            )
        elif op[0] == R_SIBS:
            out.extend(
                (R_MSG, op[1], subj, None, None, 0, d, s)
                for subj, d, s in zip(op[2], op[3], op[4], strict=True)
            )
        else:
            out.append(op)
    return out


def ways(data: bytes, dialect: str = ROUTE) -> dict[str, list[bytes]]:
    out = {"whole": [data], "bytes": [data[i : i + 1] for i in range(len(data))]}
    for i, t in enumerate(LEAF_TRAILERS if dialect == LEAF else TRAILERS):
        out[f"trailing{i}"] = [data + t]
    return out


def parse_all(data: bytes, dialect: str = ROUTE, **limits: Any) -> list[Op]:
    results: dict[str, list[Op]] = {}
    for name, chunks in ways(data, dialect).items():
        p = RouteParser(dialect=dialect, **limits)
        ops: list[Op] = []
        for c in chunks:
            ops.extend(p.feed(c))
        results[name] = flat(ops)
    first = results["whole"]
    for name, ops in results.items():
        assert ops == first, name
    return first


def fails(data: bytes, err: str | None, detail: str = "", dialect: str = ROUTE, **limits: Any) -> list[Op]:
    seen: list[list[Op]] = []
    for name, chunks in ways(data, dialect).items():
        p = RouteParser(dialect=dialect, **limits)
        ops: list[Op] = []
        with pytest.raises(ProtocolError) as info:
            for c in chunks:
                ops.extend(p.feed(c))
        assert info.value.err == err, (name, info.value)
        if detail:
            assert detail in info.value.detail, (name, info.value.detail)
        ops.extend(info.value.ops)
        seen.append(flat(ops))
    assert all(s == seen[0] for s in seen)
    return seen[0]


def test_messages_in_every_form() -> None:
    assert parse_all(b"RMSG $G foo 5\r\nhello\r\n") == [(R_MSG, b"$G", b"foo", None, None, 0, b"hello", b"5")]
    assert parse_all(b"RMSG $G foo rep.1 2\r\nhi\r\n") == [
        (R_MSG, b"$G", b"foo", b"rep.1", None, 0, b"hi", b"2")
    ]
    # nats-server's forms for queue groups: "+ reply queues" and "| queues"
    assert parse_all(b"RMSG $G bar + rep.1 q1 1\r\nq\r\n") == [
        (R_MSG, b"$G", b"bar", b"rep.1", [b"q1"], 0, b"q", b"1")
    ]
    assert parse_all(b"RMSG $G bar | q1 q2 0\r\n\r\n") == [
        (R_MSG, b"$G", b"bar", None, [b"q1", b"q2"], 0, b"", b"0")
    ]
    assert parse_all(b"HMSG $G foo.y 18 20\r\nNATS/1.0\r\nK: V\r\n\r\nhi\r\n") == [
        (R_MSG, b"$G", b"foo.y", None, None, 18, b"NATS/1.0\r\nK: V\r\n\r\nhi", b"18 20")
    ]
    assert parse_all(b"HMSG $G foo + r q 12 12\r\nNATS/1.0\r\n\r\n\r\n") == [
        (R_MSG, b"$G", b"foo", b"r", [b"q"], 12, b"NATS/1.0\r\n\r\n", b"12 12")
    ]
    # tabs and runs of spaces separate arguments, as nats-server's splitArg
    assert parse_all(b"RMSG  $G\tfoo   3\r\nabc\r\n") == [(R_MSG, b"$G", b"foo", None, None, 0, b"abc", b"3")]


def test_a_stream_of_plain_messages_is_one_run() -> None:
    data = b"RMSG $G foo 3\r\nabc\r\n" * 4 + b"RMSG $G bar 1\r\nx\r\n"
    ops = RouteParser().feed(data)
    assert ops[0] == (R_MSGS, b"$G", b"foo", [b"abc"] * 4, [b"3"] * 4)
    assert ops[1] == (R_MSG, b"$G", b"bar", None, None, 0, b"x", b"1")
    # another account breaks the run even on the same subject
    ops = RouteParser().feed(b"RMSG $G foo 1\r\na\r\nRMSG A foo 1\r\nb\r\n")
    assert [op[0] for op in ops] == [R_MSG, R_MSG]


def test_replies_to_one_inbox_are_one_run_of_siblings() -> None:
    acks = b"".join(b"RMSG $G _INBOX.ab.%d 2\r\nok\r\n" % n for n in range(3))
    ops = RouteParser().feed(acks + b"RMSG $G _INBOX.ab.1 2\r\nok\r\nRMSG $G other 1\r\nx\r\n")
    subjects = [b"_INBOX.ab.0", b"_INBOX.ab.1", b"_INBOX.ab.2", b"_INBOX.ab.1"]
    assert ops == [
        (R_SIBS, b"$G", subjects, [b"ok"] * 4, [b"2"] * 4),
        (R_MSG, b"$G", b"other", None, None, 0, b"x", b"1"),
    ]
    # what ends a run: a reply, another account, another prefix, a deeper subject, headers
    for breaker in (
        b"RMSG $G _INBOX.ab.9 r 1\r\nx\r\n",
        b"RMSG A _INBOX.ab.9 1\r\nx\r\n",
        b"RMSG $G _INBOX.ac.9 1\r\nx\r\n",
        b"RMSG $G _INBOX.ab.9.1 1\r\nx\r\n",
        b"HMSG $G _INBOX.ab.9 12 12\r\nNATS/1.0\r\n\r\n\r\n",
    ):
        ops = RouteParser().feed(acks + breaker + acks)
        assert [op[0] for op in ops] == [R_SIBS, R_MSG, R_SIBS], breaker
    # no run from or to an empty last token, nor for a subject of one token
    ops = RouteParser().feed(b"RMSG $G _INBOX.ab. 1\r\nx\r\nRMSG $G _INBOX.ab.1 1\r\nx\r\n")
    assert [op[0] for op in ops] == [R_MSG, R_MSG]
    ops = RouteParser().feed(b"RMSG $G _INBOX.ab.1 1\r\nx\r\nRMSG $G _INBOX.ab. 1\r\nx\r\n")
    assert [op[0] for op in ops] == [R_MSG, R_MSG]
    ops = RouteParser().feed(b"RMSG $G a 1\r\nx\r\nRMSG $G b 1\r\nx\r\n")
    assert [op[0] for op in ops] == [R_MSG, R_MSG]
    # the same subject again is the plain run it was
    assert RouteParser().feed(b"RMSG $G _INBOX.ab.1 1\r\nx\r\n" * 2)[0][0] == R_MSGS
    # gateways and leaf nodes keep one op per message
    assert [op[0] for op in RouteParser(dialect=GATEWAY).feed(acks)] == [R_MSG] * 3
    leaf = b"".join(b"LMSG _INBOX.ab.%d 2\r\nok\r\n" % n for n in range(3))
    assert [op[0] for op in RouteParser(dialect=LEAF).feed(leaf)] == [R_MSG] * 3
    assert parse_all(acks) == flat(RouteParser().feed(acks))


def test_requests_to_one_subject_are_one_run_with_their_replies() -> None:
    reqs = b"".join(b"RMSG $G js.in _INBOX.ab.%d 2\r\nhi\r\n" % n for n in range(3))
    ops = RouteParser().feed(reqs + b"RMSG $G js.in 1\r\nx\r\n")
    assert ops == [
        (R_REQS, b"$G", b"js.in", [b"_INBOX.ab.0", b"_INBOX.ab.1", b"_INBOX.ab.2"], [b"hi"] * 3, [b"2"] * 3),
        (R_MSG, b"$G", b"js.in", None, None, 0, b"x", b"1"),
    ]
    # what ends a run: no reply, another account or subject, queue groups, headers
    for breaker in (
        b"RMSG $G js.in 1\r\nx\r\n",
        b"RMSG A js.in r 1\r\nx\r\n",
        b"RMSG $G js.other r 1\r\nx\r\n",
        b"RMSG $G js.in + r q 1\r\nx\r\n",
        b"HMSG $G js.in r 12 12\r\nNATS/1.0\r\n\r\n\r\n",
    ):
        ops = RouteParser().feed(reqs + breaker + reqs)
        assert [op[0] for op in ops] == [R_REQS, R_MSG, R_REQS], breaker
    assert [op[0] for op in RouteParser(dialect=GATEWAY).feed(reqs)] == [R_MSG] * 3
    assert parse_all(reqs) == flat(RouteParser().feed(reqs))


def test_interest_and_control_ops() -> None:
    assert parse_all(b"RS+ $G foo.*\r\n") == [(R_SUB, b"$G", b"foo.*", None, 0)]
    assert parse_all(b"RS+ $G bar q1 3\r\n") == [(R_SUB, b"$G", b"bar", b"q1", 3)]
    assert parse_all(b"RS+ $G bar q1 x\r\n") == [(R_SUB, b"$G", b"bar", b"q1", 0)]  # nats-server: no weight
    assert parse_all(b"RS- $G foo.*\r\n") == [(R_UNSUB, b"$G", b"foo.*", None)]
    assert parse_all(b"RS- $G bar q1\r\n") == [(R_UNSUB, b"$G", b"bar", b"q1")]
    assert parse_all(b"PING\r\nPONG\r\n+OK\r\n") == [(PING,), (PONG,), (OK,)]
    assert parse_all(b'CONNECT {"name":"N1"}\r\n') == [(CONNECT, b'{"name":"N1"}')]
    assert parse_all(b'INFO {"server_id":"N1"} \r\n') == [(INFO, b'{"server_id":"N1"} ')]
    assert parse_all(b"-ERR 'Unknown Protocol Operation'\r\n") == [(ERR, b"'Unknown Protocol Operation'")]
    assert parse_all(b"ping\r\n") == [(PING,)]  # op names are case-insensitive


def test_malformed_arguments_name_nats_servers_function() -> None:
    fails(b"RMSG $G foo\r\n", None, "processRoutedMsgArgs Parse Error: '[$G foo]'")
    fails(b"RMSG $G foo x\r\n", None, "processRoutedMsgArgs Bad or Missing Size: '[$G foo x]'")
    fails(b"RMSG $G foo ? q 1\r\n", None, "Bad or Missing Reply Indicator")
    fails(b"HMSG $G foo 5 2\r\n", None, "Header Size larger then TotalSize")
    fails(b"RS+ $G\r\n", None, "processRemoteSub Parse Error: '$G'")
    fails(b"RS+ $G a b\r\n", None, "processRemoteSub Parse Error")
    fails(b"RS- $G\r\n", None, "processRemoteUnsub parse error")
    fails(b"RMSG $G foo 3\r\nabcd\r\n", ERR_UNKNOWN_OP)  # payload not followed by CRLF


def test_unknown_ops_and_leaf_or_gateway_forms() -> None:
    fails(b"FOO BAR\r\n", ERR_UNKNOWN_OP, "proto=")
    for op in (
        b"LS+ $G foo\r\n",
        b"LMSG $G foo 0\r\n\r\n",
        b"A+ $G\r\n",
        b"PUB foo 0\r\n\r\n",
        b"SUB foo 1\r\n",
    ):
        fails(op, ERR_UNKNOWN_OP)
    # the ops before the bad one travel on the error
    assert fails(b"PING\r\nRS+ $G a\r\nBAD\r\n", ERR_UNKNOWN_OP) == [(PING,), (R_SUB, b"$G", b"a", None, 0)]


def test_limits() -> None:
    fails(b"RS+ $G " + b"a" * 200 + b"\r\n", ERR_MAX_CONTROL_LINE, max_control_line=100)
    fails(b"RS+ $G " + b"a" * 200, ERR_MAX_CONTROL_LINE, max_control_line=100)  # still arriving
    fails(b"RMSG $G foo 2000\r\n", None, "exceeds", max_payload=1000)


@pytest.mark.parametrize(
    ("dialect", "line", "account"),
    [(ROUTE, b"RMSG $G big", b"$G"), (GATEWAY, b"RMSG $G big", b"$G"), (LEAF, b"LMSG big", b"")],
)
def test_a_large_payload_arrives_in_pieces(dialect: str, line: bytes, account: bytes) -> None:
    """Every dialect buffers through the one Framer: chunks collected, joined once, nothing left."""
    payload = bytes(range(256)) * 2048
    data = line + b" %d\r\n" % len(payload) + payload + b"\r\nPING\r\n"
    p = RouteParser(dialect=dialect)
    ops: list[Op] = []
    for i in range(0, len(data), 7000):
        ops.extend(p.feed(data[i : i + 7000]))
        if i == 7000:
            assert p._chunks  # a payload this large is collected, not re-joined per read
    assert ops == [(R_MSG, account, b"big", None, None, 0, payload, b"%d" % len(payload)), (PING,)]
    assert p.pending() == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.lists(st.integers(min_value=1, max_value=50), max_size=10))
def test_only_protocol_errors_escape(data: bytes, cuts: list[int]) -> None:
    p = RouteParser(max_control_line=64, max_payload=64)
    pos = 0
    try:
        for c in [*cuts, len(data)]:
            p.feed(data[pos : pos + c])
            pos += c
    except ProtocolError:
        pass


def test_frames_this_server_writes() -> None:
    assert sub_line(b"$G", b"foo.*", None, 0) == b"RS+ $G foo.*\r\n"
    assert sub_line(b"$G", b"bar", b"q1", 2) == b"RS+ $G bar q1 2\r\n"
    assert unsub_line(b"$G", b"bar", b"q1") == b"RS- $G bar q1\r\n"
    assert unsub_line(b"$G", b"foo", None) == b"RS- $G foo\r\n"
    # a plain frame is the route's head, the subject and the tail every receiver shares
    tail = msg_tail(b"rep", 0, b"hello")
    assert msg_head(b"$G", False) + b"foo " + tail == b"RMSG $G foo rep 5\r\nhello\r\n"
    assert (
        queue_msg(msg_head(b"$G", False), b"bar", b"rep.1", [b"q1", b"q2"], 0, b"q")
        == b"RMSG $G bar + rep.1 q1 q2 1\r\nq\r\n"
    )
    assert queue_msg(msg_head(b"$G", False), b"bar", None, [b"q1"], 0, b"") == b"RMSG $G bar | q1 0\r\n\r\n"
    hdr = b"NATS/1.0\r\n\r\n"
    assert (
        queue_msg(msg_head(b"$G", True), b"b", None, [b"q"], len(hdr), hdr + b"x")
        == b"HMSG $G b | q 12 13\r\n" + hdr + b"x\r\n"
    )
    # what jetpy writes, jetpy reads back
    frame = queue_msg(msg_head(b"$G", False), b"bar", b"rep.1", [b"q1", b"q2"], 0, b"q")
    assert parse_all(frame) == [(R_MSG, b"$G", b"bar", b"rep.1", [b"q1", b"q2"], 0, b"q", b"1")]


def test_info_and_connect_values() -> None:
    line = info_line(
        server_id="NID",
        server_name="A",
        version="2.10.0",
        go="python",
        host="127.0.0.1",
        port=6222,
        max_payload=1 << 20,
        cluster="C1",
        nonce="abc",
        connect_urls=["127.0.0.1:4222"],
    )
    # nats-server 2.9's field order, a space before the CRLF, and no route_pool_size
    assert line == (
        b'INFO {"server_id":"NID","server_name":"A","version":"2.10.0","proto":2,"go":"python",'
        b'"host":"127.0.0.1","port":6222,"headers":true,"max_payload":1048576,"nonce":"abc",'
        b'"cluster":"C1","connect_urls":["127.0.0.1:4222"]} \r\n'
    )
    info = decode_route_info(line[5:-3])
    assert (info.server_id, info.server_name, info.port, info.cluster) == ("NID", "A", 6222, "C1")
    assert info.connect_urls == ("127.0.0.1:4222",) and info.route_pool_size == 0
    info = decode_route_info(b'{"server_id":"N","route_pool_size":3,"route_account":"$SYS","ldm":true}')
    assert (info.route_pool_size, info.route_account, info.ldm) == (3, "$SYS", True)
    with pytest.raises(ProtocolError):
        decode_route_info(b'{"port":"6222"}')  # Go's types: a string is no int
    with pytest.raises(ProtocolError):
        decode_route_info(b"[1]")
    c = decode_route_connect(b'{"name":"N2","cluster":"C1","user":"u","pass":"p","headers":true,"lnoc":true}')
    assert (c.name, c.cluster, c.user, c.password, c.headers, c.lang) == ("N2", "C1", "u", "p", True, "")
    assert decode_route_connect(b'{"lang":"python"}').lang == "python"  # a client on the route port


# -- the gateway and leaf node dialects ---------------------------------------------------------


def test_gateway_dialect_adds_account_interest() -> None:
    assert parse_all(b"A+ $G\r\nA- acc\r\n", dialect=GATEWAY) == [(A_SUB, b"$G"), (A_UNSUB, b"acc")]
    assert parse_all(b"RS+ $G foo q 1\r\nRMSG $G foo | q 2\r\nhi\r\n", dialect=GATEWAY) == [
        (R_SUB, b"$G", b"foo", b"q", 1),
        (R_MSG, b"$G", b"foo", None, [b"q"], 0, b"hi", b"2"),
    ]
    fails(b"A+ a b\r\n", None, "processGatewayAccountSub Parse Error: 'a b'", dialect=GATEWAY)
    fails(b"A+ $G\r\n", ERR_UNKNOWN_OP, dialect=ROUTE)  # not on a route


def test_leaf_dialect_has_no_account() -> None:
    hdr = b"NATS/1.0\r\nX: 1\r\n\r\n"
    data = (
        b"LS+ foo\r\nLS+ bar q 3\r\nLS- foo\r\nLS- bar q\r\n"
        b"LMSG foo 5\r\nhello\r\nLMSG foo rep 2\r\nhi\r\nLMSG qq | Q1 Q2 1\r\nq\r\n"
        b"LMSG svc + _INBOX.1 Q 1\r\nr\r\nHMSG foo "
        + b"%d %d\r\n" % (len(hdr), len(hdr) + 5)
        + hdr
        + b"hello\r\n"
    )
    assert parse_all(data, dialect=LEAF) == [
        (R_SUB, b"", b"foo", None, 0),
        (R_SUB, b"", b"bar", b"q", 3),
        (R_UNSUB, b"", b"foo", None),
        (R_UNSUB, b"", b"bar", b"q"),
        (R_MSG, b"", b"foo", None, None, 0, b"hello", b"5"),
        (R_MSG, b"", b"foo", b"rep", None, 0, b"hi", b"2"),
        (R_MSG, b"", b"qq", None, [b"Q1", b"Q2"], 0, b"q", b"1"),
        (R_MSG, b"", b"svc", b"_INBOX.1", [b"Q"], 0, b"r", b"1"),
        (R_MSG, b"", b"foo", None, None, len(hdr), hdr + b"hello", b"%d %d" % (len(hdr), len(hdr) + 5)),
    ]
    # a run of plain messages on one subject is one op, as on routes
    ops = RouteParser(dialect=LEAF).feed(b"LMSG a 1\r\nx\r\nLMSG a 1\r\ny\r\n")
    assert ops == [(R_MSGS, b"", b"a", [b"x", b"y"], [b"1", b"1"])]
    fails(b"LS+ a b\r\n", None, "processLeafSub Parse Error: 'a b'", dialect=LEAF)
    fails(b"LMSG a\r\n", None, "processLeafMsgArgs Parse Error: '[a]'", dialect=LEAF)
    fails(b"LMSG a b c 1\r\n", None, "processLeafMsgArgs Bad or Missing Reply Indicator: '[b]'", dialect=LEAF)
    fails(b"RMSG $G a 1\r\nx\r\n", ERR_UNKNOWN_OP, dialect=LEAF)
    fails(b"RS+ $G a\r\n", ERR_UNKNOWN_OP, dialect=LEAF)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([GATEWAY, LEAF]))
def test_only_protocol_errors_escape_the_other_dialects(data: bytes, dialect: str) -> None:
    p = RouteParser(dialect=dialect)
    try:
        p.feed(data)
        p.feed(b"\r\n" + data)
    except ProtocolError:
        pass
