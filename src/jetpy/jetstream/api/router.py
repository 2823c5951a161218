"""ApiRouter: the ``$JS.API.*`` request/reply API as a table from subject to handler.

Owns dispatch (the route key is up to three tokens after ``$JS.API.``, the rest are the
handler's arguments), the response (a handler returns its typed response, ``api/messages``;
every ``ApiError`` becomes the route's ``Response.failure(error)``, which carries the fields
nats-server writes even in an error response), encoding it with msgspec, and the api counters.
Handlers are registered by the parts that own them (streams, consumers, account); unknown API
subjects get no reply, as nats-server does.

Must not know: what any handler does, streams, consumers, stores.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import ApiResponse
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import encode
from jetpy.jetstream.ports import MessageBus

__all__ = ["API_SUBJECTS", "ApiRouter", "ApiStats", "Route"]

log = logging.getLogger("jetpy.jetstream")

API_SUBJECTS = "$JS.API.>"

R = TypeVar("R", bound=ApiResponse)


@dataclass(frozen=True, slots=True)
class Route(Generic[R]):
    """One API endpoint: its response Struct (whose ``type`` names the endpoint and whose
    ``failure`` answers errors), its handler ((route args, request headers, request body) -> the
    response), and how many tokens follow the route key (None: the handler checks them)."""

    response: type[R]
    handler: Callable[[list[str], bytes, bytes], R]
    args: int | None = None


@dataclass(slots=True)
class ApiStats:
    total: int = 0
    errors: int = 0
    inflight: int = 0


class ApiRouter:
    def __init__(self, bus: MessageBus, stats: ApiStats) -> None:
        self.bus = bus
        self.stats = stats
        self.routes: dict[str, Route[ApiResponse]] = {}

    def add(self, routes: Mapping[str, Route[Any]]) -> None:
        self.routes.update(routes)

    def handle(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The bus handler on ``$JS.API.>``."""
        toks = subject.decode().split(".")[2:]  # drop "$JS", "API"
        route = None
        args: list[str] = []
        for n in (3, 2, 1):
            r = self.routes.get(".".join(toks[:n]))
            if r is not None:
                if r.args is not None and len(toks) - n != r.args:
                    continue
                route = r
                args = toks[n:]
                break
        if route is None or reply is None:
            return  # unknown API subject (or no one to answer): no reply, as nats-server
        stats = self.stats
        resp: ApiResponse
        try:
            resp = route.handler(args, data[:hdr_len], data[hdr_len:])
        except ApiError as e:
            stats.errors += 1
            resp = route.response.failure(e)
        except Exception:  # a bug must not take the API down; the client gets a 500
            log.exception("JetStream API handler failed for %s", subject)
            stats.errors += 1
            resp = route.response.failure(ApiError.of(E.STREAM_GENERAL, err="internal error"))
        # counted once answered, as nats-server (an INFO reply does not include itself)
        stats.total += 1
        self.bus.publish(reply.decode(), None, encode(resp))
