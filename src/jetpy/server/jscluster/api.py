"""The ``$JS.API`` requests as a cluster answers them: which server answers, and how.

Owns: the routes that replace a single server's (``STREAM.CREATE``, ``UPDATE`` with a change
of replicas, ``DELETE``, ``INFO``, ``NAMES``, ``LIST``, ``LEADER.STEPDOWN``, ``PEER.REMOVE``...),
the answer to every other request while it is not built for a cluster (the meta leader's
"... is not supported by this server in a cluster yet"), and 10008 for every request on a
server whose meta group has lost its leader. Every server receives every
request; the one that answers is the meta leader for assignments and the stream's leader for
its contents, the rest raise :class:`~jetpy.jetstream.api.router.Elsewhere` (see the package
doc). Must not know: how the meta group or a stream group runs, placement's rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import (
    AccountInfoResponse,
    LeaderStepdownRequest,
    StreamCreateResponse,
    StreamDeleteResponse,
    StreamInfoRequest,
    StreamInfoResponse,
    StreamLeaderStepdownResponse,
    StreamListRequest,
    StreamListResponse,
    StreamMsgDeleteResponse,
    StreamMsgGetResponse,
    StreamNamesResponse,
    StreamPurgeResponse,
    StreamRemovePeerRequest,
    StreamRemovePeerResponse,
    StreamUpdateResponse,
)
from jetpy.jetstream.api.requests import as_stream_config, config_body, decode_request, expect_empty
from jetpy.jetstream.api.router import ApiStats, Elsewhere, Route
from jetpy.jetstream.api.streams import StreamApi, delete_miss, info_reply, pedantic_flag
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import (
    LIST_LIMIT,
    NAMES_LIMIT,
    AccountInfo,
    AccountLimits,
    JetStreamApiStats,
    Placement,
    StreamConfig,
    StreamInfo,
)
from jetpy.jetstream.registry import new_identity
from jetpy.jetstream.report import API_LEVEL
from jetpy.jetstream.unbuilt import check_stream_built
from jetpy.jetstream.validate import MAX_REPLICAS, check_stream_create, check_stream_update
from jetpy.server.jscluster.limits import check_create, check_update
from jetpy.server.jscluster.local import Replica
from jetpy.server.jscluster.meta import (
    RESULT_CONFLICT,
    RESULT_EXISTS,
    RESULT_MISSING,
    AddStream,
    ConsumerAssignment,
    RemoveStream,
    StreamAssignment,
    UpdateStream,
    encode_op,
)
from jetpy.server.jscluster.stepdown import needs_tags, read_request, step_down, successor
from jetpy.server.jscluster.streams import DeleteOp, PurgeOp
from jetpy.server.jscluster.usage import replicas_of
from jetpy.server.nrg import RaftGroup, member_id
from jetpy.subjects import subjects_overlap

__all__ = ["CLUSTER_ROUTES", "NOT_IN_CLUSTER", "ClusterApi", "ClusterState"]

R = TypeVar("R")

NOT_IN_CLUSTER = "{} is not supported by this server in a cluster yet"
CLUSTER_ROUTES = (
    "INFO",
    "STREAM.CREATE",
    "STREAM.UPDATE",
    "STREAM.DELETE",
    "STREAM.INFO",
    "STREAM.NAMES",
    "STREAM.LIST",
    "STREAM.PURGE",
    "STREAM.MSG.DELETE",
    "STREAM.MSG.GET",
    "STREAM.LEADER.STEPDOWN",
    "STREAM.PEER.REMOVE",
)


STREAM_LEADER_ROUTES = frozenset(
    {
        "STREAM.INFO",
        "STREAM.MSG.GET",
        "STREAM.PURGE",
        "STREAM.MSG.DELETE",
        "STREAM.LEADER.STEPDOWN",
        "STREAM.SNAPSHOT",
    }
)
"""The requests a stream's leader answers (about its contents, through its own group)."""


