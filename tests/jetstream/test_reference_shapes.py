"""jetpy's JetStream model against the reference nats-server (Debian's 2.9.10).

Three things are pinned here, by sending the reference real ``$JS.API`` requests:
(a) our response types decode what it answers, and re-encode to the same JSON (so the fields we
    omit or always write are the ones it omits or always writes);
(b) ``check_stream_config`` / ``check_consumer_config`` fill in the same defaults;
(c) for bad configs, our validators refuse with the same ``err_code``.

The reference is 2.9; jetpy models 2.10/2.11. Fields 2.9 does not have (``compression``,
``consumer_limits``, ``allow_msg_ttl``, ``ts``, ...) are ignored when absent from its answer, and
cases where 2.10+ changed behaviour (negative limits clamp to -1, looser consumer filters,
``>`` needing no-ack) stay out of the lists and are covered by the unit tests.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from conftest import Proc
from jetpy.jetstream.api.messages import (
    AccountInfoResponse,
    ConsumerCreateResponse,
    ConsumerInfoResponse,
    ConsumerListResponse,
    ConsumerNamesResponse,
    StreamCreateResponse,
    StreamDeleteResponse,
    StreamInfoResponse,
    StreamListResponse,
    StreamMsgGetResponse,
    StreamNamesResponse,
    StreamPurgeResponse,
)
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, StreamConfig, decode, decode_request, encode
from jetpy.jetstream.validate import check_consumer_config, check_stream_config, check_stream_create

pytestmark = [
    pytest.mark.differential,
    pytest.mark.skipif(shutil.which("nats-server") is None, reason="reference nats-server is not installed"),
]

S = 1_000_000_000
# Fields nats-server 2.10/2.11 added that 2.9 neither writes nor knows.
NEWER_FIELDS = frozenset(
    {"compression", "consumer_limits", "allow_msg_ttl", "ts", "reserved_memory", "reserved_storage", "level"}
)


@pytest.fixture
async def nc(reference_proc: Proc) -> AsyncIterator[Client]:
    client = await nats.connect(reference_proc.url)
    try:
        yield client
    finally:
        await client.close()


async def api(nc: Client, subject: str, body: dict[str, Any] | None = None) -> bytes:
    payload = json.dumps(body).encode() if body is not None else b""
    msg = await nc.request("$JS.API." + subject, payload, timeout=5)
    return bytes(msg.data)


def without_newer(ours: Any, ref: Any) -> Any:
    """``ours`` minus the 2.10+ fields the reference's answer does not have."""
    if isinstance(ours, dict) and isinstance(ref, dict):
        return {k: without_newer(v, ref.get(k)) for k, v in ours.items() if k in ref or k not in NEWER_FIELDS}
    if isinstance(ours, list) and isinstance(ref, list) and len(ours) == len(ref):
        return [without_newer(a, b) for a, b in zip(ours, ref, strict=True)]
    return ours


def assert_same_json(ours: bytes, ref: bytes) -> None:
    ref_json = json.loads(ref)
    assert without_newer(json.loads(ours), ref_json) == ref_json


def assert_round_trip(raw: bytes, type_: type[Any]) -> Any:
    decoded = decode(raw, type_)
    assert_same_json(encode(decoded), raw)
    return decoded


# -- (a) decoding and re-encoding the reference's answers -------------------------------------


