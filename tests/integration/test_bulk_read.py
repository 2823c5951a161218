"""The bulk read (``$JS.API.JETPY.BULK.<stream>``, jetpy's API) against a real jetpy server,
through nats-py, every reply decoded by ``protocol.bulk.decode_chunk`` (which checks each
record's CRC): exactly the live messages of the range, filtered, paged by ``max_bytes``, from
file and memory streams, any ``allow_direct``; clear errors; other clients served meanwhile."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from jetpy.protocol.bulk import BulkFormatError, BulkRecord, ChunkHeader, decode_chunk
from jetpy.server.app import Server


async def _stream(nc: Client, name: str, n: int, storage: str = "file", **cfg: Any) -> None:
    js = nc.jetstream(publish_async_max_pending=5000)
    await js.add_stream(name=name, subjects=[f"{name.lower()}.>"], storage=storage, **cfg)
    for i in range(1, n + 1):
        hdrs = {"K": f"v{i}"} if i % 7 == 0 else None
        await js.publish_async(f"{name.lower()}.{['a', 'b', 'c'][i % 3]}", b"m%d" % i, headers=hdrs)
    await js.publish_async_completed()


async def _reply(nc: Client, stream: str, req: dict[str, Any] | bytes) -> tuple[list[ChunkHeader], list[Any]]:
    """Every message of one reply: the data messages' headers and records (or the error)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    body = req if isinstance(req, bytes) else json.dumps(req).encode()
    await nc.publish(f"$JS.API.JETPY.BULK.{stream}", body, reply=inbox)
    heads: list[ChunkHeader] = []
    out: list[Any] = []
    while True:
        m = await sub.next_msg(timeout=5)
        if m.data[:1] == b"{":
            out.append(json.loads(m.data))
            break
        h, recs = decode_chunk(m.data)
        heads.append(h)
        out.extend(recs)
        if h.last:
            break
    await sub.unsubscribe()
    return heads, out


async def _all(nc: Client, stream: str, **req: Any) -> list[BulkRecord]:
    """A whole range, request after request, as a reader does."""
    got: list[BulkRecord] = []
    seq = req.pop("seq", 1)
    up_to = req.get("up_to_seq", 0)
    while True:
        heads, recs = await _reply(nc, stream, {"seq": seq, **req})
        assert all(isinstance(r, BulkRecord) for r in recs), recs
        got.extend(recs)
        last = heads[-1]
        if last.next_seq > (up_to or last.last_seq) or last.next_seq > last.last_seq:
            return got
        assert last.next_seq > seq
        seq = last.next_seq


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_reads_exactly_the_live_messages(server: Server, storage: str) -> None:
    nc = await nats.connect(server.client_url)
    await _stream(nc, "BULK", 300, storage)  # allow_direct off: read all the same
    js = nc.jetstream()
    for seq in (1, 5, 6, 150, 299):
        await js.delete_msg("BULK", seq)
    recs = await _all(nc, "BULK")
    want = [i for i in range(1, 301) if i not in (1, 5, 6, 150, 299)]
    assert [r.seq for r in recs] == want
    r7 = next(r for r in recs if r.seq == 7)
    assert (r7.subject, r7.data) == ("bulk.b", b"m7")
    assert r7.hdr.startswith(b"NATS/1.0\r\n") and b"K: v7" in r7.hdr
    assert all(r.hdr == b"" for r in recs if r.seq % 7)
    info = await js.stream_info("BULK")
    assert recs[0].ts > 0 and recs[-1].seq == info.state.last_seq == 300
    # filters, a range, small pages
    recs = await _all(nc, "BULK", seq=10, up_to_seq=200, filter_subjects=["bulk.a", "bulk.c"], max_bytes=100)
    assert [r.seq for r in recs] == [i for i in range(10, 201) if i % 3 != 1 and i != 150]
    recs = await _all(nc, "BULK", filter_subjects=["bulk.*"])
    assert [r.seq for r in recs] == want
    assert await _all(nc, "BULK", filter_subjects=["nothing.here"]) == []
    await nc.close()


