"""The JetStream API as the cluster tests ask it over nats-py: a client that reconnects for ever,
a request whose JSON reply is decoded, the same request asked again until a group has formed
(error 10008 and unanswered requests are retried), and every server's meta group ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import nats
from nats.aio.client import Client

UNANSWERED = (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError)


@contextlib.asynccontextmanager
async def connect(url: str, user: str | None = None, reconnect_wait: float = 2.0) -> AsyncIterator[Client]:
    """A client of the server at url (as user, whose password is its name, if given) that
    reconnects for ever, reconnect_wait apart; closed on leaving."""
    if user is not None:
        url = f"nats://{user}:{user}@{url.removeprefix('nats://')}"
    nc = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=reconnect_wait)
    try:
        yield nc
    finally:
        await nc.close()


async def req(nc: Client, subject: str, body: str | dict[str, Any] | None = None, wait: float = 5.0) -> Any:
    """The decoded JSON reply to body (a dict sent as JSON, a string as it is, None as nothing)."""
    data = b"" if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
    msg = await nc.request(subject, data, timeout=wait)
    return json.loads(msg.data)


async def until(
    nc: Client,
    subject: str,
    body: str | dict[str, Any] | None = None,
    within: float = 30.0,
    each: float = 1.0,
) -> Any:
    """The reply once there is one without error 10008 (a group forming, a leader missing), each
    request waiting up to each seconds for its answer."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            got = await req(nc, subject, body, wait=each)
            if got.get("error", {}).get("err_code") != 10008:
                return got
        except UNANSWERED:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no answer to {subject}")
        await asyncio.sleep(0.2)


async def meta_ready(urls: list[str], user: str | None = None, within: float = 30.0) -> None:
    """Every server answers $JS.API.INFO without an error (its meta group has a leader)."""
    for url in urls:
        async with connect(url, user) as nc:
            deadline = asyncio.get_running_loop().time() + within
            while True:
                try:
                    got = await req(nc, "$JS.API.INFO", wait=1.0)
                    if "error" not in got:
                        break
                except UNANSWERED:
                    pass
                assert asyncio.get_running_loop().time() < deadline, f"{url}: no meta leader"
                await asyncio.sleep(0.2)
