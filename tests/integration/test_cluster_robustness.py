"""Routes under bad peers and misconfiguration, on jetpy servers in this process with a raw
socket playing the peer: garbage closes that route only (with nats-server's log line), a peer
that stops reading is cut off as a slow consumer with bounded memory, route authorization and
cluster names are enforced with nats-server's errors, a client on the route port is turned away,
a route to self is dropped for good, and unnamed clusters agree on one name."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

import nats
import pytest

from cluster_support import embedded_cluster, embedded_options
from conftest import free_port, wait_for
from jetpy.server.app import Server
from jetpy.server.options import ClusterOptions, ServerOptions

pytestmark = pytest.mark.timeout(60)

PEER_ID = "NFAKEPEER"


class Peer:
    """A hand-driven route peer over a raw socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def dial(cls, srv: Server) -> Peer:
        assert srv.cluster is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.cluster.port)
        return cls(reader, writer)

    async def handshake(self, cluster: str = "C1", user: str = "", password: str = "") -> None:
        connect = {
            "echo": True,
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "name": PEER_ID,
            "cluster": cluster,
        }
        if user:
            connect.update(user=user, **{"pass": password})
        info = {
            "server_id": PEER_ID,
            "server_name": "fake",
            "host": "127.0.0.1",
            "port": 1,
            "cluster": cluster,
            "headers": True,
        }
        self.send(
            b"CONNECT " + json.dumps(connect).encode() + b"\r\nINFO " + json.dumps(info).encode() + b"\r\n"
        )

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def read_until(self, token: bytes, within: float = 5.0) -> bytes:
        data = b""
        async with asyncio.timeout(within):
            while token not in data:
                chunk = await self.reader.read(65536)
                if not chunk:
                    break
                data += chunk
        return data

    async def closed(self, within: float = 5.0) -> bytes:
        data = b""
        async with asyncio.timeout(within):
            while chunk := await self.reader.read(65536):
                data += chunk
        return data

    def close(self) -> None:
        self.writer.close()


async def test_garbage_closes_that_route_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "jetpy.server")
    async with embedded_cluster(2) as (a, b):
        peer = await Peer.dial(a)
        await peer.handshake()
        await peer.read_until(b"INFO")
        await wait_for(lambda: a.cluster is not None and PEER_ID in a.cluster.remotes)
        peer.send(b"FOO BAR\r\n")
        tail = await peer.closed()
        assert tail.endswith(b"-ERR 'Unknown Protocol Operation'\r\n")
        assert "Router parser ERROR: proto=b'FOO BAR\\r\\n'..." in caplog.text
        assert "Router connection closed: Protocol Violation - Remote: fake" in caplog.text
        # the real route still carries messages
        nb = await nats.connect(b.client_url)
        await nb.subscribe("still.up")
        await nb.flush()
        await wait_for(lambda: a.broker.subs.has_interest(b"still.up"))
        na = await nats.connect(a.client_url)
        sub = await nb.subscribe("still.here")
        await nb.flush()
        await wait_for(lambda: a.broker.subs.has_interest(b"still.here"))
        await na.publish("still.here", b"yes")
        assert (await sub.next_msg(timeout=2)).data == b"yes"
        for nc in (na, nb):
            await nc.close()
        # malformed arguments close without an -ERR, naming nats-server's parse function
        peer = await Peer.dial(a)
        await peer.handshake()
        await peer.read_until(b"INFO")
        peer.send(b"RMSG $G foo\r\n")
        await peer.closed()
        assert "processRoutedMsgArgs Parse Error: '[$G foo]'" in caplog.text


