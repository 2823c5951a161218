"""The ``$JS.API.STREAM.*`` request handlers: create, update, info, names, list, delete, purge,
and the message get/delete requests, with nats-server's checks and error codes.

Owns what each request means for the streams: each handler decodes its typed request and
returns its typed response (``api/messages``); changes to a stream's contents go through the
stream's decide/apply seam (``PurgeEntry``, ``DeleteEntry``) and are made durable before the
reply. Must not know: dispatch, encoding and error responses (the router's), consumers' internals.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, Final, Protocol

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.direct import BadTime, check_get, lookup, request_time
from jetpy.jetstream.api.messages import (
    StreamCreateResponse,
    StreamDeleteResponse,
    StreamInfoRequest,
    StreamInfoResponse,
    StreamListRequest,
    StreamListResponse,
    StreamMsgDeleteRequest,
    StreamMsgDeleteResponse,
    StreamMsgGetRequest,
    StreamMsgGetResponse,
    StreamNamesResponse,
    StreamPurgeRequest,
    StreamPurgeResponse,
    StreamUpdateResponse,
)
from jetpy.jetstream.api.requests import (
    as_request,
    as_stream_config,
    config_body,
    decode_body,
    decode_request,
    expect_empty,
    is_empty_request,
)
from jetpy.jetstream.api.router import Later, Route
from jetpy.jetstream.commit import Committer
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.info import NO_SUBJECTS, stream_info, subjects_page
from jetpy.jetstream.models import (
    LIST_LIMIT,
    NAMES_LIMIT,
    StoredMessage,
    StreamConfig,
    StreamInfo,
    format_time,
)
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.steps import Steps, paced, run_steps
from jetpy.jetstream.stream import DeleteEntry, PurgeEntry, Stream
from jetpy.jetstream.unbuilt import check_stream_built
from jetpy.jetstream.validate import check_stream_create, check_stream_update
from jetpy.subjects import subjects_overlap

__all__ = [
    "LARGE_CONFIG",
    "LARGE_PURGE",
    "InfoOf",
    "StreamApi",
    "StreamWatcher",
    "delete_miss",
    "info_reply",
    "pedantic_flag",
]

LARGE_CONFIG: Final = 1000
"""A config naming more subjects than this (its own, and those of its mirror's and sources'
transforms) is checked in a worker thread and applied in slices (``steps``), the API answering
other requests after it, in order: tens of milliseconds of work then never hold the event loop.
Smaller ones take a few milliseconds at most and are answered at once."""


LARGE_PURGE: Final = 50_000
"""A purge of a stream holding more messages than this (or an update whose lowered limits remove
some of them) is worked on in slices (``steps``) and its sync in a worker thread, the API
answering other requests after it, in order: a purge by subject of a million messages takes
about a second of work, which would otherwise hold every client (a smaller one takes tens of
milliseconds at most)."""


def _is_large(cfg: StreamConfig) -> bool:
    n = len(cfg.subjects) + len(cfg.sources)
    if cfg.mirror is not None:
        n += len(cfg.mirror.subject_transforms)
    for src in cfg.sources:
        n += len(src.subject_transforms)
    return n > LARGE_CONFIG


class InfoOf(Protocol):
    """What makes a stream's info (``info.stream_info``, or a replicated stream's leader's)."""

    def __call__(
        self, *, deleted_details: bool = False, subjects: dict[str, int] | None = None
    ) -> StreamInfo: ...


class StreamWatcher(Protocol):
    """Who must hear of streams coming, changing and going through the API (the host of the
    streams' mirrors and sources)."""

    def started(self, stream: Stream) -> None: ...

    def updated(self, stream: Stream, old: StreamConfig) -> None: ...

    def stopping(self, stream: Stream) -> None: ...

    def deleted(self, name: str) -> None: ...


class _Unwatched:
    def started(self, stream: Stream) -> None:
        pass

    def updated(self, stream: Stream, old: StreamConfig) -> None:
        pass

    def stopping(self, stream: Stream) -> None:
        pass

    def deleted(self, name: str) -> None:
        pass


