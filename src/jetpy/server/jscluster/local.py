"""An R1 stream of a cluster: a plain local stream on the one server it is placed on, with no
Raft group (nats-server's way: a group of one would only add a log written and fsynced before
the store). It answers the cluster as a replica does (:class:`LocalStream` has the interface of
:class:`.streams.StreamReplica` the service, the API and the consumer groups use): it always
leads, its info names this server as leader with no replicas, it answers its direct gets.

Owns: the publish path of such a stream (the engine's own ingest: decide, store, PubAck once
the store is synced, as a single server), its purges, deletes and config changes applied at
once (durable before the answer, as a single server's), and the acknowledged messages of its
work-queue consumers removed at once. Must not know: the meta group, placement, Raft.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from jetpy.jetstream.api.direct import DirectGet
from jetpy.jetstream.info import stream_info
from jetpy.jetstream.models import ClusterInfo, StreamConfig, StreamInfo
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry, ingest_handler
from jetpy.jetstream.stream import DeleteEntry, PurgeEntry, Stream
from jetpy.server.jscluster.assignments import StreamAssignment
from jetpy.server.jscluster.streams import DIRECT_QUEUE, ConfigOp, DeleteOp, PurgeOp, StreamReplica
from jetpy.server.nrg import RaftGroup

__all__ = ["LocalStream", "Replica", "copies", "r1_here"]


class LocalStream:
    """This server's R1 stream of the cluster (see the module doc)."""

    group: RaftGroup | None = None  # none: see the module doc
    behind = False  # nothing to catch up with
    serving = True  # its store is all there is: consumers read it, direct gets are answered
    is_leader = True  # the one server it is on answers for it

    def __init__(self, stream: Stream, registry: StreamRegistry, bus: MessageBus, cluster: str) -> None:
        self.stream = stream
        self.registry = registry
        self.bus = bus
        self.cluster = cluster
        self.answered_create = False
        self.assigned_config = b""
        self.assigned_peers: list[str] = []
        self.traffic_account = ""
        self.consumer_count: Callable[[], int] = lambda: 0
        self.domain = ""
        self.leader_name = ""  # this server's name, its info's leader
        self.group_name = ""  # the assignment's group name (/jsz names it, as nats-server's)
        # the engine's own publish path: decided, stored, acknowledged once synced
        self.ingest = ingest_handler(stream, registry)
        self._direct = DirectGet({}, bus, self._direct_answerer)
        self._direct_subs: list[object] = []

    @property
    def current(self) -> bool:
        return True

    # -- changes the API asks for, applied at once ----------------------------------------------

    async def propose_change(self, op: PurgeOp | DeleteOp | ConfigOp) -> bytes:
        """What a replica's leader proposes, applied here at once and made durable before the
        answer (its result as :meth:`.streams.StreamReplica.propose_change` gives it)."""
        stream, registry = self.stream, self.registry
        if isinstance(op, ConfigOp):
            cfg = msgspec.json.decode(op.config, type=StreamConfig)
            if cfg != stream.config:
                registry.update(stream, cfg)
                registry.removed(stream)  # lowered limits take effect at once
                await registry.committer.sync_off_loop(stream)
            return b"1"
        if isinstance(op, PurgeOp):
            result = stream.apply_purge(PurgeEntry(op.subject, op.seq, op.keep))
        else:
            result = int(stream.apply_delete(DeleteEntry(op.seq, op.erase)))
        if result:
            registry.removed(stream)
            await registry.committer.sync_off_loop(stream)
        return b"%d" % result

    async def remove_acked(self, seqs: list[int]) -> None:
        """What a work-queue consumer acknowledged, removed (as a single server's consumer
        removes it)."""
        stream = self.stream
        if sum(stream.apply_delete(DeleteEntry(seq, False)) for seq in seqs):
            self.registry.removed(stream)
            self.registry.committer.mark_dirty(stream)

    # -- direct gets ------------------------------------------------------------------------------

    def direct_when_current(self) -> None:
        """Answer the stream's direct gets (at once: it is always current), in the replicas'
        queue group as a replicated stream's are."""
        if self._direct_subs:
            return
        name, subscribe, handle = self.stream.name, self.bus.subscribe, self._direct.handle
        self._direct_subs = [
            subscribe(f"$JS.API.DIRECT.GET.{name}", handle, DIRECT_QUEUE),
            subscribe(f"$JS.API.DIRECT.GET.{name}.>", handle, DIRECT_QUEUE),
        ]
        if self.domain:
            on_domain = self._direct.handle_domain
            self._direct_subs += [
                subscribe(f"$JS.{self.domain}.API.DIRECT.GET.{name}", on_domain, DIRECT_QUEUE),
                subscribe(f"$JS.{self.domain}.API.DIRECT.GET.{name}.>", on_domain, DIRECT_QUEUE),
            ]

    def _direct_answerer(self, name: str) -> Stream | None:
        s = self.stream
        return s if name == s.name and s.config.allow_direct else None

    def close(self) -> None:
        subs, self._direct_subs = self._direct_subs, []
        for sub in subs:
            self.bus.unsubscribe(sub)

    # -- info -------------------------------------------------------------------------------------

    def info(self, *, deleted_details: bool = False, subjects: dict[str, int] | None = None) -> StreamInfo:
        si = stream_info(self.stream, deleted_details=deleted_details, subjects=subjects)
        state = msgspec.structs.replace(si.state, consumer_count=self.consumer_count())
        return msgspec.structs.replace(si, state=state, cluster=self.cluster_info())

    def cluster_info(self) -> ClusterInfo:
        """nats-server's block for an R1 stream: the cluster and its leader, this server."""
        return ClusterInfo(name=self.cluster, leader=self.leader_name)


def copies(cfg: StreamConfig) -> bool:
    """A mirror or a stream with sources: its copies go through a Raft group even as R1 (the
    leader's copier proposes them, :mod:`.copiers`), so it is never held locally."""
    return cfg.mirror is not None or bool(cfg.sources)


def r1_here(sa: StreamAssignment, server: str, has_group: bool, has_store: bool) -> bool:
    """Whether this server holds the stream ``sa`` (its newest assignment) as a local stream:
    placed here alone, not a mirror or a stream with sources (:func:`copies`), with no group directory of it left here (a group not yet settled: its
    log goes on, see :mod:`.placements`), and, where this server was placed after
    the stream's creation, its store here already (settled after a move here); without it the
    move is still going on, and this server joins the stream's group to fetch the messages."""
    if sa.peers != [server] or has_group:
        return False
    if copies(msgspec.json.decode(sa.config, type=StreamConfig)):
        return False
    return server not in sa.joined or has_store


Replica = StreamReplica | LocalStream
"""This server's replica of an assigned stream: a Raft group's member, or an R1 stream's."""
