"""Batched direct get (nats-server 2.11, ADR-31) against a real jetpy server, through nats-py.

A batch reply is raw messages with ``Nats-Num-Pending`` / ``Nats-Last-Sequence`` and a final
``204 EOB`` status message; these tests read the raw frames with a plain subscription.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg

from jetpy.server.app import Server


async def _setup(server: Server, n: int = 10) -> Client:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="B", subjects=["b.>"], allow_direct=True)
    for i in range(1, n + 1):
        hdrs = {"X-I": str(i)} if i % 4 == 0 else None
        await js.publish(f"b.{'odd' if i % 2 else 'even'}", f"m{i}".encode(), headers=hdrs)
    return nc


async def _batch(nc: Client, req: dict[str, Any], stream: str = "B") -> list[Msg]:
    """Every message of one batched reply, up to and including the status that ends it."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.DIRECT.GET.{stream}", json.dumps(req).encode(), reply=inbox)
    out: list[Msg] = []
    while True:
        m = await sub.next_msg(timeout=5)
        out.append(m)
        if m.headers and m.headers.get("Status"):
            break
    await sub.unsubscribe()
    return out


def _h(m: Msg, key: str) -> str:
    assert m.headers is not None
    return m.headers[key]


async def test_batch_from_seq_with_pending_and_eob(server: Server) -> None:
    nc = await _setup(server)
    msgs = await _batch(nc, {"seq": 3, "batch": 4})
    data, eob = msgs[:-1], msgs[-1]
    assert [m.data for m in data] == [b"m3", b"m4", b"m5", b"m6"]
    assert [_h(m, "Nats-Sequence") for m in data] == ["3", "4", "5", "6"]
    assert [_h(m, "Nats-Num-Pending") for m in data] == ["7", "6", "5", "4"]
    assert [_h(m, "Nats-Last-Sequence") for m in data] == ["0", "3", "4", "5"]
    assert _h(data[0], "Nats-Stream") == "B"
    assert _h(data[0], "Nats-Subject") == "b.odd"
    assert _h(data[1], "X-I") == "4"  # the message's own headers come first
    assert "Nats-Time-Stamp" in (data[0].headers or {})
    assert eob.data == b""
    assert _h(eob, "Status") == "204"
    assert _h(eob, "Description") == "EOB"
    assert _h(eob, "Nats-Num-Pending") == "4"
    assert _h(eob, "Nats-Last-Sequence") == "6"
    await nc.close()


async def test_batch_end_of_stream_and_filter(server: Server) -> None:
    nc = await _setup(server)
    msgs = await _batch(nc, {"seq": 1, "batch": 100, "next_by_subj": "b.even"})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["2", "4", "6", "8", "10"]
    assert [_h(m, "Nats-Num-Pending") for m in msgs[:-1]] == ["4", "3", "2", "1", "0"]
    assert _h(msgs[-1], "Nats-Num-Pending") == "0"
    assert _h(msgs[-1], "Nats-Last-Sequence") == "10"
    # past the end: a single 404
    msgs = await _batch(nc, {"seq": 11, "batch": 5})
    assert len(msgs) == 1 and _h(msgs[0], "Status") == "404"
    await nc.close()


async def test_batch_max_bytes_up_to_seq_and_deleted(server: Server) -> None:
    nc = await _setup(server)
    js = nc.jetstream()
    await js.delete_msg("B", 5)
    # starting on a deleted sequence starts at the next message
    msgs = await _batch(nc, {"seq": 5, "batch": 2, "next_by_subj": ">"})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["6", "7"]
    msgs = await _batch(nc, {"seq": 5, "batch": 2})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["6", "7"]
    # max_bytes: stops once reached (subject + headers + payload, at least one message)
    msgs = await _batch(nc, {"seq": 1, "batch": 100, "max_bytes": 10})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["1", "2"]
    assert _h(msgs[-1], "Nats-Num-Pending") == "7"  # 3,4,6..10
    # up_to_seq bounds the batch and the pending counts
    msgs = await _batch(nc, {"seq": 1, "batch": 100, "up_to_seq": 4})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["1", "2", "3", "4"]
    assert [_h(m, "Nats-Num-Pending") for m in msgs[:-1]] == ["3", "2", "1", "0"]
    await nc.close()


async def test_batch_start_time(server: Server) -> None:
    nc = await _setup(server, n=4)
    js = nc.jetstream()
    await asyncio.sleep(0.05)
    m3 = await js.get_msg("B", 3)
    assert m3.headers is None or "Nats-Time-Stamp" not in m3.headers
    raw = await nc.request("$JS.API.STREAM.MSG.GET.B", b'{"seq":3}')
    t3 = json.loads(raw.data)["message"]["time"]
    msgs = await _batch(nc, {"start_time": t3, "batch": 10})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["3", "4"]
    msgs = await _batch(nc, {"start_time": "2999-01-01T00:00:00Z", "batch": 10})
    assert _h(msgs[0], "Status") == "404"
    await nc.close()


async def test_multi_last(server: Server) -> None:
    nc = await _setup(server)
    msgs = await _batch(nc, {"multi_last": ["b.*"]})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["9", "10"]
    eob = msgs[-1]
    assert _h(eob, "Status") == "204"
    assert _h(eob, "Nats-UpTo-Sequence") == "10"
    msgs = await _batch(nc, {"multi_last": ["b.*"], "up_to_seq": 6})
    assert [_h(m, "Nats-Sequence") for m in msgs[:-1]] == ["5", "6"]
    assert _h(msgs[-1], "Nats-UpTo-Sequence") == "6"
    msgs = await _batch(nc, {"multi_last": ["nothing.*"]})
    assert _h(msgs[0], "Status") == "404"
    await nc.close()


async def test_bad_batch_requests(server: Server) -> None:
    nc = await _setup(server, n=2)
    for req in (
        {"batch": 2},  # nothing named
        {"last_by_subj": "b.odd", "batch": 2},
        {"seq": 1, "start_time": "2024-01-01T00:00:00Z", "batch": 2},
        {"next_by_subj": "b.odd", "multi_last": ["b.*"]},
        {"seq": 1, "batch": "x"},
        {"seq": 1, "batch": 2, "next_by_subj": "b..x"},
    ):
        msgs = await _batch(nc, req)
        assert len(msgs) == 1, req
        assert _h(msgs[0], "Status") == "408", req
    # the single-message forms are unchanged
    single = await nc.request("$JS.API.DIRECT.GET.B", b'{"seq":2}')
    assert single.data == b"m2"
    assert single.headers is not None and "Nats-Num-Pending" not in single.headers
    await nc.close()


async def test_large_batch_is_one_burst(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="L", subjects=["l"], allow_direct=True)
    for i in range(0, 3000, 500):
        await asyncio.gather(*(js.publish("l", b"x" * 100) for _ in range(500)))
        del i
    msgs = await _batch(nc, {"seq": 1, "batch": 5000}, stream="L")
    assert len(msgs) == 3001
    assert [int(_h(m, "Nats-Sequence")) for m in msgs[:-1]] == list(range(1, 3001))
    await nc.close()
