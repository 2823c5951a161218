"""Core NATS through real sockets: nats-py clients (and raw sockets where the bytes matter) against
an embedded jetpy server on an ephemeral port."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

import jetpy
from jetpy.protocol.headers import parse_headers
from jetpy.server.app import Server


@pytest.fixture
async def core() -> AsyncIterator[Server]:
    async with jetpy.Server(port=0) as srv:
        yield srv


async def _no_errors(e: Exception) -> None:
    raise AssertionError(f"unexpected client error: {e!r}")


async def connect(srv: Server, **kw: object) -> Client:
    return await nats.connect(srv.client_url, error_cb=_no_errors, **kw)  # type: ignore[arg-type]


class Raw:
    """A raw-socket client: the bytes the server sends, nothing interpreted."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buf = b""

    @classmethod
    async def open(cls, port: int, connect: bytes = b'CONNECT {"verbose":false,"pedantic":false}\r\n') -> Raw:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        raw = cls(reader, writer)
        info = await raw.read_until(b"\r\n")
        assert info.startswith(b"INFO {")
        if connect:
            await raw.send(connect)
        return raw

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_until(self, marker: bytes, within: float = 5.0) -> bytes:
        """Everything up to and including ``marker``."""
        async with asyncio.timeout(within):
            while marker not in self.buf:
                chunk = await self.reader.read(65536)
                if not chunk:
                    raise EOFError(self.buf)
                self.buf += chunk
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    async def ping(self) -> bytes:
        """Everything the server sent before answering a PING (our barrier)."""
        await self.send(b"PING\r\n")
        return (await self.read_until(b"PONG\r\n"))[: -len(b"PONG\r\n")]

    async def read_to_eof(self, within: float = 5.0) -> bytes:
        async with asyncio.timeout(within):
            while chunk := await self.reader.read(65536):
                self.buf += chunk
        out, self.buf = self.buf, b""
        return out

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


async def test_publish_subscribe(core: Server) -> None:
    nc = await connect(core)
    sub = await nc.subscribe("greet")
    await nc.publish("greet", b"hello")
    msg = await sub.next_msg(timeout=2)
    assert (msg.subject, msg.data, msg.reply) == ("greet", b"hello", "")
    await nc.close()


async def test_between_connections_in_order(core: Server) -> None:
    a, b = await connect(core), await connect(core)
    sub = await b.subscribe("seq")
    await b.flush()
    for i in range(500):
        await a.publish("seq", b"%d" % i)
    await a.flush()
    got = [int((await sub.next_msg(timeout=2)).data) for _ in range(500)]
    assert got == list(range(500))
    await a.close()
    await b.close()


async def test_wildcards(core: Server) -> None:
    nc = await connect(core)
    star = await nc.subscribe("a.*.c")
    full = await nc.subscribe("a.>")
    await nc.publish("a.b.c", b"1")
    await nc.publish("a.b", b"2")
    await nc.publish("a.b.c.d", b"3")
    await nc.publish("x.b.c", b"4")
    await nc.flush()
    assert (await star.next_msg(timeout=2)).data == b"1"
    assert [(await full.next_msg(timeout=2)).data for _ in range(3)] == [b"1", b"2", b"3"]
    with pytest.raises(nats.errors.TimeoutError):
        await star.next_msg(timeout=0.1)
    await nc.close()


async def test_queue_group_delivers_each_message_to_exactly_one_member(core: Server) -> None:
    pub = await connect(core)
    members = [await connect(core) for _ in range(3)]
    got: dict[int, list[bytes]] = collections.defaultdict(list)
    for i, m in enumerate(members):

        async def cb(msg: Msg, i: int = i) -> None:
            got[i].append(msg.data)

        await m.subscribe("work", queue="workers", cb=cb)
        await m.flush()
    plain = await pub.subscribe("work")  # a plain subscriber alongside still gets everything
    n = 300
    for k in range(n):
        await pub.publish("work", b"%d" % k)
    await pub.flush()
    for _ in range(n):
        await plain.next_msg(timeout=2)
    for _ in range(200):
        if sum(len(v) for v in got.values()) >= n:
            break
        await asyncio.sleep(0.01)
    everything = sorted(int(d) for v in got.values() for d in v)
    assert everything == list(range(n))  # each exactly once
    assert all(len(got[i]) > 30 for i in range(3)), {i: len(v) for i, v in got.items()}  # spread
    for m in members:
        await m.close()
    await pub.close()


