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

_json = msgspec.json.Encoder()


def _resp(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"io.nats.jetstream.api.v1.{kind}_response", **fields}


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
                route = self.routes[key]
                args = toks[n:]
                break
        if route is None:
            if toks[:1] == ["DIRECT"] and len(toks) >= 3 and toks[1] == "GET":
                self.js.api_stats.total += 1
                direct_get(self.js, toks[2:], reply, data[hdr_len:])
            return  # unknown API subject: no reply, as nats-server
        if reply is None:
            return
        kind, fn = route
        stats = self.js.api_stats
        stats.total += 1
        try:
            resp = fn(args, data[:hdr_len], data[hdr_len:])
        except ApiError as e:
            stats.errors += 1
            resp = _resp(kind, error=e.to_wire())
        except Exception:  # a bug must not take the API down; the client gets a 500
            log.exception("JetStream API handler failed for %s", subject)
            stats.errors += 1
            resp = _resp(kind, error=ApiError.of(E.STREAM_GENERAL, err="internal error").to_wire())
        else:
            resp = _resp(kind, **resp)
        self.js.bus.publish(reply.decode(), None, _json.encode(resp))

    # -- helpers --------------------------------------------------------------------------------

    def _stream(self, args: list[str]) -> Stream:
        if not args:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        s = self.js.streams.get(args[0])
        if s is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return s

    def stream_info_dict(self, s: Stream, *, deleted_details: bool = False, subjects_filter: str = "") -> dict[str, Any]:
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
            "api": {"total": self.js.api_stats.total, "errors": self.js.api_stats.errors},
        }

    def stream_create(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        name = args[0] if args else ""
        if req.get("name", name) != name:
            raise ApiError.of(E.STREAM_MISMATCH)
        req.setdefault("name", name)
        cfg = check_stream_create(_as_config(req))
        existing = self.js.streams.get(cfg.name)
        if existing is not None:
            if existing.config == cfg:
                return {**self.stream_info_dict(existing), "did_create": False}
            raise ApiError.of(E.STREAM_NAME_EXIST)
        if self.js.subjects_overlap(cfg):
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        s = self.js.create_stream(cfg)
        return {**self.stream_info_dict(s), "did_create": True}

    def stream_update(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        s = self._stream(args)
        if req.get("name", s.name) != s.name:
            raise ApiError.of(E.STREAM_MISMATCH)
        req.setdefault("name", s.name)
        cfg = check_stream_update(s.config, check_stream_config(_as_config(req)))
        if self.js.subjects_overlap(cfg, skip=s.name):
            raise ApiError.of(E.STREAM_SUBJECT_OVERLAP)
        self.js.update_stream(s, cfg)
        return self.stream_info_dict(s)

    def stream_info(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        s = self._stream(args)
        info = self.stream_info_dict(
            s, deleted_details=bool(req.get("deleted_details")), subjects_filter=str(req.get("subjects_filter") or "")
        )
        return {"total": 0, "offset": 0, "limit": 0, **info}

    def _filtered_streams(self, req: dict[str, Any]) -> list[Stream]:
        subject = req.get("subject") or ""
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
        offset = max(0, int(req.get("offset") or 0))
        page = streams[offset : offset + NAMES_LIMIT]
        return {"total": len(streams), "offset": offset, "limit": NAMES_LIMIT, "streams": [s.name for s in page] or None}

    def stream_list(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
        streams = self._filtered_streams(req)
        offset = max(0, int(req.get("offset") or 0))
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
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_purge:
            raise ApiError.of(E.STREAM_PURGE_FAILED, err="stream purge not permitted")
        seq = int(req.get("seq") or 0)
        keep = int(req.get("keep") or 0)
        if seq and keep:
            raise ApiError.of(E.BAD_REQUEST)
        purged = s.store.purge(str(req.get("filter") or ""), seq, keep)
        self.js.persist(s)
        return {"success": True, "purged": purged}

    def stream_msg_get(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        req = decode_body(body)
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
        req = decode_body(body)
        s = self._stream(args)
        if s.config.sealed:
            raise ApiError.of(E.STREAM_SEALED)
        if s.config.deny_delete:
            raise ApiError.of(E.STREAM_MSG_DELETE_FAILED, err="message delete not permitted")
        seq = req.get("seq")
        if not isinstance(seq, int) or seq <= 0:
            raise ApiError.of(E.BAD_REQUEST)
        ok = s.store.remove_msg(seq) if req.get("no_erase") else s.store.erase_msg(seq)
        if not ok:
            raise ApiError.of(E.STREAM_MSG_DELETE_FAILED, err="no message found")
        self.js.persist(s)
        return {"success": True}
