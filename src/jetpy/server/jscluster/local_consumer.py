"""An R1 consumer of a cluster: the single server's consumer on the one server it is placed on,
with no Raft group (nats-server's way: a group of one would only add a log written and fsynced
before every delivery and ack). It answers the cluster as a consumer's replica does
(:class:`LocalConsumer` has the interface of :class:`.consumers.ConsumerReplica` that the
consumer groups, the API, interest retention and backups use): it always leads, its info names
this server as leader with no replicas, a step-down changes nothing (answered with success, as
nats-server 2.15 answers it).

Owns: running the engine (``ConsumerManager.create`` with this as its ``local`` hooks: its state
written to its own file in the stream's store, as a single server's durable's, an ephemeral's
too) once this server's replica of the stream serves and holds every message its state names
(a follower of a replicated stream holds only what the stream committed); its state read back
from that file after a restart (or started from a given state: a backup's, a group's that was
scaled down to one); its inactivity and its acks handed to the cluster (the meta group deletes
it; a work-queue stream's acked messages removed by the stream, an interest stream's leader
told what it may now remove, :mod:`.interest`, from :meth:`LocalConsumer.wants`). Must not
know: the meta group's log, Raft, the wire, the API.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

import msgspec

from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.persist import clamp_state
from jetpy.jetstream.consumers.restore import ConsumerMeta, Recovered, read_durable, restart_position
from jetpy.jetstream.info import consumer_info
from jetpy.jetstream.models import ClusterInfo, ConsumerConfig, ConsumerInfo
from jetpy.jetstream.stream import Stream
from jetpy.server.jscluster.consumers import (
    ConsumerReplica,
    ReplicaContext,
    acked_left,
    state_wants,
    take_config,
)
from jetpy.server.jscluster.meta import ConsumerAssignment
from jetpy.server.nrg import RaftGroup
from jetpy.store.base import ConsumerState, StoreError

__all__ = ["HeldConsumer", "LocalConsumer", "write_state"]

log = logging.getLogger("jetpy.jetstream")

READY_POLL: Final = 0.05  # seconds between looks at the stream's replica before running
SWEEP_EVERY: Final = 1.0  # seconds between a work-queue consumer's looks for acked messages left


class LocalConsumer:
    """This server's R1 consumer of the cluster (see the module doc)."""

    group: RaftGroup | None = None  # none: see the module doc
    is_leader = True  # the one server it is on answers for it

    def __init__(
        self, ca: ConsumerAssignment, ctx: ReplicaContext, state: ConsumerState | None = None
    ) -> None:
        self.ca = ca
        self.config = msgspec.json.decode(ca.config, type=ConsumerConfig)
        self.ctx = ctx
        self.consumer: Consumer | None = None  # the engine, once running
        self.answered_create = False
        # where it starts: a given state (a group scaled down here), else its file's, else a
        # backup's (the assignment's), else its deliver policy
        self._given = state
        self._state = state or ca.state or ConsumerState()  # until the engine runs
        self._task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"consumer-r1-{self.ca.group}")

    async def _run(self) -> None:
        """Once this server's replica of the stream serves: its file read back, then the engine
        started when the replica holds every message the state names."""
        stream = self.ctx.stream_holding(self.ca.stream, 0)
        while stream is None:
            await asyncio.sleep(READY_POLL)
            stream = self.ctx.stream_holding(self.ca.stream, 0)
        state, start = self._given, None
        if state is None:
            got = await asyncio.to_thread(_read_back, stream, self.ca.name)
            if got is not None and got.lost:
                start = restart_position(stream.store, self.config, self.ca.created)
                log.error(
                    "consumer '%s > %s' %s: restarting from stream sequence %d",
                    self.ca.stream,
                    self.ca.name,
                    got.lost,
                    start,
                )
            elif got is not None:
                state = got.state
            else:
                state = self.ca.state
        if state is not None:
            self._state = state
            holding = self.ctx.stream_holding(self.ca.stream, state.delivered_stream_seq)
            while holding is None:  # its messages are not all here yet (a replica catching up)
                await asyncio.sleep(READY_POLL)
                holding = self.ctx.stream_holding(self.ca.stream, state.delivered_stream_seq)
        if self._closed:
            return
        self.consumer = self.ctx.manager.create(
            stream, self.ca.name, self.config, self.ca.created, state, persist=True, start=start, local=self
        )
        self._task = None
        self._sweep_task = asyncio.get_running_loop().create_task(
            self._tend(), name=f"consumer-tend-{self.ca.group}"
        )
        log.info("consumer '%s > %s': running here (R1, no group)", self.ca.stream, self.ca.name)
        if self.ca.reply and not self.answered_create:
            self.answered_create = True
            self.ctx.manager.action_advisory(self.consumer, "create")
            self.ctx.answer_create(self, self.ca.reply)

    def close(self, deleted: bool = False) -> None:
        """The consumer stops (``deleted``, its file too; else its state written first: the
        server stopping, or the consumer going to a group or another server)."""
        self._closed = True
        for task in (self._task, self._sweep_task):
            if task is not None:
                task.cancel()
        self._task = self._sweep_task = None
        c, self.consumer = self.consumer, None
        if c is None or c.closed:
            return
        manager = self.ctx.manager
        if not deleted:
            self._state = c.snapshot()
            cs = manager.states.store_of(c)
            if cs is not None:
                upto = manager.durability.durable_upto(c.stream.store) or 0
                try:
                    cs.update(clamp_state(self._state, upto))
                except StoreError as exc:
                    log.error("consumer '%s > %s': state not written: %s", self.ca.stream, self.ca.name, exc)
        why = "Consumer Deleted" if deleted else "Leadership Change"
        manager.delete(c, advisory=False, forget=deleted, why=why)

    def reconfigure(self, ca: ConsumerAssignment, reply: str) -> None:
        """A config changed through the meta group: the running consumer takes it now (as a
        replica's leader does), and the change is answered on ``reply``."""
        self.config = msgspec.json.decode(ca.config, type=ConsumerConfig)
        self.ca = msgspec.structs.replace(ca, reply=self.ca.reply)
        if take_config(self.ctx.manager, self.consumer, self.config) and reply:
            self.ctx.answer_create(self, reply)

    # -- ClusterHooks -----------------------------------------------------------------------------

    def inactive(self, c: Consumer) -> None:
        self.ctx.remove_consumer(self.ca)

    def acked(self, c: Consumer, seqs: list[int]) -> None:
        if c.stream.config.retention == "workqueue":
            self.ctx.remove_messages(self.ca.stream, seqs)
        else:  # interest: the stream's leader (this server: its replicas are the stream's) decides
            self.ctx.acknowledged(self.ca.stream, 0, 0, seqs)

    async def _tend(self) -> None:
        """Every :data:`SWEEP_EVERY` seconds: the stream's store synced when it holds messages
        not known to be on disk (a replica of a replicated stream stores what its group applies
        without syncing it, the group's log being its write-ahead log; the state written is
        limited to what the store has synced, so without this a restart would deliver again
        what was acknowledged since the store's last sync); and, for a work-queue stream, what
        the consumer acknowledged and the stream still holds removed again (a removal lost as
        ``ConsumerReplica._sweep`` says)."""
        durability = self.ctx.manager.durability
        while True:
            await asyncio.sleep(SWEEP_EVERY)
            c = self.consumer
            if c is None or c.closed:
                return
            stream = c.stream
            if stream.durable and (durability.durable_upto(stream.store) or 0) < c.delivered_stream_seq:
                durability.mark_dirty(stream)
            if stream.config.retention == "workqueue":
                seqs = acked_left(stream, self.config, c.ack_floor_stream_seq)
                if seqs:
                    self.ctx.remove_messages(self.ca.stream, seqs)

    # -- what the cluster asks ------------------------------------------------------------------

    def wants(self, seq: int, subject: str) -> bool:
        """Whether this consumer still wants the stream's message ``seq`` on ``subject``
        (interest retention: a single server's rule, ``Consumer.has_acked``)."""
        c = self.consumer
        if c is None or c.closed:  # not running yet: as its state says
            st = self._state
            return state_wants(
                self.config, st.delivered_stream_seq, st.ack_floor_stream_seq, st.pending, seq, subject
            )
        return c.matches(subject) and not c.has_acked(seq)

    def state(self) -> ConsumerState:
        c = self.consumer
        return c.snapshot() if c is not None and not c.closed else self._state

    def info(self) -> ConsumerInfo | None:
        c = self.consumer
        if c is None or c.closed:
            return None
        return msgspec.structs.replace(consumer_info(c), cluster=self.cluster_info())

    def cluster_info(self) -> ClusterInfo:
        """nats-server's block for an R1 consumer: the cluster and its leader, this server."""
        return ClusterInfo(name=self.ctx.cluster_name, leader=self.ctx.server_name)

    async def step_down(self) -> None:
        """No other replica to lead: nothing changes."""


def _read_back(stream: Stream, name: str) -> Recovered | None:
    """The consumer's file in the stream's store (None: none there, or unreadable: said in the
    log, and it starts as its deliver policy says)."""
    got = read_durable(stream, name)
    return got if isinstance(got, Recovered) else None


def write_state(stream: Stream, name: str, cfg: ConsumerConfig, created: int, state: ConsumerState) -> None:
    """Write a consumer's state (and metadata) to its file in the stream's store, where a
    :class:`LocalConsumer` reads it back (a group scaled down to this server: written before
    the group's files go)."""
    cs = stream.store.consumer_store(name)
    cs.update(state)
    cs.write_meta(msgspec.json.encode(ConsumerMeta(cfg, created)))


HeldConsumer = ConsumerReplica | LocalConsumer
"""This server's copy of an assigned consumer: a Raft group's member, or an R1 consumer's."""
