"""One account's clustered JetStream on a server: the account's engine, this server's replicas
of its streams and consumers, and what the API asks about the account.

One meta group serves every account (its assignments name theirs, :mod:`.assignments`); each
account with JetStream on a server has an :class:`AccountScope` there: its streams' replicas live
in its engine (their stores under its directory, their subjects subscribed in its broker), its
consumers' in its consumer groups, and the ``$JS.API`` requests arriving on its broker are
decided against its assignments alone (names, lists, overlaps, its JetStream limits:
:mod:`.limits`). Owns: that view (the ``ClusterState`` of :mod:`.api` and the
``ConsumerClusterState`` of :mod:`.consumer_api`, the account's part put in by
:class:`~jetpy.server.jscluster.service.ClusteredJetStream`). Must not know: how the meta group
runs, Raft's rules, the wire.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from jetpy.jetstream.models import AccountLimits, Placement, StreamInfo
from jetpy.jetstream.service import JetStream
from jetpy.server.broker import Broker
from jetpy.server.jscluster.consumer_groups import ConsumerGroups
from jetpy.server.jscluster.local import Replica
from jetpy.server.jscluster.local_consumer import HeldConsumer
from jetpy.server.jscluster.meta import ConsumerAssignment, MetaMachine, StreamAssignment
from jetpy.server.nrg import GroupConfig, RaftHost
from jetpy.store.base import ConsumerState

__all__ = ["AccountScope", "qualified"]


def qualified(subject: bytes, names: int) -> tuple[str, list[str]]:
    """An internal subject ``$JSC.<kind>.<account>.<name>...`` read back: the account (which may
    hold dots) and the last ``names`` tokens."""
    tokens = subject.decode().split(".")
    return ".".join(tokens[2:-names]), tokens[-names:]


class Cluster(Protocol):
    """What an account's scope asks of the server's clustered JetStream (the service, which
    holds the scopes: an arrow up would be a loop)."""

    server_name: str
    host: RaftHost
    system: Broker
    config: GroupConfig
    meta: MetaMachine
    traffic_account: str
    act: Callable[[Callable[[], Awaitable[None]]], None]

    @property
    def is_meta_leader(self) -> bool: ...

    @property
    def leaderless(self) -> bool: ...

    def cluster_name(self) -> str: ...

    def js_servers(self) -> list[str]: ...

    async def place(
        self, replicas: int, placement: Placement | None = None, exclude: Sequence[str] = ()
    ) -> list[str]: ...

    async def propose_meta(self, op: bytes) -> bytes: ...

    async def moved(self, peers: Sequence[str], replicas: int, placement: Placement | None) -> list[str]: ...

    async def server_tags(self, servers: list[str]) -> dict[str, list[str]]: ...

    async def stream_infos(self, account: str, names: list[str]) -> dict[str, StreamInfo]: ...

    def ask_leader_to_answer(self, account: str, name: str, reply: bytes) -> None: ...


class AccountScope:
    def __init__(self, cjs: Cluster, js: JetStream) -> None:
        self.cjs = cjs
        self.js = js
        self.account = js.config.account
        self.replicas: dict[str, Replica] = {}  # this server's, by stream name
        self.consumer_groups = ConsumerGroups(
            cjs.server_name,
            cjs.cluster_name,
            cjs.host,
            cjs.system,
            cjs.config,
            self.replicas.get,
            cjs.propose_meta,
            cjs.act,
            cjs.traffic_account,
            self.account,
            streams=self.replicas,
            consumers_of=lambda stream: cjs.meta.consumers_of(self.account).get(stream) or {},
        )

    # -- what the API asks (ClusterState, ConsumerClusterState) -----------------------------------

    @property
    def is_meta_leader(self) -> bool:
        return self.cjs.is_meta_leader

    @property
    def leaderless(self) -> bool:
        return self.cjs.leaderless

    @property
    def assignments(self) -> Mapping[str, StreamAssignment]:
        return self.cjs.meta.streams_of(self.account)

    @property
    def consumer_assignments(self) -> Mapping[str, Mapping[str, ConsumerAssignment]]:
        return self.cjs.meta.consumers_of(self.account)

    def every_consumer(self) -> list[ConsumerAssignment]:
        return [
            ca
            for by_stream in self.cjs.meta.consumers.values()
            for cs in by_stream.values()
            for ca in cs.values()
        ]

    @property
    def limits(self) -> AccountLimits:
        """The account's JetStream limits (its ``jetstream {}`` block, or its JWT's)."""
        return self.js.registry.resources.limits

    def replica(self, name: str) -> Replica | None:
        return self.replicas.get(name)

    def consumer_replica(self, stream: str, name: str) -> HeldConsumer | None:
        return self.consumer_groups.replica(stream, name)

    async def consumer_states(self, stream: str, names: list[str]) -> dict[str, ConsumerState]:
        return await self.consumer_groups.states(stream, names)

    def js_servers(self) -> list[str]:
        return self.cjs.js_servers()

    async def place(
        self, replicas: int, placement: Placement | None = None, exclude: Sequence[str] = ()
    ) -> list[str]:
        return await self.cjs.place(replicas, placement, exclude)

    async def propose_meta(self, op: bytes) -> bytes:
        return await self.cjs.propose_meta(op)

    async def moved(self, peers: Sequence[str], replicas: int, placement: Placement | None) -> list[str]:
        return await self.cjs.moved(peers, replicas, placement)

    async def server_tags(self, servers: list[str]) -> dict[str, list[str]]:
        return await self.cjs.server_tags(servers)

    async def stream_infos(self, names: list[str]) -> dict[str, StreamInfo]:
        return await self.cjs.stream_infos(self.account, names)

    def ask_leader_to_answer(self, name: str, reply: bytes) -> None:
        self.cjs.ask_leader_to_answer(self.account, name, reply)
