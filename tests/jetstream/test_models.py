"""The wire model: RFC3339Nano times, which fields Go always writes, request decoding with Go's
rules, the response envelopes, nats-py compat."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.js import api as nats_api

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import (
    AccountInfoResponse,
    ConsumerCreateRequest,
    ConsumerInfoResponse,
    ConsumerNamesResponse,
    PagedRequest,
    StreamCreateResponse,
    StreamDeleteResponse,
    StreamInfoRequest,
    StreamInfoResponse,
    StreamListResponse,
    StreamMsgDeleteRequest,
    StreamMsgGetRequest,
    StreamMsgGetResponse,
    StreamNamesResponse,
    StreamPurgeRequest,
    StreamPurgeResponse,
)
from jetpy.jetstream.api.requests import as_stream_config, config_body, decode_request, is_empty_request
from jetpy.jetstream.jsz_models import StreamDetail
from jetpy.jetstream.models import (
    ZERO_TIME,
    AccountInfo,
    ApiErrorBody,
    ClusterInfo,
    ConsumerConfig,
    ConsumerInfo,
    PubAck,
    PubAckError,
    SequenceInfo,
    StoredMessage,
    StreamConfig,
    StreamInfo,
    StreamSource,
    StreamState,
    decode,
    encode,
    format_time,
    parse_time,
)
from jetpy.jetstream.validate import check_consumer_config, check_stream_config

NS = 1_000_000_000


def as_json(obj: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(encode(obj))
    return result


# -- time --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (1_704_164_645_123_456_789, "2024-01-02T03:04:05.123456789Z"),
        (1_704_164_645_000_000_000, "2024-01-02T03:04:05Z"),
        (1_704_164_645_120_000_000, "2024-01-02T03:04:05.12Z"),
        (1_704_164_645_000_000_001, "2024-01-02T03:04:05.000000001Z"),
        (1_704_164_645_100_000_000, "2024-01-02T03:04:05.1Z"),
        (0, ZERO_TIME),
        (1, "1970-01-01T00:00:00.000000001Z"),
        (-NS, "1969-12-31T23:59:59Z"),
        (253_402_300_799 * NS, "9999-12-31T23:59:59Z"),
        (-30_610_224_000 * NS - 1, "0999-12-31T23:59:59.999999999Z"),  # Go pads the year
    ],
)
def test_format_time_matches_go_rfc3339nano(ns: int, text: str) -> None:
    assert format_time(ns) == text
    assert parse_time(text) == ns


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2024-01-02T05:04:05.5+02:00", 1_704_164_645_500_000_000),
        ("2024-01-01T22:04:05-05:00", 1_704_164_645 * NS),
        ("2024-01-02T03:04:05.1234567891234Z", 1_704_164_645_123_456_789),  # past ns: truncated
        ("2024-01-02t03:04:05z", 1_704_164_645 * NS),
    ],
)
def test_parse_time_accepts_offsets_and_long_fractions(text: str, ns: int) -> None:
    assert parse_time(text) == ns


@pytest.mark.parametrize(
    "text",
    ["", "2024-01-02", "2024-01-02T03:04:05", "2024-13-02T03:04:05Z", "2024-02-30T00:00:00Z", "now"],
)
def test_parse_time_rejects_what_go_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


@given(st.integers(min_value=-(62_135_596_800 - 1) * NS, max_value=253_402_300_799 * NS))
def test_time_round_trips_and_agrees_with_datetime(ns: int) -> None:
    text = format_time(ns)
    assert parse_time(text) == ns
    if ns != 0:
        secs, frac = divmod(ns, NS)
        expected = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=secs)
        assert text.startswith(expected.replace(tzinfo=None).isoformat())
        assert ("." in text) == (frac != 0)
        assert not text.rstrip("Z").endswith("0") or "." not in text


# -- which fields appear ------------------------------------------------------------------------

# What nats-server 2.10/2.11 write for a default stream config, by Go's json tags.
STREAM_ALWAYS = {
    "name", "retention", "max_consumers", "max_msgs", "max_bytes", "max_age", "max_msgs_per_subject",
    "discard", "storage", "num_replicas", "compression", "allow_direct", "mirror_direct", "sealed",
    "deny_delete", "deny_purge", "allow_rollup_hdrs", "consumer_limits", "allow_msg_ttl",
}  # fmt: skip


def test_stream_config_writes_always_present_fields_only() -> None:
    assert set(as_json(StreamConfig(name="S"))) == STREAM_ALWAYS
    full = as_json(check_stream_config(StreamConfig(name="S")))
    assert set(full) == STREAM_ALWAYS | {"subjects", "max_msg_size", "duplicate_window"}
    assert full["consumer_limits"] == {}


def test_consumer_config_writes_what_go_writes() -> None:
    assert as_json(ConsumerConfig()) == {
        "deliver_policy": "all",
        "ack_policy": "none",
        "replay_policy": "instant",
        "num_replicas": 0,
    }


def test_stream_state_and_info_shapes() -> None:
    state = as_json(StreamState())
    assert state == {
        "messages": 0,
        "bytes": 0,
        "first_seq": 0,
        "first_ts": ZERO_TIME,
        "last_seq": 0,
        "last_ts": ZERO_TIME,
        "consumer_count": 0,
    }
    info = as_json(StreamInfo(config=StreamConfig(name="S")))
    assert list(info) == ["config", "created", "state"]  # a single server: no cluster; 2.9: no ts
    detail = as_json(StreamDetail(name="S", cluster=ClusterInfo(leader="n1")))
    assert list(detail) == ["name", "created", "cluster", "state"]  # /jsz: config only when asked
    assert detail["cluster"] == {"leader": "n1"}


def test_error_responses_carry_only_type_error_and_paging() -> None:
    err = E.ApiError.of(E.STREAM_NOT_FOUND)
    wire_error = {"code": 404, "err_code": 10059, "description": "stream not found"}
    assert as_json(StreamCreateResponse.failure(err)) == {
        "type": "io.nats.jetstream.api.v1.stream_create_response",
        "error": wire_error,
    }
    assert as_json(StreamInfoResponse.failure(err)) == {
        "type": "io.nats.jetstream.api.v1.stream_info_response",
        "error": wire_error,
        "total": 0,
        "offset": 0,
        "limit": 0,
    }
    # as nats-server 2.9.10 answers (checked by hand against the reference)
    assert as_json(StreamPurgeResponse.failure(err)) == {
        "type": "io.nats.jetstream.api.v1.stream_purge_response",
        "error": wire_error,
        "purged": 0,
    }
    assert as_json(ConsumerNamesResponse.failure(err))["consumers"] == []
    assert "success" not in as_json(StreamDeleteResponse.failure(err))
    assert "message" not in as_json(StreamMsgGetResponse.failure(err))
    assert as_json(StreamNamesResponse())["streams"] is None
    assert as_json(StreamListResponse())["streams"] == []


def test_success_responses_flatten_the_body() -> None:
    info = StreamInfo(config=check_stream_config(StreamConfig(name="S")), created=format_time(NS))
    resp = StreamCreateResponse.of(info, did_create=True)
    wire = as_json(resp)
    assert wire["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    assert wire["did_create"] is True
    assert wire["config"]["name"] == "S"
    assert "error" not in wire
    assert list(wire) == ["type", "config", "created", "state", "did_create"]  # Go's field order
    back = decode(encode(resp), StreamCreateResponse)
    assert (back.config, back.created, back.state) == (info.config, info.created, info.state)
    failed = decode(
        encode(StreamCreateResponse.failure(E.ApiError.of(E.STREAM_NOT_FOUND))), StreamCreateResponse
    )
    assert failed.error is not None and failed.error.to_error() == E.ApiError.of(E.STREAM_NOT_FOUND)
    assert failed.config is None
    paged = as_json(StreamInfoResponse.of(info, total=3, offset=1, limit=100_000))
    assert list(paged) == ["type", "total", "offset", "limit", "config", "created", "state"]


def test_pub_ack_shapes() -> None:
    assert encode(PubAck(stream="S", seq=7)) == b'{"stream":"S","seq":7}'
    assert as_json(PubAck(stream="S", seq=7, duplicate=True, domain="hub")) == {
        "stream": "S",
        "seq": 7,
        "domain": "hub",
        "duplicate": True,
    }
    err = ApiErrorBody.of(E.ApiError.of(E.STREAM_WRONG_LAST_SEQUENCE, seq=3))
    assert as_json(PubAckError(error=err, stream="S")) == {
        "error": {"code": 400, "err_code": 10071, "description": "wrong last sequence: 3"},
        "stream": "S",
        "seq": 0,
    }


def test_stored_message_is_base64() -> None:
    msg = StoredMessage(
        subject="a", seq=1, hdrs=b"NATS/1.0\r\nA: b\r\n\r\n", data=b"\x00hi", time=format_time(NS)
    )
    wire = as_json(msg)
    assert base64.b64decode(wire["data"]) == b"\x00hi"
    assert decode(encode(msg), StoredMessage) == msg
    assert set(as_json(StoredMessage(subject="a", seq=1))) == {"subject", "seq", "time"}


# -- decoding -------------------------------------------------------------------------------------


def test_decoders_ignore_unknown_fields() -> None:
    raw = b'{"name":"S","subjects":["a"],"allow_atomic":true,"future":{"x":1},"pedantic":true}'
    assert as_stream_config(config_body(raw)) == StreamConfig(name="S", subjects=["a"])
    assert decode(raw, StreamConfig).name == "S"
    req = decode_request(
        b'{"stream_name":"S","config":{"x":1},"future":2,"pedantic":true}', ConsumerCreateRequest
    )
    assert (req.stream_name, req.config, req.pedantic) == ("S", ConsumerConfig(), True)


def test_decode_request_maps_bad_json_to_10025() -> None:
    """Go's decoder: a body that is not an object, a field of the wrong JSON type (also a bool
    for a bool field given as 1), a negative unsigned integer or a number no Go integer holds is
    invalid JSON (nats-server 2.9 gives no detail); empty, ``null`` or a ``null`` field is zero."""
    assert decode_request(b"", StreamInfoRequest) == StreamInfoRequest()
    assert decode_request(b" null ", StreamPurgeRequest) == StreamPurgeRequest()
    assert decode_request(b"  ", ConsumerCreateRequest).config == ConsumerConfig()
    assert decode_request(b'{"seq":null,"filter":null}', StreamPurgeRequest) == StreamPurgeRequest()
    assert decode_request(b'{"offset":-5}', PagedRequest).offset == -5  # a Go int; handlers read 0
    assert decode_request(b'{"seq":18446744073709551615}', StreamMsgGetRequest).seq == 2**64 - 1
    bad: list[tuple[bytes, type[Any]]] = [
        (b"{", StreamInfoRequest),
        (b"[]", StreamInfoRequest),
        (b"5", PagedRequest),
        (b'{"deleted_details":1}', StreamInfoRequest),
        (b'{"subjects_filter":5}', StreamInfoRequest),
        (b'{"offset":1.0}', StreamInfoRequest),
        (b'{"offset":9223372036854775808}', PagedRequest),
        (b'{"seq":-1}', StreamMsgGetRequest),
        (b'{"seq":18446744073709551616}', StreamMsgGetRequest),
        (b'{"no_erase":"yes"}', StreamMsgDeleteRequest),
        (b'{"keep":"1"}', StreamPurgeRequest),
        (b'{"stream_name":5}', ConsumerCreateRequest),
        (b'{"config":[]}', ConsumerCreateRequest),
        (b'{"config":{"max_deliver":"3"}}', ConsumerCreateRequest),
        (b'{"config":{"ack_policy":"sometimes"}}', ConsumerCreateRequest),
    ]
    for body, type_ in bad:
        with pytest.raises(E.ApiError) as exc:
            decode_request(body, type_)
        assert (exc.value.err_code, exc.value.description) == (10025, "invalid JSON"), body
    for body in (b'{"retention":"forever"}', b'{"max_msgs":"1"}', b'{"max_msgs":1.0}'):
        with pytest.raises(E.ApiError) as exc:
            as_stream_config(config_body(body))
        assert exc.value.err_code == 10025
    # 2.10+ fields 2.9 ignores whatever their type
    req = decode_request(b'{"action":5,"pedantic":"x"}', ConsumerCreateRequest)
    assert (req.action, req.pedantic) == (5, "x")


def test_empty_request_is_nats_server_s() -> None:
    assert all(is_empty_request(b) for b in (b"", b"  ", b"{}", b" { } "))
    assert not any(is_empty_request(b) for b in (b"null", b"[]", b'{"seq":0}', b"{bad"))


def test_structs_are_frozen() -> None:
    cfg = StreamConfig(name="S")
    with pytest.raises(AttributeError):
        cfg.name = "T"  # type: ignore[misc]


def test_api_error_body_round_trip() -> None:
    err = E.ApiError.of(E.CONSUMER_NOT_FOUND)
    body = ApiErrorBody.of(err)
    assert body.to_error() == err
    assert as_json(body) == err.to_wire()


# -- nats-py's dataclasses as an oracle ----------------------------------------------------------


def test_nats_py_reads_stream_info() -> None:
    cfg = check_stream_config(
        StreamConfig(
            name="ORDERS", subjects=["orders.>"], max_age=3600 * NS, description="d", metadata={"k": "v"}
        )
    )
    info = StreamInfo(
        config=cfg,
        created=format_time(1_704_164_645_123_456_789),
        state=StreamState(
            messages=3, bytes=99, first_seq=1, last_seq=3, consumer_count=1, subjects={"orders.a": 3}
        ),
    )
    got = nats_api.StreamInfo.from_response(json.loads(encode(StreamInfoResponse.of(info))))
    assert got.config.name == "ORDERS"
    assert got.config.subjects == ["orders.>"]
    assert got.config.max_age == 3600.0
    assert got.config.duplicate_window == 120.0
    assert got.config.retention == nats_api.RetentionPolicy.LIMITS
    assert got.config.storage == nats_api.StorageType.FILE
    assert got.config.metadata == {"k": "v"}
    assert got.state.messages == 3
    assert got.state.subjects == {"orders.a": 3}
    assert got.cluster is None  # a single server reports no cluster in the API
    assert got.created == dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)


def test_nats_py_reads_consumer_info() -> None:
    stream = check_stream_config(StreamConfig(name="S", subjects=["s.>"]))
    cfg = check_consumer_config(
        stream,
        ConsumerConfig(
            durable_name="d", ack_policy="explicit", filter_subject="s.a", backoff=[NS, 2 * NS], max_deliver=5
        ),
    )
    info = ConsumerInfo(
        stream_name="S",
        name="d",
        created=format_time(NS),
        config=cfg,
        delivered=SequenceInfo(consumer_seq=2, stream_seq=5, last_active=format_time(2 * NS)),
        num_pending=4,
        ts=format_time(3 * NS),
    )
    got = nats_api.ConsumerInfo.from_response(json.loads(encode(ConsumerInfoResponse.of(info))))
    assert got.name == "d" and got.stream_name == "S"
    assert got.config.ack_policy == nats_api.AckPolicy.EXPLICIT
    assert got.config.ack_wait == 1.0  # backoff[0] overrides the 30s default
    assert got.config.backoff == [1.0, 2.0]
    assert got.config.max_ack_pending == 1000
    assert got.config.max_waiting == 512
    assert got.delivered is not None and got.delivered.stream_seq == 5
    assert got.num_pending == 4


def test_nats_py_reads_account_info_and_pub_ack() -> None:
    wire = json.loads(encode(AccountInfoResponse.of(AccountInfo(streams=2, consumers=3))))
    got = nats_api.AccountInfo.from_response(wire)
    assert (got.streams, got.consumers) == (2, 3)
    assert got.limits.max_streams == -1
    assert got.api.total == 0
    ack = nats_api.PubAck.from_response(json.loads(encode(PubAck(stream="S", seq=9, duplicate=True))))
    assert (ack.stream, ack.seq, ack.duplicate) == ("S", 9, True)


def test_nats_py_requests_decode() -> None:
    """What nats-py sends for add_stream / add_consumer decodes into our request types."""
    scfg = nats_api.StreamConfig(
        name="S", subjects=["a.*"], max_age=60.0, duplicate_window=1.5, storage=nats_api.StorageType.MEMORY
    )
    body = json.dumps(scfg.as_dict()).encode()
    got = as_stream_config(config_body(body))
    assert got.subjects == ["a.*"]
    assert got.storage == "memory"
    assert got.max_msgs_per_subject == -1  # nats-py sends its own default

    ccfg = nats_api.ConsumerConfig(durable_name="d", ack_wait=2.0, filter_subjects=["a.x", "a.y"])
    req = {"stream_name": "S", "config": ccfg.as_dict()}
    creq = decode_request(json.dumps(req).encode(), ConsumerCreateRequest)
    assert creq.config.durable_name == "d"
    assert creq.config.filter_subjects == ["a.x", "a.y"]
    assert creq.action == ""


def test_stream_source_time_stays_a_string() -> None:
    src = decode(b'{"name":"O","opt_start_time":"2024-01-02T03:04:05.5Z"}', StreamSource)
    assert src.opt_start_time is not None and parse_time(src.opt_start_time) == 1_704_164_645_500_000_000
    with pytest.raises(msgspec.ValidationError):
        decode(b'{"name":"O","opt_start_seq":"x"}', StreamSource)
