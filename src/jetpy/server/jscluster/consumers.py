"""A replicated consumer's replica on this server: its member of the consumer's Raft group, the
state every replica applies, and the consumer engine its leader runs.

Owns: the consumer's replicated state (delivered and ack floor sequences, the pending acks with
their delivery counts: what a single server writes to the consumer's file), the entries that
change it (:class:`LeadOp`, :class:`StateOp`, as msgpack) and applying them in log order, its
snapshot, and the leader's life: once elected it puts a :class:`LeadOp` with a new epoch in the
log (applied, everything committed before it is applied here too), waits until this server's
replica of the stream holds every message the state names, and runs the single server's
consumer engine (``ConsumerManager.create`` with the state, this replica as its
:class:`~jetpy.jetstream.consumers.manager.Replication`), which alone subscribes the consumer's
pull-request, ack and flow-control subjects. Losing leadership stops the engine here.

The engine's changes are proposed as one :class:`StateOp` per loop turn (the pending acks it
set or dropped, its counters: never an entry per message); an AckSync (or any ack with a reply)
is answered once the entry carrying the ack applied and every earlier one settled, so a
confirmed ack is on a quorum's disk and no leader delivers that message again. Entries of
another epoch than the last applied :class:`LeadOp`'s (a deposed leader's, forwarded late)
change nothing; a proposal that failed makes the next one carry the whole state, and until
that one applied no AckSync is answered (a change may be missing from the log). Every replica
tells its server what each applied change acknowledged, and its state says which messages the
consumer still wants (:meth:`ConsumerReplica.wants`): an interest stream's leader decides from
those (:mod:`.interest`). Must not know: the wire, the API, Raft's rules.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Container, Sequence
from typing import Any, Final, Protocol

import msgspec

from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.info import consumer_info
from jetpy.jetstream.models import ClusterInfo, ConsumerConfig, ConsumerInfo
from jetpy.jetstream.registry import new_identity
from jetpy.jetstream.stream import Stream
from jetpy.server.jscluster.meta import ConsumerAssignment
from jetpy.server.jscluster.report import cluster_block
from jetpy.server.nrg import ProposalError, RaftGroup
from jetpy.store.base import ConsumerState
from jetpy.subjects import subject_matches

__all__ = ["ConsumerReplica", "ReplicaContext", "acked_left", "state_wants", "take_config"]

log = logging.getLogger("jetpy.jetstream")

READY_POLL: Final = 0.05  # seconds between looks at the stream's replica before leading
LEAD_RETRY: Final = 0.1
SWEEP_EVERY: Final = 1.0  # seconds between a work-queue consumer's looks for acked messages left
SWEEP_MAX: Final = 1024  # messages one look asks the stream to remove
OK: Final = b"ok"
STALE: Final = b"stale"


class LeadOp(msgspec.Struct, frozen=True, array_like=True, tag="lead"):
    """A new leader's first entry: the epoch its state changes carry from now on."""

    epoch: str


class StateOp(msgspec.Struct, frozen=True, array_like=True, tag="state", gc=False):
    """The leader's changes of one loop turn: its counters, the pending acks set or changed
    (flat: stream seq, consumer seq, delivery ts, deliveries), those acked or given up on;
    ``full``: ``upserts`` is every pending ack (after a proposal that failed)."""

    epoch: str
    delivered_consumer_seq: int
    delivered_stream_seq: int
    floor_consumer_seq: int
    floor_stream_seq: int
    upserts: list[int]
    gone: list[int]
    full: bool = False


class ConsumerSnapshot(msgspec.Struct, frozen=True, array_like=True):
    epoch: str
    state: ConsumerState


_encode = msgspec.msgpack.Encoder().encode
_decode_op = msgspec.msgpack.Decoder(LeadOp | StateOp).decode
_decode_snapshot = msgspec.msgpack.Decoder(ConsumerSnapshot).decode


class Informed(Protocol):
    def info(self) -> ConsumerInfo | None: ...


