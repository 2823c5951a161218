"""Pull requests (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``), the queue of those waiting
for messages, and the status messages a consumer sends instead of messages.

Owns: decoding a request body (empty = one message, a bare integer = a batch, or JSON
``{batch, expires, no_wait, max_bytes, idle_heartbeat}`` and the priority-group fields), the
per-request bookkeeping, the status header blocks with nats-server's exact status lines, and
:class:`WaitingRequests`: the consumer's limits on requests (``max_waiting``, ``max_batch``,
``max_expires``, ``max_bytes``), serving waiting requests round robin (a lone request takes a
bulk run), their byte budgets (``409 Batch Completed`` when a batch ends with bytes to spare),
``no_wait`` answers (404 once nothing more is available, ``408 Requests Pending`` when others
already wait for all there is), expiry (408), request heartbeats (100), and requesters that are
gone (nobody subscribed to the reply subject any more): they are dropped before they can take a
message, and before a full queue refuses a new request (at most once a second, as nats-server).
A consumer with a priority policy is served through its :class:`PriorityGroups`, which says
which waiting request may take each message (``priority.py``).

Numbers are kept as requested, as nats-server keeps them: a batch of 0 or less still takes one
message and reports what is left as asked (``Nats-Pending-Messages: -3``), a negative ``expires``
has expired on arrival, a negative ``max_bytes`` is no budget.

Must not know: which message comes next, pending acks or the store (a delivery loop asks its
:class:`~jetpy.jetstream.consumers.delivery.DeliverySource`), or the network beyond the ``send``
and ``has_interest`` it is given. Sans-IO and clock-free: times are given in ns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from jetpy.gotime import go_duration
from jetpy.jetstream.consumers.delivery import PUMP_BUDGET, DeliverySource, Send
from jetpy.jetstream.consumers.priority import CLAIM, SKIP, WRONG_PIN, PriorityGroups, PullGroup
from jetpy.jetstream.models import Duration, Int, Int64, go_int_violation
from jetpy.protocol.headers import encode_headers

__all__ = [
    "PullRequest",
    "RequestError",
    "WaitingRequests",
    "parse_pull_request",
    "status",
]

_HEARTBEAT: Final = "Idle Heartbeat"
_TOO_BIG: Final = "Message Size Exceeds MaxBytes"

SWEEP_INTERVAL: Final = 1_000_000_000
"""How often a full queue may be swept of expired and abandoned requests before refusing a new
one (ns): nats-server's once a second, so a flood of requests cannot make every one a scan."""


class RequestError(Exception):
    """A pull request that is refused with a status message (``code``, ``description``)."""

    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


@dataclass(slots=True)
class PullRequest:
    reply: str
    batch: int  # messages still wanted (as requested: may be 0 or less, then one is taken)
    expires: int  # absolute ns, 0 = never
    no_wait: bool
    max_bytes: int  # bytes still allowed (as requested: 0 or less = unlimited)
    heartbeat: int  # ns, 0 = none
    received: int  # ns
    delivered: int = 0  # messages sent so far
    last_sent: int = 0  # ns, for idle heartbeats
    has_max_bytes: bool = False
    group: PullGroup | None = None  # the priority-group fields of a JSON request


class _Body(msgspec.Struct, kw_only=True):
    batch: Int = 0
    expires: Duration = 0
    no_wait: bool = False
    max_bytes: Int = 0
    idle_heartbeat: Duration = 0
    group: str = ""
    min_pending: Int64 = 0
    min_ack_pending: Int64 = 0
    id: str = ""
    priority: Int = 0


_DECODER: Final = msgspec.json.Decoder(_Body)

# The Go type of each field, for Go's decoder errors (nats-server's JSApiConsumerGetNextRequest)
_GO_TYPES: Final = {
    "batch": "int",
    "expires": "time.Duration",
    "no_wait": "bool",
    "max_bytes": "int",
    "idle_heartbeat": "time.Duration",
    "group": "string",
    "min_pending": "int64",
    "min_ack_pending": "int64",
    "id": "string",
    "priority": "int",
}


def _decode(body: bytes) -> _Body:
    """A JSON request as Go decodes it: ``null`` fields are zero values, a field of the wrong
    type is Go's ``cannot unmarshal`` error (raised as ``ValueError``)."""
    try:
        return _DECODER.decode(body)
    except msgspec.ValidationError:
        pass  # a null field or a wrong type: look at the fields one by one
    fields: dict[str, Any] = msgspec.json.decode(body)
    fields = {k: v for k, v in fields.items() if v is not None}
    for name, value in fields.items():
        go_type = _GO_TYPES.get(name)
        if go_type is None:
            continue
        if go_type == "bool":
            ok = isinstance(value, bool)
        elif go_type == "string":
            ok = isinstance(value, str)
        else:
            ok = type(value) is int
        if not ok:
            raise ValueError(
                f"json: cannot unmarshal {_json_kind(value, go_type)} into Go struct field .{name} of type {go_type}"
            )
    return msgspec.convert(fields, _Body)


