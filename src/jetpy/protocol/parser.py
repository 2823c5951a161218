"""Parser: client-to-server NATS protocol bytes in, operations out. Sans-IO.

Owns the wire grammar of what clients send, as nats-server 2.9 reads it (its parser is a byte
state machine; this one works on whole lines but answers the same):

* op names are case-insensitive. ``PUB``/``HPUB``/``SUB``/``UNSUB``/``-ERR`` must be followed by a
  space or tab; ``PING``/``PONG``/``+OK`` ignore anything up to the end of the line; ``CONNECT``
  and ``INFO`` take the rest of the line (after spaces/tabs) as JSON. Anything else, including an
  empty line or leading whitespace, is ``Unknown Protocol Operation``, reported as soon as the
  first wrong byte arrives.
* arguments are separated by runs of spaces/tabs; lines end with ``\\n`` (a ``\\r`` before it is
  dropped); a payload must be followed by exactly ``\\r\\n``.
* sizes are 1 to 9 ASCII digits; anything else is a malformed argument (silent close).
* an argument longer than ``max_control_line`` closes with ``maximum control line exceeded``, also
  while the line is still arriving; a size over ``max_payload`` closes with ``Maximum Payload
  Violation``.
* with ``expect_connect`` (auth required) the first op must start with ``C``; any other first
  byte is an ``Authorization Violation``.
* ``HPUB`` is only legal after a CONNECT with ``headers: true`` (silent close otherwise); the
  parser decodes CONNECT itself (see :mod:`connect`) so that it knows.

Knows nothing of sockets, clocks, subscriptions or auth decisions.

Errors: malformed arguments close silently (``ProtocolError(None)``); the ops parsed before a
violation travel on the error (``ProtocolError.ops``), since nats-server acts on them first.

Performance: ``feed`` parses every complete op in the buffer in one loop with an inline fast path
for the common ``PUB <subject> [reply] <size>\\r\\n`` form (one regular-expression match does the
split and the checks); every other form goes through the exact (slower) general path. A
publisher streaming messages of one size gets a size-specific pattern that also takes the
payload and its CRLF (see ``_sized_patterns``): one match per message, nothing else to check.
Consecutive fast-path PUBs to one subject without a reply come out as one ``PUBS`` run (see
:mod:`ops`), and consecutive fast-path PUBs and HPUBs with a reply to one subject (a JetStream
publisher's async window, each with its own inbox) as one ``PUBR`` run, so that the layers above
do their per-message work once per run; within a plain run, a
control line identical to the previous one (a publisher streaming same-sized messages) is
recognised with one ``startswith`` instead of being parsed again. A payload that spans many
reads is collected as a list of chunks and joined once (no quadratic re-copying).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from jetpy.protocol.connect import DEFAULT_CONNECT, ConnectOptions, decode_connect, validate_info
from jetpy.protocol.errors import (
    ERR_AUTH_VIOLATION,
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    ProtocolError,
)
from jetpy.protocol.framing import Framer, OpNames, op_name
from jetpy.protocol.ops import CONNECT, ERR, INFO, OK, PING, PONG, PUB, PUBR, PUBS, SUB, UNSUB, Op

__all__ = ["DEFAULT_MAX_CONTROL_LINE", "DEFAULT_MAX_PAYLOAD", "MAX_SIZE_DIGITS", "Parser"]

DEFAULT_MAX_CONTROL_LINE: Final = 4096  # nats-server's MAX_CONTROL_LINE_SIZE: bounds a line's buffer
DEFAULT_MAX_PAYLOAD: Final = 1024 * 1024  # nats-server's MAX_PAYLOAD_SIZE: bounds a message's buffer
MAX_SIZE_DIGITS: Final = 9  # nats-server's parseSize refuses longer sizes (keeps them in an int32)

_HPUB: Final = -1  # internal code: HPUB parses like PUB but yields PUB with hdr_len > 0
_HMSG: Final = -2  # internal code: a client's HMSG (see _general)

# op name (upper case) -> (op code, must a space or tab follow the name?)
_NAMES: Final[OpNames] = (
    (b"PUB", PUB, True),
    (b"PING", PING, False),
    (b"PONG", PONG, False),
    (b"SUB", SUB, True),
    (b"UNSUB", UNSUB, True),
    (b"HPUB", _HPUB, True),
    (b"HMSG", _HMSG, True),
    (b"CONNECT", CONNECT, False),
    (b"INFO", INFO, False),
    (b"+OK", OK, False),
    (b"-ERR", ERR, True),
)
_NO_ARG: Final = frozenset((PING, PONG, OK))  # the rest of their line is ignored

_PING: Final[Op] = (PING,)
_PONG: Final[Op] = (PONG,)
_OK: Final[Op] = (OK,)
_SEP_TABLE: Final = bytes.maketrans(b"\t\r\n", b"   ")
# The common PUB line. A field is printable ASCII or UTF-8 (no space, control byte or DEL):
# that excludes every byte Go or Python might take as a separator, and a byte range matches
# about a third faster than the equivalent negated set. Fields with other bytes (rare, legal)
# take the exact general path.
_PUB_LINE: Final = rb"PUB ([!-~\x80-\xff]+) (?:([!-~\x80-\xff]+) )?"
_FAST_PUB: Final = re.compile(_PUB_LINE + rb"([0-9]{1,9})\r\n")
# The common HPUB line, as _FAST_PUB: headers are how JetStream publishers send Nats-Msg-Id.
_FAST_HPUB: Final = re.compile(b"H" + _PUB_LINE + rb"([0-9]{1,9}) ([0-9]{1,9})\r\n")

# The size-specific fast path: _FAST_PUB with the size field spelled out, extended over the
# payload and its CRLF, so that a publisher streaming same-sized messages costs one match per
# message (a third less than matching the line and checking the rest in Python). A parser
# adopts one when two fast-path PUBs in a row have the same size field; the pattern only
# matches what the fast path would accept and parse the same way (the size field is the whole
# last token of the line), anything else falls back to it. Compiling costs ~0.25 ms, so the
# patterns are shared and bounded, and each parser compiles only a few: a client cycling
# through sizes cannot make the server compile without end.
SIZED_MAX_PAYLOAD: Final = 16 * 1024  # bigger messages gain nothing worth a pattern
SIZED_PATTERNS: Final = 64  # size field -> pattern, process-wide
SIZED_COMPILES_PER_PARSER: Final = 8
_sized_patterns: dict[bytes, re.Pattern[bytes]] = {}
# (pattern.match, size field, size), or no size-specific path
_Sized = tuple[Callable[[bytes, int], "re.Match[bytes] | None"] | None, bytes, int]
_NOT_SIZED: Final[_Sized] = (None, b"", 0)


def _size(tok: bytes) -> int:
    """nats-server's parseSize: 1-9 ASCII digits, else -1 (int() would take b"+1", b"1_0")."""
    if len(tok) > MAX_SIZE_DIGITS or not tok.isdigit():
        return -1
    return int(tok)


