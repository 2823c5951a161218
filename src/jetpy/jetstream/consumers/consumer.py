"""Consumer: one view on a stream that delivers messages, tracks acks and redelivers.

Owns the orchestration: where a consumer starts in its stream (deliver policies), the stream
cursor and the delivered sequences, what goes out next (due redeliveries first, then new
messages: the last-per-subject start set, the recent-message cache, the store, one by one or in
bulk), what every ack body does, its durable state (``snapshot``) and its report (``info``).
Its collaborators own the rest, each in its own module: :class:`PendingAcks` the pending acks,
ack floor, redelivery deadlines and queue; :class:`PushDelivery` the push loop, interest, flow
control and idle heartbeats; :class:`WaitingRequests` the pull requests waiting for messages;
:class:`PriorityGroups` which of them may take a message (pins, overflow, priorities);
:class:`Pause` a pause until a deadline (nothing goes out meanwhile); :class:`Pacer` replay
timing and rate limits; ``start`` the start position; ``acks`` the ack subject's spelling. The
push and pull loops ask the consumer for messages through :class:`DeliverySource`, which it
implements.

Sans-IO and clock-free: every method that depends on time takes ``now`` (ns since the epoch) and
the consumer says when it next needs attention (:meth:`next_deadline`); its host owns the
timers. Output leaves through the :class:`ConsumerHost` it is given (the manager), so the state
machine is testable by calling it directly with an invented clock. Knows the stream's store only
through the ``StreamStore`` interface.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from jetpy.jetstream.consumers.acks import Ack, AckReply, ack_prefix, ack_replies, ack_reply, ack_sequences
from jetpy.jetstream.consumers.advisories import Advisories, sample_percent
from jetpy.jetstream.consumers.delivery import PUMP_BUDGET, Rewrite, Send, SendBatch, chain, headers_only
from jetpy.jetstream.consumers.pacing import Pacer
from jetpy.jetstream.consumers.pause import Pause
from jetpy.jetstream.consumers.pending import EXPIRE_BUDGET, Pending, PendingAcks
from jetpy.jetstream.consumers.priority import PriorityGroups
from jetpy.jetstream.consumers.pull import WaitingRequests, status
from jetpy.jetstream.consumers.push import DIRECT_FC_WINDOW, FC_WINDOW, PushDelivery
from jetpy.jetstream.consumers.start import start_position
from jetpy.jetstream.models import ConsumerConfig, ConsumerInfo, SequenceInfo, format_time
from jetpy.jetstream.recent import RecentMessages
from jetpy.jetstream.stream import Stream
from jetpy.patterns import all_covered
from jetpy.store.base import ConsumerState, StoredMsg
from jetpy.subjects import subject_matches

__all__ = ["Consumer", "ConsumerHost"]


class ConsumerHost(Protocol):
    """What a consumer needs from its host (the consumer manager). ``send`` and ``send_batch``
    are read once, when the consumer is made: the host hands out the bus's own bound methods,
    so a delivery is one call into the bus."""

    @property
    def send(self) -> Send:
        """Deliver to subscribers of ``route``; they see ``subject`` on the MSG line."""

    @property
    def send_batch(self) -> SendBatch:
        """Deliver stored messages to subscribers of ``route`` in order, each on its own subject
        with its ack reply: ``send`` for each, in one call."""

    def has_interest(self, subject: str) -> bool: ...

    def advisory(self, subject: str, body: dict[str, Any]) -> None: ...

    def acked(self, consumer: Consumer, seqs: list[int]) -> None:
        """The consumer is done with these stream sequences (retention may remove them)."""

    def state_changed(self, consumer: Consumer) -> None:
        """Durable state changed: persist it at the next commit."""

    def confirm(self, consumer: Consumer, reply: str, stream_seq: int) -> None:
        """An ack of ``stream_seq`` asked for a confirmation (AckSync): send it on ``reply`` once
        the ack is as durable as the consumer's state is."""


