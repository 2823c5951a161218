"""Republish: a stream's stored messages copied to another subject, as nats-server 2.9+ does.

Owns which stored messages a stream's ``republish {src, dest, headers_only}`` covers (``src``
matched against the stored subject, ``>`` when empty) and the message that goes out: the
destination subject mapped from the stored one, the message's own headers followed by
``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp`` and
``Nats-Last-Sequence`` (the previous sequence on the same subject, 0 if none), plus
``Nats-Msg-Size`` with an empty payload when ``headers_only``. Must not know: the network (the
caller publishes it) or the store.
"""

from __future__ import annotations

from jetpy.jetstream.models import RePublish, format_time
from jetpy.jetstream.transform import SubjectTransform

__all__ = ["RepublishedMsg", "Republisher"]

# (subject, header block, payload) of one republished message
RepublishedMsg = tuple[str, bytes, bytes]


class Republisher:
    __slots__ = ("_headers_only", "_prefix", "_transform")

    def __init__(self, stream: str, config: RePublish) -> None:
        self._transform = SubjectTransform(config.src or ">", config.dest)
        self._headers_only = config.headers_only
        self._prefix = f"Nats-Stream: {stream}\r\nNats-Subject: ".encode()

    def destination(self, subject: str) -> str | None:
        """Where a message stored on ``subject`` is republished (None: not covered)."""
        return self._transform.apply(subject)

    def message(
        self, dest: str, subject: str, seq: int, ts: int, hdr: bytes, payload: bytes, last: int
    ) -> RepublishedMsg:
        base = hdr[:-2] if hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n"
        extra = b"%s\r\nNats-Sequence: %d\r\nNats-Time-Stamp: %s\r\nNats-Last-Sequence: %d\r\n" % (
            subject.encode(),
            seq,
            format_time(ts).encode(),
            last,
        )
        if self._headers_only:
            return dest, base + self._prefix + extra + b"Nats-Msg-Size: %d\r\n\r\n" % len(payload), b""
        return dest, base + self._prefix + extra + b"\r\n", payload
