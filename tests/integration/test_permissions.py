"""Permissions enforced on an embedded server with nats-py and raw sockets: publish and subscribe
allow/deny, queue entries, allow_responses with expiry, delivery filtering for wildcard
subscriptions, the counters, the reload of permissions for connected clients, and the two places
jetpy is deliberately stricter than nats-server (wildcard subscriptions beyond an allow entry,
queue denies beside a plain deny). The cases nats-server answers the same way are compared with
it in tests/differential/test_permissions_reference.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

import jetpy
from conftest import wait_for
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions, User
from jetpy.server.permissions import CACHE_SIZE, Permissions


def users(**perms: Any) -> list[User]:
    return [User(user=name, password=name, permissions=p) for name, p in perms.items()]


@asynccontextmanager
async def running(user_list: list[User]) -> AsyncIterator[Server]:
    async with jetpy.Server(ServerOptions(host="127.0.0.1", port=0, users=user_list)) as srv:
        yield srv


async def client(srv: Server, name: str, errors: list[str] | None = None) -> Client:
    async def on_error(e: Exception) -> None:
        if errors is not None:
            errors.append(str(e))

    return await nats.connect(
        srv.client_url, user=name, password=name, allow_reconnect=False, error_cb=on_error
    )


async def raw(srv: Server, user: str, data: bytes, within: float = 0.3) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    await reader.readline()
    writer.write(f'CONNECT {{"verbose":false,"user":"{user}","pass":"{user}"}}\r\n'.encode() + data)
    out = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), within)
            if not chunk:
                break
            out += chunk
    except TimeoutError:
        pass
    writer.close()
    return out


async def test_nats_py_sees_violations_and_stays_connected() -> None:
    perms = {"publish": {"allow": ["ok.>"]}, "subscribe": {"allow": ["ok.>"], "deny": ["ok.secret"]}}
    async with running(users(alice=perms, admin=None)) as srv:
        errors: list[str] = []
        nc = await client(srv, "alice", errors)
        await nc.publish("nope", b"x")
        await nc.subscribe("nope")
        await nc.subscribe("ok.secret")
        sub = await nc.subscribe("ok.fine")
        await nc.publish("ok.fine", b"hello")
        assert (await sub.next_msg(timeout=2)).data == b"hello"
        await wait_for(lambda: len(errors) == 3)
        assert 'permissions violation for publish to "nope"' in errors[0].lower()
        assert 'permissions violation for subscription to "nope"' in errors[1].lower()
        assert nc.is_connected
        assert srv.violations == {"publish": 1, "subscribe": 2}
        await nc.close()


async def test_wildcard_subscription_beyond_an_allow_entry_is_refused() -> None:
    # nats-server 2.9.10 and 2.15.1 accept "foo.>" under an allow of "foo.*", then deliver
    # "foo.a.b" to it; jetpy refuses the subscription
    async with running(users(s={"subscribe": {"allow": ["foo.*"]}})) as srv:
        out = await raw(srv, "s", b"SUB foo.> 1\r\nSUB foo.* 2\r\nSUB *.x 3\r\nPING\r\n")
        assert out.endswith(
            b"-ERR 'Permissions Violation for Subscription to \"foo.>\"'\r\n"
            b"-ERR 'Permissions Violation for Subscription to \"*.x\"'\r\nPONG\r\n"
        )


async def test_queue_deny_never_lifts_a_plain_deny() -> None:
    # nats-server before 2.12.7 let "foo q1" through a plain deny of "foo" when "foo q2" was
    # also denied
    perms = {"subscribe": {"deny": ["foo", "foo q2"]}}
    async with running(users(s=perms)) as srv:
        out = await raw(srv, "s", b"SUB foo q1 1\r\nSUB foo q2 2\r\nSUB bar q2 3\r\nPING\r\n")
        assert out.count(b"Permissions Violation for Subscription") == 2
        assert out.endswith(b"PONG\r\n")


async def test_deny_filters_wildcard_deliveries_and_queue_members() -> None:
    perms = {"subscribe": {"deny": ["secret.>"]}}
    async with running(users(a=perms, admin=None)) as srv:
        a, admin = await client(srv, "a"), await client(srv, "admin")
        wide = await a.subscribe(">")
        group = await a.subscribe("*.x", queue="workers")
        await a.flush()
        await admin.publish("secret.x", b"hidden")
        await admin.publish("open.x", b"seen")
        await admin.flush()
        got = [(await wide.next_msg(timeout=2)).subject for _ in range(1)]
        assert got == ["open.x"]
        assert (await group.next_msg(timeout=2)).data == b"seen"
        with pytest.raises(nats.errors.TimeoutError):
            await wide.next_msg(timeout=0.3)
        await a.close()
        await admin.close()


async def test_allow_responses_with_expiry() -> None:
    perms = {"publish": {"allow": ["req.>"]}, "responses": {"max": 1, "ttl": 0.5}}
    async with running(users(svc=perms, caller=None)) as srv:
        errors: list[str] = []
        svc, caller = await client(srv, "svc", errors), await client(srv, "caller")

        async def answer(msg: Msg) -> None:
            await msg.respond(b"first")
            await msg.respond(b"second")  # over max: refused

        await svc.subscribe("work", cb=answer)
        await svc.flush()
        assert (await caller.request("work", b"q", timeout=2)).data == b"first"
        await wait_for(lambda: len(errors) == 1)
        # a reply after the expiry is refused too
        late = await svc.subscribe("late")
        await svc.flush()
        inbox = caller.new_inbox()
        replies = await caller.subscribe(inbox)
        await caller.publish("late", b"q", reply=inbox)
        msg = await late.next_msg(timeout=2)
        await asyncio.sleep(0.6)
        await msg.respond(b"too late")
        await wait_for(lambda: len(errors) == 2)
        with pytest.raises(nats.errors.TimeoutError):
            await replies.next_msg(timeout=0.3)
        assert svc.is_connected
        await svc.close()
        await caller.close()


async def test_publish_decisions_are_cached_and_bounded() -> None:
    perms = Permissions.from_config({"publish": {"allow": ["a.*"], "deny": ["a.b"]}})
    assert perms.may_publish(b"a.c") and not perms.may_publish(b"a.b") and not perms.may_publish(b"x")
    for i in range(CACHE_SIZE * 2):
        perms.may_publish(b"a.%d" % i)
    assert len(perms._pub_cache) <= CACHE_SIZE


def test_whole_pattern_questions() -> None:
    perms = Permissions.from_config(
        {"publish": {"allow": ["orders.>"], "deny": ["orders.admin.>"]}, "subscribe": {"allow": ["orders.*"]}}
    )
    assert perms.may_publish_all("orders.eu.*")
    assert not perms.may_publish_all("orders.>")  # overlaps the deny
    assert not perms.may_publish_all(">")
    assert perms.may_subscribe_all("orders.eu") and perms.may_subscribe_all("orders.*")
    assert not perms.may_subscribe_all("orders.>")
    unrestricted = Permissions.from_config({})
    assert unrestricted.may_publish_all(">") and unrestricted.may_subscribe_all(">")


def test_allow_responses_alone_allows_only_replies() -> None:
    perms = Permissions.from_config({"responses": {"max": 1, "ttl": 60.0}})
    assert perms.checks_publish and not perms.may_publish(b"anything")
    empty = Permissions.from_config({"publish": {"allow": []}, "subscribe": {"allow": []}})
    assert not empty.checks_publish and empty.may_subscribe(b"x")  # empty lists are no lists


async def test_metrics_count_violations(tmp_path: object) -> None:
    async with jetpy.Server(
        ServerOptions(host="127.0.0.1", port=0, http_port=-1, users=users(a={"publish": {"allow": ["x"]}}))
    ) as srv:
        await raw(srv, "a", b"PUB y 1\r\nz\r\nSUB foo _sys_ 1\r\nPING\r\n")
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.http_port)
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        body = (await reader.read()).decode()
        writer.close()
        assert 'jetpy_permission_violations_total{server_id="' in body
        assert 'kind="publish"} 1' in body and 'kind="subscribe"} 1' in body


async def test_requests_pipelined_after_connect_are_checked(tmp_path: Any) -> None:
    """A JetStream request in the same read as the CONNECT is the new user's, not the server's."""
    perms = {"publish": {"allow": ["$JS.API.>"]}, "subscribe": {"allow": ["_INBOX.>", "ok.>"]}}
    opts = ServerOptions(
        host="127.0.0.1", port=0, users=users(u=perms), jetstream=True, store_dir=str(tmp_path)
    )
    async with jetpy.Server(opts) as srv:
        body = b'{"name":"S","subjects":["secret.>"],"storage":"memory"}'
        out = await raw(
            srv,
            "u",
            b"SUB _INBOX.r 1\r\nPUB $JS.API.STREAM.CREATE.S _INBOX.r %d\r\n%s\r\n" % (len(body), body),
            within=1.0,
        )
        assert b'"err_code":10403' in out
        assert (
            srv.jetstream is not None
            and not srv.jetstream.jsz_stats(
                accounts=False, streams=False, consumers=False, config=False, account=""
            )["streams"]
        )
