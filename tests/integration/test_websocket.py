"""WebSocket clients (tests/wsclient.py, an RFC 6455 client written for the tests, and Debian's
headless Chromium): the upgrade and its refusals, NATS over binary frames with the server's
auth and permissions, compression, fragmented and control frames, origins, the handshake
timeout, wss over TLS, and malformed frames closed with 1002. The exchanges are compared with
nats-server 2.15.1's WebSocket port."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import jetpy
from certs import make_pki
from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions, TlsOptions, User, WebSocketOptions
from wsclient import WsClient, WsRefused

C = b'CONNECT {"verbose":false,"pedantic":false,"user":"u","pass":"u"}\r\n'


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield
    gc.collect()


@asynccontextmanager
async def running(**ws: Any) -> AsyncIterator[Server]:
    settings = {"port": -1, "host": "127.0.0.1", "no_tls": True, **ws}
    opts = ServerOptions(
        host="127.0.0.1",
        port=0,
        http_port=-1,
        websocket=WebSocketOptions(**settings),
        users=[User(user="u", password="u", permissions={"publish": {"allow": ["ok.>"]}})],
    )
    async with jetpy.Server(opts) as srv:
        yield srv


async def test_nats_over_websocket_with_auth_and_permissions() -> None:
    async with running(compression=True) as srv:
        ws = await WsClient.connect(srv.ws_port, compression=True)
        assert ws.deflate
        opcode, info = await ws.frame()
        assert opcode == 2 and info.startswith(b"INFO {") and json.loads(info[5:])["auth_required"]
        await ws.send(C + b"SUB ok.x 1\r\nPUB ok.x 5\r\nhello\r\nPUB nope 1\r\nx\r\nPING\r\n")
        out = await ws.read_until(b"PONG")
        assert (
            out
            == b"MSG ok.x 1 5\r\nhello\r\n-ERR 'Permissions Violation for Publish to \"nope\"'\r\nPONG\r\n"
        )
        # a big message comes back deflated (the client inflates), fragments and pings are taken
        await ws.send(b"PUB ok.x 1000\r\n" + b"z" * 1000 + b"\r\n", fin=False)
        await ws.send(b"x" * 4, opcode=9)
        assert await ws.frame() == (10, b"xxxx")
        await ws.send(b"PING\r\n", opcode=0)
        out = await ws.read_until(b"PONG")
        assert out.startswith(b"MSG ok.x 1 1000\r\n" + b"z" * 1000)
        conn = next(iter(srv.connections.values()))
        assert conn.client_type == "websocket" and conn.user == "u"
        await ws.send(struct.pack("!H", 1000) + b"bye", opcode=8)
        assert await ws.frame() == (8, struct.pack("!H", 1000) + b"bye")
        await asyncio.sleep(0.1)
        assert srv.closed_connections[-1].close_reason == "Client Closed"


async def test_wrong_password_and_protocol_errors_close_with_a_status() -> None:
    async with running() as srv:
        ws = await WsClient.connect(srv.ws_port)
        await ws.frame()
        await ws.send(b'CONNECT {"verbose":false,"user":"u","pass":"x"}\r\n')
        assert await ws.read_until(b"Violation") == b"-ERR 'Authorization Violation'\r\n"
        assert (await ws.frame())[0] == 8 and ws.closed_with == (1008, b"Authentication Failure")
        ws = await WsClient.connect(srv.ws_port)
        await ws.frame()
        await ws.send(b"PING\r\n", mask=False)  # closed at once, with a close frame saying why
        assert await asyncio.wait_for(ws.reader.read(), 2) == b"\x88\x12\x03\xeamask bit missing"
        await asyncio.sleep(0.05)
        assert srv.closed_connections[-1].close_reason == "Read Error"


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"method": "POST"}, 405),
        ({"origin": "http://elsewhere.example:80"}, 403),
    ],
)
async def test_refused_upgrades(kwargs: dict[str, Any], status: int) -> None:
    async with running(same_origin=True) as srv:
        with pytest.raises(WsRefused) as info:
            await WsClient.connect(srv.ws_port, **kwargs)
        assert info.value.status == status
        ws = await WsClient.connect(srv.ws_port, origin=f"http://127.0.0.1:{srv.ws_port}")
        assert (await ws.frame())[1].startswith(b"INFO ")


async def test_allowed_origins_and_the_handshake_timeout() -> None:
    async with running(allowed_origins=("https://app.example",), handshake_timeout=0.3) as srv:
        ws = await WsClient.connect(srv.ws_port, origin="https://app.example")
        assert (await ws.frame())[1].startswith(b"INFO ")
        with pytest.raises(WsRefused):
            await WsClient.connect(srv.ws_port, origin="http://app.example")  # another scheme
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.ws_port)
        assert await asyncio.wait_for(reader.read(), 2) == b""  # never upgraded: closed
        writer.close()


async def test_wss(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    tls = TlsOptions(cert_file=str(pki.server_cert), key_file=str(pki.server_key))
    async with running(no_tls=False, tls=tls) as srv:
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        ws = await WsClient.connect(srv.ws_port, tls=ctx)
        assert (await ws.frame())[1].startswith(b"INFO ")
        await ws.send(C + b"PING\r\n")
        assert await ws.read_until(b"PONG") == b"PONG\r\n"


# -- against nats-server 2.15.1 --------------------------------------------------------------


@pytest.fixture
def both(tmp_path: Path) -> Iterator[dict[str, Proc]]:
    if REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server is not installed")
    conf = tmp_path / "ws.conf"
    conf.write_text(
        'websocket { port: -1, host: "127.0.0.1", no_tls: true, compression: true }\n'
        'authorization { users [ {user: u, password: u, permissions: {publish: "ok.>"}} ] }\n'
    )
    procs = {
        "jetpy": start_process(
            [*JETPY_SERVER, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp_path / "j.log"
        ),
        "2.15.1": start_process(
            [REFERENCE_NEWEST, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp_path / "r.log"
        ),
    }
    yield procs
    for p in procs.values():
        p.stop(signal.SIGKILL)


def ws_port(proc: Proc) -> int:
    import re

    m = re.search(r"Listening for websocket clients on ws://[^:]+:(\d+)", proc.log())
    assert m, proc.log()
    return int(m.group(1))


async def exchange(port: int) -> list[Any]:
    seen: list[Any] = []
    ws = await WsClient.connect(port, compression=True)
    opcode, info = await ws.frame()
    seen.append(
        (opcode, sorted(k for k in json.loads(info[5:]) if k in ("auth_required", "headers", "max_payload")))
    )
    await ws.send(C + b"SUB ok.x 1\r\nPUB ok.x 5\r\nhello\r\nPUB no 1\r\nx\r\nPING\r\n")
    seen.append(await ws.read_until(b"PONG"))
    await ws.send(b"ab", opcode=9)
    seen.append(await ws.frame())
    await ws.send(b"PING\r\n", opcode=0)  # a continuation with no message started: closed
    seen.append(await asyncio.wait_for(ws.reader.read(), 2))
    try:
        await WsClient.connect(port, method="POST")
    except WsRefused as e:
        seen.append((e.status, e.head.split(b"\r\n")[0]))
    return seen


async def test_websocket_as_nats_server(both: dict[str, Proc]) -> None:
    ours, theirs = await asyncio.gather(exchange(ws_port(both["jetpy"])), exchange(ws_port(both["2.15.1"])))
    # nats-server writes a close frame (1002 and the reason) before it closes the connection, but
    # closing with the client's frame unread resets it: the client sees the close frame or nothing
    assert theirs[3] in (b"", b"\x88\x1c\x03\xeainvalid continuation frame"), theirs[3]
    assert ours[:3] + ours[4:] == theirs[:3] + theirs[4:]
    # jetpy writes it and closes with nothing unread: the client always sees it
    assert ours[3] == b"\x88\x1c\x03\xeainvalid continuation frame", ours[3]
    assert ours[4] == (405, b"HTTP/1.1 405 Method Not Allowed")
    await asyncio.sleep(0.1)
    for p in both.values():
        log = p.log()
        assert "websocket handshake error: request method must be GET" in log
        assert "- wid:" in log and '"$G/user:u" - read error: invalid continuation frame' in log


async def _after_bad_frame(port: int, send: Callable[[WsClient], Awaitable[None]]) -> bytes:
    """What a client reads, up to the end, after one frame the server cannot take."""
    ws = await WsClient.connect(port)
    await ws.frame()  # INFO
    await send(ws)
    try:
        return await asyncio.wait_for(ws.reader.read(), 2)
    except ConnectionResetError:
        return b""


BAD_FRAMES: dict[str, tuple[Callable[[WsClient], Awaitable[None]], int]] = {
    "mask bit missing": (lambda ws: ws.send(b"PING\r\n", mask=False), 1002),
    "unknown opcode 3": (lambda ws: ws.send(b"x", opcode=3), 1002),
    "control frame does not have final bit set": (lambda ws: ws.send(b"x", opcode=9, fin=False), 1002),
}


@pytest.mark.parametrize("reason", list(BAD_FRAMES))
async def test_bad_frames_get_nats_servers_close_frame(both: dict[str, Proc], reason: str) -> None:
    """Each framing error closes with a close frame of 1002 and the reason, as nats-server 2.15.1
    writes it (its client may instead see the connection reset: it closes with data unread)."""
    send, status = BAD_FRAMES[reason]
    ours, theirs = await asyncio.gather(
        _after_bad_frame(ws_port(both["jetpy"]), send), _after_bad_frame(ws_port(both["2.15.1"]), send)
    )
    want = bytes((0x88, 2 + len(reason))) + struct.pack("!H", status) + reason.encode()
    assert ours == want
    assert theirs in (b"", want), theirs
