"""Differential: the same raw-socket conversations against Debian's nats-server and against jetpy,
comparing the bytes each replies with and whether it closes the connection.

INFO lines carry per-server values (ids, versions, ports), so they are compared by field names and
JSON types, in order. Everything else must be byte-identical. Each case documents a behaviour of
nats-server 2.9 that jetpy reproduces; the reference runs once per module, jetpy is embedded.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

import jetpy
from conftest import Proc, reference_cmd, start_process
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions

pytestmark = pytest.mark.differential

C = b'CONNECT {"verbose":false,"pedantic":false}\r\n'  # a quiet client
CV = b'CONNECT {"verbose":true,"pedantic":false}\r\n'
CP = b'CONNECT {"verbose":false,"pedantic":true}\r\n'
CH = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
AUTH = b'CONNECT {"verbose":false,"user":"a","pass":"b"}\r\n'
HDR = b"NATS/1.0\r\n\r\n"


@dataclass(frozen=True)
class Case:
    name: str
    steps: tuple[bytes, ...]
    pongs: int = 1  # PONGs that end the conversation; 0 = it ends when the server closes
    server: str = "plain"  # "plain" or "auth" (--user a --pass b, auth timeout 0.5 s)


CASES = [
    # defaults before CONNECT: verbose and pedantic
    Case("default_verbose", (b"SUB foo 1\r\nPUB foo 2\r\nhi\r\nPING\r\n",)),
    Case("default_pedantic", (b"SUB > 1\r\nPUB foo.* 1\r\nx\r\nPING\r\n",)),
    # +OK ordering
    Case("verbose_ok_order", (CV, b"SUB foo 1\r\nPUB foo 2\r\nhi\r\nUNSUB 1\r\nUNSUB 9\r\nPING\r\n")),
    Case("verbose_bad_sub", (CV, b"SUB a..b 1\r\nSUB foo 1\r\nSUB bar 1\r\nPING\r\n")),
    Case("verbose_ping_pong_info", (CV, b"PONG\r\n+OK\r\nINFO {}\r\nPING\r\n")),
    Case(
        "verbose_unsub_max", (CV, b"SUB foo 1\r\nUNSUB 1 1\r\nPUB foo 1\r\nx\r\nPUB foo 1\r\ny\r\nPING\r\n")
    ),
    # op names and separators
    Case("lowercase", (b'connect {"verbose":false}\r\n', b"sub foo 1\r\npUb foo 2\r\nhi\r\nping\r\n")),
    Case("tabs_spaces", (C, b"SUB\tfoo \t 1\r\nPUB  foo \t 2 \r\nhi\r\nPING\r\n")),
    Case("lf_control_lines", (C, b"SUB foo 1\nPUB foo 2\nhi\r\nPING\n")),
    Case("ping_junk", (C, b"PINGX\r\nPONG junk\r\n+OKjunk\r\nPING\r\n"), pongs=2),
    Case("connect_no_space", (b'CONNECT{"verbose":false}\r\n', b"PING\r\n")),
    Case("arg_starts_with_lf", (C, b"SUB \nfoo 1\r\nPUB foo 1\r\nx\r\nPING\r\n")),
    Case("cr_inside_arg", (C, b"SUB foo 12\rx\nPUB foo 1\r\nx\r\nPING\r\n")),
    Case("vertical_tab_is_not_a_separator", (C, b"SUB > 1\r\nPUB a\x0bb 1\r\nx\r\nPING\r\n")),
    Case("form_feed_in_sub", (C, b"SUB a.\x0c 1\r\nPUB a.\x0c 1\r\nx\r\nPING\r\n")),
    Case("client_info_ok", (C, b"INFO {}\r\n+OK\r\nPING\r\n")),
    Case("client_hmsg", (CV, b"SUB > 1\r\nHMSG x y z\r\n\r\nPING\r\n")),
    # unknown ops (fatal, -ERR)
    Case("unknown_op", (C, b"FOO bar\r\n"), pongs=0),
    Case("unknown_before_connect", (b"FOO\r\n",), pongs=0),
    Case("empty_line", (C, b"\r\n"), pongs=0),
    Case("leading_space", (C, b" PUB foo 2\r\nhi\r\n"), pongs=0),
    Case("op_without_space", (C, b"PUB\r\n"), pongs=0),
    Case("err_without_space", (C, b"-ERR\r\n"), pongs=0),
    Case("msg_from_client", (C, b"MSG foo 1 1\r\nx\r\n"), pongs=0),
    Case("partial_unknown", (C, b"PUX"), pongs=0),
    Case("partial_junk", (C, b"X"), pongs=0),
    Case("ops_before_unknown", (C, b"SUB foo 1\r\nPING\r\nPUB foo 1\r\nx\r\nFOO\r\n"), pongs=0),
    # malformed arguments (fatal, silent)
    Case("pub_bad_size", (C, b"PUB foo x\r\n"), pongs=0),
    Case("pub_negative_size", (C, b"PUB foo -1\r\n"), pongs=0),
    Case("pub_ten_digit_size", (C, b"PUB foo 0000000002\r\nhi\r\n"), pongs=0),
    Case("pub_nine_digit_size_echoed", (C, b"SUB foo 1\r\nPUB foo 000000002\r\nhi\r\nPING\r\n")),
    Case("pub_too_many_args", (C, b"PUB foo bar baz 2\r\nhi\r\n"), pongs=0),
    Case("pub_too_few_args", (C, b"PUB foo\r\n"), pongs=0),
    Case("pub_no_args", (C, b"PUB \r\n"), pongs=0),
    Case("sub_too_few", (C, b"SUB foo\r\n"), pongs=0),
    Case("sub_too_many", (C, b"SUB a b c d\r\n"), pongs=0),
    Case("unsub_too_many", (C, b"UNSUB 1 2 3\r\n"), pongs=0),
    Case("unsub_bad_max", (C, b"SUB foo 1\r\nUNSUB 1 x\r\nPUB foo 2\r\nhi\r\nPING\r\n")),
    Case("ops_before_bad_args", (C, b"SUB foo 1\r\nPING\r\nPUB foo 1\r\nx\r\nPUB foo x\r\n"), pongs=0),
    Case("payload_without_crlf", (C, b"PUB foo 2\r\nhiXX"), pongs=0),
    Case("payload_lf_only", (C, b"SUB foo 1\r\nPUB foo 2\r\nhi\nPING\r\n"), pongs=0),
    # limits
    Case("max_payload", (C, b"PUB foo 1048577\r\n"), pongs=0),
    Case("max_payload_hpub", (CH, b"HPUB foo 10 2000000\r\n"), pongs=0),
    Case(
        "ops_before_max_payload", (C, b"SUB foo 1\r\nPING\r\nPUB foo 1\r\nx\r\nPUB foo 9999999\r\n"), pongs=0
    ),
    Case("max_control_line", (C, b"PUB " + b"a" * 5000 + b" 2\r\nhi\r\n"), pongs=0),
    Case("max_control_line_partial", (C, b"SUB " + b"a" * 5000), pongs=0),
    Case("control_line_at_limit", (C, b"SUB " + b"a" * 4094 + b" 1\r\nPING\r\n")),
    Case("control_line_over_limit", (C, b"SUB " + b"a" * 4095 + b" 1\r\nPING\r\n"), pongs=0),
    Case("control_line_partial_at_limit", (C, b"SUB " + b"a" * 4094 + b" 1", b"\r\nPING\r\n")),
    Case("ping_line_has_no_limit", (C, b"PING" + b"x" * 5000, b"\r\n")),
    # subjects
    Case("invalid_sub", (C, b"SUB foo..bar 1\r\nSUB .foo 2\r\nSUB foo. 3\r\nSUB foo.>.bar 4\r\nPING\r\n")),
    Case("queue_name_unchecked", (C, b"SUB foo q.* 1\r\nPUB foo 1\r\nx\r\nPING\r\n")),
    Case("invalid_pub_pedantic", (CP, b"SUB foo.* 1\r\nPUB foo.* 2\r\nhi\r\nPUB a..b 1\r\nx\r\nPING\r\n")),
    Case(
        "invalid_pub_not_pedantic",
        (C, b"SUB foo.* 1\r\nPUB foo.* 2\r\nhi\r\nSUB > 2\r\nPUB a..b 1\r\nx\r\nPING\r\n"),
    ),
    Case("partial_wildcard_literal", (C, b"SUB foo* 1\r\nPUB foo* 1\r\nx\r\nPING\r\n")),
    Case(
        "wildcard_delivery_order",
        (
            C,
            b"SUB a.*.c 1\r\nSUB a.b.c 2\r\nSUB a.> 3\r\nSUB *.b.c 4\r\nSUB > 5\r\nSUB a.b.* 6\r\nPUB a.b.c 1\r\nx\r\nPING\r\n",
        ),
    ),
    Case("reply_subject_unchecked", (CP, b"SUB foo 1\r\nPUB foo a.* 1\r\nx\r\nPING\r\n")),
    # headers
    Case("hpub_without_headers", (C, b"HPUB foo 12 14\r\n" + HDR + b"hi\r\n"), pongs=0),
    Case("hpub_line_without_headers", (C, b"SUB foo 1\r\nPING\r\nHPUB foo 1 1\r\n"), pongs=0),
    Case("hpub", (CH, b"SUB foo 1\r\nHPUB foo r 12 14\r\n" + HDR + b"hi\r\nPING\r\n")),
    Case("hpub_sizes_echoed", (CH, b"SUB foo 1\r\nHPUB foo 012 014\r\n" + HDR + b"hi\r\nPING\r\n")),
    Case("hpub_zero_header_is_msg", (CH, b"SUB foo 1\r\nHPUB foo 0 2\r\nhi\r\nPING\r\n")),
    Case("hpub_header_larger_than_total", (CH, b"HPUB foo 14 12\r\n" + HDR + b"hi\r\n"), pongs=0),
    # no responders
    Case("no_responders", (CH, b"SUB inbox 1\r\nPUB foo inbox 2\r\nhi\r\nPING\r\n")),
    Case("no_responders_hpub", (CH, b"SUB inbox 1\r\nHPUB foo inbox 12 14\r\n" + HDR + b"hi\r\nPING\r\n")),
    Case("no_responders_without_reply_sub", (CH, b"PUB foo inbox 2\r\nhi\r\nPING\r\n")),
    Case("no_responders_not_to_queue_subs", (CH, b"SUB inbox q 1\r\nPUB foo inbox 2\r\nhi\r\nPING\r\n")),
    Case(
        "no_responders_sub_choice",
        (
            CH,
            b"SUB a.*.c 1\r\nSUB a.b.c 2\r\nSUB a.> 3\r\nSUB *.b.c 4\r\nPUB foo a.b.c 2\r\nhi\r\nPING\r\n",
        ),
    ),
    Case(
        "no_responders_echo_false",
        (
            b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"echo":false}\r\n',
            b"SUB inbox 1\r\nSUB foo 2\r\nPUB foo inbox 2\r\nhi\r\nPING\r\n",
        ),
    ),
    Case("no_responders_needs_headers", (b'CONNECT {"verbose":false,"no_responders":true}\r\n',), pongs=0),
    # echo, queues, unsub max, duplicate sids
    Case(
        "echo_false",
        (b'CONNECT {"verbose":false,"echo":false}\r\n', b"SUB foo 1\r\nPUB foo 2\r\nhi\r\nPING\r\n"),
    ),
    Case(
        "echo_false_queue",
        (b'CONNECT {"verbose":false,"echo":false}\r\n', b"SUB foo q 1\r\nPUB foo 2\r\nhi\r\nPING\r\n"),
    ),
    Case("queue_sub", (C, b"SUB foo q 1\r\nSUB foo 2\r\nPUB foo 2\r\nhi\r\nPING\r\n")),
    Case(
        "unsub_max",
        (C, b"SUB foo 1\r\nUNSUB 1 2\r\nPUB foo 1\r\na\r\nPUB foo 1\r\nb\r\nPUB foo 1\r\nc\r\nPING\r\n"),
    ),
    Case(
        "unsub_max_already_reached",
        (
            C,
            b"SUB foo 1\r\nPUB foo 1\r\na\r\nPUB foo 1\r\nb\r\nUNSUB 1 2\r\nPUB foo 1\r\nc\r\nPING\r\n",
        ),
    ),
    Case(
        "unsub_zero_and_negative",
        (C, b"SUB foo 1\r\nSUB foo 2\r\nUNSUB 1 0\r\nUNSUB 2 -1\r\nPUB foo 1\r\nx\r\nPING\r\n"),
    ),
    Case("duplicate_sid", (C, b"SUB foo 1\r\nSUB bar 1\r\nPUB foo 1\r\na\r\nPUB bar 1\r\nb\r\nPING\r\n")),
    Case("zero_payload_with_reply", (C, b"SUB foo 1\r\nPUB foo bar 0\r\n\r\nPING\r\n")),
    # runs of PUBs to one subject in a single read (two subscriptions of one client are on
    # different subjects: nats-server orders the members of one subject at random)
    Case(
        "run_two_subs_one_client",
        (C, b"SUB foo 1\r\nSUB > 2\r\n" + b"PUB foo 1\r\nx\r\n" * 3 + b"PING\r\n"),
    ),
    Case(
        "run_unsub_max_mid_run", (C, b"SUB foo 1\r\nUNSUB 1 2\r\n" + b"PUB foo 1\r\nx\r\n" * 4 + b"PING\r\n")
    ),
    Case(
        "run_wildcard",
        (C, b"SUB foo.* 1\r\nPUB foo.a 1\r\nx\r\nPUB foo.a 2\r\nyy\r\nPUB foo.b 0\r\n\r\nPING\r\n"),
    ),
    Case("run_queue_member", (C, b"SUB foo q 1\r\n" + b"PUB foo 1\r\nx\r\n" * 3 + b"PING\r\n")),
    Case("run_plain_and_queue", (C, b"SUB foo q 1\r\nSUB > 2\r\n" + b"PUB foo 1\r\nx\r\n" * 3 + b"PING\r\n")),
    Case(
        "run_echo_false",
        (
            b'CONNECT {"verbose":false,"echo":false}\r\n',
            b"SUB foo 1\r\n" + b"PUB foo 1\r\nx\r\n" * 3 + b"PING\r\n",
        ),
    ),
    Case(
        "run_broken_by_reply",
        (C, b"SUB foo 1\r\nPUB foo 1\r\na\r\nPUB foo r 1\r\nb\r\nPUB foo 1\r\nc\r\nPING\r\n"),
    ),
    Case("run_verbose", (CV, b"SUB foo 1\r\n" + b"PUB foo 1\r\nx\r\n" * 3 + b"PING\r\n")),
    Case("run_pedantic", (CP, b"SUB > 1\r\n" + b"PUB foo.* 1\r\nx\r\n" * 3 + b"PING\r\n")),
    # CONNECT: protocol, JSON and its types
    Case("protocol_1", (b'CONNECT {"verbose":false,"protocol":1}\r\n', b"PING\r\n")),
    Case("protocol_2", (b'CONNECT {"verbose":false,"protocol":2}\r\n',), pongs=0),
    Case("protocol_negative", (b'CONNECT {"verbose":false,"protocol":-1}\r\n',), pongs=0),
    Case("protocol_as_string", (b'CONNECT {"verbose":false,"protocol":"1"}\r\n', b"PING\r\n"), pongs=0),
    Case("protocol_float", (b'CONNECT {"verbose":false,"protocol":1.0}\r\n', b"PING\r\n"), pongs=0),
    Case("bad_json", (b"CONNECT {verbose\r\n",), pongs=0),
    Case("json_array", (b"CONNECT []\r\n",), pongs=0),
    Case("json_null", (b"CONNECT null\r\n", b"PING\r\n")),
    Case("json_trailing_garbage", (b'CONNECT {"verbose":false} x\r\n', b"PING\r\n"), pongs=0),
    Case("json_nan", (b'CONNECT {"protocol":NaN}\r\n',), pongs=0),
    Case("connect_empty", (b"CONNECT\r\n",), pongs=0),
    Case("connect_bad_name", (b"CONNECTX {}\r\n",), pongs=0),
    Case("field_wrong_type", (b'CONNECT {"verbose":"yes"}\r\n', b"PING\r\n"), pongs=0),
    Case("field_null_keeps_default", (b'CONNECT {"verbose":null}\r\n', b"PING\r\n")),
    Case("field_case_insensitive", (b'CONNECT {"Verbose":false}\r\n', b"PING\r\n")),
    Case("duplicate_keys_last_wins", (b'CONNECT {"verbose":false,"verbose":true}\r\n', b"PING\r\n")),
    Case("unknown_fields_ignored", (b'CONNECT {"verbose":false,"zz":[[{"a":1}]]}\r\n', b"PING\r\n")),
    Case("connect_twice", (C, C, b"PING\r\n")),
    Case("client_info_bad", (C, b'INFO {"port":"x"}\r\n'), pongs=0),
    Case("client_err_closes", (C, b"-ERR 'x'\r\nPING\r\n"), pongs=0),
    # authorization (--user a --pass b)
    Case("auth_ok", (AUTH, b"SUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n"), server="auth"),
    Case("auth_ok_verbose", (b'CONNECT {"user":"a","pass":"b"}\r\n', b"PING\r\n"), server="auth"),
    Case("auth_pipelined", (AUTH + b"SUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n",), server="auth"),
    Case(
        "auth_bad_password", (b'CONNECT {"verbose":false,"user":"a","pass":"x"}\r\n',), pongs=0, server="auth"
    ),
    Case("auth_no_credentials", (b'CONNECT {"verbose":false}\r\n',), pongs=0, server="auth"),
    Case("auth_token_instead", (b'CONNECT {"verbose":false,"auth_token":"b"}\r\n',), pongs=0, server="auth"),
    Case("auth_ping_first", (b"PING\r\n",), pongs=0, server="auth"),
    Case("auth_partial_first", (b"PI",), pongs=0, server="auth"),
    Case("auth_info_first", (b"INFO {}\r\n",), pongs=0, server="auth"),
    Case("auth_max_payload_first", (b"PUB foo 99999999\r\n",), pongs=0, server="auth"),
    Case("auth_empty_line_first", (b"\r\n",), pongs=0, server="auth"),
    Case("auth_c_but_not_connect", (b"CXYZ\r\n",), pongs=0, server="auth"),
    Case("auth_bad_json", (b"CONNECT {\r\n",), pongs=0, server="auth"),
    Case(
        "auth_before_protocol", (b'CONNECT {"protocol":2,"user":"a","pass":"x"}\r\n',), pongs=0, server="auth"
    ),
    Case(
        "auth_protocol_after_auth",
        (b'CONNECT {"protocol":2,"user":"a","pass":"b"}\r\n',),
        pongs=0,
        server="auth",
    ),
    Case("auth_timeout", (), pongs=0, server="auth"),
]

AUTH_CONF = "authorization { user: a, password: b, timeout: 0.5 }\n"
LIMITS_CONF = 'ping_interval: "200ms"\nping_max: 2\nmax_connections: 2\n'


def _start_reference(tmp: Path, conf: str | None) -> Proc:
    extra: list[str] = []
    if conf is not None:
        (tmp / "ref.conf").write_text(conf)
        extra = ["-c", str(tmp / "ref.conf")]
    return start_process(reference_cmd(tmp, *extra), tmp / "ref.log")


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    procs: dict[str, Proc] = {}
    try:
        for name, conf in (("plain", None), ("auth", AUTH_CONF), ("limits", LIMITS_CONF)):
            procs[name] = _start_reference(tmp_path_factory.mktemp(f"ref-{name}"), conf)
        yield procs
    finally:
        for p in procs.values():
            p.stop()


def jetpy_options(kind: str) -> ServerOptions:
    opts = ServerOptions(host="127.0.0.1", port=0)
    if kind == "auth":
        opts.username, opts.password, opts.auth_timeout = "a", "b", 0.5
    elif kind == "limits":
        opts.ping_interval, opts.ping_max, opts.max_connections = 0.2, 2, 2
    return opts


@asynccontextmanager
async def jetpy_server(kind: str) -> AsyncIterator[Server]:
    async with jetpy.Server(jetpy_options(kind)) as srv:
        yield srv


_INFO = re.compile(rb"INFO (\{.*?\}) \r\n")


def info_shape(m: re.Match[bytes]) -> bytes:
    fields = json.loads(m.group(1))
    return b"INFO <" + ",".join(f"{k}:{type(v).__name__}" for k, v in fields.items()).encode() + b"> \r\n"


def normalize(data: bytes) -> bytes:
    return _INFO.sub(info_shape, data)


async def converse(port: int, steps: tuple[bytes, ...], pongs: int, idle: float = 5.0) -> tuple[bytes, bool]:
    """Play ``steps`` (a short pause between them); returns (normalized reply, closed?)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = b""
    closed = False

    async def read_some(within: float) -> None:
        nonlocal out, closed
        try:
            chunk = await asyncio.wait_for(reader.read(65536), within)
        except TimeoutError:
            return
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            closed = True
        out += chunk

    try:
        while b"\r\n" not in out and not closed:  # INFO first
            await read_some(idle)
        for step in steps:
            if closed:
                break
            try:
                writer.write(step)
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.sleep(0.01)  # steps arrive as separate reads
        loop = asyncio.get_running_loop()
        deadline = loop.time() + idle
        while not closed and loop.time() < deadline:
            if pongs and out.count(b"PONG\r\n") >= pongs:
                await read_some(0.02)  # anything after the last PONG (or a close) shows up now
                break
            await read_some(deadline - loop.time())
    finally:
        writer.close()
    return normalize(out), closed


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_conversation(case: Case, references: dict[str, Proc]) -> None:
    async with jetpy_server(case.server) as srv:
        ref, ours = await asyncio.gather(
            converse(references[case.server].port, case.steps, case.pongs),
            converse(srv.port, case.steps, case.pongs),
        )
    assert ours == ref
    if case.pongs:
        assert not ref[1] and ref[0].count(b"PONG\r\n") == case.pongs
    else:
        assert ref[1], "the reference should have closed the connection"


