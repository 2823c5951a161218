"""The ``$JS.API.CONSUMER.*`` request handlers: create (all four subject forms), info, names,
list and delete, with nats-server's checks between the request subject and the config, the
create/update actions and their error codes. Installed into the ``ApiRouter`` route table.

Must not know: dispatch and the envelope (the router's), how consumers deliver (the manager's).
"""

from __future__ import annotations

from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.requests import decode_body, offset_of
from jetpy.jetstream.api.router import Route
from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.manager import ConsumerManager, ephemeral_name
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.info import consumer_info
from jetpy.jetstream.models import LIST_LIMIT, NAMES_LIMIT, ConsumerConfig
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.validate import check_consumer_config, check_consumer_update

__all__ = ["ConsumerApi"]


class ConsumerApi:
    def __init__(self, registry: StreamRegistry, manager: ConsumerManager) -> None:
        self.registry = registry
        self.manager = manager

    def routes(self) -> dict[str, Route]:
        # consumer routes take optional filter tokens: the handlers check what follows the key
        return {
            "CONSUMER.CREATE": Route("consumer_create", self.create),
            "CONSUMER.DURABLE.CREATE": Route("consumer_create", self.create_durable),
            "CONSUMER.INFO": Route("consumer_info", self.info),
            "CONSUMER.NAMES": Route("consumer_names", self.names),
            "CONSUMER.LIST": Route("consumer_list", self.list_),
            "CONSUMER.DELETE": Route("consumer_delete", self.delete),
        }

    # -- helpers --------------------------------------------------------------------------------

    def _stream(self, name: str) -> Stream:
        s = self.registry.get(name)
        if s is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return s

    def _consumer(self, args: list[str]) -> Consumer:
        if len(args) < 2:
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        s = self._stream(args[0])
        c = self.manager.get(s, args[1])
        if c is None:
            raise ApiError.of(E.CONSUMER_NOT_FOUND)
        return c

    # -- create ---------------------------------------------------------------------------------

    def create_durable(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        if len(args) != 2:
            raise ApiError.of(E.CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT)
        return self._create(args[0], args[1], "", body, legacy_durable=True)

    def create(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        name = args[1] if len(args) > 1 else ""
        filt = ".".join(args[2:]) if len(args) > 2 else ""
        return self._create(args[0], name, filt, body, legacy_durable=False, new_style=len(args) > 1)

    def _create(
        self, stream_name: str, name: str, filt: str, body: bytes, *, legacy_durable: bool, new_style: bool = False
    ) -> dict[str, Any]:
        # nats-server decodes the body into a struct first: an empty body is invalid JSON, a
        # missing config is the zero config (ack none, deliver all), a config of the wrong JSON
        # type is invalid JSON; the stream name in the body must match the subject's (10056)
        if not body.strip():
            raise ApiError.of(E.INVALID_JSON)
        req = decode_body(body)
        raw_cfg = req.get("config")
        if raw_cfg is None:
            raw_cfg = {}
        if not isinstance(raw_cfg, dict):
            raise ApiError.of(E.INVALID_JSON)
        try:
            cfg = msgspec.convert(raw_cfg, ConsumerConfig, strict=False)
        except msgspec.ValidationError as e:
            raise ApiError.of(E.INVALID_JSON) from e  # nats-server 2.9 gives no detail
        if req.get("stream_name") != stream_name:
            raise ApiError.of(E.STREAM_MISMATCH)
        action = req.get("action") or ""
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
        stream = self._stream(stream_name)
        pedantic = bool(req.get("pedantic"))
        consumers = self.manager.consumers(stream)
        others = [c.config for c in consumers.values() if c.name not in (cfg.name, cfg.durable_name)]
        cfg = check_consumer_config(stream.config, cfg, pedantic=pedantic, others=others)
        cname = cfg.durable_name or cfg.name
        existing = consumers.get(cname) if cname else None
        if existing is not None:
            if action == "create" and existing.config != cfg:
                raise ApiError.of(E.CONSUMER_ALREADY_EXISTS)
            if existing.config != cfg:
                bound = existing.push and existing.active
                new = check_consumer_update(existing.config, cfg, deliver_subject_bound=bound)
                self.manager.update(existing, new)
            return consumer_info(existing)
        if action == "update":
            raise ApiError.of(E.CONSUMER_DOES_NOT_EXIST)
        if stream.config.max_consumers > 0 and len(consumers) >= stream.config.max_consumers:
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
        return consumer_info(c)

    # -- read -----------------------------------------------------------------------------------

    def info(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        return consumer_info(self._consumer(args))

    def _sorted(self, args: list[str], body: bytes) -> tuple[list[Consumer], int]:
        req = decode_body(body)
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        s = self._stream(args[0])
        offset = offset_of(req)
        consumers = self.manager.consumers(s)
        cs = [consumers[n] for n in sorted(consumers)]
        # an offset past the end reads as the end
        return cs, min(offset, len(cs))

    def names(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        cs, offset = self._sorted(args, body)
        page = cs[offset : offset + NAMES_LIMIT]
        return {"total": len(cs), "offset": offset, "limit": NAMES_LIMIT, "consumers": [c.name for c in page]}

    def list_(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        cs, offset = self._sorted(args, body)
        page = cs[offset : offset + LIST_LIMIT]
        return {
            "total": len(cs),
            "offset": offset,
            "limit": LIST_LIMIT,
            "consumers": [consumer_info(c) for c in page],
        }

    def delete(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        c = self._consumer(args)
        self.manager.delete(c)
        return {"success": True}
