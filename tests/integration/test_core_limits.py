"""Limits and liveness against an embedded server: server PINGs and stale connections, max
payload (client- and server-side), max control line, max connections, and slow consumers whose
memory stays bounded while everyone else carries on."""

from __future__ import annotations

import asyncio
import gc
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import nats
import pytest
from nats.aio.client import Client

import jetpy
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield
    gc.collect()  # see test_core_auth: keep finalizers of dead clients out of later AST building


@asynccontextmanager
async def running(**opts: object) -> AsyncIterator[Server]:
    async with jetpy.Server(ServerOptions(host="127.0.0.1", port=0, **opts)) as srv:  # type: ignore[arg-type]
        yield srv


async def _ignore(e: Exception) -> None:
    pass


async def connect(srv: Server, **kw: object) -> Client:
    return await nats.connect(srv.client_url, error_cb=_ignore, **kw)  # type: ignore[arg-type]


async def raw(
    srv: Server, first: bytes = b'CONNECT {"verbose":false}\r\n'
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    assert (await reader.readline()).startswith(b"INFO ")
    writer.write(first)
    return reader, writer


async def test_server_pings_and_closes_stale_connections() -> None:
    async with running(ping_interval=0.2, ping_max=2) as srv:
        reader, writer = await raw(srv)
        start = time.monotonic()
        lines = [await asyncio.wait_for(reader.readline(), 3) for _ in range(3)]
        assert lines == [b"PING\r\n", b"PING\r\n", b"-ERR 'Stale Connection'\r\n"]
        assert await reader.read() == b""
        assert time.monotonic() - start >= 0.5  # ping_max PINGs went unanswered, one interval each
        assert srv.closed_connections[-1].close_reason == "Stale Connection"
        writer.close()


async def test_answered_pings_and_activity_keep_a_connection() -> None:
    async with running(ping_interval=0.1, ping_max=1) as srv:
        nc = await connect(srv)  # nats-py answers PINGs
        reader, writer = await raw(srv)  # never answers, but keeps sending
        await asyncio.sleep(0.02)
        for _ in range(8):
            writer.write(b"PUB x 1\r\nx\r\n")
            await asyncio.sleep(0.05)
        assert nc.is_connected
        assert len(srv.connections) == 2
        # nats-server's rule: a client active within the interval is only pinged to measure RTT
        data = b""
        while b"PING" not in data:
            data += await asyncio.wait_for(reader.read(100), 1)
        assert data.count(b"PING") == 1
        await nc.close()
        writer.close()


async def test_max_payload_client_side_and_server_side() -> None:
    async with running(max_payload=1024) as srv:
        nc = await connect(srv)
        assert nc.max_payload == 1024
        with pytest.raises(nats.errors.MaxPayloadError):
            await nc.publish("big", b"x" * 1025)
        await nc.publish("big", b"x" * 1024)
        await nc.flush()
        reader, writer = await raw(srv)
        writer.write(b"PUB big 1025\r\n")
        assert await asyncio.wait_for(reader.read(), 3) == b"-ERR 'Maximum Payload Violation'\r\n"
        assert nc.is_connected
        await nc.close()
        writer.close()


async def test_max_control_line() -> None:
    async with running(max_control_line=64) as srv:
        reader, writer = await raw(srv)
        writer.write(b"SUB " + b"a" * 70 + b" 1\r\n")
        assert await asyncio.wait_for(reader.read(), 3) == b"-ERR 'maximum control line exceeded'\r\n"
        writer.close()
        reader, writer = await raw(srv)
        writer.write(b"SUB " + b"a" * 70)  # still no newline: caught anyway
        assert await asyncio.wait_for(reader.read(), 3) == b"-ERR 'maximum control line exceeded'\r\n"
        writer.close()


async def test_max_connections() -> None:
    async with running(max_connections=2) as srv:
        a, b = await connect(srv), await connect(srv)
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        assert (await reader.readline()).startswith(b"INFO ")
        assert await asyncio.wait_for(reader.read(), 3) == b"-ERR 'maximum connections exceeded'\r\n"
        writer.close()
        await a.close()
        await asyncio.sleep(0.05)
        c = await connect(srv)  # a slot is free again
        await c.flush()
        await b.close()
        await c.close()


async def test_slow_consumer_is_cut_off_and_memory_stays_bounded() -> None:
    max_pending = 256 * 1024
    async with running(max_pending=max_pending) as srv:
        # a subscriber that never reads, with a small receive window so the server backs up fast
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", srv.port))
        sock.sendall(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n')
        sock.setblocking(False)
        slow = None
        for _ in range(100):
            slow = next((c for c in srv.connections.values() if c.subs), None)
            if slow is not None:
                break
            await asyncio.sleep(0.01)
        assert slow is not None
        # a healthy pair keeps talking throughout
        pub, other = await connect(srv), await connect(srv)
        healthy = await other.subscribe("fine")
        await other.flush()
        payload = b"x" * 1024
        worst = 0
        for i in range(4000):
            await pub.publish("flood", payload)
            if i % 50 == 0:
                await pub.flush()
                t = slow.transport
                held = len(slow.out) + (t.get_write_buffer_size() if t is not None and not slow.closed else 0)
                worst = max(worst, held)
            if slow.closed:
                break
        await pub.flush()
        assert slow.closed
        assert slow.close_reason.startswith("Slow Consumer")
        assert srv.slow_consumers == 1
        assert worst <= max_pending + 256 * 1024  # the limit plus at most one read's worth
        await pub.publish("fine", b"still here")
        assert (await healthy.next_msg(timeout=2)).data == b"still here"
        assert pub.is_connected and other.is_connected
        await pub.close()
        await other.close()
        sock.close()
