"""Differential: the per-connection limits nats-server 2.15.1 enforces from the config file,
``max_subscriptions`` and ``max_sub_tokens`` (2.9.10 does not enforce the first), with their
-ERR texts, log lines and /varz fields, and a reload that may not change them."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process

pytestmark = pytest.mark.differential

CONF = """
max_subscriptions: 2
max_sub_tokens: 3
http_port: -1
websocket { port: -1, host: "127.0.0.1", no_tls: true, compression: true, allowed_origins: ["https://a.example"] }
"""


@pytest.fixture
def both(tmp_path: Path) -> Iterator[dict[str, Proc]]:
    if REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server is not installed")
    procs: dict[str, Proc] = {}
    for name, cmd in (("jetpy", JETPY_SERVER), ("2.15.1", [REFERENCE_NEWEST])):
        conf = tmp_path / f"{name}.conf"
        conf.write_text(CONF)
        procs[name] = start_process(
            [*cmd, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp_path / f"{name}.log", want_http=True
        )
    yield procs
    for p in procs.values():
        p.stop(signal.SIGKILL)


async def converse(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await reader.readline()
    writer.write(
        b'CONNECT {"verbose":false}\r\nSUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB a 1\r\nUNSUB 1\r\n'
        b"SUB d 4\r\nSUB a.b.c.d 5\r\nSUB a.b.c 6\r\nPING\r\n"
    )
    out = b""
    while not out.endswith(b"PONG\r\n"):
        out += await asyncio.wait_for(reader.read(4096), 5)
    writer.close()
    return out


async def varz(port: int) -> dict[str, object]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /varz HTTP/1.0\r\n\r\n")
    body = await reader.read()
    writer.close()
    doc: dict[str, object] = json.loads(body.partition(b"\r\n\r\n")[2])
    return doc


async def test_subscription_limits_as_nats_server(both: dict[str, Proc]) -> None:
    ours, theirs = await asyncio.gather(converse(both["jetpy"].port), converse(both["2.15.1"].port))
    assert ours == theirs
    assert ours == (
        b"-ERR 'maximum subscriptions exceeded'\r\n" * 2
        + b"-ERR 'Permissions Violation for Subscription to \"a.b.c.d\", too many tokens'\r\n"
        + b"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n"
    )
    await asyncio.sleep(0.2)
    for p in both.values():
        log = p.log()
        assert log.count("- maximum subscriptions exceeded") == 1  # at most one line every 2 s
        assert 'Subscription Violation Too Many Tokens - Subject "a.b.c.d", SID 5' in log


async def test_varz_limits_and_websocket(both: dict[str, Proc]) -> None:
    ours, theirs = await asyncio.gather(varz(both["jetpy"].http_port), varz(both["2.15.1"].http_port))
    for key in ("max_subscriptions", "tls_timeout"):
        assert ours[key] == theirs[key]
    ws_ours, ws_theirs = ours["websocket"], theirs["websocket"]
    assert isinstance(ws_ours, dict) and isinstance(ws_theirs, dict)
    assert sorted(ws_ours) == sorted(ws_theirs)
    for key in ("host", "no_tls", "compression", "allowed_origins"):
        assert ws_ours[key] == ws_theirs[key]


def test_reload_may_not_change_max_subscriptions(both: dict[str, Proc], tmp_path: Path) -> None:
    for name, p in both.items():
        (tmp_path / f"{name}.conf").write_text(CONF.replace("max_subscriptions: 2", "max_subscriptions: 5"))
        p.popen.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    wanted = "config reload not supported for MaxSubs: old=2, new=5"
    while not all(wanted in p.log() for p in both.values()):
        assert time.monotonic() < deadline, [p.log()[-500:] for p in both.values()]
        time.sleep(0.05)
