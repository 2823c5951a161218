"""The CLI's cluster verbs against three clustered jetpy servers (processes on loopback): the
"Cluster Information" of `stream info` and `consumer info`, `stream cluster step-down`,
`consumer cluster step-down`, `stream cluster peer-remove`, and the system account's
`server raft step-down` and `server raft peer-remove`; each checked through nats-py, and the
refusals (an R1 stream, a user outside the system account, an unknown server) said clearly.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from .jscluster import ACCOUNTS, JsCluster

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JsCluster]:
    root = tmp_path_factory.mktemp("js-cli")
    conf = root / "accounts.conf"
    conf.write_text(ACCOUNTS)
    c = JsCluster(root, extra=("-c", str(conf)))
    try:
        c.start()
        asyncio.run(_setup(c.urls[0]))
        yield c
    finally:
        c.stop()


def cli(url: str, *args: str, user: str = "app") -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "jetpy.cli", "-s", url, "--user", user, "--password", user, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


async def _setup(url: str) -> None:
    """An R3 stream with an R3 durable consumer, an R2 stream and an R1 stream (once the meta
    group has a leader: creates are retried until one answers)."""
    nc = await nats.connect(url, user="app", password="app")
    try:
        js = nc.jetstream(timeout=5)
        for _ in range(100):
            try:
                await js.add_stream(name="CO", subjects=["co.>"], num_replicas=3)
                break
            except Exception:
                await asyncio.sleep(0.2)
        await js.add_stream(name="TWO", subjects=["two.>"], num_replicas=2)
        await js.add_stream(name="ONE", subjects=["one.>"], num_replicas=1)
        for i in range(5):
            await js.publish("co.x", b"m%d" % i)
        await js.add_consumer("CO", durable_name="C", ack_policy="explicit", num_replicas=3)
    finally:
        await nc.close()


async def _info(url: str, subject: str) -> dict[str, Any]:
    import json

    nc = await nats.connect(url, user="app", password="app")
    try:
        for _ in range(50):
            out: dict[str, Any] = json.loads((await nc.request(subject, b"", timeout=5)).data)
            if "error" not in out and (out.get("cluster") or {}).get("leader"):
                return out
            await asyncio.sleep(0.1)
        return out
    finally:
        await nc.close()


def test_stream_and_consumer_info_show_the_cluster(cluster: JsCluster) -> None:
    url = cluster.urls[0]
    si = asyncio.run(_info(url, "$JS.API.STREAM.INFO.CO"))
    assert si["state"]["consumer_count"] == 1  # its consumer's own group, counted as nats-server does
    out = cli(url, "stream", "info", "CO")
    assert out.returncode == 0, out.stderr
    assert "Cluster Information:" in out.stdout
    assert f"Leader: {si['cluster']['leader']}" in out.stdout
    assert out.stdout.count("Replica: n") == 2 and "current" in out.stdout
    out = cli(url, "consumer", "info", "CO", "C")
    assert out.returncode == 0, out.stderr
    assert "Cluster Information:" in out.stdout and out.stdout.count("Replica: n") == 2


def test_stream_and_consumer_step_down(cluster: JsCluster) -> None:
    url = cluster.urls[1]
    before = asyncio.run(_info(url, "$JS.API.STREAM.INFO.CO"))["cluster"]["leader"]
    out = cli(url, "stream", "cluster", "step-down", "CO")
    assert out.returncode == 0, out.stderr
    assert f'Requesting leader step down of "{before}" in a 3 peer RAFT group' in out.stdout
    after = asyncio.run(_info(url, "$JS.API.STREAM.INFO.CO"))["cluster"]["leader"]
    assert after != before and f'New leader elected "{after}"' in out.stdout
    assert "Information for" not in out.stdout and "Cluster Information:" in out.stdout

    before = asyncio.run(_info(url, "$JS.API.CONSUMER.INFO.CO.C"))["cluster"]["leader"]
    out = cli(url, "consumer", "cluster", "step-down", "CO", "C")
    assert out.returncode == 0, out.stderr
    after = asyncio.run(_info(url, "$JS.API.CONSUMER.INFO.CO.C"))["cluster"]["leader"]
    assert after != before and f'New leader elected "{after}"' in out.stdout

    out = cli(url, "stream", "cluster", "step-down", "ONE")
    assert out.returncode == 1 and "not replicated" in out.stderr


def test_stream_peer_remove_places_the_replica_elsewhere(cluster: JsCluster) -> None:
    url = cluster.urls[0]
    block = asyncio.run(_info(url, "$JS.API.STREAM.INFO.TWO"))["cluster"]
    holders = sorted([block["leader"], *(r["name"] for r in block["replicas"])])
    gone = holders[0]
    out = cli(url, "stream", "cluster", "peer-remove", "TWO", gone)  # no terminal, no --force
    assert out.returncode == 2 and "refusing without --force" in out.stderr
    out = cli(url, "stream", "cluster", "peer-remove", "TWO", gone, "-f")
    assert out.returncode == 0, out.stderr
    assert f'Requested removal of peer "{gone}"' in out.stdout
    for _ in range(100):
        block = asyncio.run(_info(url, "$JS.API.STREAM.INFO.TWO"))["cluster"]
        now = sorted([block["leader"], *(r["name"] for r in block.get("replicas") or [])])
        if gone not in now and len(now) == 2:
            break
        time.sleep(0.1)
    assert gone not in now and len(now) == 2
    out = cli(url, "stream", "cluster", "peer-remove", "TWO", "nowhere", "-f")
    assert out.returncode == 1 and "could not remove peer nowhere" in out.stderr


def test_meta_step_down_and_peer_remove_refusal(cluster: JsCluster) -> None:
    url = cluster.urls[2]
    out = cli(url, "server", "raft", "step-down")  # not the system account's user
    assert out.returncode == 1 and "no meta leader known" in out.stderr
    out = cli(url, "server", "raft", "step-down", user="sys")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    before = lines[0].rsplit(" ", 1)[1]
    after = lines[1].rsplit(" ", 1)[1]
    assert before != after and before.startswith("n") and after.startswith("n")
    out = cli(url, "server", "raft", "step-down", "--preferred", before, user="sys")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].endswith(before)
    out = cli(url, "server", "raft", "peer-remove", "nowhere", "-f", user="sys")
    assert out.returncode == 1 and "could not remove server nowhere" in out.stderr


def test_help_names_the_verbs(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jetpy.cli", "server", "raft", "--help"], capture_output=True, text=True
    )
    assert "step-down" in out.stdout and "peer-remove" in out.stdout
