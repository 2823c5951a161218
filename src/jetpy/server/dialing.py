"""Dialling another server: what every link this server solicits (routes, gateways, leaf nodes)
does the same way.

Owns one dial (a TCP connection, and over TLS the handshake first, the peer verified by the
name it was dialled by, both within a timeout; a connection already made when a held-up event
loop finds the deadline passed is kept, since a gossiped route is dialled once only), how a
failed dial is worded (Go's ``dial tcp host:port: connect: connection refused``, as nats-server
logs it), the credentials in a URL, their redaction in logs, and ``host:port`` spelling (IPv6
in brackets). How often and how long a link is dialled again is its owner's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from jetpy.server.options import TlsOptions

__all__ = ["credentials", "dial", "dial_error", "hostport", "redact"]

CATCH_UP_TURNS: Final = 8
"""Turns of the event loop a dial past its deadline still gets, without waiting, to finish a
connection already made (what a loop that was held up finds ready all at once: the connect's
completion, then the transport's set-up, one turn each)."""


def credentials(url: str) -> tuple[str, str]:
    """The user and password of ``nats://user:pass@host:port`` ("" when absent)."""
    parts = urlsplit(url)
    return unquote(parts.username or ""), unquote(parts.password or "")


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def redact(url: str) -> str:
    """``url`` with its password shown as ``[REDACTED]``, as nats-server logs URLs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{parts.username}:[REDACTED]@{host}"


def dial_error(host: str, port: int, e: OSError) -> str:
    """A dial failure as Go words it (``dial tcp 127.0.0.1:1: connect: connection refused``)."""
    if isinstance(e, TimeoutError):
        return f"dial tcp {hostport(host, port)}: i/o timeout"
    if e.errno is not None:
        return f"dial tcp {hostport(host, port)}: connect: {os.strerror(e.errno).lower()}"
    return f"dial tcp {hostport(host, port)}: {e}"


async def dial(
    factory: Callable[[], asyncio.Protocol],
    host: str,
    port: int,
    within: float,
    tls: TlsOptions | None = None,
    context: ssl.SSLContext | None = None,
) -> None:
    """Connect ``factory``'s protocol to ``host:port`` within ``within`` seconds (plus the TLS
    handshake's own timeout when ``tls`` is set: ``context`` then verifies the peer as ``host``).
    Raises ``OSError`` (``TimeoutError`` included)."""
    loop = asyncio.get_running_loop()
    kwargs: dict[str, Any] = {}
    if tls is not None:
        kwargs = {"ssl": context, "server_hostname": host, "ssl_handshake_timeout": tls.timeout}
        within += tls.timeout
    task = loop.create_task(loop.create_connection(factory, host, port, **kwargs))
    try:
        await asyncio.wait_for(asyncio.shield(task), within)
        return
    except TimeoutError:
        # A process that could not run for a while (a loaded machine) finds the deadline passed
        # and the connection made in the same turn of its loop: the connection counts. Only
        # one still not made once the loop has caught up (a few turns, no waiting) times out.
        for _ in range(CATCH_UP_TURNS):
            if task.done():
                break
            await asyncio.sleep(0)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise
    except BaseException:
        task.cancel()
        raise
    task.result()  # the connection, or the dial's own error