class ClusterState(Protocol):
    """What the API asks of the clustered JetStream, for the account whose ``$JS.API`` the
    request arrived on (``account.AccountScope``: its assignments alone, its limits)."""

    @property
    def account(self) -> str: ...

    @property
    def limits(self) -> AccountLimits:
        """The account's JetStream limits."""
        ...

    @property
    def is_meta_leader(self) -> bool: ...

    @property
    def leaderless(self) -> bool:
        """The meta group has lost its leader here (not just for an election)."""
        ...

    @property
    def assignments(self) -> Mapping[str, StreamAssignment]: ...

    @property
    def consumer_assignments(self) -> Mapping[str, Mapping[str, ConsumerAssignment]]: ...

    def replica(self, name: str) -> Replica | None: ...

    def js_servers(self) -> list[str]: ...

    async def place(
        self, replicas: int, placement: Placement | None = None, exclude: Sequence[str] = ()
    ) -> list[str]:
        """The servers ``replicas`` replicas of a stream with ``placement`` go on, none of
        ``exclude`` (raises 10005 if too few match)."""
        ...

    async def propose_meta(self, op: bytes) -> bytes: ...

    async def moved(self, peers: Sequence[str], replicas: int, placement: Placement | None) -> list[str]:
        """A stream's servers on ``peers`` once its placement is ``placement``."""
        ...

    async def server_tags(self, servers: list[str]) -> dict[str, list[str]]:
        """The servers' tags (those that answer)."""
        ...

    async def stream_infos(self, names: list[str]) -> dict[str, StreamInfo]:
        """The named streams' infos from their leaders (those that answered in time)."""
        ...

    def ask_leader_to_answer(self, name: str, reply: bytes) -> None:
        """Have the stream's leader answer a create of it (already there) on ``reply``."""
        ...


def _decode_config(sa: StreamAssignment) -> StreamConfig:
    return msgspec.json.decode(sa.config, type=StreamConfig)


