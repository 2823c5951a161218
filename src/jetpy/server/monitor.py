"""Monitor: nats-server's monitoring HTTP server (``-m``/``--http_port``, or over TLS with
``-ms``/``--https_port`` and the client port's certificate) on asyncio.

Owns the HTTP/1.1 side: listening, reading requests within fixed limits, keep-alive, error
statuses (an unknown path is a 404 with a short JSON error), the response headers nats-server
sends (plus ``Access-Control-Allow-Origin: *``) and JSONP (``?callback=``), and which paths exist:
nats-server's (``monitor_endpoints``), ``/metrics`` (``metrics``) and the dashboard
(``dashboard``). The formats are ``monitor_format``'s. Knows nothing of the NATS protocol.

Only GET and HEAD are served (405 otherwise; nats-server answers any method). A request that
does not parse gets a 4xx and the connection is closed; nothing a client sends can stop the
monitor or grow its memory beyond the limits below.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
import ssl
import urllib.parse
from dataclasses import dataclass, field

from jetpy.server import dashboard
from jetpy.server.loop_lag import LoopLag
from jetpy.server.metrics import Metrics
from jetpy.server.monitor_endpoints import (
    JSON,
    Endpoints,
    MonitoredServer,
    Reply,
    base_prefix,
    json_reply,
    text_reply,
)
from jetpy.server.monitor_format import Query

__all__ = ["HttpError", "Monitor", "MonitoredServer", "Request", "parse_request_head"]

log = logging.getLogger("jetpy.server")

MAX_HEAD_BYTES = 16 * 1024  # request line + headers: monitoring URLs are short; more gets 431
MAX_HEADERS = 100  # header lines per request; more gets 431
TLS_HANDSHAKE_TIMEOUT = 2.0  # seconds an HTTPS client has to finish its handshake
MAX_BODY_BYTES = 64 * 1024  # a GET carries no body: a small one is read and dropped, more gets 413
MAX_CONNECTIONS = 256  # concurrent monitoring connections; one more gets 503 and is closed
IDLE_TIMEOUT = 30.0  # seconds a connection may take to send its next request (or the rest of it)
WRITE_TIMEOUT = 10.0  # seconds a reply may take to drain to a slow reader before we hang up
MAX_CALLBACK = 128  # characters of a JSONP callback name
# After refusing a request we close; bytes the client is still sending would turn that close
# into a TCP reset that can destroy our answer before it is read. So, like Go's net/http, we
# half-close and drop what still arrives, for a moment and up to a bound.
LINGER_TIMEOUT = 1.0
LINGER_MAX_BYTES = 256 * 1024

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 token: methods, header names
_CALLBACK = re.compile(r"^[A-Za-z_$][\w$.]*$")  # a JavaScript name (dotted), never markup
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Request Entity Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
MAX_PATH_ECHO = 128  # characters of an unknown path repeated in its 404


class HttpError(Exception):
    """A request we will not serve; answered with ``status`` and then the connection closes."""

    def __init__(self, status: int, detail: str = "") -> None:
        super().__init__(detail or _REASONS.get(status, ""))
        self.status = status
        self.detail = detail

    def reply(self) -> Reply:
        text = f"{self.status} {_REASONS.get(self.status, 'Error')}"
        return text_reply(self.status, f"{text}: {self.detail}" if self.detail else text)


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    version: str  # "HTTP/1.0" or "HTTP/1.1"
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names
    keep_alive: bool = True
    content_length: int = 0


def parse_request_head(head: bytes) -> Request:
    """Parse a request line and headers (up to and including the blank line). Pure; raises
    :class:`HttpError` and nothing else for any input."""
    text = head.decode("latin-1").lstrip("\r\n")
    lines = text.split("\n")
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    while lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise HttpError(400)
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]) or not parts[1]:
        raise HttpError(400)
    method, target, version = parts
    if not version.startswith("HTTP/"):
        raise HttpError(400)
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise HttpError(505)
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpError(431)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.match(name):
            raise HttpError(400, "malformed header line")
        key = name.lower()
        value = value.strip(" \t")
        if key in headers:
            if key in ("content-length", "host") and headers[key] != value:
                raise HttpError(400, f"conflicting {name} headers")
            if key != "content-length" and key != "host":
                headers[key] = f"{headers[key]}, {value}"
        else:
            headers[key] = value
    if "transfer-encoding" in headers:
        raise HttpError(501, "request bodies are not supported")
    length = 0
    if "content-length" in headers:
        cl = headers["content-length"]
        if not cl.isascii() or not cl.isdigit() or len(cl) > 18:
            raise HttpError(400, "bad Content-Length")
        length = int(cl)
    if version == "HTTP/1.1" and "host" not in headers:
        raise HttpError(400, "missing required Host header")
    if target.startswith("/"):
        raw_path, _, raw_query = target.partition("?")
    elif target.startswith(("http://", "https://")):
        split = urllib.parse.urlsplit(target)
        raw_path, raw_query = split.path or "/", split.query
    else:
        raise HttpError(400)
    raw_query = raw_query.partition("#")[0]
    query: dict[str, str] = {}
    for k, v in urllib.parse.parse_qsl(raw_query, keep_blank_values=True, errors="replace"):
        query.setdefault(k, v)
    conn_tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    keep_alive = "close" not in conn_tokens if version == "HTTP/1.1" else "keep-alive" in conn_tokens
    return Request(method, urllib.parse.unquote(raw_path), query, version, headers, keep_alive, length)


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def under_base(base: str, path: str) -> str | None:
    """``path`` as the endpoints know it, below ``http_base_path``; None for a path outside it."""
    prefix = base_prefix(base)
    if not prefix:
        return path
    if path == prefix:
        return "/"
    rest = path[len(prefix) :]
    return rest if rest.startswith("/") and rest != "/" else None  # "/nats/" is no page either


class Monitor:
    """The monitoring HTTP server of one server."""

    def __init__(self, server: MonitoredServer, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls  # HTTPS (https_port) with the client port's certificate
        self.server = server
        self.endpoints = Endpoints(server)
        self.loop_lag = LoopLag()
        self.metrics = Metrics(self.endpoints, self.loop_lag)
        self.endpoints.routes["/metrics"] = ("/metrics", self.metrics.handle)
        for path, handler in dashboard.routes().items():
            self.endpoints.routes[path] = ("/dashboard", handler)
        self.port = 0
        self._listener: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> int:
        """Listen on ``http_host`` (or ``host``) and ``http_port``, or ``https_port`` with TLS
        (-1: any free port); the port."""
        opts = self.server.options
        host = opts.http_host or opts.host or "0.0.0.0"
        wanted = opts.https_port if self.tls is not None else opts.http_port
        port = 0 if wanted < 0 else wanted
        self._listener = await asyncio.start_server(
            self._serve,
            host,
            port,
            limit=MAX_HEAD_BYTES,
            reuse_address=True,
            backlog=128,
            ssl=self.tls,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT if self.tls is not None else None,
        )
        self.port = int(self._listener.sockets[0].getsockname()[1])
        if self.tls is None:  # /varz reports https_port as configured, as nats-server does
            self.endpoints.http_port = self.port
        self.loop_lag.start()
        scheme = "https" if self.tls is not None else "http"
        log.info("Starting %s monitor on %s", scheme, _join_host_port(host, self.port))
        return self.port

    async def stop(self) -> None:
        """Stop listening and hang up on every monitoring connection."""
        self._closing = True
        await self.loop_lag.stop()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        conns = list(self._conns)
        for task in conns:
            task.cancel()
        if conns:
            await asyncio.gather(*conns, return_exceptions=True)
        if listener is not None:
            await listener.wait_closed()

    # -- one connection ---------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            if len(self._conns) > MAX_CONNECTIONS:
                await self._refuse(reader, writer, text_reply(503, "too many monitoring connections\n"))
                return
            while not self._closing:
                if not await self._one_request(reader, writer):
                    return
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # stop() cancels us; end normally so asyncio's stream callback has nothing to report
            if not self._closing:
                raise
        except Exception:  # a bug in an endpoint must cost one connection, never the monitor
            log.exception("monitoring connection failed")
        finally:
            if task is not None:
                self._conns.discard(task)
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read, answer and account for one request; False when the connection is done."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
        except asyncio.LimitOverrunError:
            await self._refuse(reader, writer, HttpError(431).reply())
            return False
        except asyncio.IncompleteReadError as e:
            if e.partial.strip():
                await self._refuse(reader, writer, HttpError(400).reply())
            return False
        try:
            req = parse_request_head(head)
        except HttpError as e:
            await self._refuse(reader, writer, e.reply())
            return False
        if req.content_length > MAX_BODY_BYTES:
            await self._refuse(reader, writer, HttpError(413).reply(), req.version)
            return False
        if req.method not in ("GET", "HEAD"):
            reply = text_reply(405, "405 method not allowed\n")
            await self._refuse(reader, writer, reply, req.version, allow=True)
            return False
        if req.content_length:
            await asyncio.wait_for(reader.readexactly(req.content_length), IDLE_TIMEOUT)
        reply = await self._dispatch(req)
        keep = req.keep_alive and not self._closing
        await self._send(writer, reply, req.version, req.method == "HEAD", not keep)
        return keep

    async def _dispatch(self, req: Request) -> Reply:
        path = under_base(self.server.options.http_base_path, req.path)
        try:
            reply = None if path is None else await self.endpoints.handle(path, Query(req.query))
        except Exception:
            log.exception("monitoring endpoint %s failed", req.path)
            return text_reply(500, "500 internal server error\n")
        if reply is None:
            path = req.path if len(req.path) <= MAX_PATH_ECHO else req.path[:MAX_PATH_ECHO] + "..."
            return json_reply({"code": 404, "error": f"no monitoring endpoint at {path}"}, 404, indent=False)
        callback = req.query.get("callback", "")
        if callback and reply.content_type == JSON:
            if len(callback) > MAX_CALLBACK or not _CALLBACK.match(callback):
                return text_reply(400, "invalid JSONP callback name")
            return Reply(reply.status, callback.encode() + b"(" + reply.body + b")", "application/javascript")
        return reply

    async def _refuse(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        reply: Reply,
        version: str = "HTTP/1.1",
        allow: bool = False,
    ) -> None:
        """Answer with an error, half-close, and drop what the client still sends (see LINGER_*)."""
        await self._send(writer, reply, version, False, True, allow)
        if writer.can_write_eof():
            writer.write_eof()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LINGER_TIMEOUT
        dropped = 0
        try:
            while dropped < LINGER_MAX_BYTES:
                left = deadline - loop.time()
                if left <= 0:
                    return
                chunk = await asyncio.wait_for(reader.read(64 * 1024), left)
                if not chunk:
                    return
                dropped += len(chunk)
        except (TimeoutError, ConnectionError):
            pass

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        reply: Reply,
        version: str,
        head_only: bool,
        close: bool,
        allow: bool = False,
    ) -> None:
        lines = [
            f"{version} {reply.status} {_REASONS.get(reply.status, 'Status')}",
            f"Content-Type: {reply.content_type}",
            "Access-Control-Allow-Origin: *",
            f"Date: {email.utils.formatdate(usegmt=True)}",
            f"Content-Length: {len(reply.body)}",
        ]
        lines.extend(f"{name}: {value}" for name, value in reply.headers)
        if allow:
            lines.append("Allow: GET, HEAD")
        if close:
            lines.append("Connection: close")
        elif version == "HTTP/1.0":
            lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        writer.write(head if head_only else head + reply.body)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)
