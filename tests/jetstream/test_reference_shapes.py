"""jetpy's JetStream model against the reference nats-server (Debian's 2.9.10).

Three things are pinned here, by sending real ``$JS.API`` requests:
(a) what a running jetpy answers is its typed response, and has the reference's shape: each
    reply decodes into our response Struct and re-encodes byte for byte (so the bytes on the wire
    are the model's), and has the same fields, in the same order, with the same JSON types as
    the reference's answer to the same request (so the fields we omit or always write are the
    ones it omits or always writes); PubAcks are byte-equal to the reference's and decode with
    ``PubAck`` / ``PubAckError``;
(b) ``check_stream_config`` / ``check_consumer_config`` fill in the same defaults, from configs
    decoded as the server decodes them;
(c) for bad configs, our decoding and validators refuse with the same ``err_code``.

The reference is 2.9; jetpy models 2.10/2.11. Fields 2.9 does not have (``compression``,
``consumer_limits``, ``allow_msg_ttl``, ``ts``, a consumer config's ``name``, ...) are set aside
when absent from its answer, and cases where 2.10+ changed behaviour (negative limits clamp to
-1, looser consumer filters, ``>`` needing no-ack) stay out of the lists and are covered by the
unit tests.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, Proc, reference_cmd, start_process
from jetpy.jetstream.api import messages as M
from jetpy.jetstream.api.requests import as_stream_config, config_body, decode_request
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, PubAck, PubAckError, StreamConfig, decode, encode
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


def served_stream_config(body: dict[str, Any]) -> StreamConfig:
    """A STREAM.CREATE body decoded as the server decodes it."""
    return as_stream_config(config_body(json.dumps(body).encode()))


def served_consumer_config(body: dict[str, Any]) -> ConsumerConfig:
    """A consumer config decoded as the server decodes CONSUMER.CREATE's."""
    return decode_request(json.dumps({"config": body}).encode(), M.ConsumerCreateRequest).config


def created_config(raw: bytes) -> StreamConfig:
    """The config of a (successful) STREAM.CREATE answer."""
    resp = decode(raw, M.StreamCreateResponse)
    assert resp.config is not None, resp.error
    return resp.config


def without_newer(ours: Any, ref: Any) -> Any:
    """``ours`` minus the 2.10+ fields the reference's answer does not have."""
    if isinstance(ours, dict) and isinstance(ref, dict):
        return {k: without_newer(v, ref.get(k)) for k, v in ours.items() if k in ref or k not in NEWER_FIELDS}
    if isinstance(ours, list) and isinstance(ref, list) and len(ours) == len(ref):
        return [without_newer(a, b) for a, b in zip(ours, ref, strict=True)]
    return ours


# -- (a) what jetpy serves: its models, in the reference's shape -------------------------------


Body = dict[str, Any] | bytes | None


class Both:
    """One nats-py connection to the reference and one to a running jetpy; every request goes to
    both and returns (reference's reply, jetpy's reply) as raw bytes."""

    def __init__(self, ref: Client, ours: Client) -> None:
        self.ref = ref
        self.ours = ours

    async def ask(
        self, subject: str, body: Body = None, headers: dict[str, str] | None = None
    ) -> tuple[bytes, bytes]:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b""
        replies = []
        for nc in (self.ref, self.ours):
            msg = await nc.request(subject, payload, timeout=5, headers=headers)
            replies.append(bytes(msg.data))
        return replies[0], replies[1]

    async def api(self, subject: str, body: Body = None) -> tuple[bytes, bytes]:
        return await self.ask("$JS.API." + subject, body)


@pytest.fixture
async def both(reference_proc: Proc, jetpy_proc: Proc) -> AsyncIterator[Both]:
    ref, ours = await nats.connect(reference_proc.url), await nats.connect(jetpy_proc.url)
    try:
        yield Both(ref, ours)
    finally:
        await ref.close()
        await ours.close()


def assert_same_shape(ours: Any, ref: Any, path: str = "$", consumer: bool = False) -> None:
    """The same fields in the same order, recursively, with the same JSON types (values may
    differ). Fields 2.9 does not know are set aside where it leaves them out (``consumer``: a
    consumer's ``config``, where 2.10+ also writes ``name``)."""
    if isinstance(ours, dict) and isinstance(ref, dict):
        newer = NEWER_FIELDS | ({"name"} if consumer else set())
        keys = [k for k in ours if k in ref or k not in newer]
        assert keys == list(ref), f"{path}: fields {keys} where the reference has {list(ref)}"
        for k in keys:
            assert_same_shape(
                ours[k], ref[k], f"{path}.{k}", consumer=k == "config" and "stream_name" in ours
            )
    elif isinstance(ours, list) and isinstance(ref, list):
        assert len(ours) == len(ref), f"{path}: {len(ours)} items where the reference has {len(ref)}"
        for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
            assert_same_shape(a, b, f"{path}[{i}]")
    else:
        assert type(ours) is type(ref), f"{path}: {ours!r} where the reference has {ref!r}"


