"""How the meta group forms on the usual topologies (fast timers, ``chaos.jsnode``): routes to a
seed only with a server started once the group runs (it joins), a server without JetStream in
the cluster (never a member), and a server whose meta directory was deleted (it joins again
under a new id). Every case ends with one meta group that every JetStream server names alike."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from conftest import JETPY_SERVER, Proc, free_port, newest_cmd, start_process

from .cluster import member_flags
from .jscluster import CLUSTER, JsCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[JsCluster]:
    c = JsCluster(tmp_path, seed_only=True)
    try:
        yield c
    finally:
        c.stop()


SYSTEM = """
authorization { users: [{user: app, password: app}] }
accounts { SYS: { users: [{user: sys, password: sys}] } }
system_account: SYS
no_auth_user: app
"""


@pytest.fixture
def meshed(tmp_path: Path) -> Iterator[JsCluster]:
    conf = tmp_path / "system.conf"
    conf.write_text(SYSTEM)
    c = JsCluster(tmp_path, extra=("-c", str(conf)))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _metas(c: JsCluster, names: list[str]) -> list[dict[str, Any]]:
    return [c.nodes[n].jsz().get("meta_cluster") or {} for n in names]


def _agreed(c: JsCluster, names: list[str], size: int) -> dict[str, Any] | None:
    """The meta group as the servers ``names`` report it, once every one names the same leader,
    ``size`` voters, and every replica by its server's name (None until then)."""
    metas = _metas(c, names)
    leaders = {m.get("leader") for m in metas}
    if len(leaders) != 1 or None in leaders or any(m.get("cluster_size") != size for m in metas):
        return None
    for m in metas:
        if {r["name"] for r in m.get("replicas", [])} - set(c.nodes):  # an id, not a name
            return None
    return metas[0]


