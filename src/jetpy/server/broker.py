"""Broker: interest and routing. Who gets a published message, and queue-group selection.

Owns the subscription trie and the message counters. A subscriber is anything with a
``deliver(sub, subject, reply, hdr_len, data)`` method: a client connection, or an
:class:`InternalClient` whose callback runs in-process (JetStream's API and streams use these).
Knows nothing of sockets or of the wire format a connection writes.

Writes are coalesced: a delivery only appends to the receiver's buffer and marks it dirty; the
broker flushes every dirty receiver once per event-loop turn (``call_soon``), so a read holding
a hundred PUBs costs one write per receiving connection, not a hundred.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Protocol

from jetpy.sublist import SubjectTree

__all__ = ["Broker", "InternalClient", "Subscriber", "Subscription"]


class Subscriber(Protocol):
    def deliver(self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None: ...

    def flush(self) -> None: ...


class Subscription:
    __slots__ = ("client", "created", "delivered", "max_msgs", "queue", "sid", "subject")

    def __init__(self, client: Subscriber, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        self.client = client
        self.subject = subject
        self.queue = queue
        self.sid = sid
        self.max_msgs = 0  # 0 = unlimited; set by UNSUB <sid> <max>
        self.delivered = 0
        self.created = time.time()


# (subject, reply, hdr_len, data) -> None; data holds the header block then the payload
InternalHandler = Callable[[bytes, "bytes | None", int, bytes], None]


class InternalClient:
    """An in-process subscriber: deliveries call ``handler`` synchronously, in publish order."""

    kind = "internal"

    def __init__(self, name: str) -> None:
        self.name = name
        self.handlers: dict[Subscription, InternalHandler] = {}

    def deliver(self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        handler = self.handlers.get(sub)
        if handler is not None:
            handler(subject, reply, hdr_len, data)

    def flush(self) -> None:
        pass


class Broker:
    def __init__(self) -> None:
        self.subs: SubjectTree[Subscription] = SubjectTree()
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self._dirty: list[Subscriber] = []
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._internal = InternalClient("$SYS")

    # -- interest -------------------------------------------------------------------------------

    def add(self, sub: Subscription) -> None:
        self.subs.insert(sub.subject, sub.queue, sub)

    def remove(self, sub: Subscription) -> None:
        self.subs.remove(sub.subject, sub.queue, sub)

    def subscribe_internal(self, subject: str, handler: InternalHandler, queue: str | None = None) -> Subscription:
        """Subscribe an in-process handler (used by JetStream); returns the handle to unsubscribe."""
        sub = Subscription(self._internal, subject.encode(), queue.encode() if queue else None, b"")
        self._internal.handlers[sub] = handler
        self.add(sub)
        return sub

    def unsubscribe_internal(self, sub: Subscription) -> None:
        self._internal.handlers.pop(sub, None)
        self.remove(sub)

    def has_interest(self, subject: bytes) -> bool:
        return self.subs.has_interest(subject)

    # -- routing --------------------------------------------------------------------------------

    def publish(
        self,
        origin: Subscriber | None,
        subject: bytes,
        reply: bytes | None,
        hdr_len: int,
        data: bytes,
        echo: bool = True,
    ) -> int:
        """Deliver to every plain subscriber and one member per queue group; returns the count."""
        self.in_msgs += 1
        self.in_bytes += len(data)
        plain, groups = self.subs.match(subject)
        delivered = 0
        for sub in plain:
            c = sub.client
            if c is origin and not echo:
                continue
            c.deliver(sub, subject, reply, hdr_len, data)
            delivered += 1
        for group in groups:
            members = group
            if not echo and origin is not None:
                members = [s for s in group if s.client is not origin]
                if not members:
                    continue
            sub = members[0] if len(members) == 1 else members[random.randrange(len(members))]
            sub.client.deliver(sub, subject, reply, hdr_len, data)
            delivered += 1
        return delivered

    def publish_internal(self, subject: str, reply: str | None, payload: bytes, headers: bytes = b"") -> int:
        """Publish from inside the server (API replies, deliveries, advisories)."""
        return self.publish(
            None,
            subject.encode(),
            reply.encode() if reply else None,
            len(headers),
            headers + payload if headers else payload,
        )

    # -- coalesced writes -----------------------------------------------------------------------

    def mark_dirty(self, conn: Subscriber) -> None:
        self._dirty.append(conn)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            loop.call_soon(self.flush_dirty)

    def flush_dirty(self) -> None:
        self._flush_scheduled = False
        dirty = self._dirty
        if not dirty:
            return
        self._dirty = []
        for conn in dirty:
            conn.flush()
