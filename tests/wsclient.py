"""A small RFC 6455 client for the tests: the upgrade request, masked frames out, frames in
(deflated ones inflated), pings and closes. Written from the RFC so that the server is tested by
something other than itself; it speaks to nats-server's WebSocket port as well."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import ssl
import struct
import zlib

__all__ = ["WsClient", "WsRefused"]

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WsRefused(Exception):
    """The server answered the upgrade with something other than 101."""

    def __init__(self, status: int, head: bytes) -> None:
        super().__init__(f"upgrade refused: {status}")
        self.status = status
        self.head = head


class WsClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, deflate: bool) -> None:
        self.reader = reader
        self.writer = writer
        self.deflate = deflate
        self.closed_with: tuple[int, bytes] | None = None

    @classmethod
    async def connect(
        cls,
        port: int,
        *,
        origin: str | None = None,
        compression: bool = False,
        tls: ssl.SSLContext | None = None,
        extra: str = "",
        method: str = "GET",
    ) -> WsClient:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1" if tls else None
        )
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"{method} / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        )
        if origin:
            request += f"Origin: {origin}\r\n"
        if compression:
            request += "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
        writer.write((request + extra + "\r\n").encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        status = int(head.split(b" ", 2)[1])
        if status != 101:
            writer.close()
            raise WsRefused(status, head)
        accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest())
        assert b"Sec-WebSocket-Accept: " + accept in head, head
        return cls(reader, writer, b"permessage-deflate" in head)

    async def send(self, data: bytes, opcode: int = 2, fin: bool = True, mask: bool = True) -> None:
        b0 = (0x80 if fin else 0) | opcode
        n = len(data)
        if n <= 125:
            header = bytes((b0, (0x80 if mask else 0) | n))
        elif n < 65536:
            header = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
        else:
            header = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
        if mask:
            key = os.urandom(4)
            data = bytes(b ^ key[i % 4] for i, b in enumerate(data))
            header += key
        self.writer.write(header + data)
        await self.writer.drain()

    async def frame(self, within: float = 5.0) -> tuple[int, bytes]:
        """The next frame: (opcode, payload), deflated payloads inflated."""
        b0, b1 = await asyncio.wait_for(self.reader.readexactly(2), within)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
        assert not b1 & 0x80, "a server must not mask"
        payload = await self.reader.readexactly(n)
        if b0 & 0x40:
            payload = zlib.decompressobj(-zlib.MAX_WBITS).decompress(payload + b"\x00\x00\xff\xff")
        if b0 & 0x0F == 8:
            self.closed_with = (struct.unpack("!H", payload[:2])[0], payload[2:]) if payload else (1005, b"")
        return b0 & 0x0F, payload

    async def read_until(self, marker: bytes, within: float = 5.0) -> bytes:
        """Data frames' payloads until ``marker`` has been seen (or a close frame)."""
        out = b""
        while marker not in out:
            opcode, payload = await self.frame(within)
            if opcode == 8:
                break
            if opcode in (0, 1, 2):
                out += payload
        return out

    async def close(self) -> None:
        try:
            await self.send(struct.pack("!H", 1000), opcode=8)
        except (ConnectionError, RuntimeError):
            pass
        self.writer.close()
