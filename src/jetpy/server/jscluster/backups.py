"""Stream backups on a cluster: ``$JS.API.STREAM.SNAPSHOT`` answered by the stream's leader.

Owns which server answers a snapshot request and what its archive holds; the chunked,
flow-controlled sending is the single server's (``jetpy.jetstream.snapshots``), as nats-server
2.15.1's leader sends it. The leader's replica is taken at the instant of the request (a
leader still fetching a snapshot's messages, or one whose lease lapsed, leaves the request
to the one that leads), with every durable consumer of the stream, as nats-server 2.15.1's
leader archives them, each with its replicated state (what its group applied): this server's
replica's for a consumer placed here, its leader's (asked first, so that no consumer state is
newer than the stream taken after it) for one placed elsewhere; a consumer whose leader does
not answer in time fails the snapshot (10064) rather than leaving it out of a backup that
looks whole. An unknown stream is answered 10059 by the meta leader.
Must not know: the archive's bytes, how a group runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import StreamSnapshotRequest, StreamSnapshotResponse
from jetpy.jetstream.api.requests import is_empty_request
from jetpy.jetstream.api.router import Elsewhere, Route
from jetpy.jetstream.api.snapshot import SnapshotApi, snapshot_request
from jetpy.jetstream.archive import ArchiveConsumer
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig
from jetpy.jetstream.snapshots import Taken, take_with
from jetpy.server.jscluster.assignments import ConsumerAssignment
from jetpy.server.jscluster.local import Replica
from jetpy.server.jscluster.local_consumer import HeldConsumer
from jetpy.store.base import ConsumerState

__all__ = ["BackupState", "snapshot_route"]


class BackupState(Protocol):
    """What a snapshot asks of the account's clustered JetStream (``account.AccountScope``)."""

    @property
    def is_meta_leader(self) -> bool: ...

    @property
    def assignments(self) -> Mapping[str, Any]: ...

    @property
    def consumer_assignments(self) -> Mapping[str, Mapping[str, ConsumerAssignment]]: ...

    def replica(self, name: str) -> Replica | None: ...

    def consumer_replica(self, stream: str, name: str) -> HeldConsumer | None: ...

    async def consumer_states(self, stream: str, names: list[str]) -> dict[str, ConsumerState]:
        """The named consumers' replicated states from their leaders (those that answered)."""
        ...


def snapshot_route(state: BackupState, snapshots: SnapshotApi) -> Route[Any]:
    def snapshot(args: list[str], hdr: bytes, body: bytes) -> Any:
        rep = _leading(state, args)
        if is_empty_request(body):
            raise ApiError.of(E.BAD_REQUEST)
        req = snapshot_request(body)
        if req.no_consumers:
            return snapshots.send(rep.stream, req, lambda: take_with(rep.stream, []))
        return _with_consumers(state, snapshots, args, req)

    return Route(StreamSnapshotResponse, snapshot, 1)


def _leading(state: BackupState, args: list[str]) -> Replica:
    rep = state.replica(args[0]) if args else None
    if rep is None or not rep.is_leader or rep.behind or (rep.group is not None and not rep.group.in_lease):
        if state.is_meta_leader and (not args or args[0] not in state.assignments):
            raise ApiError.of(E.STREAM_NOT_FOUND)
        raise Elsewhere
    return rep


async def _with_consumers(
    state: BackupState, snapshots: SnapshotApi, args: list[str], req: StreamSnapshotRequest
) -> StreamSnapshotResponse:
    name = args[0]
    durable = {
        cname: ca
        for cname, ca in (state.consumer_assignments.get(name) or {}).items()
        if msgspec.json.decode(ca.config, type=ConsumerConfig).durable_name
    }
    away = sorted(c for c in durable if state.consumer_replica(name, c) is None)
    remote = await state.consumer_states(name, away)
    rep = state.replica(name)
    if rep is None or not rep.is_leader:  # deposed meanwhile
        raise ApiError.of(E.CLUSTER_NOT_AVAIL)
    missing = [c for c in away if c not in remote]
    if missing:
        raise ApiError.of(E.STREAM_SNAPSHOT, err=f"no answer from the leader of consumer '{missing[0]}'")
    stream = rep.stream

    def taking() -> Taken:
        consumers = []
        for cname, ca in sorted(durable.items()):
            crep = state.consumer_replica(name, cname)
            cs = crep.state() if crep is not None else remote.get(cname)
            if cs is None:  # placed here since it was asked of its leader: its state is its leader's
                raise ApiError.of(E.CLUSTER_NOT_AVAIL)
            cfg = msgspec.json.decode(ca.config, type=ConsumerConfig)
            consumers.append(ArchiveConsumer(cname, cfg, ca.created, cs))
        return take_with(stream, consumers)

    return snapshots.send(stream, req, taking)
