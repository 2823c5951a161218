"""Decoding ``$JS.API`` request bodies the way nats-server's Go decoder reads them.

Owns: a body as a JSON object (empty means ``{}``; anything that is not an object is 10025,
invalid JSON), typed requests (``api/messages``) with Go's rules (a field of the wrong JSON type,
a number its Go integer type cannot hold: 10025; ``null``, for the body or a field, is the zero
value), and a stream config body. Pure: no streams, no handlers.

Bodies are bounded by the server's ``max_payload`` (a larger one never arrives). Nesting is
bounded by the decoder: JSON nested deeper than about 900 levels (what Python's recursion limit
leaves to msgspec) is refused as invalid JSON. Go reads up to 10,000 levels, but no request field
nests more than four: a deeper body has a deep unknown field, which nats-server 2.10+ refuses as
well (2.9 skipped it).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig, go_int_violation

__all__ = [
    "as_request",
    "as_stream_config",
    "config_body",
    "decode_body",
    "decode_request",
    "expect_empty",
    "is_empty_request",
]

S = TypeVar("S", bound=msgspec.Struct)


def decode_body(data: bytes) -> dict[str, Any]:
    """An API request body as a JSON object; empty means ``{}``; anything else is 10025."""
    if not data.strip():
        return {}
    try:
        obj = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as e:  # nested past the decoder's depth: refused
        raise ApiError.of(E.INVALID_JSON) from e
    if not isinstance(obj, dict):
        raise ApiError.of(E.INVALID_JSON)
    return obj


def as_request(obj: dict[str, Any], type_: type[S]) -> S:
    """A decoded body as the request Struct ``type_``, by Go's rules: a field of the wrong type,
    or a number its Go integer type cannot hold (``models.GoInt``, at any depth), is 10025; a
    ``null`` field is left at its zero value."""
    fields = {k: v for k, v in obj.items() if v is not None}
    try:
        req = msgspec.convert(fields, type_)
    except msgspec.ValidationError as e:
        raise ApiError.of(E.INVALID_JSON) from e
    if go_int_violation(req) is not None:
        raise ApiError.of(E.INVALID_JSON)
    return req


def decode_request(data: bytes, type_: type[S]) -> S:
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
    except (msgspec.DecodeError, RecursionError):
        return False
    return isinstance(obj, dict) and not obj


def expect_empty(body: bytes) -> None:
    """The check of a request that takes no body (INFO/DELETE of one stream or consumer), made
    before anything else: anything but an empty body or ``{}`` is 10038, as nats-server."""
    if not is_empty_request(body):
        raise ApiError.of(E.NOT_EMPTY_REQUEST)


def config_body(body: bytes) -> dict[str, Any]:
    """A STREAM.CREATE/UPDATE body: a JSON object (nats-server refuses an empty one as invalid JSON;
    ``null`` is Go's zero config, whose empty name then mismatches)."""
    if not body.strip():
        raise ApiError.of(E.INVALID_JSON)
    if body.strip() == b"null":
        return {}
    return decode_body(body)


COMPRESSIONS = ("none", "s2")
"""The ``compression`` values nats-server knows; any other string is "unknown compression
algorithm" (its own decoder's words)."""


def as_stream_config(obj: dict[str, Any]) -> StreamConfig:
    """A STREAM.CREATE/UPDATE body as the config, by the same rules as every request."""
    comp = obj.get("compression")
    if isinstance(comp, str) and comp not in COMPRESSIONS:
        raise ApiError.of(E.INVALID_JSON, err="unknown compression algorithm")
    return as_request(obj, StreamConfig)