class ReplicaContext(Protocol):
    """What a consumer's replica needs of its server (the clustered JetStream)."""

    @property
    def server_name(self) -> str: ...

    @property
    def manager(self) -> ConsumerManager: ...

    @property
    def cluster_name(self) -> str: ...

    @property
    def traffic_account(self) -> str:
        """The account the groups' traffic crosses (the system account's name, or "")."""
        ...

    def stream_holding(self, stream: str, seq: int) -> Stream | None:
        """This server's replica of ``stream`` once it is current and holds ``seq``."""
        ...

    def publish(self, reply: str, data: bytes) -> None: ...

    def remove_consumer(self, ca: ConsumerAssignment) -> None:
        """Have the meta group delete the consumer (an ephemeral one gone inactive)."""
        ...

    def answer_create(self, replica: Informed, reply: str) -> None: ...

    def remove_messages(self, stream: str, seqs: list[int]) -> None:
        """Have the stream's group remove these messages (a work-queue consumer acked them)."""
        ...

    def acknowledged(self, stream: str, old_floor: int, new_floor: int, gone: list[int]) -> None:
        """A state change applied here: its ack floor moved from ``old_floor`` to ``new_floor``
        and ``gone`` left its pending acks (an interest stream's leader looks at them)."""
        ...


class ConsumerReplica:
    def __init__(self, ca: ConsumerAssignment, ctx: ReplicaContext) -> None:
        self.ca = ca
        self.config = msgspec.json.decode(ca.config, type=ConsumerConfig)
        self.ctx = ctx
        self.group: RaftGroup | None = None
        self.consumer: Consumer | None = None  # the engine, while this server leads
        self.answered_create = False
        # the replicated state (applied on every replica)
        self.epoch = ""
        self.counters = (0, 0, 0, 0)  # delivered consumer/stream seq, ack floor consumer/stream seq
        self.pending: dict[int, tuple[int, int]] = {}  # stream seq -> (consumer seq, delivery ts)
        self.redelivered: dict[int, int] = {}  # stream seq -> deliveries - 1 (those above 1)
        # the leader's
        self._my_epoch = ""
        self._lead_task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        self._flush_scheduled = False
        self._confirms: list[str] = []
        self._resync = False
        self._removals: list[int] = []  # a work-queue stream's messages acked this turn
        # the leader's proposed changes in order, until settled: [done, ok, full, confirms]; an
        # AckSync is answered once every earlier change is settled and none is missing since
        # the last whole state (``_clean``)
        self._in_flight: deque[list[Any]] = deque()
        self._clean = True
        self._closed = False
        self._telling = False  # its engine stopping: the waiting requests are told why
        if ca.state is not None:  # restored from a backup: every replica starts from its state
            self._set_state(ca.state)

    # -- the state machine (every replica) ---------------------------------------------------------

    def apply(self, index: int, items: Sequence[bytes]) -> Sequence[bytes]:
        out = []
        for item in items:
            try:
                op = _decode_op(item)
            except (msgspec.DecodeError, ValueError):
                out.append(b"malformed")
                continue
            if isinstance(op, LeadOp):
                self.epoch = op.epoch
                out.append(OK)
            elif op.epoch != self.epoch:
                out.append(STALE)  # a deposed leader's, proposed before the new one's LeadOp
            else:
                self._apply_state(op)
                out.append(OK)
        return out

    def _apply_state(self, op: StateOp) -> None:
        old_floor = self.counters[3]
        self.counters = (
            op.delivered_consumer_seq,
            op.delivered_stream_seq,
            op.floor_consumer_seq,
            op.floor_stream_seq,
        )
        pending, redelivered = self.pending, self.redelivered
        if op.full:
            pending.clear()
            redelivered.clear()
        u = op.upserts
        for i in range(0, len(u), 4):
            seq, cseq, ts, deliveries = u[i], u[i + 1], u[i + 2], u[i + 3]
            pending[seq] = (cseq, ts)
            if deliveries > 1:
                redelivered[seq] = deliveries - 1
            else:
                redelivered.pop(seq, None)
        for seq in op.gone:
            pending.pop(seq, None)
            redelivered.pop(seq, None)
        self.ctx.acknowledged(self.ca.stream, old_floor, op.floor_stream_seq, op.gone)

    def wants(self, seq: int, subject: str) -> bool:
        """Whether this consumer, as its replicated state says, still wants the stream's message
        ``seq`` on ``subject`` (interest retention, :mod:`.interest`; :func:`state_wants`)."""
        _, delivered, _, floor = self.counters
        return state_wants(self.config, delivered, floor, self.pending, seq, subject)

    def state(self) -> ConsumerState:
        return ConsumerState(*self.counters, pending=dict(self.pending), redelivered=dict(self.redelivered))

    def snapshot(self) -> bytes:
        return _encode(ConsumerSnapshot(self.epoch, self.state()))

    def restore(self, data: bytes) -> None:
        if not data:
            return
        snap = _decode_snapshot(data)
        self.epoch = snap.epoch
        self._set_state(snap.state)

    def found_from(self, st: ConsumerState) -> None:
        """The state before the group's log (an R1 consumer's, whose group this server founds
        alone: its first snapshot hands it to the servers that join)."""
        self._set_state(st)

    def _set_state(self, st: ConsumerState) -> None:
        self.counters = (
            st.delivered_consumer_seq,
            st.delivered_stream_seq,
            st.ack_floor_consumer_seq,
            st.ack_floor_stream_seq,
        )
        self.pending = dict(st.pending)
        self.redelivered = dict(st.redelivered)

    # -- leadership ---------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def is_leader(self) -> bool:
        g = self.group
        return g is not None and g.is_leader

    def leader_changed(self, leading: bool) -> None:
        self._stop_engine()
        if leading and not self._closed:
            self._lead_task = asyncio.get_running_loop().create_task(
                self._lead(), name=f"consumer-lead-{self.ca.group}"
            )

    async def _lead(self) -> None:
        """Become the consumer's working leader: the epoch in the log, then the engine."""
        epoch = new_identity()
        while True:
            g = self.group
            if g is None or not g.is_leader:
                return
            try:
                if await g.propose(_encode(LeadOp(epoch))) == OK:
                    break
            except ProposalError as exc:
                log.debug("consumer '%s > %s': not leading yet: %s", self.ca.stream, self.ca.name, exc)
            await asyncio.sleep(LEAD_RETRY)
        stream = self.ctx.stream_holding(self.ca.stream, self.counters[1])
        while stream is None:  # its messages are not all here yet (a replica catching up)
            await asyncio.sleep(READY_POLL)
            if not self.is_leader:
                return
            stream = self.ctx.stream_holding(self.ca.stream, self.counters[1])
        self._my_epoch = epoch
        fresh = self.counters == (0, 0, 0, 0) and not self.pending
        self.consumer = self.ctx.manager.create(
            stream,
            self.ca.name,
            self.config,
            self.ca.created,
            None if fresh else self.state(),
            persist=False,
            replication=self,
        )
        self._lead_task = None
        if stream.config.retention == "workqueue":
            self._sweep_task = asyncio.get_running_loop().create_task(
                self._sweep(), name=f"consumer-sweep-{self.ca.group}"
            )
        if fresh:
            self._resync = True
            self.changed(self.consumer)  # where it starts (its deliver policy), in the log first
        log.info("consumer '%s > %s': leading (group %s)", self.ca.stream, self.ca.name, self.ca.group)
        if self.ca.reply and not self.answered_create:
            self.answered_create = True
            self.ctx.manager.action_advisory(self.consumer, "create")
            self.ctx.answer_create(self, self.ca.reply)

    def _stop_engine(self, why: str = "Leadership Change") -> None:
        task, self._lead_task = self._lead_task, None
        if task is not None:
            task.cancel()
        sweep, self._sweep_task = self._sweep_task, None
        if sweep is not None:
            sweep.cancel()
        c, self.consumer = self.consumer, None
        self._my_epoch = ""
        self._confirms = []  # not replicated by this leader: not confirmed
        self._in_flight.clear()
        self._clean = True
        if c is not None and not c.closed:  # its waiting pull requests are told why (409)
            self._telling = True  # past its lease, but this much it says
            try:
                self.ctx.manager.delete(c, advisory=False, forget=False, why=why)
            finally:
                self._telling = False

    def close(self, deleted: bool = False) -> None:
        """The replica stops (its consumer ``deleted``, or the server stopping)."""
        self._closed = True
        self._stop_engine("Consumer Deleted" if deleted else "Leadership Change")

    def reconfigure(self, ca: ConsumerAssignment, reply: str) -> None:
        """A config changed through the meta group: kept; the running consumer (the leader's)
        takes it now, and the change is answered on ``reply``."""
        self.config = msgspec.json.decode(ca.config, type=ConsumerConfig)
        self.ca = msgspec.structs.replace(ca, reply=self.ca.reply)
        if take_config(self.ctx.manager, self.consumer, self.config) and reply:
            self.ctx.answer_create(self, reply)

    # -- Replication: the engine's changes into the log (the leader) -----------------------------

    def changed(self, c: Consumer) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def confirm(self, c: Consumer, reply: str, stream_seq: int) -> None:
        if stream_seq > c.delivered_stream_seq:
            return  # a delivery this state does not know (a deposed leader's): not confirmed
        self._confirms.append(reply)
        self.changed(c)

    def inactive(self, c: Consumer) -> None:
        self.ctx.remove_consumer(self.ca)

    def acked(self, c: Consumer, seqs: list[int]) -> None:
        if c.stream.config.retention == "workqueue":  # (an interest stream's leader decides)
            self._removals.extend(seqs)  # removed from the stream with this turn's changes
        self.changed(c)

    async def _sweep(self) -> None:
        """The leader of a work-queue stream's consumer has the stream remove what this consumer
        acknowledged and the stream still holds: a removal is proposed when the ack is taken,
        but one can be lost (this server's stream replica not running yet after a restart, its
        proposal cut off by a kill or an election) and no other replica would propose it again.
        Every message at or below the replicated ack floor on this consumer's subjects was
        acknowledged (or terminated) unless ``max_deliver`` let it be given up on, which keeps
        it stored as on a single server, or a deliver policy other than ``all`` started it past
        messages it never had: those consumers are not swept."""
        while True:
            await asyncio.sleep(SWEEP_EVERY)
            c = self.consumer
            if c is None or c.closed:
                return
            seqs = acked_left(c.stream, self.config, self.counters[3])
            if seqs:
                log.info(
                    "consumer '%s > %s': %d acknowledged messages still stored, removed again",
                    self.ca.stream,
                    self.ca.name,
                    len(seqs),
                )
                self.ctx.remove_messages(self.ca.stream, seqs)

    def may_deliver(self) -> bool:
        """The engine hands messages out only while the group's lease holds: a leader paused or
        cut off past an election may have been deposed, and a new leader may have had acks
        confirmed for what this one still holds pending (the fault harness found those
        delivered again after their confirmed ack)."""
        g = self.group
        return self._telling or (g is not None and g.in_lease)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._removals:
            removals, self._removals = self._removals, []
            self.ctx.remove_messages(self.ca.stream, removals)
        c, g = self.consumer, self.group
        if c is None or g is None or c.closed:
            return
        counters, upserts, gone = c.take_changes()
        full = self._resync
        if full:
            self._resync = False
            upserts = []
            for seq, p in c.pending.items():
                upserts += (seq, p.consumer_seq, p.ts, p.deliveries)
            gone = []
        confirms, self._confirms = self._confirms, []
        op = StateOp(self._my_epoch, *counters, upserts, gone, full)
        entry: list[Any] = [False, False, full, confirms]
        self._in_flight.append(entry)
        try:
            fut = g.propose_nowait(_encode(op))
        except ProposalError as exc:
            entry[0] = True
            self._settle()
            self._failed(exc)
            return
        fut.add_done_callback(lambda f: self._proposed(f, entry))

    def _proposed(self, fut: asyncio.Future[list[bytes]], entry: list[Any]) -> None:
        exc = None if fut.cancelled() else fut.exception()
        entry[0] = True
        entry[1] = not fut.cancelled() and exc is None and fut.result()[0] == OK
        self._settle()
        if not entry[1]:
            self._failed(exc)

    def _settle(self) -> None:
        """Answer the AckSyncs of the settled changes at the head, in order: only those after
        which no change is missing from the log (a failed one is covered by a later whole
        state)."""
        queue, publish = self._in_flight, self.ctx.publish
        while queue and queue[0][0]:
            _, ok, full, confirms = queue.popleft()
            if not ok:
                self._clean = False
                continue
            if full:
                self._clean = True
            if self._clean:
                for reply in confirms:
                    publish(reply, b"")

    def _failed(self, exc: BaseException | None) -> None:
        """A state change that may not be in the log: the next one carries the whole state."""
        log.debug(
            "consumer '%s > %s': a state change was not replicated: %s", self.ca.stream, self.ca.name, exc
        )
        if not self.is_leader:  # deposed, or its group stopped: the next leader goes on
            self._stop_engine()
            return
        self._resync = True
        if self.consumer is not None:
            self.changed(self.consumer)

    # -- info ---------------------------------------------------------------------------------------

    def info(self) -> ConsumerInfo | None:
        """The consumer's info with its ``cluster`` block (its leader's, once the engine runs)."""
        c = self.consumer
        if c is None or c.closed:
            return None
        return msgspec.structs.replace(consumer_info(c), cluster=self.cluster_info())

    def cluster_info(self) -> ClusterInfo:
        """The consumer's ``cluster`` block as a stream's (nats-server fills them alike: an R1
        consumer's, even one whose config follows an R3 stream scaled down, is its cluster and
        leader only)."""
        g = self.group
        return cluster_block(
            self.ctx.cluster_name,
            g.status() if g is not None else None,
            g.names if g is not None else {},
            len(self.ca.peers) > 1,
            self.ctx.traffic_account,
        )

    async def step_down(self) -> None:
        g = self.group
        if g is None:
            raise ProposalError("the consumer's group is not started")
        await g.transfer_leadership()


