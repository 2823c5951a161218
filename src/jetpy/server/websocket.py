"""WebSocket: the layer that lets browser clients (nats.ws, nats.js) speak NATS over RFC 6455.

Owns the upgrade handshake as nats-server answers it (GET only; ``Upgrade: websocket``,
``Connection: Upgrade``, a ``Sec-WebSocket-Key`` and version 13 required, each refusal an HTTP
error with nats-server's reason in the log; the ``Origin`` checked against ``same_origin`` and
``allowed_origins``; ``permessage-deflate`` agreed when ``compression`` is on and the client
offers it, without context takeover), then the frames: clients must mask theirs; binary and
text data frames carry the NATS protocol, continuation frames included; pings are answered,
a close is answered and ends the connection; a malformed frame closes the connection at once
(``read error: mask bit missing`` in the log), as nats-server closes it. Everything the server writes goes out as one unmasked binary
frame per write (deflated above 64 bytes when compression was agreed). The connection closes
with a close frame whose status follows its reason (nats-server's mapping).

A :class:`~jetpy.server.stack.Layer`: it knows nothing of NATS, sockets or auth; the connection
above it is a client like any other (same auth, same permissions), named ``wid:N`` in the log
and ``websocket`` in /connz.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import urllib.parse
import zlib
from dataclasses import dataclass
from typing import Final

from jetpy.server.stack import LayerError

__all__ = ["WebSocketLayer", "WebSocketSettings", "close_status", "origin_parts"]

GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_REQUEST: Final = 16 * 1024  # an upgrade request's head; more is refused
MAX_CONTROL_PAYLOAD: Final = 125
COMPRESS_THRESHOLD: Final = 64  # nats-server does not deflate smaller writes
_TAIL: Final = b"\x00\x00\xff\xff"  # what permessage-deflate strips from a deflated message

_CONTINUATION, _TEXT, _BINARY, _CLOSE, _PING, _PONG = 0, 1, 2, 8, 9, 10

# nats-server's close status per closed-connection reason (anything else: 1011)
_CLOSE_STATUS: Final = {
    "Client Closed": 1000,
    "Authentication Timeout": 1008,
    "Authentication Failure": 1008,
    "Slow Consumer (Pending Bytes)": 1008,
    "Slow Consumer (Write Deadline)": 1008,
    "Maximum Connections Exceeded": 1008,
    "Maximum Control Line Exceeded": 1008,
    "Maximum Subscriptions Exceeded": 1008,
    "TLS Handshake Failure": 1015,
    "Parse Error": 1002,
    "Protocol Violation": 1002,
    "Bad Client Protocol Version": 1002,
    "Maximum Message Payload Exceeded": 1009,
    "Server Shutdown": 1001,
    "Write Error": 1006,
    "Read Error": 1006,
    "Stale Connection": 1006,
}


def close_status(reason: str) -> int:
    return _CLOSE_STATUS.get(reason, 1011)


def origin_parts(origin: str) -> tuple[str, str, str] | None:
    """(scheme, host, port) of an origin URL, the port defaulted by scheme; None if unusable."""
    u = urllib.parse.urlsplit(origin)
    if not u.scheme or not u.netloc:
        return None
    return _host_port(u.scheme, u.netloc)


def _host_port(scheme: str, hostport: str) -> tuple[str, str, str]:
    host, sep, port = hostport.rpartition(":")
    if not sep or "]" in port:  # no port (or an IPv6 address without one)
        host, port = hostport, "443" if scheme in ("https", "wss") else "80"
    return scheme, host.lower(), port


@dataclass(frozen=True, slots=True)
class WebSocketSettings:
    """What the upgrade checks: origins (``allowed``: (scheme, host, port) triples), compression,
    and the scheme the listener serves (https with TLS)."""

    compression: bool = False
    same_origin: bool = False
    allowed: frozenset[tuple[str, str, str]] = frozenset()
    tls: bool = False
    max_message: int = 8 * 1024 * 1024  # a compressed message's bound, in and decompressed


class WebSocketLayer:
    """One connection's WebSocket session: the upgrade, then frames (see the module doc)."""

    __slots__ = (
        "_buf",
        "_closed",
        "_compressed",
        "_deflate_parts",
        "_final",
        "_frame_left",
        "_header_size",
        "_in_message",
        "_mask",
        "_mask_pos",
        "_out",
        "_queued",
        "compress",
        "ready",
        "settings",
    )

    def __init__(self, settings: WebSocketSettings) -> None:
        self.settings = settings
        self.ready = False
        self.compress = False
        self._buf = bytearray()  # unparsed bytes (the request, then frame headers)
        self._out = bytearray()  # what the layer itself must write (the 101, pongs, a close)
        self._queued = bytearray()  # protocol bytes sent before the upgrade was done
        self._frame_left = 0  # payload bytes of the current data frame still to come
        self._mask = b""
        self._mask_pos = 0
        self._compressed = False  # the current message is deflated
        self._in_message = False  # a data message has started (continuations may follow)
        self._deflate_parts: list[bytes] = []
        self._final = False  # the current data frame ends its message
        self._header_size = 0  # of the frame header just read
        self._closed = False  # a close frame was sent: nothing more in or out

    # -- Layer ------------------------------------------------------------------------------------

    def receive(self, data: bytes) -> bytes:
        if self._closed:
            return b""
        self._buf += data
        if not self.ready and not self._upgrade():
            return b""
        return self._frames()

    def send(self, data: bytes) -> bytes:
        if self._closed:
            return b""
        if not self.ready:
            self._queued += data
            return b""
        return self._frame(data)

    def pending(self) -> bytes:
        if not self._out:
            return b""
        out = bytes(self._out)
        self._out.clear()
        return out

    def closing(self, reason: str = "Client Closed") -> bytes:
        if not self.ready or self._closed:
            return b""
        self._closed = True  # one close frame only
        body = reason.encode()[: MAX_CONTROL_PAYLOAD - 2]
        return self._control(_CLOSE, struct.pack("!H", close_status(reason)) + body)

    # -- the upgrade ------------------------------------------------------------------------------

    def _upgrade(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_REQUEST:
                self._refuse(431, "request header too large")
            return False
        head = bytes(self._buf[:end]).decode("latin-1")
        rest = self._buf[end + 4 :]
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        headers: dict[str, list[str]] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers.setdefault(name.strip().lower(), []).append(value.strip())
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._refuse(400, "malformed request line")
        if parts[0] != "GET":
            self._refuse(405, "request method must be GET")
        host = headers.get("host", [""])[0]
        if not host:
            self._refuse(400, "'Host' missing in request")
        if not _contains(headers, "upgrade", "websocket"):
            self._refuse(400, "invalid value for header 'Upgrade'")
        if not _contains(headers, "connection", "upgrade"):
            self._refuse(400, "invalid value for header 'Connection'")
        key = headers.get("sec-websocket-key", [""])[0]
        if not key:
            self._refuse(400, "key missing")
        if not _contains(headers, "sec-websocket-version", "13"):
            self._refuse(400, "invalid version")
        problem = self._origin_problem(headers, host)
        if problem:
            self._refuse(403, f"origin not allowed: {problem}")
        if rest:
            self._refuse(400, "client sent data before handshake is complete")
        self.compress = self.settings.compression and _offers_deflate(headers)
        accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        response = (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n"
        )
        if self.compress:
            response += (
                "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; "
                "client_no_context_takeover\r\n"
            )
        self._out += (response + "\r\n").encode()
        self._buf.clear()
        self.ready = True
        if self._queued:
            self._out += self._frame(bytes(self._queued))
            self._queued.clear()
        return True

    def _origin_problem(self, headers: dict[str, list[str]], host: str) -> str:
        s = self.settings
        if not s.same_origin and not s.allowed:
            return ""
        origin = (headers.get("origin") or headers.get("sec-websocket-origin") or [""])[0]
        if not origin:  # not a browser: the origin model does not apply (RFC 6455, 1.6)
            return ""
        parts = origin_parts(origin)
        if parts is None:
            return f"parse {origin!r}: invalid URI for request"
        if s.same_origin and parts[1:] != _host_port("https" if s.tls else "http", host)[1:]:
            return "not same origin"
        if s.allowed and parts not in s.allowed:
            return "not in the allowed list"
        return ""

    def _refuse(self, status: int, reason: str) -> None:
        text = {
            400: "Bad Request",
            403: "Forbidden",
            405: "Method Not Allowed",
            431: "Request Header Fields Too Large",
        }[status]
        body = f"{text}\n"
        self._out += (
            f"HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}"
        ).encode()
        raise LayerError(f"websocket handshake error: {reason}", "Protocol Violation", anonymous=True)

    # -- frames -----------------------------------------------------------------------------------

    def _frames(self) -> bytes:
        """Every complete frame in the buffer: data frames' payload out, control frames handled."""
        out = bytearray()
        buf = self._buf
        pos = 0
        while pos < len(buf):
            if self._frame_left:  # the rest of a data frame's payload, as far as it came
                n = min(self._frame_left, len(buf) - pos)
                self._payload(bytes(buf[pos : pos + n]), out)
                pos += n
                self._frame_left -= n
                if not self._frame_left and self._compressed and self._final:
                    out += self._inflate()
                continue
            header = self._header(buf, pos)
            if header is None:
                break
            pos, opcode, final, rsv1, length = header
            if opcode >= _CLOSE:
                if len(buf) - pos < length:
                    pos -= self._header_size  # wait for the whole control frame
                    break
                payload = self._unmask(bytes(buf[pos : pos + length]))
                pos += length
                self._control_frame(opcode, payload)
                continue
            self._data_frame(opcode, final, rsv1, length)
            if not length and self._compressed and final:
                out += self._inflate()
        del buf[:pos]
        return bytes(out)

    def _header(self, buf: bytearray, pos: int) -> tuple[int, int, bool, bool, int] | None:
        """The frame header at ``pos``: (payload position, opcode, final, rsv1, payload length),
        or None while incomplete. Raises LayerError (after a 1002 close) for a bad one."""
        if len(buf) - pos < 2:
            return None
        b0, b1 = buf[pos], buf[pos + 1]
        opcode, final, rsv1 = b0 & 0x0F, bool(b0 & 0x80), bool(b0 & 0x40)
        if not b1 & 0x80:
            self._protocol_error("mask bit missing")
        length = b1 & 0x7F
        start = pos + 2
        if length == 126:
            if len(buf) - start < 2:
                return None
            (length,) = struct.unpack_from("!H", buf, start)
            start += 2
        elif length == 127:
            if len(buf) - start < 8:
                return None
            (length,) = struct.unpack_from("!Q", buf, start)
            start += 8
        if len(buf) - start < 4:
            return None
        self._mask = bytes(buf[start : start + 4])
        self._mask_pos = 0
        start += 4
        self._header_size = start - pos
        if opcode >= _CLOSE:
            if opcode not in (_CLOSE, _PING, _PONG):
                self._protocol_error(f"unknown opcode {opcode}")
            if length > MAX_CONTROL_PAYLOAD:
                self._protocol_error(
                    f"control frame length bigger than maximum allowed of {MAX_CONTROL_PAYLOAD} bytes"
                )
            if not final:
                self._protocol_error("control frame does not have final bit set")
        elif opcode not in (_CONTINUATION, _TEXT, _BINARY):
            self._protocol_error(f"unknown opcode {opcode}")
        return start, opcode, final, rsv1, length

    def _data_frame(self, opcode: int, final: bool, rsv1: bool, length: int) -> None:
        if opcode == _CONTINUATION:
            if not self._in_message or rsv1:
                self._protocol_error("invalid continuation frame")
        else:
            if self._in_message:
                self._protocol_error(
                    "new message started before final frame for previous message was received"
                )
            if rsv1 and not self.compress:
                self._protocol_error("compressed frame received without negotiated permessage-deflate")
            self._compressed = rsv1
        self._in_message = not final
        self._final = final
        self._frame_left = length

    def _payload(self, data: bytes, out: bytearray) -> None:
        data = self._unmask(data)
        if self._compressed:
            self._deflate_parts.append(data)
            if sum(map(len, self._deflate_parts)) > self.settings.max_message:
                self._close_now(1009, "message too big")
        else:
            out += data

    def _inflate(self) -> bytes:
        data = b"".join(self._deflate_parts) + _TAIL
        self._deflate_parts = []
        self._compressed = False
        d = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            plain = d.decompress(data, self.settings.max_message + 1)
        except zlib.error:
            self._close_now(1007, "invalid compressed data")
        if len(plain) > self.settings.max_message:
            self._close_now(1009, "message too big")
        return plain

    def _unmask(self, data: bytes) -> bytes:
        mask = self._mask
        if not data:
            return data
        p = self._mask_pos
        key = (mask[p:] + mask[:p]) * (len(data) // 4 + 1)
        self._mask_pos = (p + len(data)) % 4
        n = len(data)
        return (int.from_bytes(data, "big") ^ int.from_bytes(key[:n], "big")).to_bytes(n, "big")

    def _control_frame(self, opcode: int, payload: bytes) -> None:
        if opcode == _PING:
            self._out += self._control(_PONG, payload)
        elif opcode == _CLOSE:
            status, body = 1005, b""
            if len(payload) >= 2:
                (status,) = struct.unpack("!H", payload[:2])
                body = payload[2:]
                try:
                    body.decode()
                except UnicodeDecodeError:
                    status, body = 1007, b"invalid utf8 body in close frame"
            self._out += self._control(_CLOSE, struct.pack("!H", status) + body)
            self._closed = True
            raise LayerError(None, "Client Closed")

    def _protocol_error(self, reason: str) -> None:
        self._close_now(1002, reason)

    def _close_now(self, status: int, reason: str) -> None:
        """A frame that cannot be taken: a close frame with ``status`` and ``reason`` is written
        (RFC 6455 7.1.7; nats-server 2.15 writes it too) and the connection closed at once, a
        read error."""
        self._out += self._control(_CLOSE, struct.pack("!H", status) + reason.encode()[:123])
        self._closed = True
        raise LayerError(f"read error: {reason}", "Read Error")

    # -- what the server writes -------------------------------------------------------------------

    def _frame(self, data: bytes) -> bytes:
        b0 = 0x80 | _BINARY
        if self.compress and len(data) > COMPRESS_THRESHOLD:
            c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
            data = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
            if data.endswith(_TAIL):
                data = data[:-4]
            b0 |= 0x40
        return _header(b0, len(data)) + data

    @staticmethod
    def _control(opcode: int, payload: bytes) -> bytes:
        return _header(0x80 | opcode, len(payload)) + payload


def _header(b0: int, n: int) -> bytes:
    if n <= 125:
        return bytes((b0, n))
    if n < 65536:
        return struct.pack("!BBH", b0, 126, n)
    return struct.pack("!BBQ", b0, 127, n)


def _contains(headers: dict[str, list[str]], name: str, token: str) -> bool:
    return any(t.strip(" \t").lower() == token for v in headers.get(name, ()) for t in v.split(","))


def _offers_deflate(headers: dict[str, list[str]]) -> bool:
    return any(
        p.strip(" \t").lower() == "permessage-deflate"
        for v in headers.get("sec-websocket-extensions", ())
        for ext in v.split(",")
        for p in ext.split(";")[:1]
    )
