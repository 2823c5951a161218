"""Lame duck mode (``--signal ldm``, SIGUSR2): leave gracefully, as nats-server does.

Owns the sequence and its timing: stop accepting (every listener closes), tell every client
that speaks the async-INFO protocol (``protocol`` 1) with an INFO carrying ``"ldm": true`` (its
library then reconnects elsewhere), wait ``lame_duck_grace_period``, then close the clients one
by one (closed reason ``Server Shutdown``) spread over what is left of ``lame_duck_duration``
(at most a second apart, at least half the interval, at random), and return: the caller shuts
the server down and the process exits. nats-server's log lines: ``Entering lame duck mode, stop
accepting new clients``, ``Closing existing clients``, ``Initiating Shutdown...``. Knows the
server only as a :class:`LameDuckHost`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from typing import Protocol

__all__ = ["LameDuckHost", "lame_duck"]

log = logging.getLogger("jetpy.server")

MAX_INTERVAL = 1.0  # seconds at most between two client closes (nats-server's cap)
MIN_SPREAD = 1.0  # seconds to spread the closes over when the grace period eats the duration


class Client(Protocol):
    def close(self, reason: str, abort: bool = False) -> None: ...


class LameDuckHost(Protocol):
    def stop_accepting(self) -> None:
        """Close every listener: no new client gets in."""

    def clients(self) -> Sequence[Client]:
        """The clients connected now."""
        ...

    def announce_ldm(self) -> None:
        """Send every client that takes async INFO (protocol 1) the INFO with ``ldm``."""


async def lame_duck(host: LameDuckHost, duration: float, grace: float) -> None:
    """Run lame duck mode to its end (every client closed); the caller then shuts down."""
    log.info("Entering lame duck mode, stop accepting new clients")
    host.stop_accepting()
    clients = list(host.clients())
    if clients:
        host.announce_ldm()
        spread = duration - grace
        if spread <= 0:
            spread = MIN_SPREAD
        interval = min(spread / len(clients), MAX_INTERVAL)
        await asyncio.sleep(grace)
        log.info("Closing existing clients")
        for i, c in enumerate(clients):
            c.close("Server Shutdown")
            if i < len(clients) - 1:
                await asyncio.sleep(max(random.uniform(0, interval), interval / 2))
    log.info("Initiating Shutdown...")
