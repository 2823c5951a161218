"""ClientLog: what a client did wrong, in the log as nats-server writes it, at a bounded rate.

Owns the log *lines* about one client connection: nats-server's prefix for them (the client's
address and connection id, then what the client said of itself once it is in)::

    127.0.0.1:52340 - cid:4 - authentication error - User "alice"
    127.0.0.1:52352 - cid:5 - "v2.16.0:python3:app" - "$G/user:alice" - maximum payload exceeded: 2000 vs 1000

(nats-server 2.15's spelling: 2.9 wrote no account/user part), and a token bucket over them, so a
flood of bad clients cannot flood the log: at most :data:`LOG_RATE` lines a second once a burst
of :data:`LOG_BURST` is spent. Lines over the rate are counted, not written; the count is
written (a warning) before the next line that is. Knows nothing of sockets, parsing or
authentication: the connection says what happened and who it is. Where the lines go and how they
are formatted past this prefix is the logging setup's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["LOG_BURST", "LOG_RATE", "ClientIdentity", "ClientLog", "client_prefix"]

LOG_RATE: Final = 20.0
"""Client error lines a second, sustained: enough for every real incident (a handful of bad
clients), and bounded when thousands of connections misbehave at once."""

LOG_BURST: Final = 100
"""Client error lines written at once before the rate applies (a restart's reconnect storm)."""


@dataclass(slots=True)
class ClientIdentity:
    """What a log line says about a client: its address and id, and after a successful CONNECT
    the version, language and name it gave and whom it authenticated as."""

    host: str
    port: int
    cid: int
    version: str = ""
    lang: str = ""
    name: str = ""
    user: str | None = None  # "" with a token, the user's name with a user, None without auth
    connected: bool = False
    nkey: bool = False  # ``user`` is a public nkey
    websocket: bool = False  # named ``wid:N``, as nats-server names WebSocket clients
    account: str = "$G"  # the account it logged in to


def client_prefix(c: ClientIdentity) -> str:
    """nats-server's ``host:port - cid:N`` and, once connected, ``- "v1.2:lang:name" -
    "$G/user:alice"`` (each part only when there is something to say)."""
    host = f"[{c.host}]" if ":" in c.host else c.host
    prefix = f"{host}:{c.port} - {'wid' if c.websocket else 'cid'}:{c.cid}"
    if not c.connected:
        return prefix
    parts = [f"v{c.version}" if c.version else "", c.lang, c.name]
    ncs = ":".join(p for p in parts if p)
    if ncs:
        prefix += f' - "{ncs}"'
    if c.user is not None:
        who = ("nkey:" if c.nkey else "user:") + c.user if c.user else "token"
        prefix += f' - "{c.account}/{who}"'
    return prefix


class ClientLog:
    """Client error lines through ``logger``, rate-limited (``clock`` in seconds, injectable)."""

    def __init__(
        self,
        logger: logging.Logger,
        rate: float = LOG_RATE,
        burst: int = LOG_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.rate = rate
        self.burst = float(burst)
        self.clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self.suppressed = 0  # lines over the rate since the last one written

    def error(self, client: ClientIdentity, text: str) -> None:
        self.log(logging.ERROR, client, text)

    def debug(self, client: ClientIdentity, text: str) -> None:
        self.log(logging.DEBUG, client, text)

    def log(self, level: int, client: ClientIdentity, text: str) -> None:
        logger = self.logger
        if not logger.isEnabledFor(level):
            return
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens < 1.0:
            self.suppressed += 1
            return
        self._tokens -= 1.0
        if self.suppressed:
            logger.warning(
                "%d client error log lines suppressed (more than %g a second)", self.suppressed, self.rate
            )
            self.suppressed = 0
        logger.log(level, "%s - %s", client_prefix(client), text)
