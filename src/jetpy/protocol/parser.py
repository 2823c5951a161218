"""Parser: client-to-server NATS protocol bytes in, operations out. Sans-IO.

Owns the wire grammar of what clients send: op names (case-insensitive), arguments separated by
any run of spaces or tabs, lines ended by ``\\n`` (the ``\\r`` is optional, as nats-server
accepts), payloads of a declared size followed by ``\\r\\n``. Knows nothing of sockets, clocks,
subscriptions or auth; it only enforces the two limits that bound its own memory:
``max_control_line`` and ``max_payload``.

Performance: ``feed`` parses every complete op in the buffer in one loop with a fast path for
PUB, and a payload that spans many reads is collected as a list of chunks and joined once (no
quadratic re-copying). Errors follow nats-server: malformed arguments close silently
(``ProtocolError(None)``), unknown ops and broken framing close with ``Unknown Protocol
Operation``.
"""

from __future__ import annotations

from jetpy.protocol.errors import (
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    ProtocolError,
)
from jetpy.protocol.ops import CONNECT, ERR, INFO, OK, PING, PONG, PUB, SUB, UNSUB, Op

__all__ = ["DEFAULT_MAX_CONTROL_LINE", "DEFAULT_MAX_PAYLOAD", "Parser"]

DEFAULT_MAX_CONTROL_LINE = 4096  # nats-server's MAX_CONTROL_LINE_SIZE
DEFAULT_MAX_PAYLOAD = 1024 * 1024  # nats-server's MAX_PAYLOAD_SIZE
COLLECT_THRESHOLD = 64 * 1024  # a payload still missing more than this is collected in chunks

_PING: Op = (PING,)
_PONG: Op = (PONG,)
_OK: Op = (OK,)


def _size(tok: bytes) -> int:
    # int() would accept b"+1", b" 1" and b"1_0"; nats-server accepts digits only
    if not tok.isdigit():
        raise ProtocolError(None, f"invalid size {tok[:32]!r}")
    return int(tok)


def _payload_end(buf: bytes, stop: int, n: int) -> int:
    """Index after the line end that must follow a payload; -1 if it has not arrived yet."""
    if stop >= n:
        return -1
    c = buf[stop]
    if c == 13:
        if stop + 1 >= n:
            return -1
        if buf[stop + 1] == 10:
            return stop + 2
    elif c == 10:
        return stop + 1
    raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")


