"""A cluster of test-service servers as processes on loopback, with every route behind a fault
proxy, and the faults the harness inflicts on servers themselves: kill -9, SIGSTOP/SIGCONT,
restart, a simulated power loss (un-fsynced writes lost), a damaged or cut log segment.

Every process started here is killed by its PID when the cluster stops. Ports are picked free
at start and kept across restarts, so clients reconnect to a restarted server.

The power loss is simulated, and faithfully so for what it claims: each server records, before
each fsync of its log, how long each segment file is (``kvnode --power-ledger``); after a kill
-9 the harness cuts every segment back to that length and deletes segments created since (their
directory entry was never synced). What the page cache held beyond the last fsync is exactly
what a power loss may take; the hard-state and snapshot files are replaced with fsync and a
synced rename, so they survive either way. Not simulated: a deleted file coming back.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client

from conftest import free_port
from jetpy.store.raftlog.records import SEGMENT_HEADER_SIZE, check_record

from .ledger import LEDGER_SUFFIX
from .proxy import FaultProxy, Faults

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
CLUSTER = "CHAOS"


def member_flags(
    name: str, port: int, http_port: int, store: Path, cluster: str, cluster_port: int, routes: str
) -> list[str]:
    """jetpy-server's flags for one server of a test cluster on loopback: its ports, name, store,
    cluster and the routes (comma separated URLs) to the others."""
    return [
        "-a",
        "127.0.0.1",
        "-p",
        str(port),
        "-m",
        str(http_port),
        "-n",
        name,
        "-sd",
        str(store),
        "--cluster_name",
        cluster,
        "--cluster",
        f"nats://127.0.0.1:{cluster_port}",
        "--routes",
        routes,
    ]


@dataclass
class Node:
    name: str
    port: int
    http_port: int
    cluster_port: int
    store: Path
    log: Path
    proxy: FaultProxy | None = None
    popen: subprocess.Popen[bytes] | None = None
    paused: bool = False
    nc: Client | None = None
    starts: int = 0

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def up(self) -> bool:
        """Alive and not paused: it can answer."""
        return self.alive and not self.paused

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def monitor(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def route_port(self) -> int:
        """Where the others reach it: its proxy, or its own route port."""
        return self.proxy.port if self.proxy is not None else self.cluster_port

    def group_dir(self, group: str) -> Path:
        return self.store / "jetstream" / "$SYS" / "_js_" / group


@dataclass
class Settings:
    size: int = 3
    tick: float = 0.05  # seconds per Raft tick: elections after 0.5-1 s of silence
    election_ticks: int = 10
    snapshot_entries: int = 200
    timeout: float = 3.0  # the service's own wait for a proposal's result
    proxied: bool = True
    power_ledger: bool = True
    group: str = "KV"
    extra_names: list[str] = field(default_factory=list)  # servers started later, as new members
    lying_fsync: bool = False  # a broken disk (kvnode --lying-fsync): the harness must catch it

    @property
    def election_timeout(self) -> float:
        return self.tick * self.election_ticks


class ChaosCluster:
    def __init__(self, root: Path, settings: Settings) -> None:
        self.root = root
        self.s = settings
        self.faults = Faults()
        names = [f"n{i + 1}" for i in range(settings.size)] + list(settings.extra_names)
        self.founders = names[: settings.size]
        self.nodes: dict[str, Node] = {}
        for name in names:
            self.nodes[name] = Node(
                name,
                free_port(),
                free_port(),
                free_port(),
                root / name / "store",
                root / name / "server.log",
            )
        # the leaders seen in any /raftz, per group and term: never two for one term
        self.leaders_seen: dict[str, set[str]] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, names: list[str] | None = None) -> None:
        if self.s.proxied:
            for node in self.nodes.values():
                if node.proxy is None:
                    node.proxy = FaultProxy(self.faults, node.name, node.cluster_port)
                    await node.proxy.start()
        for name in names or self.founders:
            await self.launch(name)

    def _cmd(self, node: Node) -> list[str]:
        conf = self.root / node.name / "server.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text('ping_interval: "1s"\nping_max: 3\n')  # a cut route is noticed in seconds
        routes = ",".join(
            f"nats-route://127.0.0.1:{other.route_port}" for other in self.nodes.values() if other is not node
        )
        own = [
            "--group",
            self.s.group,
            "--founders",
            ",".join(self.founders),
            "--tick",
            str(self.s.tick),
            "--election-ticks",
            str(self.s.election_ticks),
            "--snapshot-entries",
            str(self.s.snapshot_entries),
            "--timeout",
            str(self.s.timeout),
        ]
        if self.s.lying_fsync:
            own.append("--lying-fsync")
        elif self.s.power_ledger:
            own.append("--power-ledger")
        server = [
            "-c",
            str(conf),
            *member_flags(
                node.name, node.port, node.http_port, node.store, CLUSTER, node.cluster_port, routes
            ),
            "--no_advertise",  # a client stays with its own server (the workload picks servers)
        ]
        if node.proxy is not None:
            server += ["--cluster_advertise", f"127.0.0.1:{node.proxy.port}"]
        return [sys.executable, "-m", "chaos.kvnode", *own, "--", *server]

    def ready_mark(self, node: Node) -> bytes:
        """What the server logs once it serves (``launch`` waits for it)."""
        return f"kv service ready on kv.{node.name}".encode()

    def _spawn(self, node: Node) -> None:
        node.log.parent.mkdir(parents=True, exist_ok=True)
        with open(node.log, "ab") as f:
            f.write(b"==== start\n")
            node.popen = subprocess.Popen(
                self._cmd(node), stdout=f, stderr=subprocess.STDOUT, cwd=str(TESTS), start_new_session=True
            )

    async def launch(self, name: str) -> None:
        node = self.nodes[name]
        self._spawn(node)
        node.paused = False
        node.starts += 1
        deadline = time.monotonic() + 20
        mark = self.ready_mark(node)
        while mark not in node.log.read_bytes().rsplit(b"==== start\n", 1)[-1]:
            if not node.alive or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n{node.log.read_text(errors='replace')[-4000:]}")
            await asyncio.sleep(0.05)
        if node.nc is None:
            node.nc = await nats.connect(
                node.url,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.2,
                error_cb=_quiet,
                disconnected_cb=_quiet_event,
            )

    def kill(self, name: str) -> None:
        node = self.nodes[name]
        if node.popen is not None and node.alive:
            node.popen.send_signal(signal.SIGKILL)
            node.popen.wait()
        node.paused = False

    def pause(self, name: str) -> None:
        node = self.nodes[name]
        if node.alive and not node.paused:
            assert node.popen is not None
            node.popen.send_signal(signal.SIGSTOP)
            node.paused = True

    def resume(self, name: str) -> None:
        node = self.nodes[name]
        if node.alive and node.paused:
            assert node.popen is not None
            node.popen.send_signal(signal.SIGCONT)
        node.paused = False

    async def restart(self, name: str) -> None:
        self.kill(name)
        await self.launch(name)

    async def stop(self) -> None:
        for node in self.nodes.values():
            if node.alive:
                assert node.popen is not None
                if node.paused:
                    node.popen.send_signal(signal.SIGCONT)
                node.popen.send_signal(signal.SIGKILL)
                node.popen.wait()
            if node.nc is not None:
                try:
                    await asyncio.wait_for(node.nc.close(), 2)
                except (TimeoutError, Exception):
                    pass
                node.nc = None
            if node.proxy is not None:
                await node.proxy.stop()

    # -- faults on disk ------------------------------------------------------------------------

    def power_loss(self, name: str) -> str:
        """After a kill -9: what the last fsync did not cover is gone (see the module), in every
        Raft log of the server that keeps a ledger."""
        node = self.nodes[name]
        assert not node.alive, "a power loss is simulated on a stopped server"
        ledgers = sorted(node.store.rglob("*" + LEDGER_SUFFIX))
        if not ledgers:
            return "no fsync yet: nothing to lose"
        lost = 0
        for ledger_path in ledgers:
            d = ledger_path.with_name(ledger_path.name[: -len(LEDGER_SUFFIX)])
            ledger: dict[str, int] = json.loads(ledger_path.read_text())
            for seg in sorted(d.glob("*.rlog")):
                size = seg.stat().st_size
                keep = ledger.get(seg.name)
                if keep is None:
                    lost += size
                    seg.unlink()
                elif size > keep:
                    lost += size - keep
                    os.truncate(seg, keep)
            for tmp in d.glob("*.tmp"):
                tmp.unlink()
        return f"{lost} unsynced bytes lost" + (f" in {len(ledgers)} logs" if len(ledgers) > 1 else "")

    def log_dirs(self, node: Node) -> list[Path]:
        """The Raft logs ``damage`` may damage on this server."""
        return [node.group_dir(self.s.group)]

    def damage(self, name: str, rng: random.Random, how: str) -> str:
        """Flip a byte in a record in the middle of a segment (``flip``) or cut a segment short
        (``truncate``), on a stopped server."""
        node = self.nodes[name]
        assert not node.alive
        segs = [
            p
            for d in self.log_dirs(node)
            for p in sorted(d.glob("*.rlog"))
            if p.stat().st_size > SEGMENT_HEADER_SIZE
        ]
        if not segs:
            return "no records to damage"
        seg = rng.choice(segs)
        data = bytearray(seg.read_bytes())
        offsets = []
        pos = SEGMENT_HEADER_SIZE
        while (r := check_record(bytes(data), pos, len(data))) is not None:
            offsets.append(pos)
            pos += r[0]
        if not offsets:
            return "no records to damage"
        at = offsets[rng.randrange(len(offsets))]
        if how == "flip":
            where = at + rng.randrange(min(64, len(data) - at))
            data[where] ^= 1 << rng.randrange(8)
            seg.write_bytes(bytes(data))
            return f"{seg.parent.name}/{seg.name}: bit flipped at byte {where}"
        cut = at + rng.randrange(1, 24)
        os.truncate(seg, cut)
        return f"{seg.parent.name}/{seg.name}: cut at byte {cut} of {len(data)}"

    # -- state ---------------------------------------------------------------------------------

    async def raftz(self, name: str) -> dict[str, Any] | None:
        node = self.nodes[name]
        if not node.up:
            return None

        def get() -> dict[str, Any] | None:
            try:
                with urllib.request.urlopen(node.monitor + f"/raftz?group={self.s.group}", timeout=1) as r:
                    doc = json.loads(r.read())
            except (OSError, ValueError, urllib.error.URLError):
                return None
            group: dict[str, Any] | None = doc.get("$SYS", {}).get(self.s.group)
            return group

        doc = await asyncio.to_thread(get)
        if doc is not None and doc.get("state") == "LEADER":
            self.leaders_seen.setdefault(f"{self.s.group} term {doc['term']}", set()).add(doc["id"])
        return doc

    async def leader(self, within: float = 10.0, exclude: str = "") -> tuple[str, int]:
        """(name, term) of the leader that a majority of the servers up follow."""
        deadline = time.monotonic() + within
        while True:
            docs = {n: await self.raftz(n) for n, node in self.nodes.items() if node.up and n != exclude}
            votes: dict[tuple[str, int], int] = {}
            for d in docs.values():
                if d is not None and d.get("leader"):
                    key = (d["leader"], d["term"])
                    votes[key] = votes.get(key, 0) + 1
            for (leader_id, term), n in votes.items():
                for name, d in docs.items():
                    if (
                        d is not None
                        and d["id"] == leader_id
                        and d["state"] == "LEADER"
                        and n * 2 > self.majority_of()
                    ):
                        return name, term
            if time.monotonic() > deadline:
                raise TimeoutError(f"no leader within {within}s: {docs}")
            await asyncio.sleep(0.02)

    def majority_of(self) -> int:
        """How many members the watched group has (a leader needs more than half of them)."""
        return len(self.members())

    def members(self) -> list[str]:
        return [n for n in self.nodes if self.nodes[n].starts]

    async def probe(self, name: str, value: float, within: float) -> bool:
        """One write through server ``name``: whether it succeeded (a recovery's first write)."""
        doc = await self.request(name, {"op": "put", "k": "probe", "v": value}, within)
        return bool(doc.get("ok"))

    def choose_target(self, rng: random.Random) -> None:
        """Before an episode: which group's leader the leader faults aim at (one group here)."""

    async def request(self, name: str, body: dict[str, Any], within: float = 4.0) -> dict[str, Any]:
        node = self.nodes[name]
        assert node.nc is not None
        msg = await node.nc.request(f"kv.{name}", json.dumps(body).encode(), timeout=within)
        doc: dict[str, Any] = json.loads(msg.data)
        return doc


async def _quiet(exc: Exception) -> None:
    """A client of a server the harness just killed: expected, not worth a traceback."""


async def _quiet_event() -> None:
    pass
