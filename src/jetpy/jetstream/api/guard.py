"""RequestGuard: the subjects a JetStream API request would read, capture or write, checked
against the calling client's permissions before its handler runs (and a message read by
``STREAM.MSG.GET``, before it is answered).

The table :meth:`RequestGuard.checks` names, per route, what a request touches (the rules are
:mod:`jetpy.jetstream.access`'s): creating or updating a stream captures its subjects and
republishes somewhere, an update may drop messages, deleting or purging a stream or one of its
messages destroys what was published there, a consumer reads its filters and writes to its
deliver subject, a mirror or source reads what it copies, a snapshot reads everything, a
restore captures and writes what it brings, pausing or resuming a push consumer writes to its
deliver subject (what it sends there stops or starts). ``CONSUMER.UNPIN`` touches no subject (the
next pull request is checked as every pull is), nor do the requests that only read or delete
configs and states. Requests are decoded exactly as their handlers
decode them; one its handler would refuse is left to the handler, so the answer to a malformed
request stays nats-server's. Must not know: how handlers do their work, the network.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from jetpy.jetstream.access import (
    captured,
    check_read,
    check_write,
    consumer_reads,
    copies_read,
    republish_writes,
    stored,
)
from jetpy.jetstream.api.messages import (
    ApiResponse,
    ConsumerCreateRequest,
    StreamMsgGetResponse,
    StreamRestoreRequest,
)
from jetpy.jetstream.api.requests import as_stream_config, config_body, decode_request
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.jetstream.ports import Caller
from jetpy.jetstream.registry import StreamRegistry

__all__ = ["RequestGuard"]

Check = Callable[[list[str], bytes, Caller], None]
ConsumerLookup: TypeAlias = Callable[[str, str], "ConsumerConfig | None"]
"""(stream, consumer) -> the consumer's config, or None when there is no such consumer."""


class RequestGuard:
    def __init__(self, registry: StreamRegistry, consumer: ConsumerLookup) -> None:
        self.registry = registry
        self._consumer = consumer
        self.checks: dict[str, Check] = {
            "STREAM.CREATE": self._stream_create,
            "STREAM.UPDATE": self._stream_update,
            "STREAM.DELETE": self._destroys,
            "STREAM.PURGE": self._destroys,
            "STREAM.MSG.DELETE": self._destroys,
            "STREAM.SNAPSHOT": self._reads_all,
            "STREAM.RESTORE": self._stream_restore,
            "CONSUMER.CREATE": self._consumer_create,
            "CONSUMER.DURABLE.CREATE": self._consumer_create,
            "CONSUMER.PAUSE": self._consumer_pause,
        }

    def check_request(self, key: str, args: list[str], body: bytes, caller: Caller) -> None:
        """Raise ``PERMISSIONS_VIOLATION`` if the request would touch what ``caller`` may not."""
        check = self.checks.get(key)
        if check is not None:
            check(args, body, caller)

    def check_response(self, key: str, response: ApiResponse, caller: Caller) -> None:
        """Raise ``PERMISSIONS_VIOLATION`` if the response carries a message ``caller`` may not read."""
        if isinstance(response, StreamMsgGetResponse) and response.message is not None:
            check_read(caller, [response.message.subject])

    # -- the checks -------------------------------------------------------------------------------

    def _stream_config(self, args: list[str]) -> StreamConfig | None:
        return self._stream_config_of(args[0]) if args else None

    def _stream_config_of(self, name: str) -> StreamConfig | None:
        s = self.registry.get(name)
        return s.config if s is not None else None

    def _stream_create(self, args: list[str], body: bytes, caller: Caller) -> None:
        try:
            cfg = as_stream_config(config_body(body))
        except ApiError:
            return  # its handler refuses it
        self._captures(cfg, caller)

    def _captures(self, cfg: StreamConfig, caller: Caller) -> None:
        check_read(caller, captured(cfg))
        check_read(caller, copies_read(cfg, self._stream_config_of))
        check_write(caller, republish_writes(cfg))

    def _stream_restore(self, args: list[str], body: bytes, caller: Caller) -> None:
        """A restore captures as a create does and writes every message it brings."""
        try:
            cfg = decode_request(body, StreamRestoreRequest).config
        except ApiError:
            return  # its handler refuses it
        self._captures(cfg, caller)
        check_write(caller, stored(cfg))

    def _stream_update(self, args: list[str], body: bytes, caller: Caller) -> None:
        self._destroys(args, body, caller)  # lowered limits drop messages
        self._stream_create(args, body, caller)

    def _destroys(self, args: list[str], body: bytes, caller: Caller) -> None:
        cfg = self._stream_config(args)
        if cfg is not None:
            check_write(caller, stored(cfg))

    def _reads_all(self, args: list[str], body: bytes, caller: Caller) -> None:
        cfg = self._stream_config(args)
        if cfg is not None:
            check_read(caller, stored(cfg))

    def _consumer_create(self, args: list[str], body: bytes, caller: Caller) -> None:
        stream = self._stream_config(args)
        if stream is None or not body.strip():
            return
        try:
            cfg = decode_request(body, ConsumerCreateRequest).config
        except ApiError:
            return
        subject_filter = ".".join(args[2:]) if len(args) > 2 else ""
        check_read(caller, consumer_reads(stream, cfg, subject_filter))
        if cfg.deliver_subject:
            check_write(caller, [cfg.deliver_subject])

    def _consumer_pause(self, args: list[str], body: bytes, caller: Caller) -> None:
        cfg = self._consumer(args[0], args[1]) if len(args) == 2 else None
        if cfg is not None and cfg.deliver_subject:
            check_write(caller, [cfg.deliver_subject])
