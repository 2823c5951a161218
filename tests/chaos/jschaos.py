"""The fault harness's cluster of clustered JetStream servers: the same processes, route proxies
and faults as the test service's (``cluster``), each server a ``chaos.jsnode`` with a power
ledger on every Raft log (``ledger``), and the stream and KV bucket the JetStream run works on.

The nemesis aims its leader faults at one of the run's Raft groups per episode (the stream's or
the KV bucket's, chosen at random), watched through ``/raftz``; damage (a flipped bit, a cut)
goes to one of those groups' logs; the first write after losing a leader is a publish to that
group's stream. After the run, ``stop_gracefully`` lets every server close its stores, so each
replica can be read back from its own files (``replica_messages``).
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig, KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import APIError

from jetpy.store.base import StoreConfig
from jetpy.store.filestore import FileStore

from .cluster import CLUSTER, ChaosCluster, Node, Settings, member_flags

STREAM = "CHAOS"
STREAM_SUBJECTS = ["chaos.>"]
ID_SUBJECT = "chaos.ids"  # the publishers': chaos.ids.<client>
PROBE_SUBJECT = "chaos.probe"  # the nemesis's first write after losing a leader
CONSUMER = "W"  # a durable pull consumer of the publishers' ids (explicit acks)
BUCKET = "REG"
KV_STREAM = f"KV_{BUCKET}"

RETRY = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
)


class JsChaosCluster(ChaosCluster):
    def __init__(self, root: Path, settings: Settings, stream_replicas: int, kv_replicas: int) -> None:
        super().__init__(root, settings)
        self.stream_replicas = stream_replicas
        self.kv_replicas = kv_replicas
        self.groups: dict[str, str] = {}  # stream name -> its Raft group
        self.group_sizes: dict[str, int] = {}
        self.probes: dict[str, str] = {}  # Raft group -> the subject a probe publishes to

    def ready_mark(self, node: Node) -> bytes:
        return b"Server is ready"

    def _cmd(self, node: Node) -> list[str]:
        conf = self.root / node.name / "server.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text('ping_interval: "1s"\nping_max: 3\n')  # a cut route is noticed in seconds
        routes = ",".join(
            f"nats-route://127.0.0.1:{other.route_port}" for other in self.nodes.values() if other is not node
        )
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
        jsnode = [
            "chaos.jsnode",
            "--tick",
            str(self.s.tick),
            "--election-ticks",
            str(self.s.election_ticks),
            "--snapshot-entries",
            str(self.s.snapshot_entries),
            "--timeout",
            str(self.s.timeout),
        ]
        ledger = ["-m", "chaos.ledger"] if self.s.power_ledger else ["-m"]
        return [sys.executable, *ledger, *jsnode, "--", *server]

    # -- the stream and the bucket ------------------------------------------------------------------

    async def create(self, within: float = 60.0, kv_direct: bool = False) -> None:
        """The R``stream_replicas`` file stream with its durable consumer (the stream's
        replicas) and the R``kv_replicas`` KV bucket, created with nats-py once the meta group
        has a leader; the stream's and the bucket's Raft groups then watched."""
        async with await nats.connect(servers=[n.url for n in self.nodes.values()]) as nc:
            js = nc.jetstream(timeout=3)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + within
            stream = StreamConfig(
                name=STREAM,
                subjects=STREAM_SUBJECTS,
                num_replicas=self.stream_replicas,
                storage=StorageType.FILE,
            )
            kv = KeyValueConfig(
                bucket=BUCKET,
                replicas=self.kv_replicas,
                history=1,
                storage=StorageType.FILE,
                direct=kv_direct,
            )
            consumer = ConsumerConfig(
                durable_name=CONSUMER,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=2,
                max_ack_pending=1000,
                filter_subject=f"{ID_SUBJECT}.>",
            )
            for make in (
                lambda: js.add_stream(stream),
                lambda: js.add_consumer(STREAM, consumer),
                lambda: js.create_key_value(kv),
            ):
                while True:
                    try:
                        await make()
                        break
                    except RETRY:
                        pass
                    except APIError as e:
                        if e.err_code != 10008:
                            raise
                    if loop.time() > deadline:
                        raise TimeoutError("no meta leader to create the stream and the bucket")
                    await asyncio.sleep(0.2)
            for name, subject, size in (
                (STREAM, PROBE_SUBJECT, self.stream_replicas),
                (KV_STREAM, f"$KV.{BUCKET}.probe", self.kv_replicas),
            ):
                info = await js.stream_info(name)
                assert info.cluster is not None and info.cluster.raft_group, info
                self.groups[name] = info.cluster.raft_group
                self.group_sizes[info.cluster.raft_group] = size
                self.probes[info.cluster.raft_group] = subject
        self.s.group = self.groups[STREAM]

    # -- what the nemesis asks ----------------------------------------------------------------------

    def choose_target(self, rng: random.Random) -> None:
        self.s.group = rng.choice(sorted(self.group_sizes))

    def majority_of(self) -> int:
        return self.group_sizes.get(self.s.group, len(self.members()))

    def log_dirs(self, node: Node) -> list[Path]:
        return [d for g in sorted(self.group_sizes) if (d := node.group_dir(g)).is_dir()]

    async def probe(self, name: str, value: float, within: float) -> bool:
        nc = self.nodes[name].nc
        assert nc is not None
        subject = self.probes[self.s.group]
        msg = await nc.request(subject, str(value).encode(), timeout=within)
        return msg.data.startswith(b"{") and b'"error"' not in msg.data

    # -- the end --------------------------------------------------------------------------------------

    async def stop_gracefully(self, within: float = 15.0) -> None:
        """SIGTERM to every server (resumed first), waited for; kill -9 past ``within``."""
        for node in self.nodes.values():
            if node.alive:
                assert node.popen is not None
                if node.paused:
                    node.popen.send_signal(signal.SIGCONT)
                    node.paused = False
                node.popen.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            if node.popen is not None:
                try:
                    await asyncio.to_thread(node.popen.wait, within)
                except subprocess.TimeoutExpired:
                    node.popen.kill()
                    node.popen.wait()

    def replica_messages(self, name: str, stream: str) -> dict[int, tuple[str, bytes]] | None:
        """Every message (sequence -> subject, data) of the server's replica, read from its own
        files on a stopped server; None where it holds no replica."""
        d = self.nodes[name].store / "jetstream" / "$G" / "streams" / stream
        if not d.is_dir():
            return None
        store = FileStore(d, StoreConfig(name=stream))
        try:
            st = store.state()
            out: dict[int, tuple[str, bytes]] = {}
            for seq in range(st.first_seq, st.last_seq + 1):
                m = store.load_msg(seq)
                if m is not None:
                    out[seq] = (m.subject, m.data)
            return out
        finally:
            store.stop()
