"""The monitoring HTTP server: every endpoint's fields and query parameters against a live server.

Each test runs an embedded jetpy server with monitoring on an ephemeral port and real nats-py
clients; HTTP goes over raw asyncio connections so that status lines, headers and malformed
requests are under the test's control.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import nats
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.meters import FSYNC_BUCKETS, Histogram
from jetpy.server.app import Server
from jetpy.server.monitor import MAX_HEAD_BYTES, HttpError, parse_request_head
from jetpy.server.monitor_format import go_duration, go_time, uptime
from jetpy.server.options import ServerOptions, User

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")
UPTIME_RE = re.compile(r"^(\d+y)?(\d+d)?(\d+h)?(\d+m)?\d+s$")
IO_TIMEOUT = 5.0


# -- HTTP over raw connections ---------------------------------------------------------------------


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def parse_responses(data: bytes) -> list[HttpResponse]:
    """Split a byte stream of HTTP/1.x responses (each with a Content-Length) into responses."""
    out: list[HttpResponse] = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"truncated response: {data[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        n = int(headers.get("content-length", len(rest)))
        out.append(HttpResponse(status, headers, rest[:n]))
        data = rest[n:]
    return out


async def exchange(port: int, data: bytes, half_close: bool = True) -> bytes:
    """Send raw bytes, then read everything the server sends until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        if half_close:
            writer.write_eof()
        return await asyncio.wait_for(reader.read(), IO_TIMEOUT)
    finally:
        writer.close()


async def get(srv: Server, path: str, method: str = "GET") -> HttpResponse:
    req = f"{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode()
    (resp,) = parse_responses(await exchange(srv.http_port, req))
    return resp


async def get_json(srv: Server, path: str) -> Any:
    resp = await get(srv, path)
    assert resp.status == 200, (path, resp.status, resp.body)
    assert resp.headers["content-type"] == "application/json"
    assert resp.headers["access-control-allow-origin"] == "*"
    return resp.json()


# -- fixtures ---------------------------------------------------------------------------------------


def options(**kw: Any) -> ServerOptions:
    return ServerOptions(host="127.0.0.1", port=0, http_port=-1, **kw)


@pytest.fixture
async def srv() -> AsyncIterator[Server]:
    async with Server(options()) as s:
        yield s


async def connect(srv: Server, name: str, **kw: Any) -> Any:
    return await nats.connect(srv.client_url, name=name, allow_reconnect=False, **kw)


async def raw_client(srv: Server, data: bytes) -> None:
    """A raw socket that says ``data`` and waits until the server hangs up."""
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    await reader.readline()  # INFO
    writer.write(data)
    await writer.drain()
    try:
        await asyncio.wait_for(reader.read(), IO_TIMEOUT)
    finally:
        writer.close()


async def wait_until(pred: Any, within: float = IO_TIMEOUT) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not pred():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


# -- formats ----------------------------------------------------------------------------------------


def test_go_formats() -> None:
    assert go_duration(0) == "0s"
    assert go_duration(750) == "750ns"
    assert go_duration(633_000) == "633µs"
    assert go_duration(1_500) == "1.5µs"
    assert go_duration(1_500_000) == "1.5ms"
    assert go_duration(2_000_000_000) == "2s"
    assert go_duration(123_500_000_000) == "2m3.5s"
    assert go_duration(3_600_000_000_000) == "1h0m0s"
    assert uptime(0.9) == "0s"
    assert uptime(62) == "1m2s"
    assert uptime(90061) == "1d1h1m1s"
    assert uptime(366 * 86400) == "1y1d0h0m0s"
    assert go_time(0.0) == "1970-01-01T00:00:00Z"
    assert go_time(1.25) == "1970-01-01T00:00:01.25Z"
    assert go_time(1.9999999) == "1970-01-01T00:00:02Z"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_request_parser_raises_only_http_error(data: bytes) -> None:
    try:
        parse_request_head(data)
    except HttpError:
        pass


