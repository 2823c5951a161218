"""Consumers through nats-py against a real jetpy server (embedded, file store): pull and push,
ordered, acks, redelivery, retention with consumers, durable state across restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy
from nats.js.errors import BadRequestError, NotFoundError, ServerError

import jetpy
from jetpy.server.app import Server

pytestmark = pytest.mark.asyncio


async def _js(server: Server) -> tuple[NATS, JetStreamContext]:
    nc = await nats.connect(server.client_url)
    return nc, nc.jetstream()


async def test_pull_fetch_ack_and_info(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="S", subjects=["s.>"])
    for i in range(20):
        await js.publish(f"s.{i % 2}", f"m{i}".encode())
    sub = await js.pull_subscribe("s.>", durable="D")
    msgs = await sub.fetch(5, timeout=2)
    assert [m.data for m in msgs] == [f"m{i}".encode() for i in range(5)]
    assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4, 5]
    assert [m.metadata.sequence.consumer for m in msgs] == [1, 2, 3, 4, 5]
    assert msgs[0].metadata.num_pending == 19
    assert msgs[-1].metadata.num_pending == 15
    assert msgs[0].subject == "s.0"
    for m in msgs[:3]:
        await m.ack()
    await msgs[3].ack_sync()  # double ack: the server confirms
    info = await js.consumer_info("S", "D")
    assert info.num_ack_pending == 1
    assert info.num_pending == 15
    assert info.delivered.consumer_seq == 5 and info.delivered.stream_seq == 5
    assert info.ack_floor.consumer_seq == 4 and info.ack_floor.stream_seq == 4
    await msgs[4].ack_sync()
    info = await js.consumer_info("S", "D")
    assert info.num_ack_pending == 0
    assert info.ack_floor.stream_seq == 5
    rest = await sub.fetch(100, timeout=1)
    assert len(rest) == 15
    await nc.close()


async def test_runs_of_acks_in_any_order_then_info(server: Server) -> None:
    """Plain acks are applied as runs: a run in any order, read back at once by a request on the
    same connection, gives what one-by-one acks give (floor only moved by the floor message)."""
    nc, js = await _js(server)
    await js.add_stream(name="R", subjects=["r"])
    for i in range(10):
        await js.publish("r", b"%d" % i)
    sub = await js.pull_subscribe("r", durable="D")
    msgs = await sub.fetch(10, timeout=2)
    for k in (2, 3, 5):  # above the floor: it stays
        await msgs[k].ack()
    info = await js.consumer_info("R", "D")
    assert info.num_ack_pending == 7 and info.ack_floor.consumer_seq == 0
    for k in (1, 0):  # the floor message last: the floor moves to the first gap
        await msgs[k].ack()
    info = await js.consumer_info("R", "D")
    assert info.num_ack_pending == 5 and info.ack_floor.stream_seq == 4
    await msgs[4].ack()
    await msgs[6].nak()  # a NAK among plain acks keeps its place in the order
    await nc.publish(msgs[6].reply, b"+ACK")  # then acked while queued for redelivery
    for k in (7, 8, 9):
        await msgs[k].ack()
    info = await js.consumer_info("R", "D")
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 10
    await nc.close()


async def test_fetch_times_out_when_empty(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="E", subjects=["e"])
    sub = await js.pull_subscribe("e", durable="D")
    with pytest.raises(TimeoutError):  # nats-py's own, or asyncio's when its deadline is spent
        await sub.fetch(1, timeout=0.5)
    with pytest.raises(TimeoutError):  # nats-py's own, or asyncio's when its deadline is spent
        await sub.fetch(10, timeout=0.5)
    await js.publish("e", b"late")
    msgs = await sub.fetch(10, timeout=1)
    assert [m.data for m in msgs] == [b"late"]
    await nc.close()


async def test_fetch_waits_for_new_messages(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="W", subjects=["w"])
    sub = await js.pull_subscribe("w", durable="D")

    async def later() -> None:
        await asyncio.sleep(0.2)
        await js.publish("w", b"x")

    task = asyncio.create_task(later())
    msgs = await sub.fetch(1, timeout=3)
    await task
    assert msgs[0].data == b"x"
    await nc.close()


async def test_nak_and_ack_wait_redelivery(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="R", subjects=["r"])
    await js.publish("r", b"one")
    sub = await js.pull_subscribe("r", durable="D", config=ConsumerConfig(ack_wait=0.5, max_deliver=3))
    m1 = (await sub.fetch(1, timeout=1))[0]
    assert m1.metadata.num_delivered == 1
    await m1.nak()
    m2 = (await sub.fetch(1, timeout=1))[0]
    assert m2.metadata.num_delivered == 2
    assert m2.metadata.sequence.stream == 1
    assert m2.metadata.sequence.consumer == 2
    # no ack: redelivered after ack_wait
    m3 = (await sub.fetch(1, timeout=2))[0]
    assert m3.metadata.num_delivered == 3
    info = await js.consumer_info("R", "D")
    assert info.num_redelivered == 1
    # max_deliver reached: not delivered again
    with pytest.raises(TimeoutError):  # nats-py's own, or asyncio's when its deadline is spent
        await sub.fetch(1, timeout=1.0)
    await nc.close()


async def test_term_and_in_progress(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="T", subjects=["t"])
    await js.publish("t", b"a")
    await js.publish("t", b"b")
    sub = await js.pull_subscribe("t", durable="D", config=ConsumerConfig(ack_wait=0.6))
    a, b = await sub.fetch(2, timeout=1)
    await a.term()
    for _ in range(3):
        await asyncio.sleep(0.3)
        await b.in_progress()
    info = await js.consumer_info("T", "D")
    assert info.num_ack_pending == 1
    assert info.num_redelivered == 0
    await b.ack_sync()
    info = await js.consumer_info("T", "D")
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 2
    await nc.close()


async def test_push_subscribe_and_queue(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="P", subjects=["p.*"])
    for i in range(10):
        await js.publish(f"p.{i}", str(i).encode())
    got: list[bytes] = []
    done = asyncio.Event()

    async def cb(msg: Msg) -> None:
        got.append(msg.data)
        await msg.ack()
        if len(got) == 15:
            done.set()

    await js.subscribe("p.*", durable="PUSH", cb=cb)
    for i in range(10, 15):
        await js.publish(f"p.{i}", str(i).encode())
    await asyncio.wait_for(done.wait(), 5)
    assert got == [str(i).encode() for i in range(15)]
    info = await js.consumer_info("P", "PUSH")
    assert info.push_bound
    await wait_acked(js, "P", "PUSH", 15)
    await nc.close()


async def wait_acked(js: JetStreamContext, stream: str, consumer: str, n: int) -> None:
    for _ in range(50):
        info = await js.consumer_info(stream, consumer)
        if info.ack_floor.stream_seq == n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"ack floor stuck at {info.ack_floor}")


async def test_ordered_consumer(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="O", subjects=["o.>"])
    for i in range(100):
        await js.publish(f"o.{i % 7}", str(i).encode())
    sub = await js.subscribe("o.>", ordered_consumer=True)
    seen = []
    for _ in range(100):
        m = await sub.next_msg(timeout=2)
        seen.append(int(m.data))
    assert seen == list(range(100))
    await nc.close()


async def test_deliver_policies(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="DP", subjects=["dp.*"])
    for i in range(6):
        await js.publish(f"dp.{i % 3}", str(i).encode())
    cases = {
        DeliverPolicy.ALL: [0, 1, 2, 3, 4, 5],
        DeliverPolicy.LAST: [5],
        DeliverPolicy.LAST_PER_SUBJECT: [3, 4, 5],
    }
    for i, (policy, want) in enumerate(cases.items()):
        sub = await js.pull_subscribe("dp.*", durable=f"C{i}", config=ConsumerConfig(deliver_policy=policy))
        msgs = await sub.fetch(10, timeout=0.5)
        assert [int(m.data) for m in msgs] == want, policy
    sub = await js.pull_subscribe(
        "dp.*",
        durable="SEQ",
        config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=4),
    )
    assert [int(m.data) for m in await sub.fetch(10, timeout=0.5)] == [3, 4, 5]
    sub = await js.pull_subscribe(
        "dp.*", durable="NEW", config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW)
    )
    await js.publish("dp.1", b"6")
    assert [int(m.data) for m in await sub.fetch(10, timeout=0.5)] == [6]
    await nc.close()


async def test_filter_subjects_and_api_errors(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="F", subjects=["f.>"])
    for s in ("f.a", "f.b", "f.c", "f.a"):
        await js.publish(s, s.encode())
    await js.add_consumer(
        "F", ConsumerConfig(durable_name="AB", filter_subjects=["f.a", "f.b"], ack_policy=AckPolicy.EXPLICIT)
    )
    sub = await js.pull_subscribe_bind("AB", "F")
    assert [m.subject for m in await sub.fetch(10, timeout=0.5)] == ["f.a", "f.b", "f.a"]
    with pytest.raises(NotFoundError):
        await js.consumer_info("F", "nope")
    with pytest.raises(BadRequestError) as e:
        await js.add_consumer("F", ConsumerConfig(durable_name="X", filter_subject="g.x"))
    assert e.value.err_code == 10093
    names = [c.name for c in await js.consumers_info("F")]
    assert names == ["AB"]
    assert await js.delete_consumer("F", "AB")
    with pytest.raises(NotFoundError):
        await js.consumer_info("F", "AB")
    await nc.close()


async def test_workqueue_and_interest_retention(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="WQ", subjects=["wq"], retention=RetentionPolicy.WORK_QUEUE)
    for i in range(5):
        await js.publish("wq", str(i).encode())
    sub = await js.pull_subscribe("wq", durable="W")
    for m in await sub.fetch(5, timeout=1):
        await m.ack_sync()
    assert (await js.stream_info("WQ")).state.messages == 0

    await js.add_stream(name="IN", subjects=["in"], retention=RetentionPolicy.INTEREST)
    await js.publish("in", b"nobody")  # no consumers: acknowledged, not kept
    assert (await js.stream_info("IN")).state.messages == 0
    a = await js.pull_subscribe("in", durable="A")
    b = await js.pull_subscribe("in", durable="B")
    await js.publish("in", b"both")
    (ma,) = await a.fetch(1, timeout=1)
    await ma.ack_sync()
    assert (await js.stream_info("IN")).state.messages == 1  # B has not acked
    (mb,) = await b.fetch(1, timeout=1)
    await mb.ack_sync()
    assert (await js.stream_info("IN")).state.messages == 0
    await nc.close()


async def test_durable_consumer_survives_restart(tmp_path: Path) -> None:
    store = str(tmp_path / "js")
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc, js = await _js(srv)
        await js.add_stream(name="K", subjects=["k"])
        for i in range(10):
            await js.publish("k", str(i).encode())
        sub = await js.pull_subscribe("k", durable="D")
        msgs = await sub.fetch(4, timeout=1)
        for m in msgs[:3]:
            await m.ack_sync()
        await nc.close()
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc, js = await _js(srv)
        info = await js.consumer_info("K", "D")
        assert info.ack_floor.stream_seq == 3
        assert info.num_ack_pending == 1
        sub = await js.pull_subscribe_bind("D", "K")
        got = [int(m.data) for m in await sub.fetch(10, timeout=1)]
        # the unacked fourth message comes back (redelivered at once or after ack_wait), then the rest
        assert got == [4, 5, 6, 7, 8, 9] or got == [3, 4, 5, 6, 7, 8, 9]
        await nc.close()


async def test_jsz_reports_consumers(tmp_path: Path) -> None:
    import json
    import urllib.request

    from jetpy.server.options import ServerOptions

    opts = ServerOptions(
        host="127.0.0.1", port=0, http_port=-1, jetstream=True, store_dir=str(tmp_path / "js")
    )
    async with jetpy.Server(opts) as srv:
        nc, js = await _js(srv)
        await js.add_stream(name="S", subjects=["s"])
        for _ in range(3):
            await js.publish("s", b"x")
        sub = await js.pull_subscribe("s", durable="D")
        (m,) = await sub.fetch(1, timeout=1)
        await m.ack_sync()
        url = srv.monitor_url + "/jsz?accounts=true&streams=true&consumers=true"
        raw = await asyncio.get_running_loop().run_in_executor(
            None, lambda: urllib.request.urlopen(url).read()
        )
        jsz = json.loads(raw)
        assert jsz["consumers"] == 1
        (detail,) = jsz["account_details"][0]["stream_detail"][0]["consumer_detail"]
        assert detail["name"] == "D" and detail["stream_name"] == "S"
        assert detail["num_pending"] == 2 and detail["ack_floor"]["stream_seq"] == 1
        assert "config" not in detail
        await nc.close()


async def test_ephemeral_cleanup_headers_only_and_update(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="H", subjects=["h"])
    await js.publish("h", b"payload!", headers={"X-Key": "v"})
    # an ephemeral pull consumer with a short inactive threshold goes away by itself
    info = await js.add_consumer("H", ConsumerConfig(inactive_threshold=0.3, ack_policy=AckPolicy.EXPLICIT))
    assert info.name and not info.config.durable_name
    await asyncio.sleep(0.8)
    with pytest.raises(NotFoundError):
        await js.consumer_info("H", info.name)
    # headers only: the body is dropped, its size is in Nats-Msg-Size
    sub = await js.pull_subscribe("h", durable="HO", config=ConsumerConfig(headers_only=True))
    (m,) = await sub.fetch(1, timeout=1)
    assert m.data == b""
    assert m.headers is not None and m.headers["Nats-Msg-Size"] == "8" and m.headers["X-Key"] == "v"
    # update: mutable fields change, immutable ones are refused
    new = await js.add_consumer(
        "H", ConsumerConfig(durable_name="HO", headers_only=True, description="now described")
    )
    assert new.config.description == "now described"
    with pytest.raises(ServerError) as e:
        await js.add_consumer("H", ConsumerConfig(durable_name="HO", deliver_policy=DeliverPolicy.NEW))
    assert e.value.err_code == 10012 and e.value.description == "deliver policy can not be updated"
    # deleting the stream takes its consumers with it
    await js.delete_stream("H")
    with pytest.raises(NotFoundError):
        await js.consumer_info("H", "HO")
    await nc.close()


async def test_replay_original_keeps_spacing(server: Server) -> None:
    nc, js = await _js(server)
    await js.add_stream(name="RO", subjects=["ro"])
    await js.publish("ro", b"1")
    await asyncio.sleep(0.4)
    await js.publish("ro", b"2")
    sub = await js.subscribe("ro", config=ConsumerConfig(replay_policy=nats.js.api.ReplayPolicy.ORIGINAL))
    loop = asyncio.get_running_loop()
    m1 = await sub.next_msg(timeout=2)
    t1 = loop.time()
    m2 = await sub.next_msg(timeout=2)
    gap = loop.time() - t1
    assert (m1.data, m2.data) == (b"1", b"2")
    assert 0.3 <= gap < 1.5, gap
    await nc.close()


async def test_deleted_message_is_not_delivered_after_a_stream_update(server: Server) -> None:
    """Consumers read new messages from the stream's recent-message cache: an update of the
    stream must not leave them holding a cache that no longer hears about deletes."""
    nc, js = await _js(server)
    await js.add_stream(name="U", subjects=["u"])
    sub = await js.pull_subscribe("u", durable="D")
    for i in range(3):
        await js.publish("u", str(i).encode())
    await js.update_stream(name="U", subjects=["u"], description="updated")
    assert await js.delete_msg("U", 2)
    got = [m.data for m in await sub.fetch(3, timeout=1)]
    assert got == [b"0", b"2"]
    await nc.close()