def assert_served(replies: tuple[bytes, bytes], type_: type[Any]) -> Any:
    """jetpy's reply is ``type_`` (decoded and re-encoded, the bytes are the same) and has the
    reference's shape; returns it decoded."""
    ref, ours = replies
    decoded = decode(ours, type_)
    assert encode(decoded) == ours, f"not what {type_.__name__} encodes:\n  {ours!r}"
    assert_same_shape(json.loads(ours), json.loads(ref))
    return decoded


async def test_served_responses_are_the_models_in_the_reference_shape(both: Both) -> None:
    assert_served(await both.api("INFO"), M.AccountInfoResponse)
    assert_served(await both.api("STREAM.NAMES"), M.StreamNamesResponse)  # "streams": null
    assert_served(await both.api("STREAM.LIST"), M.StreamListResponse)

    streams: dict[str, dict[str, Any]] = {
        "ORDERS": {"name": "ORDERS", "subjects": ["orders.>"], "max_age": 3600 * S, "description": "d"},
        "MEM": {"name": "MEM", "subjects": ["mem.*"], "storage": "memory", "max_msgs_per_subject": 5,
                "discard": "new", "allow_rollup_hdrs": True, "allow_direct": True},
        "REPUB": {"name": "REPUB", "subjects": ["rp.>"], "republish": {"dest": "out.>", "headers_only": True}},
        "WQ": {"name": "WQ", "subjects": ["wq.>"], "retention": "workqueue", "max_bytes": 1 << 20},
    }  # fmt: skip
    for name, cfg in streams.items():
        resp = assert_served(await both.api(f"STREAM.CREATE.{name}", cfg), M.StreamCreateResponse)
        assert resp.error is None, resp.error
        assert resp.did_create
    assert_served(await both.api("STREAM.CREATE.ORDERS", streams["ORDERS"]), M.StreamCreateResponse)  # again
    bad_creates: list[Body] = [b"{bad", {"name": "X"}, {"name": "ORDERS", "subjects": ["other"]}]
    for bad in bad_creates:
        assert_served(await both.api("STREAM.CREATE.ORDERS", bad), M.StreamCreateResponse)
    update = {**streams["ORDERS"], "description": "e"}
    assert_served(await both.api("STREAM.UPDATE.ORDERS", update), M.StreamUpdateResponse)
    assert_served(await both.api("STREAM.UPDATE.NOPE", {"name": "NOPE"}), M.StreamUpdateResponse)

    # PubAcks: byte for byte the reference's, and what the models read
    publishes: list[tuple[str, bytes, dict[str, str] | None, type[PubAck | PubAckError]]] = [
        ("orders.a", b"hello", {"X-Test": "1", "Nats-Msg-Id": "m1"}, PubAck),
        ("orders.b", b"world", None, PubAck),
        ("orders.c", b"!", None, PubAck),
        ("orders.a", b"hello", {"Nats-Msg-Id": "m1"}, PubAck),  # a duplicate
        ("orders.a", b"x", {"Nats-Expected-Stream": "OTHER"}, PubAckError),
        ("orders.a", b"x", {"Nats-Expected-Last-Sequence": "1"}, PubAckError),
    ]
    for subject, data, headers, model in publishes:
        ref_ack, our_ack = await both.ask(subject, data, headers)
        assert our_ack == ref_ack
        assert json.loads(encode(decode(our_ack, model))) == json.loads(our_ack)
    assert_served(await both.api("STREAM.MSG.DELETE.ORDERS", {"seq": 2}), M.StreamMsgDeleteResponse)

    infos: list[Body] = [None, {"subjects_filter": ">"}, {"subjects_filter": ">", "offset": 1, "deleted_details": True},
                         {"deleted_details": True}, {"subjects_filter": "zz"}, b"{bad"]  # fmt: skip
    for body in infos:
        info = assert_served(await both.api("STREAM.INFO.ORDERS", body), M.StreamInfoResponse)
    assert info.error is not None and info.error.err_code == 10025
    info = assert_served(await both.api("STREAM.INFO.ORDERS", {"subjects_filter": ">"}), M.StreamInfoResponse)
    assert info.state is not None and info.state.subjects == {"orders.a": 1, "orders.c": 1}
    assert_served(await both.api("STREAM.INFO.NOPE"), M.StreamInfoResponse)
    pages: list[Body] = [None, {"subject": "orders.*"}, {"offset": 2}, b"{bad"]
    for body in pages:
        assert_served(await both.api("STREAM.NAMES", body), M.StreamNamesResponse)
        assert_served(await both.api("STREAM.LIST", body), M.StreamListResponse)

    got = assert_served(await both.api("STREAM.MSG.GET.ORDERS", {"seq": 1}), M.StreamMsgGetResponse)
    assert got.message is not None
    assert (got.message.subject, got.message.data) == ("orders.a", b"hello")
    assert b"X-Test: 1" in got.message.hdrs
    gets: list[Body] = [{"seq": 2}, {"seq": 99}, {"last_by_subj": "orders.c"}, b"", b"{bad"]
    for body in gets:
        assert_served(await both.api("STREAM.MSG.GET.ORDERS", body), M.StreamMsgGetResponse)
    deletes: list[Body] = [{"seq": 2}, {"seq": 3, "no_erase": True}, b""]
    for body in deletes:
        assert_served(await both.api("STREAM.MSG.DELETE.ORDERS", body), M.StreamMsgDeleteResponse)
    assert_served(await both.api("STREAM.MSG.DELETE.NOPE", {"seq": 1}), M.StreamMsgDeleteResponse)

    # durable names sort before any ephemeral's random one, so that lists line up page by page
    consumers: list[tuple[str, Body]] = [
        ("CONSUMER.CREATE.ORDERS", {"stream_name": "ORDERS", "config": {"filter_subject": "orders.a"}}),
        ("CONSUMER.DURABLE.CREATE.ORDERS.-pull", {"stream_name": "ORDERS", "config": {
            "durable_name": "-pull", "ack_policy": "explicit", "backoff": [S, 2 * S], "max_deliver": 4,
            "description": "x", "max_batch": 10, "max_expires": 5 * S, "headers_only": True}}),
        ("CONSUMER.DURABLE.CREATE.ORDERS.-push", {"stream_name": "ORDERS", "config": {
            "durable_name": "-push", "ack_policy": "all", "deliver_subject": "dl.push", "deliver_group": "g",
            "idle_heartbeat": S, "flow_control": True, "deliver_policy": "last", "rate_limit_bps": 1000,
            "sample_freq": "50%", "replay_policy": "original"}}),
    ]  # fmt: skip
    for subject, body in consumers:
        resp = assert_served(await both.api(subject, body), M.ConsumerCreateResponse)
        assert resp.error is None, resp.error
    bad_consumers: list[tuple[str, Body]] = [
        ("CONSUMER.CREATE.ORDERS", {"stream_name": "MEM", "config": {}}),
        ("CONSUMER.CREATE.ORDERS", b"{bad"),
        ("CONSUMER.DURABLE.CREATE.ORDERS.x", {"stream_name": "ORDERS", "config": {"durable_name": "y"}}),
        ("CONSUMER.CREATE.NOPE", {"stream_name": "NOPE", "config": {}}),
    ]
    for subject, body in bad_consumers:
        assert_served(await both.api(subject, body), M.ConsumerCreateResponse)
    assert_served(await both.api("CONSUMER.INFO.ORDERS.-pull"), M.ConsumerInfoResponse)
    assert_served(await both.api("CONSUMER.INFO.ORDERS.-push"), M.ConsumerInfoResponse)
    assert_served(await both.api("CONSUMER.INFO.ORDERS.nope"), M.ConsumerInfoResponse)
    consumer_pages: list[Body] = [None, {"offset": 1}, b"{bad"]
    for body in consumer_pages:
        assert_served(await both.api("CONSUMER.NAMES.ORDERS", body), M.ConsumerNamesResponse)
        assert_served(await both.api("CONSUMER.LIST.ORDERS", body), M.ConsumerListResponse)
    assert_served(await both.api("CONSUMER.NAMES.MEM"), M.ConsumerNamesResponse)
    assert_served(await both.api("CONSUMER.LIST.NOPE"), M.ConsumerListResponse)
    assert_served(await both.api("CONSUMER.DELETE.ORDERS.-push"), M.ConsumerDeleteResponse)
    assert_served(await both.api("CONSUMER.DELETE.ORDERS.-push"), M.ConsumerDeleteResponse)

    purges: list[Body] = [{"filter": "orders.a"}, {"seq": 3, "keep": 1}, {"keep": 1}]
    for body in purges:
        assert_served(await both.api("STREAM.PURGE.ORDERS", body), M.StreamPurgeResponse)
    assert_served(await both.api("STREAM.PURGE.NOPE"), M.StreamPurgeResponse)
    assert_served(await both.api("STREAM.DELETE.WQ"), M.StreamDeleteResponse)
    assert_served(await both.api("STREAM.DELETE.WQ"), M.StreamDeleteResponse)
    assert_served(await both.api("STREAM.INFO.WQ"), M.StreamInfoResponse)
    assert_served(await both.api("INFO"), M.AccountInfoResponse)


