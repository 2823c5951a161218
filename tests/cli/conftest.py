"""Fixtures for the CLI tests: servers shared by a module, and the CLI run as a subprocess.

The CLI always runs as its own process (``python -m jetpy.cli``, the same code `jetpy` runs for
every verb but `jetpy server`), against a jetpy server process and, where marked, Debian's
nats-server. The servers are shared by the whole CLI suite (each CLI start costs more than most
tests), so every test uses its own stream and bucket names.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest

from conftest import JETPY_SERVER, REFERENCE, Proc, start_process

CLI = [sys.executable, "-m", "jetpy.cli"]
CLI_TIMEOUT = 60.0


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def __str__(self) -> str:  # shown by failed asserts
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_cli(url: str | None, *args: str, input: bytes | None = None, timeout: float = CLI_TIMEOUT) -> Result:
    """Run ``jetpy -s URL ARGS...`` to completion; stdin is empty (not a terminal) unless given."""
    cmd = [*CLI, *(["-s", url] if url else []), *args]
    p = subprocess.run(cmd, input=input or b"", capture_output=True, timeout=timeout, env=cli_env())
    return Result(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))


def run_many(url: str | None, *commands: list[str], timeout: float = CLI_TIMEOUT) -> list[Result]:
    """Run independent CLI invocations concurrently (the machine has cores to spare; CLIs start slowly)."""
    procs = [
        subprocess.Popen(
            [*CLI, *(["-s", url] if url else []), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env(),
        )
        for args in commands
    ]
    return [finish(p, timeout) for p in procs]


def start_cli(url: str, *args: str) -> subprocess.Popen[bytes]:
    """Start a long-running CLI (sub, reply, kv watch) in the background."""
    return subprocess.Popen(
        [*CLI, "-s", url, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )


def wait_ready(p: subprocess.Popen[bytes], marker: bytes, within: float = 20.0) -> None:
    """Wait until a background CLI prints ``marker`` on stderr (its subscription is registered)."""
    assert p.stderr is not None
    deadline = time.monotonic() + within
    seen = b""
    while marker not in seen:
        if time.monotonic() > deadline or p.poll() is not None:
            p.kill()
            raise AssertionError(f"{marker!r} not seen: {seen!r}")
        line = p.stderr.readline()
        seen += line


def finish(p: subprocess.Popen[bytes], timeout: float = 20.0) -> Result:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return Result(p.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


async def api(url: str, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A raw ``$JS.API`` request with nats-py: for setting up and checking state around the CLI."""
    nc = await nats.connect(url)
    try:
        msg = await nc.request("$JS.API." + subject, json.dumps(body or {}).encode(), timeout=5)
        resp: dict[str, Any] = json.loads(msg.data)
        return resp
    finally:
        await nc.close()


async def js_publish(url: str, *msgs: tuple[str, bytes]) -> None:
    """Publish into streams with nats-py, waiting for every PubAck."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for subject, data in msgs:
            await js.publish(subject, data)
    finally:
        await nc.close()


def _start_jetpy(store: Path, log: Path, *extra: str) -> Proc:
    return start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store), *extra], log
    )


# clients without credentials are "app" in the global account; "sys" is the system account's user
# (the server reports ask the $SYS requests, which only the system account's users may)
SYSTEM_USER_CONF = """
authorization { users: [{user: app, password: app}] }
no_auth_user: app
accounts { SYS: { users: [{user: sys, password: sys}] } }
system_account: SYS
"""


def as_system_user(url: str) -> str:
    return url.replace("nats://", "nats://sys:sys@")


@pytest.fixture(scope="session")
def jetpy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """jetpy-server with JetStream on a fresh file store, shared by every CLI test."""
    d = tmp_path_factory.mktemp("jetpy")
    conf = d / "server.conf"
    conf.write_text(SYSTEM_USER_CONF)
    p = _start_jetpy(d / "store", d / "jetpy.log", "-c", str(conf))
    yield p
    p.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """Debian's nats-server with JetStream, shared by every CLI test."""
    if REFERENCE is None:
        pytest.skip("Debian's nats-server is not installed (make test installs it with apt when it can)")
    d = tmp_path_factory.mktemp("ref")
    p = start_process(
        [REFERENCE, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(d / "store")], d / "ref.log"
    )
    yield p
    p.stop(signal.SIGKILL)


@pytest.fixture(scope="session", params=["jetpy", "nats-server"])
def any_server(request: pytest.FixtureRequest) -> Proc:
    """The test runs against jetpy and against the reference nats-server."""
    name = "jetpy" if request.param == "jetpy" else "reference"
    proc: Proc = request.getfixturevalue(name)
    return proc
