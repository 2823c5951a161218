"""The JetStream API as the cluster tests ask it over nats-py: a client that reconnects for ever,
a request whose JSON reply is decoded, the same request asked again until a group has formed
(error 10008 and unanswered requests are retried), every server's meta group ready, a stream
created once the meta group has a leader, and a publish retried until acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import APIError

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


async def create_stream(js: JetStreamContext, **cfg: object) -> object:
    """The stream created once the meta group has a leader (it forms as the servers meet)."""
    for _ in range(100):
        try:
            return await js.add_stream(**cfg)  # type: ignore[arg-type]
        except (TimeoutError, nats.errors.TimeoutError):
            await asyncio.sleep(0.2)
    raise AssertionError("no meta leader")


async def publish_when_ready(js: JetStreamContext, subject: str, payload: bytes) -> int:
    """Publish to a stream just created: nats-server's servers subscribe its subjects a moment
    after the create is answered, and a publish before that has no responders (stored nowhere,
    so it is sent again). Its sequence."""
    for _ in range(100):
        try:
            return (await js.publish(subject, payload)).seq
        except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError):
            await asyncio.sleep(0.05)
    raise AssertionError(f"no stream took {subject}")


async def publish_until_acked(
    js: JetStreamContext, subject: str, payload: bytes, msg_id: str, headers: dict[str, str] | None = None
) -> int:
    """Publish with a message id until acknowledged (a retry is de-duplicated): its sequence."""
    for _ in range(200):
        try:
            hdrs = {"Nats-Msg-Id": msg_id, **(headers or {})}
            ack = await js.publish(subject, payload, timeout=1, headers=hdrs)
            return ack.seq
        except (
            TimeoutError,
            nats.errors.TimeoutError,
            nats.errors.NoRespondersError,
            nats.js.errors.NoStreamResponseError,  # no leader subscribed yet (an election)
        ):
            await asyncio.sleep(0.05)
        except APIError as e:
            if e.err_code != 10008:  # no quorum for the moment: try again
                raise
            await asyncio.sleep(0.05)
    raise AssertionError(f"{msg_id} never acknowledged")