async def test_request_reply(core: Server) -> None:
    svc, cli = await connect(core), await connect(core)

    async def handler(msg: Msg) -> None:
        await msg.respond(msg.data.upper())

    await svc.subscribe("svc.upper", cb=handler)
    await svc.flush()
    for word in (b"a", b"hello", b""):
        resp = await cli.request("svc.upper", word, timeout=2)
        assert resp.data == word.upper()
    await svc.close()
    await cli.close()


async def test_no_responders(core: Server) -> None:
    nc = await connect(core)
    with pytest.raises(NoRespondersError):
        await nc.request("nobody.home", b"?", timeout=2)
    await nc.close()


async def test_headers(core: Server) -> None:
    nc = await connect(core)
    sub = await nc.subscribe("h")
    await nc.publish("h", b"body", headers={"Foo": "bar", "X-Id": "42"})
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"body"
    assert msg.headers == {"Foo": "bar", "X-Id": "42"}
    await nc.close()


async def test_multi_value_headers_pass_through_unchanged(core: Server) -> None:
    nc = await connect(core)
    sub = await nc.subscribe("h")
    await nc.flush()
    raw_sub = await Raw.open(core.port, b'CONNECT {"verbose":false,"headers":true}\r\nSUB h 7\r\n')
    plain = await Raw.open(core.port, b'CONNECT {"verbose":false}\r\nSUB h 8\r\n')
    await raw_sub.ping()
    await plain.ping()
    block = b"NATS/1.0\r\nX-Multi: 1\r\nX-Multi: 2\r\nOther: v\r\n\r\n"
    body = block + b"payload"
    pub = await Raw.open(core.port, b'CONNECT {"verbose":false,"headers":true}\r\n')
    await pub.send(b"HPUB h r.1 %d %d\r\n%b\r\n" % (len(block), len(body), body))
    frame = await raw_sub.read_until(b"payload\r\n")
    assert frame == b"HMSG h 7 r.1 %d %d\r\n%b\r\n" % (len(block), len(body), body)
    assert parse_headers(block).get_all("X-Multi") == ["1", "2"]
    # a client that did not ask for headers gets the payload alone
    assert await plain.read_until(b"payload\r\n") == b"MSG h 8 r.1 7\r\npayload\r\n"
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"payload" and msg.headers is not None and msg.headers["Other"] == "v"
    for r in (raw_sub, plain, pub):
        await r.close()
    await nc.close()


async def test_flush_and_drain(core: Server) -> None:
    pub, subc = await connect(core), await connect(core)
    got: list[bytes] = []

    async def slow(msg: Msg) -> None:
        await asyncio.sleep(0.001)
        got.append(msg.data)

    await subc.subscribe("d", cb=slow)
    await subc.flush()
    for i in range(100):
        await pub.publish("d", b"%d" % i)
    await pub.flush(timeout=2)
    for _ in range(200):  # every message has reached the subscribing client
        if core.connections and sum(c.out_msgs for c in core.connections.values()) >= 100:
            break
        await asyncio.sleep(0.01)
    await subc.drain()  # waits for the callbacks on what was already delivered
    assert got == [b"%d" % i for i in range(100)]
    assert subc.is_closed
    await pub.close()


async def test_no_echo(core: Server) -> None:
    me = await connect(core, no_echo=True)
    other = await connect(core)
    sub = await me.subscribe("e")
    await me.flush()
    await me.publish("e", b"mine")
    await other.publish("e", b"theirs")
    await other.flush()
    assert (await sub.next_msg(timeout=2)).data == b"theirs"
    with pytest.raises(nats.errors.TimeoutError):
        await sub.next_msg(timeout=0.2)
    await me.close()
    await other.close()


async def test_unsubscribe_after_max_messages(core: Server) -> None:
    nc = await connect(core)
    sub = await nc.subscribe("m")
    await sub.unsubscribe(limit=3)
    for i in range(10):
        await nc.publish("m", b"%d" % i)
    await nc.flush()
    assert [(await sub.next_msg(timeout=2)).data for _ in range(3)] == [b"0", b"1", b"2"]
    await asyncio.sleep(0.05)
    assert core.broker.subs.count == 0 or all(not c.subs for c in core.connections.values())
    await nc.close()


