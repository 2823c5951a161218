"""The ``$JS.API.CONSUMER.*`` requests as a cluster answers them.

Owns: the routes that replace a single server's for ``CONSUMER.CREATE``,
``CONSUMER.DURABLE.CREATE``, ``INFO``, ``NAMES``, ``LIST``, ``DELETE`` and ``LEADER.STEPDOWN``
(answered 10008 by a server whose meta group lost its leader, but a consumer's info and
stepdown by its leader).
The meta leader checks a create (the single server's checks, against the assigned stream's config
and its other consumers), places the consumer on the stream's servers (all of them for the
stream's replicas, the least loaded for fewer; ``num_replicas`` 0 is the stream's, an ephemeral
consumer one replica, as nats-server makes them) under a group ``C-R<n>F-<random>`` and records
the assignment; the consumer's first leader answers. Its leader answers ``INFO`` and
``LEADER.STEPDOWN``; the meta leader answers ``NAMES``, ``LIST`` (each consumer's info from its
leader), ``DELETE``, ``PAUSE`` (a new ``pause_until`` in the consumer's config) and every "not
found". An update is checked by the meta leader (the single
server's rules; a push consumer's deliver subject may move, the meta leader cannot tell whether
it is bound), recorded in the meta group and answered by the consumer's leader once it runs with
it; one that changes its ``num_replicas`` is placed anew (its leader's server and the others
it has first, then the stream's least loaded: :mod:`.consumer_placement`), the new ones
joining its group. A
work-queue stream's consumer removes what it acknowledged through the stream's log; an interest
stream's leader removes what all its consumers acknowledged (:mod:`.interest`), so an interest
stream's consumers are on every server of the stream (nats-server's 10134 for another
``num_replicas``; an ephemeral one too, as nats-server places it). Must
not know: how a consumer group runs, the wire.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any, Protocol

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.consumers import create_request, pause_request, pause_response, unpin_group
from jetpy.jetstream.api.messages import (
    ConsumerCreateResponse,
    ConsumerDeleteResponse,
    ConsumerInfoResponse,
    ConsumerLeaderStepdownResponse,
    ConsumerListResponse,
    ConsumerNamesResponse,
    ConsumerPauseResponse,
    ConsumerUnpinResponse,
    PagedRequest,
)
from jetpy.jetstream.api.requests import decode_request, expect_empty
from jetpy.jetstream.api.router import Elsewhere, Route
from jetpy.jetstream.consumers.manager import ephemeral_name
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import LIST_LIMIT, NAMES_LIMIT, ConsumerConfig, StreamConfig
from jetpy.jetstream.registry import new_identity
from jetpy.jetstream.resources import ResourceLimits
from jetpy.jetstream.unbuilt import check_direct_built
from jetpy.jetstream.validate import check_consumer_config, check_consumer_update
from jetpy.server.jscluster.consumer_groups import ConsumerGroups
from jetpy.server.jscluster.consumer_placement import rescale, wanted_replicas
from jetpy.server.jscluster.local_consumer import HeldConsumer
from jetpy.server.jscluster.meta import (
    RESULT_CONFLICT,
    RESULT_EXISTS,
    RESULT_MISSING,
    AddConsumer,
    ConsumerAssignment,
    RemoveConsumer,
    StreamAssignment,
    UpdateConsumer,
    encode_op,
)
from jetpy.server.nrg import ProposalError

__all__ = ["CONSUMER_ROUTES", "ConsumerClusterApi", "ConsumerClusterState"]

NOT_IN_CLUSTER = "{} is not supported by this server in a cluster yet"
CONSUMER_ROUTES = (
    "CONSUMER.CREATE",
    "CONSUMER.DURABLE.CREATE",
    "CONSUMER.INFO",
    "CONSUMER.NAMES",
    "CONSUMER.LIST",
    "CONSUMER.DELETE",
    "CONSUMER.LEADER.STEPDOWN",
    "CONSUMER.PAUSE",
    "CONSUMER.UNPIN",
)
CONSUMER_LEADER_ROUTES = frozenset({"CONSUMER.INFO", "CONSUMER.LEADER.STEPDOWN"})
"""The requests a consumer's leader answers (through its own group, meta leader or not)."""


