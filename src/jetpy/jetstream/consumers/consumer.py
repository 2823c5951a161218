"""Consumer: one view on a stream that delivers messages, tracks acks and redelivers.

Owns a consumer's progress (next stream sequence, delivered and ack-floor sequences, the pending
acks with their redelivery deadlines, delivery counts), pull requests waiting for messages, push
delivery with flow control and idle heartbeats, and what every ack body does.

Sans-IO and clock-free: every method that depends on time takes ``now`` (ns since the epoch) and
the consumer says when it next needs attention (:meth:`next_deadline`); its host owns the
timers. Output leaves through the :class:`ConsumerHost` it is given (the manager), so the state
machine is testable by calling it directly with an invented clock. Knows the stream's store only
through the ``StreamStore`` interface.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from typing import Any, Final, Protocol

import msgspec

from jetpy.gotime import go_duration
from jetpy.jetstream.consumers.acks import Ack, AckReply, ack_prefix, ack_sequences
from jetpy.jetstream.consumers.pull import PullRequest, RequestError, parse_pull_request, status
from jetpy.jetstream.models import ConsumerConfig, ConsumerInfo, SequenceInfo, format_time, parse_time
from jetpy.jetstream.recent import RecentMessages
from jetpy.jetstream.stream import Stream
from jetpy.store.base import ConsumerState, StoredMsg
from jetpy.subjects import subject_is_subset, subject_matches

__all__ = ["FC_WINDOW", "Consumer", "ConsumerHost"]

# Push flow control: ask the client to confirm after this many bytes, and stop delivering when
# twice as many are unconfirmed (nats-server sizes this from the client's pending limits; the
# client answers at once, so a few MB in flight keeps a fast subscriber busy).
FC_WINDOW: Final = 4 * 1024 * 1024

# New messages handed to the host in one bulk delivery by a push consumer (a pull request's
# batch is its own bound): small enough that flow control stays near its window.
PUSH_BURST: Final = 256

_HB = "Idle Heartbeat"
_TOO_BIG = "Message Size Exceeds MaxBytes"


def _left(r: PullRequest) -> list[tuple[str, str]]:
    """The headers telling a requester what its request still wanted."""
    return [("Nats-Pending-Messages", str(r.batch)), ("Nats-Pending-Bytes", str(r.max_bytes))]


class ConsumerHost(Protocol):
    """What a consumer needs from its host (the consumer manager)."""

    def send(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes) -> object:
        """Deliver to subscribers of ``route``; they see ``subject`` on the MSG line."""

    def send_batch(self, route: str, msgs: list[StoredMsg], replies: list[bytes]) -> object:
        """Deliver stored messages to subscribers of ``route`` in order, each on its own subject
        with its ack reply: ``send`` for each, in one call."""

    def has_interest(self, subject: str) -> bool: ...

    def advisory(self, subject: str, body: dict[str, Any]) -> None: ...

    def acked(self, consumer: Consumer, seqs: list[int]) -> None:
        """The consumer is done with these stream sequences (retention may remove them)."""

    def state_changed(self, consumer: Consumer) -> None:
        """Durable state changed: persist it at the next commit."""


class Pending(msgspec.Struct, gc=False):  # a C-level struct: one is made per delivery
    cseq: int  # consumer sequence of the first delivery
    ts: int  # last delivery time (ns)
    deliveries: int
    deadline: int  # when it is redelivered if not acked (ns)


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
    ) -> None:
        self.stream = stream
        self.store = stream.store
        self.name = name
        self.config = config
        self.created_ns = created_ns
        self.host = host
        self.closed = False
        self.ack_none = config.ack_policy == "none"
        self.ack_all = config.ack_policy == "all"
        self.push = config.is_push
        # progress
        self.sseq = 1  # next stream sequence to look at
        self.dseq = 1  # next consumer (delivery) sequence
        self.delivered_sseq = 0  # stream sequence of the last delivery
        self.adflr = 0  # ack floor: consumer sequence
        self.asflr = 0  # ack floor: stream sequence
        self.pending: dict[int, Pending] = {}  # stream seq -> pending ack, ascending
        # redelivery deadlines (deadline, sseq, ts), stale entries skipped lazily: first deliveries
        # share one ack wait, so theirs arrive in order (a FIFO); the rest (naks with delay,
        # backoff steps, restored state) go to a heap
        self._fifo: deque[tuple[int, int, int]] = deque()
        self._timers: list[tuple[int, int, int]] = []
        self._order: deque[int] = deque()  # pending stream seqs, ascending, lazily pruned
        self.dirty = False  # state changed since the host last took a snapshot
        self.rdq: deque[int] = deque()  # stream seqs due for redelivery
        self._rdq_set: set[int] = set()
        self._lps: deque[int] | None = None  # last-per-subject start set still to deliver
        self._npending: int | None = None  # None: recount from the store
        self.waiting: deque[PullRequest] = deque()
        self.last_delivered_ts = 0
        self.last_ack_ts = 0
        self.last_activity = now
        # push
        self.active = False  # someone listens on deliver_subject
        self.inactive_since = now
        self._last_out = now  # last message or heartbeat sent to the deliver subject
        self._fc_reply = ""  # outstanding flow-control request
        self._fc_bytes = 0  # bytes delivered since the last confirmed flow control
        self._fc_id = 0
        # pacing (replay original, rate limit)
        self._not_before = 0
        self._held: StoredMsg | None = None
        self._replay_base: tuple[int, int] | None = None  # (now, msg ts) of the first delivery
        self.recent: RecentMessages | None = None  # the stream's newest messages, set by the host
        self._ack_prefix = ack_prefix(stream.name, name)
        self._ack_prefix_b = self._ack_prefix.encode()
        # plain acks (their subjects) queued by the host, applied together before anything else
        # looks at the consumer (see drain_acks); acks_at: when the first of them arrived
        self.acks_in: list[bytes] = []
        self.acks_at = 0
        self._apply_config(config)
        if state is not None:
            self._restore(state, now)
        else:
            self._select_start(now)

    # -- start position -------------------------------------------------------------------------

    def _select_start(self, now: int) -> None:
        cfg = self.config
        st = self.store.state()
        first, last = st.first_seq, st.last_seq
        policy = cfg.deliver_policy
        if policy == "all":
            self.sseq = max(first, 1)
        elif policy == "new":
            self.sseq = last + 1
        elif policy == "last":
            seq = 0
            for f in self.filters or [""]:
                m = self.store.load_last_msg(f)
                if m is not None:
                    seq = max(seq, m.seq)
            self.sseq = seq if seq else last + 1
        elif policy == "by_start_sequence":
            self.sseq = max(cfg.opt_start_seq, first, 1)
        elif policy == "by_start_time":
            self.sseq = self._seq_at_time(parse_time(cfg.opt_start_time or ""), first, last)
        elif policy == "last_per_subject":
            seqs: list[int] = []
            for f in self.filters or [">"]:
                for subj in self.store.subjects_state(f):
                    m = self.store.load_last_msg(subj)
                    if m is not None:
                        seqs.append(m.seq)
            seqs.sort()
            self._lps = deque(seqs)
            self.sseq = last + 1
        # nothing delivered yet: the floors sit just below the start
        self.asflr = self.sseq - 1 if self._lps is None else (self._lps[0] - 1 if self._lps else self.sseq - 1)
        self.delivered_sseq = self.asflr

    def _seq_at_time(self, t: int, first: int, last: int) -> int:
        """The first sequence stored at or after ``t`` (timestamps grow with sequences)."""
        lo, hi = first, last + 1
        while lo < hi:
            mid = (lo + hi) // 2
            m = self.store.load_next_msg("", mid)
            if m is None or m.ts >= t:
                hi = mid
            else:
                lo = m.seq + 1
        return max(lo, 1)

    def _restore(self, st: ConsumerState, now: int) -> None:
        self.dseq = st.delivered_consumer_seq + 1
        self.delivered_sseq = st.delivered_stream_seq
        self.sseq = st.delivered_stream_seq + 1
        self.adflr = st.ack_floor_consumer_seq
        self.asflr = st.ack_floor_stream_seq
        for sseq in sorted(st.pending):
            cseq, ts = st.pending[sseq]
            dc = st.redelivered.get(sseq, 0) + 1
            self.pending[sseq] = p = Pending(cseq, ts, dc, ts + self._ack_wait(dc))
            self._order.append(sseq)
            heapq.heappush(self._timers, (p.deadline, sseq, ts))

    def snapshot(self) -> ConsumerState:
        self.drain_acks()
        self.dirty = False
        return ConsumerState(
            delivered_consumer_seq=self.dseq - 1,
            delivered_stream_seq=self.delivered_sseq,
            ack_floor_consumer_seq=self.adflr,
            ack_floor_stream_seq=self.asflr,
            pending={s: (p.cseq, p.ts) for s, p in self.pending.items()},
            redelivered={s: p.deliveries - 1 for s, p in self.pending.items() if p.deliveries > 1},
        )

    # -- counts ---------------------------------------------------------------------------------

    def matches(self, subject: str) -> bool:
        filters = self.filters
        if not filters:
            return True
        return any(subject_matches(f, subject) for f in filters)

    def num_pending(self) -> int:
        """Messages matching the filter that have not been delivered yet."""
        n = self._npending
        if n is None:
            n = 0
            for f in self.filters or [">"]:
                n += self.store.num_pending(self.sseq, f, False)
            n += len(self._lps) if self._lps else 0
            self._npending = n
        return n

    def stream_changed(self) -> None:
        """Messages were removed from the stream (purge, delete, limits): recount lazily."""
        self._npending = None
        st = self.store.state()
        if self.sseq < st.first_seq and self._lps is None:
            self.sseq = st.first_seq
        # pending acks for messages that are gone are dropped at their redelivery

    def on_stored(self, seq: int, subject: str) -> None:
        if self._npending is not None and seq >= self.sseq and self.matches(subject):
            self._npending += 1

    def _apply_config(self, config: ConsumerConfig) -> None:
        """Values the hot paths read, derived once per config."""
        self.config = config
        self.filters = config.filters
        self._first_wait = self._ack_wait(1)
        self._headers_only = config.headers_only
        self._rate = config.rate_limit_bps
        self._sample = _sample_percent(config.sample_freq)
        self._retains = self.stream.config.retention != "limits"
        # a filter that covers every subject the stream stores reads as "all" (the store's
        # cheapest walk); otherwise the filters are used as given
        stream_subjects = self.stream.config.subjects
        covers = bool(stream_subjects) and all(
            any(subject_is_subset(s, f) for f in self.filters) for s in stream_subjects
        )
        self._read_filters = [""] if not self.filters or covers else self.filters
        # an explicit ack of one message that nothing else follows from (see drain_acks)
        self._plain_acks = not self.ack_none and not self.ack_all and not self._sample and not self._retains
        # new messages may go out in bulk (see _burst) unless something rewrites, paces or
        # merges them one by one
        self._bulk = (
            not config.headers_only
            and config.rate_limit_bps <= 0
            and config.replay_policy != "original"
            and len(self._read_filters) == 1
        )

    def update_config(self, config: ConsumerConfig) -> None:
        self._apply_config(config)
        self.stream_changed()

    def _ack_wait(self, deliveries: int) -> int:
        backoff = self.config.backoff
        if backoff:
            return backoff[min(deliveries, len(backoff)) - 1]
        return self.config.ack_wait or 30_000_000_000

    # -- delivery -------------------------------------------------------------------------------

    def _can_deliver_new(self) -> bool:
        if self.ack_none:
            return True
        limit = self.config.max_ack_pending
        return limit <= 0 or len(self.pending) < limit

    def _next_new(self) -> StoredMsg | None:
        """The next message never delivered, advancing the stream cursor past it."""
        lps = self._lps
        while lps:
            seq = lps.popleft()
            m = self.store.load_msg(seq)
            if m is not None:
                if self._npending is not None:
                    self._npending -= 1
                return m
            self._npending = None
        if lps is not None:
            self._lps = None
        filters = self._read_filters
        recent = self.recent
        if recent is not None and not filters[0]:
            m = recent.get(self.sseq)
            if m is not None:
                self.sseq = m.seq + 1
                if self._npending is not None:
                    self._npending -= 1
                return m
        if len(filters) == 1:
            m = self.store.load_next_msg(filters[0], self.sseq)
        else:
            m = None
            for f in filters:
                c = self.store.load_next_msg(f, self.sseq)
                if c is not None and (m is None or c.seq < m.seq):
                    m = c
        if m is not None:
            self.sseq = m.seq + 1
            if self._npending is not None:
                self._npending -= 1
        else:
            self._npending = 0  # caught up: a count that drifted (limits discards) is exact again
        return m

    def _next(self, now: int) -> tuple[StoredMsg, Pending | None] | None:
        """The next message to send: due redeliveries first, then new ones."""
        while self.rdq:
            seq = self.rdq[0]
            p = self.pending.get(seq)
            if p is None:
                self.rdq.popleft()
                self._rdq_set.discard(seq)
                continue
            m = self.store.load_msg(seq)
            self.rdq.popleft()
            self._rdq_set.discard(seq)
            if m is None:  # removed from the stream meanwhile: nothing left to deliver
                self._drop_pending(seq)
                continue
            return m, p
        if self._now_paced(now):
            return None
        if not self._can_deliver_new():
            return None
        m = self._held
        if m is not None:
            self._held = None
        else:
            m = self._next_new()
            if m is None:
                return None
        if self.config.replay_policy == "original":
            base = self._replay_base
            if base is None:
                self._replay_base = (now, m.ts)
            else:
                due = base[0] + (m.ts - base[1])
                if due > now:
                    self._held = m
                    self._not_before = due
                    return None
        return m, None

    def _now_paced(self, now: int) -> bool:
        return self._not_before > now

    def _deliver(self, m: StoredMsg, p: Pending | None, to: str, now: int) -> int:
        """Send one message; returns its size for byte budgets."""
        cseq = self.dseq
        self.dseq += 1
        seq = m.seq
        if p is None:
            dc = 1
            if not self.ack_none:
                deadline = now + self._first_wait
                self.pending[seq] = Pending(cseq, now, 1, deadline)
                self._order.append(seq)
                self._fifo.append((deadline, seq, now))
        else:
            p.deliveries += 1
            dc = p.deliveries
            p.ts = now
            p.deadline = now + self._ack_wait(dc)
            heapq.heappush(self._timers, (p.deadline, seq, now))
        if seq > self.delivered_sseq:
            self.delivered_sseq = seq
        if self.ack_none:
            self.adflr, self.asflr = cseq, seq
            if self._retains:
                self.host.acked(self, [seq])
        pending = self._npending
        if pending is None:
            pending = self.num_pending()
        reply = self._ack_subject(dc, seq, cseq, m.ts, pending)
        hdr, data = m.hdr, m.data
        if self._headers_only:
            base = hdr[:-2] if hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n"
            hdr = base + b"Nats-Msg-Size: %d\r\n\r\n" % len(data)
            data = b""
        self.host.send(to, m.subject, reply, data, hdr)
        self.last_delivered_ts = now
        size = len(m.subject) + len(hdr) + len(data)
        rate = self._rate
        if rate > 0:
            self._not_before = max(self._not_before, now) + size * 8 * 1_000_000_000 // rate
        self._changed()
        return size

    def _changed(self) -> None:
        """Durable state changed: the host hears it once until it takes the next snapshot."""
        if not self.dirty:
            self.dirty = True
            self.host.state_changed(self)

    def _plain_next(self, now: int) -> bool:
        """Are the next deliveries plain new messages (nothing due for redelivery, held back,
        paced, or left of a last-per-subject start)? Then :meth:`_burst` may send them."""
        return not self.rdq and self._held is None and self._lps is None and self._not_before <= now

    def _take_new(self, n: int) -> list[StoredMsg]:
        """Up to ``n`` new messages from the stream cursor on, advancing it past them: what
        ``n`` calls of :meth:`_next_new` return, read in bulk (the recent cache first)."""
        f = self._read_filters[0]
        recent = self.recent
        msgs: list[StoredMsg] = []
        if recent is not None and not f:
            msgs = recent.take(self.sseq, n)
        want = n - len(msgs)
        caught_up = False
        if want > 0:
            more = self.store.load_next_batch(f, msgs[-1].seq + 1 if msgs else self.sseq, want)
            caught_up = len(more) < want
            if msgs:
                msgs.extend(more)
            else:
                msgs = more
        if msgs:
            self.sseq = msgs[-1].seq + 1
        if self._npending is not None:
            # caught up: a count that drifted (limits discards) is exact again
            self._npending = 0 if caught_up else self._npending - len(msgs)
        return msgs

    def _burst(self, to: str, n: int, now: int) -> list[StoredMsg]:
        """Deliver up to ``n`` new messages at once, as :meth:`_deliver` would one by one: one
        bulk read, one hand-over to the host. The caller checked ``_bulk`` and
        :meth:`_plain_next`. Returns the messages sent."""
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
        cseq0 = self.dseq
        self.dseq = cseq0 + k
        left = self._npending if self._npending is not None else self.num_pending()
        top = left + k - 1  # what is still pending after the first of them
        prefix = self._ack_prefix_b
        replies = [b"%b1.%d.%d.%d.%d" % (prefix, m.seq, cseq0 + j, m.ts, top - j) for j, m in enumerate(msgs)]
        last = msgs[-1].seq
        if self.ack_none:
            self.adflr, self.asflr = self.dseq - 1, last
            if self._retains:
                self.host.acked(self, [m.seq for m in msgs])
        else:
            deadline = now + self._first_wait
            pending = self.pending
            seqs = [m.seq for m in msgs]
            for j, seq in enumerate(seqs, cseq0):
                pending[seq] = Pending(j, now, 1, deadline)
            self._order.extend(seqs)
            self._fifo.extend([(deadline, seq, now) for seq in seqs])
        if last > self.delivered_sseq:
            self.delivered_sseq = last
        self.host.send_batch(to, msgs, replies)
        self.last_delivered_ts = now
        self._changed()
        return msgs

    def pump(self, now: int) -> int:
        """Deliver what may be delivered now; returns how many messages were sent."""
        if self.closed:
            return 0
        if self.acks_in:
            self.drain_acks()
        if self.push:
            return self._pump_push(now)
        return self._pump_pull(now)

    def _pump_push(self, now: int) -> int:
        if not self.active:
            return 0
        to = self.config.deliver_subject
        fc = self.config.flow_control
        sent = 0
        bulk = self._bulk
        while True:
            if fc and self._fc_bytes >= 2 * FC_WINDOW:
                break  # stalled until the client confirms
            if bulk and self._plain_next(now):
                msgs = self._burst(to, PUSH_BURST, now)
                if msgs:
                    sent += len(msgs)
                    if fc:
                        self._fc_bytes += sum([len(m.subject) + len(m.hdr) + len(m.data) for m in msgs])
                        if not self._fc_reply and self._fc_bytes >= FC_WINDOW:
                            self._send_flow_control()
                    continue
            nxt = self._next(now)
            if nxt is None:
                break
            size = self._deliver(nxt[0], nxt[1], to, now)
            sent += 1
            if fc:
                self._fc_bytes += size
                if not self._fc_reply and self._fc_bytes >= FC_WINDOW:
                    self._send_flow_control()
        if sent:
            self._last_out = now
        return sent

    def _send_flow_control(self) -> None:
        self._fc_id += 1
        self._fc_reply = f"$JS.FC.{self.stream.name}.{self.name}.{self._fc_id}"
        self.host.send(
            self.config.deliver_subject, self.config.deliver_subject, self._fc_reply, b"",
            status(100, "FlowControl Request"),
        )

    def flow_control_reply(self, subject: str, now: int) -> None:
        """The client answered a flow-control request: what was sent before it is consumed."""
        if subject == self._fc_reply:
            self._fc_reply = ""
            self._fc_bytes = 0
            self.last_activity = now

    def _pump_pull(self, now: int) -> int:
        sent = 0
        waiting = self.waiting
        checked: set[int] = set()
        while waiting:
            req = waiting[0]
            if req.expires and req.expires <= now:
                break  # expiry is handled by tick
            if id(req) not in checked:  # once per request and pump, not per message
                if not self.host.has_interest(req.reply):
                    waiting.popleft()  # the requester is gone
                    continue
                checked.add(id(req))
            if len(waiting) == 1 and self._bulk and not req.has_max_bytes and self._plain_next(now):
                k = len(self._burst(req.reply, req.batch, now))
                if k:
                    sent += k
                    req.delivered += k
                    req.batch -= k
                    req.last_sent = now
                    if req.batch <= 0:
                        waiting.popleft()
                    continue
            nxt = self._next(now)
            if nxt is None:
                break
            m, p = nxt
            if req.has_max_bytes:
                size = self._pull_size(m, p)
                if size > req.max_bytes:
                    self._unget(m, p)
                    waiting.popleft()
                    self.host.send(req.reply, req.reply, None, b"", status(409, _TOO_BIG, _left(req)))
                    continue
                req.max_bytes -= size
            self._deliver(m, p, req.reply, now)
            sent += 1
            req.delivered += 1
            req.batch -= 1
            req.last_sent = now
            waiting.popleft()
            if req.batch > 0 and not (req.has_max_bytes and req.max_bytes <= 0):
                waiting.append(req)  # round robin over waiting requests
        # requests that asked not to wait are answered now that nothing more is available: 404
        # if they got nothing, else 408 with what is left; at max_ack_pending they keep waiting
        # for acks (nats-server does the same)
        if waiting and any(r.no_wait for r in waiting) and self._can_deliver_new():
            keep: deque[PullRequest] = deque()
            for r in waiting:
                if not r.no_wait:
                    keep.append(r)
                elif r.delivered:
                    self.host.send(r.reply, r.reply, None, b"", status(408, "Request Timeout", _left(r)))
                else:
                    self.host.send(r.reply, r.reply, None, b"", status(404, "No Messages"))
            self.waiting = keep
        return sent

    def _pull_size(self, m: StoredMsg, p: Pending | None) -> int:
        """What a delivery counts against a request's max_bytes: subject, ack reply, headers and
        payload, as nats-server counts it."""
        dc = p.deliveries + 1 if p is not None else 1
        pending = self._npending if self._npending is not None else self.num_pending()
        reply = self._ack_subject(dc, m.seq, self.dseq, m.ts, pending)
        return len(m.subject) + len(reply) + len(m.hdr) + len(m.data)

    def _ack_subject(self, dc: int, sseq: int, cseq: int, ts: int, pending: int) -> str:
        """The reply subject of one delivery (``acks`` owns the spelling)."""
        return f"{self._ack_prefix}{dc}.{sseq}.{cseq}.{ts}.{pending}"

    def _unget(self, m: StoredMsg, p: Pending | None) -> None:
        """Put back a message taken by ``_next`` but not sent."""
        if p is not None:
            self.rdq.appendleft(m.seq)
            self._rdq_set.add(m.seq)
        else:
            self._held = m

    # -- pull requests --------------------------------------------------------------------------

    def request(self, reply: str, body: bytes, now: int) -> None:
        """A ``CONSUMER.MSG.NEXT`` request (or the pull part of ``+NXT``)."""
        self.drain_acks()
        send = self.host.send
        if self.push:
            send(reply, reply, None, b"", status(409, "Consumer is push based"))
            return
        try:
            req = parse_pull_request(reply, body, now)
        except RequestError as e:
            send(reply, reply, None, b"", status(e.code, e.description))
            return
        cfg = self.config
        self.last_activity = now
        if cfg.max_batch > 0 and req.batch > cfg.max_batch:
            send(reply, reply, None, b"", status(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}"))
            return
        if cfg.max_expires > 0 and req.expires and req.expires - now > cfg.max_expires:
            send(reply, reply, None, b"", status(409, f"Exceeded MaxRequestExpires of {go_duration(cfg.max_expires)}"))
            return
        if cfg.max_bytes > 0 and req.max_bytes > cfg.max_bytes:
            send(reply, reply, None, b"", status(409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}"))
            return
        if req.no_wait:
            available = self.num_pending() + len(self._rdq_set)  # the deque may hold acked seqs
            if available == 0 and not self._has_due_redelivery(now):
                if req.expires == 0:
                    send(reply, reply, None, b"", status(404, "No Messages"))
                    return
                # with expires, nats-server waits for the expiry but answers as soon as it can
                req.no_wait = False
        if len(self.waiting) >= cfg.max_waiting > 0:
            send(reply, reply, None, b"", status(409, "Exceeded MaxWaiting"))
            return
        self.waiting.append(req)
        self.pump(now)

    def _has_due_redelivery(self, now: int) -> bool:
        head = self._timer_head()
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
                self._advise(
                    "MSG_NAKED", "nak", now,
                    consumer_seq=meta.consumer_seq, stream_seq=sseq, deliveries=meta.deliveries,
                )
                if ack.delay > 0:
                    p.deadline = now + ack.delay
                    heapq.heappush(self._timers, (p.deadline, sseq, p.ts))
                elif 0 < self.config.max_deliver <= p.deliveries:
                    # no redelivery left: given up on now, as an expiry at max_deliver is
                    self._advise("MAX_DELIVERIES", "max_deliver", now, stream_seq=sseq, deliveries=p.deliveries)
                    self._drop_pending(sseq)
                else:
                    self._queue_redelivery(sseq)
        elif kind == "wpi":
            p = self.pending.get(sseq)
            if p is not None:
                p.ts = now
                p.deadline = now + self._ack_wait(p.deliveries)
                heapq.heappush(self._timers, (p.deadline, sseq, now))
        elif kind == "term" and sseq in self.pending:
            self._ack(sseq, meta.consumer_seq, now)
            self._advise(
                "MSG_TERMINATED", "terminated", now,
                consumer_seq=meta.consumer_seq, stream_seq=sseq, deliveries=meta.deliveries,
                reason=ack.reason,
            )
        if reply:
            if kind == "next":
                self.request(reply, ack.next_request, now)
            else:
                self.host.send(reply, reply, None, b"", b"")  # the double ack's confirmation
        if pump:
            self.pump(now)

    def drain_acks(self) -> None:
        """Apply the plain acks (``+ACK`` or empty, no reply) the host queued in ``acks_in``, in
        order, as :meth:`ack` would one by one: most acks arrive in runs, and a run is applied
        in one pass (one floor update, one timestamp). Subjects that are not this consumer's
        ack subjects are ignored, as :meth:`ack`'s caller ignores them."""
        acks = self.acks_in
        if not acks:
            return
        self.acks_in = []
        now = self.acks_at
        self.last_activity = now
        pending = self.pending
        generic = not self._plain_acks or bool(self._rdq_set)
        floor_next = self.adflr + 1  # an ack of this consumer sequence moves the floor
        moved = done = False
        for subject in acks:
            seqs = ack_sequences(subject)
            if seqs is None:
                continue  # not an ack subject
            sseq, cseq = seqs
            if generic:
                self._ack(sseq, cseq, now)
                continue
            p = pending.pop(sseq, None)
            if p is not None:
                done = True
                if p.cseq == floor_next:
                    moved = True
        if done:
            if moved or not pending:
                self._advance_floor(self.adflr + 1, 0)
            self.last_ack_ts = now
            self._changed()

    def _ack(self, sseq: int, cseq: int, now: int) -> None:
        if self.ack_none:
            return
        done: list[int] = []
        if self.ack_all:
            if cseq <= self.adflr:
                return
            order, pending = self._order, self.pending
            while order and order[0] <= sseq:
                s = order.popleft()
                if pending.pop(s, None) is not None:
                    done.append(s)
            self.adflr, self.asflr = max(self.adflr, cseq), max(self.asflr, sseq)
            if not self.pending:
                self._advance_floor(cseq, sseq)
        else:
            p = self.pending.pop(sseq, None)
            if p is None:
                return
            done.append(sseq)
            if self._sample and random.random() * 100 < self._sample:
                self._metric(p, sseq, now)
            self._advance_floor(p.cseq, sseq)
        if self._rdq_set:
            self._rdq_set.difference_update(done)
        self.last_ack_ts = now
        if self._retains:
            self.host.acked(self, done)
        self._changed()

    def _advance_floor(self, cseq: int, sseq: int) -> None:
        """After removing ``sseq`` from pending: everything below the lowest pending message is
        acknowledged (pending is ordered by stream sequence); with nothing pending, everything
        up to the stream cursor is."""
        pending = self.pending
        if not pending:
            self._order.clear()
            floor_c, floor_s = self.dseq - 1, (self.sseq - 1 if self._lps is None else self.delivered_sseq)
        else:
            if cseq != self.adflr + 1:
                return  # only the message at the floor moves it (nats-server's rule)
            order = self._order
            while order[0] not in pending:
                order.popleft()
            first = order[0]
            floor_c, floor_s = pending[first].cseq - 1, first - 1
        if floor_c > self.adflr:
            self.adflr = floor_c
        if floor_s > self.asflr:
            self.asflr = floor_s

    def _drop_pending(self, sseq: int) -> None:
        p = self.pending.pop(sseq, None)
        self._rdq_set.discard(sseq)
        if p is not None:
            self._advance_floor(p.cseq, sseq)
            self._changed()

    def _queue_redelivery(self, sseq: int) -> None:
        if sseq not in self._rdq_set:
            self._rdq_set.add(sseq)
            self.rdq.append(sseq)

    # -- time -----------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When :meth:`tick` next has something to do (ns), or None."""
        cands: list[int] = []
        head = self._timer_head()
        if head is not None:
            cands.append(head)
        for r in self.waiting:
            if r.expires:
                cands.append(r.expires)
            if r.heartbeat:
                cands.append(r.last_sent + r.heartbeat)
        cfg = self.config
        if self.push and self.active and cfg.idle_heartbeat > 0:
            cands.append(self._last_out + cfg.idle_heartbeat)
        if self._not_before:
            cands.append(self._not_before)
        inactive = self._inactive_deadline()
        if inactive is not None:
            cands.append(inactive)
        return min(cands) if cands else None

    def _valid(self, entry: tuple[int, int, int]) -> bool:
        p = self.pending.get(entry[1])
        return p is not None and p.ts == entry[2] and p.deadline == entry[0]

    def _timer_head(self) -> int | None:
        """The earliest live redelivery deadline (stale entries are dropped on the way)."""
        fifo, heap = self._fifo, self._timers
        pending = self.pending
        while fifo:  # _valid(), inline: each acked delivery leaves an entry here to drop
            deadline, seq, ts = fifo[0]
            p = pending.get(seq)
            if p is not None and p.ts == ts and p.deadline == deadline:
                break
            fifo.popleft()
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        if fifo:
            return min(fifo[0][0], heap[0][0]) if heap else fifo[0][0]
        return heap[0][0] if heap else None

    def _inactive_deadline(self) -> int | None:
        limit = self.config.inactive_threshold
        if limit <= 0:
            return None
        if self.push:
            return None if self.active else self.inactive_since + limit
        if self.waiting:
            return None
        return self.last_activity + limit

    def is_inactive(self, now: int) -> bool:
        d = self._inactive_deadline()
        return d is not None and d <= now

    def tick(self, now: int) -> None:
        """Do what is due at ``now``: redeliveries, request expiries, heartbeats, pacing."""
        self.drain_acks()
        if self._not_before and self._not_before <= now:
            self._not_before = 0
        maxdc = self.config.max_deliver
        fifo, heap = self._fifo, self._timers
        while True:
            if fifo and fifo[0][0] <= now and (not heap or fifo[0][0] <= heap[0][0]):
                deadline, seq, ts = fifo.popleft()
            elif heap and heap[0][0] <= now:
                deadline, seq, ts = heapq.heappop(heap)
            else:
                break
            p = self.pending.get(seq)
            if p is None or p.ts != ts or p.deadline != deadline:
                continue
            if maxdc > 0 and p.deliveries >= maxdc:
                self._advise(
                    "MAX_DELIVERIES", "max_deliver", now, stream_seq=seq, deliveries=p.deliveries,
                )
                self._drop_pending(seq)
                continue
            self._queue_redelivery(seq)
        if self.waiting:
            self._expire_requests(now)
        cfg = self.config
        if self.push and self.active and cfg.idle_heartbeat > 0 and now - self._last_out >= cfg.idle_heartbeat:
            self._heartbeat(now)
        self.pump(now)

    def _expire_requests(self, now: int) -> None:
        keep: deque[PullRequest] = deque()
        for r in self.waiting:
            if r.expires and r.expires <= now:
                self.host.send(r.reply, r.reply, None, b"", status(408, "Request Timeout", _left(r)))
                self.last_activity = now
                continue
            if r.heartbeat and now - r.last_sent >= r.heartbeat:
                hb = [("Nats-Last-Consumer", str(self.dseq - 1)), ("Nats-Last-Stream", str(self.delivered_sseq))]
                self.host.send(r.reply, r.reply, None, b"", status(100, _HB, hb))
                r.last_sent = now
            keep.append(r)
        self.waiting = keep

    def _heartbeat(self, now: int) -> None:
        hdrs = [("Nats-Last-Consumer", str(self.dseq - 1)), ("Nats-Last-Stream", str(self.delivered_sseq))]
        if self._fc_reply and self._fc_bytes >= 2 * FC_WINDOW:
            hdrs.append(("Nats-Consumer-Stalled", self._fc_reply))
        to = self.config.deliver_subject
        self.host.send(to, to, None, b"", status(100, _HB, hdrs))
        self._last_out = now

    # -- push interest --------------------------------------------------------------------------

    def set_active(self, active: bool, now: int) -> None:
        if active == self.active:
            return
        self.active = active
        if not active:
            self.inactive_since = now
        else:
            self._last_out = now
            # a new subscriber: outstanding flow control is void (nats-server resets it too)
            self._fc_reply = ""
            self._fc_bytes = 0

    # -- teardown -------------------------------------------------------------------------------

    def close(self, deleted: bool) -> None:
        """Stop; pull requests still waiting are told why."""
        if self.closed:
            return
        self.closed = True
        if deleted:
            for r in self.waiting:
                self.host.send(r.reply, r.reply, None, b"", status(409, "Consumer Deleted"))
        self.waiting.clear()

    def has_acked(self, seq: int) -> bool:
        """Is this consumer done with stream sequence ``seq`` (for interest retention)?"""
        self.drain_acks()
        if self._lps is not None and seq in self._lps:
            return False
        if seq >= self.sseq:
            return False
        return seq not in self.pending

    # -- reporting ------------------------------------------------------------------------------

    def info(self, now_str: str) -> ConsumerInfo:
        self.drain_acks()
        cfg = self.config
        delivered = SequenceInfo(
            consumer_seq=self.dseq - 1,
            stream_seq=self.delivered_sseq,
            last_active=format_time(self.last_delivered_ts) if self.last_delivered_ts else None,
        )
        ack_floor = SequenceInfo(
            consumer_seq=self.adflr,
            stream_seq=self.asflr,
            last_active=format_time(self.last_ack_ts) if self.last_ack_ts else None,
        )
        return ConsumerInfo(
            stream_name=self.stream.name,
            name=self.name,
            created=format_time(self.created_ns),
            config=cfg,
            delivered=delivered,
            ack_floor=ack_floor,
            num_ack_pending=len(self.pending),
            num_redelivered=sum(1 for p in self.pending.values() if p.deliveries > 1),
            num_waiting=len(self.waiting),
            num_pending=self.num_pending(),
            push_bound=self.push and self.active,
            ts=now_str,
        )

    # -- advisories -----------------------------------------------------------------------------

    def _advise(self, event: str, kind: str, now: int, **fields: Any) -> None:
        body = {
            "type": f"io.nats.jetstream.advisory.v1.{kind}",
            "timestamp": format_time(now),
            "stream": self.stream.name,
            "consumer": self.name,
            **fields,
        }
        if kind == "terminated" and not fields.get("reason"):
            body.pop("reason", None)
        self.host.advisory(f"$JS.EVENT.ADVISORY.CONSUMER.{event}.{self.stream.name}.{self.name}", body)

    def _metric(self, p: Pending, sseq: int, now: int) -> None:
        self.host.advisory(
            f"$JS.EVENT.METRIC.CONSUMER.ACK.{self.stream.name}.{self.name}",
            {
                "type": "io.nats.jetstream.metric.v1.consumer_ack",
                "timestamp": format_time(now),
                "stream": self.stream.name,
                "consumer": self.name,
                "consumer_seq": p.cseq,
                "stream_seq": sseq,
                "ack_time": now - p.ts,
                "deliveries": p.deliveries,
            },
        )


def _sample_percent(freq: str) -> int:
    if not freq:
        return 0
    try:
        return max(0, min(100, int(freq.removesuffix("%"))))
    except ValueError:
        return 0

