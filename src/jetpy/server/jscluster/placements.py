"""How this server holds an assigned stream as its placement changes between one server and
several (see the package doc): a replica of a stream's group started, an R1 stream held as a
local stream (:mod:`.local`), an R1 stream's group founded over its store when it is scaled up
or moved, and a stream scaled down to R1 settled back to a local one once its group is this
member alone.

Owns: those transitions, as a mixin of :class:`.service.ClusteredJetStream` (the state it needs
of it: :class:`ServiceState`). Must not know: Raft's rules, the wire, a stream's rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

import msgspec

from jetpy.jetstream.api.messages import StreamCreateResponse
from jetpy.jetstream.models import encode
from jetpy.jetstream.service import JetStream
from jetpy.jetstream.stream import Stream
from jetpy.server.jscluster.account import AccountScope
from jetpy.server.jscluster.copiers import Copier
from jetpy.server.jscluster.local import LocalStream, Replica, copies
from jetpy.server.jscluster.membership import reconcile
from jetpy.server.jscluster.meta import MetaMachine, StreamAssignment
from jetpy.server.jscluster.streams import StreamReplica
from jetpy.server.nrg import GroupConfig, RaftHost

__all__ = ["Drop", "Placements", "ServiceState"]

log = logging.getLogger("jetpy.jetstream")


@dataclasses.dataclass(frozen=True)
class Drop:
    """An action: this server's replica of the account's stream goes."""

    account: str
    name: str


Action = StreamAssignment | tuple[StreamAssignment, str] | Drop | Callable[[], Awaitable[None]]


class ServiceState(Protocol):
    """What the transitions use of the clustered JetStream."""

    server_name: str
    host: RaftHost
    config: GroupConfig
    meta: MetaMachine
    traffic_account: str
    _settling: set[str]
    _actions: asyncio.Queue[Action]

    def _cluster_name(self) -> str: ...

    async def _fetch_catchup(self, account: str, name: str, payload: bytes) -> bytes | None: ...

    def _leader_changed(
        self, scope: AccountScope, rep: StreamReplica, sa: StreamAssignment, leading: bool
    ) -> None: ...

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None: ...

    def _new_replica(self, scope: AccountScope, stream: Stream, sa: StreamAssignment) -> StreamReplica: ...

    async def _start_group(
        self, scope: AccountScope, rep: StreamReplica, sa: StreamAssignment, founders: Sequence[str]
    ) -> None: ...

    def _hold_local(self, scope: AccountScope, stream: Stream, sa: StreamAssignment) -> LocalStream: ...

    async def _to_group(
        self, scope: AccountScope, local: LocalStream, sa: StreamAssignment
    ) -> StreamReplica: ...

    async def _settle(self, scope: AccountScope, rep: Replica) -> Replica: ...

    async def _reconcile(self, scope: AccountScope, rep: StreamReplica) -> None: ...


def set_identity(js: JetStream, stream: Stream, sa: StreamAssignment) -> None:
    """Every replica names the same incarnation (Nats-Stream-Identity, which its sources
    check): the random part of its group's name, kept when it is held locally as R1."""
    js.registry.set_identity(stream, sa.group.rsplit("-", 1)[-1])


