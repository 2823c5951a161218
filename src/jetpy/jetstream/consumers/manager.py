"""ConsumerManager: the host every consumer runs in. Creates, recovers and deletes consumers,
keeps them by stream, wires them to the bus (ack, pull-request and flow-control subjects, push
interest), runs their timers, applies interest and work-queue retention when they are done with
messages, keeps each stream's recent-message cache filled, and writes their durable state.

It is the registry's ``StreamEvents`` listener: new messages wake the consumers on the same loop
turn, removals make them recount.

Durable consumer state is written by its :class:`StateWriter` (``persist.py``: paced writes,
AckSync confirmations after the state covering them is on disk, clamped to what the stream has
made durable). Knows the network only through the ``MessageBus``, stores only through
``ConsumerStore``/``StreamStore``, and nothing of the API or the stream registry.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import string
import time
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from jetpy.jetstream.access import check_read, consumer_reads
from jetpy.jetstream.consumers.acks import ack_prefix, parse_ack, parse_ack_subject
from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.delivery import Send, SendBatch
from jetpy.jetstream.consumers.persist import Durability, StateWriter, clamp_state
from jetpy.jetstream.consumers.push import flow_control_prefix
from jetpy.jetstream.consumers.restore import ConsumerMeta, Offline, read_durable, restart_position
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, format_time
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.steps import Steps, paced
from jetpy.jetstream.stream import Stream
from jetpy.protocol.headers import encode_headers
from jetpy.store.base import ConsumerState, StoredMsg

__all__ = ["ClusterHooks", "ConsumerManager", "Replication", "ephemeral_name"]

log = logging.getLogger("jetpy.jetstream")

_NAME_ALPHABET = string.ascii_letters + string.digits

SWEEP_STEP = 256
"""Messages an interest sweep looks at per step (one bulk read): well under a millisecond."""
_json = msgspec.json.Encoder()


class ClusterHooks(Protocol):
    """What a consumer of a cluster leaves to the cluster (``jetpy.server.jscluster``): an
    inactive one is deleted through it, and what one of a work-queue or interest stream acked
    is removed by the stream's replicas."""

    def inactive(self, c: Consumer) -> None:
        """``c`` passed its inactive threshold: have the cluster delete it."""

    def acked(self, c: Consumer, seqs: list[int]) -> None:
        """``c`` (of a work-queue or interest stream) is done with these messages: have the
        stream remove those it may."""


class Replication(ClusterHooks, Protocol):
    """A replicated consumer's leader (``jetpy.server.jscluster``): the consumer's state goes to
    its Raft group instead of a file, and an inactive consumer is deleted through the cluster."""

    def changed(self, c: Consumer) -> None:
        """``c``'s state changed: replicate the changes (``Consumer.take_changes``)."""

    def confirm(self, c: Consumer, reply: str, stream_seq: int) -> None:
        """An AckSync: answer ``reply`` once the ack is replicated."""

    def may_deliver(self) -> bool:
        """Whether the leader may hand anything out now: it cannot have been deposed unawares
        (its group's lease holds)."""


def ephemeral_name() -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(8))


