"""Accounts on one jetpy server, through nats-py: each account a subject space of its own, the
global account, no_auth_user in an account, stream and service imports (prefix, to, private
exports, response types and thresholds, the header a request carries across), subject mappings
(plain, wildcard, weighted), connect/disconnect events per account in the system account, and
the account monitoring endpoints."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NATS

from conftest import wait_for
from jetpy.server.app import Server
from jetpy.server.conf_format import parse_config_text
from jetpy.server.config import apply_config

pytestmark = pytest.mark.timeout(60)

CONF = """
authorization { users: [{user: g, password: g}] }
accounts {
  A: {
    users: [
      {user: a, password: a}
      # may publish to nothing but its service's answers (allow_responses)
      {user: responder, password: r, permissions: {publish: "nothing", subscribe: "svc.>", allow_responses: true}}
    ]
    exports: [
      {stream: "pub.>"}
      {stream: "priv.>", accounts: [B]}
      {service: "svc.>"}
      {service: "multi", response_type: stream, response_threshold: "300ms"}
    ]
    mappings: {
      "orders": "orders.new"
      "m.*.*": "swapped.$2.$1"
      "split": [{destination: "left", weight: 50%}, {destination: "right", weight: 50%}]
      "some": [{destination: "taken", weight: 30%}]
    }
  }
  B: {
    users: [{user: b, password: b}]
    imports: [
      {stream: {account: A, subject: "pub.>"}, prefix: "fromA"}
      {stream: {account: A, subject: "priv.>"}}
      {stream: {account: A, subject: "pub.*.x"}, to: "renamed.$1"}
      {service: {account: A, subject: "svc.echo"}, to: "echo"}
      {service: {account: A, subject: "svc.>"}}
      {service: {account: A, subject: "multi"}}
    ]
  }
  C: { users: [{user: c, password: c}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
no_auth_user: c
"""


def options(text: str = CONF, **overrides: Any) -> Any:
    opts, _ = apply_config(parse_config_text(text))
    return dataclasses.replace(opts, host="127.0.0.1", port=0, **overrides)


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server(options(http_port=-1)) as s:
        yield s


async def login(srv: Server, user: str, password: str | None = None) -> NATS:
    creds = f"{user}:{password or user}@" if user else ""
    return await nats.connect(srv.client_url.replace("//", f"//{creds}"))


class Inbox:
    """What a subscription received: (subject, reply, data, headers)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str, bytes, dict[str, str] | None]] = []

    async def cb(self, m: Any) -> None:
        self.got.append((m.subject, m.reply, m.data, m.headers))


def get(srv: Server, path: str) -> Any:
    with urllib.request.urlopen(srv.monitor_url + path, timeout=5) as r:
        return json.loads(r.read())


async def test_each_account_is_a_subject_space_of_its_own(srv: Server) -> None:
    a, b, g, c = await login(srv, "a"), await login(srv, "b"), await login(srv, "g"), await login(srv, "")
    boxes = {name: Inbox() for name in "abgc"}
    for name, nc in zip("abgc", (a, b, g, c), strict=True):
        await nc.subscribe(">", cb=boxes[name].cb)
        await nc.flush()
    try:
        for name, nc in zip("abgc", (a, b, g, c), strict=True):
            await nc.publish("shared.subject", name.encode())
            await nc.flush()
        await asyncio.sleep(0.2)
        for name in "abgc":  # each sees its own account's message and nothing else
            assert [(s, d) for s, _r, d, _h in boxes[name].got] == [("shared.subject", name.encode())], name
        # the user without credentials is no_auth_user, in account C
        assert srv.accounts.get("C") is not None and srv.accounts.get("C").connections == 1  # type: ignore[union-attr]
    finally:
        for nc in (a, b, g, c):
            await nc.close()


async def test_stream_imports(srv: Server) -> None:
    a, b, c = await login(srv, "a"), await login(srv, "b"), await login(srv, "c")
    inbox, other = Inbox(), Inbox()
    try:
        await b.subscribe("fromA.>", cb=inbox.cb)
        await b.subscribe("priv.>", cb=inbox.cb)
        await b.subscribe("renamed.*", cb=inbox.cb)
        await c.subscribe(">", cb=other.cb)  # C imports nothing: sees nothing of A
        await b.flush()
        await c.flush()
        await a.publish("pub.1.x", b"one", reply="answer.here")
        await a.publish("priv.p", b"two")
        await a.publish("unexported", b"three")
        await a.flush()
        await wait_for(lambda: len(inbox.got) == 3)
        await asyncio.sleep(0.1)
        assert sorted((s, r, d) for s, r, d, _h in inbox.got) == [
            ("fromA.pub.1.x", "answer.here", b"one"),  # prefix; the reply as it was
            ("priv.p", "", b"two"),  # a private export B is allowed
            ("renamed.1", "answer.here", b"one"),  # the to transform with a wildcard
        ]
        assert other.got == []
        # interest follows the importer: the exporter's subscription goes with B's last one
        exporter = srv.accounts.get("A")
        assert exporter is not None and exporter.broker.has_interest(b"pub.z")
        await b.close()
        await wait_for(lambda: not exporter.broker.has_interest(b"pub.z"))
    finally:
        for nc in (a, b, c):
            if not nc.is_closed:
                await nc.close()


async def test_service_imports_requests_and_responses(srv: Server) -> None:
    a, responder, b = await login(srv, "a"), await login(srv, "responder", "r"), await login(srv, "b")
    seen = Inbox()
    try:
        # nobody serves it yet: no reply (nats-server 2.9's way; 2.15 answers 503)
        with pytest.raises(nats.errors.TimeoutError):
            await b.request("echo", b"", timeout=0.3)

        async def echo(m: Any) -> None:
            await seen.cb(m)
            await responder.publish(m.reply, b"echo:" + m.data)  # allowed as a response only
            await a.publish(m.reply, b"second answer, dropped")  # (a may publish anywhere)

        await responder.subscribe("svc.>", cb=echo)

        async def multi(m: Any) -> None:
            for i in range(3):
                await a.publish(m.reply, b"part %d" % i)

        await a.subscribe("multi", cb=multi)
        await a.flush()
        await responder.flush()

        # `to`: B asks on its own subject, A's responder sees the service's subject
        answer = await b.request("echo", b"hi", timeout=2)
        assert answer.data == b"echo:hi"
        subject, reply, _data, headers = seen.got[-1]
        assert subject == "svc.echo" and reply.startswith("_R_.")
        assert headers is not None
        info = json.loads(headers["Nats-Request-Info"])
        assert info["acc"] == "B" and info["rtt"] >= 0
        # a wildcard service, asked on its own subject
        assert (await b.request("svc.other", b"x", timeout=2)).data == b"echo:x"

        # singleton: the second answer never reaches the requester
        replies = Inbox()
        inbox = b.new_inbox()
        await b.subscribe(inbox, cb=replies.cb)
        await b.publish("echo", b"once", reply=inbox)
        await b.flush()
        await asyncio.sleep(0.3)
        assert [d for _s, _r, d, _h in replies.got] == [b"echo:once"]

        # stream: every part arrives, until the threshold passes without a response
        parts = Inbox()
        inbox2 = b.new_inbox()
        await b.subscribe(inbox2, cb=parts.cb)
        await b.publish("multi", b"go", reply=inbox2)
        await b.flush()
        await wait_for(lambda: len(parts.got) == 3)
        assert [d for _s, _r, d, _h in parts.got] == [b"part 0", b"part 1", b"part 2"]
        routes = srv.accounts.get("A").responses  # type: ignore[union-attr]
        assert routes is not None and routes.pending  # the way back is kept ...
        late = next(iter(routes.pending))
        await asyncio.sleep(0.5)
        await a.publish((routes.prefix + late).decode(), b"too late")  # ... not past the threshold
        await a.flush()
        await asyncio.sleep(0.2)
        assert len(parts.got) == 3
        # what B did not import is not there
        with pytest.raises(nats.errors.NoRespondersError):
            await b.request("multi.none", b"", timeout=1)
    finally:
        for nc in (a, responder, b):
            await nc.close()


async def test_mappings(srv: Server) -> None:
    a = await login(srv, "a")
    box = Inbox()
    try:
        await a.subscribe(">", cb=box.cb)
        await a.flush()
        await a.publish("orders", b"1")
        await a.publish("m.x.y", b"2")
        for _ in range(200):
            await a.publish("split", b"w")
            await a.publish("some", b"s")
        await a.flush()
        await wait_for(lambda: len(box.got) == 402)
        subjects = collections.Counter(s for s, _r, _d, _h in box.got)
        assert subjects["orders.new"] == 1 and subjects["swapped.y.x"] == 1
        assert subjects["orders"] == 0 and subjects["split"] == 0
        assert subjects["left"] + subjects["right"] == 200 and 60 < subjects["left"] < 140
        # 30% mapped, the rest keeps its subject
        assert subjects["taken"] + subjects["some"] == 200 and 25 < subjects["taken"] < 100
    finally:
        await a.close()


async def test_events_per_account_in_the_system_account(srv: Server) -> None:
    admin = await login(srv, "sys")
    events = Inbox()
    try:
        await admin.subscribe("$SYS.ACCOUNT.*.>", cb=events.cb)
        await admin.flush()
        b = await login(srv, "b")
        await b.close()
        await wait_for(lambda: len(events.got) == 2)
        (connect, _r, c_data, _h), (disconnect, _r2, d_data, _h2) = events.got
        assert (connect, disconnect) == ("$SYS.ACCOUNT.B.CONNECT", "$SYS.ACCOUNT.B.DISCONNECT")
        assert json.loads(c_data)["client"]["acc"] == "B" and json.loads(d_data)["client"]["user"] == "b"
    finally:
        await admin.close()


async def test_account_monitoring(srv: Server) -> None:
    a, b = await login(srv, "a"), await login(srv, "b")
    try:
        await b.subscribe("fromA.>")
        await b.flush()
        await a.publish("pub.x", b"hello")
        await a.flush()
        await asyncio.sleep(0.1)
        accz = await asyncio.to_thread(get, srv, "/accountz")
        assert accz["accounts"] == ["$G", "A", "B", "C", "SYS"] and accz["system_account"] == "SYS"
        da = (await asyncio.to_thread(get, srv, "/accountz?acc=A"))["account_detail"]
        assert da["client_connections"] == 1 and da["jetstream_enabled"] is False
        assert {"subject": "priv.>", "type": "stream", "approved_accounts": ["B"]} in da["exports"]
        assert {"subject": "multi", "type": "service", "response_type": "Streamed"} in da["exports"]
        assert da["mappings"]["split"] == [
            {"subject": "left", "weight": 50},
            {"subject": "right", "weight": 50},
        ]
        db = (await asyncio.to_thread(get, srv, "/accountz?acc=B"))["account_detail"]
        imp = next(i for i in db["imports"] if i["subject"] == "svc.echo")
        assert (imp["account"], imp["to"], imp["local_subject"], imp["type"]) == (
            "A",
            "echo",
            "echo",
            "service",
        )
        connz = await asyncio.to_thread(get, srv, "/connz?acc=B&auth=true")
        assert [c["account"] for c in connz["connections"]] == ["B"]
        assert (await asyncio.to_thread(get, srv, "/connz?acc=NOPE"))["connections"] == []
        statz = {s["acc"]: s for s in (await asyncio.to_thread(get, srv, "/accstatz"))["account_statz"]}
        assert set(statz) == {"A", "B"}
        assert statz["A"]["received"] == {"msgs": 1, "bytes": 5} and statz["B"]["sent"] == {
            "msgs": 1,
            "bytes": 5,
        }
        subsz = await asyncio.to_thread(get, srv, "/subsz?acc=B&subs=1")
        assert [d["subject"] for d in subsz["subscriptions_list"] if d["cid"]] == ["fromA.>"]
    finally:
        await a.close()
        await b.close()


async def test_a_user_whose_account_is_gone_is_refused_not_put_in_the_global_account(srv: Server) -> None:
    # a login names an account this server does not hold (e.g. dropped between the credentials
    # check and the account lookup): the connection is refused, never left in $G
    g = await login(srv, "g")
    box = Inbox()
    await g.subscribe(">", cb=box.cb)
    await g.flush()
    gone = srv.accounts.by_name.pop("A")
    try:
        # a raw connection (a failed nats.connect in this process upsets CPython 3.11's parser)
        host, port = srv.client_url.removeprefix("nats://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            await reader.readline()  # INFO
            writer.write(b'CONNECT {"user":"a","pass":"a","verbose":false}\r\nPING\r\n')
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(1024), 5)
        finally:
            writer.close()
        assert answer.startswith(b"-ERR 'Authorization Violation'"), answer
        assert srv.auth_failures >= 1
        assert box.got == []
    finally:
        srv.accounts.by_name["A"] = gone
        await g.close()