@pytest.mark.parametrize("kind", ["plain", "auth"])
async def test_info_fields(kind: str, references: dict[str, Proc]) -> None:
    async with jetpy_server(kind) as srv:
        (ref, _), (ours, _) = await asyncio.gather(
            converse(references[kind].port, (), 0, idle=0.2), converse(srv.port, (), 0, idle=0.2)
        )
    assert ours == ref
    assert ref.startswith(b"INFO <server_id:str,") and b"max_payload:int" in ref


async def test_queue_group_delivers_each_message_once(references: dict[str, Proc]) -> None:
    # which member gets a message is random in both servers; each message reaches exactly one
    steps = (C, b"SUB foo q 1\r\nSUB foo q 2\r\n" + b"PUB foo 1\r\nx\r\n" * 50 + b"PING\r\n")
    async with jetpy_server("plain") as srv:
        (ref, _), (ours, _) = await asyncio.gather(
            converse(references["plain"].port, steps, 1), converse(srv.port, steps, 1)
        )
    for out in (ref, ours):
        ones, twos = out.count(b"MSG foo 1 1\r\n"), out.count(b"MSG foo 2 1\r\n")
        assert ones + twos == 50 and ones and twos


async def test_stale_connection(references: dict[str, Proc]) -> None:
    steps = (C,)
    async with jetpy_server("limits") as srv:
        ref, ours = await asyncio.gather(
            converse(references["limits"].port, steps, 0, idle=3.0), converse(srv.port, steps, 0, idle=3.0)
        )
    assert ours == ref
    assert ref[0].endswith(b"PING\r\nPING\r\n-ERR 'Stale Connection'\r\n") and ref[1]