def _split(arg: bytes) -> list[bytes]:
    """nats-server's splitArg: fields separated by runs of space, tab, CR or LF (and nothing else:
    unlike ``bytes.split()``, a vertical tab or form feed is part of a field)."""
    return [f for f in arg.translate(_SEP_TABLE).split(b" ") if f]


def _to_requests(ops: list[Op]) -> tuple[list[bytes], list[int], list[bytes], list[bytes]]:
    """Turn the last op, a PUB with a reply, into the PUBR run that continues it; returns the
    run's reply, header size, data and size lists to append to."""
    _, subject, reply, hdr, data, sz = ops[-1]
    replies, hdrs, datas, sizes = [reply], [hdr], [data], [sz]
    ops[-1] = (PUBR, subject, replies, hdrs, datas, sizes)
    return replies, hdrs, datas, sizes


def _to_run(ops: list[Op]) -> tuple[list[bytes], list[bytes]]:
    """Turn the last op, a plain PUB without reply, into the PUBS run that continues it; returns
    the run's data and size lists to append to."""
    _, subject, _reply, _hdr, data, sz = ops[-1]
    datas, sizes = [data], [sz]
    ops[-1] = (PUBS, subject, datas, sizes)
    return datas, sizes


class Parser(Framer):
    """Feed bytes with :meth:`feed`; get back every complete op. Raises only ProtocolError."""

    __slots__ = ("_compiled", "_sized", "connect", "expect_connect")

    def __init__(
        self,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        expect_connect: bool = False,
    ) -> None:
        super().__init__(max_control_line, max_payload)
        self.expect_connect = expect_connect  # the next op must be CONNECT (auth pending)
        self.connect: ConnectOptions = DEFAULT_CONNECT  # as merged from every CONNECT so far
        self._sized: _Sized = _NOT_SIZED  # the size-specific fast path in use (see _sized_patterns)
        self._compiled = 0  # size-specific patterns this parser compiled

    def _compact_line(self, rest: bytes) -> bytes:
        return _compact(rest)

    def _parse(self, buf: bytes, ops: list[Op]) -> int:
        n = len(buf)
        pos = 0
        max_line = self.max_control_line
        max_payload = self.max_payload
        append = ops.append
        match = _FAST_PUB.match
        hmatch = _FAST_HPUB.match
        startswith = buf.startswith
        run_subject: bytes | None = None  # the subject of the PUBS run the last op belongs to
        # the run's messages; None while it has one (the op is then a plain PUB, which costs the
        # layers above less: acks, for one, are single PUBs to ever new subjects)
        run_datas: list[bytes] | None = None
        run_sizes: list[bytes] = []
        # the run's last control line: an identical next line needs no parsing (only set once the
        # run has two messages: singles, such as acks, do not pay for the copy)
        run_line = b""
        run_size = 0
        run_sz = b""
        # the same for PUBs with a reply (JetStream publishes, requests): the subject of the last
        # op when it is one, and the PUBR run's lists once it has two
        req_subject: bytes | None = None
        req_replies: list[bytes] | None = None
        req_hdrs: list[int] = []
        req_datas: list[bytes] = []
        req_sizes: list[bytes] = []
        hdr = 0  # the header size of the message just parsed by a fast path (HPUB's)
        expect_connect = self.expect_connect  # only _general changes it (on CONNECT)
        last_sz = b""  # the last fast-path size field and its value: same-sized messages skip int()
        last_size = 0
        sized_match, sized_sz, sized_size = self._sized
        if sized_size > max_payload or expect_connect:  # (only if the limits were changed since)
            sized_match, sized_sz, sized_size = self._sized = _NOT_SIZED
        while pos < n:
            if run_datas is not None and startswith(run_line, pos):
                # the streaming case: the same "PUB <subject> <size>" line again
                start = pos + len(run_line)
                stop = start + run_size
                if stop + 2 <= n and buf[stop] == 13 and buf[stop + 1] == 10:
                    run_datas.append(buf[start:stop])
                    run_sizes.append(run_sz)
                    pos = stop + 2
                    continue
            data: bytes | None = None
            m = sized_match(buf, pos) if sized_match is not None else None
            if m is not None and (nxt := m.end()) - pos - sized_size - 2 <= max_line:
                # a publisher streaming messages of the learned size: the whole message at once
                subject, reply, data = m.groups()
                sz = sized_sz
                size = sized_size
            else:
                m = match(buf, pos)
                if m is not None:
                    # The hot path: "PUB <subject> [reply] <size>\r\n" with single spaces, where
                    # a plain split is exactly nats-server's. Everything else takes the exact path.
                    start = m.end()
                    subject, reply, sz = m.groups()
                    repeated = sz == last_sz
                    if not repeated:
                        last_sz = sz
                        last_size = int(sz)
                    size = last_size
                    if start - pos <= max_line and size <= max_payload and not expect_connect:
                        nxt = start + size + 2
                        if nxt <= n:
                            if buf[nxt - 2] != 13 or buf[nxt - 1] != 10:
                                raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")
                            data = buf[start : nxt - 2]
                            if repeated and sz != sized_sz and size <= SIZED_MAX_PAYLOAD:
                                sized_match, sized_sz, sized_size = self._sized = self._sized_path(sz, size)
                elif buf[pos] == 72 and not expect_connect and self.connect.headers:
                    hm = hmatch(buf, pos)
                    if hm is not None:
                        # HPUB's hot path, as PUB's: anything unusual takes the exact path
                        start = hm.end()
                        subject, reply, hdb, szb = hm.groups()
                        hsize = int(hdb)
                        size = int(szb)
                        nxt = start + size + 2
                        if start - pos <= max_line and hsize <= size <= max_payload and nxt <= n:
                            if buf[nxt - 2] != 13 or buf[nxt - 1] != 10:
                                raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")
                            data = buf[start : nxt - 2]
                            sz = hdb + b" " + szb if hsize else szb
                            if reply is None:
                                append((PUB, subject, None, hsize, data, sz))
                                run_subject = run_datas = req_subject = None
                                pos = nxt
                                continue
                            hdr = hsize  # joins a PUBR run as PUBs with a reply do
            if data is not None:
                if reply is not None:
                    if subject == req_subject:
                        if req_replies is None:
                            req_replies, req_hdrs, req_datas, req_sizes = _to_requests(ops)
                        req_replies.append(reply)
                        req_hdrs.append(hdr)
                        req_datas.append(data)
                        req_sizes.append(sz)
                    else:
                        append((PUB, subject, reply, hdr, data, sz))
                        req_subject = subject
                        req_replies = None
                    run_subject = run_datas = None
                    hdr = 0
                    pos = nxt
                    continue
                req_subject = None
                if subject == run_subject:
                    if run_datas is None:
                        run_datas, run_sizes = _to_run(ops)
                    run_datas.append(data)
                    run_sizes.append(sz)
                    run_line = buf[pos : nxt - size - 2]
                    run_size = size
                    run_sz = sz
                else:
                    append((PUB, subject, None, 0, data, sz))
                    run_datas = None
                    run_subject = subject
                pos = nxt
                continue
            run_subject = run_datas = req_subject = None
            nxt = self._general(buf, pos, n, append)
            if nxt < 0:
                return pos
            pos = nxt
            expect_connect = self.expect_connect
        return pos

    def _sized_path(self, sz: bytes, size: int) -> _Sized:
        """The size-specific fast path for size field ``sz`` (see :data:`_sized_patterns`); the
        one in use when this parser has compiled its share of patterns and ``sz`` has none."""
        pattern = _sized_patterns.get(sz)
        if pattern is None:
            if self._compiled >= SIZED_COMPILES_PER_PARSER:
                return self._sized
            self._compiled += 1
            if len(_sized_patterns) >= SIZED_PATTERNS:
                _sized_patterns.clear()
            pattern = _sized_patterns[sz] = re.compile(_PUB_LINE + sz + rb"\r\n(.{%d})\r\n" % size, re.DOTALL)
        return pattern.match, sz, size

    def _general(self, buf: bytes, pos: int, n: int, add: Callable[[Op], None]) -> int:
        """Parse the op at ``pos`` exactly; the index after it, or -1 if it is incomplete."""
        if self.expect_connect and buf[pos] not in (67, 99):  # "C" / "c"
            raise ProtocolError(ERR_AUTH_VIOLATION, "first op is not CONNECT")
        code, k = op_name(_NAMES, buf, pos, n)
        if code == 0:
            return -1
        if code in _NO_ARG:
            nl = buf.find(b"\n", k)
            if nl < 0:
                return -1
            add(_PING if code == PING else _PONG if code == PONG else _OK)
            return nl + 1
        # the argument starts at the first byte after the name that is not a space or tab; that
        # byte is taken as is (even a CR or LF), and the line ends at the next LF
        a = k
        while a < n and buf[a] in (32, 9):
            a += 1
        nl = buf.find(b"\n", a + 1) if a < n else -1
        max_line = self.max_control_line
        if nl < 0:
            partial = len(buf) - a
            if partial > 1 and buf[n - 1] == 13:
                partial -= 1
            if partial > max_line:
                raise ProtocolError(ERR_MAX_CONTROL_LINE)
            return -1
        arg = buf[a:nl]
        if arg.find(b"\r", 1) >= 0:
            arg = arg[:-1]  # a CR anywhere in the argument drops the byte before the LF
        if len(arg) > max_line:
            raise ProtocolError(ERR_MAX_CONTROL_LINE)
        after = nl + 1
        if code in (PUB, _HPUB, _HMSG):
            if code == _HMSG:
                # nats-server 2.9 takes a client's HMSG, whatever its arguments, as an empty
                # message on no subject (it reaches nobody, but is counted and acknowledged), and
                # then expects an empty payload
                subject, reply, hdr, size, sizes = b"", None, 0, 0, b"0"
            else:
                if code == _HPUB and not self.connect.headers:
                    raise ProtocolError(None, "HPUB before CONNECT with headers")
                args = _split(arg)
                if code == PUB:
                    if len(args) == 2:
                        subject, szb = args
                        reply = None
                    elif len(args) == 3:
                        subject, reply, szb = args
                    else:
                        raise ProtocolError(None, "PUB needs 2 or 3 arguments")
                    hdr = 0
                    size = _size(szb)
                    if size < 0:
                        raise ProtocolError(None, "invalid PUB size")
                    sizes = szb
                else:
                    if len(args) == 3:
                        subject, hdb, szb = args
                        reply = None
                    elif len(args) == 4:
                        subject, reply, hdb, szb = args
                    else:
                        raise ProtocolError(None, "HPUB needs 3 or 4 arguments")
                    hdr = _size(hdb)
                    if hdr < 0:
                        raise ProtocolError(None, "invalid HPUB header size")
                    size = _size(szb)
                    if size < 0:
                        raise ProtocolError(None, "invalid HPUB total size")
                    if hdr > size:
                        raise ProtocolError(None, "HPUB header size larger than total")
                    sizes = hdb + b" " + szb if hdr else szb
                if size > self.max_payload:
                    raise ProtocolError(
                        ERR_MAX_PAYLOAD, f"maximum payload exceeded: {size} vs {self.max_payload}"
                    )
            stop = after + size
            if stop + 2 > n:
                if stop < n and buf[stop] != 13:
                    raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")
                self._need = stop + 2 - pos
                return -1
            if buf[stop] != 13 or buf[stop + 1] != 10:
                raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")
            add((PUB, subject, reply, hdr, buf[after:stop], sizes))
            return stop + 2
        if code == SUB:
            args = _split(arg)
            if len(args) == 2:
                add((SUB, args[0], None, args[1]))
            elif len(args) == 3:
                add((SUB, args[0], args[1], args[2]))
            else:
                raise ProtocolError(None, "SUB needs 2 or 3 arguments")
        elif code == UNSUB:
            args = _split(arg)
            if len(args) == 1:
                add((UNSUB, args[0], 0))
            elif len(args) == 2:
                # a malformed max reads as "unsubscribe now", as in nats-server
                add((UNSUB, args[0], max(_size(args[1]), 0)))
            else:
                raise ProtocolError(None, "UNSUB needs 1 or 2 arguments")
        elif code == CONNECT:
            self.connect = decode_connect(arg, self.connect)
            self.expect_connect = False
            add((CONNECT, self.connect))
        elif code == INFO:
            validate_info(arg)
            add((INFO, arg))
        else:  # -ERR
            add((ERR, arg))
        return after


def _compact(rest: bytes) -> bytes:
    """An incomplete line, minus bytes that cannot change its meaning (bounds memory for lines
    nats-server reads without limit: ``PING<junk>`` or a run of spaces before an argument)."""
    code, k = op_name(_NAMES, rest, 0, len(rest))
    if code == 0:
        return rest
    if code in _NO_ARG:
        return rest[:k]
    a = k
    while a < len(rest) and rest[a] in (32, 9):
        a += 1
    return rest[:k] + b" " + rest[a:]
