"""Stream restores on a cluster: ``$JS.API.STREAM.RESTORE`` taken by the meta leader.

Owns the cluster's side of a restore: the checks a create of the stream would pass on the
cluster (the single server's restore checks, then the config as the meta leader checks it, its
overlap with the assigned streams and the account's limits), where the backup is received and
how the restored store becomes an assigned stream. nats-server 2.15.1's meta leader creates the
stream's assignment and the chunks go to the server that holds it; here the meta leader receives
them itself, as a single server does (``jetpy.jetstream.restores``: nothing exists until the
whole archive is verified, stored and synced), so its server must be one the stream's placement
allows (else 10005). Then, through the meta group: the stream is assigned to this server alone
(it holds the restored store as an R1 stream, as it holds one after a restart), each consumer of
the archive is assigned on it with the archive's state as the state its replicas start from
(``ConsumerAssignment.state``), and a replicated stream is scaled up to its servers, which found
its group from the restored store (``founded_from_store``) and fetch its messages, as a scale-up
of an R1 stream does; the consumers follow it. The answer (a ``stream_create_response``) is given
once that is in the meta log. A step that fails removes what was made. Mirrors and streams with
sources are refused (their copying state is not in a backup). Must not know: the archive, how
a group runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import StreamCreateResponse, StreamRestoreRequest, StreamRestoreResponse
from jetpy.jetstream.api.requests import decode_request, is_empty_request
from jetpy.jetstream.api.router import Elsewhere, Route
from jetpy.jetstream.api.snapshot import SnapshotApi
from jetpy.jetstream.archive import ArchiveConsumer
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import AccountLimits, Placement, StreamConfig, encode
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry, new_identity
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.unbuilt import check_stream_built
from jetpy.jetstream.validate import MAX_REPLICAS, check_stream_config
from jetpy.server.jscluster.limits import check_create
from jetpy.server.jscluster.local import Replica
from jetpy.server.jscluster.meta import (
    RESULT_CONFLICT,
    RESULT_EXISTS,
    AddConsumer,
    AddStream,
    ConsumerAssignment,
    RemoveStream,
    StreamAssignment,
    UpdateStream,
    encode_op,
)
from jetpy.subjects import subjects_overlap

__all__ = ["ClusterRestores", "RestoreState"]

log = logging.getLogger("jetpy.jetstream")

HOLD_WAIT = 10.0
"""Seconds the meta leader waits for its server to hold the restored stream once assigned."""


class RestoreState(Protocol):
    """What a restore asks of the account's clustered JetStream (``account.AccountScope``)."""

    @property
    def account(self) -> str: ...

    @property
    def limits(self) -> AccountLimits: ...

    @property
    def is_meta_leader(self) -> bool: ...

    @property
    def assignments(self) -> Mapping[str, StreamAssignment]: ...

    def replica(self, name: str) -> Replica | None: ...

    def js_servers(self) -> list[str]: ...

    async def place(
        self, replicas: int, placement: Placement | None = None, exclude: Sequence[str] = ()
    ) -> list[str]: ...

    async def propose_meta(self, op: bytes) -> bytes: ...


def _config(sa: StreamAssignment) -> StreamConfig:
    return msgspec.json.decode(sa.config, type=StreamConfig)