def gated(send: Send, send_batch: SendBatch, may_send: Callable[[], bool]) -> tuple[Send, SendBatch]:
    """``send`` and ``send_batch`` that send nothing while ``may_send()`` is false: a replicated
    consumer's leader that may have been deposed unawares (paused, cut off) hands nothing out
    from its state, which a new leader may have moved past (what it meant to send is pending,
    sent again after the ack wait if it still leads)."""

    def send_one(route: str, subject: str, reply: str | None, data: bytes, hdr: bytes) -> object:
        return send(route, subject, reply, data, hdr) if may_send() else None

    def send_many(route: str, msgs: list[StoredMsg], replies: list[bytes]) -> object:
        return send_batch(route, msgs, replies) if may_send() else None

    return send_one, send_many


class Consumer:
    def __init__(
        self,
        stream: Stream,
        name: str,
        config: ConsumerConfig,
        created_ns: int,
        host: ConsumerHost,
        now: int,
        state: ConsumerState | None = None,
        start: int | None = None,
        may_send: Callable[[], bool] | None = None,
    ) -> None:
        self.stream = stream
        self.store = stream.store
        self.name = name
        self.config = config
        self.created_ns = created_ns
        self.host = host
        self._send, self._send_batch = host.send, host.send_batch
        if may_send is not None:  # a replicated consumer's leader: nothing leaves it unless it may
            self._send, self._send_batch = gated(self._send, self._send_batch, may_send)
        self.closed = False
        self.ack_none = config.ack_policy == "none"
        self.ack_all = config.ack_policy == "all"
        self.push = config.is_push
        # progress
        self.next_stream_seq = 1  # the stream cursor: next stream sequence to look at
        self.next_consumer_seq = 1  # consumer sequence of the next delivery
        self.delivered_stream_seq = 0  # stream sequence of the last delivery
        self._last_per_subject_starts: deque[int] | None = (
            None  # deliver_policy last_per_subject, still to send
        )
        self._num_pending: int | None = None  # messages not delivered yet; None: recount from the store
        self.last_delivered_ts = 0
        self.last_ack_ts = 0
        self.last_activity = now
        self.dirty = False  # state changed since the host last took a snapshot
        self.more = False  # the last pump stopped at PUMP_BUDGET: pump again on the next loop turn
        # collaborators
        self._pending_acks = PendingAcks(self._delivered_upto)
        self.pending = self._pending_acks.pending  # stream seq -> Pending (read-only here)
        self._redeliver_queue = self._pending_acks.redeliver_queue  # (read-only here)
        self._advisories = Advisories(host, stream.name, name)
        self._priority = PriorityGroups(self._advisories.send)
        self._waiting = WaitingRequests(self._send, host.has_interest, self._priority)
        self._push_delivery = PushDelivery(stream.name, name, self._send, now)
        self._pacer = Pacer()
        self._pause = Pause()
        self.recent: RecentMessages | None = None  # the stream's newest messages, set by the host
        self._ack_prefix = ack_prefix(stream.name, name)
        self._ack_prefix_b = self._ack_prefix.encode()
        # plain acks (their subjects) queued by the host, applied together before anything else
        # looks at the consumer (see drain_acks); acks_at: when the first of them arrived
        self.acks_in: list[bytes] = []
        self.acks_at = 0
        self._apply_config(config, now)
        if state is not None:
            self._restore(state)
        elif start is not None:  # its state is gone: from where its host says (restore.py)
            self._start_at(start)
        else:
            self._select_start()

    # -- start position -------------------------------------------------------------------------

    def _select_start(self) -> None:
        self.next_stream_seq, self._last_per_subject_starts = start_position(self.store, self.config)
        self._start_at(self.next_stream_seq)

    def _start_at(self, seq: int) -> None:
        """Nothing delivered yet, the stream cursor at ``seq``: the floors sit just below the start
        (below the last-per-subject starts, while some are left)."""
        self.next_stream_seq = seq
        starts = self._last_per_subject_starts
        floor = starts[0] - 1 if starts else seq - 1
        self._pending_acks.set_floor(0, floor)
        self.delivered_stream_seq = floor

    def _restore(self, st: ConsumerState) -> None:
        self.next_consumer_seq = st.delivered_consumer_seq + 1
        self.delivered_stream_seq = st.delivered_stream_seq
        self.next_stream_seq = st.delivered_stream_seq + 1
        self._pending_acks.restore(
            st.ack_floor_consumer_seq, st.ack_floor_stream_seq, st.pending, st.redelivered
        )

    def snapshot(self) -> ConsumerState:
        """The durable state now (what :meth:`_restore` takes back)."""
        return self.snapshot_later()()

    def snapshot_later(self) -> Callable[[], ConsumerState]:
        """:meth:`snapshot` in two halves: the counters and a shallow copy of the pending acks
        now, the pass over every pending ack when the returned function is called (on a worker
        thread, so a consumer with 100,000 pending acks does not hold the loop). A pending ack
        read then may have moved on (redelivered, or in progress, since): the state is still one
        that never skips a message, as every ack is at most reported later than it happened."""
        self.drain_acks()
        self.dirty = False
        acks = self._pending_acks
        pending = dict(acks.pending)
        counters = (
            self.next_consumer_seq - 1,
            self.delivered_stream_seq,
            acks.ack_floor_consumer_seq,
            acks.ack_floor_stream_seq,
        )

        def build() -> ConsumerState:
            persisted, redelivered = PendingAcks.persist(pending)
            return ConsumerState(*counters, pending=persisted, redelivered=redelivered)

        return build

    def record_changes(self) -> None:
        """From now on, remember which pending acks change (:meth:`take_changes`)."""
        self._pending_acks.journal = set()

    def take_changes(self) -> tuple[tuple[int, int, int, int], list[int], list[int]]:
        """The state as changes since the last call (a replicated consumer's leader): the
        delivered and ack floor sequences (as :meth:`snapshot`'s), the pending acks set or
        changed (flat: stream seq, consumer seq, ts, deliveries) and the stream seqs acked."""
        self.drain_acks()
        self.dirty = False
        acks = self._pending_acks
        upserts, gone = acks.take_changes()
        seqs = (self.next_consumer_seq - 1, self.delivered_stream_seq)
        return (*seqs, acks.ack_floor_consumer_seq, acks.ack_floor_stream_seq), upserts, gone

    def _delivered_upto(self) -> tuple[int, int]:
        """(consumer seq, stream seq) up to which everything is delivered: where the ack floor goes
        once nothing is pending (below the last-per-subject starts while some are left)."""
        if self._last_per_subject_starts is None:
            return self.next_consumer_seq - 1, self.next_stream_seq - 1
        return self.next_consumer_seq - 1, self.delivered_stream_seq

    # -- counts ---------------------------------------------------------------------------------

    def matches(self, subject: str) -> bool:
        filters = self.filters
        if not filters:
            return True
        return any(subject_matches(f, subject) for f in filters)

    def num_pending(self) -> int:
        """Messages matching the filter that have not been delivered yet."""
        n = self._num_pending
        if n is None:
            n = 0
            for f in self.filters or [">"]:
                n += self.store.num_pending(self.next_stream_seq, f, False)
            starts = self._last_per_subject_starts
            n += len(starts) if starts else 0
            if self._pacer.held is not None:  # taken from the stream, not sent yet
                n += 1
            self._num_pending = n
        return n

    def stream_changed(self) -> None:
        """Messages were removed from the stream (purge, delete, limits): recount lazily."""
        self._num_pending = None
        st = self.store.state()
        if self.next_stream_seq < st.first_seq and self._last_per_subject_starts is None:
            self.next_stream_seq = st.first_seq
        # pending acks for messages that are gone are dropped at their redelivery

    def on_stored(self, seq: int, subject: str) -> None:
        if self._num_pending is not None and seq >= self.next_stream_seq and self.matches(subject):
            self._num_pending += 1

    def _apply_config(self, config: ConsumerConfig, now: int) -> None:
        """Values the hot paths read, derived once per config."""
        self.config = config
        self.filters = config.filters
        self._pause.configure(config.pause_until, now)
        self._priority.configure(config.priority_policy, config.priority_groups, config.priority_timeout)
        self._pending_acks.configure(config.ack_wait, config.backoff)
        self._push_delivery.configure(
            config.deliver_subject,
            config.flow_control,
            config.idle_heartbeat,
            DIRECT_FC_WINDOW if config.direct else FC_WINDOW,
        )
        self._waiting.configure(config.max_waiting, config.max_batch, config.max_expires, config.max_bytes)
        self._pacer.rate_bps = self._rate = config.rate_limit_bps
        self._replay_original = config.replay_policy == "original"
        rewrites: list[Rewrite] = [headers_only] if config.headers_only else []
        if self._priority.pinning:
            rewrites.append(self._priority.stamp)
        self._rewrite: Rewrite | None = chain(rewrites)
        self._sample = sample_percent(config.sample_freq)
        self._retains = self.stream.config.retention != "limits"
        # a filter that covers every subject the stream stores reads as "all" (the store's
        # cheapest walk); otherwise the filters are used as given
        stream_subjects = self.stream.config.subjects
        covers = bool(stream_subjects) and all_covered(stream_subjects, self.filters)
        self._read_filters = [""] if not self.filters or covers else self.filters
        # an explicit ack of one message that nothing else follows from (see drain_acks)
        self._plain_acks = not self.ack_none and not self.ack_all and not self._sample and not self._retains
        # new messages may go out in bulk (see burst) unless something rewrites, paces, merges or
        # hands them out one by one
        self.bulk = (
            self._rewrite is None
            and config.priority_policy == "none"
            and config.rate_limit_bps <= 0
            and config.replay_policy != "original"
            and len(self._read_filters) == 1
        )

    def update_config(self, config: ConsumerConfig, now: int) -> None:
        self._apply_config(config, now)
        self.stream_changed()

    # -- what goes out next (the DeliverySource the push and pull loops use) ---------------------

    def can_deliver_new(self) -> bool:
        if self.ack_none:
            return True
        limit = self.config.max_ack_pending
        return limit <= 0 or len(self.pending) < limit

    def num_ack_pending(self) -> int:
        return len(self.pending)

    def _next_new(self) -> StoredMsg | None:
        """The next message never delivered, advancing the stream cursor past it."""
        starts = self._last_per_subject_starts
        while starts:
            seq = starts.popleft()
            m = self.store.load_msg(seq)
            if m is not None:
                if self._num_pending is not None:
                    self._num_pending -= 1
                return m
            self._num_pending = None
        if starts is not None:
            self._last_per_subject_starts = None
        filters = self._read_filters
        recent = self.recent
        if recent is not None and not filters[0]:
            m = recent.get(self.next_stream_seq)
            if m is not None:
                self.next_stream_seq = m.seq + 1
                if self._num_pending is not None:
                    self._num_pending -= 1
                return m
        if len(filters) == 1:
            m = self.store.load_next_msg(filters[0], self.next_stream_seq)
        else:
            m = None
            for f in filters:
                c = self.store.load_next_msg(f, self.next_stream_seq)
                if c is not None and (m is None or c.seq < m.seq):
                    m = c
        if m is not None:
            self.next_stream_seq = m.seq + 1
            if self._num_pending is not None:
                self._num_pending -= 1
        else:
            self._num_pending = 0  # caught up: a count that drifted (limits discards) is exact again
        return m

    def next_message(self, now: int) -> tuple[StoredMsg, Pending | None] | None:
        """The next message to send: due redeliveries first, then new ones (None with ``more``
        set: :data:`PUMP_BUDGET` redeliveries of removed messages were dropped, the rest on the
        next pump)."""
        dropped = 0
        while self._redeliver_queue:
            taken = self._pending_acks.next_redelivery()
            if taken is None:
                break
            seq, p = taken
            m = self.store.load_msg(seq)
            if m is None:  # removed from the stream meanwhile: nothing left to deliver
                self._drop(seq)
                dropped += 1
                if dropped >= PUMP_BUDGET:
                    self.more = True
                    return None
                continue
            return m, p
        pacer = self._pacer
        if pacer.blocked(now):
            return None
        if not self.can_deliver_new():
            return None
        if pacer.held is not None:
            m = pacer.take_held()
            if self._num_pending is not None:
                self._num_pending -= 1  # a held message counts as pending (see put_back)
        else:
            m = self._next_new()
        if m is None:
            return None
        if self._replay_original and pacer.hold_for_replay(m, now):
            if self._num_pending is not None:
                self._num_pending += 1
            return None
        return m, None

    def deliver(self, m: StoredMsg, p: Pending | None, to: str, now: int) -> int:
        """Send one message; returns its size for byte budgets."""
        cseq = self.next_consumer_seq
        self.next_consumer_seq = cseq + 1
        seq = m.seq
        if p is None:
            dc = 1
            if not self.ack_none:
                self._pending_acks.delivered(seq, cseq, now)
        else:
            dc = self._pending_acks.redelivered(p, seq, now)
        if seq > self.delivered_stream_seq:
            self.delivered_stream_seq = seq
        if self.ack_none:
            self._pending_acks.set_floor(cseq, seq)
            if self._retains:
                self.host.acked(self, [seq])
        pending = self._num_pending
        if pending is None:
            pending = self.num_pending()
        reply = ack_reply(self._ack_prefix, dc, seq, cseq, m.ts, pending)
        hdr, data = m.hdr, m.data
        if self._rewrite is not None:
            hdr, data = self._rewrite(hdr, data)
        self._send(to, m.subject, reply, data, hdr)
        self.last_delivered_ts = now
        size = len(m.subject) + len(hdr) + len(data)
        if self._rate > 0:
            self._pacer.sent(size, now)
        if not self.dirty:  # _changed(), once per snapshot: the call is skipped once per message
            self._changed()
        return size

    def _changed(self) -> None:
        """Durable state changed: the host hears it once until it takes the next snapshot."""
        if not self.dirty:
            self.dirty = True
            self.host.state_changed(self)

    def plain_next(self, now: int) -> bool:
        """Are the next deliveries plain new messages (nothing due for redelivery, held back,
        paced, or left of a last-per-subject start)? Then :meth:`burst` may send them."""
        pacer = self._pacer
        return (
            not self._redeliver_queue
            and pacer.held is None
            and self._last_per_subject_starts is None
            and pacer.not_before <= now
        )

    def _take_new(self, n: int) -> list[StoredMsg]:
        """Up to ``n`` new messages from the stream cursor on, advancing it past them: what
        ``n`` calls of :meth:`_next_new` return, read in bulk (the recent cache first)."""
        f = self._read_filters[0]
        recent = self.recent
        msgs: list[StoredMsg] = []
        if recent is not None and not f:
            msgs = recent.take(self.next_stream_seq, n)
        want = n - len(msgs)
        caught_up = False
        if want > 0:
            more = self.store.load_next_batch(f, msgs[-1].seq + 1 if msgs else self.next_stream_seq, want)
            caught_up = len(more) < want
            if msgs:
                msgs.extend(more)
            else:
                msgs = more
        if msgs:
            self.next_stream_seq = msgs[-1].seq + 1
        if self._num_pending is not None:
            # caught up: a count that drifted (limits discards) is exact again
            self._num_pending = 0 if caught_up else self._num_pending - len(msgs)
        return msgs

    def burst(self, to: str, n: int, now: int) -> list[StoredMsg]:
        """Deliver up to ``n`` new messages at once, as :meth:`deliver` would one by one: one
        bulk read, one hand-over to the host. The caller checked ``bulk`` and
        :meth:`plain_next`. Returns the messages sent."""
        if not self.ack_none:
            limit = self.config.max_ack_pending
            if limit > 0:
                n = min(n, limit - len(self.pending))
        if n <= 0:
            return []
        msgs = self._take_new(n)
        k = len(msgs)
        if not k:
            return msgs
        cseq0 = self.next_consumer_seq
        self.next_consumer_seq = cseq0 + k
        left = self._num_pending if self._num_pending is not None else self.num_pending()
        replies = ack_replies(self._ack_prefix_b, msgs, cseq0, left + k - 1)  # pending after the first
        last = msgs[-1].seq
        if self.ack_none:
            self._pending_acks.set_floor(cseq0 + k - 1, last)
            if self._retains:
                self.host.acked(self, [m.seq for m in msgs])
        else:
            self._pending_acks.delivered_run([m.seq for m in msgs], cseq0, now)
        if last > self.delivered_stream_seq:
            self.delivered_stream_seq = last
        self._send_batch(to, msgs, replies)
        self.last_delivered_ts = now
        self._changed()
        return msgs

    def delivery_size(self, m: StoredMsg, p: Pending | None) -> int:
        """What a delivery counts against a request's max_bytes: subject, ack reply, headers and
        payload, as nats-server counts it."""
        dc = p.deliveries + 1 if p is not None else 1
        pending = self._num_pending if self._num_pending is not None else self.num_pending()
        reply = ack_reply(self._ack_prefix, dc, m.seq, self.next_consumer_seq, m.ts, pending)
        return len(m.subject) + len(reply) + len(m.hdr) + len(m.data)

    def put_back(self, m: StoredMsg, p: Pending | None) -> None:
        """Put back a message taken by :meth:`next_message` but not sent: a new one is held as
        the next one out, and counts as pending again (as nats-server steps back its cursor)."""
        if p is not None:
            self._pending_acks.put_back(m.seq)
        else:
            self._pacer.hold(m)
            if self._num_pending is not None:
                self._num_pending += 1

    def pump(self, now: int) -> int:
        """Deliver what may be delivered now, up to :data:`PUMP_BUDGET` messages (``more`` says
        whether something was left for the next pump); returns how many were sent."""
        self.more = False
        if self.closed:
            return 0
        if self.acks_in:
            self.drain_acks()
        if self._pause.until > now:  # paused: nothing goes out; a no_wait request gets its 404
            if not self.push:
                self._waiting.end_of_stream()
            return 0
        if self.push:
            return self._push_delivery.pump(self, now)
        return self._waiting.serve(self, now)

    # -- push -----------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Does anyone listen on the deliver subject (push)?"""
        return self._push_delivery.active

    def set_active(self, active: bool, now: int) -> None:
        self._push_delivery.set_active(active, now)

    def flow_control_reply(self, subject: str, now: int) -> None:
        """The client answered a flow-control request: what was sent before it is consumed."""
        if self._push_delivery.flow_control_reply(subject):
            self.last_activity = now

    # -- pull requests --------------------------------------------------------------------------

    def request(self, reply: str, body: bytes, now: int) -> None:
        """A ``CONSUMER.MSG.NEXT`` request (or the pull part of ``+NXT``)."""
        self.drain_acks()
        if self.push:
            self._send(reply, reply, None, b"", status(409, "Consumer is push based"))
            return
        waiting = self._waiting
        req = waiting.parse(reply, body, now)
        if req is None:
            return
        self.last_activity = now
        # what a no_wait request may find: new or queued messages (the queue may hold acked
        # seqs), or a redelivery that is due
        available = (
            self.num_pending() + self._pending_acks.num_queued() + self._due(now) if req.no_wait else 0
        )
        if waiting.add(req, now, available):
            self.pump(now)

    def _due(self, now: int) -> bool:
        """Is a redelivery due at ``now``?"""
        head = self._pending_acks.next_deadline()
        return head is not None and head <= now

    # -- acks -----------------------------------------------------------------------------------

    def ack(self, meta: AckReply, ack: Ack, reply: str | None, now: int, pump: bool = True) -> None:
        """An ack body published to one of this consumer's ack subjects. ``pump=False`` leaves
        delivering what the ack made room for to the caller (the host batches it per read)."""
        self.drain_acks()
        self.last_activity = now
        sseq = meta.stream_seq
        kind = ack.kind
        if kind == "ack" or kind == "next":
            self._ack(sseq, meta.consumer_seq, now)
        elif kind == "nak":
            p = self.pending.get(sseq)
            if p is not None:
                fields = {
                    "consumer_seq": meta.consumer_seq,
                    "stream_seq": sseq,
                    "deliveries": meta.deliveries,
                }
                self._advisories.send("MSG_NAKED", "nak", now, fields)
                if ack.delay > 0:
                    self._pending_acks.redeliver_at(p, sseq, now + ack.delay)
                elif 0 < self.config.max_deliver <= p.deliveries:
                    # no redelivery left: given up on now, as an expiry at max_deliver is
                    self._give_up(sseq, p.deliveries, now)
                    self._drop(sseq)
                else:
                    self._pending_acks.queue_redelivery(sseq)
        elif kind == "wpi":
            self._pending_acks.in_progress(sseq, now)
        elif kind == "term" and sseq in self.pending:
            self._ack(sseq, meta.consumer_seq, now)
            fields = {"consumer_seq": meta.consumer_seq, "stream_seq": sseq, "deliveries": meta.deliveries}
            self._advisories.send("MSG_TERMINATED", "terminated", now, {**fields, "reason": ack.reason})
        if reply:
            if kind == "next":
                self.request(reply, ack.next_request, now)
            else:
                self.host.confirm(self, reply, sseq)  # the double ack's confirmation
        if pump:
            self.pump(now)

    def drain_acks(self) -> None:
        """Apply the plain acks (``+ACK`` or empty, no reply) the host queued in ``acks_in``, in
        order, as :meth:`ack` would one by one: most acks arrive in runs, and a run of explicit
        acks is applied in one pass (:meth:`PendingAcks.ack_run`). Subjects that are not this
        consumer's ack subjects are ignored, as :meth:`ack`'s caller ignores them."""
        acks = self.acks_in
        if not acks:
            return
        self.acks_in = []
        now = self.acks_at
        self.last_activity = now
        if self._plain_acks:
            if self._pending_acks.ack_run(acks):
                self.last_ack_ts = now
                self._changed()
            return
        for subject in acks:
            seqs = ack_sequences(subject)
            if seqs is not None:
                self._ack(seqs[0], seqs[1], now)

    def _ack(self, sseq: int, cseq: int, now: int) -> None:
        if self.ack_none:
            return
        if self.ack_all:
            done = self._pending_acks.ack_upto(sseq, cseq)
            if done is None:
                return
        else:
            p = self._pending_acks.ack_one(sseq)
            if p is None:
                return
            done = [sseq]
            if self._sample and random.random() * 100 < self._sample:
                self._advisories.ack_metric(p.consumer_seq, sseq, now - p.ts, p.deliveries, now)
        self.last_ack_ts = now
        if self._retains:
            self.host.acked(self, done)
        if not self.dirty:  # _changed(), inline as in deliver()
            self._changed()

    def _give_up(self, sseq: int, deliveries: int, now: int) -> None:
        fields = {"stream_seq": sseq, "deliveries": deliveries}
        self._advisories.send("MAX_DELIVERIES", "max_deliver", now, fields)

    def _drop(self, sseq: int) -> None:
        """Give up on pending message ``sseq`` (gone, or out of deliveries)."""
        if self._pending_acks.drop(sseq):
            self._changed()

    # -- time -----------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When :meth:`tick` next has something to do (ns), or None."""
        due = self._pending_acks.next_deadline()
        for d in (
            self._waiting.next_deadline(),
            self._push_delivery.heartbeat_deadline() if self.push else None,
            self._pacer.deadline(),
            self._inactive_deadline(),
            self._pause.deadline(),
            self._priority.deadline(),
        ):
            if d is not None and (due is None or d < due):
                due = d
        return due

    def _inactive_deadline(self) -> int | None:
        limit = self.config.inactive_threshold
        if limit <= 0:
            return None
        if self.push:
            return self._push_delivery.inactive_deadline(limit)
        if self._waiting:
            return None
        return self.last_activity + limit

    def is_inactive(self, now: int) -> bool:
        d = self._inactive_deadline()
        return d is not None and d <= now

    def tick(self, now: int) -> None:
        """Do what is due at ``now``: redeliveries, request expiries, heartbeats, pacing, the end
        of a pause, the expiry of a pin."""
        self.drain_acks()
        self._pacer.tick(now)
        if self._pause.resumed(now):
            self._advisories.send("PAUSE", "consumer_pause", now, self._pause.advisory(now))
        self._priority.expire(now)

        def give_up(seq: int, deliveries: int) -> None:
            self._give_up(seq, deliveries, now)

        if self._pending_acks.expire(now, self.config.max_deliver, give_up, EXPIRE_BUDGET):
            self._changed()
        last = self.next_consumer_seq - 1, self.delivered_stream_seq
        if self._waiting and self._waiting.expire(now, *last):
            self.last_activity = now
        if self.push and self._push_delivery.heartbeat_due(now):
            self._push_delivery.heartbeat(now, *last)
        self.pump(now)

    # -- teardown -------------------------------------------------------------------------------

    def close(self, deleted: bool, why: str = "Consumer Deleted") -> None:
        """Stop; pull requests still waiting are told ``why`` (409) if it was ``deleted``."""
        if self.closed:
            return
        self.closed = True
        self._waiting.close(deleted, why)

    @property
    def ack_floor_stream_seq(self) -> int:
        """The stream sequence at and below which everything was acknowledged (or given up on)."""
        self.drain_acks()
        return self._pending_acks.ack_floor_stream_seq

    def has_acked(self, seq: int) -> bool:
        """Is this consumer done with stream sequence ``seq`` (for interest retention)?"""
        self.drain_acks()
        starts = self._last_per_subject_starts
        if (starts is not None and seq in starts) or seq >= self.next_stream_seq:
            return False
        return seq not in self.pending

    # -- reporting ------------------------------------------------------------------------------

    def info(self, now: int) -> ConsumerInfo:
        """ConsumerInfo at ``now`` (expired and abandoned pull requests are not counted)."""
        self.drain_acks()
        if self._waiting:
            self._waiting.sweep(now)
        acks = self._pending_acks
        delivered = SequenceInfo(
            consumer_seq=self.next_consumer_seq - 1,
            stream_seq=self.delivered_stream_seq,
            last_active=format_time(self.last_delivered_ts) if self.last_delivered_ts else None,
        )
        ack_floor = SequenceInfo(
            consumer_seq=acks.ack_floor_consumer_seq,
            stream_seq=acks.ack_floor_stream_seq,
            last_active=format_time(self.last_ack_ts) if self.last_ack_ts else None,
        )
        return ConsumerInfo(
            stream_name=self.stream.name,
            name=self.name,
            created=format_time(self.created_ns),
            config=self.config,
            delivered=delivered,
            ack_floor=ack_floor,
            num_ack_pending=len(self.pending),
            num_redelivered=acks.num_redelivered(),
            num_waiting=len(self._waiting),
            num_pending=self.num_pending(),
            push_bound=self.push and self.active,
            paused=self._pause.paused(now),
            pause_remaining=self._pause.remaining(now),
            ts=format_time(now),
            priority_groups=self._priority.state(),
        )

    # -- pause and pins (CONSUMER.PAUSE, CONSUMER.UNPIN) ----------------------------------------

    def paused(self, now: int) -> bool:
        return self._pause.paused(now)

    def set_pause(self, pause_until: str | None, now: int) -> None:
        """``CONSUMER.PAUSE``: pause until ``pause_until`` (None: resume); a change is announced."""
        self.config = msgspec.structs.replace(self.config, pause_until=pause_until)
        if self._pause.configure(pause_until, now):
            self.announce_pause(now)
        self.pump(now)

    def announce_pause(self, now: int) -> None:
        """The ``consumer_pause`` advisory for the pause as it is now."""
        self._advisories.send("PAUSE", "consumer_pause", now, self._pause.advisory(now))

    def unpin(self, group: str, now: int) -> None:
        """``CONSUMER.UNPIN``: the next request without a pin gets a new one."""
        self._priority.unpin(group, now)
        self.pump(now)