async def _r3_servers(c: JsCluster, stream: str) -> list[str]:
    """Create an R3 stream (once the meta group answers): the servers its replicas are on."""
    nc = await nats.connect(c.urls, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream(timeout=10)
        for _ in range(50):
            try:
                await js.add_stream(name=stream, subjects=[f"{stream}.>"], num_replicas=3)
                break
            except (TimeoutError, nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
                await asyncio.sleep(0.2)
        info = await js.stream_info(stream)
        assert info.cluster is not None
        return sorted([info.cluster.leader or "", *(r.name or "" for r in info.cluster.replicas or [])])
    finally:
        await nc.close()


def _plain_server(c: JsCluster) -> Proc:
    """A server without JetStream in the cluster, its route to the seed."""
    return start_process(
        [
            *JETPY_SERVER,
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "--server_name",
            "plain",
            "--cluster_name",
            CLUSTER,
            "--cluster",
            f"nats://127.0.0.1:{free_port()}",
            "--routes",
            f"nats-route://127.0.0.1:{c.nodes['n1'].cluster_port}",
        ],
        c.root / "plain.log",
    )


async def test_seed_routes_a_late_server_joins_and_a_plain_one_stays_out(seeded: JsCluster) -> None:
    c = seeded
    c.start("n2")  # before its seed: alone, it founds nothing
    plain = _plain_server(c)
    try:
        await asyncio.sleep(1.0)
        assert "meta group" not in c.nodes["n2"].log.read_text(errors="replace")
        c.start("n1")
        first = await c.wait_for("n1 and n2 agree", lambda: _agreed(c, ["n1", "n2"], 2))
        assert [r["name"] for r in first["replicas"]] == ["n2"]  # n1's view: the other member
        c.start("n3")  # once the group runs: it joins, and is made a voter
        await c.wait_for("three agree", lambda: _agreed(c, ["n1", "n2", "n3"], 3), 30)
        assert "joining the meta group as a new member" in c.nodes["n3"].log.read_text(errors="replace")
        assert await _r3_servers(c, "LATE") == ["n1", "n2", "n3"]
        # a server started again recovers the group from its log and names the joined member,
        # down meanwhile, by what it learnt before
        await asyncio.sleep(1.5)  # the names kept (once a second)
        c.kill("n3")
        c.kill("n1")
        c.start("n1")
        await c.wait_for("n1 and n2 agree, n3 down", lambda: _agreed(c, ["n1", "n2"], 3), 30)
        c.start("n3")
        await c.wait_for("three agree again", lambda: _agreed(c, ["n1", "n2", "n3"], 3), 30)
    finally:
        plain.stop(signal.SIGKILL)


async def test_a_server_whose_meta_directory_was_deleted_joins_again(meshed: JsCluster) -> None:
    c = meshed
    names = ["n1", "n2", "n3"]
    await c.wait_for("three agree", lambda: _agreed(c, names, 3), 30)
    for node in c.nodes.values():
        assert "forming the meta group with n1, n2, n3" in node.log.read_text(errors="replace")
    assert await _r3_servers(c, "KEEP") == names
    c.kill("n3")
    shutil.rmtree(c.nodes["n3"].store / "jetstream" / "SYS" / "_js_" / "_meta_")
    c.start("n3")
    # a new member under a new id: its old id stays a voter until SERVER.REMOVE takes it out
    await c.wait_for("four voters", lambda: _agreed(c, names, 4), 40)
    assert "joining the meta group as a new member" in c.nodes["n3"].log.read_text(errors="replace")
    # the name removes the id not heard from; n3 keeps its replicas (it is still a member)
    nc = await nats.connect(c.urls, user="sys", password="sys")
    try:
        for _ in range(50):
            with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
                reply = json.loads(
                    (await nc.request("$JS.API.SERVER.REMOVE", b'{"peer": "n3"}', timeout=2)).data
                )
                if reply.get("error", {}).get("err_code") != 10008:
                    break
            await asyncio.sleep(0.2)
        assert reply.get("success") is True, reply
    finally:
        await nc.close()
    await c.wait_for("three voters again", lambda: _agreed(c, names, 3), 30)
    assert await _r3_servers(c, "KEEP") == names
    assert await _r3_servers(c, "AGAIN") == names


@pytest.mark.parametrize("slow", [0.0, 2.0])
def test_routes_naming_this_server_by_another_address(tmp_path: Path, slow: float) -> None:
    """Every server's routes name all three by an address none of them listens on by name
    (127.0.0.2, the route listeners on 0.0.0.0): each counts itself once, when its route to
    itself comes back to it, and the three found the meta group. Also with n3's JetStream
    started ``slow`` seconds after its routes are up (a process slow to start, as on a loaded
    machine; past the settle period): the others wait for it, it founds with them."""
    cluster_ports = [free_port() for _ in range(3)]
    routes = ",".join(f"nats-route://127.0.0.2:{p}" for p in cluster_ports)
    procs: list[Proc] = []
    c = JsCluster(tmp_path)  # for its /jsz helpers: its own processes are not started
    try:
        for (name, node), cport in zip(c.nodes.items(), cluster_ports, strict=True):
            node.store.mkdir(parents=True)
            cmd = [
                sys.executable,
                str(Path(__file__).with_name("jsnode.py")),
                "--tick",
                "0.05",
                "--slow-jetstream",
                str(slow if name == "n3" else 0.0),
                "--",
                *member_flags(name, node.port, node.http_port, node.store, CLUSTER, cport, routes),
                "--cluster",
                f"nats://0.0.0.0:{cport}",
            ]
            procs.append(start_process(cmd, tmp_path / f"{name}.log"))
        asyncio.run(c.wait_for("three agree", lambda: _agreed(c, ["n1", "n2", "n3"], 3), 30))
        for name in c.nodes:
            assert "forming the meta group with n1, n2, n3" in (tmp_path / f"{name}.log").read_text()
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)


async def test_a_nats_server_with_jetstream_in_the_cluster_keeps_jetpys_out(tmp_path: Path) -> None:
    """nats-server's JetStream runs its own meta group: a jetpy JetStream server routed to one
    says so and neither founds nor joins anything (two meta groups would both answer the API)."""
    c = JsCluster(tmp_path, size=1, seed_only=True)
    ref: Proc | None = None
    try:
        c.start()
        seed = f"nats-route://127.0.0.1:{c.nodes['n1'].cluster_port}"
        port = free_port()
        ref = start_process(
            newest_cmd(
                "-js",
                "-sd",
                str(tmp_path / "ref"),
                "-n",
                "ref1",
                "--cluster_name",
                CLUSTER,
                "--cluster",
                f"nats://127.0.0.1:{port}",
                "--routes",
                f"{seed},nats-route://127.0.0.1:{port}",
            ),
            tmp_path / "ref.log",
        )
        log = c.nodes["n1"].log
        await c.wait_for("the refusal logged", lambda: "run nats-server's JetStream" in log.read_text(), 10)
        await asyncio.sleep(2.0)  # the settle period and more: still nothing formed
        assert (
            "forming the meta group" not in log.read_text()
            and "joining the meta group" not in log.read_text()
        )
        assert not c.nodes["n1"].jsz().get("meta_cluster", {}).get("leader")
    finally:
        if ref is not None:
            ref.stop(signal.SIGKILL)
        c.stop()
