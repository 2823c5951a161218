"""A publisher's window of JetStream publishes (many PUBs with replies to one subject in one read,
as ``publish_async`` sends them) stored as a run: every PubAck exactly as the same messages get
one at a time (de-duplication, ``Nats-Expected-*`` failures, discard new, two streams' subjects
in one read), the stream holding the same messages, and a core subscriber of the subject still
getting each message, in order."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from jetpy.server.app import Server

# (subject, headers or None, payload)
Pub = tuple[str, dict[str, str] | None, bytes]


async def _singly(nc: Client, pubs: list[Pub]) -> list[bytes]:
    """Each message published after the last one's answer: the single publish path."""
    out = []
    for subject, headers, payload in pubs:
        out.append((await nc.request(subject, payload, timeout=5, headers=headers)).data)
    return out


async def _window(nc: Client, pubs: list[Pub]) -> list[bytes]:
    """Every message published before any answer (one write, each with its own inbox)."""
    inbox = nc.new_inbox()
    got: dict[int, bytes] = {}
    done = asyncio.get_running_loop().create_future()

    async def on_ack(msg: Msg) -> None:
        got[int(msg.subject.rsplit(".", 1)[1])] = msg.data
        if len(got) == len(pubs) and not done.done():
            done.set_result(None)

    sub = await nc.subscribe(inbox + ".*", cb=on_ack)
    await nc.flush()
    for i, (subject, headers, payload) in enumerate(pubs):
        await nc.publish(subject, payload, reply=f"{inbox}.{i}", headers=headers)
    await nc.flush()
    await asyncio.wait_for(done, 10)
    await sub.unsubscribe()
    return [got[i] for i in range(len(pubs))]


async def _contents(nc: Client, stream: str) -> list[tuple[Any, ...]]:
    js = nc.jetstream()
    info = await js.stream_info(stream)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        m = await js.get_msg(stream, seq)
        out.append((m.seq, m.subject, m.data, m.headers))
    return out


async def _both_ways(nc: Client, streams: list[dict[str, Any]], pubs: list[Pub]) -> list[dict[str, Any]]:
    """Publish ``pubs`` one at a time into fresh ``streams``, then as one window into fresh
    streams of the same names; asserts the answers and the streams' contents are the same both
    ways, and returns the answers."""
    js = nc.jetstream()
    results = []
    for send in (_singly, _window):
        for cfg in streams:
            await js.add_stream(**cfg)
        acks = await send(nc, pubs)
        contents = [await _contents(nc, cfg["name"]) for cfg in streams]
        results.append((acks, contents))
        for cfg in streams:
            await js.delete_stream(cfg["name"])
    (one, one_contents), (run, run_contents) = results
    assert run == one
    assert run_contents == one_contents
    return [json.loads(a) for a in run]


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_duplicates_in_a_window(server: Server, storage: str) -> None:
    nc = await nats.connect(server.client_url)
    ids = ["a", "b", "a", None, "c", "b", "c", None, "d", "a"]
    pubs: list[Pub] = [
        ("w.x", {"Nats-Msg-Id": mid} if mid else None, b"m%d" % i) for i, mid in enumerate(ids * 20)
    ]
    acks = await _both_ways(nc, [{"name": "W", "subjects": ["w.>"], "storage": storage}], pubs)
    stored = [a["seq"] for a in acks if not a.get("duplicate")]
    assert stored == list(range(1, 4 + 2 * 20 + 1))  # a b c d once, the two without ids each time
    assert [a["seq"] for a in acks[:10]] == [1, 2, 1, 3, 4, 2, 4, 5, 6, 1]
    assert all(a["stream"] == "W" for a in acks)
    await nc.close()


async def test_expected_last_sequence_failing_mid_window(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    pubs: list[Pub] = [("e.x", None, b"%d" % i) for i in range(6)]
    pubs += [
        ("e.x", {"Nats-Expected-Last-Sequence": "2"}, b"wrong"),  # the stream is at 6 by then
        ("e.x", {"Nats-Msg-Id": "i1"}, b"after"),
        ("e.x", {"Nats-Expected-Last-Sequence": "7"}, b"right"),
    ]
    pubs += [("e.x", None, b"tail %d" % i) for i in range(5)]
    acks = await _both_ways(nc, [{"name": "E", "subjects": ["e.>"]}], pubs)
    assert acks[6]["error"]["err_code"] == 10071
    assert [a["seq"] for a in acks if "error" not in a] == list(range(1, 14))
    await nc.close()


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_discard_new_refusing_mid_window(server: Server, storage: str) -> None:
    nc = await nats.connect(server.client_url)
    cfg = {"name": "L", "subjects": ["l.>"], "storage": storage, "max_msgs": 5, "discard": "new"}
    pubs: list[Pub] = [("l.x", {"Nats-Msg-Id": f"n{i}"} if i % 2 else None, b"%d" % i) for i in range(9)]
    acks = await _both_ways(nc, [cfg], pubs)
    assert [a.get("seq") for a in acks[:5]] == [1, 2, 3, 4, 5]
    assert all(a["error"]["err_code"] == 10077 for a in acks[5:])
    await nc.close()


async def test_window_crossing_two_streams(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    streams = [
        {"name": "S1", "subjects": ["s1.>"]},
        {"name": "S2", "subjects": ["s2.>"], "storage": "memory"},
    ]
    pubs: list[Pub] = []
    for block in range(4):
        subject = "s1.a" if block % 2 == 0 else "s2.b"
        pubs += [(subject, {"Nats-Msg-Id": f"{block}-{i % 3}"}, b"%d.%d" % (block, i)) for i in range(5)]
    acks = await _both_ways(nc, streams, pubs)
    assert [(a["stream"], a["seq"], bool(a.get("duplicate"))) for a in acks[:10]] == [
        ("S1", 1, False),
        ("S1", 2, False),
        ("S1", 3, False),
        ("S1", 1, True),
        ("S1", 2, True),
        ("S2", 1, False),
        ("S2", 2, False),
        ("S2", 3, False),
        ("S2", 1, True),
        ("S2", 2, True),
    ]
    await nc.close()


async def test_core_subscriber_of_the_subject_sees_every_message_in_order(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    watcher = await nats.connect(server.client_url)
    seen: list[tuple[bytes, str | None]] = []

    async def on_msg(m: Msg) -> None:
        seen.append((m.data, (m.headers or {}).get("Nats-Msg-Id")))

    await watcher.subscribe("c.x", cb=on_msg)
    await watcher.flush()
    pubs: list[Pub] = [("c.x", {"Nats-Msg-Id": f"c{i % 7}"} if i % 2 else None, b"%d" % i) for i in range(40)]
    acks = await _both_ways(nc, [{"name": "C", "subjects": ["c.>"]}], pubs)
    assert sum(1 for a in acks if a.get("duplicate")) == 40 // 2 - 7
    await watcher.flush()
    want = [(p, (h or {}).get("Nats-Msg-Id")) for _, h, p in pubs]
    assert seen == want + want  # once per way
    await watcher.close()
    await nc.close()


async def test_async_publishes_acknowledged_in_order(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="A", subjects=["a.>"])
    futures = [
        await js.publish_async("a.x", b"%d" % i, headers={"Nats-Msg-Id": f"m{i % 300}"}) for i in range(1000)
    ]
    acks = await asyncio.gather(*futures)
    assert [(a.seq, bool(a.duplicate)) for a in acks] == [(i % 300 + 1, i >= 300) for i in range(1000)]
    assert (await js.stream_info("A")).state.messages == 300
    await nc.close()
