"""The connector's connection: a small blocking NATS client, and the batched direct-get path.

Owns: one TCP (or TLS) connection speaking the client side of the NATS protocol (INFO, CONNECT
with user/password or token, PING/PONG, SUB, PUB/HPUB, MSG/HMSG) with a receive buffer whose
messages can be handed out as views (a bulk read's 1 MiB messages are never copied to be read),
a request/reply helper for the JetStream API, PubAcks taken in bulk (the sink), and
:meth:`Wire.read_range`, the ``direct`` read path: batched direct gets (nats-server 2.11,
ADR-31) read straight into column lists: stream sequence, subject, timestamp, payload and, on
demand, the message's own headers.
Must not know: Spark, Arrow, the server's internals.

Why not nats-py here: a Spark task spends its time in this loop, and nats-py builds a ``Msg``
object, parses headers into a dict and schedules a callback (or a future) for every message,
which caps a reader or a writer at a few tens of thousands of messages per second. This client
parses frames with a few ``bytes.find`` calls or one regex pass. Blocking sockets also keep an
event loop out of Spark's Python workers.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from jetpy.spark.options import ConnOptions

__all__ = ["ApiReplyError", "BatchColumns", "Reply", "Wire", "WireError", "parse_ts_us", "user_headers"]

RECV_SIZE = 4 * 1024 * 1024
"""Size of the receive buffer: a bulk read's 1 MiB messages and a batch reply arrive in a few
reads, each straight into it."""
MIN_RECV = 256 * 1024
"""Free room below which the receive buffer is replaced before reading (one copy of the few
bytes not consumed yet)."""
PIPELINE_DEPTH = 2
"""Batched direct-get requests in flight per connection during an unfiltered read."""
MAX_CONTROL_LINE = 4096
"""nats-server's limit: a longer line without CRLF is a broken stream, not a slow one."""


class WireError(Exception):
    """The server could not be reached, refused us, timed out or answered with an error."""


class ApiReplyError(WireError):
    """The JetStream API answered with an error (``err_code`` as nats-server numbers them)."""

    def __init__(self, err_code: int, description: str) -> None:
        self.err_code = err_code
        super().__init__(f"JetStream API error {err_code}: {description}")


@dataclass(slots=True)
class Reply:
    """One message received: its headers block (``b""`` if none) and payload."""

    hdr: bytes
    data: bytes

    @property
    def status(self) -> int:
        if self.hdr.startswith(b"NATS/1.0 ") and len(self.hdr) >= 12 and self.hdr[9:12].isdigit():
            return int(self.hdr[9:12])
        return 0

    def header(self, key: str) -> str | None:
        from jetpy.protocol.headers import get_header  # not at import: Spark's planners need none

        value = get_header(self.hdr, key.encode())
        return None if value is None else value.decode()

    def json(self) -> dict[str, Any]:
        obj = json.loads(self.data)
        if not isinstance(obj, dict):
            raise WireError(f"unexpected API reply: {self.data[:200]!r}")
        err = obj.get("error")
        if err:
            raise ApiReplyError(int(err.get("err_code") or 0), str(err.get("description")))
        return obj


@dataclass(slots=True)
class BatchColumns:
    """Messages of a read, column by column (timestamps in microseconds since the epoch)."""

    seqs: list[int] = field(default_factory=list)
    subjects: list[bytes] = field(default_factory=list)
    ts_us: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)
    headers: list[list[tuple[str, list[str]]] | None] | None = None

    def __len__(self) -> int:
        return len(self.seqs)


_SECONDS: dict[bytes, int] = {}