async def test_a_peer_that_stops_reading_is_cut_off(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "jetpy.server")
    opts = embedded_options("slow")
    opts.max_pending = 2 * 1024 * 1024
    async with Server(opts) as srv:
        assert srv.cluster is not None
        sock = socket.create_connection(("127.0.0.1", srv.cluster.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        info = {"server_id": PEER_ID, "server_name": "fake", "host": "127.0.0.1", "port": 1, "cluster": "C1"}
        connect = {"name": PEER_ID, "cluster": "C1", "headers": True}
        sock.sendall(
            b"CONNECT "
            + json.dumps(connect).encode()
            + b"\r\nINFO "
            + json.dumps(info).encode()
            + b"\r\nRS+ $G slow.>\r\n"
        )
        await wait_for(lambda: srv.broker.subs.has_interest(b"slow.x"))
        nc = await nats.connect(srv.client_url)
        payload = b"x" * 16384
        for _ in range(2000):  # 32 MB towards a peer that reads nothing
            await nc.publish("slow.x", payload)
            if srv.cluster.remotes.get(PEER_ID) is None:
                break
        await nc.flush()
        cluster = srv.cluster
        await wait_for(lambda: PEER_ID not in cluster.remotes)
        assert "Slow Consumer Detected: MaxPending of 2097152 Exceeded" in caplog.text
        assert not srv.broker.subs.has_interest(b"slow.x")  # its interest went with it
        # and the server goes on serving
        sub = await nc.subscribe("after")
        await nc.publish("after", b"ok")
        assert (await sub.next_msg(timeout=2)).data == b"ok"
        await nc.close()
        sock.close()


async def test_route_authorization(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "jetpy.server")
    auth: dict[str, Any] = {"username": "ruser", "password": "s3cret"}
    seed_port = free_port()
    seed_opts = ServerOptions(
        host="127.0.0.1",
        port=0,
        server_name="A",
        cluster=ClusterOptions(name="C1", host="127.0.0.1", port=seed_port, **auth),
    )
    async with Server(seed_opts) as a:
        # wrong credentials: refused as nats-server refuses them
        peer = await Peer.dial(a)
        await peer.handshake(user="ruser", password="wrong")
        assert (await peer.closed()).endswith(b"-ERR 'Authorization Violation'\r\n")
        assert 'authentication error - User "ruser"' in caplog.text
        assert "s3cret" not in caplog.text and "wrong" not in caplog.text
        # none at all: the same, and no CONNECT within the timeout closes too
        peer = await Peer.dial(a)
        await peer.handshake()
        assert (await peer.closed()).endswith(b"-ERR 'Authorization Violation'\r\n")
        # the right ones, from the route URL
        url = f"nats-route://ruser:s3cret@127.0.0.1:{seed_port}"
        b_opts = ServerOptions(
            host="127.0.0.1",
            port=0,
            server_name="B",
            cluster=ClusterOptions(name="C1", host="127.0.0.1", port=-1, routes=[url], **auth),
        )
        async with Server(b_opts) as b:
            await wait_for(lambda: b.server_id in a.cluster.remotes if a.cluster else False)
            # a third server gossiped about needs the credentials of its cluster block too
            c_opts = ServerOptions(
                host="127.0.0.1",
                port=0,
                server_name="C",
                cluster=ClusterOptions(name="C1", host="127.0.0.1", port=-1, routes=[url], **auth),
            )
            async with Server(c_opts) as c:
                await wait_for(lambda: c.cluster is not None and len(c.cluster.remotes) == 2)
                assert b.cluster is not None and c.server_id in b.cluster.remotes


async def test_auth_timeout_on_a_silent_peer() -> None:
    opts = embedded_options("A", username="u", password="p", auth_timeout=0.3)
    async with Server(opts) as a:
        peer = await Peer.dial(a)
        assert (await peer.closed(within=3)).endswith(b"-ERR 'Authentication Timeout'\r\n")


async def test_cluster_names_must_match_and_clients_stay_off_the_route_port(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "jetpy.server")
    async with Server(embedded_options("A")) as a:
        peer = await Peer.dial(a)
        await peer.handshake(cluster="OTHER")
        assert (await peer.closed()).endswith(
            b"""-ERR 'Rejecting connection, cluster name "OTHER" does not match "C1"'\r\n"""
        )
        assert "Router connection closed: Cluster Name Conflict" in caplog.text
        # nats-py pointed at the route port
        assert a.cluster is not None
        with pytest.raises(Exception):  # noqa: B017 - nats-py's error type varies
            await nats.connect(f"nats://127.0.0.1:{a.cluster.port}", allow_reconnect=False, connect_timeout=2)
        assert "attempted to connect to route port" in caplog.text


async def test_a_route_to_self_is_dropped_for_good(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "jetpy.server")
    port = free_port()
    opts = ServerOptions(
        host="127.0.0.1",
        port=0,
        server_name="A",
        cluster=ClusterOptions(
            name="C1", host="127.0.0.1", port=port, routes=[f"nats-route://127.0.0.1:{port}"]
        ),
    )
    async with Server(opts) as a:
        await asyncio.sleep(2.5)  # past a reconnect delay
        assert a.cluster is not None and not a.cluster.remotes
        # one connection, seen from both of its ends, and never dialled again
        assert caplog.text.count("Route connection created") == 2
        assert caplog.text.count("Detected route to self") == 2
        assert "Attempting reconnect" not in caplog.text


async def test_unnamed_servers_agree_on_one_cluster_name() -> None:
    a = Server(
        ServerOptions(
            host="127.0.0.1", port=0, server_name="A", cluster=ClusterOptions(host="127.0.0.1", port=-1)
        )
    )
    await a.start()
    try:
        assert a.cluster is not None and a.cluster.dynamic
        url = f"nats-route://127.0.0.1:{a.cluster.port}"
        b = Server(
            ServerOptions(
                host="127.0.0.1",
                port=0,
                server_name="B",
                cluster=ClusterOptions(host="127.0.0.1", port=-1, routes=[url]),
            )
        )
        await b.start()
        try:
            await wait_for(
                lambda: (
                    b.cluster is not None
                    and a.server_id in b.cluster.remotes
                    and a.cluster is not None
                    and b.server_id in a.cluster.remotes
                )
            )
            assert b.cluster is not None and a.cluster.name == b.cluster.name
            nc = await nats.connect(a.client_url)
            assert nc._server_info.get("cluster") == a.cluster.name
            await nc.close()
        finally:
            await b.shutdown()
    finally:
        await a.shutdown()


async def test_advertise_and_no_advertise() -> None:
    port = free_port()
    opts = ServerOptions(
        host="127.0.0.1",
        port=0,
        server_name="A",
        cluster=ClusterOptions(
            name="C1", host="127.0.0.1", port=port, advertise=f"localhost:{port}", no_advertise=True
        ),
    )
    async with Server(opts) as a:
        # peers are told the advertised route URL, and no client URLs
        peer = await Peer.dial(a)
        await peer.handshake()
        greeting = await peer.read_until(b"\r\n")
        info = json.loads(greeting.split(b"\r\n")[0][5:])
        assert (info["host"], info["port"], info["ip"]) == (
            "localhost",
            port,
            f"nats-route://localhost:{port}/",
        )
        assert "connect_urls" not in info
        await wait_for(lambda: a.cluster is not None and PEER_ID in a.cluster.remotes)
        # and clients are told of no other server
        nc = await nats.connect(a.client_url)
        assert [f"{u.hostname}:{u.port}" for u in nc.servers] == [f"127.0.0.1:{a.port}"]
        assert nc._server_info["cluster"] == "C1" and "connect_urls" not in nc._server_info
        await nc.close()
        peer.close()