class ConsumerClusterState(Protocol):
    """What the consumer API asks of the clustered JetStream, for the account whose
    ``$JS.API`` the request arrived on (``account.AccountScope``)."""

    @property
    def account(self) -> str: ...

    @property
    def is_meta_leader(self) -> bool: ...

    @property
    def assignments(self) -> Mapping[str, StreamAssignment]: ...

    @property
    def consumer_assignments(self) -> Mapping[str, Mapping[str, ConsumerAssignment]]: ...

    @property
    def consumer_groups(self) -> ConsumerGroups: ...

    def every_consumer(self) -> list[ConsumerAssignment]:
        """Every account's consumer assignments (placement balances the servers' load)."""
        ...

    @property
    def leaderless(self) -> bool:
        """The meta group has lost its leader here (not just for an election)."""
        ...

    async def propose_meta(self, op: bytes) -> bytes: ...


class ConsumerClusterApi:
    def __init__(self, state: ConsumerClusterState, resources: ResourceLimits, replying_to: Any) -> None:
        self.state = state
        self.resources = resources
        self._replying_to = replying_to

    def routes(self) -> dict[str, Route[Any]]:
        routes: dict[str, Route[Any]] = {
            "CONSUMER.CREATE": Route(ConsumerCreateResponse, self.create),
            "CONSUMER.DURABLE.CREATE": Route(ConsumerCreateResponse, self.create_durable),
            "CONSUMER.INFO": Route(ConsumerInfoResponse, self.info),
            "CONSUMER.NAMES": Route(ConsumerNamesResponse, self.names),
            "CONSUMER.LIST": Route(ConsumerListResponse, self.list_),
            "CONSUMER.DELETE": Route(ConsumerDeleteResponse, self.delete),
            "CONSUMER.LEADER.STEPDOWN": Route(ConsumerLeaderStepdownResponse, self.step_down, 2),
            "CONSUMER.PAUSE": Route(ConsumerPauseResponse, self.pause, 2),
            "CONSUMER.UNPIN": Route(ConsumerUnpinResponse, self.unpin, 2),
        }
        return {key: self._unless_leaderless(key, r) for key, r in routes.items()}

    def _unless_leaderless(self, key: str, route: Route[Any]) -> Route[Any]:
        """A server whose meta group lost its leader answers every consumer request 10008, as
        it does the stream requests (``api.ClusterApi``) and as nats-server does, but a
        consumer's info and stepdown on the consumer's leader, whose own group still works."""
        handler, state = route.handler, self.state
        consumer_own = key in CONSUMER_LEADER_ROUTES

        def answer(args: list[str], hdr: bytes, body: bytes) -> Any:
            if state.leaderless:
                groups = state.consumer_groups
                rep = groups.replica(args[0], args[1]) if consumer_own and len(args) >= 2 else None
                if rep is None or rep.consumer is None:
                    raise ApiError.of(E.CLUSTER_NOT_AVAIL)
            return handler(args, hdr, body)

        return Route(route.response, answer, route.args, route.counts_success)

    # -- create (the meta leader) -------------------------------------------------------------------

    def create_durable(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        if not self.state.is_meta_leader:
            raise Elsewhere
        if len(args) != 2:
            raise ApiError.of(E.CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT)
        return self._create(args[0], args[1], "", body, legacy_durable=True)

    def create(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        if not self.state.is_meta_leader:
            raise Elsewhere
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        name = args[1] if len(args) > 1 else ""
        filt = ".".join(args[2:]) if len(args) > 2 else ""
        return self._create(args[0], name, filt, body, legacy_durable=False, new_style=len(args) > 1)

    def _create(
        self, stream: str, name: str, filt: str, body: bytes, *, legacy_durable: bool, new_style: bool = False
    ) -> Any:
        req, cfg, action = create_request(
            stream, name, filt, body, legacy_durable=legacy_durable, new_style=new_style
        )
        sa = self.state.assignments.get(stream)
        if sa is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        scfg = msgspec.json.decode(sa.config, type=StreamConfig)
        consumers = self.state.consumer_assignments.get(stream) or {}
        cname = cfg.durable_name or cfg.name
        others = [_config(ca) for n, ca in consumers.items() if n != cname]
        cfg = check_consumer_config(
            scfg,
            cfg,
            pedantic=bool(req.pedantic),
            others=others,
            account_max_ack_pending=self.resources.limits.max_ack_pending,
            clustered=True,
        )
        check_direct_built(scfg, cfg)
        if cname and not cfg.name:
            cfg = msgspec.structs.replace(cfg, name=cname)
        reply = self._replying_to().decode()
        existing = consumers.get(cname) if cname else None
        if existing is not None:
            old = _config(existing)
            cfg = msgspec.structs.replace(cfg, pause_until=old.pause_until)
            if old == cfg:
                self.state.consumer_groups.ask_leader_to_answer(stream, cname, reply.encode())
                raise Elsewhere  # its leader answers
            if action == "create":
                raise ApiError.of(E.CONSUMER_ALREADY_EXISTS)
            new = check_consumer_update(old, cfg)
            op = UpdateConsumer(stream, cname, msgspec.json.encode(new), reply, account=self.state.account)
            replicas = wanted_replicas(new, len(sa.peers), scfg.retention == "interest")
            if replicas != len(existing.peers):
                return self._rescale(op, existing, sa, replicas)
            return self._update(op)
        if action == "update":
            raise ApiError.of(E.CONSUMER_DOES_NOT_EXIST)
        most = self.resources.consumer_limit(scfg)
        if most > 0 and len(consumers) >= most:
            raise ApiError.of(E.MAXIMUM_CONSUMERS_LIMIT)
        if not cname:
            cname = ephemeral_name()
            while cname in consumers:
                cname = ephemeral_name()
            cfg = msgspec.structs.replace(cfg, name=cname)
        replicas = wanted_replicas(cfg, len(sa.peers), scfg.retention == "interest")
        peers = self._place(sa, replicas)
        group = f"C-R{replicas}F-{new_identity()}"
        ca = ConsumerAssignment(
            stream,
            cname,
            msgspec.json.encode(cfg),
            group,
            peers,
            time.time_ns(),
            reply,
            account=self.state.account,
        )
        return self._assign(ca)

    def _place(self, sa: StreamAssignment, replicas: int) -> list[str]:
        """The stream's servers, the ones holding the fewest consumers first (ties at random)."""
        if replicas >= len(sa.peers):
            return list(sa.peers)
        load = self._load()
        shuffled = random.sample(sa.peers, len(sa.peers))
        return sorted(shuffled, key=lambda s: load.get(s, 0))[:replicas]

    def _load(self) -> dict[str, int]:
        """How many consumers each server holds (every account's)."""
        load: dict[str, int] = {}
        for ca in self.state.every_consumer():
            for p in ca.peers:
                load[p] = load.get(p, 0) + 1
        return load

    async def _rescale(
        self, op: UpdateConsumer, ca: ConsumerAssignment, sa: StreamAssignment, replicas: int
    ) -> ConsumerCreateResponse:
        """A change of the consumer's replicas: fewer keep its leader first (it goes on leading
        and answers), more add the stream's least loaded servers."""
        info = (await self.state.consumer_groups.infos(ca.stream, [ca.name])).get(ca.name)
        leader = info.cluster.leader if info is not None and info.cluster is not None else ""
        if leader in ca.peers:
            ca = msgspec.structs.replace(ca, peers=[leader, *(p for p in ca.peers if p != leader)])
        peers = rescale(ca, replicas, sa.peers, self._load())
        return await self._update(msgspec.structs.replace(op, peers=peers))

    async def _update(self, op: UpdateConsumer) -> ConsumerCreateResponse:
        if await self.state.propose_meta(encode_op(op)) == RESULT_MISSING:
            raise ApiError.of(E.CONSUMER_DOES_NOT_EXIST)
        raise Elsewhere  # the consumer's leader answers once it runs with the new config

    async def _assign(self, ca: ConsumerAssignment) -> ConsumerCreateResponse:
        result = await self.state.propose_meta(encode_op(AddConsumer(ca)))
        if result == RESULT_MISSING:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        if result == RESULT_CONFLICT:
            raise ApiError.of(E.CONSUMER_ALREADY_EXISTS)
        if result == RESULT_EXISTS:
            self.state.consumer_groups.ask_leader_to_answer(ca.stream, ca.name, ca.reply.encode())
        raise Elsewhere  # the consumer's (first) leader answers

    # -- a consumer's leader, or the meta leader for what does not exist --------------------------

    def _leader(self, args: list[str]) -> HeldConsumer:
        state = self.state
        rep = state.consumer_groups.replica(args[0], args[1]) if len(args) >= 2 else None
        if rep is not None and rep.consumer is not None:
            return rep
        if state.is_meta_leader:
            if not args or args[0] not in state.assignments:
                raise ApiError.of(E.STREAM_NOT_FOUND)
            if len(args) < 2 or args[1] not in (state.consumer_assignments.get(args[0]) or {}):
                raise ApiError.of(E.CONSUMER_NOT_FOUND)
        raise Elsewhere

    def unpin(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerUnpinResponse:
        """``CONSUMER.UNPIN``: the consumer's leader (whose engine holds the pins: a new leader
        starts with none, as nats-server's) releases the group's pin."""
        group = unpin_group(body)
        rep = self._leader(args)
        c = rep.consumer
        assert c is not None  # the leader's
        if group not in c.config.priority_groups:
            raise ApiError.of(E.CONSUMER_INVALID_PRIORITY_GROUP)
        self.state.consumer_groups.manager.unpin(c, group)
        return ConsumerUnpinResponse()

    def info(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerInfoResponse:
        expect_empty(body)
        info = self._leader(args).info()
        if info is None:
            raise Elsewhere
        return ConsumerInfoResponse.of(info)

    def step_down(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        return self._step_down(self._leader(args))

    async def _step_down(self, rep: HeldConsumer) -> ConsumerLeaderStepdownResponse:
        if len(rep.ca.peers) < 2:  # no other replica to lead: nothing changes, success (as
            return ConsumerLeaderStepdownResponse(success=True)  # nats-server 2.15 answers it)
        if rep.group is None:
            raise ApiError.of(E.CLUSTER_NOT_AVAIL)
        try:
            await rep.step_down()
        except ProposalError:
            raise ApiError.of(E.CLUSTER_NOT_AVAIL) from None
        return ConsumerLeaderStepdownResponse(success=True)

    # -- the meta leader ------------------------------------------------------------------------------

    def _stream_consumers(self, args: list[str], body: bytes) -> tuple[str, list[str], int]:
        if not self.state.is_meta_leader:
            raise Elsewhere
        req = decode_request(body, PagedRequest)
        if not args or args[0] not in self.state.assignments:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        names = sorted(self.state.consumer_assignments.get(args[0]) or {})
        return args[0], names, min(max(req.offset, 0), len(names))

    def names(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerNamesResponse:
        _, names, offset = self._stream_consumers(args, body)
        page = names[offset : offset + NAMES_LIMIT]
        return ConsumerNamesResponse(total=len(names), offset=offset, limit=NAMES_LIMIT, consumers=page)

    def list_(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        stream, names, offset = self._stream_consumers(args, body)
        return self._list(stream, names, offset)

    async def _list(self, stream: str, names: list[str], offset: int) -> ConsumerListResponse:
        page = names[offset : offset + LIST_LIMIT]
        infos = await self.state.consumer_groups.infos(stream, page)
        missing = [n for n in page if n not in infos]
        return ConsumerListResponse(
            total=len(names),
            offset=offset,
            limit=LIST_LIMIT,
            consumers=[infos[n] for n in page if n in infos],
            missing=missing or None,
        )

    def pause(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        """``CONSUMER.PAUSE``: the body read as a single server reads it, the new
        ``pause_until`` recorded in the consumer's config in the meta group (its leader pauses
        or resumes it, with the advisory), then answered by the meta leader."""
        state = self.state
        if not state.is_meta_leader:
            raise Elsewhere
        pause_until = pause_request(body)
        if args[0] not in state.assignments:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        ca = (state.consumer_assignments.get(args[0]) or {}).get(args[1])
        if ca is None:
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        cfg = msgspec.structs.replace(_config(ca), pause_until=pause_until)
        op = UpdateConsumer(ca.stream, ca.name, msgspec.json.encode(cfg), account=ca.account)
        return self._pause(op, pause_until)

    async def _pause(self, op: UpdateConsumer, pause_until: str | None) -> ConsumerPauseResponse:
        if await self.state.propose_meta(encode_op(op)) == RESULT_MISSING:
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        return pause_response(pause_until, time.time_ns())

    def delete(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        state = self.state
        if not state.is_meta_leader:
            raise Elsewhere
        expect_empty(body)
        if not args or args[0] not in state.assignments:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        if len(args) < 2 or args[1] not in (state.consumer_assignments.get(args[0]) or {}):
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        return self._delete(args[0], args[1], self._replying_to().decode())

    async def _delete(self, stream: str, name: str, reply: str) -> ConsumerDeleteResponse:
        # a consumer with a leader is answered by it once removed there (else that leader could
        # still answer its info after the reply); one without, by the meta leader
        led = name in await self.state.consumer_groups.infos(stream, [name])
        op = RemoveConsumer(stream, name, reply if led else "", self.state.account)
        if await self.state.propose_meta(encode_op(op)) == RESULT_MISSING:
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        if led:
            raise Elsewhere
        return ConsumerDeleteResponse(success=True)


def _config(ca: ConsumerAssignment) -> ConsumerConfig:
    return msgspec.json.decode(ca.config, type=ConsumerConfig)