def test_request_parser_reads_query_and_keep_alive() -> None:
    req = parse_request_head(b"GET /connz?sort=msgs_to&subs=detail&sort=cid HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (req.method, req.path, req.keep_alive) == ("GET", "/connz", True)
    assert req.query == {"sort": "msgs_to", "subs": "detail"}
    assert not parse_request_head(b"GET / HTTP/1.0\r\n\r\n").keep_alive
    assert not parse_request_head(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").keep_alive


# -- startup and index --------------------------------------------------------------------------------


async def test_logs_bound_port_and_serves_index(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jetpy.server")
    async with Server(options()) as srv:
        m = re.search(r"Starting http monitor on 127\.0\.0\.1:(\d+)", caplog.text)
        assert m is not None and int(m.group(1)) == srv.http_port > 0
        resp = await get(srv, "/")
        assert resp.status == 200
        assert resp.headers["content-type"].startswith("text/html")
        for path in ("varz", "connz", "subsz", "jsz", "healthz", "accountz", "routez", "leafz", "gatewayz"):
            assert f"href=./{path}>".encode() in resp.body


# -- /varz --------------------------------------------------------------------------------------------


async def test_varz_fields_and_counters_move_with_traffic(srv: Server) -> None:
    v0 = await get_json(srv, "/varz")
    assert v0["server_id"] == srv.server_id and v0["server_name"] == srv.server_name
    assert (v0["host"], v0["port"]) == ("127.0.0.1", srv.port)
    assert (v0["http_host"], v0["http_port"]) == ("127.0.0.1", srv.http_port)
    assert v0["ping_interval"] == 120_000_000_000 and v0["write_deadline"] == 10_000_000_000
    assert (v0["ping_max"], v0["auth_timeout"], v0["max_control_line"]) == (2, 2, 4096)
    assert (v0["max_payload"], v0["max_pending"], v0["max_connections"]) == (1048576, 67108864, 65536)
    assert TIME_RE.match(v0["start"]) and TIME_RE.match(v0["now"]) and TIME_RE.match(v0["config_load_time"])
    assert UPTIME_RE.match(v0["uptime"])
    assert v0["mem"] > 1_000_000 and v0["cores"] >= 1 and v0["gomaxprocs"] >= 1
    assert isinstance(v0["cpu"], int | float) and v0["cpu"] >= 0
    assert v0["jetstream"] == {} and v0["cluster"] == {} and v0["routes"] == 0 and v0["leafnodes"] == 0
    # every account's subscriptions, the system account's request handlers included (nats-server's count)
    system = srv.events.subscription_count
    assert system > 0 and v0["system_account"] == "$SYS"
    assert (v0["connections"], v0["total_connections"], v0["in_msgs"], v0["subscriptions"]) == (
        0,
        0,
        0,
        system,
    )
    assert v0["http_req_stats"] == {"/varz": 1}
    assert v0["tls_timeout"] == 2 and "tls_required" not in v0 and "auth_required" not in v0

    sub_nc, pub_nc = await connect(srv, "sub"), await connect(srv, "pub")
    got: list[bytes] = []

    async def on_msg(msg: Any) -> None:
        got.append(msg.data)

    await sub_nc.subscribe("foo.*", cb=on_msg)
    await sub_nc.flush()
    for _ in range(3):
        await pub_nc.publish("foo.bar", b"hello")
    await pub_nc.flush()
    await wait_until(lambda: len(got) == 3)
    await get(srv, "/connz")
    v1 = await get_json(srv, "/varz")
    assert (v1["connections"], v1["total_connections"], v1["subscriptions"]) == (2, 2, system + 1)
    assert (v1["in_msgs"], v1["out_msgs"], v1["in_bytes"], v1["out_bytes"]) == (3, 3, 15, 15)
    assert v1["http_req_stats"] == {"/connz": 1, "/varz": 2}
    await sub_nc.close()
    await pub_nc.close()
    await wait_until(lambda: not srv.connections)
    v2 = await get_json(srv, "/varz")
    assert (v2["connections"], v2["total_connections"], v2["in_msgs"], v2["subscriptions"]) == (
        0,
        2,
        3,
        system,
    )


# -- /connz -------------------------------------------------------------------------------------------


async def test_connz_fields_sorting_paging_and_subscriptions(srv: Server) -> None:
    a, b, c = await connect(srv, "alpha"), await connect(srv, "beta"), await connect(srv, "gamma")
    got: list[bytes] = []

    async def on_msg(msg: Any) -> None:
        got.append(msg.data)

    await b.subscribe("foo.*", cb=on_msg)
    await b.subscribe("foo.bar", queue="q1", cb=on_msg)
    await b.subscribe("bar")
    await b.flush()
    for _ in range(4):
        await a.publish("foo.bar", b"0123456789")
    await a.flush()
    await wait_until(lambda: len(got) == 8)

    cz = await get_json(srv, "/connz")
    assert cz["server_id"] == srv.server_id and TIME_RE.match(cz["now"])
    assert (cz["num_connections"], cz["total"], cz["offset"], cz["limit"]) == (3, 3, 0, 1024)
    conns = cz["connections"]
    assert [x["name"] for x in conns] == ["alpha", "beta", "gamma"]
    ca, cb = conns[0], conns[1]
    assert ca["cid"] < cb["cid"] < conns[2]["cid"]
    assert (ca["kind"], ca["type"], ca["ip"], ca["lang"]) == ("Client", "nats", "127.0.0.1", "python3")
    assert ca["port"] > 0 and ca["version"]
    assert (ca["in_msgs"], ca["in_bytes"], ca["out_msgs"], ca["subscriptions"]) == (4, 40, 0, 0)
    assert (cb["in_msgs"], cb["out_msgs"], cb["out_bytes"], cb["subscriptions"]) == (0, 8, 80, 3)
    for x in conns:
        assert TIME_RE.match(x["start"]) and TIME_RE.match(x["last_activity"])
        assert UPTIME_RE.match(x["uptime"]) and UPTIME_RE.match(x["idle"])
        assert isinstance(x["rtt"], str) and x["pending_bytes"] >= 0
        assert "stop" not in x and "reason" not in x and "subscriptions_list" not in x
        assert "authorized_user" not in x

    async def names(query: str) -> list[str]:
        return [x["name"] for x in (await get_json(srv, "/connz?" + query))["connections"]]

    assert (await names("sort=msgs_from"))[0] == "alpha"
    assert (await names("sort=bytes_from"))[0] == "alpha"
    assert (await names("sort=msgs_to"))[0] == "beta"
    assert (await names("sort=bytes_to"))[0] == "beta"
    assert (await names("sort=subs"))[0] == "beta"
    assert await names("sort=start") == ["alpha", "beta", "gamma"]
    assert await names("sort=uptime") == ["gamma", "beta", "alpha"]  # youngest first, as nats-server
    for opt in ("pending", "last", "idle", "rtt", "cid"):
        assert sorted(await names("sort=" + opt)) == ["alpha", "beta", "gamma"]

    page = await get_json(srv, "/connz?offset=1&limit=1")
    assert (page["num_connections"], page["total"], page["offset"], page["limit"]) == (1, 3, 1, 1)
    assert page["connections"][0]["name"] == "beta"
    assert (await get_json(srv, "/connz?offset=10"))["connections"] == []
    assert (await get_json(srv, "/connz?limit=-5"))["limit"] == 1024

    one = await get_json(srv, f"/connz?cid={cb['cid']}")
    assert (one["num_connections"], one["limit"], one["connections"][0]["name"]) == (1, 1, "beta")
    assert (await get_json(srv, "/connz?cid=9999"))["connections"] == []

    listed = (await get_json(srv, f"/connz?subs=1&cid={cb['cid']}"))["connections"][0]
    assert sorted(listed["subscriptions_list"]) == ["bar", "foo.*", "foo.bar"]
    assert "subscriptions_list_detail" not in listed
    detailed = (await get_json(srv, f"/connz?subs=detail&cid={cb['cid']}"))["connections"][0]
    by_subject = {d["subject"]: d for d in detailed["subscriptions_list_detail"]}
    assert by_subject["foo.bar"]["qgroup"] == "q1" and "qgroup" not in by_subject["foo.*"]
    assert (
        by_subject["foo.*"]["msgs"] == 4
        and by_subject["foo.bar"]["msgs"] == 4
        and by_subject["bar"]["msgs"] == 0
    )
    assert {d["cid"] for d in by_subject.values()} == {cb["cid"]}
    assert all(isinstance(d["sid"], str) and "account" not in d for d in by_subject.values())

    for query, text in (
        ("sort=bogus", "invalid sorting option: bogus"),
        ("sort=stop", "sort by stop only valid on closed connections"),
        ("sort=reason&state=all", "sort by reason only valid on closed connections"),
        ("state=bogus", "Error decoding state for bogus"),
        ("limit=abc", "Error decoding int for 'limit'"),
        ("cid=-1", "Error decoding uint64 for 'cid'"),
        ("subs=maybe", "Error decoding boolean for 'subs'"),
        ("auth=2", "Error decoding boolean for 'auth'"),
    ):
        resp = await get(srv, "/connz?" + query)
        assert resp.status == 400 and resp.body.decode().startswith(text), (query, resp.body)
    for nc in (a, b, c):
        await nc.close()


async def test_connz_closed_connections_keep_their_reasons(srv: Server) -> None:
    nc = await connect(srv, "leaver")
    await nc.subscribe("x")
    await nc.flush()
    await nc.close()
    await raw_client(srv, b"CONNECT {}\r\nGARBAGE\r\n")
    stayer = await connect(srv, "stayer")
    await wait_until(lambda: len(srv.closed_connections) == 2)

    closed = await get_json(srv, "/connz?state=closed")
    assert (closed["num_connections"], closed["total"]) == (2, 2)
    by_reason = {x["reason"]: x for x in closed["connections"]}
    assert set(by_reason) == {"Client Closed", "Protocol Violation"}
    leaver = by_reason["Client Closed"]
    assert leaver["name"] == "leaver" and TIME_RE.match(leaver["stop"])
    assert leaver["stop"] >= leaver["start"] and leaver["pending_bytes"] == 0
    assert "name" not in by_reason["Protocol Violation"]

    reasons = [x["reason"] for x in (await get_json(srv, "/connz?state=closed&sort=reason"))["connections"]]
    assert reasons == ["Client Closed", "Protocol Violation"]
    stops = [x["stop"] for x in (await get_json(srv, "/connz?state=closed&sort=stop"))["connections"]]
    assert stops == sorted(stops, reverse=True)
    both = await get_json(srv, "/connz?state=all")
    assert both["total"] == 3
    assert [x.get("reason") for x in both["connections"]].count(None) == 1
    open_only = await get_json(srv, "/connz?state=open")
    assert [x["name"] for x in open_only["connections"]] == ["stayer"]
    by_cid = await get_json(srv, f"/connz?state=closed&cid={leaver['cid']}")
    assert [x["name"] for x in by_cid["connections"]] == ["leaver"]
    await stayer.close()


async def test_connz_auth_shows_and_filters_users() -> None:
    users = [User("ann", "pw1"), User("bob", "pw2")]
    async with Server(options(users=users)) as srv:
        ann = await nats.connect(srv.client_url, user="ann", password="pw1", name="ann-app")
        bob = await nats.connect(srv.client_url, user="bob", password="pw2", name="bob-app")
        await raw_client(srv, b'CONNECT {"user":"ann","pass":"wrong"}\r\n')
        await wait_until(lambda: len(srv.closed_connections) == 1)
        plain = await get_json(srv, "/connz")
        assert all("authorized_user" not in x for x in plain["connections"])
        authed = await get_json(srv, "/connz?auth=1")
        assert [x["authorized_user"] for x in authed["connections"]] == ["ann", "bob"]
        only_bob = await get_json(srv, "/connz?auth=true&user=bob")
        assert [x["name"] for x in only_bob["connections"]] == ["bob-app"]
        failed = await get_json(srv, "/connz?state=closed")
        assert [x["reason"] for x in failed["connections"]] == ["Authentication Failure"]
        assert (await get_json(srv, "/varz"))["auth_required"] is True
        assert (await get_json(srv, "/connz?acc=OTHER&auth=1"))["connections"] == []
        await ann.close()
        await bob.close()


# -- /subsz -------------------------------------------------------------------------------------------


async def test_subsz_stats_list_filter_and_paging(srv: Server) -> None:
    s0 = await get_json(srv, "/subsz?acc=$G")
    assert list(s0) == [
        "num_subscriptions",
        "num_cache",
        "num_inserts",
        "num_removes",
        "num_matches",
        "cache_hit_rate",
        "max_fanout",
        "avg_fanout",
    ]
    assert (s0["num_subscriptions"], s0["num_inserts"], s0["num_matches"]) == (0, 0, 0)

    nc = await connect(srv, "subs")
    await nc.subscribe("foo.*")
    await nc.subscribe("foo.bar", queue="workers")
    gone = await nc.subscribe("bar.baz")
    await nc.subscribe("other")
    await nc.flush()
    await gone.unsubscribe()
    for _ in range(3):
        await nc.publish("foo.bar", b"x")
    await nc.flush()
    await wait_until(lambda: srv.broker.subs.matches >= 3)

    s1 = await get_json(srv, "/subsz?acc=$G")
    assert (s1["num_subscriptions"], s1["num_inserts"], s1["num_removes"]) == (3, 4, 1)
    assert s1["num_matches"] == 3 and s1["num_cache"] == 1
    assert s1["cache_hit_rate"] == pytest.approx(2 / 3)
    assert (s1["max_fanout"], s1["avg_fanout"]) == (2, 2)  # one plain subscriber + one queue group

    every = await get_json(srv, "/subsz")  # every account: the system account's handlers too
    assert every["num_subscriptions"] == 3 + srv.events.subscription_count
    assert {d["account"] for d in (await get_json(srv, "/subsz?subs=1"))["subscriptions_list"]} == {
        "$G",
        "$SYS",
    }

    full = await get_json(srv, "/subsz?subs=1&acc=$G")
    assert full["server_id"] == srv.server_id and TIME_RE.match(full["now"])
    assert (full["total"], full["offset"], full["limit"]) == (3, 0, 1024)
    assert full["num_subscriptions"] == 3
    subjects = {d["subject"]: d for d in full["subscriptions_list"]}
    assert set(subjects) == {"foo.*", "foo.bar", "other"}
    assert subjects["foo.bar"]["qgroup"] == "workers" and subjects["foo.bar"]["account"] == "$G"
    assert subjects["foo.*"]["msgs"] == 3 and isinstance(subjects["other"]["cid"], int)

    matching = await get_json(srv, "/subsz?subs=1&test=foo.bar")  # (no system subject matches)
    assert sorted(d["subject"] for d in matching["subscriptions_list"]) == ["foo.*", "foo.bar"]
    assert matching["total"] == 2
    none = await get_json(srv, "/subsz?subs=1&test=nothing.here")
    assert "subscriptions_list" not in none and "server_id" not in none  # bare stats, as nats-server
    paged = await get_json(srv, "/subsz?subs=1&acc=$G&offset=1&limit=1")
    assert (paged["total"], paged["offset"], paged["limit"], len(paged["subscriptions_list"])) == (1, 1, 1, 1)
    assert "subscriptions_list" not in await get_json(srv, "/subsz?subs=1&acc=$G&offset=50")
    assert await get_json(srv, "/subscriptionsz") == await get_json(srv, "/subsz")

    bad = await get(srv, "/subsz?test=foo.*")
    assert bad.status == 400 and b"invalid test subject, must be valid publish subject: foo.*" in bad.body
    assert (await get(srv, "/subsz?subs=yes")).status == 400
    stats = (await get_json(srv, "/varz"))["http_req_stats"]
    assert stats["/subsz"] == 13 and "/subscriptionsz" not in stats
    await nc.close()


# -- /healthz, /jsz -----------------------------------------------------------------------------------


async def test_healthz(srv: Server) -> None:
    for path in ("/healthz", "/healthz?js-enabled-only=true", "/healthz?js-server-only=1"):
        resp = await get(srv, path)
        assert (resp.status, resp.body) == (200, b'{"status":"ok"}')
        assert resp.headers["content-type"] == "application/json"
    assert (await get(srv, "/healthz?js-enabled-only=nope")).status == 400
    srv.options.jetstream = True  # configured, but no JetStream is running
    resp = await get(srv, "/healthz")
    assert resp.status == 503
    assert resp.json() == {"status": "unavailable", "error": "JetStream not enabled (10076)"}
    jsonp = await get(srv, "/healthz?callback=check")
    assert jsonp.status == 503 and jsonp.body.startswith(b"check({") and jsonp.body.endswith(b"})")
    srv.options.jetstream = False


async def test_jsz_disabled(srv: Server) -> None:
    jsz = await get_json(srv, "/jsz")
    assert jsz["server_id"] == srv.server_id and jsz["disabled"] is True
    assert jsz["config"] == {"max_memory": 0, "max_storage": 0}
    assert jsz["api"] == {"total": 0, "errors": 0}
    for k in ("memory", "storage", "reserved_memory", "reserved_storage", "accounts", "ha_assets"):
        assert jsz[k] == 0
    assert (jsz["streams"], jsz["consumers"], jsz["messages"], jsz["bytes"]) == (0, 0, 0, 0)
    assert "account_details" not in await get_json(srv, "/jsz?accounts=1&streams=1")
    assert (await get(srv, "/jsz?streams=perhaps")).status == 400


class FakeJetStream:
    """Stands in for the JetStream engine's report; records how it was asked."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def jsz_stats(
        self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str
    ) -> Mapping[str, Any]:
        self.calls.append(
            {
                "accounts": accounts,
                "streams": streams,
                "consumers": consumers,
                "config": config,
                "account": account,
            }
        )
        doc: dict[str, Any] = {
            "config": {"max_memory": 1000, "max_storage": 2000, "store_dir": "/data/jetstream"},
            "memory": 10,
            "storage": 34,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "accounts": 1,
            "ha_assets": 0,
            "api": {"total": 7, "errors": 1},
            "streams": 2,
            "consumers": 3,
            "messages": 5,
            "bytes": 44,
        }
        if accounts or account:
            detail: dict[str, Any] = {"name": "$G", "id": "$G", "memory": 10, "storage": 34}
            if streams:
                detail["stream_detail"] = [{"name": "S", "state": {"messages": 5}}]
            doc["account_details"] = [detail]
        return doc

    @property
    def fsync_seconds(self) -> Histogram:
        return Histogram(FSYNC_BUCKETS)

    async def stop(self) -> None:
        pass


async def test_jsz_and_varz_report_what_jetstream_reports(srv: Server) -> None:
    fake = FakeJetStream()
    srv.jetstream = fake
    srv.options.jetstream = True
    try:
        jsz = await get_json(srv, "/jsz")
        assert "disabled" not in jsz and "account_details" not in jsz
        assert list(jsz)[:3] == ["server_id", "now", "config"]
        assert jsz["config"]["store_dir"] == "/data/jetstream"
        assert (jsz["streams"], jsz["consumers"], jsz["messages"], jsz["bytes"]) == (2, 3, 5, 44)
        assert jsz["api"] == {"total": 7, "errors": 1}
        assert fake.calls[-1] == {
            "accounts": False,
            "streams": False,
            "consumers": False,
            "config": False,
            "account": "",
        }

        deep = await get_json(srv, "/jsz?consumers=1&config=true")
        assert fake.calls[-1] == {
            "accounts": True,
            "streams": True,
            "consumers": True,
            "config": True,
            "account": "",
        }
        assert deep["account_details"][0]["stream_detail"][0]["name"] == "S"
        one = await get_json(srv, "/jsz?acc=$G")
        assert fake.calls[-1]["account"] == "$G" and one["account_details"][0]["id"] == "$G"
        assert "account_details" not in await get_json(srv, "/jsz?accounts=1&offset=5")

        varz_js = (await get_json(srv, "/varz"))["jetstream"]
        assert varz_js["config"] == {"max_memory": 1000, "max_storage": 2000, "store_dir": "/data/jetstream"}
        assert varz_js["stats"] == {
            "memory": 10,
            "storage": 34,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "accounts": 1,
            "ha_assets": 0,
            "api": {"total": 7, "errors": 1},
        }
        assert (await get(srv, "/healthz")).status == 200
    finally:
        srv.jetstream = None
        srv.options.jetstream = False


# -- accounts and the cluster endpoints ---------------------------------------------------------------


async def test_accounts_routes_gateways_leafnodes(srv: Server) -> None:
    nc = await connect(srv, "acct")
    await nc.subscribe("a")
    await nc.publish("a", b"abc")
    await nc.flush()
    accz = await get_json(srv, "/accountz")
    assert accz["accounts"] == ["$G", "$SYS"] and accz["server_id"] == srv.server_id
    assert accz["system_account"] == "$SYS"  # nats-server's, with no users by default
    detail = (await get_json(srv, "/accountz?acc=$G"))["account_detail"]
    assert (detail["account_name"], detail["client_connections"], detail["subscriptions"]) == ("$G", 1, 1)
    assert detail["jetstream_enabled"] is False and detail["sublist_stats"]["num_subscriptions"] == 1
    assert detail["name_tag"] == "$G" and "exports" not in detail and "imports" not in detail
    missing = await get(srv, "/accountz?acc=NOPE")
    assert (missing.status, missing.body) == (400, b"Account NOPE does not exist")

    statz = (await get_json(srv, "/accstatz"))["account_statz"]
    assert [a["acc"] for a in statz] == ["$G"] and statz[0]["name"] == "$G" and statz[0]["conns"] == 1
    assert statz[0]["received"] == {"msgs": 1, "bytes": 3} and statz[0]["sent"] == {"msgs": 1, "bytes": 3}
    assert statz[0]["num_subscriptions"] == 1
    every = (await get_json(srv, "/accstatz?unused=1"))["account_statz"]
    assert [a["acc"] for a in every] == ["$G", "$SYS"] and every[1]["conns"] == 0

    routez = await get_json(srv, "/routez?subs=detail")
    assert (routez["num_routes"], routez["routes"], routez["server_id"]) == (0, [], srv.server_id)
    gwz = await get_json(srv, "/gatewayz")
    assert (gwz["outbound_gateways"], gwz["inbound_gateways"]) == ({}, {})
    leafz = await get_json(srv, "/leafz")
    assert (leafz["leafnodes"], leafz["leafs"]) == (0, None)
    await nc.close()
    await wait_until(lambda: not srv.connections)
    assert (await get_json(srv, "/accstatz"))["account_statz"] == []
    assert len((await get_json(srv, "/accstatz?unused=1"))["account_statz"]) == 2


# -- HTTP robustness ----------------------------------------------------------------------------------


async def test_bad_requests_get_errors_and_the_monitor_keeps_serving(srv: Server) -> None:
    port = srv.http_port
    cases: list[tuple[bytes, int]] = [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /varz HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"GET /varz HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET varz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /varz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400),
        (b"GET /varz HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", 400),
        (b"GET /varz HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n", 413),
        (b"GET /varz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
        (b"GET /varz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEAD_BYTES + 1000) + b"\r\n\r\n", 431),
        (b"GET /varz HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", 431),
        (b"POST /varz HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody", 405),
        (b"DELETE /connz HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        (b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404),
        (b"GET /varz/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404),
        (b"GET /varz?callback=<script> HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400),
        (b"GET /varz HTTP/1.1\r\nHo", 400),  # cut off mid-request
    ]
    for raw, status in cases:
        responses = parse_responses(await exchange(port, raw))
        assert [r.status for r in responses] == [status], raw[:80]
    # a client still sending when refused gets the answer, not a connection reset
    huge = b"GET /varz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    assert [r.status for r in parse_responses(await exchange(port, huge, half_close=False))] == [431]
    post = parse_responses(await exchange(port, cases[10][0]))[0]
    assert post.headers["allow"] == "GET, HEAD" and post.headers["connection"] == "close"
    assert (await exchange(port, b"")) == b""  # connect and hang up
    assert (await get(srv, "/healthz")).status == 200
    # the bad-callback request reached /varz; /varz/ did not
    assert (await get_json(srv, "/varz"))["http_req_stats"]["/varz"] == 2


async def test_keep_alive_pipelining_head_and_http10(srv: Server) -> None:
    two = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /subsz?callback=cb HTTP/1.1\r\nHost: x\r\n\r\n"
    responses = parse_responses(await exchange(srv.http_port, two))
    assert [r.status for r in responses] == [200, 200]
    assert responses[0].body == b'{"status":"ok"}'
    assert responses[1].headers["content-type"] == "application/javascript"
    assert responses[1].body.startswith(b"cb({") and responses[1].body.endswith(b"})")

    head = parse_responses(
        await exchange(srv.http_port, b"HEAD /varz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    )
    assert head[0].status == 200 and head[0].body == b"" and int(head[0].headers["content-length"]) > 100

    # HTTP/1.0 closes after one answer even though the client keeps its side open
    data = await exchange(srv.http_port, b"GET /healthz HTTP/1.0\r\n\r\n", half_close=False)
    assert data.startswith(b"HTTP/1.0 200 OK\r\n") and b"Connection: close" in data

    # absolute-form targets and percent-encoded paths
    resp = parse_responses(
        await exchange(srv.http_port, b"GET http://x/%68ealthz HTTP/1.1\r\nHost: x\r\n\r\n")
    )
    assert resp[0].status == 200


async def test_stop_hangs_up_idle_keep_alive_connections(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    srv = Server(options())
    await srv.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.http_port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    first = await asyncio.wait_for(reader.readuntil(b'{"status":"ok"}'), IO_TIMEOUT)
    assert first.startswith(b"HTTP/1.1 200 OK")
    await asyncio.wait_for(srv.shutdown(), IO_TIMEOUT)
    assert await asyncio.wait_for(reader.read(), IO_TIMEOUT) == b""
    writer.close()
    await asyncio.sleep(0.01)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