def parse_ts_us(ts: bytes) -> int:
    """RFC 3339 (as ``Nats-Time-Stamp``) -> microseconds since the epoch. The common UTC form is
    parsed by slicing, with the whole-second part cached (a batch shares few distinct seconds)."""
    head = ts[:19]
    rest = ts[19:]
    if rest.endswith(b"Z") and (rest == b"Z" or rest[:1] == b"."):
        secs = _SECONDS.get(head)
        if secs is None:
            if len(_SECONDS) > 100_000:
                _SECONDS.clear()
            secs = int(datetime.fromisoformat(head.decode() + "+00:00").timestamp())
            _SECONDS[head] = secs
        frac = rest[1:-1]
        return secs * 1_000_000 + (int((frac + b"000000")[:6]) if frac else 0)
    text = ts.decode()
    if "." in text:  # Python wants at most 6 fraction digits
        a, b = text.split(".", 1)
        digits = "".join(c for c in b if c.isdigit())
        text = a + "." + digits[:6].ljust(6, "0") + b[len(digits) :]
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def user_headers(block: bytes) -> list[tuple[str, list[str]]]:
    """A header block -> [(key, [values...])] in first-seen key order (keys may repeat)."""
    from jetpy.protocol.headers import parse_headers

    out: dict[str, list[str]] = {}
    for k, v in parse_headers(block).items:
        out.setdefault(k, []).append(v)
    return list(out.items())


