"""Bad input: unknown flags, invalid names and values, unreachable servers, wrong credentials.

Each is one clear line on stderr, a documented exit code (2 usage, 3 connection, 1 server), and
nothing half-created on the server.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.conftest import CLI, Result, api, cli_env, run_cli, run_many
from conftest import JETPY_SERVER, Proc, free_port, start_process


def one_line(r: Result) -> str:
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r
    assert lines[0].startswith("jetpy: error: "), r
    assert r.out == "", r
    return lines[0]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """jetpy with a user and password and without JetStream."""
    d = tmp_path_factory.mktemp("guarded")
    p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "--user", "admin", "--pass", "s3cret"],
        d / "guarded.log",
    )
    yield p
    p.stop(signal.SIGKILL)


async def test_usage_errors_are_one_line_exit_2_and_create_nothing(jetpy: Proc) -> None:
    url = jetpy.url
    results = run_many(
        url,
        ["stream", "add", "NEW1", "--subjects", "new1.>", "--bogus"],
        ["stream", "add", "NEW2", "--subjects", "new2.>", "--max-age", "1q"],
        ["stream", "add", "NEW3", "--subjects", "new3.>", "--max-msgs", "lots"],
        ["stream", "add", "BAD.NAME", "--subjects", "bad.>"],
        ["stream", "add", "NEW4", "--subjects", "new4 .x"],
        ["stream", "add", "NEW5", "--retention", "forever"],
        ["kv", "add", "my bucket"],
        ["kv", "put", "CFGX", "bad key!", "v"],
        ["kv", "get", "CFGX", ".hidden"],
        ["object", "add", "a.b"],
        ["consumer", "add", "S", "C.1"],
        ["pub", "a.*", "x"],
        ["nosuchverb"],
    )
    expect = [
        "No such option: --bogus",
        "invalid duration '1q'",
        "'--max-msgs'",
        "invalid stream name 'BAD.NAME'",
        "invalid subject 'new4 .x'",
        "invalid value 'forever'",
        "invalid bucket name 'my bucket'",
        "invalid key 'bad key!'",
        "invalid key '.hidden'",
        "invalid bucket name 'a.b'",
        "invalid consumer name 'C.1'",
        "cannot publish to a wildcard subject",
        "No such command 'nosuchverb'",
    ]
    for r, text in zip(results, expect, strict=True):
        assert r.code == 2, r
        assert text in one_line(r), r
    streams = (await api(url, "STREAM.NAMES"))["streams"] or []
    assert not [s for s in streams if s.startswith(("NEW", "BAD", "KV_my", "OBJ_a"))], streams


def test_unreachable_server_is_exit_3() -> None:
    port = free_port()
    r = run_cli(f"nats://127.0.0.1:{port}", "stream", "ls")
    assert r.code == 3
    assert one_line(r) == f"jetpy: error: could not connect to nats://127.0.0.1:{port}: connection refused"


def test_credentials(guarded: Proc, tmp_path: Path) -> None:
    url = guarded.url
    wrong, none, missing_creds, right = run_many(
        None,
        ["-s", url, "--user", "admin", "--password", "nope", "pub", "x", "y"],
        ["-s", url, "pub", "x", "y"],
        ["-s", url, "--creds", str(tmp_path / "missing.creds"), "pub", "x", "y"],
        ["-s", url, "--user", "admin", "--password", "s3cret", "pub", "x", "y"],
    )
    assert wrong.code == 3 and "authorization failed" in one_line(wrong)
    assert none.code == 3 and "authorization failed" in one_line(none)
    assert missing_creds.code == 3 and "credentials file" in one_line(missing_creds)
    assert right.code == 0 and "Published 1 bytes to 'x'" in right.out, right
    # connected, but this server has no JetStream: a server-side error, exit 1
    nojs = run_cli(None, "-s", url, "--user", "admin", "--password", "s3cret", "stream", "ls")
    assert nojs.code == 1 and "JetStream is not enabled" in one_line(nojs)


def test_the_jetpy_command_routes_cli_verbs_to_the_cli(jetpy: Proc) -> None:
    import subprocess

    p = subprocess.run(
        [sys.executable, "-m", "jetpy.entry", "-s", jetpy.url, "stream", "ls", "--names"],
        capture_output=True,
        env=cli_env(),
        timeout=60,
    )
    assert p.returncode == 0, p
    h = subprocess.run([*CLI, "--help"], capture_output=True, env=cli_env(), timeout=60)
    assert h.returncode == 0 and b"stream" in h.stdout and b"kv" in h.stdout