async def test_paging_and_headers(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    await _stream(nc, "PAGED", 50)
    heads, recs = await _reply(nc, "PAGED", {"seq": 1, "max_bytes": 1})
    assert [r.seq for r in recs] == [1]  # one record at least, then the reply ends
    assert heads[-1].last and heads[-1].next_seq == 2
    assert (heads[-1].first_seq, heads[-1].last_seq) == (1, 50)
    heads, recs = await _reply(nc, "PAGED", {"seq": 45})
    assert [r.seq for r in recs] == [45, 46, 47, 48, 49, 50] and heads[-1].next_seq == 51
    heads, recs = await _reply(nc, "PAGED", {"seq": 60})  # past the end: nothing yet
    assert recs == [] and heads[-1].last and heads[-1].next_seq == 60
    heads, recs = await _reply(nc, "PAGED", b"")  # an empty body reads from the start
    assert [r.seq for r in recs] == list(range(1, 51))
    await nc.close()


async def test_large_read_comes_in_bounded_messages(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream(publish_async_max_pending=5000)
    await js.add_stream(name="BIG", subjects=["big"])
    payload = b"x" * 1000
    for _ in range(12_000):  # ~12 MB
        await js.publish_async("big", payload)
    await js.publish_async_completed()
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$JS.API.JETPY.BULK.BIG", b'{"seq": 1, "max_bytes": 67108864}', reply=inbox)
    # while that reply is being made, another client's request is answered at once
    other = await nats.connect(server.client_url)
    t = time.monotonic()
    info = await other.request("$JS.API.STREAM.INFO.BIG", b"", timeout=5)
    assert json.loads(info.data)["state"]["messages"] == 12_000
    assert time.monotonic() - t < 0.5
    sizes, n = [], 0
    while True:
        m = await sub.next_msg(timeout=5)
        h, recs = decode_chunk(m.data)
        sizes.append(len(m.data))
        n += len(recs)
        if h.last:
            break
    assert n == 12_000 and len(sizes) >= 12
    assert max(sizes) <= 1024 * 1024 + 2 * 1100 + 40 + 4 * 1100  # about 1 MiB of records each
    await other.close()
    await nc.close()


async def test_errors(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    await _stream(nc, "ERR", 5)
    _, out = await _reply(nc, "NOPE", {})
    assert out[0]["error"]["err_code"] == 10059
    assert out[0]["type"] == "jetpy.api.v1.bulk_read_response"
    for bad in (b"not json", b'{"seq": -1}', b'{"max_bytes": "x"}'):
        _, out = await _reply(nc, "ERR", bad)
        assert out[0]["error"]["code"] == 400, (bad, out)
    wrong: list[dict[str, Any]] = [
        {"seq": 5, "up_to_seq": 2},
        {"filter_subjects": ["a..b"]},
        {"max_bytes": -1},
    ]
    for req in wrong:
        _, out = await _reply(nc, "ERR", req)
        assert out[0]["error"]["err_code"] == 10003, (req, out)
    await nc.close()


async def test_stream_deleted_while_read(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream(publish_async_max_pending=5000)
    await js.add_stream(name="GONE", subjects=["gone"])
    for _ in range(10_000):  # 40 MB: 40 turns of the loop to send
        await js.publish_async("gone", b"y" * 4000)
    await js.publish_async_completed()
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$JS.API.JETPY.BULK.GONE", b'{"seq": 1, "max_bytes": 67108864}', reply=inbox)
    other = await nats.connect(server.client_url)
    await other.jetstream().delete_stream("GONE")  # answered between two of the reply's messages
    n = 0
    while True:
        m = await sub.next_msg(timeout=5)
        if m.data[:1] == b"{":
            assert json.loads(m.data)["error"]["err_code"] == 10059
            break
        h, recs = decode_chunk(m.data)
        assert not h.last  # never a complete-looking reply
        n += len(recs)
    assert n < 10_000
    await other.close()
    await nc.close()


async def test_damaged_record_is_reported_not_skipped(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    await _stream(nc, "DMG", 20)
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$JS.API.JETPY.BULK.DMG", b"{}", reply=inbox)
    m = await sub.next_msg(timeout=5)
    data = bytearray(m.data)
    data[-10] ^= 0x01  # a bit flipped in the last record's payload
    with pytest.raises(BulkFormatError, match="checksum"):
        decode_chunk(bytes(data))
    await nc.close()


async def test_other_requests_interleave_with_many_readers(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    await _stream(nc, "MANY", 2000)
    results = await asyncio.gather(*(_all(nc, "MANY", max_bytes=2000) for _ in range(4)))
    assert all([r.seq for r in recs] == list(range(1, 2001)) for recs in results)
    await nc.close()