def take_config(manager: ConsumerManager, c: Consumer | None, new: ConsumerConfig) -> bool:
    """The running consumer ``c`` takes ``new``, a config changed through the meta group (a
    change of ``pause_until`` pauses or resumes it, announced); False if it is not running."""
    if c is None or c.closed:
        return False
    old = c.config
    rest = msgspec.structs.replace(new, pause_until=old.pause_until)
    if rest != old:
        manager.update(c, rest)
    if new.pause_until != old.pause_until:  # CONSUMER.PAUSE: paused or resumed, announced
        manager.pause(c, new.pause_until, time.time_ns())
    return True


def state_wants(
    cfg: ConsumerConfig, delivered: int, floor: int, pending: Container[int], seq: int, subject: str
) -> bool:
    """Whether a consumer, as its saved state says (its delivered and ack floor stream sequences,
    its pending acks), still wants the stream's message ``seq`` on ``subject`` (interest
    retention): on its subjects, above its ack floor, and either not delivered yet or still
    pending; delivered and no longer pending is done with (acknowledged, given up on after
    ``max_deliver``, or passed over). nats-server's ``needAck`` from a stored state, and what a
    single server's consumer restored from that state does (``Consumer.has_acked`` with its
    cursor after the last delivery): any deliver policy alike. One delivering the last message
    per subject is no exception: the starts it has yet to deliver all lie above the last one it
    delivered, and a message it passed over below that is never delivered (a restarted one goes
    on after its last delivery too)."""
    filters = cfg.filter_subjects or ([cfg.filter_subject] if cfg.filter_subject else [])
    if filters and not any(subject_matches(f, subject) for f in filters):
        return False
    if seq <= floor:
        return False
    return seq > delivered or seq in pending


def acked_left(stream: Stream, config: ConsumerConfig, floor: int) -> list[int]:
    """The sequences (up to ``SWEEP_MAX``) a work-queue ``stream`` still holds at or below a
    consumer's ack ``floor`` on its subjects, when every one of them was acknowledged (see
    ``ConsumerReplica._sweep``)."""
    if stream.config.retention != "workqueue" or config.max_deliver > 0 or config.deliver_policy != "all":
        return []  # (another deliver policy's floor starts past messages it was never given)
    store = stream.store
    start = store.state().first_seq
    if start == 0 or start > floor:
        return []
    found: list[int] = []
    for subject in config.filter_subjects or [config.filter_subject or ">"]:
        seq = start
        while seq <= floor and len(found) < SWEEP_MAX:
            batch = store.load_next_batch(subject, seq, min(256, SWEEP_MAX - len(found)))
            if not batch:
                break
            for m in batch:
                if m.seq > floor:
                    break
                found.append(m.seq)
            seq = batch[-1].seq + 1
    return sorted(set(found))
