"""Offline streams: streams whose files could not be read back, kept out of service in place.

A stream is offline when its store could not be opened or its metadata could not be read (a
damaged, missing or impossible file, an I/O error): nothing of it is served and nothing of it
is touched, so an operator can look at it (``jetpy store check``), repair it and restart, or
delete it. Until then its name is taken (``STREAM.NAMES`` lists it, ``STREAM.LIST`` names it
under ``offline`` and ``missing``, as nats-server 2.12 reports offline assets), every request
about it is answered 500 10194 ``stream is offline: <file>: <reason>``, and when its config could
be read, its subjects stay claimed (no other stream may take them) and a publish to them gets
the same error in its PubAck instead of silence.

Owns the offline streams, their subjects' subscriptions and the answer they give. Must not
know: stores, files, why a stream went offline beyond the reason it is handed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.stream import pub_error
from jetpy.patterns import PatternSet

__all__ = ["OfflineStream", "OfflineStreams"]


@dataclass(slots=True)
class OfflineStream:
    name: str
    reason: str
    config: StreamConfig | None  # None: its metadata could not be read either
    handles: list[Any] = field(default_factory=list)

    @property
    def subjects(self) -> list[str]:
        return list(self.config.subjects) if self.config is not None else []

    def error(self) -> ApiError:
        return ApiError.of(E.STREAM_OFFLINE_REASON, err=self.reason)


class OfflineStreams:
    """The offline streams of a server; ``subjects`` is the registry's set of every stream's
    subjects, where an offline stream's stay claimed under its name."""

    def __init__(self, bus: MessageBus, subjects: PatternSet[str]) -> None:
        self._bus = bus
        self._subjects = subjects
        self._streams: dict[str, OfflineStream] = {}

    def add(self, name: str, reason: str, config: StreamConfig | None) -> OfflineStream:
        off = OfflineStream(name, reason, config)
        refusal = pub_error(name, off.error())
        publish_reply = self._bus.publish_reply

        def refuse(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            if reply is not None and not (config is not None and config.no_ack):
                publish_reply(reply, refusal)

        for subj in off.subjects:
            off.handles.append(self._bus.subscribe(subj, refuse))
            self._subjects.add(subj, name)
        self._streams[name] = off
        return off

    def get(self, name: str) -> OfflineStream | None:
        return self._streams.get(name)

    def all(self) -> list[OfflineStream]:
        return [self._streams[n] for n in sorted(self._streams)]

    def remove(self, name: str) -> None:
        off = self._streams.pop(name, None)
        if off is None:
            return
        for h in off.handles:
            self._bus.unsubscribe(h)
        for subj in off.subjects:
            self._subjects.discard(subj, name)

    def stop(self) -> None:
        for name in list(self._streams):
            self.remove(name)
