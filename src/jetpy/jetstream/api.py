"""ApiRouter: the ``$JS.API.*`` request/reply API as a table from subject to handler.

Owns request decoding, the response ``type`` names, error translation (every ``ApiError`` becomes
the ``error{code, err_code, description}`` object) and the api counters. The handlers call into
the engine and its streams; they never touch stores directly except through ``Stream.store``'s
interface. Unknown API subjects get no reply, as nats-server does.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.direct import decode_body, direct_get, lookup
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig, format_time
from jetpy.jetstream.validate import check_stream_config, check_stream_create, check_stream_update
from jetpy.subjects import subjects_overlap

if TYPE_CHECKING:
    from jetpy.jetstream.engine import JetStream
    from jetpy.jetstream.stream import Stream

__all__ = ["ApiRouter"]

log = logging.getLogger("jetpy.jetstream")

NAMES_LIMIT = 1024  # nats-server's page size for STREAM.NAMES / CONSUMER.NAMES
LIST_LIMIT = 256  # and for STREAM.LIST / CONSUMER.LIST
API_LEVEL = 1  # the JetStream API level reported by $JS.API.INFO (2.11 = 1: Nats-TTL, markers)
SUBJECT_DETAILS_LIMIT = 100_000  # STREAM.INFO's page of ``state.subjects`` (JSMaxSubjectDetails)

# How many tokens after the route key a stream route takes; any other count has no handler (and
# so no reply), as nats-server subscribes these with exactly one ``*`` (or none). Routes not
# listed here (consumer routes with optional filter tokens) take what their handler checks.
_EXACT_ARGS: dict[str, int] = {
    "INFO": 0,
    "STREAM.NAMES": 0,
    "STREAM.LIST": 0,
    "STREAM.CREATE": 1,
    "STREAM.UPDATE": 1,
    "STREAM.INFO": 1,
    "STREAM.DELETE": 1,
    "STREAM.PURGE": 1,
    "STREAM.MSG.GET": 1,
    "STREAM.MSG.DELETE": 1,
}

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


def _resp(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"io.nats.jetstream.api.v1.{kind}_response", **fields}


def _uint(req: dict[str, Any], key: str) -> int:
    """A request field Go decodes into an unsigned integer: anything else is invalid JSON."""
    v = req.get(key, 0)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ApiError.of(E.INVALID_JSON)
    return v


def _str(req: dict[str, Any], key: str) -> str:
    v = req.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ApiError.of(E.INVALID_JSON)
    return v


def _config_body(body: bytes) -> dict[str, Any]:
    """A STREAM.CREATE/UPDATE body: a JSON object (nats-server refuses an empty one as invalid JSON;
    ``null`` is Go's zero config, whose empty name then mismatches)."""
    if not body.strip():
        raise ApiError.of(E.INVALID_JSON)
    if body.strip() == b"null":
        return {}
    return decode_body(body)


def _as_config(obj: dict[str, Any]) -> StreamConfig:
    try:
        return msgspec.convert(obj, StreamConfig, strict=False)
    except msgspec.ValidationError as e:
        raise ApiError.of(E.INVALID_JSON) from e


class ApiRouter:
    def __init__(self, js: JetStream) -> None:
        self.js = js
        # subject after "$JS.API." (up to three tokens) -> (response kind, handler); the rest are args
        self.routes: dict[str, tuple[str, Callable[[list[str], bytes, bytes], dict[str, Any]]]] = {
            "INFO": ("account_info", self.account_info),
            "STREAM.CREATE": ("stream_create", self.stream_create),
            "STREAM.UPDATE": ("stream_update", self.stream_update),
            "STREAM.INFO": ("stream_info", self.stream_info),
            "STREAM.NAMES": ("stream_names", self.stream_names),
            "STREAM.LIST": ("stream_list", self.stream_list),
            "STREAM.DELETE": ("stream_delete", self.stream_delete),
            "STREAM.PURGE": ("stream_purge", self.stream_purge),
            "STREAM.MSG.GET": ("stream_msg_get", self.stream_msg_get),
            "STREAM.MSG.DELETE": ("stream_msg_delete", self.stream_msg_delete),
        }

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        toks = subject.decode().split(".")[2:]  # drop "$JS", "API"
        route = None
        args: list[str] = []
        for n in (3, 2, 1):
            key = ".".join(toks[:n])
            if key in self.routes:
                want = _EXACT_ARGS.get(key)
                if want is not None and len(toks) - n != want:
                    continue
                route = self.routes[key]
                args = toks[n:]
                break
        if route is None:
            if toks[:1] == ["DIRECT"] and len(toks) >= 3 and toks[1] == "GET":
                # served by the stream, not the API dispatcher: not in the api counters (as nats-server)
                direct_get(self.js, toks[2:], reply, data[hdr_len:])
            return  # unknown API subject: no reply, as nats-server
        if reply is None:
            return
        kind, fn = route
        stats = self.js.api_stats
        try:
            resp = fn(args, data[:hdr_len], data[hdr_len:])
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
        self.js.bus.publish(reply.decode(), None, _json.encode(resp))

    # -- helpers --------------------------------------------------------------------------------

    def _stream(self, args: list[str]) -> Stream:
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        s = self.js.streams.get(args[0])
        if s is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return s

    def stream_info_dict(
        self,
        s: Stream,
        *,
        deleted_details: bool = False,
        subjects_filter: str = "",
        subjects_offset: int = 0,
        paging: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        """StreamInfo as a dict; with ``subjects_filter``, ``state.subjects`` is paged (sorted by
        subject once paging applies) and ``paging`` receives ``total/offset/limit``."""
        st = s.store.state(deleted_details=deleted_details)
        state: dict[str, Any] = {
            "messages": st.msgs,
            "bytes": st.bytes,
            "first_seq": st.first_seq,
            "first_ts": format_time(st.first_ts),
            "last_seq": st.last_seq,
            "last_ts": format_time(st.last_ts),
        }
        if st.num_subjects:
            state["num_subjects"] = st.num_subjects
        if subjects_filter:
            subjects = s.store.subjects_state(subjects_filter)
            if subjects:
                total = len(subjects)
                offset = min(subjects_offset, total)
                if paging is not None:
                    paging.update(total=total, offset=offset, limit=SUBJECT_DETAILS_LIMIT)
                if offset or total > SUBJECT_DETAILS_LIMIT:
                    names = sorted(subjects)
                    page = names[offset : offset + SUBJECT_DETAILS_LIMIT]
                    subjects = {k: subjects[k] for k in page}
                if subjects:
                    state["subjects"] = subjects
        if st.num_deleted:
            state["num_deleted"] = st.num_deleted
        if deleted_details and st.deleted:
            state["deleted"] = st.deleted
        if st.lost is not None and st.lost.msgs:
            state["lost"] = {"msgs": st.lost.msgs, "bytes": st.lost.bytes}
        state["consumer_count"] = len(s.consumers)
        return {
            "config": msgspec.to_builtins(s.config),
            "created": format_time(s.created_ns),
            "state": state,
        }

    # -- handlers -------------------------------------------------------------------------------

    def account_info(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        mem, sto = self.js.usage()
        return {
            "memory": mem,
            "storage": sto,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "streams": len(self.js.streams),
            "consumers": sum(len(s.consumers) for s in self.js.streams.values()),
            "limits": {
                "max_memory": self.js.config.max_memory,
                "max_storage": self.js.config.max_storage,
                "max_streams": -1,
                "max_consumers": -1,
                "max_ack_pending": -1,
                "memory_max_stream_bytes": -1,
                "storage_max_stream_bytes": -1,
                "max_bytes_required": False,
            },
            # level 1: nats-server 2.11's API level (per-message TTL); clients gate features on it
            "api": {"level": API_LEVEL, "total": self.js.api_stats.total, "errors": self.js.api_stats.errors},
        }

    def stream_create(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = _config_body(body)
        cfg0 = _as_config(req)
        if cfg0.name != args[0]:  # a body without a name does not take it from the subject
            raise ApiError.of(E.STREAM_MISMATCH)
        if cfg0.template_owner:  # stream templates are not supported: no stream is owned by one
            raise ApiError.of(E.STREAM_CREATE, err="stream not owned by template")
        cfg = check_stream_create(cfg0)
        existing = self.js.streams.get(cfg.name)
        if existing is not None:
            if existing.config == cfg:
                # nats-server (non-clustered) answers an identical create with did_create true too
                return {**self.stream_info_dict(existing), "did_create": True}
            raise ApiError.of(E.STREAM_NAME_EXIST)
        if self.js.subjects_overlap(cfg):
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        s = self.js.create_stream(cfg)
        return {**self.stream_info_dict(s), "did_create": True}

    def stream_update(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = _config_body(body)
        cfg0 = _as_config(req)
        if cfg0.name != args[0]:
            raise ApiError.of(E.STREAM_MISMATCH)
        s = self._stream(args)
        cfg = check_stream_update(s.config, check_stream_config(cfg0))
        if self.js.subjects_overlap(cfg, skip=s.name):
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        self.js.update_stream(s, cfg)
        self.js.persist(s)  # removals by lowered limits are durable before the reply, like purges
        return self.stream_info_dict(s)

    def stream_info(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        offset = _uint(req, "offset")
        subjects_filter = _str(req, "subjects_filter")
        s = self._stream(args)
        paging = {"total": 0, "offset": 0, "limit": 0}
        info = self.stream_info_dict(
            s,
            deleted_details=bool(req.get("deleted_details")),
            subjects_filter=subjects_filter,
            subjects_offset=offset,
            paging=paging,
        )
        return {**paging, **info}

    def _filtered_streams(self, req: dict[str, Any]) -> list[Stream]:
        subject = _str(req, "subject")
        out = []
        for name in sorted(self.js.streams):
            s = self.js.streams[name]
            if subject and not any(subjects_overlap(subject, f) for f in s.config.subjects):
                continue
            out.append(s)
        return out

    def stream_names(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        streams = self._filtered_streams(req)
        offset = min(_offset(req), len(streams))
        page = streams[offset : offset + NAMES_LIMIT]
        return {"total": len(streams), "offset": offset, "limit": NAMES_LIMIT, "streams": [s.name for s in page] or None}

    def stream_list(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        streams = self._filtered_streams(req)
        offset = min(_offset(req), len(streams))
        page = streams[offset : offset + LIST_LIMIT]
        return {
            "total": len(streams),
            "offset": offset,
            "limit": LIST_LIMIT,
            "streams": [self.stream_info_dict(s) for s in page],
        }

    def stream_delete(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        s = self._stream(args)
        self.js.delete_stream(s)
        return {"success": True}

    def stream_purge(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        seq, keep, subject = _uint(req, "seq"), _uint(req, "keep"), _str(req, "filter")
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_purge:
            raise ApiError.of(E.STREAM_PURGE_FAILED, err="stream purge not permitted")
        if seq and keep:
            raise ApiError.of(E.BAD_REQUEST)
        purged = s.store.purge(subject, seq, keep)
        self.js.persist(s)
        return {"success": True, "purged": purged}

    def stream_msg_get(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        if not body.strip():
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_body(body)
        seq, last_by, next_by = _uint(req, "seq"), _str(req, "last_by_subj"), _str(req, "next_by_subj")
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
        seq = _uint(req, "seq")
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_delete:
            raise ApiError.of(E.STREAM_MSG_DELETE_FAILED, err="message delete not permitted")
        if seq == 0:
            raise ApiError.of(E.BAD_REQUEST)
        ok = s.store.remove_msg(seq) if req.get("no_erase") else s.store.erase_msg(seq)
        if not ok:
            raise _delete_miss(s, seq)
        self.js.persist(s)
        return {"success": True}


def _offset(req: dict[str, Any]) -> int:
    """A paging offset (Go ``int``): a negative one counts as 0 (nats-server 2.9 panics on it)."""
    v = req.get("offset", 0)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError.of(E.INVALID_JSON)
    return max(v, 0)


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
