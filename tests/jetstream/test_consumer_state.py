"""Hypothesis state machine: the sans-IO ``Consumer`` against a small model of what it must do.

The consumer is driven directly (no server, no sleeping) on a memory-store stream, with an
invented clock and a host that records what it sends. Rules publish, pull (batch, no_wait,
expires), ack in every way (ack, nak with and without delay, in-progress, term, +NXT, double ack,
or no answer at all), advance the clock (ticking at every deadline on the way, as the engine's
timers do) and restart the consumer from its snapshot, for the three ack policies with
max_deliver, backoff and max_ack_pending.

Every delivery is checked as it happens: consumer sequences are contiguous, a new message is the
next one in the stream, a redelivery is a message that was due (ack wait / backoff / nak expired)
and never exceeds max_deliver, an acknowledged message never comes back. After every step a
waiting request with room must not coexist with something deliverable (so an unacked message is
redelivered as soon as it is due and someone asks), and ``info()`` must agree with the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from jetpy.jetstream.consumers.acks import AckReply, parse_ack, parse_ack_subject
from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.validate import check_consumer_config, check_stream_config
from jetpy.protocol.headers import parse_headers
from jetpy.store import MemoryStore, StoreConfig, StoredMsg
from jetpy.store.consumer_state import past_last_seq, state_problems

from .delivery_fakes import Sent

ACK_WAIT = 10_000  # ns: the clock is invented, only ratios matter
T0 = 1_000_000_000_000


@dataclass
class Host:
    """A ``ConsumerHost`` that records everything; every requester is listening."""

    sends: list[Sent] = field(default_factory=list)
    advisories: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    acked_seqs: list[int] = field(default_factory=list)

    def send(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes) -> None:
        self.sends.append(Sent(route, subject, reply, payload, headers))

    def send_batch(self, route: str, msgs: list[StoredMsg], replies: list[bytes]) -> None:
        for m, reply in zip(msgs, replies, strict=True):
            self.send(route, m.subject, reply.decode(), m.data, m.hdr)

    def has_interest(self, subject: str) -> bool:
        return True

    def advisory(self, subject: str, body: dict[str, Any]) -> None:
        self.advisories.append((subject, body))

    def acked(self, consumer: Consumer, seqs: list[int]) -> None:
        self.acked_seqs.extend(seqs)

    def state_changed(self, consumer: Consumer) -> None:
        pass

    def confirm(self, consumer: Consumer, reply: str, stream_seq: int) -> None:
        self.send(reply, reply, None, b"", b"")  # no state store: confirmed when applied


@dataclass
class MPending:
    cseq: int  # consumer sequence of the first delivery
    dc: int  # deliveries so far
    ts: int  # last delivery (or in-progress) time
    deadline: int


@dataclass
class MReq:
    reply: str
    batch: int  # still wanted
    expires: int  # absolute, 0 = never
    no_wait: bool
    delivered: int = 0


POLICIES = st.sampled_from(["explicit", "all", "none"])
MAX_DELIVER = st.sampled_from([-1, 1, 2, 3])
MAX_ACK_PENDING = st.sampled_from([-1, 1, 3, 6])


class ConsumerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.host = Host()
        self.n = 0  # messages published: seqs 1..n
        self.next_new = 1
        self.last_cseq = 0
        self.delivered_sseq = 0
        self.pending: dict[int, MPending] = {}
        self.due: set[int] = set()  # pending messages waiting for a pull to be redelivered
        self.acked: set[int] = set()  # every stream seq the consumer is done with
        self.floor = (0, 0)
        self.waiting: list[MReq] = []
        self.replies: list[str] = []  # every ack subject ever delivered
        self.expected_status: list[tuple[str, int, str | None]] = []  # route, status, pending msgs
        self.expected_confirms = 0
        self.expected_advisories: list[tuple[str, int]] = []
        self.inbox = 0
        self.deliveries: dict[int, int] = {}

    # -- setup ----------------------------------------------------------------------------------

    @initialize(policy=POLICIES, max_deliver=MAX_DELIVER, mac=MAX_ACK_PENDING, use_backoff=st.booleans())
    def setup(self, policy: str, max_deliver: int, mac: int, use_backoff: bool) -> None:
        scfg = check_stream_config(StreamConfig(name="S", subjects=["s"], storage="memory"))
        self.store = MemoryStore(StoreConfig("S", "memory"))
        self.stream = Stream(scfg, self.store, T0)
        backoff: list[int] = []
        if use_backoff and policy != "none":
            steps = max_deliver if max_deliver > 0 else 3
            backoff = [ACK_WAIT * (i + 1) for i in range(steps)]
        raw = ConsumerConfig(
            durable_name="D",
            ack_policy=policy,  # type: ignore[arg-type]
            ack_wait=ACK_WAIT,
            max_deliver=max_deliver,
            max_ack_pending=mac,
            backoff=backoff,
        )
        self.cfg = check_consumer_config(scfg, raw)
        self.policy = policy
        self.md = self.cfg.max_deliver
        self.mac = self.cfg.max_ack_pending
        self.c = Consumer(self.stream, "D", self.cfg, T0, self.host, self.now)
        self.stream.consumer_count = 1

    # -- model helpers --------------------------------------------------------------------------

    def ack_wait(self, dc: int) -> int:
        if self.cfg.backoff:
            return self.cfg.backoff[min(dc, len(self.cfg.backoff)) - 1]
        return self.cfg.ack_wait

    def can_new(self) -> bool:
        if self.next_new > self.n:
            return False
        return self.policy == "none" or self.mac <= 0 or len(self.pending) < self.mac

    def advance_floor(self, cseq: int) -> None:
        """After the message first delivered as ``cseq`` stopped being pending: with nothing
        pending everything delivered is done; otherwise the floor moves only when that message
        was the one at the floor, up to just below the first pending message."""
        if not self.pending:
            fc, fs = self.last_cseq, self.next_new - 1
        elif cseq == self.floor[0] + 1:
            first = min(self.pending)
            fc, fs = self.pending[first].cseq - 1, first - 1
        else:
            return
        self.floor = (max(self.floor[0], fc), max(self.floor[1], fs))

    def done(self, sseq: int) -> None:
        self.pending.pop(sseq, None)
        self.due.discard(sseq)
        self.acked.add(sseq)

    def model_ack(self, meta: AckReply) -> None:
        sseq, cseq = meta.stream_seq, meta.consumer_seq
        if self.policy == "none":
            return
        if self.policy == "all":
            if cseq <= self.floor[0]:
                return
            for s in [s for s in self.pending if s <= sseq]:
                self.done(s)
            self.floor = (max(self.floor[0], cseq), max(self.floor[1], sseq))
            if not self.pending:
                self.advance_floor(cseq)
            return
        p = self.pending.get(sseq)
        if p is not None:
            self.done(sseq)
            self.advance_floor(p.cseq)

    def drop_max_delivered(self, sseq: int) -> None:
        p = self.pending.pop(sseq)
        self.due.discard(sseq)
        self.acked.add(sseq)  # never delivered again
        self.expected_advisories.append(("MAX_DELIVERIES", sseq))
        self.advance_floor(p.cseq)

    def model_tick(self, t: int) -> None:
        for s in sorted(self.pending, key=lambda s: self.pending[s].deadline):
            p = self.pending[s]
            if p.deadline > t or s in self.due:
                continue
            if self.md > 0 and p.dc >= self.md:
                self.drop_max_delivered(s)
            else:
                self.due.add(s)
        keep = []
        for r in self.waiting:
            if r.expires and r.expires <= t:
                self.expected_status.append((r.reply, 408, str(r.batch)))
            else:
                keep.append(r)
        self.waiting = keep

    # -- driving the consumer -------------------------------------------------------------------

    def new_inbox(self) -> str:
        self.inbox += 1
        return f"_INBOX.r{self.inbox}"

    def settle(self) -> None:
        """Check what the consumer sent against the model, then the step's expectations."""
        statuses: list[tuple[str, int, str | None]] = []
        confirms = 0
        for s in self.host.sends:
            if s.reply and s.reply.startswith("$JS.ACK."):
                self.on_delivery(s)
            elif s.headers.startswith(b"NATS/1.0 "):
                h = parse_headers(s.headers)
                assert s.subject == s.route and s.payload == b""
                statuses.append((s.route, h.status, h.get("Nats-Pending-Messages")))
                if h.status == 408 and h.get("Nats-Pending-Messages") is not None:
                    assert h.get("Nats-Pending-Bytes") == "0"
            else:
                assert s.headers == b"" and s.payload == b"" and s.reply is None, s
                confirms += 1
        self.host.sends.clear()
        # no_wait requests are answered once nothing more can be delivered (404), but one with
        # expires that got nothing yet waits; at max_ack_pending they wait for acks
        blocked = self.policy != "none" and 0 < self.mac <= len(self.pending)
        keep = []
        for r in self.waiting:
            if r.no_wait and not blocked and (not r.expires or r.delivered):
                self.expected_status.append((r.reply, 404, None))
            else:
                keep.append(r)
        self.waiting = keep
        assert sorted(statuses) == sorted(self.expected_status), (statuses, self.expected_status)
        self.expected_status.clear()
        assert confirms == self.expected_confirms
        self.expected_confirms = 0
        got = [(subj.split(".")[4], body.get("stream_seq", 0)) for subj, body in self.host.advisories]
        assert sorted(got) == sorted(self.expected_advisories), (got, self.expected_advisories)
        self.host.advisories.clear()
        self.expected_advisories.clear()

    def on_delivery(self, s: Sent) -> None:
        assert s.reply is not None
        meta = parse_ack_subject(s.reply)
        assert meta is not None and meta.stream == "S" and meta.consumer == "D"
        req = next((r for r in self.waiting if r.reply == s.route and r.batch > 0), None)
        assert req is not None, f"delivery to {s.route} which is not waiting"
        sseq = meta.stream_seq
        assert meta.consumer_seq == self.last_cseq + 1, "consumer sequences are contiguous"
        assert sseq not in self.acked, f"{sseq} was acknowledged (or given up on) and came back"
        p = self.pending.get(sseq)
        if p is not None:
            assert sseq in self.due, f"{sseq} redelivered before it was due"
            assert meta.deliveries == p.dc + 1
            assert self.md <= 0 or meta.deliveries <= self.md, "max_deliver exceeded"
            p.dc += 1
            p.ts = self.now
            p.deadline = self.now + self.ack_wait(p.dc)
            self.due.discard(sseq)
        else:
            assert sseq == self.next_new, (sseq, self.next_new)
            assert self.can_new(), "max_ack_pending exceeded"
            assert meta.deliveries == 1
            self.next_new += 1
            if self.policy == "none":
                self.acked.add(sseq)
                self.floor = (meta.consumer_seq, sseq)
            else:
                self.pending[sseq] = MPending(meta.consumer_seq, 1, self.now, self.now + self.ack_wait(1))
        self.deliveries[sseq] = self.deliveries.get(sseq, 0) + 1
        self.last_cseq = meta.consumer_seq
        self.delivered_sseq = max(self.delivered_sseq, sseq)
        assert meta.pending == self.n - self.next_new + 1, "num_pending token"
        assert s.subject == "s"
        req.batch -= 1
        req.delivered += 1
        if req.batch == 0:
            self.waiting.remove(req)
        self.replies.append(s.reply)

    # -- rules ----------------------------------------------------------------------------------

    @rule(count=st.integers(1, 4))
    def publish(self, count: int) -> None:
        for _ in range(count):
            seq, _ts = self.store.store_msg("s", b"", b"x", self.now)
            self.c.on_stored(seq, "s")
            self.n = seq
        self.c.pump(self.now)
        self.settle()

    @rule(batch=st.integers(1, 5), no_wait=st.booleans(), expires=st.sampled_from([0, 0, 3_000, 25_000]))
    def pull(self, batch: int, no_wait: bool, expires: int) -> None:
        reply = self.new_inbox()
        body: dict[str, Any] = {"batch": batch}
        if no_wait:
            body["no_wait"] = True
        if expires:
            body["expires"] = expires
        available = (self.n - self.next_new + 1) + len(self.due)
        if no_wait and available == 0 and not expires:
            self.expected_status.append((reply, 404, None))
        elif no_wait and available and available < sum(r.batch for r in self.waiting):
            self.expected_status.append((reply, 408, None))  # Requests Pending: others wait for it all
        else:
            self.waiting.append(MReq(reply, batch, self.now + expires if expires else 0, no_wait))
        self.c.request(reply, msgspec.json.encode(body), self.now)
        self.settle()

    @precondition(lambda self: bool(self.replies))
    @rule(
        data=st.data(),
        kind=st.sampled_from(["ack", "ack", "nak", "nak_delay", "wpi", "term", "next", "ack_sync"]),
    )
    def answer(self, data: st.DataObject, kind: str) -> None:
        subject = data.draw(st.sampled_from(self.replies[-12:]))
        meta = parse_ack_subject(subject)
        assert meta is not None
        sseq = meta.stream_seq
        reply: str | None = None
        body = {
            "ack": b"+ACK",
            "ack_sync": b"+ACK",
            "nak": b"-NAK",
            "wpi": b"+WPI",
            "term": b"+TERM why",
            "next": b"+NXT",
        }.get(kind, b"")
        delay = 0
        if kind == "nak_delay":
            delay = data.draw(st.sampled_from([1_000, 40_000]))
            body = b'-NAK {"delay": %d}' % delay
        ack = parse_ack(body)
        assert ack is not None
        # the model first
        p = self.pending.get(sseq)
        if kind in ("ack", "ack_sync", "next"):
            self.model_ack(meta)
        elif kind in ("nak", "nak_delay") and p is not None:
            self.expected_advisories.append(("MSG_NAKED", sseq))
            if delay:
                p.deadline = self.now + delay
            elif self.md > 0 and p.dc >= self.md:
                self.drop_max_delivered(sseq)
            else:
                self.due.add(sseq)
        elif kind == "wpi" and p is not None:
            p.ts = self.now
            p.deadline = self.now + self.ack_wait(p.dc)
        elif kind == "term" and p is not None:
            self.expected_advisories.append(("MSG_TERMINATED", sseq))
            self.model_ack(meta)
        if kind == "next":
            reply = self.new_inbox()
            self.waiting.append(MReq(reply, 1, 0, False))
        elif kind == "ack_sync":
            reply = self.new_inbox()
            self.expected_confirms = 1
        self.c.ack(meta, ack, reply, self.now)
        self.settle()

    @rule(dt=st.sampled_from([1, 999, 5_000, 10_000, 25_000, 100_000]))
    def advance(self, dt: int) -> None:
        target = self.now + dt
        while True:
            d = self.c.next_deadline()
            if d is None or d > target:
                break
            self.tick(max(d, self.now))
        self.tick(target)

    def tick(self, t: int) -> None:
        self.now = t
        self.model_tick(t)
        self.c.tick(t)
        self.settle()

    @rule()
    def restart(self) -> None:
        """The consumer comes back from its durable state (what a restart does)."""
        state = self.c.snapshot()
        self.c.close(deleted=False)
        self.c = Consumer(self.stream, "D", self.cfg, T0, self.host, self.now, state)
        self.stream.consumer_count = 1
        assert self.c.snapshot() == state
        self.waiting.clear()
        self.due.clear()
        for p in self.pending.values():
            p.deadline = p.ts + self.ack_wait(p.dc)
        self.tick(self.now)  # the host arms the timer at once: what expired meanwhile is due

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def nothing_left_undelivered(self) -> None:
        if not hasattr(self, "c"):
            return
        if any(r.batch > 0 for r in self.waiting):
            assert not self.due, f"due for redelivery but not sent: {sorted(self.due)}"
            assert not self.can_new(), "a new message is deliverable but not sent"

    @invariant()
    def info_agrees(self) -> None:
        if not hasattr(self, "c"):
            return
        info = self.c.info(self.now)
        assert info.delivered.consumer_seq == self.last_cseq
        assert info.delivered.stream_seq == self.delivered_sseq
        assert info.num_ack_pending == len(self.pending)
        assert info.num_redelivered == sum(1 for p in self.pending.values() if p.dc > 1)
        assert info.num_pending == self.n - self.next_new + 1
        assert info.num_waiting == len(self.waiting)
        floor = (info.ack_floor.consumer_seq, info.ack_floor.stream_seq)
        assert floor == self.floor, (floor, self.floor)
        assert all(s > floor[1] for s in self.pending), "pending at or below the ack floor"
        assert all(s in self.acked for s in range(1, floor[1] + 1)), "unacked message below the ack floor"
        if self.policy != "none" and self.mac > 0:
            assert len(self.pending) <= self.mac
        if self.md > 0:
            assert all(v <= self.md for v in self.deliveries.values())

    @invariant()
    def ack_floor_never_goes_back(self) -> None:
        if not hasattr(self, "c"):
            return
        prev = getattr(self, "_prev_floor", (0, 0))
        assert self.floor[0] >= prev[0] and self.floor[1] >= prev[1]
        self._prev_floor = self.floor

    @invariant()
    def restore_gives_the_same_info(self) -> None:
        if not hasattr(self, "c"):
            return
        state = self.c.snapshot()
        # what recovery checks a state file against (consumer_state.state_problems): never a
        # state a consumer really had
        assert state_problems(state) == [], state
        assert past_last_seq(state, self.n) is None
        other = Consumer(self.stream, "D", self.cfg, T0, Host(), self.now, state)
        a, b = self.c.info(self.now), other.info(self.now)
        for f in ("delivered", "ack_floor"):
            assert (getattr(a, f).consumer_seq, getattr(a, f).stream_seq) == (
                getattr(b, f).consumer_seq,
                getattr(b, f).stream_seq,
            )
        assert (a.num_ack_pending, a.num_redelivered, a.num_pending) == (
            b.num_ack_pending,
            b.num_redelivered,
            b.num_pending,
        )
        assert other.snapshot() == state


ConsumerMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestConsumerStateMachine = ConsumerMachine.TestCase
