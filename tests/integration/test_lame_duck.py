"""Lame duck mode as nats-server 2.15.1 runs it: ``--signal ldm`` (or SIGUSR2) stops the
listener, sends clients that take async INFO an INFO with ``"ldm": true``, waits the grace
period, closes the clients one by one within the duration, then the process exits 0. jetpy and
the reference run side by side with the same config and clients."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process

CONF = 'lame_duck_duration: "30s"\nlame_duck_grace_period: "1s"\n'


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, Proc]]:
    conf = tmp_path / "ldm.conf"
    conf.write_text(CONF)
    procs = {
        "jetpy": start_process(
            [*JETPY_SERVER, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp_path / "j.log"
        )
    }
    if REFERENCE_NEWEST is not None:
        procs["2.15.1"] = start_process(
            [REFERENCE_NEWEST, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp_path / "r.log"
        )
    yield procs
    for p in procs.values():
        p.stop(signal.SIGKILL)


def clients(port: int) -> list[socket.socket]:
    socks = []
    for protocol in (1, 1, 0):
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
        s.recv(4096)
        s.sendall(b'CONNECT {"verbose":false,"protocol":%d}\r\nPING\r\n' % protocol)
        assert s.recv(4096).startswith(b"PONG\r\n")  # (2.15 may add an INFO after its first PONG)
        s.settimeout(0.05)
        socks.append(s)
    return socks


def watch(socks: list[socket.socket], port: int, started: float) -> tuple[list[bytes], list[float], bool]:
    """What each client got, when each was closed, and whether a new client could connect."""
    got = [b""] * len(socks)
    closed: list[float | None] = [None] * len(socks)
    accepted = False
    while None in closed and time.monotonic() - started < 10:
        for i, s in enumerate(socks):
            if closed[i] is not None:
                continue
            try:
                data = s.recv(4096)
            except TimeoutError:
                continue
            if data:
                got[i] += data
            else:
                closed[i] = time.monotonic() - started
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            accepted = True
        except OSError:
            pass
    return got, [c if c is not None else -1.0 for c in closed], accepted


def shape(data: bytes) -> list[object]:
    """INFO lines as their field names, the rest as is (RTT PINGs aside)."""
    out: list[object] = []
    for line in data.split(b"\r\n"):
        if line.startswith(b"INFO "):
            info = json.loads(line[5:])
            out.append([k for k in info if k in ("headers", "max_payload", "client_id", "client_ip", "ldm")])
            out.append(info.get("ldm"))
        elif line and line != b"PING":
            out.append(line)
    return out


@pytest.mark.parametrize("name", ["jetpy", "2.15.1"])
def test_lame_duck_mode(servers: dict[str, Proc], name: str) -> None:
    if name not in servers:
        pytest.skip("the newest nats-server is not installed")
    p = servers[name]
    socks = clients(p.port)
    started = time.monotonic()
    if name == "jetpy":
        sent = subprocess.run(
            [*JETPY_SERVER, "--signal", f"ldm={p.popen.pid}"], capture_output=True, timeout=30
        )
        assert sent.returncode == 0, sent.stderr
    else:
        p.popen.send_signal(signal.SIGUSR2)
    got, closed, accepted = watch(socks, p.port, started)
    assert not accepted  # the listener closed at once
    assert [shape(g) for g in got] == [
        [["headers", "max_payload", "client_id", "client_ip", "ldm"], True],
        [["headers", "max_payload", "client_id", "client_ip", "ldm"], True],
        [],  # protocol 0: no async INFO
    ]
    assert all(0.9 < c < 4.0 for c in closed), closed  # after the grace period, within a second each
    assert p.popen.wait(10) == 0
    log = p.log()
    for line in ("Entering lame duck mode, stop accepting new clients", "Closing existing clients"):
        assert line in log
