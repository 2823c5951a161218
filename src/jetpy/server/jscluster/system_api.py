"""The ``$JS.API`` requests of the system account that act on the cluster's JetStream as a whole,
answered by the meta leader (the others stay silent): ``$JS.API.META.LEADER.STEPDOWN`` and
``$JS.API.SERVER.REMOVE``.

Removing a server: each stream placed on it is placed on another server instead where one is
left (else it keeps its other replicas), by an update of its assignment (the server's replicas
leave their groups as any removed replica does), then the server's member leaves the meta group.
The meta leader cannot remove itself (it is stepped down first, by ``META.LEADER.STEPDOWN``). A
server that joined the meta group again under a new id (its meta directory lost) is a member
under both ids: removing it by name removes the id not heard from, and its streams stay.

Owns: subscribing them in the system account, answering each in its own task (a stepdown waits
until the new leader is elected, and nothing else waits on it), and their replies. Only the
system account's users reach them: a client of another account asking the same subject gets no
answer, as from nats-server. Must not know: Raft's rules, a stream's rules, the wire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import (
    MetaLeaderStepdownResponse,
    MetaServerRemoveRequest,
    MetaServerRemoveResponse,
)
from jetpy.jetstream.api.requests import decode_request
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import Placement, StreamConfig, encode
from jetpy.server.broker import Broker, InternalHandler, Subscription
from jetpy.server.jscluster.meta import StreamAssignment, UpdateStream, encode_op
from jetpy.server.jscluster.stepdown import needs_tags, read_request, step_down, successor
from jetpy.server.nrg import ProposalError, RaftGroup

__all__ = ["META_STEPDOWN", "SERVER_REMOVE", "SystemApi"]

log = logging.getLogger("jetpy.jetstream")

META_STEPDOWN = "$JS.API.META.LEADER.STEPDOWN"
SERVER_REMOVE = "$JS.API.SERVER.REMOVE"


class MetaState(Protocol):
    @property
    def meta_group(self) -> RaftGroup | None: ...

    @property
    def assignments(self) -> list[StreamAssignment]:
        """Every account's stream assignments."""
        ...

    async def place(
        self, replicas: int, placement: Placement | None = None, exclude: Sequence[str] = ()
    ) -> list[str]: ...

    async def propose_meta(self, op: bytes) -> bytes: ...

    async def server_tags(self, servers: list[str]) -> dict[str, list[str]]: ...


class SystemApi:
    def __init__(self, state: MetaState, system: Broker, cluster_name: Callable[[], str]) -> None:
        self.state = state
        self.system = system
        self._cluster_name = cluster_name
        self._subs: list[Subscription] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._subs = [
            self.system.subscribe_internal(META_STEPDOWN, self._on_request(self._meta_stepdown)),
            self.system.subscribe_internal(SERVER_REMOVE, self._on_request(self._server_remove)),
        ]

    def stop(self) -> None:
        for sub in self._subs:
            self.system.unsubscribe_internal(sub)
        self._subs = []
        for t in self._tasks:
            t.cancel()

    def _on_request(
        self, work: Callable[[RaftGroup, str, bytes], Coroutine[Any, Any, None]]
    ) -> InternalHandler:
        """The meta leader works on a request in a task of its own; the others stay silent."""

        def handle(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            g = self.state.meta_group
            if reply is None or g is None or not g.is_leader:
                return
            task = asyncio.get_running_loop().create_task(work(g, reply.decode(), data[hdr_len:]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return handle

    async def _meta_stepdown(self, g: RaftGroup, reply: str, body: bytes) -> None:
        try:
            req = read_request(body)
            tags = await self.state.server_tags([p.name for p in g.status().peers]) if needs_tags(req) else {}
            await step_down(g, successor(g, req, self._cluster_name(), tags))
            resp = MetaLeaderStepdownResponse(success=True)
        except ApiError as e:
            resp = MetaLeaderStepdownResponse.failure(e)
        self.system.publish_internal(reply, None, encode(resp))

    async def _server_remove(self, g: RaftGroup, reply: str, body: bytes) -> None:
        try:
            await self._remove_server(g, body)
            resp = MetaServerRemoveResponse(success=True)
        except ApiError as e:
            resp = MetaServerRemoveResponse.failure(e)
        self.system.publish_internal(reply, None, encode(resp))

    async def _remove_server(self, g: RaftGroup, body: bytes) -> None:
        if not body.strip():
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_request(body, MetaServerRemoveRequest)
        if not req.peer and not req.peer_id:
            raise ApiError.of(E.BAD_REQUEST)
        if g.server_name == req.peer or g.member == req.peer_id:
            raise ApiError.of(E.RAFT_GENERAL, err="the meta leader can not remove itself: step it down first")
        members = g.status().peers
        matches = [p for p in members if p.voter and (p.name == req.peer or p.id == req.peer_id)]
        if not matches:
            raise ApiError.of(E.CLUSTER_SERVER_NOT_MEMBER)
        # A server that joined again under a new id (its meta directory lost) is a voter under
        # both: its name removes the id not heard from, and the server keeps its streams while
        # another id of it remains a member.
        target = next((p for p in matches if not p.active), matches[0])
        still_here = target.name == g.server_name or any(
            p.voter and p.name == target.name and p.id != target.id for p in members
        )
        state = self.state
        for sa in state.assignments:
            if still_here or target.name not in sa.peers:
                continue
            peers = [p for p in sa.peers if p != target.name]
            placement = msgspec.json.decode(sa.config, type=StreamConfig).placement
            try:
                peers += await state.place(1, placement, sa.peers)
            except ApiError:
                if not peers:  # nowhere else to go: it stays (lost with the server)
                    log.warning(
                        "JetStream cluster: stream '%s > %s' has no other server to go to",
                        sa.account,
                        sa.name,
                    )
                    continue
            await state.propose_meta(encode_op(UpdateStream(sa.name, sa.config, "", peers, sa.account)))
        try:
            await g.remove_member(target.id)
        except ProposalError as exc:
            raise ApiError.of(E.RAFT_GENERAL, err=str(exc)) from None
        log.info("JetStream cluster: server %s removed from the meta group", target.name)
