"""Stream backups on a cluster: ``$JS.API.STREAM.SNAPSHOT`` answered by the stream's leader.

Owns which server answers a snapshot request and what its archive holds; the chunked,
flow-controlled sending is the single server's (``jetpy.jetstream.snapshots``), as nats-server
2.15.1's leader sends it. The leader's replica is taken at the instant of the request (a
leader still fetching a snapshot's messages, or one whose lease lapsed, leaves the request
to the one that leads), with the durable consumers that have a replica on the leader's server,
each with its replicated state (what a quorum of its group applied): nats-server's leader
archives the consumers it holds, which are those placed on its server. An unknown stream is
answered 10059 by the meta leader. Must not know: the archive's bytes, how a group runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import StreamSnapshotResponse
from jetpy.jetstream.api.requests import is_empty_request
from jetpy.jetstream.api.router import Elsewhere, Route
from jetpy.jetstream.api.snapshot import SnapshotApi, snapshot_request
from jetpy.jetstream.archive import ArchiveConsumer
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.snapshots import Taken, take_with
from jetpy.server.jscluster.assignments import ConsumerAssignment
from jetpy.server.jscluster.consumers import ConsumerReplica
from jetpy.server.jscluster.local import Replica

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

    def consumer_replica(self, stream: str, name: str) -> ConsumerReplica | None: ...


def snapshot_route(state: BackupState, snapshots: SnapshotApi) -> Route[Any]:
    def snapshot(args: list[str], hdr: bytes, body: bytes) -> StreamSnapshotResponse:
        rep = state.replica(args[0]) if args else None
        if (
            rep is None
            or not rep.is_leader
            or rep.behind
            or (rep.group is not None and not rep.group.in_lease)
        ):
            if state.is_meta_leader and (not args or args[0] not in state.assignments):
                raise ApiError.of(E.STREAM_NOT_FOUND)
            raise Elsewhere
        if is_empty_request(body):
            raise ApiError.of(E.BAD_REQUEST)
        req = snapshot_request(body)
        stream = rep.stream

        def taking() -> Taken:
            consumers = [] if req.no_consumers else archived_consumers(state, stream.name)
            return take_with(stream, consumers)

        return snapshots.send(stream, req, taking)

    return Route(StreamSnapshotResponse, snapshot, 1)


def archived_consumers(state: BackupState, stream: str) -> list[ArchiveConsumer]:
    """The stream's durable consumers held on this server, with their replicated states."""
    out = []
    for name, ca in sorted((state.consumer_assignments.get(stream) or {}).items()):
        crep = state.consumer_replica(stream, name)
        if crep is None or not crep.config.durable_name:
            continue  # placed elsewhere, or ephemeral (its client's session's)
        out.append(ArchiveConsumer(name, crep.config, ca.created, crep.state()))
    return out
