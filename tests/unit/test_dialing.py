"""A dial's timeout (routes, gateways and leaf nodes dial alike): a connection made while the
server's event loop was held up past the deadline (a process starved of CPU on a loaded
machine) is kept rather than dropped as timed out, and one never made still times out."""

from __future__ import annotations

import asyncio
import time

import pytest

from jetpy.server.dialing import dial


def _hold_up(seconds: float) -> None:
    """The event loop held up (the process not scheduled for a while)."""
    time.sleep(seconds)


class _Peer(asyncio.Protocol):
    def __init__(self) -> None:
        self.made = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.made.set_result(True)


async def test_a_connection_made_while_the_loop_was_held_up_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    accepted: list[asyncio.BaseTransport] = []

    class _Accepting(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.append(transport)

    server = await loop.create_server(_Accepting, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connect = loop.sock_connect

    async def held_up_while_connecting(sock: object, address: object) -> None:
        connecting = asyncio.ensure_future(connect(sock, address))  # type: ignore[arg-type]
        await asyncio.sleep(0)  # the connect is under way (made at once on loopback)
        _hold_up(0.4)  # the loop runs nothing meanwhile: it finds the deadline passed as well
        await connecting

    monkeypatch.setattr(loop, "sock_connect", held_up_while_connecting)
    peer = _Peer()
    try:
        await dial(lambda: peer, "127.0.0.1", port, 0.2)
        assert peer.made.done()
        peer.transport.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_connection_never_made_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    cancelled = asyncio.Event()

    async def never(sock: object, address: object) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    monkeypatch.setattr(loop, "sock_connect", never)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await dial(_Peer, "127.0.0.1", 9, 0.2)
    assert time.monotonic() - started >= 0.2
    assert cancelled.is_set()  # the attempt given up, not left running
