"""Bad input and attacks on authentication (the issue's list; JWT is not built): wrong passwords
in a row, an oversized CONNECT (before and after authentication), a CONNECT naming an account,
credentials of one kind sent for another, and CONNECT fuzzed with hypothesis. Each gets
nats-server's error and a closed connection (compared with nats-server 2.15.1), nothing leaks
to a subscriber watching everything, and the server keeps serving. Replayed and wrong nkey
signatures are in test_nkeys.py; untrusted client certificates and a stalled or plaintext TLS
handshake in test_tls.py."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process

CONF = """
authorization {
  users [
    {user: a, password: a}
    {user: watcher, password: w}
  ]
}
max_connections: 1000
"""


def _start(cmd: list[str], tmp: Path, name: str) -> Proc:
    conf = tmp / f"{name}.conf"
    conf.write_text(CONF)
    return start_process([*cmd, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp / f"{name}.log")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    tmp = tmp_path_factory.mktemp("attacks")
    procs = {"jetpy": _start(JETPY_SERVER, tmp, "jetpy")}
    if REFERENCE_NEWEST is not None:
        procs["2.15.1"] = _start([REFERENCE_NEWEST], tmp, "newest")
    try:
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


def talk(port: int, data: bytes, within: float = 1.0) -> tuple[bytes, bool]:
    """Send ``data`` after INFO; (what came back, closed by the server?)."""
    with socket.create_connection(("127.0.0.1", port), timeout=within) as s:
        s.recv(4096)
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return b"", True
        out = b""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                return out, True
            if not chunk:
                return out, True
            out += chunk
            if out.endswith(b"PONG\r\n"):
                break
        return out, False


class Watcher:
    """A client subscribed to what the attacks publish: none of it may reach it."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        self.sock.recv(4096)
        self.sock.sendall(b'CONNECT {"verbose":false,"user":"watcher","pass":"w"}\r\nSUB x 1\r\nPING\r\n')
        assert self.sock.recv(4096) == b"PONG\r\n"

    def seen(self) -> bytes:
        self.sock.sendall(b"PING\r\n")
        out = b""
        while not out.endswith(b"PONG\r\n"):
            out += self.sock.recv(65536)
        return out[: -len(b"PONG\r\n")]


def alive(port: int) -> bool:
    out, closed = talk(port, b'CONNECT {"verbose":false,"user":"a","pass":"a"}\r\nPING\r\n')
    return out == b"PONG\r\n" and not closed


VIOLATION = b"-ERR 'Authorization Violation'\r\n"
ATTACKS = {
    "wrong_password": (b'CONNECT {"verbose":false,"user":"a","pass":"nope"}\r\nPUB x 1\r\ny\r\n', VIOLATION),
    "bcrypt_hash_as_password": (
        b'CONNECT {"verbose":false,"user":"a","pass":"$2a$11$abcdefghijklmnopqrstuv"}\r\nPUB x 1\r\ny\r\n',
        VIOLATION,
    ),
    "token_for_users": (b'CONNECT {"verbose":false,"auth_token":"a"}\r\nPUB x 1\r\ny\r\n', VIOLATION),
    "no_credentials": (b'CONNECT {"verbose":false}\r\nPUB x 1\r\ny\r\n', VIOLATION),
    "account_field": (b'CONNECT {"verbose":false,"user":"a","pass":"a","account":"$SYS"}\r\n', VIOLATION),
    "pub_before_connect": (b"PUB x 1\r\ny\r\n", VIOLATION),
    "oversized_connect": (
        b'CONNECT {"user":"a","pass":"' + b"x" * 10000 + b'"}\r\n',
        b"-ERR 'maximum control line exceeded'\r\n",
    ),
    "oversized_partial_connect": (
        b'CONNECT {"user":"a","pass":"' + b"x" * 5000,
        b"-ERR 'maximum control line exceeded'\r\n",
    ),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_is_refused_as_nats_server_refuses_it(servers: dict[str, Proc], attack: str) -> None:
    data, expected = ATTACKS[attack]
    for name, p in servers.items():
        watcher = Watcher(p.port)
        out, closed = talk(p.port, data)
        assert (out, closed) == (expected, True), name
        assert watcher.seen() == b"", name  # nothing got through
        assert alive(p.port), name


def test_a_burst_of_wrong_passwords(servers: dict[str, Proc]) -> None:
    port = servers["jetpy"].port
    for i in range(200):
        out, closed = talk(port, b'CONNECT {"verbose":false,"user":"a","pass":"guess%d"}\r\n' % i, within=0.5)
        assert (out, closed) == (VIOLATION, True)
    time.sleep(0.2)  # the rate refills: the next line is written, with how many were suppressed
    assert talk(port, b'CONNECT {"verbose":false,"user":"a","pass":"again"}\r\n', within=0.5) == (
        VIOLATION,
        True,
    )
    assert alive(port)
    log = servers["jetpy"].log()
    assert 'authentication error - User "a"' in log and "guess" not in log  # the secret is never logged
    assert "client error log lines suppressed" in log  # a flood cannot flood the log


CONNECT_FIELDS = ["verbose", "pedantic", "user", "pass", "auth_token", "nkey", "sig", "jwt", "name", "lang",
                  "version", "protocol", "headers", "no_responders", "echo", "account", "new_account",
                  "tls_required", "Verbose", "USER"]  # fmt: skip
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
CONNECT_ARGS = st.one_of(
    st.dictionaries(st.sampled_from(CONNECT_FIELDS), JSON_VALUES, max_size=6).map(
        lambda d: json.dumps(d).encode()
    ),
    st.binary(max_size=200),
    st.text(max_size=100).map(str.encode),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arg=CONNECT_ARGS, ping=st.booleans())
def test_fuzzed_connect_gets_a_clean_answer(servers: dict[str, Proc], arg: bytes, ping: bool) -> None:
    """Whatever follows CONNECT: accepted (PONG), -ERR then closed, or closed without a word."""
    port = servers["jetpy"].port
    out, closed = talk(port, b"CONNECT " + arg + b"\r\n" + (b"PING\r\n" if ping else b""), within=0.5)
    if out.startswith(b"-ERR '"):
        assert closed and out.endswith(b"'\r\n") and out.count(b"\r\n") == 1, out
    elif out:
        assert out == b"PONG\r\n" and not closed, out
    else:
        assert closed or not ping, "no answer to a PING without a close"


def test_server_survived_the_fuzzing(servers: dict[str, Proc]) -> None:
    assert servers["jetpy"].popen.poll() is None and alive(servers["jetpy"].port)
