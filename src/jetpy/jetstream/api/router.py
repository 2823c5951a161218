"""ApiRouter: the ``$JS.API.*`` request/reply API as a table from subject to handler.

Owns dispatch (the route key is up to three tokens after ``$JS.API.``, the rest are the
handler's arguments), the response envelope (``type`` names), error translation (every
``ApiError`` becomes the ``error{code, err_code, description}`` object, with the fields
nats-server writes even in an error response) and the api counters. Handlers are registered by
the parts that own them (streams, consumers, account); unknown API subjects get no reply, as
nats-server does.

Must not know: what any handler does, streams, consumers, stores.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.ports import MessageBus

__all__ = ["API_SUBJECTS", "ApiRouter", "ApiStats", "Handler", "Route"]

log = logging.getLogger("jetpy.jetstream")

API_SUBJECTS = "$JS.API.>"

# (route args, request headers, request body) -> the response's fields (without ``type``)
Handler = Callable[[list[str], bytes, bytes], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Route:
    """One API endpoint: its response ``kind`` (``io.nats.jetstream.api.v1.<kind>_response``),
    its handler, and how many tokens follow the route key (None: the handler checks them)."""

    kind: str
    handler: Handler
    args: int | None = None


# Fields nats-server writes even in an error response (Go structs that embed ``ApiPaged`` or
# have non-omitempty fields next to the ``ApiResponse``).
_ERROR_EXTRAS: dict[str, dict[str, Any]] = {
    "stream_info": {"total": 0, "offset": 0, "limit": 0},
    "stream_names": {"total": 0, "offset": 0, "limit": 0, "streams": None},
    "stream_list": {"total": 0, "offset": 0, "limit": 0, "streams": []},
    "stream_purge": {"purged": 0},
    "consumer_names": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "consumer_list": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
}

_json = msgspec.json.Encoder()


@dataclass(slots=True)
class ApiStats:
    total: int = 0
    errors: int = 0
    inflight: int = 0


def _resp(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"io.nats.jetstream.api.v1.{kind}_response", **fields}


class ApiRouter:
    def __init__(self, bus: MessageBus, stats: ApiStats) -> None:
        self.bus = bus
        self.stats = stats
        self.routes: dict[str, Route] = {}

    def add(self, routes: dict[str, Route]) -> None:
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
        kind = route.kind
        stats = self.stats
        try:
            resp = route.handler(args, data[:hdr_len], data[hdr_len:])
        except ApiError as e:
            stats.errors += 1
            resp = _resp(kind, error=e.to_wire(), **_ERROR_EXTRAS.get(kind, {}))
        except Exception:  # a bug must not take the API down; the client gets a 500
            log.exception("JetStream API handler failed for %s", subject)
            stats.errors += 1
            err = ApiError.of(E.STREAM_GENERAL, err="internal error")
            resp = _resp(kind, error=err.to_wire(), **_ERROR_EXTRAS.get(kind, {}))
        else:
            resp = _resp(kind, **resp)
        # counted once answered, as nats-server (an INFO reply does not include itself)
        stats.total += 1
        self.bus.publish(reply.decode(), None, _json.encode(resp))