async def test_responses_decode_and_reencode_identically(nc: Client) -> None:
    assert_round_trip(await api(nc, "INFO"), AccountInfoResponse)
    assert_round_trip(await api(nc, "STREAM.NAMES"), StreamNamesResponse)  # "streams": null
    assert_round_trip(await api(nc, "STREAM.LIST"), StreamListResponse)

    streams: dict[str, dict[str, Any]] = {
        "ORDERS": {"name": "ORDERS", "subjects": ["orders.>"], "max_age": 3600 * S, "description": "d"},
        "MEM": {"name": "MEM", "subjects": ["mem.*"], "storage": "memory", "max_msgs_per_subject": 5,
                "discard": "new", "allow_rollup_hdrs": True, "allow_direct": True, "placement": {"cluster": "c1"}},
        "REPUB": {"name": "REPUB", "subjects": ["rp.>"], "republish": {"dest": "out.>", "headers_only": True}},
        "MIRROR": {"name": "MIRROR", "mirror": {"name": "ORDERS", "opt_start_seq": 2}},
        "SOURCED": {"name": "SOURCED", "sources": [{"name": "ORDERS", "filter_subject": "orders.a"}, {"name": "MEM"}]},
        "WQ": {"name": "WQ", "subjects": ["wq.>"], "retention": "workqueue", "max_bytes": 1 << 20},
    }  # fmt: skip
    for name, cfg in streams.items():
        resp = assert_round_trip(await api(nc, f"STREAM.CREATE.{name}", cfg), StreamCreateResponse)
        assert resp.error is None, resp.error
        assert resp.did_create

    await nc.publish("orders.a", b"hello", headers={"X-Test": "1"})
    ack = await nc.request("orders.b", b"world")
    assert json.loads(ack.data) == {"stream": "ORDERS", "seq": 2}

    info = assert_round_trip(
        await api(nc, "STREAM.INFO.ORDERS", {"subjects_filter": ">"}), StreamInfoResponse
    )
    assert info.info().state.messages == 2
    assert info.state is not None and info.state.subjects == {"orders.a": 1, "orders.b": 1}
    assert_round_trip(await api(nc, "STREAM.NAMES"), StreamNamesResponse)
    assert_round_trip(await api(nc, "STREAM.LIST"), StreamListResponse)

    got = assert_round_trip(await api(nc, "STREAM.MSG.GET.ORDERS", {"seq": 1}), StreamMsgGetResponse)
    assert got.message is not None
    assert (got.message.subject, got.message.data) == ("orders.a", b"hello")
    assert b"X-Test: 1" in got.message.hdrs
    assert_round_trip(await api(nc, "STREAM.MSG.GET.ORDERS", {"seq": 99}), StreamMsgGetResponse)

    consumers = [
        ("CONSUMER.CREATE.ORDERS", {"stream_name": "ORDERS", "config": {"filter_subject": "orders.a"}}),
        ("CONSUMER.DURABLE.CREATE.ORDERS.pull", {"stream_name": "ORDERS", "config": {
            "durable_name": "pull", "ack_policy": "explicit", "backoff": [S, 2 * S], "max_deliver": 4,
            "description": "x", "max_batch": 10, "max_expires": 5 * S, "headers_only": True}}),
        ("CONSUMER.DURABLE.CREATE.ORDERS.push", {"stream_name": "ORDERS", "config": {
            "durable_name": "push", "ack_policy": "all", "deliver_subject": "dl.push", "deliver_group": "g",
            "idle_heartbeat": S, "flow_control": True, "deliver_policy": "last", "rate_limit_bps": 1000,
            "sample_freq": "50%", "replay_policy": "original"}}),
    ]  # fmt: skip
    for subject, body in consumers:
        resp = assert_round_trip(await api(nc, subject, body), ConsumerCreateResponse)
        assert resp.error is None, resp.error
    assert_round_trip(await api(nc, "CONSUMER.INFO.ORDERS.pull"), ConsumerInfoResponse)
    assert_round_trip(await api(nc, "CONSUMER.INFO.ORDERS.nope"), ConsumerInfoResponse)
    assert_round_trip(await api(nc, "CONSUMER.NAMES.ORDERS"), ConsumerNamesResponse)
    assert_round_trip(await api(nc, "CONSUMER.LIST.ORDERS"), ConsumerListResponse)
    assert_round_trip(await api(nc, "CONSUMER.LIST.NOPE"), ConsumerListResponse)

    assert_round_trip(await api(nc, "STREAM.PURGE.ORDERS", {"filter": "orders.a"}), StreamPurgeResponse)
    assert_round_trip(await api(nc, "STREAM.PURGE.NOPE"), StreamPurgeResponse)
    assert_round_trip(await api(nc, "STREAM.DELETE.WQ"), StreamDeleteResponse)
    assert_round_trip(await api(nc, "STREAM.DELETE.WQ"), StreamDeleteResponse)
    assert_round_trip(await api(nc, "STREAM.INFO.WQ"), StreamInfoResponse)
    assert_round_trip(await api(nc, "INFO"), AccountInfoResponse)