class ClusterApi:
    def __init__(
        self, state: ClusterState, streams: StreamApi, stats: ApiStats, replying_to: Callable[[], bytes]
    ) -> None:
        self.state = state
        self.streams = streams  # the single server's handlers: its checks, its reads
        self.stats = stats
        self._replying_to = replying_to

    def routes(self, single: Mapping[str, Route[Any]]) -> dict[str, Route[Any]]:
        """The cluster's routes: its own for :data:`CLUSTER_ROUTES`, a refusal by the meta
        leader for the others of ``single`` (the single server's table)."""
        routes: dict[str, Route[Any]] = {key: self._refusal(key, r) for key, r in single.items()}
        routes["INFO"] = Route(AccountInfoResponse, self.account_info, 0)
        routes["STREAM.CREATE"] = Route(StreamCreateResponse, self.stream_create, 1)
        routes["STREAM.UPDATE"] = Route(StreamUpdateResponse, self.stream_update, 1)
        routes["STREAM.DELETE"] = Route(StreamDeleteResponse, self.stream_delete, 1)
        routes["STREAM.INFO"] = Route(StreamInfoResponse, self.stream_info, 1)
        routes["STREAM.NAMES"] = Route(StreamNamesResponse, self.stream_names, 0)
        routes["STREAM.LIST"] = Route(StreamListResponse, self.stream_list, 0)
        routes["STREAM.PURGE"] = Route(StreamPurgeResponse, self.stream_purge, 1)
        routes["STREAM.MSG.DELETE"] = Route(StreamMsgDeleteResponse, self.stream_msg_delete, 1)
        routes["STREAM.MSG.GET"] = Route(
            StreamMsgGetResponse, self._leader_reads(self.streams.stream_msg_get), 1
        )
        routes["STREAM.LEADER.STEPDOWN"] = Route(StreamLeaderStepdownResponse, self.stream_stepdown, 1)
        routes["STREAM.PEER.REMOVE"] = Route(StreamRemovePeerResponse, self.stream_peer_remove, 1)
        return {key: self.unless_leaderless(key, r) for key, r in routes.items()}

    def unless_leaderless(self, key: str, route: Route[Any]) -> Route[Any]:
        """A server whose meta group lost its leader answers every request 10008 (each such
        server does, as nats-server's: the client takes the first answer), but for those about
        a stream's contents on the stream's leader, whose own group still works."""
        handler, state = route.handler, self.state
        stream_own = key in STREAM_LEADER_ROUTES

        def answer(args: list[str], hdr: bytes, body: bytes) -> Any:
            if state.leaderless:
                rep = state.replica(args[0]) if stream_own and args else None
                if rep is None or not rep.is_leader:
                    raise ApiError.of(E.CLUSTER_NOT_AVAIL)
            return handler(args, hdr, body)

        return Route(route.response, answer, route.args, route.counts_success)

    def _refusal(self, key: str, single: Route[Any]) -> Route[Any]:
        def refuse(args: list[str], hdr: bytes, body: bytes) -> Any:
            if not self.state.is_meta_leader:
                raise Elsewhere
            raise ApiError.of(E.STREAM_GENERAL, err=NOT_IN_CLUSTER.format(key))

        return Route(single.response, refuse, single.args)

    # -- the account ---------------------------------------------------------------------------------

    def account_info(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        if not self.state.is_meta_leader:
            raise Elsewhere
        return self._account_info()

    async def _account_info(self) -> AccountInfoResponse:
        """The account's usage across the cluster, from its streams' leaders: each stream's bytes
        times its replicas (what the cluster stores, as nats-server counts it once its servers'
        reports arrived; the figure a publish is checked against, :mod:`.usage`)."""
        assigned = self.state.assignments
        infos = await self.state.stream_infos(sorted(assigned))
        usage = {"memory": 0, "file": 0}
        for name, info in infos.items():
            usage[info.config.storage] += info.state.bytes * replicas_of(assigned[name].peers)
        return AccountInfoResponse.of(
            AccountInfo(
                memory=usage["memory"],
                storage=usage["file"],
                streams=len(assigned),
                consumers=sum(map(len, self.state.consumer_assignments.values())),
                limits=self.state.limits,
                api=JetStreamApiStats(level=API_LEVEL, total=self.stats.total, errors=self.stats.errors),
            )
        )

    # -- streams ----------------------------------------------------------------------------------

    def stream_create(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        state = self.state
        if not state.is_meta_leader:
            raise Elsewhere
        req = config_body(body)
        cfg0 = as_stream_config(req)
        if cfg0.name != args[0]:
            raise ApiError.of(E.STREAM_MISMATCH)
        pedantic = pedantic_flag(req)
        # more replicas than servers: no suitable peers (placement's 10005, as nats-server 2.15)
        cfg = check_stream_create(cfg0, pedantic=pedantic, origins=self._origin, max_replicas=MAX_REPLICAS)
        self._check_cluster_config(cfg)
        raw = msgspec.json.encode(cfg)
        have = state.assignments.get(cfg.name)
        if have is None:
            self._check_overlap(cfg)
            check_create(state.limits, state.assignments, cfg)
        elif have.config != raw:
            raise ApiError.of(E.STREAM_NAME_EXIST)
        replicas = cfg.num_replicas or 1
        group = f"S-R{replicas}F-{new_identity()}"
        reply = self._replying_to().decode()
        sa = StreamAssignment(cfg.name, raw, group, [], time.time_ns(), reply, account=state.account)
        return self._create(sa, cfg)

    async def _create(self, sa: StreamAssignment, cfg: StreamConfig) -> StreamCreateResponse:
        peers = await self.state.place(cfg.num_replicas or 1, cfg.placement)
        sa = msgspec.structs.replace(sa, peers=peers)
        result = await self.state.propose_meta(encode_op(AddStream(sa)))
        if result == RESULT_CONFLICT:
            raise ApiError.of(E.STREAM_NAME_EXIST)
        if result == RESULT_EXISTS:
            self.state.ask_leader_to_answer(sa.name, sa.reply.encode())
        raise Elsewhere  # the stream's (first) leader answers

    def _check_cluster_config(self, cfg: StreamConfig) -> None:
        check_stream_built(cfg, clustered=True)

    def _origin(self, name: str) -> StreamConfig | None:
        """Another stream's config, for the rules of mirrors and sources that look at it."""
        sa = self.state.assignments.get(name)
        return _decode_config(sa) if sa is not None else None

    def _check_overlap(self, cfg: StreamConfig) -> None:
        for name, other in self.state.assignments.items():
            if name == cfg.name:
                continue
            theirs = _decode_config(other).subjects
            if any(subjects_overlap(a, b) for a in cfg.subjects for b in theirs):
                raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)

    def stream_update(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        """Checked by the meta leader against the assigned config, recorded in the meta group,
        then put in the stream's own log by its leader, which answers (see ``service``)."""
        state = self.state
        if not state.is_meta_leader:
            raise Elsewhere
        req = config_body(body)
        cfg0 = as_stream_config(req)
        if cfg0.name != args[0]:
            raise ApiError.of(E.STREAM_MISMATCH)
        sa = state.assignments.get(args[0])
        if sa is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        old = _decode_config(sa)
        cfg = check_stream_update(
            old, cfg0, pedantic=pedantic_flag(req), origins=self._origin, max_replicas=MAX_REPLICAS
        )
        self._check_cluster_config(cfg)
        self._check_overlap(cfg)
        check_update(state.limits, state.assignments, cfg)
        op = UpdateStream(
            cfg.name, msgspec.json.encode(cfg), self._replying_to().decode(), account=state.account
        )
        replicas = cfg.num_replicas or 1
        if cfg.placement != old.placement:
            if replicas != (old.num_replicas or 1):
                raise ApiError.of(E.STREAM_MOVE_AND_SCALE)
            return self._move(op, sa, replicas, cfg.placement)
        if replicas != (old.num_replicas or 1):
            return self._rescale(op, sa, replicas)
        return self._update(op)

    async def _move(
        self, op: UpdateStream, sa: StreamAssignment, replicas: int, placement: Placement | None
    ) -> StreamUpdateResponse:
        """A new placement: the servers that do not satisfy it replaced by others that do
        (10005 if too few), which join the stream's group and catch up before the replaced
        ones leave (:mod:`.membership`); its consumers follow it. Refused (10124) while its
        group is not yet on the servers placed (a move, a scaling, a peer's removal going on),
        as its leader reports it."""
        info = (await self.state.stream_infos([sa.name])).get(sa.name)
        if info is not None and info.cluster is not None:
            members = {info.cluster.leader, *(r.name for r in info.cluster.replicas or ())}
            if members != set(sa.peers):
                raise ApiError.of(E.STREAM_MOVE_IN_PROGRESS)
        peers = await self.state.moved(sa.peers, replicas, placement)
        return await self._update(msgspec.structs.replace(op, peers=peers))

    async def _rescale(self, op: UpdateStream, sa: StreamAssignment, replicas: int) -> StreamUpdateResponse:
        """A change of replicas: more servers placed (the fewest loaded ones not holding it), or
        fewer kept (its leader first, so that it goes on leading and answers)."""
        if replicas > len(sa.peers):
            placement = _decode_config(sa).placement
            peers = [*sa.peers, *await self.state.place(replicas - len(sa.peers), placement, sa.peers)]
        else:
            info = (await self.state.stream_infos([sa.name])).get(sa.name)
            leader = info.cluster.leader if info is not None and info.cluster is not None else ""
            if leader not in sa.peers:
                raise ApiError.of(E.CLUSTER_NOT_AVAIL)
            peers = [leader, *[p for p in sa.peers if p != leader]][:replicas]
        return await self._update(msgspec.structs.replace(op, peers=peers))

    async def _update(self, op: UpdateStream) -> StreamUpdateResponse:
        if await self.state.propose_meta(encode_op(op)) == RESULT_MISSING:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        raise Elsewhere  # the stream's leader answers once the change is in its log

    def stream_delete(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        state = self.state
        if not state.is_meta_leader:
            raise Elsewhere
        expect_empty(body)
        if not args or args[0] not in state.assignments:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return self._delete(args[0])

    async def _delete(self, name: str) -> StreamDeleteResponse:
        await self.state.propose_meta(encode_op(RemoveStream(name, self.state.account)))
        return StreamDeleteResponse(success=True)

    def _leader(self, args: list[str]) -> Replica:
        """This server's replica of the request's stream if it leads it; else the meta leader
        answers 10059 for a stream that does not exist, and the others leave it."""
        state = self.state
        rep = state.replica(args[0]) if args else None
        if rep is not None and rep.is_leader:
            return rep
        if state.is_meta_leader and (not args or args[0] not in state.assignments):
            raise ApiError.of(E.STREAM_NOT_FOUND)
        raise Elsewhere

    def _leader_reads(
        self, handler: Callable[[list[str], bytes, bytes], R]
    ) -> Callable[[list[str], bytes, bytes], R | Coroutine[Any, Any, R]]:
        """A read of a stream's contents: the single server's handler, on its leader while its
        lease holds (``RaftGroup.in_lease``), waiting up to an election timeout for it; a leader
        that may have been deposed without knowing it (paused, cut off) leaves the read to the
        one that leads."""

        def read(args: list[str], hdr: bytes, body: bytes) -> R | Coroutine[Any, Any, R]:
            rep = self._leader(args)
            group = rep.group
            if group is None or group.in_lease:
                return handler(args, hdr, body)

            async def once_leased() -> R:
                # a leader just elected (or whose loop stalled) hears a quorum within a heartbeat
                # or two: the read waits for that rather than go unanswered
                if not await group.wait_lease(group.cfg.election_timeout):
                    raise Elsewhere
                return handler(args, hdr, body)

            return once_leased()

        return read

    def stream_info(self, args: list[str], hdr: bytes, body: bytes) -> StreamInfoResponse:
        rep = self._leader(args)
        return info_reply(rep.stream, decode_request(body, StreamInfoRequest), rep.info)

    def stream_purge(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        rep = self._leader(args)
        _, e = self.streams.purge_request(args, body)
        return self._purge(rep, PurgeOp(e.subject, e.seq, e.keep))

    async def _purge(self, rep: Replica, op: PurgeOp) -> StreamPurgeResponse:
        return StreamPurgeResponse(success=True, purged=int(await rep.propose_change(op)))

    def stream_msg_delete(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        rep = self._leader(args)
        _, e = self.streams.msg_delete_request(args, body)
        return self._msg_delete(rep, DeleteOp(e.seq, e.erase))

    async def _msg_delete(self, rep: Replica, op: DeleteOp) -> StreamMsgDeleteResponse:
        if not int(await rep.propose_change(op)):
            raise delete_miss(rep.stream, op.seq)
        return StreamMsgDeleteResponse(success=True)

    def stream_stepdown(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        """The stream's leader hands its group over (see ``stepdown``); an R1 stream has no one
        to hand it to and answers success, whatever the body, as nats-server does."""
        rep = self._leader(args)
        g = rep.group
        if g is None or g.status().voters <= 1:
            return StreamLeaderStepdownResponse(success=True)
        req = read_request(body)
        if not needs_tags(req):
            return self._stepdown(g, successor(g, req, rep.cluster, {}))
        return self._stepdown_tagged(g, req, rep.cluster)

    async def _stepdown_tagged(self, g: RaftGroup, req: LeaderStepdownRequest, cluster: str) -> Any:
        tags = await self.state.server_tags([p.name for p in g.status().peers])
        return await self._stepdown(g, successor(g, req, cluster, tags))

    async def _stepdown(self, g: RaftGroup, target: str) -> StreamLeaderStepdownResponse:
        await step_down(g, target)
        return StreamLeaderStepdownResponse(success=True)

    def stream_peer_remove(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        """The meta leader takes the stream off a server (by name or member id) and places it
        on another one, which joins the stream's group and catches up; the removed server's
        replica leaves once the group has removed it, and its files are deleted. An R1 stream
        moves so too, with its messages (nats-server 2.15.1 places it on the other server empty,
        with no leader): see :mod:`.placements`."""
        state = self.state
        if not state.is_meta_leader:
            raise Elsewhere
        sa = state.assignments.get(args[0])
        if sa is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        if not body.strip():
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_request(body, StreamRemovePeerRequest)
        if not req.peer:
            raise ApiError.of(E.BAD_REQUEST)
        peer = next((p for p in sa.peers if req.peer in (p, member_id(p))), None)
        if peer is None:
            raise ApiError.of(E.CLUSTER_PEER_NOT_MEMBER)
        return self._peer_remove(sa, peer)

    async def _peer_remove(self, sa: StreamAssignment, peer: str) -> StreamRemovePeerResponse:
        try:
            [new] = await self.state.place(1, _decode_config(sa).placement, sa.peers)
        except ApiError:
            raise ApiError.of(E.PEER_REMAP) from None
        op = UpdateStream(sa.name, sa.config, "", [new if p == peer else p for p in sa.peers], sa.account)
        if await self.state.propose_meta(encode_op(op)) == RESULT_MISSING:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return StreamRemovePeerResponse(success=True)

    def _names(self, body: bytes) -> tuple[list[str], int]:
        """The assigned streams' names the request's subject filter selects, and its offset
        (a negative one reads as 0, one past the end as the end)."""
        if not self.state.is_meta_leader:
            raise Elsewhere
        req = decode_request(body, StreamListRequest)
        names = sorted(
            name
            for name, sa in self.state.assignments.items()
            if not req.subject or any(subjects_overlap(req.subject, f) for f in _decode_config(sa).subjects)
        )
        return names, min(max(req.offset, 0), len(names))

    def stream_names(self, args: list[str], hdr: bytes, body: bytes) -> StreamNamesResponse:
        names, offset = self._names(body)
        page = names[offset : offset + NAMES_LIMIT]
        return StreamNamesResponse(total=len(names), offset=offset, limit=NAMES_LIMIT, streams=page or None)

    def stream_list(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        names, offset = self._names(body)
        return self._list(names, offset)

    async def _list(self, names: list[str], offset: int) -> StreamListResponse:
        """Each stream's info from its leader; those that did not answer in time are named in
        ``missing``, as nats-server's list in a cluster does."""
        page = names[offset : offset + LIST_LIMIT]
        infos = await self.state.stream_infos(page)
        missing = [n for n in page if n not in infos]
        return StreamListResponse(
            total=len(names),
            offset=offset,
            limit=LIST_LIMIT,
            streams=[infos[n] for n in page if n in infos],
            missing=missing or None,
        )
