"""Authentication of CONNECT against an embedded server: user/password (plain and bcrypt), token,
a users list, no_auth_user, and the auth timeout (raw socket)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import bcrypt
import nats
import pytest
from nats.aio.client import Client

import jetpy
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions, User


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    # Failed connects leave nats-py clients and transports behind; collect them here rather than
    # at a random later point (CPython 3.11.7 can trip over finalizers run while it builds an AST)
    yield
    gc.collect()


@asynccontextmanager
async def running(**opts: object) -> AsyncIterator[Server]:
    async with jetpy.Server(ServerOptions(host="127.0.0.1", port=0, **opts)) as srv:  # type: ignore[arg-type]
        yield srv


async def _ignore(e: Exception) -> None:
    pass


async def connect(srv: Server, **kw: object) -> Client:
    return await nats.connect(  # type: ignore[arg-type]
        srv.client_url, allow_reconnect=False, max_reconnect_attempts=0, error_cb=_ignore, **kw
    )


async def refused(srv: Server, **kw: object) -> str:
    with pytest.raises(nats.errors.Error) as info:
        await connect(srv, **kw)
    return str(info.value)


async def works(srv: Server, **kw: object) -> None:
    nc = await connect(srv, **kw)
    sub = await nc.subscribe("auth.check")
    await nc.publish("auth.check", b"in")
    assert (await sub.next_msg(timeout=2)).data == b"in"
    await nc.close()


def authorized_users(srv: Server) -> Callable[[], list[str]]:
    return lambda: sorted(c.user for c in srv.connections.values())


async def test_user_and_password() -> None:
    async with running(username="alice", password="s3cret") as srv:
        await works(srv, user="alice", password="s3cret")
        assert "Authorization Violation" in await refused(srv, user="alice", password="wrong")
        assert "Authorization Violation" in await refused(srv, user="bob", password="s3cret")
        assert "Authorization Violation" in await refused(srv)
        assert srv.auth_failures == 3
        nc = await nats.connect(f"nats://alice:s3cret@127.0.0.1:{srv.port}", error_cb=_ignore)
        await nc.flush(timeout=2)  # credentials in the URL
        await nc.close()


async def test_bcrypt_hashed_password() -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    async with running(username="alice", password=hashed) as srv:
        await works(srv, user="alice", password="s3cret")
        assert "Authorization Violation" in await refused(srv, user="alice", password=hashed)


async def test_token() -> None:
    async with running(token="t0ken") as srv:
        await works(srv, token="t0ken")
        assert "Authorization Violation" in await refused(srv, token="nope")
        assert "Authorization Violation" in await refused(srv, user="t0ken", password="t0ken")
    hashed = bcrypt.hashpw(b"t0ken", bcrypt.gensalt(rounds=4)).decode()
    async with running(token=hashed) as srv:
        await works(srv, token="t0ken")


async def test_users_list() -> None:
    users = [User("a", "pa"), User("b", bcrypt.hashpw(b"pb", bcrypt.gensalt(rounds=4)).decode())]
    async with running(users=users) as srv:
        await works(srv, user="a", password="pa")
        await works(srv, user="b", password="pb")
        assert "Authorization Violation" in await refused(srv, user="a", password="pb")
        assert "Authorization Violation" in await refused(srv, user="c", password="pa")
        assert "Authorization Violation" in await refused(srv)
        nc = await connect(srv, user="b", password="pb")
        assert authorized_users(srv)() == ["b"]
        await nc.close()


async def test_no_auth_user() -> None:
    async with running(users=[User("a", "pa"), User("guest", "pg")], no_auth_user="guest") as srv:
        nc = await connect(srv)  # no credentials: the no_auth_user
        assert authorized_users(srv)() == ["guest"]
        await nc.close()
        await works(srv, user="a", password="pa")
        assert "Authorization Violation" in await refused(srv, user="a", password="wrong")
        # nats-server lets such a client skip CONNECT altogether
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        await reader.readline()
        writer.write(b"PING\r\n")
        assert await asyncio.wait_for(reader.readline(), 2) == b"PONG\r\n"
        writer.close()


async def test_auth_timeout() -> None:
    async with running(username="a", password="b", auth_timeout=0.2) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        assert (await reader.readline()).startswith(b"INFO ")
        rest = await asyncio.wait_for(reader.read(), 3)  # nothing sent: the server gives up
        assert rest == b"-ERR 'Authentication Timeout'\r\n"
        writer.close()
        # a client that connects in time is not timed out
        nc = await connect(srv, user="a", password="b")
        await asyncio.sleep(0.4)
        await nc.flush(timeout=2)
        await nc.close()
        closed = [c.close_reason for c in srv.closed_connections]
        assert closed[0] == "Authentication Timeout"


async def test_ops_before_connect_are_refused() -> None:
    async with running(username="a", password="b") as srv:
        for first in (b"PING\r\n", b"SUB foo 1\r\n", b"PUB foo 1\r\nx\r\n", b"INFO {}\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            await reader.readline()
            writer.write(first)
            assert await asyncio.wait_for(reader.read(), 3) == b"-ERR 'Authorization Violation'\r\n"
            writer.close()
