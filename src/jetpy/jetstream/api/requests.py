"""Decoding ``$JS.API`` request bodies the way nats-server's Go decoder reads them.

Owns: a body as a JSON object (empty means ``{}``; anything that is not an object is 10025,
invalid JSON), typed requests (``api/messages``) with Go's rules (a field of the wrong JSON type,
a negative unsigned integer: 10025; ``null``, for the body or a field, is the zero value), and a
stream config body. Pure: no streams, no handlers.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig

__all__ = [
    "as_request",
    "as_stream_config",
    "config_body",
    "decode_body",
    "decode_request",
    "is_empty_request",
]

T = TypeVar("T")


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


_GO_INT_RANGE: Final = range(-(2**63), 2**64)
"""What some Go integer field (``int64`` .. ``uint64``) can hold; the field's type narrows it."""


def as_request(obj: dict[str, Any], type_: type[T]) -> T:
    """A decoded body as the request Struct ``type_``, by Go's rules: a field of the wrong type,
    or a number its Go integer cannot hold, is 10025; a ``null`` field is left at its zero value."""
    fields = {}
    for k, v in obj.items():
        if v is None:
            continue
        if type(v) is int and v not in _GO_INT_RANGE:
            raise ApiError.of(E.INVALID_JSON)
        fields[k] = v
    try:
        return msgspec.convert(fields, type_)
    except msgspec.ValidationError as e:
        raise ApiError.of(E.INVALID_JSON) from e


def decode_request(data: bytes, type_: type[T]) -> T:
    """A request body as ``type_``: empty or ``null`` is the zero request (Go leaves its struct
    alone), anything else must be a JSON object of the right field types (10025)."""
    if data.strip() == b"null":
        return as_request({}, type_)
    return as_request(decode_body(data), type_)


def is_empty_request(data: bytes) -> bool:
    """nats-server's ``isEmptyRequest``: no body, or a JSON object without fields (``null`` is
    not empty: it decodes to the zero request)."""
    if not data.strip():
        return True
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return isinstance(obj, dict) and not obj


def config_body(body: bytes) -> dict[str, Any]:
    """A STREAM.CREATE/UPDATE body: a JSON object (nats-server refuses an empty one as invalid JSON;
    ``null`` is Go's zero config, whose empty name then mismatches)."""
    if not body.strip():
        raise ApiError.of(E.INVALID_JSON)
    if body.strip() == b"null":
        return {}
    return decode_body(body)


def as_stream_config(obj: dict[str, Any]) -> StreamConfig:
    """A STREAM.CREATE/UPDATE body as the config, by the same rules as every request."""
    return as_request(obj, StreamConfig)
