"""Differential: permissions as nats-server 2.9.10 and 2.15.1 enforce them, against jetpy.

Each server runs the same config file (jetpy as a subprocess, so the file's parsing is part of
what is compared); each scenario drives one or more raw-socket clients and compares every
client's bytes (INFO normalised to its field names and types) and whether it was closed. The log
lines a violation writes are compared with 2.15.1's (whose spelling jetpy follows). The two
deliberate differences (a wildcard subscription must fall within an allow entry; a queue deny
never lifts a plain deny) are tested against jetpy alone in tests/integration/test_permissions.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import JETPY_SERVER, Proc, newest_cmd, reference_cmd, start_process

pytestmark = pytest.mark.differential

CONF = """
authorization {
  default_permissions { publish: { deny: "never.>" } }
  users [
    {user: a, password: a, permissions: {
      publish: {allow: ["foo.>", "_INBOX.>", "req.*"], deny: "foo.secret"},
      subscribe: {allow: ["foo.>", "_INBOX.>", "q.* qg", "w.*", ">"], deny: ["foo.secret.>", "w.x qq"]}}}
    {user: r, password: r, permissions: {publish: "req.>", subscribe: ">", allow_responses: {max: 2}}}
    {user: t, password: t, permissions: {publish: "req.>", subscribe: ">", allow_responses: true}}
    {user: s, password: s, permissions: {subscribe: {allow: ["foo.*", "bar"]}}}
    {user: d, password: d}
    {user: b, password: b, permissions: {publish: {allow: ">"}}}
  ]
}
"""


def connect(user: str, verbose: bool = False) -> bytes:
    v = "true" if verbose else "false"
    return f'CONNECT {{"verbose":{v},"pedantic":false,"user":"{user}","pass":"{user}"}}\r\n'.encode()


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[tuple[str, bytes], ...]  # (client, bytes); a client connects at its first step
    users: tuple[tuple[str, str], ...] = ()  # client -> user (default: the client's name)


SCENARIOS = [
    Scenario(
        "publish_denied",
        (("a", b"PUB bar 1\r\nx\r\nPUB foo.secret 1\r\nx\r\nPUB foo.ok 1\r\nx\r\nPING\r\n"),),
    ),
    Scenario("publish_denied_verbose", (("a", b"PUB bar 1\r\nx\r\nPUB foo.ok 1\r\nx\r\nPING\r\n"),)),
    Scenario("publish_denied_run", (("a", b"PUB bar 1\r\nx\r\n" * 3 + b"PING\r\n"),)),
    Scenario("default_permissions_apply", (("d", b"PUB never.x 1\r\nx\r\nPUB ok 1\r\nx\r\nPING\r\n"),)),
    Scenario("hpub_denied", (("a", b"HPUB bar 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n"),)),
    Scenario(
        "subscribe_denied",
        (("s", b"SUB baz 1\r\nSUB foo.a.b 2\r\nSUB foo.* 3\r\nSUB foo.x q 4\r\nSUB bar 5\r\nPING\r\n"),),
    ),
    Scenario("subscribe_denied_invalid_subject", (("s", b"SUB a..b 1\r\nPING\r\n"),)),
    Scenario(
        "queue_permissions",
        (
            (
                "a",
                b"SUB q.a qg 1\r\nSUB q.a qx 2\r\nSUB w.x qq 3\r\nSUB w.x qz 4\r\nSUB foo.secret.x 5\r\nPING\r\n",
            ),
        ),
    ),
    Scenario("sys_queue_reserved", (("d", b"SUB foo _sys_ 1\r\nPING\r\n"),)),
    Scenario("reserved_replies", (("d", b"PUB x _R_.abc 1\r\nx\r\nPUB x $JS.ACK.a.b 1\r\ny\r\nPING\r\n"),)),
    Scenario(
        "wildcard_subscription_filtered",
        (
            ("a", b"SUB foo.> 1\r\nPING\r\n"),
            ("b", b"PUB foo.secret.y 1\r\nx\r\nPUB foo.b 1\r\ny\r\nPING\r\n"),
            ("a", b"PING\r\n"),
        ),
    ),
    Scenario(
        "allow_responses_max",
        (
            ("r", b"SUB svc 1\r\nPING\r\n"),
            ("b", b"SUB inbox.1 9\r\nPUB svc inbox.1 1\r\nq\r\nPING\r\n"),
            (
                "r",
                b"PUB inbox.1 1\r\n1\r\nPUB inbox.1 1\r\n2\r\nPUB inbox.1 1\r\n3\r\nPUB inbox.2 1\r\nz\r\nPING\r\n",
            ),
            ("b", b"PING\r\n"),
        ),
    ),
    Scenario(
        "allow_responses_default_one",
        (
            ("t", b"SUB svc 1\r\nPING\r\n"),
            ("b", b"SUB inbox.1 9\r\nPUB svc inbox.1 1\r\nq\r\nPING\r\n"),
            ("t", b"PUB inbox.1 1\r\n1\r\nPUB inbox.1 1\r\n2\r\nPUB req.x 1\r\nr\r\nPING\r\n"),
            ("b", b"PING\r\n"),
        ),
    ),
    Scenario(
        "account_in_connect", (("d", b'CONNECT {"verbose":false,"user":"d","pass":"d","account":"A"}\r\n'),)
    ),
]
VERBOSE = {"publish_denied_verbose"}


async def play(port: int, scenario: Scenario) -> dict[str, tuple[bytes, bool]]:
    """Run a scenario; every client's bytes (INFO normalised) and whether it was closed."""
    conns: dict[str, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
    out: dict[str, bytes] = {}
    closed: dict[str, bool] = {}

    async def drain(name: str, within: float) -> None:
        reader = conns[name][0]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not closed[name]:
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                chunk = await asyncio.wait_for(reader.read(65536), left)
            except TimeoutError:
                return
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                closed[name] = True
            out[name] += chunk

    for name, data in scenario.steps:
        if name not in conns:
            conns[name] = await asyncio.open_connection("127.0.0.1", port)
            out[name], closed[name] = b"", False
            while b"\r\n" not in out[name] and not closed[name]:
                await drain(name, 0.5)
            if not data.startswith(b"CONNECT"):
                conns[name][1].write(connect(name, scenario.name in VERBOSE))
        if not closed[name]:
            conns[name][1].write(data)
        await drain(name, 0.3)
    for name in conns:
        await drain(name, 0.2)
        conns[name][1].close()
    return {name: (_normalize(out[name]), closed[name]) for name in conns}


_INFO = re.compile(rb"INFO (\{.*?\}) \r\n")
_SAME_IN_BOTH = ("server_id", "server_name", "version", "proto", "go", "host", "port", "headers")


def _normalize(data: bytes) -> bytes:
    def shape(m: re.Match[bytes]) -> bytes:
        fields = {k: v for k, v in json.loads(m.group(1)).items() if k in (*_SAME_IN_BOTH, "auth_required")}
        return b"INFO <" + ",".join(sorted(fields)).encode() + b">\r\n"

    return _INFO.sub(shape, data)


def _start(cmd: list[str], tmp: Path, name: str) -> Proc:
    conf = tmp / f"{name}.conf"
    conf.write_text(CONF)
    return start_process([*cmd, "-c", str(conf)], tmp / f"{name}.log")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    tmp = tmp_path_factory.mktemp("perms")
    procs: dict[str, Proc] = {}
    try:
        procs["jetpy"] = _start([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1"], tmp, "jetpy")
        for name, cmd in (("2.9.10", reference_cmd), ("2.15.1", lambda _t: newest_cmd())):
            try:
                procs[name] = _start(cmd(tmp), tmp, name)
            except pytest.skip.Exception:
                continue
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_scenario(scenario: Scenario, servers: dict[str, Proc]) -> None:
    references = [n for n in servers if n != "jetpy"]
    if not references:
        pytest.skip("no reference nats-server installed")
    results = await asyncio.gather(*(play(servers[n].port, scenario) for n in servers))
    by_server = dict(zip(servers, results, strict=True))
    ours = by_server["jetpy"]
    for name in references:
        assert ours == by_server[name], f"differs from nats-server {name}"


async def test_violation_log_lines(servers: dict[str, Proc]) -> None:
    """The log lines of every kind of violation read as nats-server 2.15.1 writes them."""
    if "2.15.1" not in servers:
        pytest.skip("the newest nats-server is not installed")
    scenario = Scenario(
        "log",
        (
            ("a", b"PUB bar 1\r\nx\r\nSUB q.a qx 7\r\nPING\r\n"),
            ("s", b"SUB baz 3\r\nPING\r\n"),
            ("d", b"PUB x _R_.abc 1\r\nx\r\nPING\r\n"),
        ),
    )
    for name in ("jetpy", "2.15.1"):
        await play(servers[name].port, scenario)
    await asyncio.sleep(0.2)

    def lines(proc: Proc) -> list[str]:
        found = re.findall(r"\[ERR\] [^ ]+ - cid:\d+ - (.*Violation.*)", proc.log())
        return sorted(set(found))

    ours, theirs = lines(servers["jetpy"]), lines(servers["2.15.1"])
    assert ours == theirs
    assert '"$G/user:a" - Publish Violation - Subject "bar"' in ours
    assert '"$G/user:a" - Subscription Violation - Subject "q.a", Queue: "qx", SID 7' in ours
    assert '"$G/user:s" - Subscription Violation - Subject "baz", SID 3' in ours
    assert '"$G/user:d" - Publish Violation - Reply "_R_.abc"' in ours