class Wire:
    """A blocking connection to the first reachable server of ``conn.servers``."""

    def __init__(self, conn: ConnOptions) -> None:
        self.conn = conn
        self.timeout = conn.timeout_ms / 1000
        # bytes received: valid in [_r, _w) of _rb; a message's payload may be handed out as a
        # view of _rb, so _rb is never resized in place: more room is a new buffer
        self._rb = bytearray(RECV_SIZE)
        self._r = 0
        self._w = 0
        self._sock: socket.socket | Any = None
        self._next = 0
        self.url = ""
        self.info: dict[str, Any] = {}
        errors: list[str] = []
        for url in conn.servers:
            try:
                self._connect(url)
                self.url = url
                break
            except (OSError, WireError) as e:
                errors.append(f"{url}: {e}")
                self._close_sock()
        else:
            raise WireError("cannot connect to NATS: " + "; ".join(errors))
        self._inbox = f"_INBOX.{os.urandom(8).hex()}"
        # MSG <inbox>.<n> <sid> <size>\r\n<payload without CR or LF>\r\n (PubAcks, API replies)
        self._reply_re = re.compile(
            b"MSG " + re.escape(self._inbox.encode()) + rb"\.([0-9]+) 1 [0-9]+\r\n([^\r\n]*)\r\n"
        )
        self._send(f"SUB {self._inbox}.* 1\r\n".encode())

    @property
    def inbox(self) -> str:
        """This connection's reply prefix: ``<inbox>.<anything>`` comes back to it."""
        return self._inbox

    def send(self, data: bytes) -> None:
        """Raw protocol bytes (frames built by the caller)."""
        self._send(data)

    @property
    def is_jetpy(self) -> bool:
        """The server is jetpy (it names itself in INFO's ``go``), so it has the bulk read."""
        return "jetpy" in str(self.info.get("go", ""))

    @property
    def server_version(self) -> tuple[int, int, int]:
        """INFO's ``version`` as numbers ((0, 0, 0) if it does not parse)."""
        parts = str(self.info.get("version", "")).split("-")[0].split(".")
        try:
            major, minor, patch = (int(p) for p in [*parts, "0", "0"][:3])
        except ValueError:
            return (0, 0, 0)
        return major, minor, patch

    # -- connection ----------------------------------------------------------------------------

    def _connect(self, url: str) -> None:
        u = urlsplit(url if "://" in url else f"nats://{url}")
        host, port = u.hostname or "127.0.0.1", u.port or 4222
        sock = socket.create_connection((host, port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        line = self._read_line()
        if not line.startswith(b"INFO "):
            raise WireError(f"not a NATS server (got {line[:40]!r})")
        self.info = json.loads(line[5:])
        if self.conn.tls or self.info.get("tls_required"):
            ctx = self.conn.ssl_context()
            self._sock = ctx.wrap_socket(sock, server_hostname=host)  # type: ignore[attr-defined]
        if not self.info.get("headers", False):
            raise WireError("the server does not support headers (NATS 2.2+ needed)")
        connect: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "lang": "python-jetpy-spark",
            "version": "0.1.0",
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "name": self.conn.name,
        }
        user = unquote(u.username) if u.username else self.conn.user
        password = unquote(u.password) if u.password else self.conn.password
        if u.username and not u.password and self.conn.user is None:
            connect["auth_token"] = user
        elif user is not None:
            connect["user"], connect["pass"] = user, password or ""
        if self.conn.token is not None:
            connect["auth_token"] = self.conn.token
        self._send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while True:
            line = self._read_line()
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                raise WireError(line[5:].decode(errors="replace").strip(" '"))
            # INFO updates or +OK: keep waiting for our PONG

    def close(self) -> None:
        self._close_sock()

    def ping(self) -> bool:
        """Whether the connection still works and has nothing pending: a PING answered by a
        PONG with nothing else before it (used before a kept connection is reused)."""
        if self._sock is None or self._r != self._w:
            return False
        try:
            self._send(b"PING\r\n")
            while True:
                line = self._read_line()
                if line == b"PONG":
                    return self._r == self._w
                if line != b"+OK" and not line.startswith(b"INFO "):
                    return False
        except (WireError, OSError):
            return False

    def set_timeout(self, seconds: float | None) -> None:
        """How long a read waits for the server (None: ``timeoutMs`` again)."""
        self._sock.settimeout(self.timeout if seconds is None else seconds)

    def _close_sock(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- bytes ---------------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise WireError(f"connection lost: {e}") from None

    def _fill(self, need: int = 0) -> None:
        """Receive more bytes, with room for ``need`` bytes from the read position on."""
        live = self._w - self._r
        room = max(need, live + MIN_RECV)
        if self._r + room > len(self._rb):  # a new buffer: views of the old one stay valid
            new = bytearray(max(RECV_SIZE, room))
            new[:live] = memoryview(self._rb)[self._r : self._w]
            self._rb, self._r, self._w = new, 0, live
        try:
            n = self._sock.recv_into(memoryview(self._rb)[self._w :])
        except TimeoutError:
            raise WireError(f"no reply within {self.timeout:g}s") from None
        except OSError as e:
            raise WireError(f"connection lost: {e}") from None
        if not n:
            raise WireError("connection closed by the server")
        self._w += n

    def _read_line(self) -> bytes:
        while True:
            nl = self._rb.find(b"\r\n", self._r, self._w)
            if nl >= 0:
                line = bytes(self._rb[self._r : nl])
                self._r = nl + 2
                return line
            if self._w - self._r > MAX_CONTROL_LINE + 65536:
                raise WireError("protocol error: control line too long")
            self._fill()

    def next_frame(self) -> tuple[bytes, bytes, int, memoryview]:
        """The next MSG/HMSG as (subject, reply subject or b"", header length, header block +
        payload as a view); answers PINGs, raises on -ERR. The view stays valid after later reads."""
        while True:
            rb, pos, w = self._rb, self._r, self._w
            nl = rb.find(b"\r\n", pos, w)
            if nl < 0:
                if w - pos > MAX_CONTROL_LINE + 65536:
                    raise WireError("protocol error: control line too long")
                self._fill()
                continue
            op = rb[pos : pos + 4]
            if op == b"HMSG" or op[:3] == b"MSG":
                parts = bytes(rb[pos:nl]).split(b" ")
                try:
                    hlen, tlen = (int(parts[-2]), int(parts[-1])) if op == b"HMSG" else (0, int(parts[-1]))
                except (ValueError, IndexError):
                    raise WireError(f"protocol error: {bytes(rb[pos:nl])[:80]!r}") from None
                start = nl + 2
                end = start + tlen
                if end + 2 > w:
                    self._fill(end + 2 - pos)
                    continue
                self._r = end + 2
                reply = parts[3] if len(parts) == (6 if op == b"HMSG" else 5) else b""
                return parts[1], reply, hlen, memoryview(rb)[start:end]
            self._r = nl + 2
            line = bytes(rb[pos:nl])
            if line == b"PING":
                self._send(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise WireError(line[5:].decode(errors="replace").strip(" '"))
            # PONG, +OK, INFO: nothing to do

    def plain_replies(self, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` buffered plain messages (no headers) to this connection's
        ``<inbox>.<number>`` subjects, as (number, payload), taken in one pass: the PubAck path.
        Stops at anything else (read that with :meth:`next_frame`); reads from the socket only
        when nothing at all is buffered."""
        if self._r >= self._w:
            self._fill()
        out: list[tuple[int, bytes]] = []
        rb, pos, w = self._rb, self._r, self._w
        match = self._reply_re.match
        while len(out) < limit:
            m = match(rb, pos, w)
            if m is None:
                break
            out.append((int(m.group(1)), m.group(2)))
            pos = m.end()
        self._r = pos
        return out

    def _next_msg(self) -> tuple[bytes, bytes, bytes]:
        """The next MSG/HMSG as (subject, headers, payload) bytes."""
        subj, _, hlen, view = self.next_frame()
        return subj, bytes(view[:hlen]), bytes(view[hlen:])

    # -- requests ------------------------------------------------------------------------------

    def _reply_subject(self) -> bytes:
        self._next += 1
        return f"{self._inbox}.{self._next}".encode()

    def _publish(self, subject: str, reply: bytes, payload: bytes) -> None:
        self._send(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply, len(payload), payload))

    def send_request(self, subject: str, payload: bytes) -> bytes:
        """Publish a request; returns its reply subject (the answer comes through next_frame)."""
        reply = self._reply_subject()
        self._publish(subject, reply, payload)
        return reply

    def request(self, subject: str, payload: bytes = b"") -> Reply:
        """One request, one reply (a 503 no-responders status is returned as a Reply)."""
        reply = self._reply_subject()
        self._publish(subject, reply, payload)
        while True:
            subj, hdr, data = self._next_msg()
            if subj == reply:
                return Reply(hdr, data)

    def api(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """``$JS.API.<path>`` (under the configured prefix) as JSON."""
        r = self.request(f"{self.conn.api_prefix}.{path}", json.dumps(body).encode() if body else b"")
        if r.status == 503:
            raise WireError("JetStream is not enabled on the server (no responders to the API)")
        return r.json()

    def stream_info(self, stream: str) -> dict[str, Any]:
        return self.api(f"STREAM.INFO.{stream}")

    def read_range(
        self,
        stream: str,
        first: int,
        last: int,
        filter_subject: str | None,
        keep: Callable[[bytes], bool] | None,
        batch: int,
        max_bytes: int,
        with_headers: bool,
    ) -> Iterator[BatchColumns]:
        """Every message of ``stream`` with ``first <= seq <= last`` (matching ``filter_subject``
        on the server and ``keep`` here), as one :class:`BatchColumns` per reply.

        Unfiltered reads keep two requests in flight, each for its own window of ``batch``
        sequences (``seq``, ``batch``, ``up_to_seq``): the server builds one reply while this
        side parses the previous. A window of ``batch`` sequences read with ``batch`` messages is
        always covered whole even with gaps, so the windows need no answer to be planned; a
        reply cut short by ``max_bytes`` gets a follow-up request for the rest of its window.
        Filtered reads are sequential: each request starts after the previous reply's last.
        """
        flt = filter_subject or ">"
        pending: deque[tuple[bytes, int, int]] = deque()  # (reply subject, window lo, window hi)

        def send(lo: int, hi: int) -> None:
            n = hi - lo + 1 if flt == ">" else batch
            req = {"seq": lo, "batch": n, "next_by_subj": flt, "max_bytes": max_bytes, "up_to_seq": hi}
            pending.append((self._send_batch(stream, req), lo, hi))

        if flt == ">":
            nxt = first
            while nxt <= last and len(pending) < PIPELINE_DEPTH:
                hi = min(nxt + batch - 1, last)
                send(nxt, hi)
                nxt = hi + 1
        else:
            nxt = last + 1
            send(first, last)
        while pending:
            reply, lo, hi = pending.popleft()
            out = BatchColumns(headers=[] if with_headers else None)
            status, num_pending, last_seq = self._receive_batch(stream, reply, out, keep, hi)
            if len(out):
                yield out
            if status == 204 and num_pending > 0 and last_seq < hi:
                send(max(last_seq + 1, lo), hi)  # cut short by max_bytes (or a filtered read's batch)
            while nxt <= last and len(pending) < PIPELINE_DEPTH:
                whi = min(nxt + batch - 1, last)
                send(nxt, whi)
                nxt = whi + 1

    def _send_batch(self, stream: str, req: dict[str, Any]) -> bytes:
        reply = self._reply_subject()
        self._publish(f"{self.conn.api_prefix}.DIRECT.GET.{stream}", reply, json.dumps(req).encode())
        return reply

    def _receive_batch(
        self,
        stream: str,
        reply: bytes,
        out: BatchColumns,
        keep: Callable[[bytes], bool] | None,
        up_to: int,
    ) -> tuple[int, int, int]:
        seqs, subjects, ts_us, data = out.seqs, out.subjects, out.ts_us, out.data
        headers = out.headers
        seconds = _SECONDS
        next_msg = self._next_msg
        while True:
            # fast path: a whole HMSG frame already buffered (the common case inside a batch)
            buf, pos, w = self._rb, self._r, self._w
            nl = buf.find(b"\r\n", pos, w)
            if nl > 0 and buf.startswith(b"HMSG ", pos, w):
                parts = bytes(buf[pos + 5 : nl]).split(b" ")
                start = nl + 2
                hend = start + int(parts[-2])
                end = start + int(parts[-1])
                if end + 2 <= w:
                    self._r = end + 2
                    subj, hdr, payload = parts[0], bytes(buf[start:hend]), bytes(buf[hend:end])
                else:
                    subj, hdr, payload = next_msg()
            else:
                subj, hdr, payload = next_msg()
            if subj != reply:
                continue  # a late reply to an earlier request that timed out
            if hdr[8:9] == b" ":  # a status: NATS/1.0 <code> ...
                r = Reply(hdr, payload)
                code = r.status
                if code == 204:
                    return (
                        204,
                        int(r.header("Nats-Num-Pending") or 0),
                        int(r.header("Nats-Last-Sequence") or 0),
                    )
                if code == 404:
                    return 404, 0, 0
                if code == 503:
                    raise WireError(
                        f"no responders for direct get on stream {stream!r}: the stream does not exist or "
                        "does not allow direct get (set allow_direct, e.g. `nats stream edit "
                        f"{stream} --allow-direct`)"
                    )
                raise WireError(
                    f"direct get on {stream!r} failed: {hdr.splitlines()[0].decode(errors='replace')}"
                )
            i = hdr.rfind(b"Nats-Stream: ")
            tail = hdr[i:].split(b"\r\n")
            if (
                tail[1][:14] == b"Nats-Subject: "
                and tail[2][:15] == b"Nats-Sequence: "
                and tail[3][:17] == b"Nats-Time-Stamp: "
            ):
                subject, seq, ts = tail[1][14:], int(tail[2][15:]), tail[3][17:]
            else:  # another order: look each one up
                r = Reply(hdr, b"")
                subject = (r.header("Nats-Subject") or "").encode()
                seq = int(r.header("Nats-Sequence") or 0)
                ts = (r.header("Nats-Time-Stamp") or "").encode()
            if (up_to and seq > up_to) or (keep is not None and not keep(subject)):
                continue
            seqs.append(seq)
            subjects.append(subject)
            secs = seconds.get(ts[:19])
            if secs is not None and ts[-1:] == b"Z" and ts[19:20] in (b".", b"Z"):
                frac = ts[20:-1]
                ts_us.append(secs * 1_000_000 + (int((frac + b"000000")[:6]) if frac else 0))
            else:
                ts_us.append(parse_ts_us(ts))
            data.append(payload)
            if headers is not None:
                headers.append(user_headers(hdr[:i]) if i > 10 else None)
