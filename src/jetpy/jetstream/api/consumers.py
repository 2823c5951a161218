"""The ``$JS.API.CONSUMER.*`` request handlers: create (all four subject forms), info, names,
list, delete, pause and unpin, with nats-server's checks between the request subject and the
config, the create/update actions and their error codes. A create or update of an existing
consumer never changes its ``pause_until`` (only ``CONSUMER.PAUSE`` does, as in nats-server),
and each answered create or update of a paused consumer announces the pause again. Each handler decodes its typed request and returns
its typed response (``api/messages``). Installed into the ``ApiRouter`` route table.

Must not know: dispatch, encoding and error responses (the router's), how consumers deliver (the
manager's).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import (
    ConsumerCreateRequest,
    ConsumerCreateResponse,
    ConsumerDeleteResponse,
    ConsumerInfoResponse,
    ConsumerListResponse,
    ConsumerNamesResponse,
    ConsumerPauseRequest,
    ConsumerPauseResponse,
    ConsumerUnpinRequest,
    ConsumerUnpinResponse,
    PagedRequest,
)
from jetpy.jetstream.api.requests import as_request, decode_body, decode_request, expect_empty
from jetpy.jetstream.api.router import Later, Route, WithHeaders
from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.manager import ConsumerManager, ephemeral_name
from jetpy.jetstream.consumers.pause import utc
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.info import consumer_info
from jetpy.jetstream.models import LIST_LIMIT, NAMES_LIMIT, ZERO_TIME, ConsumerConfig, parse_time
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.unbuilt import check_direct_built
from jetpy.jetstream.validate import check_consumer_config, check_consumer_update
from jetpy.protocol.headers import encode_headers

__all__ = ["ConsumerApi", "create_request", "pause_request", "pause_response", "unpin_group"]


class ConsumerApi:
    def __init__(self, registry: StreamRegistry, manager: ConsumerManager) -> None:
        self.registry = registry
        self.manager = manager

    def routes(self) -> dict[str, Route[Any]]:
        # consumer routes take optional filter tokens: the handlers check what follows the key
        return {
            "CONSUMER.CREATE": Route(ConsumerCreateResponse, self.create),
            "CONSUMER.DURABLE.CREATE": Route(ConsumerCreateResponse, self.create_durable),
            "CONSUMER.INFO": Route(ConsumerInfoResponse, self.info),
            "CONSUMER.NAMES": Route(ConsumerNamesResponse, self.names),
            "CONSUMER.LIST": Route(ConsumerListResponse, self.list_),
            "CONSUMER.DELETE": Route(ConsumerDeleteResponse, self.delete),
            "CONSUMER.PAUSE": Route(ConsumerPauseResponse, self.pause, args=2),
            "CONSUMER.UNPIN": Route(ConsumerUnpinResponse, self.unpin, args=2),
        }

    # -- helpers --------------------------------------------------------------------------------

    def _stream(self, name: str) -> Stream:
        return self.registry.require(name)

    def _consumer(self, args: list[str]) -> Consumer:
        """The consumer the request names. A mirror's or source's own (``direct``) is not the
        API's to read, pause or delete: "consumer not found", and it goes on copying, as
        nats-server 2.15.1 answers (it is not listed either)."""
        if len(args) < 2:
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        s = self._stream(args[0])
        c = self.manager.get(s, args[1])
        if c is None or c.config.direct:
            self._not_offline(s, args[1])
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        return c

    def _not_offline(self, stream: Stream, name: str) -> None:
        """A consumer whose files could not be read back answers with why (10195), never as
        absent: its name is taken, its files kept."""
        why = self.manager.offline(stream).get(name)
        if why is not None:
            raise ApiError.of(E.CONSUMER_OFFLINE_REASON, err=why)

    # -- create ---------------------------------------------------------------------------------

    def create_durable(
        self, args: list[str], hdr: bytes, body: bytes
    ) -> ConsumerCreateResponse | WithHeaders[ConsumerCreateResponse]:
        if len(args) != 2:
            raise ApiError.of(E.CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT)
        return self._create(args[0], args[1], "", body, legacy_durable=True)

    def create(
        self, args: list[str], hdr: bytes, body: bytes
    ) -> ConsumerCreateResponse | WithHeaders[ConsumerCreateResponse]:
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        name = args[1] if len(args) > 1 else ""
        filt = ".".join(args[2:]) if len(args) > 2 else ""
        return self._create(args[0], name, filt, body, legacy_durable=False, new_style=len(args) > 1)

    def _create(
        self,
        stream_name: str,
        name: str,
        filt: str,
        body: bytes,
        *,
        legacy_durable: bool,
        new_style: bool = False,
    ) -> ConsumerCreateResponse | WithHeaders[ConsumerCreateResponse]:
        req, cfg, action = create_request(
            stream_name, name, filt, body, legacy_durable=legacy_durable, new_style=new_style
        )
        stream = self._stream(stream_name)
        pedantic = bool(req.pedantic)
        consumers = self.manager.consumers(stream)
        others = [c.config for c in consumers.values() if c.name not in (cfg.name, cfg.durable_name)]
        cfg = check_consumer_config(
            stream.config,
            cfg,
            pedantic=pedantic,
            others=others,
            account_max_ack_pending=self.registry.resources.limits.max_ack_pending,
        )
        check_direct_built(stream.config, cfg)
        cname = cfg.durable_name or cfg.name
        if cname:
            self._not_offline(stream, cname)
        existing = consumers.get(cname) if cname else None
        if existing is not None:
            cfg = msgspec.structs.replace(cfg, pause_until=existing.config.pause_until)
            if action == "create" and existing.config != cfg:
                raise ApiError.of(E.CONSUMER_ALREADY_EXISTS)
            if existing.config != cfg:
                bound = existing.push and existing.active
                new = check_consumer_update(existing.config, cfg, deliver_subject_bound=bound)
                self.manager.update(existing, new)
            return self._answer(stream, existing)
        if action == "update":
            raise ApiError.of(E.CONSUMER_DOES_NOT_EXIST)
        taken = len(self.manager.listed(stream)) + len(self.manager.offline(stream))
        most = self.registry.resources.consumer_limit(stream.config)
        if most > 0 and taken >= most:
            raise ApiError.of(E.MAXIMUM_CONSUMERS_LIMIT)
        if not cname:
            cname = ephemeral_name()
            while cname in consumers:
                cname = ephemeral_name()
            cfg = msgspec.structs.replace(cfg, name=cname)
        elif not cfg.name:
            cfg = msgspec.structs.replace(cfg, name=cname)
        c = self.manager.create(stream, cname, cfg)
        self.manager.action_advisory(c, "create")
        return self._answer(stream, c)

    def _answer(
        self, stream: Stream, c: Consumer
    ) -> ConsumerCreateResponse | WithHeaders[ConsumerCreateResponse]:
        """The create response; a paused consumer announces its pause (as nats-server does on
        every create or update it answers for one)."""
        now = time.time_ns()
        if c.paused(now):
            c.announce_pause(now)
        return _answer(stream, c)

    # -- read -----------------------------------------------------------------------------------

    def info(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerInfoResponse:
        expect_empty(body)
        return ConsumerInfoResponse.of(consumer_info(self._consumer(args)))

    def _paged(self, args: list[str], body: bytes) -> tuple[Stream, int]:
        """The stream a NAMES/LIST request names, and its offset."""
        req = decode_request(body, PagedRequest)
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return self._stream(args[0]), req.offset

    @staticmethod
    def _at(offset: int, n: int) -> int:
        # a negative offset reads as 0 (nats-server 2.9 panics on it), one past the end as the end
        return min(max(offset, 0), n)

    def names(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerNamesResponse:
        """Every consumer's name, offline ones too (their names are taken)."""
        s, offset = self._paged(args, body)
        every = sorted([*self.manager.listed(s), *self.manager.offline(s)])
        offset = self._at(offset, len(every))
        page = every[offset : offset + NAMES_LIMIT]
        return ConsumerNamesResponse(total=len(every), offset=offset, limit=NAMES_LIMIT, consumers=page)

    def list_(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerListResponse:
        """The served consumers' infos, page by page; offline ones by name and reason on every
        page (``offline``, and ``missing`` for tools that predate it)."""
        s, offset = self._paged(args, body)
        consumers = self.manager.listed(s)
        names = sorted(consumers)
        offset = self._at(offset, len(names))
        offline = self.manager.offline(s)
        return ConsumerListResponse(
            total=len(names),
            offset=offset,
            limit=LIST_LIMIT,
            consumers=[consumer_info(consumers[n]) for n in names[offset : offset + LIST_LIMIT]],
            missing=sorted(offline) or None,
            offline=dict(sorted(offline.items())) or None,
        )

    def delete(self, args: list[str], hdr: bytes, body: bytes) -> Later[ConsumerDeleteResponse]:
        """Delete a consumer (on an interest stream, answered once the messages nobody wants any
        more are gone: a sweep paced in slices); an offline one's files are deleted on this
        explicit request."""
        expect_empty(body)
        if len(args) >= 2:
            s = self._stream(args[0])
            if self.manager.get(s, args[1]) is None and args[1] in self.manager.offline(s):
                self.manager.delete_offline(s, args[1])
                return ConsumerDeleteResponse(success=True)
        c = self._consumer(args)
        sweep = self.manager.delete(c)
        if sweep is None:
            return ConsumerDeleteResponse(success=True)
        return _after(sweep, ConsumerDeleteResponse(success=True))

    # -- pause and unpin ------------------------------------------------------------------------

    def pause(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerPauseResponse:
        """Pause a consumer until ``pause_until`` (UTC from then on), or resume it (no time, or
        one in the past); answers with the pause as it is now. The body is read before the
        consumer is looked up, strictly, as nats-server reads it."""
        pause_until = pause_request(body)
        c = self._consumer(args)
        now = time.time_ns()
        self.manager.pause(c, pause_until, now)
        return pause_response(pause_until, now)

    def unpin(self, args: list[str], hdr: bytes, body: bytes) -> ConsumerUnpinResponse:
        """Release the pin of a consumer's priority group: its next request without a pin gets a
        new one (an ``admin`` unpinned advisory either way)."""
        group = unpin_group(body)
        c = self._consumer(args)
        if group not in c.config.priority_groups:
            raise ApiError.of(E.CONSUMER_INVALID_PRIORITY_GROUP)
        self.manager.unpin(c, group)
        return ConsumerUnpinResponse()


def unpin_group(body: bytes) -> str:
    """The priority group a ``CONSUMER.UNPIN`` request names, checked as nats-server checks it
    (before the consumer is looked up)."""
    if not body.strip():
        raise ApiError.of(E.INVALID_JSON, err="unexpected end of JSON input")
    req = decode_request(body, ConsumerUnpinRequest)
    if not req.group:
        raise ApiError.of(E.INVALID_JSON, err="consumer group not specified")
    return req.group


def create_request(
    stream_name: str, name: str, filt: str, body: bytes, *, legacy_durable: bool, new_style: bool = False
) -> tuple[ConsumerCreateRequest, ConsumerConfig, str]:
    """A create request read and checked against its subject (``CONSUMER.CREATE.<stream>``,
    ``...<stream>.<name>[.<filter>]``, ``CONSUMER.DURABLE.CREATE.<stream>.<durable>``): the
    request, its config (named as the subject says) and its action ("", "create", "update").
    The config's checks against the stream are the caller's."""
    # nats-server decodes the body into a struct first: an empty body is invalid JSON, a
    # missing config is the zero config (ack none, deliver all), a config or field of the
    # wrong JSON type is invalid JSON (2.9 gives no detail); the stream name in the body must
    # match the subject's (10056)
    if not body.strip():
        raise ApiError.of(E.INVALID_JSON)
    req = decode_request(body, ConsumerCreateRequest)
    cfg = req.config
    if req.stream_name != stream_name:
        raise ApiError.of(E.STREAM_MISMATCH)
    action = req.action if isinstance(req.action, str) else ""
    if name and ("/" in name or "\\" in name):
        raise ApiError.of(E.CONSUMER_NAME_CONTAINS_PATH_SEPARATORS)
    if legacy_durable:
        if not cfg.durable_name:
            raise ApiError.of(E.CONSUMER_DURABLE_NAME_NOT_SET)
        if cfg.durable_name != name:
            raise ApiError.of(E.CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT)
    elif new_style:
        if cfg.durable_name and cfg.durable_name != name:
            raise ApiError.of(E.CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT)
        cfg = msgspec.structs.replace(cfg, name=name)
    elif cfg.durable_name:
        # the legacy ephemeral subject: a durable belongs on a subject that names it
        raise ApiError.of(E.CONSUMER_EPHEMERAL_WITH_DURABLE_NAME)
    if filt:
        if cfg.filter_subjects:
            raise ApiError.of(E.CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED)
        if filt != cfg.filter_subject:
            raise ApiError.of(E.CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH)
    return req, cfg, action


def pause_request(body: bytes) -> str | None:
    """A ``CONSUMER.PAUSE`` body read strictly, as nats-server reads it: the time to pause until
    (UTC), or None to resume."""
    obj = {} if body.strip() in (b"", b"null") else decode_body(body)
    for key in obj:
        if key != "pause_until":
            raise ApiError.of(E.INVALID_JSON, err=f'json: unknown field "{key}"')
    req = as_request(obj, ConsumerPauseRequest)
    try:
        return utc(req.pause_until)
    except ValueError as exc:
        raise ApiError.of(E.INVALID_JSON, err=str(exc)) from None


def pause_response(pause_until: str | None, now: int) -> ConsumerPauseResponse:
    """The answer to a pause: the pause as it is at ``now``."""
    until = parse_time(pause_until) if pause_until else 0
    paused = until > now
    return ConsumerPauseResponse(
        paused=paused, pause_until=pause_until or ZERO_TIME, pause_remaining=until - now if paused else 0
    )


async def _after(task: asyncio.Task[None], resp: ConsumerDeleteResponse) -> ConsumerDeleteResponse:
    await asyncio.shield(task)  # the sweep goes on even if the request is given up on
    return resp


def _answer(stream: Stream, c: Consumer) -> ConsumerCreateResponse | WithHeaders[ConsumerCreateResponse]:
    """The create response; a mirror's or source's own consumer is also told which incarnation
    of the stream it reads (``Nats-Stream-Identity``, as nats-server 2.15 answers)."""
    resp = ConsumerCreateResponse.of(consumer_info(c))
    if c.config.direct:
        return WithHeaders(resp, encode_headers([("Nats-Stream-Identity", stream.identity)]))
    return resp
