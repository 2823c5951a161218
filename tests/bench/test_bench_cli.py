"""`jetpy bench` end to end against Debian's nats-server (the reference), in-process via ``main``.

Counts are small so the module stays fast; what matters is that every message is accounted for
and that ``--json`` prints exactly one parseable line.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import NotFoundError

from conftest import free_port
from jetpy.cli.main import main

pytestmark = pytest.mark.skipif(
    shutil.which("nats-server") is None,
    reason="Debian's nats-server (the reference) is not installed; `make reference` installs it",
)


@pytest.fixture(scope="module")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    store = tmp_path_factory.mktemp("nats-store")
    proc = subprocess.Popen(
        ["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    if s.recv(64).startswith(b"INFO"):
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("nats-server did not start")
                time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _bench_json(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> dict[str, Any]:
    code = main(["-s", url, "bench", *args, "--json", "--no-progress"])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    doc: dict[str, Any] = json.loads(lines[0])
    assert code == 0, doc
    assert doc["complete"] is True
    assert doc["errors"] == 0
    return doc


def test_pub_only_counts_every_message(capsys: pytest.CaptureFixture[str], nats_url: str) -> None:
    doc = _bench_json(capsys, nats_url, "bench.pub", "--pub", "3", "--msgs", "10000")
    assert doc["mode"] == "pub"
    assert doc["sub"] is None
    assert doc["pub"]["msgs"] == 10000
    # split across publishers like nats bench: 3334 + 3333 + 3333
    assert [c["msgs"] for c in doc["pub"]["clients"]] == [3334, 3333, 3333]
    assert doc["pub"]["msgs_per_s"] > 0


def test_pubsub_every_subscriber_gets_every_message(
    capsys: pytest.CaptureFixture[str], nats_url: str
) -> None:
    doc = _bench_json(
        capsys, nats_url, "bench.pubsub", "--pub", "2", "--sub", "3", "--msgs", "6000", "--size", "64"
    )
    assert doc["mode"] == "pubsub"
    assert doc["size"] == 64
    assert doc["pub"]["msgs"] == 6000
    assert [c["msgs"] for c in doc["sub"]["clients"]] == [6000, 6000, 6000]
    assert doc["sub"]["msgs"] == doc["expected_received"] == 18000
    assert doc["aggregate"]["msgs"] == 24000


def test_request_reply_latency(capsys: pytest.CaptureFixture[str], nats_url: str) -> None:
    doc = _bench_json(capsys, nats_url, "bench.req", "--request", "--pub", "2", "--sub", "2", "--msgs", "400")
    assert doc["mode"] == "request"
    assert doc["pub"]["msgs"] == 400
    lat = doc["latency_us"]
    assert lat["count"] == 400
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]


@pytest.mark.parametrize(
    ("args", "received"),
    [
        (["--js", "--storage", "memory"], None),
        (["--js", "--storage", "file", "--sub", "2", "--push"], 2 * 2000),
        (["--js", "--storage", "memory", "--pub", "0", "--sub", "2", "--pull", "--batch", "100"], 2000),
        (["--js", "--storage", "memory", "--pub", "2", "--sub", "1", "--pull", "--ack", "none"], 2000),
    ],
)
def test_jetstream_modes_and_cleanup(
    capsys: pytest.CaptureFixture[str], nats_url: str, args: list[str], received: int | None
) -> None:
    doc = _bench_json(capsys, nats_url, "bench.js", "--msgs", "2000", "--stream", "jetpybenchtest", *args)
    assert doc["mode"].startswith("js-")
    if doc["pub"] is not None:
        assert doc["pub"]["msgs"] == 2000  # every publish acknowledged
    if received is None:
        assert doc["sub"] is None
    else:
        assert doc["sub"]["msgs"] == received
    assert not asyncio.run(_stream_exists(nats_url, "jetpybenchtest"))


async def _stream_exists(url: str, name: str) -> bool:
    nc = await nats.connect(url)
    try:
        await nc.jsm().stream_info(name)
    except NotFoundError:
        return False
    finally:
        await nc.close()
    return True


def test_text_report(capsys: pytest.CaptureFixture[str], nats_url: str) -> None:
    code = main(["-s", nats_url, "bench", "bench.text", "--sub", "1", "--msgs", "1000", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Starting pub/sub benchmark" in out
    assert "Pub stats:" in out and "Sub stats:" in out and "Aggregate:" in out
    assert "Complete: every message accounted for" in out


def test_nats_url_environment_is_the_default_server(
    capsys: pytest.CaptureFixture[str], nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_URL", nats_url)
    code = main(["bench", "bench.env", "--msgs", "100", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["server"] == nats_url


def test_unreachable_server_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    assert main(["-s", url, "bench", "x", "--msgs", "10", "--json"]) == 2
    assert "cannot connect" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "x", "--pub", "0"],
        ["bench", "x", "--pull"],
        ["bench", "x", "--js", "--pull", "--push"],
        ["bench", "x", "--request", "--js"],
        ["bench", "x", "--size", "lots"],
        ["bench"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    assert main(args) == 2
    capsys.readouterr()


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    assert "--request" in capsys.readouterr().out


def test_entry_routes_to_cli() -> None:
    # `jetpy` (entry.py) hands every verb but `server` to this CLI
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [str(root / ".venv" / "bin" / "jetpy"), "--help"], capture_output=True, text=True, timeout=30
    )
    if proc.returncode == 127 or not (root / ".venv" / "bin" / "jetpy").exists():
        pytest.skip("jetpy console script not installed")
    assert proc.returncode == 0
    assert "bench" in proc.stdout
