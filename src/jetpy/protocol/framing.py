"""Framer: the bytes of an incomplete operation kept between reads, for every NATS-style parser.

Owns what the client and route parsers share: the op names of a grammar (:func:`op_name`), and the
buffering rule: a read is parsed together with
what the previous reads left over; a payload still missing more than
:data:`COLLECT_THRESHOLD` bytes is collected as a list of chunks and joined once it is complete
(so a 1 MB message arriving in 64 KB reads is copied once, not sixteen times); a parse error
drops what was buffered and carries the operations parsed before it (``ProtocolError.ops``).
A subclass parses (:meth:`Framer._parse`: complete operations out, the position it stopped at,
``_need`` set to the bytes the incomplete operation needs when it knows) and may shorten an
incomplete line that is already past the control-line limit (:meth:`Framer._compact_line`).

Knows nothing of the grammar, sockets or time.
"""

from __future__ import annotations

from typing import Final

from jetpy.protocol.errors import ERR_UNKNOWN_OP, ProtocolError
from jetpy.protocol.ops import Op

__all__ = ["COLLECT_THRESHOLD", "Framer", "OpNames", "op_name"]

COLLECT_THRESHOLD: Final = 64 * 1024  # a payload still missing more than this is collected in chunks

OpNames = tuple[tuple[bytes, int, bool], ...]
"""A grammar's op names: (name in upper case, op code, must a space or tab follow?)."""


def op_name(names: OpNames, buf: bytes, pos: int, n: int, shown: int = 16) -> tuple[int, int]:
    """(op code, index after the name) of the op at ``pos`` (names compare case-insensitively);
    (0, 0) while the name is incomplete. An unknown name is ``Unknown Protocol Operation``, its
    detail the next ``shown`` bytes."""
    head = buf[pos : pos + 8].upper()
    for name, code, sep in names:
        k = len(name)
        if head.startswith(name):
            if sep:
                if pos + k >= n:
                    return 0, 0
                if buf[pos + k] not in (32, 9):
                    break
            return code, pos + k
        if len(head) < k and name.startswith(head):
            return 0, 0
    raise ProtocolError(ERR_UNKNOWN_OP, f"proto={buf[pos : pos + shown]!r}...")


class Framer:
    """Feed bytes with :meth:`feed`; get back every complete op. Raises only ProtocolError."""

    __slots__ = ("_buf", "_chunks", "_have", "_need", "max_control_line", "max_payload")

    def __init__(self, max_control_line: int, max_payload: int) -> None:
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
        except ProtocolError as e:
            self._buf = b""
            self._need = 0
            e.ops = ops
            raise
        rest = len(buf) - pos
        if rest == 0:
            self._buf = b""
        elif self._need:
            if self._need - rest > COLLECT_THRESHOLD:
                self._buf = b""
                self._chunks = [buf[pos:] if pos else buf]
                self._have = rest
            else:
                self._buf = buf[pos:] if pos else buf
        elif rest > self.max_control_line:
            self._buf = self._compact_line(buf[pos:])
        else:
            self._buf = buf[pos:] if pos else buf
        return ops

    def _parse(self, buf: bytes, ops: list[Op]) -> int:
        """Append every complete op in ``buf`` to ``ops``; return where parsing stopped."""
        raise NotImplementedError

    def _compact_line(self, rest: bytes) -> bytes:
        """An incomplete line past the control-line limit, as it may be kept (unchanged here)."""
        return rest
