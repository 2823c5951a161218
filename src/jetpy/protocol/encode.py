"""Server-to-client encoding: INFO, MSG/HMSG, PING/PONG, +OK, -ERR. Sans-IO.

Byte-for-byte what nats-server writes (note the space before CRLF after INFO's JSON).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CRLF", "OK", "PING", "PONG", "err", "info", "msg", "status_message"]

CRLF = b"\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"
OK = b"+OK\r\n"


def info(fields: dict[str, Any]) -> bytes:
    return b"INFO " + json.dumps(fields, separators=(",", ":")).encode() + b" \r\n"


def err(text: str) -> bytes:
    return b"-ERR '" + text.encode() + b"'\r\n"


def msg(subject: bytes, sid: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> bytes:
    """One MSG (hdr_len 0) or HMSG frame; ``data`` holds headers then payload."""
    r = reply + b" " if reply else b""
    if hdr_len:
        return b"HMSG %b %b %b%d %d\r\n%b\r\n" % (subject, sid, r, hdr_len, len(data), data)
    return b"MSG %b %b %b%d\r\n%b\r\n" % (subject, sid, r, len(data), data)


def status_message(code: int, description: str = "", headers: dict[str, str] | None = None) -> bytes:
    """A header block carrying a status line, e.g. ``NATS/1.0 503`` for no responders."""
    line = f"NATS/1.0 {code}" + (f" {description}" if description else "")
    parts = [line]
    if headers:
        parts.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(parts) + "\r\n\r\n").encode()