# -- (b) the same defaults --------------------------------------------------------------------

STREAM_INPUTS: list[dict[str, Any]] = [
    {"name": "D1"},
    {"name": "D2", "subjects": ["d2.a", "d2.b.*"], "storage": "memory", "max_age": S},
    {"name": "D3", "subjects": ["d3.>"], "max_age": 3600 * S, "max_msgs": 10, "max_bytes": 1024, "max_msg_size": 64},
    {"name": "D4", "subjects": ["d4"], "duplicate_window": 5 * S, "max_consumers": 3, "num_replicas": 1},
    {"name": "D5", "subjects": ["d5.*"], "discard": "new", "max_msgs_per_subject": 1, "discard_new_per_subject": True},
    {"name": "D6", "subjects": ["d6.>"], "republish": {"src": "d6.a.>", "dest": "r6.>"}, "deny_delete": True},
    {"name": "D7", "subjects": ["d7.>"], "republish": {"dest": "r7.>"}},
    {"name": "D8", "subjects": ["d8"], "retention": "interest", "no_ack": True, "allow_direct": True},
    {"name": "D9", "subjects": ["d9"], "placement": {"tags": ["a", "b"]}, "sealed": False, "deny_purge": True},
    {"name": "D10", "mirror": {"name": "D1"}},
    {"name": "D11", "sources": [{"name": "D1"}, {"name": "D2", "filter_subject": "d2.a"}]},
    {"name": "D12", "subjects": ["d12"], "retention": "workqueue", "max_age": 50 * S, "duplicate_window": 10 * S},
]  # fmt: skip

CONSUMER_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("E", {}),
    ("E", {"ack_policy": "explicit", "filter_subject": "d2.a"}),
    ("E", {"deliver_subject": "push.e1", "ack_policy": "none", "idle_heartbeat": 5 * S, "flow_control": True}),
    ("c1", {"durable_name": "c1", "ack_policy": "explicit"}),
    ("c2", {"durable_name": "c2", "ack_policy": "all", "ack_wait": 5 * S, "max_ack_pending": 10, "max_waiting": 7}),
    ("c3", {"durable_name": "c3", "ack_policy": "explicit", "backoff": [S, 3 * S], "max_deliver": 5}),
    ("c4", {"durable_name": "c4", "deliver_subject": "push.c4", "ack_policy": "explicit", "deliver_policy": "new"}),
    ("c5", {"durable_name": "c5", "deliver_policy": "by_start_sequence", "opt_start_seq": 4}),
    ("c6", {"durable_name": "c6", "deliver_policy": "last_per_subject", "filter_subject": "d2.*"}),
    ("c7", {"durable_name": "c7", "deliver_policy": "by_start_time", "opt_start_time": "2024-01-02T03:04:05.5Z"}),
    ("c8", {"durable_name": "c8", "deliver_subject": "push.c8", "ack_policy": "explicit", "max_ack_pending": -1}),
]  # fmt: skip


async def test_stream_defaults_match(nc: Client) -> None:
    for cfg in STREAM_INPUTS:
        raw = await api(nc, f"STREAM.CREATE.{cfg['name']}", cfg)
        ref = json.loads(raw)
        assert "error" not in ref, (cfg, ref)
        ours = check_stream_create(decode(json.dumps(cfg).encode(), StreamConfig))
        assert without_newer(json.loads(encode(ours)), ref["config"]) == ref["config"], cfg


