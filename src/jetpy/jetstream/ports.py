"""The seams JetStream needs from its host: its configuration, a message bus and a store provider.

JetStream owns streams, consumers and the API, but not the network or the choice of store
backend. The server implements these protocols (``jetpy.server.js_wiring``) and hands them in,
so this package stays testable and never imports the server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from jetpy.jetstream.models import AccountLimits
from jetpy.store.base import StoreConfig, StoredMsg, StreamStore

__all__ = [
    "Caller",
    "JetStreamConfig",
    "MessageBus",
    "MessageHandler",
    "PersistedStream",
    "RunHandler",
    "StoreProvider",
]


@dataclass(slots=True)
class JetStreamConfig:
    """One account's JetStream: the server's settings (``max_memory``/``max_storage`` are the
    server's limits, shared by every account), the account's name and its own limits, and the
    server's JetStream domain ("" without one)."""

    store_dir: str = ""
    max_memory: int = -1
    max_storage: int = -1
    sync_interval: float | None = None  # None: fsync before every ack (group commit)
    server_name: str = ""
    account: str = "$G"
    limits: AccountLimits = field(default_factory=AccountLimits)
    domain: str = ""


# (subject, reply, hdr_len, data): ``data`` holds the header block (hdr_len bytes) then the payload
MessageHandler = Callable[[bytes, "bytes | None", int, bytes], None]
# (subject, replies, header sizes, datas) -> None: a run of messages with replies to one subject
RunHandler = Callable[[bytes, list[bytes], list[int], list[bytes]], None]


class Caller(Protocol):
    """The client whose message a handler is taking, as JetStream must know it: what it may
    publish to and read, each asked of a whole pattern (every subject the pattern matches)."""

    def may_publish_all(self, pattern: str) -> bool: ...

    def may_subscribe_all(self, pattern: str) -> bool: ...


class MessageBus(Protocol):
    def publish(self, subject: str, reply: str | None, payload: bytes, headers: bytes = b"") -> int:
        """Publish from inside the server; returns how many subscribers received it."""
        ...

    def publish_reply(self, subject: bytes, data: bytes) -> int:
        """``publish`` of a plain reply to a reply subject as received (bytes): the PubAck
        path, once per published message, so it skips the round trip through ``str``."""
        ...

    def publish_replies(self, subjects: list[bytes], datas: list[bytes]) -> int:
        """``publish_reply`` of each in turn (a commit's PubAcks), in one call."""
        ...

    def subscribe(
        self, subject: str, handler: MessageHandler, queue: str | None = None, run: RunHandler | None = None
    ) -> Any:
        """An in-process subscription; handlers run synchronously in publish order. ``run``, if
        given, takes a publisher's run of messages with replies to one subject in one call,
        where the subscription is their only receiver (else ``handler`` takes each)."""
        ...

    def unsubscribe(self, handle: Any) -> None: ...

    def caller(self) -> Caller | None:
        """Who published the message a handler is called with right now: None for the server
        itself and for clients without permissions (they may do anything)."""
        ...

    def has_interest(self, subject: str) -> bool: ...

    def has_queue_interest(self, subject: str, queue: str) -> bool:
        """Whether members of the queue group named ``queue`` subscribe to ``subject``."""
        ...

    def send(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes = b"") -> int:
        """Deliver to subscribers of ``route`` with ``subject`` on the MSG line (a consumer's
        deliveries keep the stored message's subject while going to an inbox)."""
        ...

    def send_batch(self, route: str, msgs: list[StoredMsg], replies: list[bytes]) -> int:
        """``send`` for a run of stored messages to one route, each on its own subject with its
        reply, in order (a consumer's bulk delivery)."""
        ...

    def watch_interest(self, subject: str, callback: Callable[[], None]) -> Any:
        """Call ``callback`` soon after subscriptions that could receive ``subject`` change."""
        ...

    def unwatch_interest(self, handle: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class PersistedStream:
    """A stream the store provider found persisted: its metadata (or why it cannot be read),
    and how to open its store (raises ``StoreError`` if its files cannot be trusted). Nothing
    is opened, and so nothing written, before the metadata has been read and understood."""

    name: str
    meta: bytes | None  # None: unreadable or missing, see ``problem``
    problem: str  # why the metadata cannot be read ("" if it was)
    open: Callable[[], StreamStore]
    missing: bool = False  # no metadata at all: a creation or restore that never finished


class StoreProvider(Protocol):
    """Creates and finds stores; the composition root decides memory vs file and where files go."""

    def create(self, config: StoreConfig) -> StreamStore: ...

    def recover(self) -> list[PersistedStream]:
        """Every persisted stream found at start-up (file storage only), not yet opened."""
        ...

    def remove(self, name: str) -> None:
        """Delete the files of a stream that is not open (an operator's explicit request)."""
        ...

    def quarantine(self, name: str, reason: str) -> str:
        """Move a stream directory that never became a stream aside (never delete it); returns where."""
        ...