class Placements:
    """The transitions (a mixin: see the module doc)."""

    def _new_replica(
        self: ServiceState, scope: AccountScope, stream: Stream, sa: StreamAssignment
    ) -> StreamReplica:
        js, account = scope.js, sa.account
        set_identity(js, stream, sa)
        rep = StreamReplica(
            stream,
            js.registry,
            js.bus,
            self._cluster_name(),
            lambda name, payload: self._fetch_catchup(account, name, payload),
        )
        rep.assigned_config = sa.config
        rep.assigned_peers = sa.peers
        rep.traffic_account = self.traffic_account
        rep.consumer_count = lambda: len(self.meta.consumers_of(account).get(sa.name) or ())
        rep.domain = js.config.domain
        rep.copier = Copier(rep)  # its mirror or sources, run while it leads
        scope.replicas[sa.name] = rep
        return rep

    async def _start_group(
        self: ServiceState,
        scope: AccountScope,
        rep: StreamReplica,
        sa: StreamAssignment,
        founders: Sequence[str],
    ) -> None:
        group = await self.host.start_group(sa.group, rep, founders, self.config)
        group.snapshot_before_join = True  # a joiner is handed the store's state (founded_from_store)
        rep.group = group
        rep.direct_when_current()
        group.on_leader = lambda leading: self._leader_changed(scope, rep, sa, leading)
        if group.is_leader:
            self._leader_changed(scope, rep, sa, True)

    def _hold_local(
        self: ServiceState, scope: AccountScope, stream: Stream, sa: StreamAssignment
    ) -> LocalStream:
        """This server holds the R1 stream as a plain local stream (:mod:`.local`); a create
        is answered at once."""
        js, account = scope.js, sa.account
        set_identity(js, stream, sa)
        rep = LocalStream(stream, js.registry, js.bus, self._cluster_name())
        rep.assigned_config = sa.config
        rep.assigned_peers = sa.peers
        rep.consumer_count = lambda: len(self.meta.consumers_of(account).get(sa.name) or ())
        rep.domain = js.config.domain
        rep.leader_name = self.server_name
        rep.group_name = sa.group
        scope.replicas[sa.name] = rep
        js.registry.listen(stream)
        rep.direct_when_current()
        if sa.reply:
            rep.answered_create = True
            js.bus.publish(sa.reply, None, encode(StreamCreateResponse.of(rep.info(), did_create=True)))
        if rep.assigned_config != msgspec.json.encode(stream.config):  # an update made meanwhile
            self._actions.put_nowait((msgspec.structs.replace(sa, config=rep.assigned_config), ""))
        return rep

    async def _to_group(
        self: ServiceState, scope: AccountScope, local: LocalStream, sa: StreamAssignment
    ) -> StreamReplica:
        """An R1 stream scaled up: this server founds its group alone over what the store
        holds (its first snapshot, taken before anyone joins, hands that state to the servers
        newly placed, which fetch the messages: :mod:`.catchup`), and leads it."""
        js = scope.js
        local.close()
        stream = local.stream
        await js.registry.committer.sync_off_loop(stream)
        rep = self._new_replica(scope, stream, sa)  # publishes meanwhile find no leader: not taken
        rep.founded_from_store()
        js.registry.listen(stream)
        await self._start_group(scope, rep, sa, [self.server_name])
        g = rep.group
        if g is not None:  # the founding state in the group's files at once: a restart knows it
            g.snapshot_soon()
        if g is not None and not g.is_leader:  # elected alone, at once (its first founder)
            leading, told = asyncio.Event(), g.on_leader

            def on_leader(lead: bool) -> None:
                if told is not None:
                    told(lead)
                if lead:
                    leading.set()

            g.on_leader = on_leader
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(leading.wait(), self.config.timeout)
            g.on_leader = told
        log.info("JetStream cluster: stream '%s' scaled up: group %s founded here", sa.name, sa.group)
        return rep

    async def _settle(self: ServiceState, scope: AccountScope, rep: Replica) -> Replica:
        """A stream scaled down to R1 on this server: once its group is this member alone and
        its log has applied the R1 config, the group goes (its files deleted, the store synced
        first: the log was its write-ahead log) and the stream is held as a local one."""
        g = rep.group
        if not isinstance(rep, StreamReplica) or g is None or not g.is_leader or rep.behind:
            return rep
        if g.name in self._settling:
            return rep
        if rep.assigned_peers != [self.server_name] or scope.replicas.get(rep.stream.name) is not rep:
            return rep
        if rep.assigned_config != msgspec.json.encode(rep.stream.config) or copies(rep.stream.config):
            return rep  # (a mirror's or sources' copies go through a group: .copiers)
        if any(p.name != self.server_name for p in g.status().peers):
            return rep
        js = scope.js
        name = rep.stream.name
        rep.close()
        self._settling.add(g.name)
        try:
            await self.host.stop_group(g.name)  # what it committed is applied (stop waits for it)
            await js.registry.committer.sync_off_loop(rep.stream)
            root = self.host.root
            if root is not None:
                await asyncio.to_thread(shutil.rmtree, root / g.name, True)
        finally:
            self._settling.discard(g.name)
        if scope.replicas.get(name) is not rep:
            return rep
        sa = self.meta.streams_of(scope.account).get(name)
        if sa is None:
            return rep
        log.info("JetStream cluster: stream '%s' scaled down to R1: group %s dropped", name, g.name)
        return self._hold_local(scope, rep.stream, msgspec.structs.replace(sa, reply=""))

    async def _reconcile(self: ServiceState, scope: AccountScope, rep: StreamReplica) -> None:
        """The leader removes the members no longer placed, then maybe settles as R1; not while
        it still fetches messages (a member leaving may be the one it fetches them from: an R1
        stream moved to this server), asked again a while later."""
        g = rep.group
        if g is None or scope.replicas.get(rep.stream.name) is not rep:
            return
        if rep.behind:
            retry = lambda: self._spawn(self._reconcile(scope, rep))  # noqa: E731
            asyncio.get_running_loop().call_later(self.config.election_timeout, retry)
            return
        await reconcile(g, lambda: rep.assigned_peers)
        await self._settle(scope, rep)