async def test_active_client_is_pinged_once(references: dict[str, Proc]) -> None:
    async def busy(port: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(C)
        for _ in range(16):
            writer.write(b"PUB x 1\r\nx\r\n")
            await asyncio.sleep(0.05)
        writer.write(b"PING\r\n")
        out = b""
        while not out.endswith(b"PONG\r\n"):
            out += await asyncio.wait_for(reader.read(4096), 3)
        writer.close()
        return normalize(out)

    async with jetpy_server("limits") as srv:
        ref, ours = await asyncio.gather(busy(references["limits"].port), busy(srv.port))
    assert ours == ref
    assert ref.count(b"PING\r\n") == 1


async def test_max_connections(references: dict[str, Proc]) -> None:
    await asyncio.sleep(0.2)  # earlier tests' connections to the reference are gone

    async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # answer the server's PINGs (ping_interval is 0.2 s here): a held connection must not go
        # stale while a loaded machine delays the third one
        writer.write(b'CONNECT {"verbose":false}\r\n')
        while line := await reader.readline():
            if line == b"PING\r\n":
                writer.write(b"PONG\r\n")

    async def third(port: int) -> tuple[bytes, bool]:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        for r, _ in held:
            await r.readline()
        alive = [asyncio.create_task(keep_alive(r, w)) for r, w in held]
        try:
            return await converse(port, (), 0, idle=3.0)
        finally:
            for task in alive:
                task.cancel()
            for _, w in held:
                w.close()

    async with jetpy_server("limits") as srv:
        ref, ours = await asyncio.gather(third(references["limits"].port), third(srv.port))
    assert ours == ref
    assert ref[0].endswith(b"-ERR 'maximum connections exceeded'\r\n") and ref[1]
