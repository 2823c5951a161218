"""What the mirror and source tests share: API requests, waiting for a stream to fill, and
reading a stream back whole (over nats-py, against any server)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client

__all__ = ["api", "holds", "messages", "until"]


async def api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(f"$JS.API.{subject}", data, timeout=5)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


async def until(probe: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not await probe():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.05)


async def holds(nc: Client, stream: str, n: int, within: float = 10.0) -> dict[str, Any]:
    """Wait until ``stream`` holds ``n`` messages; its info then."""
    info: dict[str, Any] = {}

    async def probe() -> bool:
        nonlocal info
        info = await api(nc, f"STREAM.INFO.{stream}", {"deleted_details": True})
        return bool(info["state"]["messages"] == n)

    await until(probe, within)
    return info


async def messages(nc: Client, stream: str) -> list[dict[str, Any]]:
    """Every message of ``stream`` as MSG.GET answers it, in order."""
    st = (await api(nc, f"STREAM.INFO.{stream}"))["state"]
    out = []
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        got = await api(nc, f"STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" in got:
            out.append(got["message"])
    return out
