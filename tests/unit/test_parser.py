"""The sans-IO parser: every op and every error, each fed three ways (whole, byte by byte, and with
the first bytes of a following op behind it), as nats-server 2.9 reads them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from parser_support import flat

from jetpy.protocol import Parser, ProtocolError
from jetpy.protocol import parser as parser_module
from jetpy.protocol.connect import ConnectOptions, decode_connect, validate_info
from jetpy.protocol.errors import (
    ERR_AUTH_VIOLATION,
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
)
from jetpy.protocol.framing import COLLECT_THRESHOLD
from jetpy.protocol.ops import CONNECT, ERR, INFO, OK, PING, PONG, PUB, PUBR, PUBS, SUB, UNSUB, Op
from jetpy.protocol.parser import (
    DEFAULT_MAX_CONTROL_LINE,
    DEFAULT_MAX_PAYLOAD,
    SIZED_COMPILES_PER_PARSER,
)

HEADERS_ON = b'CONNECT {"headers":true}\r\n'
TRAILERS = (b"P", b"PUB f 5\r\nhel", b"SUB f", b"CONNECT {", b"PING")  # starts of a next op


def collect(p: Parser, chunks: list[bytes]) -> list[Op]:
    ops: list[Op] = []
    for c in chunks:
        ops.extend(p.feed(c))
    return flat(ops)


def ways(data: bytes) -> dict[str, list[bytes]]:
    """The three ways every case is fed (and a few more trailers for the third)."""
    out = {"whole": [data], "bytes": [data[i : i + 1] for i in range(len(data))]}
    for i, t in enumerate(TRAILERS):
        out[f"trailing{i}"] = [data + t]
    return out


@dataclass(frozen=True)
class Limits:
    max_control_line: int = DEFAULT_MAX_CONTROL_LINE
    max_payload: int = DEFAULT_MAX_PAYLOAD
    expect_connect: bool = False

    def parser(self) -> Parser:
        return Parser(self.max_control_line, self.max_payload, self.expect_connect)


def parse_all(data: bytes, limits: Limits = Limits()) -> list[Op]:
    """The ops ``data`` yields, asserting every way of feeding it yields the same."""
    results = {name: collect(limits.parser(), chunks) for name, chunks in ways(data).items()}
    first = results["whole"]
    for name, ops in results.items():
        assert ops == first, name
    return first


def fails(data: bytes, err: str | None, limits: Limits = Limits()) -> list[Op]:
    """Assert ``data`` raises ProtocolError(err) fed every way; returns the ops that preceded it."""
    seen: list[list[Op]] = []
    for name, chunks in ways(data).items():
        p = limits.parser()
        ops: list[Op] = []
        with pytest.raises(ProtocolError) as info:
            for c in chunks:
                ops.extend(p.feed(c))
        assert info.value.err == err, (name, info.value)
        ops.extend(info.value.ops)
        seen.append(flat(ops))
    assert all(s == seen[0] for s in seen)
    return seen[0]


def pub(
    subject: bytes, data: bytes, reply: bytes | None = None, sizes: bytes | None = None, hdr: int = 0
) -> Op:
    return (PUB, subject, reply, hdr, data, sizes if sizes is not None else str(len(data)).encode())


# -- every op --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"PUB foo 5\r\nhello\r\n", [pub(b"foo", b"hello")]),
        (b"PUB foo bar 5\r\nhello\r\n", [pub(b"foo", b"hello", b"bar")]),
        (b"PUB foo 0\r\n\r\n", [pub(b"foo", b"")]),
        (b"PUB foo 005\r\nhello\r\n", [pub(b"foo", b"hello", sizes=b"005")]),
        (b"PUB foo.bar.* 1\r\nx\r\n", [pub(b"foo.bar.*", b"x")]),  # literal-ness is checked later
        (b"SUB foo 1\r\n", [(SUB, b"foo", None, b"1")]),
        (b"SUB foo.* q 22\r\n", [(SUB, b"foo.*", b"q", b"22")]),
        (b"UNSUB 1\r\n", [(UNSUB, b"1", 0)]),
        (b"UNSUB 1 5\r\n", [(UNSUB, b"1", 5)]),
        (b"UNSUB 1 x\r\n", [(UNSUB, b"1", 0)]),  # a malformed max unsubscribes now
        (b"UNSUB 1 0000000005\r\n", [(UNSUB, b"1", 0)]),  # ten digits: malformed too
        (b"PING\r\n", [(PING,)]),
        (b"PONG\r\n", [(PONG,)]),
        (b"+OK\r\n", [(OK,)]),
        (b"-ERR 'boom'\r\n", [(ERR, b"'boom'")]),
        (b"INFO {}\r\n", [(INFO, b"{}")]),
        (b'CONNECT {"verbose":false}\r\n', [(CONNECT, ConnectOptions(verbose=False))]),
    ],
)
def test_every_op(data: bytes, expected: list[Op]) -> None:
    assert parse_all(data) == expected


def test_hpub_after_headers_negotiated() -> None:
    block = b"NATS/1.0\r\nA: 1\r\n\r\n"
    body = block + b"hi"
    ops = parse_all(HEADERS_ON + b"HPUB foo %d %d\r\n%b\r\n" % (len(block), len(body), body))
    assert ops[1] == pub(b"foo", body, sizes=b"%d %d" % (len(block), len(body)), hdr=len(block))
    ops = parse_all(HEADERS_ON + b"HPUB foo r 012 014\r\nNATS/1.0\r\n\r\nhi\r\n")
    assert ops[1] == (PUB, b"foo", b"r", 12, b"NATS/1.0\r\n\r\nhi", b"012 014")  # sizes echoed as sent
    # a zero header size is a plain message (nats-server delivers it as MSG)
    assert parse_all(HEADERS_ON + b"HPUB foo 0 2\r\nhi\r\n")[1] == pub(b"foo", b"hi")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"pub foo 1\r\nx\r\n", [pub(b"foo", b"x")]),
        (b"PuB foo 1\r\nx\r\n", [pub(b"foo", b"x")]),
        (b"sub foo 1\r\nSuB bar 2\r\n", [(SUB, b"foo", None, b"1"), (SUB, b"bar", None, b"2")]),
        (b"unsub 1\r\n", [(UNSUB, b"1", 0)]),
        (b"ping\r\nPiNg\r\npong\r\n", [(PING,), (PING,), (PONG,)]),
        (b"+ok\r\n-err x\r\n", [(OK,), (ERR, b"x")]),
        (b"connect {}\r\ninfo {}\r\n", [(CONNECT, ConnectOptions()), (INFO, b"{}")]),
    ],
)
def test_op_names_are_case_insensitive(data: bytes, expected: list[Op]) -> None:
    assert parse_all(data) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"PUB\tfoo  \t bar\t5\r\nhello\r\n", [pub(b"foo", b"hello", b"bar")]),
        (b"PUB  foo 5 \r\nhello\r\n", [pub(b"foo", b"hello")]),
        (b"SUB \t foo\tq  1 \r\n", [(SUB, b"foo", b"q", b"1")]),
        (b"UNSUB\t1\t\t2\r\n", [(UNSUB, b"1", 2)]),
        (b'CONNECT \t {"verbose":false}  \r\n', [(CONNECT, ConnectOptions(verbose=False))]),
        (b'CONNECT{"verbose":false}\r\n', [(CONNECT, ConnectOptions(verbose=False))]),  # no space needed
    ],
)
def test_tabs_and_runs_of_spaces(data: bytes, expected: list[Op]) -> None:
    assert parse_all(data) == expected


def test_consecutive_pubs_to_one_subject_come_as_a_run() -> None:
    ops = Parser().feed(
        b"PUB a 1\r\nx\r\nPUB a 2\r\nyy\r\nPUB b 1\r\nz\r\nPUB b r 0\r\n\r\nPUB b 0\r\n\r\nPING\r\n"
    )
    assert ops == [
        (PUBS, b"a", [b"x", b"yy"], [b"1", b"2"]),
        (PUB, b"b", None, 0, b"z", b"1"),  # a run of one stays a plain PUB
        (PUB, b"b", b"r", 0, b"", b"0"),  # a reply ends a run
        (PUB, b"b", None, 0, b"", b"0"),
        (PING,),
    ]


def test_consecutive_pubs_with_replies_to_one_subject_come_as_a_run() -> None:
    p = Parser()
    p.feed(b'CONNECT {"headers":true}\r\n')
    ops = p.feed(
        b"PUB j i.1 1\r\nx\r\nHPUB j i.2 8 10\r\nH: v\r\n\r\nyy\r\nPUB j i.3 0\r\n\r\n"
        b"PUB j 1\r\nz\r\nPUB k i.4 1\r\nw\r\nHPUB k 8 8\r\nH: v\r\n\r\n\r\n"
        b"PUB k i.5 1\r\nv\r\nPUB m i.6 1\r\nu\r\nPUB m i.7 1\r\nt\r\nPING\r\n"
    )
    assert ops == [
        (
            PUBR,
            b"j",
            [b"i.1", b"i.2", b"i.3"],
            [0, 8, 0],
            [b"x", b"H: v\r\n\r\nyy", b""],
            [b"1", b"8 10", b"0"],
        ),
        (PUB, b"j", None, 0, b"z", b"1"),  # no reply: ends the run
        (PUB, b"k", b"i.4", 0, b"w", b"1"),  # a run of one stays a PUB
        (PUB, b"k", None, 8, b"H: v\r\n\r\n", b"8 8"),  # an HPUB without reply ends it too
        (PUB, b"k", b"i.5", 0, b"v", b"1"),
        (PUBR, b"m", [b"i.6", b"i.7"], [0, 0], [b"u", b"t"], [b"1", b"1"]),
        (PING,),
    ]


def test_a_repeated_control_line_is_checked_like_any_other() -> None:
    line = b"PUB s 3\r\n"
    assert parse_all(line + b"abc\r\n" + line + b"def\r\n" + line + b"ghi\r\n") == [
        pub(b"s", b"abc"),
        pub(b"s", b"def"),
        pub(b"s", b"ghi"),
    ]
    fails(line + b"abc\r\n" + line + b"defX\r\n", ERR_UNKNOWN_OP)
    fails(line + b"abc\r\n" + line + b"de\r\n\r\n", ERR_UNKNOWN_OP)
    p = Parser()
    assert flat(p.feed(line + b"abc\r\n" + line + b"de")) == [pub(b"s", b"abc")]
    assert flat(p.feed(b"f\r\n" + line + b"ghi\r\n")) == [pub(b"s", b"def"), pub(b"s", b"ghi")]


def test_a_streaming_publisher_s_size_path_parses_like_the_fast_path() -> None:
    # requests of one size (a JetStream publisher): after two, a size-specific pattern takes them
    reqs = b"".join(b"PUB s _INBOX.%d 3\r\nm%02d\r\n" % (i, i) for i in range(6))
    expected = [pub(b"s", b"m%02d" % i, b"_INBOX.%d" % i) for i in range(6)]
    assert parse_all(reqs) == expected
    # then other sizes, other subjects, no reply, a payload that looks like a PUB, and back
    tail = (
        b"PUB s r 4\r\nabcd\r\nPUB t 3\r\nxyz\r\nPUB s r 3\r\n\r\nx\r\nPUB s 3\r\nPUB\r\nPUB u r 3\r\nend\r\n"
    )
    assert parse_all(reqs + tail) == [
        *expected,
        pub(b"s", b"abcd", b"r"),
        pub(b"t", b"xyz"),
        pub(b"s", b"\r\nx", b"r"),
        pub(b"s", b"PUB"),
        pub(b"u", b"end", b"r"),
    ]


def test_the_size_path_checks_what_the_fast_path_checks() -> None:
    reqs = b"".join(b"PUB s r%d 3\r\nabc\r\n" % i for i in range(4))
    fails(reqs + b"PUB s r 3\r\nabcX\r\n", ERR_UNKNOWN_OP)  # payload not followed by CRLF
    fails(reqs + b"PUB s r 3\r\nab\r\n\r\n", ERR_UNKNOWN_OP)
    limits = Limits(max_control_line=12)
    assert parse_all(reqs, limits) == [pub(b"s", b"abc", b"r%d" % i) for i in range(4)]
    fails(reqs + b"PUB s r" + b"x" * 10 + b" 3\r\nabc\r\n", ERR_MAX_CONTROL_LINE, limits)
    # an incomplete message is waited for, whichever path learnt the size
    p = Parser()
    assert flat(p.feed(reqs + b"PUB s q 3\r\nab")) == [pub(b"s", b"abc", b"r%d" % i) for i in range(4)]
    assert flat(p.feed(b"c\r\n")) == [pub(b"s", b"abc", b"q")]


def test_a_parser_compiles_few_size_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    # compiling costs; a client sending pairs of ever new sizes must not make it compile forever
    monkeypatch.setattr(parser_module, "_sized_patterns", {})
    data = b"".join(b"PUB s r %d\r\n%b\r\n" % (n, b"x" * n) * 2 for n in range(1, 30))
    assert collect(Parser(), [data]) == [pub(b"s", b"x" * n, b"r") for n in range(1, 30) for _ in range(2)]
    assert len(parser_module._sized_patterns) == SIZED_COMPILES_PER_PARSER
    assert parse_all(data) == [pub(b"s", b"x" * n, b"r") for n in range(1, 30) for _ in range(2)]


def test_lines_may_end_in_lf_only() -> None:
    ops = parse_all(b"PING\nSUB foo 1\nPUB foo 1\nx\r\nUNSUB 1\n")
    assert ops == [(PING,), (SUB, b"foo", None, b"1"), pub(b"foo", b"x"), (UNSUB, b"1", 0)]


def test_payloads_may_hold_crlf_and_anything() -> None:
    data = b"a\r\nb\r\n\r\nPING\r\n\x00\xff"
    assert parse_all(b"PUB foo %d\r\n%b\r\n" % (len(data), data)) == [pub(b"foo", data)]


def test_ping_pong_ok_ignore_the_rest_of_their_line() -> None:
    assert parse_all(b"PINGX\r\nPONG junk\r\n+OKfoo\r\n") == [(PING,), (PONG,), (OK,)]


def test_nats_server_quirks() -> None:
    # a vertical tab or form feed is part of a field (Go splits on space, tab, CR and LF only)
    assert parse_all(b"PUB a\x0bb 1\r\nx\r\n") == [pub(b"a\x0bb", b"x")]
    assert parse_all(b"SUB a\x0cb 1\r\n") == [(SUB, b"a\x0cb", None, b"1")]
    # the argument starts at the first byte that is not a space or tab, even an LF
    assert parse_all(b"SUB \nfoo 1\r\n") == [(SUB, b"foo", None, b"1")]
    # a CR inside an argument drops the byte before the LF
    assert parse_all(b"SUB foo 12\rx\n") == [(SUB, b"foo", None, b"12")]
    # a client HMSG is an empty message on no subject, followed by an empty payload
    assert parse_all(b"HMSG anything at all\r\n\r\n") == [(PUB, b"", None, 0, b"", b"0")]


def test_connect_json_follows_go_rules() -> None:
    opts = decode_connect(b'{"Verbose":false,"PEDANTIC":false,"echo":null,"zz":[[1]],"name":"n"}')
    assert opts == ConnectOptions(verbose=False, pedantic=False, name="n")
    assert decode_connect(b"null") == ConnectOptions()
    assert decode_connect(b'{"verbose":false,"verbose":true}').verbose is True  # last wins
    assert decode_connect(b'{"pass":"p","user":"u","auth_token":"t"}').password == "p"
    assert decode_connect(b'{"name":"\\ud800"}').name  # a lone surrogate is replaced, not kept
    merged = decode_connect(b'{"headers":true}', ConnectOptions(verbose=False))
    assert merged.verbose is False and merged.headers is True  # absent fields keep their value
    for bad in (
        b"",
        b"[]",
        b"1",
        b'"x"',
        b"{",
        b'{"verbose":"yes"}',
        b'{"verbose":1}',
        b'{"protocol":1.0}',
        b'{"protocol":1e0}',
        b'{"protocol":"1"}',
        b'{"protocol":99999999999999999999}',
        b'{"protocol":NaN}',
        b'{"name":1}',
        b'{"import":5}',
        b'{"verbose":false} x',
        b"[" * 5000,
    ):
        with pytest.raises(ProtocolError) as info:
            decode_connect(bad)
        assert info.value.err is None, bad


def test_info_from_a_client_is_type_checked() -> None:
    validate_info(b'{"zzz":"x","connect_urls":["a"],"port":1}')
    validate_info(b"null")
    for bad in (b'{"port":"x"}', b'{"connect_urls":"a"}', b'{"max_payload":4294967296}', b"{bad", b""):
        with pytest.raises(ProtocolError):
            validate_info(bad)


def test_connect_state_carries_over() -> None:
    p = Parser()
    (op,) = p.feed(b'CONNECT {"verbose":false,"headers":true}\r\n')
    assert op == (CONNECT, ConnectOptions(verbose=False, headers=True))
    (op,) = p.feed(b'CONNECT {"echo":false}\r\n')
    assert op[1] == ConnectOptions(verbose=False, headers=True, echo=False)
    assert p.connect == op[1]


# -- large payloads -----------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 977, 4096, 65536])
def test_large_payload_in_many_chunks(chunk: int) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB, with CRLFs inside
    data = b"PUB big 1048576\r\n" + payload + b"\r\nPING\r\n"
    if chunk == 1:  # byte by byte: a smaller (still collected) payload keeps the test quick
        payload = payload[:100000]
        data = b"PUB big 100000\r\n" + payload + b"\r\nPING\r\n"
    p = Parser()
    ops = collect(p, [data[i : i + chunk] for i in range(0, len(data), chunk)])
    assert ops == [pub(b"big", payload), (PING,)]
    assert p.pending() == 0


def test_collecting_a_payload_does_not_reparse() -> None:
    p = Parser()
    assert p.feed(b"PUB big 200000\r\n" + b"x" * 100) == []
    assert p.pending() > 0
    for _ in range(199):
        assert p.feed(b"x" * 1000) == []
    assert p.pending() <= 200000 + 64
    assert flat(p.feed(b"x" * 900 + b"\r\n")) == [pub(b"big", b"x" * 200000)]
    assert COLLECT_THRESHOLD < 200000


def test_memory_stays_bounded_on_lines_nats_server_reads_without_limit() -> None:
    p = Parser()
    p.feed(b"PING")
    for _ in range(100):
        p.feed(b"junk" * 250)
    assert p.pending() <= DEFAULT_MAX_CONTROL_LINE + 8
    assert p.feed(b"\r\n") == [(PING,)]
    p = Parser()
    p.feed(b"SUB")
    for _ in range(100):
        p.feed(b" " * 1000)
    assert p.pending() <= DEFAULT_MAX_CONTROL_LINE + 8
    assert p.feed(b"foo 1\r\n") == [(SUB, b"foo", None, b"1")]


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"FOO\r\n",
        b"\r\n",
        b"\n",
        b" PUB foo 1\r\nx\r\n",
        b"PUB\r\n",
        b"PUBX foo 1\r\nx\r\n",
        b"SUB\r\n",
        b"UNSUB\r\n",
        b"HPUB\r\n",
        b"-ERR\r\n",
        b"PIX\r\n",
        b"MSG foo 1 1\r\nx\r\n",
        b"PUB foo 2\r\nhiXX",
        b"PUB foo 2\r\nhi\n",
        b"PUB foo 2\r\nhi\r\r",
        b"HMSG x\r\nX",
    ],
)
def test_unknown_protocol_operation(data: bytes) -> None:
    fails(data, ERR_UNKNOWN_OP)


@pytest.mark.parametrize("data", [b"X", b"PUX", b"SUBX", b"CONNEX"])
def test_a_bad_op_is_reported_before_its_line_ends(data: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        Parser().feed(data)
    assert info.value.err == ERR_UNKNOWN_OP


@pytest.mark.parametrize(
    "data",
    [
        b"PUB foo x\r\n",
        b"PUB foo -1\r\n",
        b"PUB foo +1\r\n",
        b"PUB foo 1_0\r\n",
        b"PUB foo 0000000001\r\n",
        b"PUB foo 99999999999999999999\r\n",
        b"PUB foo\r\n",
        b"PUB \r\n",
        b"PUB a b c 1\r\nx\r\n",
        b"SUB foo\r\n",
        b"SUB \r\n",
        b"SUB a b c d\r\n",
        b"UNSUB \r\n",
        b"UNSUB 1 2 3\r\n",
        b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",  # headers not negotiated
        b"CONNECT\r\n",
        b"CONNECT {bad\r\n",
        b"CONNECT []\r\n",
        b'CONNECT {"verbose":"yes"}\r\n',
        b'CONNECT {"protocol":1.5}\r\n',
        b"CONNECTX {}\r\n",
        b"INFO\r\n",
        b"INFO {bad\r\n",
        b'INFO {"port":"x"}\r\n',
    ],
)
def test_malformed_arguments_close_silently(data: bytes) -> None:
    fails(data, None)


@pytest.mark.parametrize(
    "data",
    [
        b"HPUB foo x 14\r\n",
        b"HPUB foo 12 x\r\n",
        b"HPUB foo 14\r\n",
        b"HPUB a b c d e\r\n",
        b"HPUB foo 14 12\r\nNATS/1.0\r\n\r\n\r\n",
    ],
)
def test_malformed_hpub(data: bytes) -> None:
    fails(HEADERS_ON + data, None)


def test_max_payload() -> None:
    fails(b"PUB foo 1048577\r\n", ERR_MAX_PAYLOAD)
    fails(b"PUB foo 999999999\r\n", ERR_MAX_PAYLOAD)
    fails(HEADERS_ON + b"HPUB foo 10 2000000\r\n", ERR_MAX_PAYLOAD)
    fails(b"PUB foo 11\r\n", ERR_MAX_PAYLOAD, Limits(max_payload=10))
    assert parse_all(b"PUB foo 10\r\n0123456789\r\n", Limits(max_payload=10)) == [pub(b"foo", b"0123456789")]


def test_max_control_line_counts_the_argument() -> None:
    # the limit applies to the argument (after the op name and its spaces), and "> limit" fails
    ok = b"a" * (DEFAULT_MAX_CONTROL_LINE - 2)
    assert parse_all(b"SUB  \t" + ok + b" 1\r\n") == [(SUB, ok, None, b"1")]
    fails(b"SUB " + ok + b"x 1\r\n", ERR_MAX_CONTROL_LINE)
    fails(b"PUB " + ok + b"xx 1\r\nx\r\n", ERR_MAX_CONTROL_LINE)
    fails(b"SUB foo 1\r\n", ERR_MAX_CONTROL_LINE, Limits(max_control_line=4))
    assert parse_all(b"SUB fo 1\r\n", Limits(max_control_line=4)) == [(SUB, b"fo", None, b"1")]


def test_max_control_line_without_a_newline() -> None:
    for data in (b"SUB " + b"a" * 5000, b"PUB " + b"a" * 5000, b"CONNECT " + b"x" * 5000):
        with pytest.raises(ProtocolError) as info:
            Parser().feed(data)
        assert info.value.err == ERR_MAX_CONTROL_LINE
    p = Parser()
    p.feed(b"SUB " + b"a" * 4000)
    with pytest.raises(ProtocolError) as info:
        p.feed(b"a" * 97)
    assert info.value.err == ERR_MAX_CONTROL_LINE
    p = Parser()
    assert p.feed(b"SUB " + b"a" * 4094 + b" 1\r") == []  # the CR does not count
    assert p.feed(b"\n") == [(SUB, b"a" * 4094, None, b"1")]


def test_expect_connect_refuses_any_other_first_op() -> None:
    for data in (
        b"PING\r\n",
        b"P",
        b"+OK\r\n",
        b"\r\n",
        b"XYZ\r\n",
        b"SUB foo 1\r\n",
        b"PUB foo 9999999\r\n",
    ):
        with pytest.raises(ProtocolError) as info:
            Parser(expect_connect=True).feed(data)
        assert info.value.err == ERR_AUTH_VIOLATION, data
    assert fails(b"CXYZ\r\n", ERR_UNKNOWN_OP, Limits(expect_connect=True)) == []
    ops = parse_all(b'CONNECT {"user":"a"}\r\nPING\r\nPUB foo 1\r\nx\r\n', Limits(expect_connect=True))
    assert ops[1:] == [(PING,), pub(b"foo", b"x")]


def test_ops_before_an_error_travel_with_it() -> None:
    assert fails(b"PING\r\nSUB foo 1\r\nFOO\r\n", ERR_UNKNOWN_OP) == [(PING,), (SUB, b"foo", None, b"1")]
    assert fails(b"PUB foo 1\r\nx\r\nPUB foo x\r\n", None) == [pub(b"foo", b"x")]


def test_the_parser_resets_after_an_error() -> None:
    p = Parser()
    with pytest.raises(ProtocolError):
        p.feed(b"PUB foo 2\r\nh")
        p.feed(b"iX")
    assert p.pending() == 0