async def test_consumer_defaults_match(nc: Client) -> None:
    stream = {"name": "D2", "subjects": ["d2.a", "d2.b.*"]}
    raw = await api(nc, "STREAM.CREATE.D2", stream)
    ref_stream = decode(raw, StreamCreateResponse).info().config
    assert ref_stream == check_stream_config(StreamConfig(name="D2", subjects=["d2.a", "d2.b.*"]))
    for name, cfg in CONSUMER_INPUTS:
        subject = "CONSUMER.CREATE.D2" if name == "E" else f"CONSUMER.DURABLE.CREATE.D2.{name}"
        ref = json.loads(await api(nc, subject, {"stream_name": "D2", "config": cfg}))
        assert "error" not in ref, (cfg, ref)
        ours = json.loads(
            encode(check_consumer_config(ref_stream, decode(json.dumps(cfg).encode(), ConsumerConfig)))
        )
        ref_cfg = ref["config"]
        ref_cfg.pop("name", None)  # the server names ephemerals
        assert without_newer(ours, ref_cfg) == ref_cfg, cfg


# -- (c) the same refusals ----------------------------------------------------------------------

BAD_STREAMS: list[dict[str, Any]] = [
    {"name": "B1", "sealed": True},
    {"name": "B/2"},
    {"name": "B\\3"},
    {"name": "B*4"},
    {"name": "B" * 256},
    {"name": "B5", "description": "d" * 4097},
    {"name": "B6", "max_age": 60 * S, "duplicate_window": 120 * S},
    {"name": "B7", "max_age": 50_000_000},
    {"name": "B8", "duplicate_window": -1},
    {"name": "B9", "duplicate_window": 50_000_000},
    {"name": "B10", "deny_purge": True, "allow_rollup_hdrs": True},
    {"name": "B11", "discard_new_per_subject": True},
    {"name": "B12", "discard_new_per_subject": True, "discard": "new"},
    {"name": "B13", "subjects": ["a..b"]},
    {"name": "B14", "subjects": ["o.>", "o.b"]},
    {"name": "B15", "subjects": ["q", "q"]},
    {"name": "B16", "subjects": ["$JS.API.>"]},
    {"name": "B17", "subjects": ["m"], "mirror": {"name": "X"}},
    {"name": "B18", "mirror": {"name": "X"}, "sources": [{"name": "Y"}]},
    {"name": "B19", "subjects": ["r.>"], "republish": {"src": "r.>", "dest": "r.x.>"}},
    {"name": "B20", "subjects": ["r2.>"], "republish": {"src": "r2.*", "dest": "out.$3"}},
    {"name": "B21", "subjects": ["r3.>"], "republish": {"src": "zz.>", "dest": "out.>"}},
    {"name": "B22", "num_replicas": -1},
    {"name": "B23", "num_replicas": 6},
    {"name": "B24", "num_replicas": 3},
    {"name": "B25", "retention": "forever"},
    {"name": "B26", "storage": "disk"},
    {"name": "B27", "max_msgs": "many"},
    {"name": "B28", "sources": [{"name": "X", "external": {"api": "$JS.x.API", "deliver": "dl.*"}}]},
    {"name": "B29", "sources": [{"name": "X", "external": {"api": "$JS.API", "deliver": "dl"}}]},
]

BAD_CONSUMERS: list[dict[str, Any]] = [
    {"durable_name": "x1", "filter_subject": "zzz"},
    {"durable_name": "x2", "deliver_subject": "o.x2", "idle_heartbeat": 50_000_000},
    {"durable_name": "x3", "idle_heartbeat": S},
    {"durable_name": "x4", "flow_control": True},
    {"durable_name": "x5", "deliver_subject": "o.x5", "max_waiting": 3},
    {"durable_name": "x6", "deliver_subject": "o.x6", "flow_control": True},
    {"durable_name": "x7", "deliver_subject": "o.*"},
    {"durable_name": "x8", "deliver_subject": "k.x8"},
    {"durable_name": "x9", "ack_policy": "explicit", "backoff": [S, S, S], "max_deliver": 2},
    {"durable_name": "x10", "opt_start_seq": 3},
    {"durable_name": "x11", "deliver_policy": "by_start_sequence"},
    {"durable_name": "x12", "deliver_policy": "last_per_subject"},
    {"durable_name": "x13", "deliver_policy": "by_start_time"},
    {"durable_name": "x14", "deliver_policy": "new", "opt_start_time": "2024-01-01T00:00:00Z"},
    {"durable_name": "x15", "sample_freq": "abc"},
    {"durable_name": "x16", "description": "d" * 4097},
    {"durable_name": "x17", "rate_limit_bps": 100},
    {"durable_name": "x18", "deliver_subject": "o.x18", "max_ack_pending": 10},
    {"durable_name": "x19", "max_expires": 10},
    {"durable_name": "x20", "ack_policy": "sometimes"},
    {"durable_name": "x21", "num_replicas": 3},
]

