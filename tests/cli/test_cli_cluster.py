"""`jetpy cluster up`: three servers as child processes on free ports, their URLs printed once
they are ready, a real full mesh (a message crosses it and nats-py learns every server), their
logs on stdout with each server's name, and Ctrl-C stopping every child by PID with exit 0; with
``--clusters 2``, two clusters joined by gateways (a message crosses them both ways)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import nats
import pytest

from cluster_support import wait_mesh

pytestmark = pytest.mark.timeout(90)

JETPY = [sys.executable, "-m", "jetpy.cli"]
SERVER_LINE = re.compile(r"^\s+(n\d+)\s+pid (\d+)\s+(nats://\S+)\s+route (\S+)(?:\s+monitor (\S+))?$")
SUPER_LINE = re.compile(r"^\s+(c\dn\d+)\s+pid (\d+)\s+(nats://\S+)\s+route \S+\s+gateway (nats://\S+)$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Up:
    proc: subprocess.Popen[str]
    servers: list[tuple[str, int, str, str, str]]  # name, pid, client URL, route URL, monitor URL
    text: str


@pytest.fixture
def cluster_up() -> Iterator[Up]:
    """`jetpy cluster up --size 3` on free ports, read until its URLs are printed; every child
    is killed by PID at the end whatever the test did."""
    proc = subprocess.Popen(
        [*JETPY, "cluster", "up", "--size", "3", "--port", "0", "--cluster-port", "0", "--http-port", "-1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    up = Up(proc, [], "")
    try:
        assert proc.stdout is not None
        out: list[str] = []
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            out.append(line)
            if m := SERVER_LINE.match(line.rstrip("\n")):
                up.servers.append((m.group(1), int(m.group(2)), m.group(3), m.group(4), m.group(5) or ""))
            if line.startswith("  NATS_URL=") or time.monotonic() > deadline:
                break
        up.text = "".join(out)
        yield up
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for _, pid, *_rest in up.servers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_cluster_up_runs_a_mesh_until_ctrl_c(cluster_up: Up) -> None:
    text, servers, proc = cluster_up.text, cluster_up.servers, cluster_up.proc
    assert "cluster 'jetpy': 3 server(s) up" in text, text
    assert [s[0] for s in servers] == ["n1", "n2", "n3"]
    pids = [s[1] for s in servers]
    assert all(_alive(p) for p in pids)
    assert "[n1] " in text and "Listening for route connections" in text  # the logs, named
    urls = [s[2] for s in servers]
    await wait_mesh(urls)
    nc = await nats.connect(urls[0])
    assert {f"{u.hostname}:{u.port}" for u in nc.servers} == {u.removeprefix("nats://") for u in urls}
    await nc.close()
    assert all(s[4].startswith("http://127.0.0.1:") for s in servers)

    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    assert await asyncio.to_thread(proc.wait, 30) == 0
    assert proc.stdout is not None
    assert "stopping the cluster" in await asyncio.to_thread(proc.stdout.read)
    assert not any(_alive(p) for p in pids)


def test_cluster_up_refuses_a_silly_size() -> None:
    done = subprocess.run(
        [*JETPY, "cluster", "up", "--size", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "--size must be between 1 and 32" in done.stderr


def _up(*args: str) -> tuple[subprocess.Popen[str], list[tuple[str, int, str]], str]:
    """`jetpy cluster up ARGS --quiet` on free ports, read until its URLs are printed: the
    process, each server's (name, pid, client URL) and what it printed."""
    cmd = [*JETPY, "cluster", "up", *args, "--port", "0", "--cluster-port", "0", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    servers: list[tuple[str, int, str]] = []
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if m := SUPER_LINE.match(line.rstrip("\n")) or SERVER_LINE.match(line.rstrip("\n")):
            servers.append((m.group(1), int(m.group(2)), m.group(3)))
        if line.startswith("  NATS_URL="):
            break
    return proc, servers, "".join(lines)


def _super_cluster_up() -> tuple[subprocess.Popen[str], list[tuple[str, int, str]], str]:
    return _up("--clusters", "2", "--size", "2", "--http-port", "0", "--gateway-port", "0")


async def test_cluster_up_runs_a_super_cluster() -> None:
    proc, servers, text = await asyncio.to_thread(_super_cluster_up)
    try:
        assert "super cluster: 2 clusters of 2 server(s) up" in text, text
        assert [s[0] for s in servers] == ["c1n1", "c1n2", "c2n1", "c2n2"]
        subs = [await nats.connect(s[2]) for s in servers]
        got: dict[int, set[bytes]] = {i: set() for i in range(4)}
        for i, nc in enumerate(subs):

            async def cb(msg: Any, i: int = i) -> None:
                got[i].add(msg.data)

            await nc.subscribe("across", cb=cb)
            await nc.flush()
        deadline = time.monotonic() + 20
        while not all(v == {b"from c1", b"from c2"} for v in got.values()):  # both clusters, everywhere
            assert time.monotonic() < deadline, got
            await subs[0].publish("across", b"from c1")
            await subs[3].publish("across", b"from c2")
            await asyncio.sleep(0.2)
        for nc in subs:
            await nc.close()
        proc.send_signal(signal.SIGINT)
        assert await asyncio.to_thread(proc.wait, 30) == 0
        assert not any(_alive(s[1]) for s in servers)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for _, pid, _url in servers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_cluster_up_refuses_silly_clusters() -> None:
    done = subprocess.run(
        [*JETPY, "cluster", "up", "--clusters", "9"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "--clusters must be between 1 and 8" in done.stderr


def _js_cluster_up() -> tuple[subprocess.Popen[str], list[tuple[str, int, str]], str]:
    return _up("--js", "--size", "3", "--http-port", "-1")


async def test_cluster_up_with_jetstream_takes_an_r3_stream() -> None:
    proc, servers, text = await asyncio.to_thread(_js_cluster_up)
    try:
        leader = re.search(r"JetStream meta leader: (n\d); stores in (\S+) \(removed at the end\)", text)
        assert leader is not None, text
        stores = leader.group(2)
        assert await asyncio.to_thread(os.path.isdir, os.path.join(stores, "n1"))
        nc = await nats.connect(servers[1][2])
        js = nc.jetstream()
        await js.add_stream(name="UP", subjects=["up.>"], num_replicas=3)
        for i in range(10):
            assert (await js.publish("up.x", b"%d" % i)).seq == i + 1
        info = await js.stream_info("UP")
        assert info.state.messages == 10 and info.cluster is not None
        assert len(info.cluster.replicas or []) == 2
        await nc.close()
        proc.send_signal(signal.SIGINT)
        assert await asyncio.to_thread(proc.wait, 30) == 0
        assert not any(_alive(s[1]) for s in servers)
        assert not await asyncio.to_thread(os.path.exists, stores)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for _, pid, _url in servers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--js", "--clusters", "2"], "JetStream across gateways is not supported by jetpy yet"),
        (["--store-dir", "/tmp/x"], "--store-dir is for --js"),
    ],
)
def test_cluster_up_refuses_what_it_cannot_do_with_jetstream(args: list[str], said: str) -> None:
    done = subprocess.run([*JETPY, "cluster", "up", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and said in done.stderr
