"""Clustered JetStream as a new user runs it: three ``jetpy-server -js`` processes (the real entry
point, nats-server's timers) whose routes name only a seed, started seed last, form one meta
group; nats-py creates an R3 stream and an R3 durable consumer and keeps publishing and
consuming while the stream's leader is killed -9 and started again: every acknowledged message
is in the stream, and the consumer is given every sequence, none skipped."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig
from nats.js.errors import APIError

from conftest import JETPY_SERVER, REPO, free_port
from jwt_issuer import user_jwt, user_key, world, write_creds

pytestmark = pytest.mark.timeout(120)

TOTAL = 300  # messages published
KILL_AT = 80  # acknowledged messages before the stream's leader is killed
DOWN_FOR = 3.0  # seconds it stays down


@dataclass
class Node:
    name: str
    port: int
    http_port: int
    cluster_port: int
    store: Path
    log: Path
    routes: str
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [
            *JETPY_SERVER,
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-m",
            str(self.http_port),
            "--server_name",
            self.name,
            "-sd",
            str(self.store),
            "--cluster_name",
            "E2E",
            "--cluster",
            f"nats://127.0.0.1:{self.cluster_port}",
            "--routes",
            self.routes,
        ]
        with open(self.log, "ab") as f:
            self.popen = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(REPO))

    def kill(self) -> None:
        p = self.popen
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def meta(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/jsz", timeout=2) as r:
                doc: dict[str, Any] = json.load(r)
        except OSError:
            return None
        meta: dict[str, Any] | None = doc.get("meta_cluster")
        return meta


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[str, Node]]:
    ports = {n: free_port() for n in ("n1", "n2", "n3")}
    seed = f"nats-route://127.0.0.1:{ports['n1']}"
    made = {
        name: Node(
            name,
            free_port(),
            free_port(),
            ports[name],
            tmp_path / name,
            tmp_path / f"{name}.log",
            seed,  # the seed's own route comes back to it (nats-server wants routes there too)
        )
        for name in ports
    }
    try:
        yield made
    finally:
        for node in made.values():
            node.kill()


async def _until(what: str, check: Any, within: float) -> Any:
    deadline = time.monotonic() + within
    while True:
        got = await asyncio.to_thread(check)
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within:g}s")
        await asyncio.sleep(0.2)


def _one_meta_group(nodes: dict[str, Node]) -> str:
    """The meta leader every server names, with three voters ("" until they all agree)."""
    metas = [n.meta() for n in nodes.values()]
    leaders = {str(m.get("leader", "")) for m in metas if m is not None}
    sizes = {m.get("cluster_size") for m in metas if m is not None}
    if None in metas or len(leaders) != 1 or sizes != {3}:
        return ""
    return leaders.pop()


async def test_three_servers_with_seed_routes_lose_nothing_when_the_leader_is_killed(
    nodes: dict[str, Node],
) -> None:
    nodes["n2"].start()
    nodes["n3"].start()
    await asyncio.sleep(3.0)  # they wait for the seed: alone, neither founds anything
    for node in (nodes["n2"], nodes["n3"]):
        assert "meta group" not in node.log.read_text(errors="replace"), node.name
    nodes["n1"].start()
    await _until("one meta group of three", lambda: _one_meta_group(nodes), 30)
    for node in nodes.values():
        text = node.log.read_text(errors="replace")
        assert "forming the meta group with n1, n2, n3" in text, node.name

    nc = await nats.connect(
        servers=[n.url for n in nodes.values()], max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )
    try:
        js = nc.jetstream(timeout=20)
        await js.add_stream(StreamConfig(name="E2E", subjects=["e2e.>"], num_replicas=3))
        await js.add_consumer(
            "E2E",
            ConsumerConfig(durable_name="D", ack_policy=AckPolicy.EXPLICIT, ack_wait=4, num_replicas=3),
        )
        info = await js.stream_info("E2E")
        assert info.cluster is not None and len(info.cluster.replicas or []) == 2

        acked: dict[int, int] = {}  # message number -> its stream sequence
        consumed: dict[int, bytes] = {}  # stream sequence -> payload
        killed = asyncio.Event()
        done_publishing = asyncio.Event()

        async def publish() -> None:
            for i in range(TOTAL):
                acked[i] = await _publish_until_acked(js, f"e2e.{i % 7}", str(i).encode(), f"m{i}")
                if len(acked) == KILL_AT:
                    killed.set()
                await asyncio.sleep(0.01)
            done_publishing.set()

        async def consume() -> None:
            sub = await js.pull_subscribe_bind("D", stream="E2E")
            while not (done_publishing.is_set() and set(range(1, max(acked.values()) + 1)) <= set(consumed)):
                try:
                    msgs = await sub.fetch(50, timeout=1)
                except (TimeoutError, nats.errors.Error):
                    continue
                for m in msgs:
                    consumed[m.metadata.sequence.stream] = m.data
                    await m.ack()

        async def chaos() -> None:
            await killed.wait()
            cluster = (await js.stream_info("E2E")).cluster
            assert cluster is not None and cluster.leader is not None
            leader = cluster.leader
            nodes[leader].kill()
            await asyncio.sleep(DOWN_FOR)
            nodes[leader].start()

        await asyncio.wait_for(asyncio.gather(publish(), consume(), chaos()), 90)
    finally:
        await nc.close()

    last = max(acked.values())
    assert sorted(acked.values()) == list(range(1, TOTAL + 1))  # de-duplicated retries: one each
    assert set(consumed) == set(range(1, last + 1))  # none skipped
    assert {int(consumed[seq]) for seq in acked.values()} == set(range(TOTAL))  # none lost


async def _publish_until_acked(js: Any, subject: str, payload: bytes, msg_id: str) -> int:
    """Publish with a message id until acknowledged (a retry is de-duplicated): its sequence."""
    for _ in range(400):
        try:
            ack = await js.publish(subject, payload, timeout=1, headers={"Nats-Msg-Id": msg_id})
            seq: int = ack.seq
            return seq
        except (
            TimeoutError,
            nats.errors.TimeoutError,
            nats.errors.NoRespondersError,
            nats.js.errors.NoStreamResponseError,
        ):
            await asyncio.sleep(0.05)
        except APIError as e:
            if e.err_code != 10008:
                raise
            await asyncio.sleep(0.05)
    raise AssertionError(f"{msg_id} never acknowledged")


async def _create_once_formed(js: Any, cfg: StreamConfig) -> Any:
    """The stream created once the meta group has formed (nats-server's timers: some seconds)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return await js.add_stream(cfg)
        except (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError):
            pass
        except APIError as e:
            if e.err_code != 10008:  # the meta group forming
                raise
        assert time.monotonic() < deadline, "no meta leader"
        await asyncio.sleep(0.5)


def _spawn(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(REPO))


async def test_an_operator_account_with_jetstream_on_a_cluster(tmp_path: Path) -> None:
    """Two ``jetpy-server`` processes with an operator's accounts (the MEMORY resolver's
    preloaded JWTs) form one meta group; account B, whose JWT gives it JetStream and its limits,
    creates a replicated stream there and publishes to it, and its ``streams`` limit (2) is
    refused with nats-server's 10027."""
    w = world()
    op_file = tmp_path / "op.jwt"
    op_file.write_text(w.operator_jwt)
    ports = [free_port(), free_port()]
    client_ports = [free_port(), free_port()]
    routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in ports)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, port in enumerate(ports):
            conf = tmp_path / f"n{i}.conf"
            conf.write_text(
                w.config(
                    op_file,
                    tmp_path / f"js{i}",
                    f"server_name: n{i}\ncluster {{ name: OP, listen: 127.0.0.1:{port}, routes: [{routes}] }}\n",
                )
            )
            cmd = [*JETPY_SERVER, "-c", str(conf), "-a", "127.0.0.1", "-p", str(client_ports[i])]
            procs.append(_spawn(cmd, tmp_path / f"n{i}.log"))
        user = user_key()
        creds = write_creds(tmp_path / "b.creds", user_jwt(user, w.b, name="b"), user)
        nc = await nats.connect(
            f"nats://127.0.0.1:{client_ports[0]}", user_credentials=creds, max_reconnect_attempts=-1
        )
        try:
            js = nc.jetstream(timeout=2)
            created = await _create_once_formed(js, StreamConfig(name="S1", subjects=["s1"], num_replicas=2))
            assert created.cluster is not None and created.cluster.leader in ("n0", "n1")
            ack = await js.publish("s1", b"hello")
            assert ack.stream == "S1" and ack.seq == 1
            await js.add_stream(StreamConfig(name="S2", subjects=["s2"], num_replicas=2))
            with pytest.raises(APIError) as refused:
                await js.add_stream(StreamConfig(name="S3", subjects=["s3"]))
            assert refused.value.err_code == 10027
            info = await js.stream_info("S1")
            assert info.state.messages == 1 and info.cluster is not None
            assert info.cluster.replicas is not None and len(info.cluster.replicas) == 1
        finally:
            await nc.close()
        store = tmp_path / "js0" / "jetstream" / w.b.public / "streams" / "S1"
        assert store.is_dir()  # the account's replica, in the account's own directory
    finally:
        for p in procs:
            p.kill()
            p.wait()


