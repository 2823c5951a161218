"""`jetpy server info` and `jetpy server check` against jetpy and Debian's nats-server."""

from __future__ import annotations

import json

from cli.conftest import api, run_many
from conftest import Proc


async def test_server_info_and_check(any_server: Proc) -> None:
    url = any_server.url
    await api(url, "STREAM.CREATE.HEALTH", {"name": "HEALTH", "subjects": ["health.>"]})
    info, info_json, ok, too_few, missing, no_consumer = run_many(
        url,
        ["server", "info"],
        ["server", "info", "--json"],
        ["server", "check", "--stream", "HEALTH", "--max-rtt", "5s"],
        ["server", "check", "--stream", "HEALTH", "--min-msgs", "1", "--json"],
        ["server", "check", "--stream", "NOPE"],
        ["server", "check", "--stream", "HEALTH", "--consumer", "NOPE"],
    )
    assert info.code == 0, info
    doc = json.loads(info_json.out)
    assert f"Server ID: {doc['server']['server_id']}" in info.out
    assert f"Port: {any_server.port}" in info.out or f":{any_server.port}" in info.out
    assert doc["jetstream"]["streams"] >= 1 and "Enabled: yes" in info.out

    assert ok.code == 0, ok
    assert [line.split(":")[0] for line in ok.out.splitlines()] == [
        "OK   connection",
        "OK   jetstream",
        "OK   stream",
    ]
    report = json.loads(too_few.out)
    assert too_few.code == 1 and report["ok"] is False
    assert report["checks"][-1] == {
        "check": "stream",
        "ok": False,
        "detail": "stream HEALTH: 0 messages, fewer than 1",
    }
    assert missing.code == 1 and "FAIL stream: stream NOPE: stream not found" in missing.out
    assert missing.err.strip() == "jetpy: error: check failed: stream"
    assert no_consumer.code == 1 and "FAIL consumer" in no_consumer.out
