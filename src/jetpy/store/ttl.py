"""Per-message TTL (nats-server 2.11): the ``Nats-TTL`` header's grammar and subject delete markers.

Owns: parsing a ``Nats-TTL`` value exactly as nats-server does (``never``; a Go duration of at
least one second, truncated to whole seconds; or a plain number of seconds), formatting a TTL
back as a Go duration, the headers of the delete marker a store leaves when expiry removes the
last message of a subject, and the rule telling which messages are themselves markers.
Must not know: streams, the API, clocks, when messages expire (``expiry.py`` is that policy).
The stores use it through ``expiry.py`` (the file store also at recovery, where a message's TTL
is read back from its own stored headers), and so does the stream's publish path (to refuse bad
values with 10165/10166).
"""

from __future__ import annotations

from typing import Final

from jetpy.gotime import NS_PER_SECOND, go_duration, parse_go_duration
from jetpy.protocol.headers import get_header

__all__ = [
    "H_MARKER_REASON",
    "H_TTL",
    "MARKER_REASON_MAX_AGE",
    "TTL_NEVER",
    "is_marker",
    "marker_headers",
    "msg_ttl",
    "parse_ttl",
]

H_TTL: Final = b"Nats-TTL"
H_MARKER_REASON: Final = b"Nats-Marker-Reason"
MARKER_REASON_MAX_AGE: Final = "MaxAge"  # the reason for markers left by max_age and TTL expiry
TTL_NEVER: Final = -1
"""A message's TTL of ``never``: not removed by its own TTL, and not by ``max_age`` either."""

_S: Final = NS_PER_SECOND
_H_KV_OPERATION: Final = b"KV-Operation"


def parse_ttl(raw: bytes) -> int:
    """A ``Nats-TTL`` value in nanoseconds: ``TTL_NEVER`` for "never", 0 for "no TTL of its own"
    (a number of seconds equal to zero), else whole seconds. Raises ValueError for what nats-server
    refuses with 10165: unparsable values and durations under one second."""
    try:
        text = raw.decode().strip()
    except UnicodeDecodeError as e:
        raise ValueError("invalid TTL") from e
    if text.lower() == "never":
        return TTL_NEVER
    try:
        dur = parse_go_duration(text)
    except ValueError:
        if text.isascii() and text.isdigit():  # a plain number of seconds
            return int(text) * _S
        raise
    if dur < _S:
        raise ValueError(f"TTL {text!r} is under one second")
    return dur // _S * _S


def msg_ttl(hdr: bytes) -> int:
    """The TTL a message's headers give it (0 without a ``Nats-TTL`` header); ValueError if invalid."""
    if not hdr:
        return 0
    raw = get_header(hdr, H_TTL)
    return 0 if raw is None else parse_ttl(raw)


def marker_headers(ttl_ns: int, reason: str = MARKER_REASON_MAX_AGE) -> bytes:
    """The headers of a subject delete marker: why the subject is empty, and the marker's own TTL
    (so markers clean themselves up). The payload is empty."""
    return f"NATS/1.0\r\nNats-Marker-Reason: {reason}\r\nNats-TTL: {go_duration(ttl_ns // _S * _S)}\r\n\r\n".encode()


def is_marker(hdr: bytes) -> bool:
    """Is this message already a "the subject is gone" marker (a server delete marker, or a KV
    delete/purge)? Expiring one leaves no new marker, or markers would never stop."""
    if not hdr:
        return False
    if get_header(hdr, H_MARKER_REASON) is not None:
        return True
    op = get_header(hdr, _H_KV_OPERATION)
    return op is not None and op in (b"DEL", b"PURGE")