class ConsumerManager:
    def __init__(self, bus: MessageBus, durability: Durability, domain: str = "") -> None:
        self.bus = bus
        self.durability = durability
        # pull requests also come under the JetStream domain's prefix ($JS.<domain>.API...)
        self._next_prefixes = ["$JS.API.CONSUMER.MSG.NEXT."]
        if domain:
            self._next_prefixes.append(f"$JS.{domain}.API.CONSUMER.MSG.NEXT.")
        self._by_stream: dict[Stream, dict[str, Consumer]] = {}  # live streams' consumers by name
        self._subs: dict[Consumer, list[Any]] = {}
        self._watches: dict[Consumer, Any] = {}
        self._timers: dict[Consumer, tuple[int, asyncio.TimerHandle]] = {}
        self._kicked: set[Consumer] = set()
        self._kick_scheduled = False
        self.states = StateWriter(bus.send, durability)
        # durable consumers whose files could not be read back: name -> why (kept, not served)
        self._offline: dict[Stream, dict[str, str]] = {}
        self._sweeps: set[asyncio.Task[None]] = set()  # interest sweeps still running
        self._replicated: dict[Consumer, Replication] = {}  # consumers led here of a cluster
        # a cluster's consumers run here: the replicated ones and the R1 ones (``local``)
        self._clustered: dict[Consumer, ClusterHooks] = {}
        # durable consumers' files read back at start (a cluster's are its assignments' instead)
        self.recovers = True
        # On a cluster an interest stream's leader decides what goes, through the stream's log
        # (this server runs only the consumers it leads): told of each message stored instead
        # of removing one nobody here wants.
        self.interest_decided: Callable[[Stream, int], None] | None = None

    # -- ConsumerHost ---------------------------------------------------------------------------

    @property
    def send(self) -> Send:
        """The bus's own ``send``: a consumer binds it once, so each delivery is one call."""
        return self.bus.send

    @property
    def send_batch(self) -> SendBatch:
        """The bus's own ``send_batch`` (see :attr:`send`)."""
        return self.bus.send_batch

    def has_interest(self, subject: str) -> bool:
        return self.bus.has_interest(subject)

    def advisory(self, subject: str, body: dict[str, Any]) -> None:
        if not self.bus.has_interest(subject):
            return  # advisories cost nothing when nobody listens
        doc = {"type": body.pop("type"), "id": ephemeral_name() + ephemeral_name(), **body}
        self.bus.publish(subject, None, _json.encode(doc))

    def acked(self, consumer: Consumer, seqs: list[int]) -> None:
        stream = consumer.stream
        retention = stream.config.retention
        if retention == "limits" or not seqs:
            return
        r = self._clustered.get(consumer)
        if r is not None:  # the stream's replicas remove them, in the stream's log
            r.acked(consumer, seqs)
            return
        decided = self.interest_decided
        if decided is not None and retention == "interest":  # a cluster's mirror's or source's:
            for seq in seqs:  # the stream's leader decides (it does not count, as in nats-server)
                decided(stream, seq)
            return
        store = stream.store
        removed = False
        recent = stream.recent
        if retention == "workqueue":
            for seq in seqs:
                removed |= store.remove_msg(seq)
                recent.discard(seq)
        else:  # interest: gone once every consumer that wants it is done with it
            if self._offline.get(stream):
                return  # what an offline consumer wants is unknown: everything is kept
            others = [c for c in self.consumers(stream).values() if c is not consumer]
            for seq in seqs:
                if others:
                    m = store.load_msg(seq)
                    if m is None or any(c.matches(m.subject) and not c.has_acked(seq) for c in others):
                        continue
                removed |= store.remove_msg(seq)
                recent.discard(seq)
        if removed:
            self.durability.mark_dirty(stream)

    def state_changed(self, consumer: Consumer) -> None:
        r = self._replicated.get(consumer)
        if r is not None:
            r.changed(consumer)
        else:
            self.states.changed(consumer)

    def confirm(self, consumer: Consumer, reply: str, stream_seq: int) -> None:
        r = self._replicated.get(consumer)
        if r is not None:
            r.confirm(consumer, reply, stream_seq)
        else:
            self.states.confirm(consumer, reply, stream_seq)

    def committed(self) -> None:
        """The committer synced streams: AckSync confirmations waiting on them can follow."""
        self.states.committed()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self.states.start()

    async def stop(self) -> None:
        for task in list(self._sweeps):
            task.cancel()
        for c in list(self._subs):
            self._teardown(c)
        await self.states.stop()

    def create(
        self,
        stream: Stream,
        name: str,
        cfg: ConsumerConfig,
        created: int | None = None,
        state: ConsumerState | None = None,
        persist: bool = True,
        start: int | None = None,
        replication: Replication | None = None,
        local: ClusterHooks | None = None,
    ) -> Consumer:
        """A new consumer (``persist``: a durable one's files are written first: its state, then
        its metadata, so a durable with metadata always had a state file), or one recovered
        from ``state`` (or, its state lost, from stream sequence ``start``); a replicated one's
        state is its ``replication``'s, never in a file here. ``local``: a cluster's R1
        consumer (an ephemeral one too), whose state is written to its file as a single
        server's durable's, and whose inactivity and acks go to the cluster."""
        now = time.time_ns()
        may_send = replication.may_deliver if replication is not None else None
        c = Consumer(
            stream, name, cfg, now if created is None else created, self, now, state, start, may_send
        )
        c.recent = stream.recent
        if replication is not None:
            self._replicated[c] = replication
            self._clustered[c] = replication
            c.record_changes()
        elif stream.durable and (cfg.durable_name or local is not None) and not cfg.mem_storage:
            cs = stream.store.consumer_store(name)
            if persist:
                upto = self.durability.durable_upto(stream.store) or 0
                cs.update(clamp_state(c.snapshot(), upto))
                cs.write_meta(msgspec.json.encode(ConsumerMeta(cfg, c.created_ns)))
            self.states.track(c, cs)
        if local is not None:
            self._clustered[c] = local
        consumers = self._by_stream.setdefault(stream, {})
        consumers[name] = c
        stream.consumer_count = len(consumers)
        if cfg.direct:  # a mirror's or source's own: not listed, not counted in reports
            stream.direct_count += 1
        self._wire(c, now)
        return c

    def update(self, c: Consumer, cfg: ConsumerConfig) -> None:
        c.update_config(cfg, time.time_ns())
        self._write_meta(c)
        self.after(c)

    def pause(self, c: Consumer, pause_until: str | None, now: int) -> None:
        """``CONSUMER.PAUSE``: ``c`` pauses until ``pause_until`` (None: resumes), kept in its
        config (and its metadata, so a durable consumer stays paused across a restart)."""
        c.set_pause(pause_until, now)
        self._write_meta(c)
        self.after(c)

    def unpin(self, c: Consumer, group: str) -> None:
        """``CONSUMER.UNPIN``: ``group``'s pin is released."""
        c.unpin(group, time.time_ns())
        self.after(c)

    def _write_meta(self, c: Consumer) -> None:
        cs = self.states.store_of(c)
        if cs is not None:
            cs.write_meta(msgspec.json.encode(ConsumerMeta(c.config, c.created_ns)))

    def recover(self, stream: Stream) -> None:
        """Bring back the durable consumers a file stream persisted; those whose files cannot be
        read back are restarted from a stated position or kept offline (``restore.py``). Not
        on a cluster (``recovers`` False): each R1 consumer's own file is read back when its
        assignment is applied."""
        if not self.recovers:
            return
        for name in stream.store.consumer_names():
            got = read_durable(stream, name)
            if got is None:
                continue
            if isinstance(got, Offline):
                self._offline.setdefault(stream, {})[name] = got.reason
                continue
            start = restart_position(stream.store, got.config, got.created) if got.lost else None
            c = self.create(stream, name, got.config, got.created, got.state, persist=False, start=start)
            if got.lost:
                log.error(
                    "consumer '%s > %s' %s: restarting from stream sequence %d (deliver policy %s); "
                    "messages acknowledged before may be delivered again, none is skipped",
                    stream.name,
                    name,
                    got.lost,
                    c.next_stream_seq,
                    got.config.deliver_policy,
                )
            log.info("  Restored consumer '%s > %s'", stream.name, name)

    def offline(self, stream: Stream) -> dict[str, str]:
        """The stream's durable consumers that could not be read back: name -> why (read-only)."""
        return self._offline.get(stream) or {}

    def delete_offline(self, stream: Stream, name: str) -> None:
        """Delete an offline consumer's files (an operator's request: the server never does)."""
        self._offline.get(stream, {}).pop(name, None)
        stream.store.consumer_store(name).delete()
        log.warning("offline consumer '%s > %s' deleted on request", stream.name, name)
        self._action_advisory(stream.name, name, "delete")

    def delete(
        self, c: Consumer, *, advisory: bool = True, forget: bool = True, why: str = "Consumer Deleted"
    ) -> asyncio.Task[None] | None:
        """Stop and forget ``c`` (``forget``: its files too; ``why``: what its waiting pull
        requests are told). On an interest stream the messages nobody left wants are then
        removed by a sweep paced in slices (``steps``), so a stream of any size never holds the
        loop; returns the sweep's task (None: nothing to sweep)."""
        stream = c.stream
        c.close(deleted=True, why=why)
        self._teardown(c)
        self._replicated.pop(c, None)
        self._clustered.pop(c, None)
        consumers = self._by_stream.get(stream)
        if consumers is not None and consumers.get(c.name) is c:
            del consumers[c.name]
            stream.consumer_count = len(consumers)
            if c.config.direct:
                stream.direct_count -= 1
        cs = self.states.untrack(c)
        if cs is not None and forget:
            cs.delete()
        if advisory:
            self.action_advisory(c, "delete")
        if (
            forget
            and stream.config.retention == "interest"
            and stream in self._by_stream
            and self.interest_decided is None
        ):
            task = asyncio.get_running_loop().create_task(paced(self._sweep_interest(stream)))
            self._sweeps.add(task)
            task.add_done_callback(self._swept)
            return task
        return None

    def _swept(self, task: asyncio.Task[None]) -> None:
        self._sweeps.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("interest sweep failed: %s", task.exception())

    def _sweep_interest(self, stream: Stream) -> Steps[None]:
        """After an interest consumer goes: drop messages nobody left is waiting for, a batch per
        step (the stream may change between steps: every batch asks the consumers as they are
        then; it stops if the stream is deleted meanwhile)."""
        if self._offline.get(stream):
            return  # what an offline consumer wants is unknown: everything is kept
        store = stream.store
        seq = store.state().first_seq
        while stream in self._by_stream:
            batch = store.load_next_batch("", seq, SWEEP_STEP)
            if not batch:
                return
            seq = batch[-1].seq + 1
            removed = False
            consumers = self.consumers(stream).values()
            for m in batch:
                if not any(c.matches(m.subject) and not c.has_acked(m.seq) for c in consumers):
                    removed |= store.remove_msg(m.seq)
            if removed:
                self.removed(stream)
                self.durability.mark_dirty(stream)
            yield

    def consumers(self, stream: Stream) -> dict[str, Consumer]:
        """The stream's consumers by name (read-only for callers), internal ones included."""
        return self._by_stream.get(stream) or {}

    def listed(self, stream: Stream) -> dict[str, Consumer]:
        """The consumers the API lists and counts: not the ``direct`` ones of mirrors and
        sources (nats-server hides them too)."""
        cs = self._by_stream.get(stream) or {}
        if not stream.direct_count:
            return cs
        return {n: c for n, c in cs.items() if not c.config.direct}

    def get(self, stream: Stream, name: str) -> Consumer | None:
        return self.consumers(stream).get(name)

    def all(self) -> list[Consumer]:
        return [c for cs in self._by_stream.values() for c in cs.values()]

    def action_advisory(self, c: Consumer, action: str) -> None:
        self._action_advisory(c.stream.name, c.name, action)

    def _action_advisory(self, stream: str, consumer: str, action: str) -> None:
        event = "CREATED" if action == "create" else "DELETED"
        self.advisory(
            f"$JS.EVENT.ADVISORY.CONSUMER.{event}.{stream}.{consumer}",
            {
                "type": "io.nats.jetstream.advisory.v1.consumer_action",
                "timestamp": format_time(time.time_ns()),
                "stream": stream,
                "consumer": consumer,
                "action": action,
            },
        )

    # -- wiring ---------------------------------------------------------------------------------

    def _wire(self, c: Consumer, now: int) -> None:
        s, n = c.stream.name, c.name
        handles = [self.bus.subscribe(ack_prefix(s, n) + ">", self._on_ack(c))]
        if c.push:
            handles.append(self.bus.subscribe(flow_control_prefix(s, n) + ">", self._on_fc(c)))
            ds = c.config.deliver_subject
            self._watches[c] = self.bus.watch_interest(ds, lambda: self._interest(c))
            c.set_active(self._delivery_interest(c), now)
        # push consumers answer pull requests too: "409 Consumer is push based"
        on_next = self._on_next(c)
        handles.extend(self.bus.subscribe(f"{prefix}{s}.{n}", on_next) for prefix in self._next_prefixes)
        self._subs[c] = handles
        c.pump(now)
        self.after(c)

    def _teardown(self, c: Consumer) -> None:
        for h in self._subs.pop(c, []):
            self.bus.unsubscribe(h)
        w = self._watches.pop(c, None)
        if w is not None:
            self.bus.unwatch_interest(w)
        t = self._timers.pop(c, None)
        if t is not None:
            t[1].cancel()
        self._kicked.discard(c)

    def _on_ack(self, c: Consumer) -> Any:
        def handle(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            if c.closed:
                return
            if reply is None and (len(data) == hdr_len or data[hdr_len:] == b"+ACK"):
                # the plain ack, most of them: queued, and applied as a run when the consumer is
                # next looked at (its pump on this loop turn at the latest)
                acks = c.acks_in
                acks.append(subject)
                if len(acks) == 1:
                    c.acks_at = time.time_ns()
                    self._kick(c)
                return
            meta = parse_ack_subject(subject.decode())
            ack = parse_ack(data[hdr_len:])
            if meta is None or ack is None:
                return
            if ack.kind == "next" and reply and self._refused_read(c) is not None:
                reply = None  # acknowledged, but what follows is not for a caller who may not read it
            c.ack(meta, ack, reply.decode() if reply else None, time.time_ns(), pump=False)
            self._kick(c)  # deliver what the acks of this read made room for, once

        return handle

    def _on_next(self, c: Consumer) -> Any:
        def handle(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            if c.closed or not reply:
                return
            refused = self._refused_read(c)
            if refused is not None:
                self.bus.publish(
                    reply.decode(), None, b"", encode_headers([], refused.code, refused.description)
                )
                return
            c.request(reply.decode(), data[hdr_len:], time.time_ns())
            self.after(c)

        return handle

    def _refused_read(self, c: Consumer) -> ApiError | None:
        """Why the client pulling from ``c`` may not read what it delivers (jetstream.access),
        or None when it may."""
        try:
            check_read(self.bus.caller(), consumer_reads(c.stream.config, c.config))
        except ApiError as e:
            return e
        return None

    def _on_fc(self, c: Consumer) -> Any:
        def handle(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            if c.closed:
                return
            now = time.time_ns()
            c.flow_control_reply(subject.decode(), now)
            c.pump(now)
            self.after(c)

        return handle

    def _interest(self, c: Consumer) -> None:
        if c.closed:
            return
        now = time.time_ns()
        c.set_active(self._delivery_interest(c), now)
        c.pump(now)
        self.after(c)

    def _delivery_interest(self, c: Consumer) -> bool:
        """Whether a push consumer has someone to deliver to: any subscriber of its deliver
        subject or, with a ``deliver_group``, members of that queue group (as nats-server: a
        plain subscriber or another group then neither binds it nor receives its messages;
        a plain one gets copies only while the group is there)."""
        ds, group = c.config.deliver_subject, c.config.deliver_group
        return self.bus.has_queue_interest(ds, group) if group else self.bus.has_interest(ds)

    # -- StreamEvents: what happens to the streams ----------------------------------------------

    def stored(self, stream: Stream, msg: StoredMsg) -> None:
        """A new message is in the stream: the recent cache, consumers and retention follow.
        (The registry calls this only when one of them applies: keep its condition in step.)"""
        seq = msg.seq
        recent = stream.recent
        consumers = self._by_stream.get(stream)
        if msg.hdr and b"Nats-Rollup" in msg.hdr:
            recent.clear()  # the rollup removed older messages
            self.stream_changed(stream)
        recent.add(msg)
        if consumers:
            subject = msg.subject
            for c in consumers.values():
                c.on_stored(seq, subject)
                self._kick(c)
        if stream.config.retention != "interest":
            return
        decided = self.interest_decided
        if decided is not None:
            decided(stream, seq)
        elif not (
            consumers and any(c.matches(msg.subject) for c in consumers.values())
        ) and not self._offline.get(stream):
            # nobody is interested: acknowledged, then not kept (as nats-server)
            stream.store.remove_msg(seq)
            recent.discard(seq)

    def stored_many(self, stream: Stream, msgs: list[StoredMsg]) -> None:
        """New messages in the stream, in order, none of them a rollup, and the stream's
        retention not interest (what :meth:`stored` does for each, the consumers kicked once)."""
        stream.recent.extend(msgs)
        consumers = self._by_stream.get(stream)
        if consumers:
            for c in consumers.values():
                on_stored = c.on_stored
                for m in msgs:
                    on_stored(m.seq, m.subject)
                self._kick(c)

    def removed(self, stream: Stream) -> None:
        """Messages left the stream: caches and counts follow."""
        stream.recent.clear()
        self.stream_changed(stream)

    def updated(self, stream: Stream) -> None:
        now = time.time_ns()
        for c in self.consumers(stream).values():
            c.update_config(c.config, now)  # read paths derive from the stream's config; recounts too

    def deleting(self, stream: Stream) -> None:
        """The stream is being deleted: its consumers go with it (no per-consumer advisory)."""
        for c in list(self.consumers(stream).values()):
            self.delete(c, advisory=False, forget=False)
        self._by_stream.pop(stream, None)
        self._offline.pop(stream, None)

    def _kick(self, c: Consumer) -> None:
        """Pump ``c`` and re-arm its timer once, after the current read is handled."""
        self._kicked.add(c)
        if not self._kick_scheduled:
            self._kick_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump_kicked)

    def _pump_kicked(self) -> None:
        self._kick_scheduled = False
        kicked, self._kicked = self._kicked, set()
        now = time.time_ns()
        for c in kicked:
            if not c.closed:
                c.pump(now)
                self.after(c)

    def stream_changed(self, stream: Stream) -> None:
        for c in self.consumers(stream).values():
            c.stream_changed()

    # -- timers ---------------------------------------------------------------------------------

    def after(self, c: Consumer) -> None:
        """Re-arm the consumer's timer for its next deadline (and pump it again on the next loop
        turn if its last pump stopped at its budget)."""
        if c.closed:
            return
        if c.more:
            self._kick(c)
        due = c.next_deadline()
        cur = self._timers.get(c)
        if due is None:
            if cur is not None:
                cur[1].cancel()
                del self._timers[c]
            return
        if cur is not None:
            if cur[0] <= due:
                return  # the earlier timer re-arms when it fires
            cur[1].cancel()
        delay = max(0.0, (due - time.time_ns()) / 1e9)
        handle = asyncio.get_running_loop().call_later(delay, self._fire, c)
        self._timers[c] = (due, handle)

    def _fire(self, c: Consumer) -> None:
        self._timers.pop(c, None)
        if c.closed:
            return
        now = time.time_ns()
        if c.is_inactive(now):
            log.debug("consumer '%s > %s' inactive: deleted", c.stream.name, c.name)
            r = self._clustered.get(c)
            if r is not None:
                r.inactive(c)  # deleted through the cluster: its timer is not re-armed
            else:
                self.delete(c)
            return
        c.tick(now)
        self.after(c)
