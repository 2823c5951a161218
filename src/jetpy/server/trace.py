"""Protocol trace (``-V``): every op a client sends and every line it is sent, as nats-server's
trace lines (``<<- [PUB foo 5]``, ``<<- MSG_PAYLOAD: ["hello"]``, ``->> [MSG foo 1 5]``).

Owns the spelling of those lines and the reading of an outbound buffer back into its control
lines (a MSG/HMSG line's size says how much payload to step over). Called by a connection only
when tracing is on, once per read and once per write, never on the path of an untraced server.
Secrets in CONNECT (password, token, signature, JWT) are shown as ``[REDACTED]``. Each line goes
through the logging set-up, which bounds its length. Knows a connection only by what a trace line
names (address, cid, client name).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Final, Protocol

from jetpy.protocol.connect import ConnectOptions
from jetpy.protocol.ops import CONNECT, ERR, INFO, OK, PING, PONG, PUB, PUBR, PUBS, SUB, UNSUB, Op
from jetpy.server.client_log import ClientIdentity, client_prefix

__all__ = ["MAX_TRACED_PAYLOAD", "Traced", "trace_in", "trace_out"]

log = logging.getLogger("jetpy.server.trace")
TRACE: Final = 5  # the level logs.py names TRACE (kept here so the protocol path imports nothing more)
MAX_TRACED_PAYLOAD: Final = 256  # bytes of a payload shown (nats-server's max_traced_msg_len idea)
MAX_LINES_PER_WRITE: Final = 1000  # outbound control lines traced per write; the rest are counted
_SECRETS: Final = ("password", "auth_token", "sig", "jwt", "nkey")


class Traced(Protocol):
    ident: ClientIdentity  # whom a line names, as every client log line does


def _who(c: Traced) -> str:
    return client_prefix(c.ident)


def _text(b: bytes | None) -> str:
    return "" if b is None else b.decode("utf-8", "replace")


def _payload(data: bytes) -> str:
    shown = data[:MAX_TRACED_PAYLOAD].decode("utf-8", "replace")
    more = f"... ({len(data)} bytes)" if len(data) > MAX_TRACED_PAYLOAD else ""
    return f"[{json.dumps(shown, ensure_ascii=False)}{more}]"


def _connect(opts: ConnectOptions) -> str:
    doc = {k: v for k, v in dataclasses.asdict(opts).items() if v not in ("", None)}
    for key in _SECRETS:
        if key in doc:
            doc[key] = "[REDACTED]"
    if "password" in doc:
        doc["pass"] = doc.pop("password")
    return json.dumps(doc, separators=(",", ":"))


def trace_in(c: Traced, ops: list[Op]) -> None:
    """Trace what one read of client ``c`` parsed into."""
    who = _who(c)
    for op in ops:
        code = op[0]
        if code == PUB:
            _, subject, reply, hdr_len, data, _sizes = op
            verb = "HPUB" if hdr_len else "PUB"
            sizes = f"{hdr_len} {len(data)}" if hdr_len else str(len(data))
            args = " ".join(x for x in (_text(subject), _text(reply), sizes) if x)
            log.log(TRACE, "%s - <<- [%s %s]", who, verb, args)
            log.log(TRACE, "%s - <<- MSG_PAYLOAD: %s", who, _payload(data))
        elif code == PUBR:
            _, subject, replies, hdr_lens, datas, _sizes = op
            for reply, hdr_len, data in zip(replies, hdr_lens, datas, strict=True):
                verb = "HPUB" if hdr_len else "PUB"
                sizes = f"{hdr_len} {len(data)}" if hdr_len else str(len(data))
                log.log(TRACE, "%s - <<- [%s %s %s %s]", who, verb, _text(subject), _text(reply), sizes)
                log.log(TRACE, "%s - <<- MSG_PAYLOAD: %s", who, _payload(data))
        elif code == PUBS:
            _, subject, datas, _sizes = op
            for data in datas:
                log.log(TRACE, "%s - <<- [PUB %s %d]", who, _text(subject), len(data))
                log.log(TRACE, "%s - <<- MSG_PAYLOAD: %s", who, _payload(data))
        elif code == SUB:
            _, subject, queue, sid = op
            log.log(TRACE, "%s - <<- [SUB %s %s %s]", who, _text(subject), _text(queue), _text(sid))
        elif code == UNSUB:
            _, sid, max_msgs = op
            log.log(TRACE, "%s - <<- [UNSUB %s %s]", who, _text(sid), max_msgs or "")
        elif code == CONNECT:
            log.log(TRACE, "%s - <<- [CONNECT %s]", who, _connect(op[1]))
        elif code in (PING, PONG, OK):
            log.log(TRACE, "%s - <<- [%s]", who, {PING: "PING", PONG: "PONG", OK: "OK"}[code])
        elif code in (INFO, ERR):
            log.log(TRACE, "%s - <<- [%s %s]", who, "INFO" if code == INFO else "-ERR", _text(op[1]))


def trace_out(c: Traced, buf: bytes | bytearray) -> None:
    """Trace the protocol lines of one write to client ``c`` (payloads stepped over)."""
    who = _who(c)
    pos, n, lines = 0, len(buf), 0
    while pos < n:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            end = n
        line = bytes(buf[pos:end])
        pos = end + 2
        if lines < MAX_LINES_PER_WRITE:
            log.log(TRACE, "%s - ->> [%s]", who, _text(line))
        lines += 1
        if line.startswith((b"MSG ", b"HMSG ")):
            size = line.rsplit(b" ", 1)[-1]
            if size.isdigit():
                pos += int(size) + 2
    if lines > MAX_LINES_PER_WRITE:
        log.log(TRACE, "%s - ->> (%d more lines in this write)", who, lines - MAX_LINES_PER_WRITE)
