"""Reading stored messages for clients: the lookup rules shared by ``STREAM.MSG.GET`` and
``DIRECT.GET``, and the direct-get reply, which is the raw message with headers rather than JSON.

Owns: request-body decoding for the API (``decode_body``), which message a get request names
(``lookup``), and the direct-get status replies (404/408) with nats-server's status lines.
Must not know: stores' internals (only ``Stream.store``'s interface) or the network (replies go
through the engine's bus).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import format_time
from jetpy.protocol.headers import encode_headers
from jetpy.store.base import StoredMsg

if TYPE_CHECKING:
    from jetpy.jetstream.engine import JetStream
    from jetpy.jetstream.stream import Stream

__all__ = ["decode_body", "direct_get", "lookup"]


def decode_body(data: bytes) -> dict[str, Any]:
    """An API request body as a JSON object; empty means ``{}``; anything else is 10025."""
    if not data.strip():
        return {}
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError as e:
        raise ApiError.of(E.INVALID_JSON) from e
    if not isinstance(obj, dict):
        raise ApiError.of(E.INVALID_JSON)
    return obj


def lookup(s: Stream, req: dict[str, Any]) -> StoredMsg | None:
    """The message a get request names: ``last_by_subj``, ``next_by_subj`` (from ``seq``) or ``seq``."""
    seq = req.get("seq")
    last_by = req.get("last_by_subj")
    next_by = req.get("next_by_subj")
    if last_by:
        return s.store.load_last_msg(str(last_by))
    if next_by:
        return s.store.load_next_msg(str(next_by), int(seq or 0))
    if isinstance(seq, int) and seq > 0:
        return s.store.load_msg(seq)
    raise ApiError.of(E.BAD_REQUEST)


def direct_get(js: JetStream, args: list[str], reply: bytes | None, body: bytes) -> None:
    """``$JS.API.DIRECT.GET.<stream>`` (body names the message) or ``...<stream>.<subject>``
    (last message on the subject, the KV read path). Replies with the stored message itself."""
    if reply is None or not args:
        return
    s = js.streams.get(args[0])
    if s is None or not s.config.allow_direct:
        return  # nats-server does not subscribe DIRECT.GET for such streams: no responders
    rep = reply.decode()
    try:
        if len(args) > 1:
            if body.strip():
                raise ApiError.of(E.BAD_REQUEST)
            msg = s.store.load_last_msg(".".join(args[1:]))
        else:
            if not body.strip():
                js.bus.publish(rep, None, b"", encode_headers([], 408, "Empty Request"))
                return
            msg = lookup(s, decode_body(body))
    except ApiError:
        js.bus.publish(rep, None, b"", encode_headers([], 408, "Bad Request"))
        return
    if msg is None:
        js.bus.publish(rep, None, b"", encode_headers([], 404, "Message Not Found"))
        return
    js.bus.publish(rep, None, msg.data, direct_headers(s.name, msg))


def direct_headers(stream: str, msg: StoredMsg) -> bytes:
    """The message's own headers first, then the direct-get ones (as nats-server)."""
    original = msg.hdr[:-2] if msg.hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n"
    extra = (
        f"Nats-Stream: {stream}\r\nNats-Subject: {msg.subject}\r\n"
        f"Nats-Sequence: {msg.seq}\r\nNats-Time-Stamp: {format_time(msg.ts)}\r\n\r\n"
    )
    return original + extra.encode()