class StreamApi:
    def __init__(
        self, registry: StreamRegistry, committer: Committer, watcher: StreamWatcher | None = None
    ) -> None:
        self.registry = registry
        self.committer = committer
        self.watcher: StreamWatcher = watcher or _Unwatched()

    def _origin(self, name: str) -> StreamConfig | None:
        """Another stream's config (for the rules on mirrors and sources that look at it)."""
        s = self.registry.get(name)
        return s.config if s is not None else None

    def routes(self) -> dict[str, Route[Any]]:
        # a stream route takes exactly this many tokens after its key: any other count has no
        # handler (and so no reply), as nats-server subscribes these with exactly one ``*`` (or none)
        return {
            "STREAM.CREATE": Route(StreamCreateResponse, self.stream_create, 1),
            "STREAM.UPDATE": Route(StreamUpdateResponse, self.stream_update, 1),
            "STREAM.INFO": Route(StreamInfoResponse, self.stream_info, 1),
            "STREAM.NAMES": Route(StreamNamesResponse, self.stream_names, 0),
            "STREAM.LIST": Route(StreamListResponse, self.stream_list, 0),
            "STREAM.DELETE": Route(StreamDeleteResponse, self.stream_delete, 1),
            "STREAM.PURGE": Route(StreamPurgeResponse, self.stream_purge, 1),
            "STREAM.MSG.GET": Route(StreamMsgGetResponse, self.stream_msg_get, 1, counts_success=False),
            "STREAM.MSG.DELETE": Route(StreamMsgDeleteResponse, self.stream_msg_delete, 1),
        }

    def _stream(self, args: list[str]) -> Stream:
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return self.registry.require(args[0])

    def _persist(self, s: Stream) -> None:
        """Messages left the stream by this request: caches follow, and it is durable before
        the reply."""
        self.registry.removed(s)
        self.committer.sync_now(s)

    # -- handlers -------------------------------------------------------------------------------

    def stream_create(self, args: list[str], hdr: bytes, body: bytes) -> Later[StreamCreateResponse]:
        req = config_body(body)
        cfg0 = as_stream_config(req)
        if cfg0.name != args[0]:  # a body without a name does not take it from the subject
            raise ApiError.of(E.STREAM_MISMATCH)
        if cfg0.template_owner:  # stream templates are not supported: no stream is owned by one
            raise ApiError.of(E.STREAM_CREATE, err="stream not owned by template")
        pedantic = pedantic_flag(req)
        if _is_large(cfg0):
            return self._create_large(cfg0, pedantic)
        cfg = check_stream_create(cfg0, pedantic=pedantic, origins=self._origin)
        return run_steps(self._create(cfg, self.registry.subjects_overlap))

    async def _create_large(self, cfg0: StreamConfig, pedantic: bool) -> StreamCreateResponse:
        # pure checks of immutable configs, in a worker thread: the API is serialized by the
        # router, so nothing changes the streams' subjects meanwhile
        cfg = await asyncio.to_thread(check_stream_create, cfg0, pedantic=pedantic, origins=self._origin)
        overlap = await asyncio.to_thread(self.registry.subjects_overlap, cfg)
        return await paced(self._create(cfg, lambda _: overlap))

    def _create(
        self, cfg: StreamConfig, overlaps: Callable[[StreamConfig], bool]
    ) -> Steps[StreamCreateResponse]:
        check_stream_built(cfg)
        self.registry.refuse_offline(cfg.name)
        existing = self.registry.get(cfg.name)
        if existing is None and cfg.name in self.registry.reserved:  # being restored
            raise ApiError.of(E.STREAM_NAME_EXIST)
        if existing is not None:
            if existing.config == cfg:
                # nats-server (non-clustered) answers an identical create with did_create true too
                return StreamCreateResponse.of(stream_info(existing), did_create=True)
            raise ApiError.of(E.STREAM_NAME_EXIST)
        if overlaps(cfg):
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        self.registry.resources.check_create(cfg)
        s = yield from self.registry.create_steps(cfg)
        self.watcher.started(s)
        return StreamCreateResponse.of(stream_info(s), did_create=True)

    def stream_update(self, args: list[str], hdr: bytes, body: bytes) -> Later[StreamUpdateResponse]:
        req = config_body(body)
        cfg0 = as_stream_config(req)
        if cfg0.name != args[0]:
            raise ApiError.of(E.STREAM_MISMATCH)
        s = self._stream(args)
        pedantic = pedantic_flag(req)
        if _is_large(cfg0) or _is_large(s.config):
            return self._update_large(s, cfg0, pedantic)
        cfg = check_stream_update(s.config, cfg0, pedantic=pedantic, origins=self._origin)
        steps = self._update(s, cfg, self.registry.subjects_overlap(cfg, skip=s.name))
        if s.store.state().msgs > LARGE_PURGE:  # lowered limits may remove many of them
            return paced(steps)
        return run_steps(steps)

    async def _update_large(self, s: Stream, cfg0: StreamConfig, pedantic: bool) -> StreamUpdateResponse:
        cfg = await asyncio.to_thread(
            check_stream_update, s.config, cfg0, pedantic=pedantic, origins=self._origin
        )
        overlap = await asyncio.to_thread(self.registry.subjects_overlap, cfg, s.name)
        return await paced(self._update(s, cfg, overlap))

    def _update(self, s: Stream, cfg: StreamConfig, overlap: bool) -> Steps[StreamUpdateResponse]:
        check_stream_built(cfg)
        if overlap:
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        self.registry.resources.check_update(cfg, s.name)
        old = s.config
        yield from self.registry.update_steps(s, cfg)
        self.watcher.updated(s, old)
        self._persist(s)  # removals by lowered limits are durable before the reply, like purges
        return StreamUpdateResponse.of(stream_info(s))

    def stream_info(self, args: list[str], hdr: bytes, body: bytes) -> StreamInfoResponse:
        req = decode_request(body, StreamInfoRequest)
        return info_reply(self._stream(args), req)

    def _filtered_streams(self, subject: str) -> list[Stream]:
        out = []
        streams = self.registry.streams
        for name in sorted(streams):
            s = streams[name]
            if subject and not any(subjects_overlap(subject, f) for f in s.config.subjects):
                continue
            out.append(s)
        return out

    def _filtered_offline(self, subject: str) -> dict[str, str]:
        """Offline streams (name -> why) the filter selects: one whose config could not be read
        has no subjects a filter could select."""
        return {
            off.name: off.reason
            for off in self.registry.offline.all()
            if not subject or any(subjects_overlap(subject, f) for f in off.subjects)
        }

    def stream_names(self, args: list[str], hdr: bytes, body: bytes) -> StreamNamesResponse:
        """Every stream's name, offline ones too (their names are taken)."""
        req = decode_request(body, StreamListRequest)
        online = [s.name for s in self._filtered_streams(req.subject)]
        names = sorted([*online, *self._filtered_offline(req.subject)])
        # a negative offset reads as 0, one past the end as the end
        offset = min(max(req.offset, 0), len(names))
        page = names[offset : offset + NAMES_LIMIT]
        return StreamNamesResponse(total=len(names), offset=offset, limit=NAMES_LIMIT, streams=page or None)

    def stream_list(self, args: list[str], hdr: bytes, body: bytes) -> StreamListResponse:
        """The served streams' infos, page by page; offline ones by name and reason on every
        page (``offline``, and ``missing`` for tools that predate it)."""
        req = decode_request(body, StreamListRequest)
        streams = self._filtered_streams(req.subject)
        offset = min(max(req.offset, 0), len(streams))
        page = streams[offset : offset + LIST_LIMIT]
        offline = self._filtered_offline(req.subject)
        return StreamListResponse(
            total=len(streams),
            offset=offset,
            limit=LIST_LIMIT,
            streams=[stream_info(s) for s in page],
            missing=sorted(offline) or None,
            offline=offline or None,
        )

    def stream_delete(self, args: list[str], hdr: bytes, body: bytes) -> Later[StreamDeleteResponse]:
        """Delete a stream; an offline one's files are deleted on this explicit request."""
        expect_empty(body)
        if args and self.registry.get(args[0]) is None and self.registry.offline.get(args[0]) is not None:
            self.registry.delete_offline(args[0])
            return StreamDeleteResponse(success=True)
        s = self._stream(args)
        self.watcher.stopping(s)
        if _is_large(s.config):
            return self._delete_large(s)
        self.registry.delete(s)
        self.watcher.deleted(s.name)
        return StreamDeleteResponse(success=True)

    async def _delete_large(self, s: Stream) -> StreamDeleteResponse:
        await paced(self.registry.delete_steps(s))
        self.watcher.deleted(s.name)
        return StreamDeleteResponse(success=True)

    def stream_purge(self, args: list[str], hdr: bytes, body: bytes) -> Later[StreamPurgeResponse]:
        s, entry = self.purge_request(args, body)
        if s.store.state().msgs > LARGE_PURGE:
            return self._purge_large(s, entry)
        purged = s.apply_purge(entry)
        self._persist(s)
        return StreamPurgeResponse(success=True, purged=purged)

    def purge_request(self, args: list[str], body: bytes) -> tuple[Stream, PurgeEntry]:
        """A ``STREAM.PURGE`` request checked: the stream and the purge decided (a replicated
        stream's leader proposes it)."""
        req = decode_request(body, StreamPurgeRequest)
        seq, keep, subject = req.seq, req.keep, req.filter
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_purge:
            raise ApiError.of(E.STREAM_PURGE_FAILED, err="stream purge not permitted")
        if seq and keep:
            raise ApiError.of(E.BAD_REQUEST)
        return s, PurgeEntry(subject, seq, keep)

    async def _purge_large(self, s: Stream, entry: PurgeEntry) -> StreamPurgeResponse:
        purged = await paced(s.purge_steps(entry))
        self.registry.removed(s)
        await self.committer.sync_off_loop(s)  # durable before the reply, like every purge
        return StreamPurgeResponse(success=True, purged=purged)

    def stream_msg_get(self, args: list[str], hdr: bytes, body: bytes) -> StreamMsgGetResponse:
        if not body.strip():
            raise ApiError.of(E.BAD_REQUEST)
        raw = {} if body.strip() == b"null" else decode_body(body)
        req = as_request(raw, StreamMsgGetRequest)
        try:  # nats-server 2.11+: start_time names the first message at or after it
            start_ns = request_time(raw.get("start_time"))
        except BadTime as e:
            raise ApiError.of(E.INVALID_JSON, err=str(e)) from None
        if req.batch > 0 or req.max_bytes > 0:  # a direct get's fields (before the stream, as nats-server)
            raise ApiError.of(E.BAD_REQUEST)
        seq, last_by, next_by = req.seq, req.last_by_subj, req.next_by_subj
        check_get(seq, last_by, next_by, start_ns)
        s = self._stream(args)
        msg = lookup(s, seq, last_by, next_by, start_ns)
        if msg is None:
            raise ApiError.of(E.NO_MESSAGE_FOUND)
        hdrs = b"" if req.no_hdr else msg.hdr
        stored = StoredMessage(
            subject=msg.subject, seq=msg.seq, hdrs=hdrs, data=msg.data, time=format_time(msg.ts)
        )
        return StreamMsgGetResponse(message=stored)

    def stream_msg_delete(self, args: list[str], hdr: bytes, body: bytes) -> StreamMsgDeleteResponse:
        s, entry = self.msg_delete_request(args, body)
        if not s.apply_delete(entry):
            raise delete_miss(s, entry.seq)
        self._persist(s)
        return StreamMsgDeleteResponse(success=True)

    def msg_delete_request(self, args: list[str], body: bytes) -> tuple[Stream, DeleteEntry]:
        """A ``STREAM.MSG.DELETE`` request checked: the stream and the delete decided."""
        if is_empty_request(body):  # before anything else, as nats-server
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_request(body, StreamMsgDeleteRequest)
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_delete:
            raise ApiError.of(E.STREAM_MSG_DELETE_FAILED, err="message delete not permitted")
        return s, DeleteEntry(req.seq, erase=not req.no_erase)


def pedantic_flag(req: dict[str, Any]) -> bool:
    """The request's ``pedantic`` flag (2.11+): refuse what would otherwise be adjusted."""
    v = req.get("pedantic", False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise ApiError.of(E.INVALID_JSON)
    return v


def info_reply(s: Stream, req: StreamInfoRequest, info: InfoOf | None = None) -> StreamInfoResponse:
    """STREAM.INFO's answer for ``s``: its info (``info``: a replicated stream's, with its
    ``cluster`` block; else the single server's) with the request's ``deleted_details`` and its
    page of ``subjects_filter`` from ``offset``."""
    # a negative offset reads as 0 (nats-server 2.9 ignores it without a filter, panics with one)
    page = NO_SUBJECTS
    if req.subjects_filter:
        page = subjects_page(s, req.subjects_filter, max(req.offset, 0))
    make = info if info is not None else functools.partial(stream_info, s)
    si = make(deleted_details=req.deleted_details, subjects=page.subjects)
    return StreamInfoResponse.of(si, total=page.total, offset=page.offset, limit=page.limit)


def delete_miss(s: Stream, seq: int) -> ApiError:
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
