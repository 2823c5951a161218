"""Clustered JetStream servers as processes on loopback (``chaos.jsnode``), for the tests: each
with its client, monitoring and route ports picked free at start and kept across restarts, its
own store directory, and kill -9 / restart. Every process started here is killed by its PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_support import NEWEST, Member, start_member
from conftest import free_port

from .cluster import member_flags

TESTS = Path(__file__).resolve().parents[1]
CLUSTER = "JSC"
# the global account's user (no_auth_user) and the system account's, who alone may ask for the
# meta group's operations (a config file for every server, nats-server's as well as jetpy's)
ACCOUNTS = """
authorization { users: [{user: app, password: app}] }
accounts { SYS: { users: [{user: sys, password: sys}] } }
system_account: SYS
no_auth_user: app
"""


@dataclass
class JsNode:
    name: str
    port: int
    http_port: int
    cluster_port: int
    store: Path
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def jsz(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.http_port}/jsz?streams=true"
        with urllib.request.urlopen(url, timeout=5) as r:
            doc: dict[str, Any] = json.load(r)
        return doc

    def raftz(self) -> dict[str, dict[str, Any]]:
        """The Raft groups this server runs, by name, from its /raftz (under the system account,
        whatever its name)."""
        url = f"http://127.0.0.1:{self.http_port}/raftz"
        with urllib.request.urlopen(url, timeout=5) as r:
            doc: dict[str, dict[str, Any]] = json.load(r)
        return {name: g for groups in doc.values() for name, g in groups.items()}

    def wal_first(self) -> dict[str, int]:
        """Each Raft group's first index in this server's log (above 1: compacted), from /raftz."""
        return {name: g["wal"]["first_seq"] for name, g in self.raftz().items()}

    def stream_state(self, name: str) -> dict[str, Any] | None:
        """The stream's state in this server's own store (its replica), from /jsz."""
        for acc in self.jsz().get("account_details", []):
            for s in acc.get("stream_detail", []):
                if s["name"] == name:
                    state: dict[str, Any] = s["state"]
                    return state
        return None


class JsCluster:
    def __init__(
        self,
        root: Path,
        size: int = 3,
        tick: float = 0.05,
        snapshot_entries: int = 0,
        extra: tuple[str, ...] = (),
        seed_only: bool = False,
    ) -> None:
        self.root = root
        self.seed_only = seed_only  # routes to n1 only (n1 to itself), else every server to every other
        self.extra = extra  # more jetpy-server flags for every server ("{name}": the server's name)
        self.tick = tick
        self.snapshot_entries = snapshot_entries  # the groups compact their logs this often
        self.nodes = {
            f"n{i + 1}": JsNode(
                f"n{i + 1}",
                free_port(),
                free_port(),
                free_port(),
                root / f"n{i + 1}" / "store",
                root / f"n{i + 1}" / "server.log",
            )
            for i in range(size)
        }

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes.values()]

    def _cmd(self, node: JsNode) -> list[str]:
        others = [o for o in self.nodes.values() if o is not node]
        if self.seed_only:  # n1 too (nats-server wants routes on every clustered JetStream server)
            others = [self.nodes["n1"]]
        routes = ",".join(f"nats-route://127.0.0.1:{o.cluster_port}" for o in others)
        return [
            sys.executable,
            "-m",
            "chaos.jsnode",
            "--tick",
            str(self.tick),
            "--snapshot-entries",
            str(self.snapshot_entries),
            "--",
            *member_flags(
                node.name, node.port, node.http_port, node.store, CLUSTER, node.cluster_port, routes
            ),
            *(arg.format(name=node.name) for arg in self.extra),
        ]

    def start(self, name: str | None = None) -> None:
        for node in [self.nodes[name]] if name else self.nodes.values():
            node.log.parent.mkdir(parents=True, exist_ok=True)
            with open(node.log, "ab") as f:
                f.write(b"==== start\n")
                node.popen = subprocess.Popen(
                    self._cmd(node), stdout=f, stderr=subprocess.STDOUT, cwd=str(TESTS)
                )
        for node in [self.nodes[name]] if name else self.nodes.values():
            deadline = time.monotonic() + 20
            while b"Server is ready" not in node.log.read_bytes().rsplit(b"==== start\n", 1)[-1]:
                if not node.alive or time.monotonic() > deadline:
                    raise RuntimeError(f"{node.name} did not start:\n{node.log.read_text(errors='replace')}")
                time.sleep(0.02)

    def kill(self, name: str) -> None:
        """kill -9, as a crash."""
        p = self.nodes[name].popen
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def stop(self) -> None:
        for node in self.nodes.values():
            p = node.popen
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    async def wait_for(self, what: str, check: Any, within: float = 20.0) -> Any:
        deadline = time.monotonic() + within
        while True:
            try:
                got = check()
            except OSError:
                got = None
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.1)


@contextlib.contextmanager
def reference_cluster(root: Path, *extra: str, size: int = 3, prefix: str = "n") -> Iterator[list[Member]]:
    """``size`` nats-server 2.15.1 with JetStream routed to each other (every one's routes name
    them all), named ``<prefix>1``... with their logs and stores under ``root`` and the flags
    ``extra`` ("{name}": the server's name); killed on leaving."""
    ports = [free_port() for _ in range(size)]
    routes = [f"nats-route://127.0.0.1:{p}" for p in ports]
    members: list[Member] = []
    try:
        for i, port in enumerate(ports):
            name = f"{prefix}{i + 1}"
            flags = (*(arg.replace("{name}", name) for arg in extra), "-js", "-sd", str(root / name))
            members.append(start_member(root, NEWEST, name, routes, *flags, cluster_port=port))
        yield members
    finally:
        for m in members:
            m.kill()
