"""Every integer a request can carry has its Go type, and numbers it cannot hold are refused."""

from __future__ import annotations

import typing

import msgspec
import pytest

from jetpy.jetstream.api import messages
from jetpy.jetstream.api.direct import DirectGetRequest
from jetpy.jetstream.api.messages import ConsumerCreateRequest, StreamMsgGetRequest
from jetpy.jetstream.api.requests import as_request, as_stream_config
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import (
    ConsumerConfig,
    GoInt,
    StreamConfig,
    StreamConsumerLimits,
    StreamSource,
    go_int_violation,
)

# the configs, and every request document the API decodes (found by name: new ones are covered)
REQUEST_TYPES = [StreamConfig, StreamSource, StreamConsumerLimits, ConsumerConfig, DirectGetRequest] + [
    cls
    for name, cls in vars(messages).items()
    if name.endswith("Request") and isinstance(cls, type) and issubclass(cls, msgspec.Struct)
]


def _int_fields(cls: type[msgspec.Struct]) -> list[tuple[str, typing.Any]]:
    out = []
    for f in msgspec.structs.fields(cls):
        tp = f.type
        if typing.get_origin(tp) is list:
            tp = typing.get_args(tp)[0]
        if tp is int or (typing.get_origin(tp) is typing.Annotated and typing.get_args(tp)[0] is int):
            out.append((f.name, tp))
    return out


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=lambda c: c.__name__)
def test_every_integer_field_has_a_go_type(cls: type[msgspec.Struct]) -> None:
    for name, tp in _int_fields(cls):
        meta = typing.get_args(tp)[1:] if typing.get_origin(tp) is typing.Annotated else ()
        assert any(isinstance(m, GoInt) for m in meta), f"{cls.__name__}.{name} has no Go type"


def test_violation_names_the_field_as_go_does() -> None:
    cfg = msgspec.convert({"name": "S", "max_msg_size": 2**31}, StreamConfig)
    assert go_int_violation(cfg) == (
        "json: cannot unmarshal number 2147483648 into Go struct field .max_msg_size of type int32"
    )
    nested = msgspec.convert({"config": {"backoff": [1, -1, 2**63]}}, ConsumerCreateRequest)
    assert go_int_violation(nested) == (
        "json: cannot unmarshal number 9223372036854775808 into Go struct field .config.backoff.2"
        " of type time.Duration"
    )
    assert (
        go_int_violation(msgspec.convert({"max_msgs": 2**63 - 1, "first_seq": 2**64 - 1}, StreamConfig))
        is None
    )


@pytest.mark.parametrize(
    "body",
    [
        {"name": "S", "max_msgs": 2**64},  # the case
        {"name": "S", "max_msgs": -(2**63) - 1},
        {"name": "S", "first_seq": -1},
        {"name": "S", "sources": [{"name": "O", "opt_start_seq": 2**64}]},
        {"name": "S", "mirror": {"name": "O", "opt_start_seq": -1}},
        {"name": "S", "consumer_limits": {"max_ack_pending": 2**63}},
        {"name": "S", "max_msgs": 10**400},
    ],
)
def test_stream_config_out_of_range_is_invalid_json(body: dict[str, typing.Any]) -> None:
    with pytest.raises(ApiError) as e:
        as_stream_config(body)
    assert (e.value.code, e.value.err_code) == (400, 10025)


def test_stored_configs_are_read_back_whatever_they_hold() -> None:
    # the Go types bind requests only: a config jetpy once wrote is never refused on recovery
    raw = msgspec.json.encode({"name": "S", "max_msgs": 2**64 - 1})
    assert msgspec.json.decode(raw, type=StreamConfig).max_msgs == 2**64 - 1
    assert as_request({"seq": 2**64 - 1}, StreamMsgGetRequest).seq == 2**64 - 1
