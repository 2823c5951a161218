"""Pull requests (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) and the status messages a
consumer sends instead of messages.

Owns: decoding a request body (empty = one message, a bare integer = a batch, or JSON
``{batch, expires, no_wait, max_bytes, idle_heartbeat}``), the per-request bookkeeping, and the
status header blocks with nats-server's exact status lines. Pure: times are given in ns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import msgspec

from jetpy.protocol.headers import encode_headers

__all__ = [
    "PullRequest",
    "RequestError",
    "parse_pull_request",
    "status",
]


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
    batch: int = 0
    expires: int = 0
    no_wait: bool = False
    max_bytes: int = 0
    idle_heartbeat: int = 0


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
        batch, expires, no_wait, max_bytes, hb = req.batch, req.expires, req.no_wait, req.max_bytes, req.idle_heartbeat
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