BAD_WQ_CONSUMERS: list[tuple[list[dict[str, Any]], dict[str, Any]]] = [
    ([], {"durable_name": "w1"}),  # pull, ack none
    ([], {"durable_name": "w2", "deliver_subject": "o.w2"}),  # push, ack none
    ([], {"durable_name": "w3", "ack_policy": "explicit", "deliver_policy": "new"}),
    ([{"durable_name": "a", "ack_policy": "explicit"}], {"durable_name": "w4", "ack_policy": "explicit"}),
    ([{"durable_name": "b", "ack_policy": "explicit", "filter_subject": "wq.a.>"}],
     {"durable_name": "w5", "ack_policy": "explicit", "filter_subject": "wq.a.b"}),
    ([{"durable_name": "c", "ack_policy": "explicit", "filter_subject": "wq.c"}],
     {"durable_name": "w6", "ack_policy": "explicit", "filter_subject": "wq.>"}),
]  # fmt: skip


def our_stream_error(body: dict[str, Any]) -> int | None:
    try:
        check_stream_create(decode_request(json.dumps(body).encode(), StreamConfig))
    except ApiError as err:
        return err.err_code
    return None


def our_consumer_error(
    stream: StreamConfig, body: dict[str, Any], others: list[ConsumerConfig]
) -> int | None:
    try:
        check_consumer_config(
            stream, decode_request(json.dumps(body).encode(), ConsumerConfig), others=others
        )
    except ApiError as err:
        return err.err_code
    return None


async def test_stream_refusals_match(nc: Client) -> None:
    for body in BAD_STREAMS:
        ref = json.loads(await api(nc, f"STREAM.CREATE.{body['name']}", body))
        assert "error" in ref, (body, ref)
        assert our_stream_error(body) == ref["error"]["err_code"], (body, ref["error"])


async def test_consumer_refusals_match(nc: Client) -> None:
    stream_body = {"name": "K", "subjects": ["k.>"]}
    stream = decode(await api(nc, "STREAM.CREATE.K", stream_body), StreamCreateResponse).info().config
    for body in BAD_CONSUMERS:
        ref = json.loads(
            await api(
                nc, f"CONSUMER.DURABLE.CREATE.K.{body['durable_name']}", {"stream_name": "K", "config": body}
            )
        )
        assert "error" in ref, (body, ref)
        assert our_consumer_error(stream, body, []) == ref["error"]["err_code"], (body, ref["error"])

    for i, (setup, body) in enumerate(BAD_WQ_CONSUMERS):
        name = f"WQ{i}"
        wq = (
            decode(
                await api(
                    nc,
                    f"STREAM.CREATE.{name}",
                    {"name": name, "subjects": [f"wq{i}.>"], "retention": "workqueue"},
                ),
                StreamCreateResponse,
            )
            .info()
            .config
        )
        others = []
        for other in setup:
            other = json.loads(json.dumps(other).replace("wq.", f"wq{i}."))
            created = decode(
                await api(
                    nc,
                    f"CONSUMER.DURABLE.CREATE.{name}.{other['durable_name']}",
                    {"stream_name": name, "config": other},
                ),
                ConsumerCreateResponse,
            ).info()
            assert created.config is not None
            others.append(created.config)
        body = json.loads(json.dumps(body).replace("wq.", f"wq{i}."))
        ref = json.loads(
            await api(
                nc,
                f"CONSUMER.DURABLE.CREATE.{name}.{body['durable_name']}",
                {"stream_name": name, "config": body},
            )
        )
        assert "error" in ref, (body, ref)
        assert our_consumer_error(wq, body, others) == ref["error"]["err_code"], (body, ref["error"])
