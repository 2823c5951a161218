"""The ``$JS.API.STREAM.*`` request handlers: create, update, info, names, list, delete, purge,
and the message get/delete requests, with nats-server's checks and error codes.

Owns what each request means for the streams; changes to a stream's contents go through the
stream's decide/apply seam (``PurgeEntry``, ``DeleteEntry``) and are made durable before the
reply. Must not know: dispatch and the response envelope (the router's), consumers' internals.
"""

from __future__ import annotations

import base64
from typing import Any

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.direct import lookup
from jetpy.jetstream.api.requests import (
    as_stream_config,
    config_body,
    decode_body,
    offset_of,
    str_field,
    uint_field,
)
from jetpy.jetstream.api.router import Route
from jetpy.jetstream.commit import Committer
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.info import stream_info
from jetpy.jetstream.models import LIST_LIMIT, NAMES_LIMIT, format_time
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.stream import DeleteEntry, PurgeEntry, Stream
from jetpy.jetstream.validate import check_stream_config, check_stream_create, check_stream_update
from jetpy.subjects import subjects_overlap

__all__ = ["StreamApi"]


class StreamApi:
    def __init__(self, registry: StreamRegistry, committer: Committer) -> None:
        self.registry = registry
        self.committer = committer

    def routes(self) -> dict[str, Route]:
        # a stream route takes exactly this many tokens after its key: any other count has no
        # handler (and so no reply), as nats-server subscribes these with exactly one ``*`` (or none)
        return {
            "STREAM.CREATE": Route("stream_create", self.stream_create, 1),
            "STREAM.UPDATE": Route("stream_update", self.stream_update, 1),
            "STREAM.INFO": Route("stream_info", self.stream_info, 1),
            "STREAM.NAMES": Route("stream_names", self.stream_names, 0),
            "STREAM.LIST": Route("stream_list", self.stream_list, 0),
            "STREAM.DELETE": Route("stream_delete", self.stream_delete, 1),
            "STREAM.PURGE": Route("stream_purge", self.stream_purge, 1),
            "STREAM.MSG.GET": Route("stream_msg_get", self.stream_msg_get, 1),
            "STREAM.MSG.DELETE": Route("stream_msg_delete", self.stream_msg_delete, 1),
        }

    def _stream(self, args: list[str]) -> Stream:
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        s = self.registry.get(args[0])
        if s is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return s

    def _persist(self, s: Stream) -> None:
        """Messages left the stream by this request: caches follow, and it is durable before
        the reply."""
        self.registry.removed(s)
        self.committer.sync_now(s)

    # -- handlers -------------------------------------------------------------------------------

    def stream_create(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = config_body(body)
        cfg0 = as_stream_config(req)
        if cfg0.name != args[0]:  # a body without a name does not take it from the subject
            raise ApiError.of(E.STREAM_MISMATCH)
        if cfg0.template_owner:  # stream templates are not supported: no stream is owned by one
            raise ApiError.of(E.STREAM_CREATE, err="stream not owned by template")
        cfg = check_stream_create(cfg0)
        existing = self.registry.get(cfg.name)
        if existing is not None:
            if existing.config == cfg:
                # nats-server (non-clustered) answers an identical create with did_create true too
                return {**stream_info(existing), "did_create": True}
            raise ApiError.of(E.STREAM_NAME_EXIST)
        if self.registry.subjects_overlap(cfg):
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        s = self.registry.create(cfg)
        return {**stream_info(s), "did_create": True}

    def stream_update(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = config_body(body)
        cfg0 = as_stream_config(req)
        if cfg0.name != args[0]:
            raise ApiError.of(E.STREAM_MISMATCH)
        s = self._stream(args)
        cfg = check_stream_update(s.config, check_stream_config(cfg0))
        if self.registry.subjects_overlap(cfg, skip=s.name):
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        self.registry.update(s, cfg)
        self._persist(s)  # removals by lowered limits are durable before the reply, like purges
        return stream_info(s)

    def stream_info(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        offset = uint_field(req, "offset")
        subjects_filter = str_field(req, "subjects_filter")
        s = self._stream(args)
        paging = {"total": 0, "offset": 0, "limit": 0}
        info = stream_info(
            s,
            deleted_details=bool(req.get("deleted_details")),
            subjects_filter=subjects_filter,
            subjects_offset=offset,
            paging=paging,
        )
        return {**paging, **info}

    def _filtered_streams(self, req: dict[str, Any]) -> list[Stream]:
        subject = str_field(req, "subject")
        out = []
        streams = self.registry.streams
        for name in sorted(streams):
            s = streams[name]
            if subject and not any(subjects_overlap(subject, f) for f in s.config.subjects):
                continue
            out.append(s)
        return out

    def stream_names(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        streams = self._filtered_streams(req)
        offset = min(offset_of(req), len(streams))
        page = streams[offset : offset + NAMES_LIMIT]
        return {"total": len(streams), "offset": offset, "limit": NAMES_LIMIT, "streams": [s.name for s in page] or None}

    def stream_list(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        streams = self._filtered_streams(req)
        offset = min(offset_of(req), len(streams))
        page = streams[offset : offset + LIST_LIMIT]
        return {
            "total": len(streams),
            "offset": offset,
            "limit": LIST_LIMIT,
            "streams": [stream_info(s) for s in page],
        }

    def stream_delete(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        s = self._stream(args)
        self.registry.delete(s)
        return {"success": True}

    def stream_purge(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        seq, keep, subject = uint_field(req, "seq"), uint_field(req, "keep"), str_field(req, "filter")
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_purge:
            raise ApiError.of(E.STREAM_PURGE_FAILED, err="stream purge not permitted")
        if seq and keep:
            raise ApiError.of(E.BAD_REQUEST)
        purged = s.apply_purge(PurgeEntry(subject, seq, keep))
        self._persist(s)
        return {"success": True, "purged": purged}

    def stream_msg_get(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        if not body.strip():
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_body(body)
        seq, last_by, next_by = uint_field(req, "seq"), str_field(req, "last_by_subj"), str_field(req, "next_by_subj")
        # exactly one way to name the message (next_by_subj takes seq as its start)
        if (seq and last_by) or (last_by and next_by) or not (seq or last_by or next_by):
            raise ApiError.of(E.BAD_REQUEST)
        s = self._stream(args)
        msg = lookup(s, req)
        if msg is None:
            raise ApiError.of(E.NO_MESSAGE_FOUND)
        out: dict[str, Any] = {"subject": msg.subject, "seq": msg.seq}
        if msg.hdr:
            out["hdrs"] = base64.b64encode(msg.hdr).decode()
        if msg.data:
            out["data"] = base64.b64encode(msg.data).decode()
        out["time"] = format_time(msg.ts)
        return {"message": out}

    def stream_msg_delete(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        if not body.strip():
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_body(body)
        seq = uint_field(req, "seq")
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_delete:
            raise ApiError.of(E.STREAM_MSG_DELETE_FAILED, err="message delete not permitted")
        if seq == 0:
            raise ApiError.of(E.BAD_REQUEST)
        if not s.apply_delete(DeleteEntry(seq, erase=not req.get("no_erase"))):
            raise _delete_miss(s, seq)
        self._persist(s)
        return {"success": True}


def _delete_miss(s: Stream, seq: int) -> ApiError:
    """nats-server's answer when MSG.DELETE finds nothing: the memory store says "sequence N not
    found"; the file store says "stream store EOF" past the end and "no message found" below its
    first message (no block holds it), "sequence N not found" for a gap inside the stream."""
    if s.config.storage == "file":
        st = s.store.state()
        if seq > st.last_seq:
            return ApiError.of(E.STREAM_MSG_DELETE_FAILED, err="stream store EOF")
        if seq < st.first_seq or st.msgs == 0:
            return ApiError.of(E.STREAM_MSG_DELETE_FAILED, err="no message found")
    return ApiError.of(E.SEQUENCE_NOT_FOUND, seq=seq)