class Parser:
    """Feed bytes with :meth:`feed`; get back every complete op. Raises only ProtocolError."""

    __slots__ = ("_buf", "_chunks", "_have", "_need", "max_control_line", "max_payload")

    def __init__(
        self,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
    ) -> None:
        self.max_control_line = max_control_line
        self.max_payload = max_payload
        self._buf = b""  # unparsed bytes of an incomplete op
        self._chunks: list[bytes] = []  # reads collected while a large payload arrives
        self._have = 0
        self._need = 0  # bytes the incomplete op needs in all (0 = unknown, retry on any data)

    def pending(self) -> int:
        """Bytes buffered for an incomplete op (bounded by the limits)."""
        return len(self._buf) + self._have

    def feed(self, data: bytes) -> list[Op]:
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return []
            buf = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
        elif self._buf:
            buf = self._buf + data
        else:
            buf = data
        ops: list[Op] = []
        self._need = 0
        try:
            pos = self._parse(buf, ops)
        except ProtocolError:
            self._buf = b""
            self._need = 0
            raise
        rest = len(buf) - pos
        if rest == 0:
            self._buf = b""
        elif self._need - rest > COLLECT_THRESHOLD:
            self._buf = b""
            self._chunks = [buf[pos:] if pos else buf]
            self._have = rest
        else:
            self._buf = buf[pos:] if pos else buf
        return ops

    def _parse(self, buf: bytes, ops: list[Op]) -> int:
        n = len(buf)
        pos = 0
        max_line = self.max_control_line
        append = ops.append
        while pos < n:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                if n - pos > max_line:
                    raise ProtocolError(ERR_MAX_CONTROL_LINE)
                return pos
            end = nl - 1 if nl > pos and buf[nl - 1] == 13 else nl
            if end - pos > max_line:
                raise ProtocolError(ERR_MAX_CONTROL_LINE)
            head = buf[pos : pos + 4]
            if head == b"PUB " or head == b"pub ":
                # the hot path: inline, no method calls beyond the split and the size check
                args = buf[pos + 4 : end].split()
                if len(args) == 2:
                    subject, sz = args
                    reply = None
                elif len(args) == 3:
                    subject, reply, sz = args
                else:
                    raise ProtocolError(None, "PUB needs 2 or 3 arguments")
                if not sz.isdigit():
                    raise ProtocolError(None, "invalid PUB size")
                size = int(sz)
                if size > self.max_payload:
                    raise ProtocolError(ERR_MAX_PAYLOAD)
                start = nl + 1
                stop = start + size
                after = _payload_end(buf, stop, n)
                if after < 0:
                    self._need = stop + 2 - pos
                    return pos
                append((PUB, subject, reply, 0, buf[start:stop]))
                pos = after
                continue
            line = buf[pos:end]
            args = line.split()
            if not args:
                raise ProtocolError(ERR_UNKNOWN_OP, "empty line")
            name = args[0].upper()
            if name == b"PUB":
                # mixed case or tab-separated PUB (the fast path above takes the common forms)
                if len(args) == 3:
                    _, subject, sz = args
                    reply = None
                elif len(args) == 4:
                    _, subject, reply, sz = args
                else:
                    raise ProtocolError(None, "PUB needs 2 or 3 arguments")
                size = _size(sz)
                if size > self.max_payload:
                    raise ProtocolError(ERR_MAX_PAYLOAD)
                start = nl + 1
                stop = start + size
                after = _payload_end(buf, stop, n)
                if after < 0:
                    self._need = stop + 2 - pos
                    return pos
                append((PUB, subject, reply, 0, buf[start:stop]))
                pos = after
                continue
            if name == b"HPUB":
                if len(args) == 4:
                    _, subject, hs, ts = args
                    reply = None
                elif len(args) == 5:
                    _, subject, reply, hs, ts = args
                else:
                    raise ProtocolError(None, "HPUB needs 3 or 4 arguments")
                hdr_len = _size(hs)
                total = _size(ts)
                if total > self.max_payload:
                    raise ProtocolError(ERR_MAX_PAYLOAD)
                if hdr_len > total:
                    raise ProtocolError(None, "HPUB header size larger than total")
                start = nl + 1
                stop = start + total
                after = _payload_end(buf, stop, n)
                if after < 0:
                    self._need = stop + 2 - pos
                    return pos
                append((PUB, subject, reply, hdr_len, buf[start:stop]))
                pos = after
                continue
            pos = nl + 1
            if name == b"PING":
                append(_PING)
            elif name == b"PONG":
                append(_PONG)
            elif name == b"SUB":
                if len(args) == 3:
                    append((SUB, args[1], None, args[2]))
                elif len(args) == 4:
                    append((SUB, args[1], args[2], args[3]))
                else:
                    raise ProtocolError(None, "SUB needs 2 or 3 arguments")
            elif name == b"UNSUB":
                if len(args) == 2:
                    append((UNSUB, args[1], 0))
                elif len(args) == 3:
                    # nats-server reads a non-numeric max as "unsubscribe now"
                    mx = args[2]
                    append((UNSUB, args[1], int(mx) if mx.isdigit() else 0))
                else:
                    raise ProtocolError(ERR_UNKNOWN_OP, "UNSUB needs 1 or 2 arguments")
            elif name == b"CONNECT":
                append((CONNECT, _rest(line, 7)))
            elif name == b"INFO":
                append((INFO, _rest(line, 4)))
            elif name == b"+OK":
                append(_OK)
            elif name == b"-ERR":
                append((ERR, _rest(line, 4)))
            else:
                raise ProtocolError(ERR_UNKNOWN_OP, f"unknown op {name[:16]!r}")
        return pos


def _rest(line: bytes, skip: int) -> bytes:
    """The argument text of a line after its op name, as one blob (JSON for CONNECT/INFO)."""
    return line[skip:].strip()
