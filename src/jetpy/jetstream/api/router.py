"""ApiRouter: the ``$JS.API.*`` request/reply API as a table from subject to handler.

Owns dispatch (the route key is up to three tokens after ``$JS.API.`` or, with a JetStream
domain, ``$JS.<domain>.API.``; the rest are the
handler's arguments), the response (a handler returns its typed response, ``api/messages``;
every ``ApiError`` becomes the route's ``Response.failure(error)``, which carries the fields
nats-server writes even in an error response), encoding it with msgspec, and the api counters.
Handlers are registered by the parts that own them (streams, consumers, account); unknown API
subjects get no reply, as nats-server does. A request from a client with permissions is put to
the :class:`Guard` (the bus names the caller) before its handler runs, and its response after.
In a cluster every server receives each request, and a handler raises :class:`Elsewhere` on
the servers that leave it to another (the meta group's or the stream's leader).

A handler answers at once, or returns a coroutine for work too large to do in one go on the
event loop (it runs as a task that may use a worker thread and yields between slices). Requests
are answered in the order they came: while such a task runs, later requests wait in a queue of
at most :data:`MAX_QUEUED` (past it they are dropped unanswered, with a warning, as nats-server
drops requests past its API queue limit), so a handler never sees the streams change under it.

Must not know: what any handler does, streams, consumers, stores.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeAlias, TypeVar

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import ApiResponse
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import encode
from jetpy.jetstream.ports import Caller, MessageBus

__all__ = [
    "API_SUBJECTS",
    "DOMAIN_API_SUBJECTS",
    "MAX_QUEUED",
    "ApiRouter",
    "ApiStats",
    "Elsewhere",
    "Guard",
    "Later",
    "Route",
    "WithHeaders",
]

log = logging.getLogger("jetpy.jetstream")

API_SUBJECTS = "$JS.API.>"
DOMAIN_API_SUBJECTS = "$JS.{}.API.>"  # .format(domain)

MAX_QUEUED: Final = 10_000
"""Requests waiting behind one that is worked on off the loop (nats-server's API queue limit)."""

R = TypeVar("R", bound=ApiResponse)


class Elsewhere(Exception):
    """Raised by a handler when another server of the cluster answers the request (the stream's
    or the meta group's leader): this one sends nothing, and the request is not counted here."""


@dataclass(frozen=True, slots=True)
class WithHeaders(Generic[R]):
    """A response sent with a header block (nats-server answers a mirror's or source's consumer
    create with the origin's ``Nats-Stream-Identity``)."""

    response: R
    headers: bytes


Later: TypeAlias = R | WithHeaders[R] | Coroutine[Any, Any, R]
"""A handler's result: the response (with headers, if any), or a coroutine that produces it (see
the module doc)."""


@dataclass(frozen=True, slots=True)
class Route(Generic[R]):
    """One API endpoint: its response Struct (whose ``type`` names the endpoint and whose
    ``failure`` answers errors), its handler ((route args, request headers, request body) -> the
    response), how many tokens follow the route key (None: the handler checks them), and whether
    a successful answer counts in the api counters (nats-server's message get answers without
    counting; its errors count)."""

    response: type[R]
    handler: Callable[[list[str], bytes, bytes], Later[R]]
    args: int | None = None
    counts_success: bool = True


class Guard(Protocol):
    """What a request may touch, by its route key (``STREAM.CREATE``) and arguments; both raise
    ``ApiError`` to refuse."""

    def check_request(self, key: str, args: list[str], body: bytes, caller: Caller) -> None: ...

    def check_response(self, key: str, response: ApiResponse, caller: Caller) -> None: ...


@dataclass(slots=True)
class ApiStats:
    total: int = 0
    errors: int = 0
    inflight: int = 0


@dataclass(frozen=True, slots=True)
class _Request:
    subject: bytes
    route: Route[ApiResponse]
    args: list[str]
    hdr: bytes
    body: bytes
    reply: bytes
    key: str = ""
    caller: Caller | None = None  # None: the server, or a client without permissions


class ApiRouter:
    def __init__(self, bus: MessageBus, stats: ApiStats) -> None:
        self.bus = bus
        self.stats = stats
        self.routes: dict[str, Route[ApiResponse]] = {}
        self.guard: Guard | None = None
        self._task: asyncio.Task[None] | None = None  # a request worked on off the loop
        self._queue: deque[_Request] = deque()
        # the reply subject of the request whose handler is being called (for a handler that
        # lets another server of a cluster answer it)
        self.replying_to = b""

    def add(self, routes: Mapping[str, Route[Any]]) -> None:
        self.routes.update(routes)

    def handle(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The bus handler on ``$JS.API.>``."""
        self._route(subject.decode().split(".")[2:], subject, reply, hdr_len, data)  # drop "$JS", "API"

    def handle_domain(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The bus handler on ``$JS.<domain>.API.>``: the same API."""
        self._route(subject.decode().split(".")[3:], subject, reply, hdr_len, data)

    def _route(self, toks: list[str], subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        route = None
        args: list[str] = []
        key = ""
        for n in (3, 2, 1):
            key = ".".join(toks[:n])
            r = self.routes.get(key)
            if r is not None:
                if r.args is not None and len(toks) - n != r.args:
                    continue
                route = r
                args = toks[n:]
                break
        if route is None or reply is None:
            return  # unknown API subject (or no one to answer): no reply, as nats-server
        req = _Request(subject, route, args, data[:hdr_len], data[hdr_len:], reply, key, self.bus.caller())
        if self._task is not None:  # keep the order: after the request being worked on
            if len(self._queue) >= MAX_QUEUED:
                log.warning("JetStream API queue limit reached, dropping a request for %s", subject)
                return
            self.stats.inflight += 1
            self._queue.append(req)
            return
        self._dispatch(req)

    def _dispatch(self, req: _Request) -> None:
        try:
            if req.caller is not None and self.guard is not None:
                self.guard.check_request(req.key, req.args, req.body, req.caller)
            self.replying_to = req.reply
            resp = req.route.handler(req.args, req.hdr, req.body)
        except Elsewhere:
            return
        except Exception as e:
            self._answer(req, e)
            return
        if isinstance(resp, Coroutine):
            self.stats.inflight += 1
            self._task = asyncio.get_running_loop().create_task(self._later(req, resp))
            return
        self._answer(req, resp)

    async def _later(self, req: _Request, work: Coroutine[Any, Any, ApiResponse]) -> None:
        answer = True
        try:
            result: ApiResponse | Exception = await work
        except Elsewhere as e:
            result, answer = e, False
        except Exception as e:
            result = e
        self.stats.inflight -= 1
        self._task = None
        if answer:
            self._answer(req, result)
        while self._queue and self._task is None:
            self.stats.inflight -= 1
            self._dispatch(self._queue.popleft())

    def _answer(self, req: _Request, result: ApiResponse | WithHeaders[ApiResponse] | Exception) -> None:
        stats = self.stats
        resp: ApiResponse
        headers = b""
        if isinstance(result, WithHeaders):
            resp, headers = result.response, result.headers
        elif isinstance(result, ApiError):
            stats.errors += 1
            resp = req.route.response.failure(result)
        elif isinstance(result, Exception):  # a bug must not take the API down; the client gets a 500
            log.error("JetStream API handler failed for %s", req.subject, exc_info=result)
            stats.errors += 1
            resp = req.route.response.failure(ApiError.of(E.STREAM_GENERAL, err="internal error"))
        else:
            resp = result
            if req.caller is not None and self.guard is not None:
                try:
                    self.guard.check_response(req.key, resp, req.caller)
                except ApiError as e:
                    stats.errors += 1
                    resp = req.route.response.failure(e)
        # counted once answered, as nats-server (an INFO reply does not include itself)
        if req.route.counts_success or resp.error is not None:
            stats.total += 1
        self.bus.publish(req.reply.decode(), None, encode(resp), headers)

    async def stop(self) -> None:
        """Stop the request being worked on, if any; drop those waiting (the server is going)."""
        self._queue.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
