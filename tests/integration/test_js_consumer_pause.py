"""Consumer pause, priority groups and abandoned pull requests through nats-py against a real
jetpy server (embedded, file store): nats-py's pause_consumer / resume_consumer, a pause that
outlives a restart and ends on its own with an advisory, a request waiting across a resumption,
a pinned client's failover to another once its pin times out, and fetches that time out (or
whose requester unsubscribed) leaving every message to the next fetch."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout

import jetpy
from conftest import wait_for
from jetpy.jetstream.models import format_time

pytestmark = pytest.mark.asyncio

S = 1_000_000_000


async def api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    doc: dict[str, Any] = json.loads((await nc.request(f"$JS.API.{subject}", data, timeout=3)).data)
    return doc


async def test_pause_and_resume_with_nats_py(tmp_path: Path) -> None:
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        nc = await nats.connect(srv.client_url)
        js, jsm = nc.jetstream(), nc.jsm()
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(3):
            await js.publish("s.a", str(i).encode())
        sub = await js.pull_subscribe("s.>", durable="D")
        paused = await jsm.pause_consumer("S", "D", "2100-01-01T00:00:00Z")
        assert paused.paused and paused.pause_until == "2100-01-01T00:00:00Z"
        info = await js.consumer_info("S", "D")
        assert info.paused and info.config.pause_until == "2100-01-01T00:00:00Z"
        with pytest.raises(TimeoutError):  # nats-py's own, or asyncio's when its deadline is spent
            await sub.fetch(1, timeout=0.5)
        resumed = await jsm.resume_consumer("S", "D")  # a pause until the epoch: over
        assert not resumed.paused
        assert [m.data for m in await sub.fetch(3, timeout=2)] == [b"0", b"1", b"2"]
        await nc.close()


async def test_a_pause_outlives_a_restart_and_ends_on_its_own(tmp_path: Path) -> None:
    store = str(tmp_path / "js")
    until = time.time_ns() + 4 * S
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.publish("s.a", b"kept")
        body = {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        await api(nc, "CONSUMER.CREATE.S.D", body)
        assert (await api(nc, "CONSUMER.PAUSE.S.D", {"pause_until": format_time(until)}))["paused"]
        await nc.close()
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        events: list[dict[str, Any]] = []

        async def on(m: Any) -> None:
            events.append(json.loads(m.data))

        await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.D", cb=on)
        info = await js.consumer_info("S", "D")
        assert info.paused and info.config.pause_until == format_time(until)
        sub = await js.pull_subscribe_bind("D", "S")
        with pytest.raises(TimeoutError):
            await sub.fetch(1, timeout=0.3)
        left = (until - time.time_ns()) / S
        (m,) = await sub.fetch(1, timeout=left + 3)  # delivered once the deadline passes
        assert m.data == b"kept" and time.time_ns() >= until
        await asyncio.sleep(0.1)
        assert [(e["paused"], e["pause_until"]) for e in events] == [(False, format_time(until))]
        await nc.close()


async def test_a_request_waiting_across_a_resumption_is_served_at_once(tmp_path: Path) -> None:
    """nats-server serves it only once something else wakes the consumer up (a new request, a
    new message, the request's expiry); jetpy at once."""
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.publish("s.a", b"x")
        body = {"stream_name": "S", "config": {"durable_name": "D", "pause_until": "2100-01-01T00:00:00Z"}}
        await api(nc, "CONSUMER.CREATE.S.D", body)
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish(
            "$JS.API.CONSUMER.MSG.NEXT.S.D", b'{"batch": 1, "expires": 10000000000}', reply=inbox
        )
        await nc.flush()
        with pytest.raises(NatsTimeout):
            await sub.next_msg(timeout=0.3)
        await api(nc, "CONSUMER.PAUSE.S.D", {})
        assert (await sub.next_msg(timeout=1)).data == b"x"
        await nc.close()


async def test_a_pinned_client_keeps_the_messages_until_its_pin_times_out(tmp_path: Path) -> None:
    """Two workers on a ``pinned_client`` consumer: the first is pinned and gets everything while
    it keeps asking; the second waits; when the first stops, its pin times out and the second is
    pinned (the advisories tell who and why)."""
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        config = {
            "durable_name": "D",
            "ack_policy": "explicit",
            "priority_policy": "pinned_client",
            "priority_groups": ["workers"],
            "priority_timeout": S,
        }
        await api(nc, "CONSUMER.CREATE.S.D", {"stream_name": "S", "config": config})
        events: list[tuple[str, dict[str, Any]]] = []

        async def on(m: Any) -> None:
            events.append((m.subject.split(".")[4], json.loads(m.data)))

        await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.*.S.D", cb=on)
        got: dict[str, list[bytes]] = {"a": [], "b": []}
        pins: dict[str, str] = {}

        async def worker(name: str, stop: asyncio.Event) -> None:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            while not stop.is_set():
                req = {"batch": 1, "expires": S // 2, "group": "workers"}
                if name in pins:
                    req["id"] = pins[name]
                await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.D", json.dumps(req).encode(), reply=inbox)
                try:
                    m = await sub.next_msg(timeout=1)
                except NatsTimeout:
                    continue
                if m.headers and m.headers.get("Status"):
                    if m.headers["Status"] == "423":
                        pins.pop(name, None)  # a stale pin: ask for a new one
                    continue
                pins[name] = m.headers["Nats-Pin-Id"] if m.headers else ""
                got[name].append(m.data)
                await m.ack()
            await sub.unsubscribe()

        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(worker("a", stop_a))
        await asyncio.sleep(0.2)
        b = asyncio.create_task(worker("b", stop_b))
        for i in range(5):
            await js.publish("s.a", f"m{i}".encode())
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        assert len(got["a"]) == 5 and got["b"] == []
        stop_a.set()
        await a
        for i in range(5, 8):
            await js.publish("s.a", f"m{i}".encode())
        await wait_for(lambda: len(got["b"]) >= 3)
        stop_b.set()
        await b
        assert got["b"] == [b"m5", b"m6", b"m7"] and pins["a"] != pins["b"]
        kinds = [(e, body.get("reason"), body.get("pinned_id")) for e, body in events]
        assert kinds == [
            ("PINNED", None, pins["a"]),
            ("UNPINNED", "timeout", None),
            ("PINNED", None, pins["b"]),
        ]
        await nc.close()


async def test_fetches_that_time_out_leave_every_message_to_the_next(tmp_path: Path) -> None:
    """A fetch that times out (nats-py's own, or a raw request whose inbox is then dropped) must
    not capture the message published next: the next fetch gets each at once, not after the ack
    wait (30 s) would have sent it again."""
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        psub = await js.pull_subscribe("s.>", durable="D")
        for i in range(10):
            with pytest.raises(TimeoutError):
                await psub.fetch(1, timeout=0.05)
            inbox = nc.new_inbox()
            raw = await nc.subscribe(inbox)  # a requester that gives up and leaves
            await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.D", b'{"batch": 1}', reply=inbox)
            await nc.flush()
            await raw.unsubscribe()
            await nc.flush()
            await js.publish("s.a", f"m{i}".encode())
            (m,) = await psub.fetch(1, timeout=1)
            assert m.data == f"m{i}".encode() and m.metadata.num_delivered == 1
            await m.ack()
        info = await js.consumer_info("S", "D")
        assert info.num_waiting == 0 and info.num_ack_pending == 0 and info.num_redelivered == 0
        await nc.close()