def _json_kind(value: Any, go_type: str) -> str:
    """What Go's decoder calls a JSON value it cannot store (a number into an integer names it)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number" if go_type in ("string", "bool") else f"number {value}"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def parse_pull_request(reply: str, body: bytes, now: int) -> PullRequest:
    """A request as nats-server's ``nextReqFromMsg`` reads it; raises RequestError(400)."""
    body = body.strip()
    batch = expires = max_bytes = hb = 0
    no_wait = False
    group: PullGroup | None = None
    if not body:
        batch = 1
    elif body[:1] == b"{":
        try:
            req = _decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as e:
            raise RequestError(400, f"Bad Request - {e}") from None
        except RecursionError:  # Go's decoder stops at 10,000 levels, msgspec near 900
            raise RequestError(400, "Bad Request - exceeded max depth") from None
        if (err := go_int_violation(req)) is not None:
            raise RequestError(400, f"Bad Request - {err}")
        batch, expires, no_wait, max_bytes, hb = (
            req.batch,
            req.expires,
            req.no_wait,
            req.max_bytes,
            req.idle_heartbeat,
        )
        if hb > 0 and hb * 2 > expires:
            raise RequestError(400, "Bad Request - heartbeat value too large")
        group = PullGroup(req.group, req.min_pending, req.min_ack_pending, req.id, req.priority)
    else:
        try:
            batch = int(body)
        except ValueError:
            batch = 1
    return PullRequest(
        reply=reply,
        batch=batch,
        expires=now + expires if expires else 0,  # a negative expires has already passed
        no_wait=no_wait,
        max_bytes=max_bytes,
        heartbeat=max(0, hb),
        received=now,
        last_sent=now,
        has_max_bytes=max_bytes > 0,
        group=group,
    )


def _silent(event: str, kind: str, now: int, fields: dict[str, Any]) -> None:
    """The advisories of a consumer without a priority policy: there are none."""


def status(code: int, description: str, headers: list[tuple[str, str]] | None = None) -> bytes:
    """A status-only header block, e.g. ``NATS/1.0 404 No Messages``."""
    return encode_headers(headers or [], code, description)


def _left(r: PullRequest) -> list[tuple[str, str]]:
    """The headers telling a requester what its request still wanted."""
    return [("Nats-Pending-Messages", str(r.batch)), ("Nats-Pending-Bytes", str(r.max_bytes))]


