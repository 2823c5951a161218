"""Failures in a cluster of jetpy processes on loopback: a server killed with kill -9 under
traffic (the others keep delivering, its interest leaves them, its clients fail over with
nats-py's cluster discovery), and routes that drop and come back (a configured route
reconnects, the mesh forms again)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal

import nats
import pytest
from nats.aio.msg import Msg

from cluster_support import (
    JETPY,
    embedded_cluster,
    embedded_options,
    process_cluster,
    start_member,
    wait_mesh,
)
from conftest import wait_for
from jetpy.server.app import Server
from jetpy.server.options import WebSocketOptions
from wsclient import WsClient

pytestmark = pytest.mark.timeout(120)


async def test_kill_9_under_traffic_the_rest_keep_delivering(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with process_cluster(tmp_path, [JETPY, JETPY, JETPY]) as (s0, s1, s2):
        await wait_mesh([s0.url, s1.url, s2.url])
        pub = await nats.connect(s0.url, allow_reconnect=False)
        sub = await nats.connect(s1.url, allow_reconnect=False)
        doomed = await nats.connect(s2.url, allow_reconnect=False)
        got: list[int] = []
        members: dict[str, int] = {"s1": 0, "s2": 0}

        async def on_msg(m: Msg) -> None:
            got.append(int(m.data))

        async def on_s1(m: Msg) -> None:
            members["s1"] += 1

        async def on_s2(m: Msg) -> None:
            members["s2"] += 1

        await sub.subscribe("stream", cb=on_msg)
        await sub.subscribe("work", queue="q", cb=on_s1)
        await doomed.subscribe("work", queue="q", cb=on_s2)
        await doomed.subscribe("only.on.s2")
        for nc in (sub, doomed):
            await nc.flush()
        await asyncio.sleep(0.5)

        def s2_route_closed() -> bool:
            return any(
                "Router connection closed" in line and line.endswith("Remote: S2")
                for line in s0.proc.log().splitlines()
            )

        async def publish() -> int:
            """300 messages, s2 killed -9 mid-stream, then more until 600 at least and s0 has
            closed its route to s2: counted and waited on rather than timed (a loaded machine)."""
            n = 0
            closed = False
            while n < 600 or not closed:
                await pub.publish("stream", str(n).encode())
                await pub.publish("work", b"w")
                n += 1
                if n % 50 == 0:
                    await pub.flush()
                    await asyncio.sleep(0.005)
                    closed = n > 300 and s2_route_closed()
                if n == 300:
                    s2.kill()  # kill -9 mid-stream
                assert n < 1_000_000, "s0 never closed its route to s2"
            await pub.flush()
            return n

        sent = await publish()
        await wait_for(lambda: len(got) == sent, within=10)
        assert got == list(range(sent))  # nothing lost or doubled between the survivors
        # the killed server's interest left the others: its subject has no responders now
        with pytest.raises(nats.errors.NoRespondersError):
            await pub.request("only.on.s2", b"?", timeout=3)
        # its queue member too: every later "work" message went to the member on s1
        before = members["s1"]
        for _ in range(100):
            await pub.publish("work", b"w")
        await pub.flush()
        await wait_for(lambda: members["s1"] == before + 100, within=5)
        for nc in (pub, sub):
            await nc.close()
        await doomed.close()


async def test_nats_py_discovers_the_cluster_and_fails_over(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with process_cluster(tmp_path, [JETPY, JETPY, JETPY]) as (s0, s1, s2):
        await wait_mesh([s0.url, s1.url, s2.url])
        reconnected = asyncio.Event()

        async def on_reconnect() -> None:
            reconnected.set()

        # told only of s0: the rest come from INFO connect_urls
        nc = await nats.connect(
            s0.url, reconnected_cb=on_reconnect, reconnect_time_wait=0.2, max_reconnect_attempts=-1
        )
        ports = {s0.proc.port, s1.proc.port, s2.proc.port}
        assert {u.port for u in nc.servers} == ports
        assert {u.port for u in nc.discovered_servers} == ports - {s0.proc.port}
        got: list[bytes] = []

        async def cb(m: Msg) -> None:
            got.append(m.data)

        await nc.subscribe("after.failover", cb=cb)
        await nc.flush()
        other = await nats.connect(s1.url, allow_reconnect=False)
        s0.kill()
        await asyncio.wait_for(reconnected.wait(), 10)
        assert nc.connected_url is not None and nc.connected_url.port in {s1.proc.port, s2.proc.port}
        # the subscription came back with the client, on its new server, and routes to it
        await nc.flush()

        async def delivered() -> bool:
            await other.publish("after.failover", b"hello")
            await other.flush()
            await asyncio.sleep(0.2)
            return bool(got)

        for _ in range(25):
            if await delivered():
                break
        assert got and got[0] == b"hello"
        await nc.close()
        await other.close()


async def test_a_dropped_route_reconnects_and_the_mesh_forms_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with process_cluster(tmp_path, [JETPY, JETPY]) as members:
        s0, s1 = members
        await wait_mesh([s0.url, s1.url])
        # the seed dies and comes back on the same ports: s1's configured route finds it again
        seed_port, seed_cluster = s0.proc.port, s0.cluster_port
        s0.kill()
        await asyncio.sleep(1.5)
        assert "Error trying to connect to route (attempt 1)" in s1.proc.log()
        back = start_member(tmp_path, JETPY, "S0b", (), "-p", str(seed_port), cluster_port=seed_cluster)
        members.append(back)
        await wait_mesh([back.url, s1.url], within=15)
        # a third server joins through the restarted seed: gossip still builds the mesh
        s2 = start_member(tmp_path, JETPY, "S2", [back.route_url])
        members.append(s2)
        try:
            await wait_mesh([back.url, s1.url, s2.url], within=15)
        except AssertionError as e:  # the servers' own account of it, for the failure's report
            logs = "\n".join(f"--- {m.proc.log()[-4000:]}" for m in (back, s1, s2))
            raise AssertionError(f"{e}\n{logs}") from None
        assert s1.proc.popen.poll() is None
        assert back.proc.stop(signal.SIGTERM) == 0  # a clean shutdown closes its routes
        await asyncio.sleep(0.5)
        assert "Router connection closed" in s1.proc.log()


async def _infos(reader: asyncio.StreamReader, want: int, within: float = 5.0) -> list[dict[str, object]]:
    """The next ``want`` INFO documents a raw client reads (PINGs answered by the caller's writer
    being idle: the server pings only after minutes)."""
    out: list[dict[str, object]] = []
    async with asyncio.timeout(within):
        while len(out) < want:
            line = await reader.readline()
            if line.startswith(b"INFO "):
                out.append(json.loads(line[5:]))
    return out


async def test_lame_duck_moves_clients_and_leaves_the_peers_connect_urls() -> None:
    async with embedded_cluster(2) as (a, b):
        a.options.lame_duck_duration = 3.0
        a.options.lame_duck_grace_period = 0.5
        a_url, b_url = f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"
        # a raw client of b that takes async INFO (protocol 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
        (greeting,) = await _infos(reader, 1)
        assert greeting["connect_urls"] == [b_url, a_url] and greeting["cluster"] == "C1"
        writer.write(b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')
        moved = asyncio.Event()

        async def reconnected() -> None:
            moved.set()

        on_a = await nats.connect(
            a.client_url, reconnected_cb=reconnected, reconnect_time_wait=0.1, max_reconnect_attempts=-1
        )
        sub = await on_a.subscribe("after.ldm")
        await on_a.flush()
        ldm = asyncio.create_task(a.lame_duck())
        # b's clients are told at once: a is no longer a place to go
        (update,) = await _infos(reader, 1)
        assert update["connect_urls"] == [b_url]
        # a's client moves to b and its subscription with it
        await asyncio.wait_for(moved.wait(), 10)
        assert on_a.connected_url is not None and on_a.connected_url.port == b.port
        await on_a.flush()
        on_b = await nats.connect(b.client_url)
        await on_b.publish("after.ldm", b"here")
        assert (await sub.next_msg(timeout=3)).data == b"here"
        await asyncio.wait_for(ldm, 10)
        for nc in (on_a, on_b):
            await nc.close()
        writer.close()


async def test_websocket_clients_learn_the_clusters_websocket_urls() -> None:
    ws_opts = WebSocketOptions(port=-1, host="127.0.0.1", no_tls=True)
    a = Server(dataclasses.replace(embedded_options("WA"), websocket=ws_opts))
    await a.start()
    try:
        assert a.cluster is not None
        b = Server(
            dataclasses.replace(
                embedded_options("WB", [f"nats-route://127.0.0.1:{a.cluster.port}"]), websocket=ws_opts
            )
        )
        await b.start()
        try:
            await wait_for(lambda: b.cluster is not None and a.server_id in b.cluster.remotes)
            ws = await WsClient.connect(a.ws_port)
            _, info = await ws.frame()
            doc = json.loads(info[5:])
            assert doc["connect_urls"] == [f"127.0.0.1:{a.ws_port}", f"127.0.0.1:{b.ws_port}"]
            await ws.close()
            # a plain client of the same server is told the client ports
            reader, writer = await asyncio.open_connection("127.0.0.1", a.port)
            (plain,) = await _infos(reader, 1)
            assert plain["connect_urls"] == [f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"]
            writer.close()
        finally:
            await b.shutdown()
    finally:
        await a.shutdown()
