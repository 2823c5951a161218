"""Decoding ``$JS.API`` request bodies the way nats-server's Go decoder reads them.

Owns: a body as a JSON object (empty means ``{}``; anything that is not an object is 10025,
invalid JSON), the typed fields Go would refuse (unsigned integers, strings), paging offsets, and
a stream config body. Pure: no streams, no handlers.
"""

from __future__ import annotations

from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig

__all__ = ["as_stream_config", "config_body", "decode_body", "offset_of", "str_field", "uint_field"]


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


def uint_field(req: dict[str, Any], key: str) -> int:
    """A request field Go decodes into an unsigned integer: anything else is invalid JSON."""
    v = req.get(key, 0)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ApiError.of(E.INVALID_JSON)
    return v


def str_field(req: dict[str, Any], key: str) -> str:
    v = req.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ApiError.of(E.INVALID_JSON)
    return v


def offset_of(req: dict[str, Any]) -> int:
    """A paging offset (Go ``int``): a negative one counts as 0 (nats-server 2.9 panics on it)."""
    v = req.get("offset", 0)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError.of(E.INVALID_JSON)
    return max(v, 0)


def config_body(body: bytes) -> dict[str, Any]:
    """A STREAM.CREATE/UPDATE body: a JSON object (nats-server refuses an empty one as invalid JSON;
    ``null`` is Go's zero config, whose empty name then mismatches)."""
    if not body.strip():
        raise ApiError.of(E.INVALID_JSON)
    if body.strip() == b"null":
        return {}
    return decode_body(body)


def as_stream_config(obj: dict[str, Any]) -> StreamConfig:
    try:
        return msgspec.convert(obj, StreamConfig, strict=False)
    except msgspec.ValidationError as e:
        raise ApiError.of(E.INVALID_JSON) from e