class WaitingRequests:
    """A pull consumer's requests waiting for messages, oldest first (by ``priority`` first
    under the ``prioritized`` policy)."""

    def __init__(
        self, send: Send, has_interest: Callable[[str], bool], priority: PriorityGroups | None = None
    ) -> None:
        self._send = send
        self._has_interest = has_interest
        # the consumer's; without one, a consumer without a policy (it never announces anything)
        self.priority = priority if priority is not None else PriorityGroups(_silent)
        self._queue: deque[PullRequest] = deque()
        self.max_waiting = self.max_batch = self.max_expires = self.max_bytes = 0  # 0 = no limit
        self._swept = 0  # when the queue was last swept of expired and abandoned requests (ns)

    def configure(self, max_waiting: int, max_batch: int, max_expires: int, max_bytes: int) -> None:
        """The consumer's limits on requests (<= 0: none)."""
        self.max_waiting, self.max_batch = max_waiting, max_batch
        self.max_expires, self.max_bytes = max_expires, max_bytes

    def __len__(self) -> int:
        return len(self._queue)

    def _status(
        self, reply: str, code: int, description: str, headers: list[tuple[str, str]] | None = None
    ) -> None:
        self._send(reply, reply, None, b"", status(code, description, headers))

    # -- admission ------------------------------------------------------------------------------

    def parse(self, reply: str, body: bytes, now: int) -> PullRequest | None:
        """The request in ``body``, or None after answering a malformed one (400)."""
        try:
            return parse_pull_request(reply, body, now)
        except RequestError as e:
            self._status(reply, e.code, e.description)
            return None

    def add(self, req: PullRequest, now: int, available: int) -> bool:
        """Queue ``req`` unless it exceeds a limit (409), fails its priority group's checks (400,
        423), or asked not to wait when nothing is available (404) or others already wait for
        all there is (408); returns whether it was queued. ``available``: messages there are to
        deliver or redeliver now (read only for ``no_wait`` requests)."""
        reply = req.reply
        if self.max_batch > 0 and req.batch > self.max_batch:
            self._status(reply, 409, f"Exceeded MaxRequestBatch of {self.max_batch}")
            return False
        if self.max_expires > 0 and req.expires and req.expires - now > self.max_expires:
            self._status(reply, 409, f"Exceeded MaxRequestExpires of {go_duration(self.max_expires)}")
            return False
        if self.max_bytes > 0 and req.max_bytes > self.max_bytes:
            self._status(reply, 409, f"Exceeded MaxRequestMaxBytes of {self.max_bytes}")
            return False
        refused = self.priority.admit(req.group, now)
        if refused is not None:
            self._status(reply, *refused)
            return False
        if len(self._queue) >= self.max_waiting > 0 and now - self._swept > SWEEP_INTERVAL:
            self.sweep(now)  # abandoned requests must not hold the places of live ones
        if req.no_wait:
            if not available and not req.expires:
                self._status(reply, 404, "No Messages")
                return False
            if available:
                self.sweep(now)
                if available < sum(r.batch for r in self._queue):
                    self._status(reply, 408, "Requests Pending")
                    return False
        if len(self._queue) >= self.max_waiting > 0:
            if not req.heartbeat:  # a requester with heartbeats waits for them instead (nats-server)
                self._status(reply, 409, "Exceeded MaxWaiting")
            return False
        if self.priority.prioritized:
            self._insert(req)
        else:
            self._queue.append(req)
        return True

    def _insert(self, req: PullRequest) -> None:
        """Queue ``req`` after every request of its priority or a better one (``prioritized``)."""
        rank = self.priority.rank
        mine = rank(req.group)
        queue = self._queue
        for i, r in enumerate(queue):
            if rank(r.group) > mine:
                queue.insert(i, req)
                return
        queue.append(req)

    def sweep(self, now: int) -> None:
        """Answer the requests that have expired (408) and drop those whose requester is gone."""
        self._swept = now
        keep: deque[PullRequest] = deque()
        for r in self._queue:
            if r.expires and r.expires <= now:
                self._status(r.reply, 408, "Request Timeout", _left(r))
            elif self._has_interest(r.reply):
                keep.append(r)
        self._queue = keep

    # -- serving --------------------------------------------------------------------------------

    def serve(self, source: DeliverySource, now: int) -> int:
        """Deliver what ``source`` has to the waiting requests, round robin (a lone request takes
        a bulk run); returns how many messages were sent. Requests whose requester is gone are
        dropped; ``no_wait`` requests are answered once nothing more is available."""
        if self.priority.policy != "none":
            return self._serve_grouped(source, now)
        sent = 0
        waiting = self._queue
        checked: set[int] = set()
        while waiting:
            if sent >= PUMP_BUDGET:
                source.more = True  # the rest on the next loop turn
                break
            req = waiting[0]
            if req.expires and req.expires <= now:
                break  # expiry is handled by expire()
            if id(req) not in checked:  # once per request and serve, not per message
                if not self._has_interest(req.reply):
                    waiting.popleft()  # the requester is gone
                    continue
                checked.add(id(req))
            if len(waiting) == 1 and source.bulk and not req.has_max_bytes and source.plain_next(now):
                k = len(source.burst(req.reply, min(req.batch, PUMP_BUDGET - sent), now))
                if k:
                    sent += k
                    req.delivered += k
                    req.batch -= k
                    req.last_sent = now
                    if req.batch <= 0:
                        waiting.popleft()
                    continue
            nxt = source.next_message(now)
            if nxt is None:
                break
            m, p = nxt
            if req.has_max_bytes:
                size = source.delivery_size(m, p)
                if size > req.max_bytes:
                    source.put_back(m, p)
                    waiting.popleft()
                    self._status(req.reply, 409, _TOO_BIG, _left(req))
                    continue
                req.max_bytes -= size
            source.deliver(m, p, req.reply, now)
            sent += 1
            req.delivered += 1
            req.batch -= 1
            req.last_sent = now
            waiting.popleft()
            if req.batch > 0 and not (req.has_max_bytes and req.max_bytes <= 0):
                waiting.append(req)  # round robin over waiting requests
            elif req.has_max_bytes and req.max_bytes > 0:
                self._status(req.reply, 409, "Batch Completed", _left(req))
        self._answer_no_wait(source)
        return sent

    def _more_for(self, req: PullRequest, now: int) -> bool:
        """Count a message sent to ``req``; returns whether it wants more (else it is done, and
        told so if its batch ended with bytes to spare: ``409 Batch Completed``). :meth:`serve`
        does the same inline (its per-message path)."""
        req.delivered += 1
        req.batch -= 1
        req.last_sent = now
        if req.batch > 0 and not (req.has_max_bytes and req.max_bytes <= 0):
            return True
        if req.has_max_bytes and req.max_bytes > 0:
            self._status(req.reply, 409, "Batch Completed", _left(req))
        return False

    def _answer_no_wait(self, source: DeliverySource) -> None:
        """Requests that asked not to wait are answered now that nothing more is available (404);
        one with ``expires`` that got nothing yet waits for a message or its expiry. At
        max_ack_pending they keep waiting for acks (nats-server does the same)."""
        waiting = self._queue
        if waiting and not source.more and any(r.no_wait for r in waiting) and source.can_deliver_new():
            self.end_of_stream()

    def end_of_stream(self) -> None:
        """Nothing can be delivered now: answer the ``no_wait`` requests that are done (404)."""
        keep: deque[PullRequest] = deque()
        for r in self._queue:
            if r.no_wait and (not r.expires or r.delivered):
                self._status(r.reply, 404, "No Messages")
            else:
                keep.append(r)
        self._queue = keep

    def _serve_grouped(self, source: DeliverySource, now: int) -> int:
        """:meth:`serve` for a consumer with a priority policy: one message at a time, each to
        the first waiting request its :class:`PriorityGroups` lets take it (nats-server's
        ``nextWaiting``); a request that may not is cycled to the back."""
        sent = 0
        waiting = self._queue
        checked: set[int] = set()
        while waiting:
            if sent >= PUMP_BUDGET:
                source.more = True
                break
            nxt = source.next_message(now)
            if nxt is None:
                break
            m, p = nxt
            req = self._select(source, m, p, now, checked)
            if req is None:
                source.put_back(m, p)
                break
            source.deliver(m, p, req.reply, now)
            sent += 1
            waiting.popleft()
            if self._more_for(req, now):
                if self.priority.prioritized:
                    self._insert(req)  # behind the others of its priority
                else:
                    waiting.append(req)
        self._answer_no_wait(source)
        return sent

    def _select(
        self, source: DeliverySource, m: Any, p: Any, now: int, checked: set[int]
    ) -> PullRequest | None:
        """The waiting request that takes message ``m`` (left at the head of the queue), or None.
        Expired requests are answered (408) and abandoned ones dropped on the way; under
        ``pinned_client`` one naming a stale pin is answered 423, the first without a pin is
        pinned when nothing is; a request over its byte budget is answered 409."""
        prio = self.priority
        waiting = self._queue
        needs_pin = prio.needs_pin()
        counts: tuple[int, int] | None = None
        cycled = 0
        while waiting:
            req = waiting[0]
            if req.expires and req.expires <= now:
                waiting.popleft()
                self._status(req.reply, 408, "Request Timeout", _left(req))
                continue
            if id(req) not in checked:
                if not self._has_interest(req.reply):
                    waiting.popleft()  # gone: never pinned, never handed a message
                    continue
                checked.add(id(req))
            if counts is None:
                counts = source.num_pending(), source.num_ack_pending()
            verdict = prio.choose(req.group, needs_pin, *counts)
            if verdict == SKIP:
                cycled += 1
                if cycled >= len(waiting):
                    return None
                waiting.rotate(-1)
                continue
            if verdict == WRONG_PIN:
                waiting.popleft()
                self._status(req.reply, 423, "Nats-Wrong-Pin-Id", _left(req))
                continue
            if verdict == CLAIM:
                prio.claim(req.group, now)
            if req.has_max_bytes:
                size = source.delivery_size(m, p)
                if size > req.max_bytes:
                    waiting.popleft()
                    self._status(req.reply, 409, _TOO_BIG, _left(req))
                    if verdict == CLAIM:
                        prio.release()
                    continue
                req.max_bytes -= size
            return req
        return None

    # -- time -----------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When :meth:`expire` next has something to do (ns), or None."""
        due: int | None = None
        for r in self._queue:
            if r.expires and (due is None or r.expires < due):
                due = r.expires
            if r.heartbeat and (due is None or r.last_sent + r.heartbeat < due):
                due = r.last_sent + r.heartbeat
        return due

    def expire(self, now: int, last_consumer_seq: int, last_stream_seq: int) -> bool:
        """Answer expired requests (408) and send due request heartbeats (100, naming the last
        delivery); returns whether any request expired."""
        expired = False
        keep: deque[PullRequest] = deque()
        for r in self._queue:
            if r.expires and r.expires <= now:
                self._status(r.reply, 408, "Request Timeout", _left(r))
                expired = True
                continue
            if r.heartbeat and now - r.last_sent >= r.heartbeat:
                hb = [
                    ("Nats-Last-Consumer", str(last_consumer_seq)),
                    ("Nats-Last-Stream", str(last_stream_seq)),
                ]
                self._status(r.reply, 100, _HEARTBEAT, hb)
                r.last_sent = now
            keep.append(r)
        self._queue = keep
        return expired

    def close(self, deleted: bool, why: str = "Consumer Deleted") -> None:
        """Drop every request; if the consumer was deleted (or stops being led here), tell each
        requester ``why`` (409)."""
        if deleted:
            for r in self._queue:
                self._status(r.reply, 409, why)
        self._queue.clear()
