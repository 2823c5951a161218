"""`jetpy consumer pause / resume / unpin` and what `consumer info` shows of a pause and a pin,
against jetpy and the newest nats-server (2.15.1; 2.9 has no pause): the same outcomes."""

from __future__ import annotations

import json

import pytest

from cli.conftest import api, js_publish, run_cli, run_many
from conftest import Proc


@pytest.fixture(params=["jetpy", "newest"])
def server(request: pytest.FixtureRequest) -> Proc:
    proc: Proc = request.getfixturevalue("jetpy" if request.param == "jetpy" else "newest_proc")
    return proc


async def test_pause_resume_and_unpin(server: Proc) -> None:
    url = server.url
    await api(url, "STREAM.CREATE.PAUSED", {"name": "PAUSED", "subjects": ["paused.*"]})
    await js_publish(url, ("paused.a", b"one"))
    config = {"durable_name": "W", "ack_policy": "explicit", "priority_policy": "pinned_client",
              "priority_groups": ["workers"]}  # fmt: skip
    await api(url, "CONSUMER.CREATE.PAUSED.W", {"stream_name": "PAUSED", "config": config})

    paused = run_cli(url, "consumer", "pause", "PAUSED", "W", "2h")
    assert paused.code == 0 and "Paused PAUSED > W until" in paused.out and "left" in paused.out, paused
    info, until = run_many(
        url,
        ["consumer", "info", "PAUSED", "W"],
        ["consumer", "pause", "PAUSED", "W", "2100-01-01T00:00:00Z", "--json"],
    )
    assert "Paused Until:" in info.out and "Priority Policy: pinned_client" in info.out, info
    assert json.loads(until.out)["pause_until"] == "2100-01-01T00:00:00Z"
    empty = run_cli(url, "consumer", "next", "PAUSED", "W", "--wait", "300ms", "--group", "workers")
    assert empty.code == 1  # paused: nothing comes

    resumed = run_cli(url, "consumer", "resume", "PAUSED", "W")
    assert resumed.code == 0 and "is not paused" in resumed.out, resumed
    got = run_cli(url, "consumer", "next", "PAUSED", "W", "--raw", "--group", "workers")
    assert got.code == 0 and got.out == "one\n", got
    pinned = run_cli(url, "consumer", "info", "PAUSED", "W")
    assert "Group workers: pinned to " in pinned.out, pinned

    unpinned, wrong, bad = run_many(
        url,
        ["consumer", "unpin", "PAUSED", "W", "workers"],
        ["consumer", "unpin", "PAUSED", "W", "other"],
        ["consumer", "pause", "PAUSED", "W", "tomorrow"],
    )
    assert unpinned.code == 0 and "Unpinned group workers" in unpinned.out, unpinned
    assert wrong.code == 1 and "10160" in wrong.err, wrong
    assert bad.code == 2, bad
