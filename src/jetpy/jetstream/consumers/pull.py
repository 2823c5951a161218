"""Pull requests (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``), the queue of those waiting
for messages, and the status messages a consumer sends instead of messages.

Owns: decoding a request body (empty = one message, a bare integer = a batch, or JSON
``{batch, expires, no_wait, max_bytes, idle_heartbeat}``), the per-request bookkeeping, the
status header blocks with nats-server's exact status lines, and :class:`WaitingRequests`: the
consumer's limits on requests (``max_waiting``, ``max_batch``, ``max_expires``, ``max_bytes``),
serving waiting requests round robin (a lone request takes a bulk run), their byte budgets,
``no_wait`` answers (404 / 408), expiry (408) and request heartbeats (100).

Must not know: which message comes next, pending acks or the store (a delivery loop asks its
:class:`~jetpy.jetstream.consumers.delivery.DeliverySource`), or the network beyond the ``send``
and ``has_interest`` it is given. Sans-IO and clock-free: times are given in ns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import msgspec

from jetpy.gotime import go_duration
from jetpy.jetstream.consumers.delivery import PUMP_BUDGET, DeliverySource, Send
from jetpy.jetstream.models import Duration, Int, go_int_violation
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


class RequestError(Exception):
    """A pull request that is refused with a status message (``code``, ``description``)."""

    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


@dataclass(slots=True)
class PullRequest:
    reply: str
    batch: int  # messages still wanted
    expires: int  # absolute ns, 0 = never
    no_wait: bool
    max_bytes: int  # 0 = unlimited; else bytes still allowed
    heartbeat: int  # ns, 0 = none
    received: int  # ns
    delivered: int = 0  # messages sent so far
    last_sent: int = 0  # ns, for idle heartbeats
    has_max_bytes: bool = False


class _Body(msgspec.Struct, kw_only=True):
    batch: Int = 0
    expires: Duration = 0
    no_wait: bool = False
    max_bytes: Int = 0
    idle_heartbeat: Duration = 0


_DECODER: Final = msgspec.json.Decoder(_Body)


def parse_pull_request(reply: str, body: bytes, now: int) -> PullRequest:
    """A request as nats-server's ``nextReqFromMsg`` reads it; raises RequestError(400)."""
    body = body.strip()
    batch = expires = max_bytes = hb = 0
    no_wait = False
    if not body:
        batch = 1
    elif body[:1] == b"{":
        try:
            req = _DECODER.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
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
        if hb > 0 and (expires == 0 or hb > expires // 2):
            raise RequestError(400, "Bad Request - heartbeat value too large")
    else:
        try:
            batch = int(body)
        except ValueError:
            batch = 1
    if batch <= 0:
        batch = 1
    return PullRequest(
        reply=reply,
        batch=batch,
        expires=now + expires if expires > 0 else 0,
        no_wait=no_wait,
        max_bytes=max(0, max_bytes),
        heartbeat=max(0, hb),
        received=now,
        last_sent=now,
        has_max_bytes=max_bytes > 0,
    )


def status(code: int, description: str, headers: list[tuple[str, str]] | None = None) -> bytes:
    """A status-only header block, e.g. ``NATS/1.0 404 No Messages``."""
    return encode_headers(headers or [], code, description)


def _left(r: PullRequest) -> list[tuple[str, str]]:
    """The headers telling a requester what its request still wanted."""
    return [("Nats-Pending-Messages", str(r.batch)), ("Nats-Pending-Bytes", str(r.max_bytes))]


class WaitingRequests:
    """A pull consumer's requests waiting for messages, oldest first."""

    def __init__(self, send: Send, has_interest: Callable[[str], bool]) -> None:
        self._send = send
        self._has_interest = has_interest
        self._queue: deque[PullRequest] = deque()
        self.max_waiting = self.max_batch = self.max_expires = self.max_bytes = 0  # 0 = no limit

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

    def add(self, req: PullRequest, now: int, nothing_available: bool) -> bool:
        """Queue ``req`` unless it exceeds a limit (409) or asked not to wait when nothing is
        available (404); returns whether it was queued. ``nothing_available``: no message to
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
        if req.no_wait and nothing_available:
            if req.expires == 0:
                self._status(reply, 404, "No Messages")
                return False
            # with expires, nats-server waits for the expiry but answers as soon as it can
            req.no_wait = False
        if len(self._queue) >= self.max_waiting > 0:
            self._status(reply, 409, "Exceeded MaxWaiting")
            return False
        self._queue.append(req)
        return True

    # -- serving --------------------------------------------------------------------------------

    def serve(self, source: DeliverySource, now: int) -> int:
        """Deliver what ``source`` has to the waiting requests, round robin (a lone request takes
        a bulk run); returns how many messages were sent. Requests whose requester is gone are
        dropped; ``no_wait`` requests are answered once nothing more is available."""
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
        # requests that asked not to wait are answered now that nothing more is available: 404
        # if they got nothing, else 408 with what is left; at max_ack_pending they keep waiting
        # for acks (nats-server does the same)
        if waiting and not source.more and any(r.no_wait for r in waiting) and source.can_deliver_new():
            keep: deque[PullRequest] = deque()
            for r in waiting:
                if not r.no_wait:
                    keep.append(r)
                elif r.delivered:
                    self._status(r.reply, 408, "Request Timeout", _left(r))
                else:
                    self._status(r.reply, 404, "No Messages")
            self._queue = keep
        return sent

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

    def close(self, deleted: bool) -> None:
        """Drop every request; if the consumer was deleted, tell each requester (409)."""
        if deleted:
            for r in self._queue:
                self._status(r.reply, 409, "Consumer Deleted")
        self._queue.clear()
