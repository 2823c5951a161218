"""ProtocolError: the one error the protocol layer raises.

``err`` is the text nats-server sends in ``-ERR '<err>'`` before closing, or ``None`` where
nats-server closes the connection without a word (malformed arguments, bad CONNECT JSON).
``ops`` holds the operations parsed from the same input before the violation: nats-server acts
on every op that precedes a violation, so a caller handles those first and then closes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ERR_ACCOUNT_EXPIRED",
    "ERR_AUTH_EXPIRED",
    "ERR_AUTH_REVOKED",
    "ERR_AUTH_TIMEOUT",
    "ERR_AUTH_VIOLATION",
    "ERR_INVALID_PROTOCOL",
    "ERR_INVALID_PUB_SUBJECT",
    "ERR_INVALID_SUBJECT",
    "ERR_MAX_ACCOUNT_CONNECTIONS",
    "ERR_MAX_CONNECTIONS",
    "ERR_MAX_CONTROL_LINE",
    "ERR_MAX_PAYLOAD",
    "ERR_MAX_SUBSCRIPTIONS",
    "ERR_NO_RESPONDERS_HEADERS",
    "ERR_STALE_CONNECTION",
    "ERR_UNKNOWN_OP",
    "ProtocolError",
]

# nats-server's exact -ERR texts (case as it sends them).
ERR_UNKNOWN_OP = "Unknown Protocol Operation"
ERR_MAX_PAYLOAD = "Maximum Payload Violation"
ERR_MAX_CONTROL_LINE = "maximum control line exceeded"
ERR_AUTH_VIOLATION = "Authorization Violation"
ERR_AUTH_TIMEOUT = "Authentication Timeout"
ERR_STALE_CONNECTION = "Stale Connection"
ERR_INVALID_PROTOCOL = "invalid client protocol"
ERR_NO_RESPONDERS_HEADERS = "no responders requires headers support"
ERR_MAX_CONNECTIONS = "maximum connections exceeded"
ERR_MAX_ACCOUNT_CONNECTIONS = "maximum account active connections exceeded"  # an account JWT's conn
ERR_AUTH_EXPIRED = "User Authentication Expired"  # a user JWT's expiry came
ERR_ACCOUNT_EXPIRED = "Account Authentication Expired"  # the account JWT's expiry came first
ERR_AUTH_REVOKED = "User Authentication Revoked"  # the account revoked a connected user
ERR_MAX_SUBSCRIPTIONS = "maximum subscriptions exceeded"  # non-fatal
ERR_INVALID_SUBJECT = "Invalid Subject"  # non-fatal
ERR_INVALID_PUB_SUBJECT = "Invalid Publish Subject"  # non-fatal


class ProtocolError(Exception):
    """A fatal protocol violation: the connection must close (after ``-ERR`` if ``err`` is set)."""

    def __init__(self, err: str | None, detail: str = "") -> None:
        super().__init__(detail or err or "protocol violation")
        self.err = err
        self.detail = detail
        self.ops: list[tuple[Any, ...]] = []