async def test_config_file_accounts_with_jetstream_on_a_cluster(tmp_path: Path) -> None:
    """``jetpy-server -js -c accounts.conf`` on two servers of a cluster starts (an account with
    JetStream was refused at start before): account A's user creates a replicated stream,
    publishes to it, and its replicas are in A's own store directory on both servers."""
    conf = tmp_path / "accounts.conf"
    conf.write_text(
        "accounts {\n"
        "  SYS: { users: [{user: sys, password: sys}] }\n"
        "  A: { jetstream: enabled, users: [{user: a, password: a}] }\n"
        "}\nsystem_account: SYS\n"
    )
    ports = [free_port(), free_port()]
    client_ports = [free_port(), free_port()]
    routes = ",".join(f"nats-route://127.0.0.1:{p}" for p in ports)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, port in enumerate(ports):
            cmd = [
                *JETPY_SERVER,
                "-js",
                "-c",
                str(conf),
                "-a",
                "127.0.0.1",
                "-p",
                str(client_ports[i]),
                "--server_name",
                f"n{i}",
                "-sd",
                str(tmp_path / f"js{i}"),
                "--cluster_name",
                "ACC",
                "--cluster",
                f"nats://127.0.0.1:{port}",
                "--routes",
                routes,
            ]
            procs.append(_spawn(cmd, tmp_path / f"n{i}.log"))
        nc = await nats.connect(f"nats://a:a@127.0.0.1:{client_ports[1]}", max_reconnect_attempts=-1)
        try:
            js = nc.jetstream(timeout=2)
            created = await _create_once_formed(
                js, StreamConfig(name="ORDERS", subjects=["o.>"], num_replicas=2)
            )
            assert created.cluster is not None and created.cluster.leader in ("n0", "n1")
            for i in range(3):
                assert (await js.publish("o.new", b"%d" % i)).seq == i + 1
            info = await js.stream_info("ORDERS")
            assert info.state.messages == 3
        finally:
            await nc.close()
        for i in range(2):
            assert (tmp_path / f"js{i}" / "jetstream" / "A" / "streams" / "ORDERS").is_dir()
    finally:
        for p in procs:
            p.kill()
            p.wait()