def fetch_json(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=5) as resp:
        return json.loads(resp.read())


async def test_jsz_detail_is_in_the_reference_shape(tmp_path: Path) -> None:
    """/jsz's account, stream and consumer details (the typed ``jsz_models``) have the reference's
    fields in its order (the top level is the monitor's)."""
    ref = start_process(
        reference_cmd(tmp_path, "-m", "-1", "-js", "-sd", str(tmp_path / "ref")),
        tmp_path / "ref.log",
        want_http=True,
    )
    try:
        ours = start_process(
            [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-js", "-sd", str(tmp_path / "jp")],
            tmp_path / "jp.log",
            want_http=True,
        )
    except BaseException:
        ref.stop(signal.SIGKILL)
        raise
    try:
        docs = []
        for proc in (ref, ours):
            nc = await nats.connect(proc.url)
            for cfg in [
                {"name": "S", "subjects": ["s.>"]},
                {"name": "M", "subjects": ["m.*"], "storage": "memory"},
            ]:
                await nc.request(f"$JS.API.STREAM.CREATE.{cfg['name']}", json.dumps(cfg).encode(), timeout=5)
            await nc.request("s.a", b"x", timeout=5)
            await nc.request("$JS.API.STREAM.MSG.DELETE.S", b'{"seq":1}', timeout=5)
            await nc.request("s.b", b"y", timeout=5)
            durable = {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}}
            await nc.request("$JS.API.CONSUMER.DURABLE.CREATE.S.D", json.dumps(durable).encode(), timeout=5)
            await nc.close()
            base = f"http://127.0.0.1:{proc.http_port}"
            docs.append(
                [
                    await asyncio.to_thread(fetch_json, base, "/jsz?" + query)
                    for query in ("accounts=1", "streams=1", "consumers=1&config=1", "acc=$G&consumers=1")
                ]
            )
    finally:
        ours.stop(signal.SIGKILL)
        ref.stop(signal.SIGKILL)
    for ref_doc, our_doc in zip(docs[0], docs[1], strict=True):
        for doc in (ref_doc, our_doc):  # nats-server lists streams in no particular order
            for account in doc["account_details"]:
                account.get("stream_detail", []).sort(key=lambda d: d["name"])
        assert_same_shape(our_doc["account_details"], ref_doc["account_details"], "$.account_details")


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
    {"name": "D9", "subjects": ["d9"], "sealed": False, "deny_purge": True},
    # placement on an unclustered server: refused (tests/jetstream/test_accepted_fields.py);
    # mirrors and sources: compared with 2.15.1 in tests/differential/test_mirrors_sources_reference.py
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
        ours = check_stream_create(served_stream_config(cfg))
        assert without_newer(json.loads(encode(ours)), ref["config"]) == ref["config"], cfg