class ClusterRestores:
    def __init__(
        self,
        state: RestoreState,
        snapshots: SnapshotApi,
        registry: StreamRegistry,
        bus: MessageBus,
        server_name: str,
    ) -> None:
        self.state = state
        self.snapshots = snapshots
        self.registry = registry
        self.bus = bus
        self.server_name = server_name
        self._tasks: set[asyncio.Task[None]] = set()

    def route(self) -> Route[Any]:
        return Route(StreamRestoreResponse, self.restore, 1)

    def restore(self, args: list[str], hdr: bytes, body: bytes) -> Any:
        state = self.state
        if not state.is_meta_leader:
            raise Elsewhere
        if is_empty_request(body):
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_request(body, StreamRestoreRequest)
        name = args[0]
        cfg0 = req.config if req.config.name else msgspec.structs.replace(req.config, name=name)
        if cfg0.name != name:
            raise ApiError.of(E.STREAM_MISMATCH)
        if name in state.assignments or self.snapshots.restoring(name) or self.registry.get(name) is not None:
            raise ApiError.of(E.STREAM_NAME_EXIST_RESTORE_FAILED)
        cfg = check_stream_config(cfg0, origins=self._origin, max_replicas=MAX_REPLICAS)
        check_stream_built(cfg, clustered=True)
        if cfg.mirror is not None or cfg.sources:
            raise ApiError.of(
                E.STREAM_GENERAL,
                err="restoring a mirror or a stream with sources is not supported by this server in a cluster yet",
            )
        for sa in state.assignments.values():
            if any(subjects_overlap(a, b) for a in cfg.subjects for b in _config(sa).subjects):
                raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        check_create(state.limits, state.assignments, cfg)
        return self._start(cfg)

    def _origin(self, name: str) -> StreamConfig | None:
        sa = self.state.assignments.get(name)
        return _config(sa) if sa is not None else None

    async def _start(self, cfg: StreamConfig) -> StreamRestoreResponse:
        state, me = self.state, self.server_name
        try:
            await state.place(1, cfg.placement, [s for s in state.js_servers() if s != me])
        except ApiError:
            raise ApiError.of(
                E.CLUSTER_NO_PEERS,
                err="no suitable peers for placement: a restore is received by the meta leader, "
                "which the stream's placement does not allow",
            ) from None
        replicas = cfg.num_replicas or 1
        others = await state.place(replicas - 1, cfg.placement, [me]) if replicas > 1 else []
        if self.snapshots.restoring(cfg.name) or cfg.name in state.assignments:
            raise ApiError.of(E.STREAM_NAME_EXIST_RESTORE_FAILED)
        local = msgspec.structs.replace(cfg, num_replicas=1)
        held: list[Any] = []

        def restored(reply: str, result: Stream | ApiError) -> None:
            if isinstance(result, ApiError):
                self.bus.publish(reply, None, encode(StreamCreateResponse.failure(result)))
                return
            consumers = list(held[0].restored_consumers)
            self._spawn(self._assign(cfg, [me, *others], result, consumers, reply))

        held.append(self.snapshots.start_restore(local, restored, None))
        return StreamRestoreResponse(deliver_subject=held[0].deliver)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _assign(
        self,
        cfg: StreamConfig,
        peers: list[str],
        stream: Stream,
        consumers: list[ArchiveConsumer],
        reply: str,
    ) -> None:
        """The restored store made the cluster's stream (see the module doc), then the answer."""
        state, name = self.state, cfg.name
        assigned = False
        try:
            if not state.is_meta_leader:
                raise ApiError.of(E.CLUSTER_NOT_AVAIL)
            replicas = cfg.num_replicas or 1
            local = msgspec.structs.replace(cfg, num_replicas=1)
            sa = StreamAssignment(
                name,
                msgspec.json.encode(local),
                f"S-R{replicas}F-{new_identity()}",
                [peers[0]],
                time.time_ns(),
                "",
                account=state.account,
            )
            result = await state.propose_meta(encode_op(AddStream(sa)))
            if result in (RESULT_CONFLICT, RESULT_EXISTS):
                raise ApiError.of(E.STREAM_NAME_EXIST_RESTORE_FAILED)
            assigned = True
            rep = await self._held(name)
            for c in consumers:
                ca = ConsumerAssignment(
                    name,
                    c.name,
                    msgspec.json.encode(c.config),
                    f"C-R1F-{new_identity()}",
                    [peers[0]],
                    c.created,
                    account=state.account,
                    state=c.state,
                )
                await state.propose_meta(encode_op(AddConsumer(ca)))
            if replicas > 1:
                op = UpdateStream(name, msgspec.json.encode(cfg), "", peers, state.account)
                await state.propose_meta(encode_op(op))
            resp = StreamCreateResponse.of(rep.info(), did_create=False)
        except Exception as e:
            error = (
                e
                if isinstance(e, ApiError)
                else ApiError.of(E.STREAM_RESTORE, err=str(e) or "internal error")
            )
            log.warning("restore of stream '%s' onto the cluster failed: %s", name, error.description)
            await self._undo(stream, assigned)
            resp = StreamCreateResponse.failure(error)
        self.bus.publish(reply, None, encode(resp))

    async def _held(self, name: str) -> Replica:
        """This server's replica of the stream once the assignment is applied here."""
        deadline = asyncio.get_running_loop().time() + HOLD_WAIT
        while (rep := self.state.replica(name)) is None:
            if asyncio.get_running_loop().time() > deadline:
                raise ApiError.of(E.CLUSTER_NOT_AVAIL)
            await asyncio.sleep(0.01)
        return rep

    async def _undo(self, stream: Stream, assigned: bool) -> None:
        try:
            if assigned:
                await self.state.propose_meta(encode_op(RemoveStream(stream.name, self.state.account)))
            elif self.registry.get(stream.name) is stream:
                self.registry.delete(stream)
        except Exception as e:  # said; the stream is removed by hand
            log.error("restore of stream '%s': what was made could not be removed: %s", stream.name, e)
