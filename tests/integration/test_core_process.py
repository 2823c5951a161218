"""jetpy-server as a process: SIGTERM and SIGINT shut down gracefully (clients get what was already
routed to them, then the connection closes; exit code 0), and the pid file comes and goes."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import JETPY_SERVER, Proc, start_process

PAYLOAD = b"x" * 1000
COUNT = 6000  # ~6 MB: more than the kernel's socket buffers hold, so some waits in the server


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[tuple[Proc, Path]]:
    pid_file = tmp_path / "jetpy.pid"
    p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-P", str(pid_file)], tmp_path / "jetpy.log"
    )
    yield p, pid_file
    p.stop(signal.SIGKILL)


def raw(port: int, first: bytes, rcvbuf: int = 0) -> socket.socket:
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    s.settimeout(10)
    s.sendall(first)
    return s


def read_until(s: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = s.recv(65536)
        assert chunk, data[-200:]
        data += chunk
    return data


def read_to_eof(s: socket.socket) -> bytes:
    chunks = []
    while chunk := s.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_shuts_down_gracefully(proc: tuple[Proc, Path], sig: signal.Signals) -> None:
    p, pid_file = proc
    # a subscriber that stops reading, so the server holds undelivered messages for it
    sub = raw(p.port, b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n', rcvbuf=4096)
    read_until(sub, b"PONG\r\n")
    pub = raw(p.port, b'CONNECT {"verbose":false}\r\n')
    frame = b"PUB flood %d\r\n%b\r\n" % (len(PAYLOAD), PAYLOAD)
    pub.sendall(frame * COUNT + b"PING\r\n")
    read_until(pub, b"PONG\r\n")  # every PUB has been routed to the subscriber's buffers
    p.popen.send_signal(sig)
    got = read_to_eof(sub)  # everything routed arrives, then the server closes the connection
    assert got.count(b"MSG flood 1 1000\r\n") == COUNT
    assert got.endswith(PAYLOAD + b"\r\n")
    assert read_to_eof(pub) == b""
    assert p.popen.wait(10) == 0
    assert not pid_file.exists()
    assert "Server Exiting" in p.log() or "shutting down" in p.log().lower()
    sub.close()
    pub.close()


def test_pid_file_is_written_and_removed(proc: tuple[Proc, Path]) -> None:
    p, pid_file = proc
    deadline = time.monotonic() + 5
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert int(pid_file.read_text().strip()) == p.popen.pid
    os.kill(p.popen.pid, signal.SIGTERM)
    assert p.popen.wait(10) == 0
    assert not pid_file.exists()