async def test_consumer_defaults_match(nc: Client) -> None:
    stream = {"name": "D2", "subjects": ["d2.a", "d2.b.*"]}
    raw = await api(nc, "STREAM.CREATE.D2", stream)
    ref_stream = created_config(raw)
    assert ref_stream == check_stream_config(StreamConfig(name="D2", subjects=["d2.a", "d2.b.*"]))
    for name, cfg in CONSUMER_INPUTS:
        subject = "CONSUMER.CREATE.D2" if name == "E" else f"CONSUMER.DURABLE.CREATE.D2.{name}"
        ref = json.loads(await api(nc, subject, {"stream_name": "D2", "config": cfg}))
        assert "error" not in ref, (cfg, ref)
        ours = json.loads(encode(check_consumer_config(ref_stream, served_consumer_config(cfg))))
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
    # (a republish source outside the subjects: refused by 2.9.10, taken by 2.15 and jetpy; see
    # tests/differential/test_stream_features_reference.py)
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
        check_stream_create(served_stream_config(body))
    except ApiError as err:
        return err.err_code
    return None


def our_consumer_error(
    stream: StreamConfig, body: dict[str, Any], others: list[ConsumerConfig]
) -> int | None:
    try:
        check_consumer_config(stream, served_consumer_config(body), others=others)
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
    stream = created_config(await api(nc, "STREAM.CREATE.K", stream_body))
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
        wq = created_config(
            await api(
                nc,
                f"STREAM.CREATE.{name}",
                {"name": name, "subjects": [f"wq{i}.>"], "retention": "workqueue"},
            )
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
                M.ConsumerCreateResponse,
            )
            assert created.config is not None, created.error
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