async def test_raw_protocol_conversation(core: Server) -> None:
    r = await Raw.open(core.port, b'CONNECT {"verbose":true,"pedantic":true,"headers":true}\r\n')
    await r.send(b"SUB foo 1\r\nSUB foo.* q 2\r\nPUB foo 5\r\nhello\r\nPUB foo.x reply 0\r\n\r\n")
    assert await r.ping() == (
        b"+OK\r\n+OK\r\n+OK\r\n+OK\r\nMSG foo 1 5\r\nhello\r\n+OK\r\nMSG foo.x 2 reply 0\r\n\r\n"
    )
    await r.send(b"PUB foo.* 1\r\nx\r\nUNSUB 2\r\nPUB foo.y 1\r\ny\r\n")  # pedantic: -ERR, still sent
    assert await r.ping() == b"-ERR 'Invalid Publish Subject'\r\n+OK\r\nMSG foo.* 2 1\r\nx\r\n+OK\r\n+OK\r\n"
    await r.close()


async def test_runs_of_publishes_reach_every_kind_of_subscriber(core: Server) -> None:
    # many PUBs to one subject in one read are routed as a run: same result as one by one
    seen: list[tuple[bytes, bytes]] = []
    handle = core.broker.subscribe_internal("run.*", lambda subj, reply, hdr, data: seen.append((subj, data)))
    a = await Raw.open(core.port, b'CONNECT {"verbose":false}\r\nSUB run.x 1\r\nSUB run.* 2\r\n')
    b = await Raw.open(core.port, b'CONNECT {"verbose":false}\r\nSUB run.> 9\r\nUNSUB 9 3\r\n')
    await a.ping()
    await b.ping()
    pub = await Raw.open(core.port)
    await pub.send(b"".join(b"PUB run.x %d\r\n%d\r\n" % (len(b"%d" % i), i) for i in range(5)))
    await pub.ping()
    got_a = await a.ping()
    assert got_a == b"".join(b"MSG run.x 1 1\r\n%d\r\nMSG run.x 2 1\r\n%d\r\n" % (i, i) for i in range(5))
    assert await b.ping() == b"".join(b"MSG run.x 9 1\r\n%d\r\n" % i for i in range(3))  # max 3
    assert seen == [(b"run.x", b"%d" % i) for i in range(5)]
    core.broker.unsubscribe_internal(handle)
    for r in (a, b, pub):
        await r.close()


async def test_bad_input_from_one_client_never_affects_others(core: Server) -> None:
    nc = await connect(core)
    sub = await nc.subscribe("ok")
    await nc.flush()
    bad_inputs = [
        b"GARBAGE\r\n",
        b"PUB foo x\r\n",
        b"PUB foo 2000000\r\n",
        b"SUB " + b"x" * 5000,
        b"CONNECT {nope\r\n",
        b"PUB foo 2\r\nhiXX",
        b"\xff\xfe\x00\r\n",
        b"HPUB foo 1 1\r\nx\r\n",
    ]
    for i, data in enumerate(bad_inputs):
        r = await Raw.open(core.port)
        await r.send(b"PUB ok 2\r\nok\r\n" + data)
        await r.read_to_eof()  # the server closes the bad client ...
        await nc.publish("ok", b"%d" % i)  # ... and everyone else carries on
        msgs = [await sub.next_msg(timeout=2) for _ in range(2)]
        assert [m.data for m in msgs] == [b"ok", b"%d" % i]  # the bad client's good PUB went out first
    assert len(core.connections) == 1
    await nc.close()


async def test_reconnect_after_server_restart() -> None:
    srv = jetpy.Server(port=0)
    await srv.start()
    port = srv.port
    reconnected = asyncio.Event()

    async def on_reconnect() -> None:
        reconnected.set()

    async def ignore(e: Exception) -> None:
        pass

    nc = await nats.connect(
        srv.client_url,
        reconnected_cb=on_reconnect,
        error_cb=ignore,
        reconnect_time_wait=0.05,
        max_reconnect_attempts=-1,
    )
    sub = await nc.subscribe("again")
    await nc.flush()
    await srv.shutdown()
    srv2 = jetpy.Server(port=port)
    await srv2.start()
    try:
        await asyncio.wait_for(reconnected.wait(), 10)
        await nc.flush(timeout=2)  # the subscription was replayed on the new server
        await nc.publish("again", b"back")
        assert (await sub.next_msg(timeout=2)).data == b"back"
    finally:
        await nc.close()
        await srv2.shutdown()
