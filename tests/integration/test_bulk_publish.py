"""The bulk publish (``$JS.API.JETPY.PUBLISH.<stream>``, jetpy's API) against a real jetpy server
through nats-py, bodies made by ``protocol.bulk_publish.encode_request``: records stored in
order by the stream's rules (de-duplication, ``Nats-Expected-*``, limits) with one reply that
says what happened to each, durable before it leaves; bad requests refused whole with nothing
stored, and the server still serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

import jetpy
from jetpy.jetstream.api import bulk_publish
from jetpy.protocol.bulk_publish import HEADER, decode_request, encode_request, msg_id_header
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions, User

Record = tuple[bytes, bytes, bytes]


async def _publish(nc: Client, stream: str, body: bytes) -> dict[str, Any]:
    reply = await nc.request(f"$JS.API.JETPY.PUBLISH.{stream}", body, timeout=10)
    out: dict[str, Any] = json.loads(reply.data)
    assert out["type"] == "jetpy.api.v1.bulk_publish_response"
    return out


def _records(n: int, start: int = 0, prefix: bytes = b"w") -> list[Record]:
    return [
        (b"bp.%d" % (i % 3), msg_id_header(b"%s:%d" % (prefix, i)), b"payload %d" % i)
        for i in range(start, start + n)
    ]


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_records_stored_in_order_and_again_as_duplicates(server: Server, storage: str) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="BP", subjects=["bp.>"], storage=storage)
    await js.publish("bp.0", b"before", headers={"Nats-Msg-Id": "w:5"})  # seq 1: record 5's id
    recs = _records(3000)
    out = await _publish(nc, "BP", encode_request(recs))
    assert out["count"] == 3000 and out["errors"] == []
    assert out["stored"] == [{"index": 0, "count": 5, "seq": 2}, {"index": 6, "count": 2994, "seq": 7}]
    assert out["duplicates"] == [{"index": 5, "count": 1, "seq": 1}]
    for seq, i in ((2, 0), (6, 4), (7, 6), (3000, 2999)):
        m = await js.get_msg("BP", seq)
        assert (m.subject, m.data) == (recs[i][0].decode(), recs[i][2])
        assert m.headers == {"Nats-Msg-Id": f"w:{i}"}
    again = await _publish(nc, "BP", encode_request(recs))  # a retried request: nothing stored twice
    assert again["stored"] == [] and again["errors"] == []
    assert again["duplicates"] == [
        {"index": 0, "count": 5, "seq": 2},
        {"index": 5, "count": 1, "seq": 1},
        {"index": 6, "count": 2994, "seq": 7},
    ]
    assert (await js.stream_info("BP")).state.messages == 3000
    # a single publish of an id a bulk publish stored is a duplicate too: one rule for both
    ack = await js.publish("bp.1", b"x", headers={"Nats-Msg-Id": "w:7"})
    assert ack.duplicate and ack.seq == 8
    await nc.close()


async def test_stream_rules_per_record(server: Server) -> None:
    """Each record meets the rules a single publish of it would: a record failing its
    ``Nats-Expected-*`` check is refused alone (the reply says which, and why), the rest go on."""
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="R", subjects=["r.>"], max_msg_size=100, max_msgs_per_subject=2)
    recs: list[Record] = [
        (b"r.a", b"", b"one"),  # seq 1
        (b"r.a", b"NATS/1.0\r\nNats-Expected-Last-Sequence: 1\r\n\r\n", b"two"),  # seq 2
        (b"r.a", b"NATS/1.0\r\nNats-Expected-Last-Sequence: 1\r\n\r\n", b"three"),  # refused: last is 2
        (b"r.b", b"NATS/1.0\r\nNats-Expected-Stream: OTHER\r\n\r\n", b"four"),  # refused: wrong stream
        (b"r.b", b"", b"x" * 101),  # refused: max_msg_size
        (b"r.b", b"NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: 0\r\n\r\n", b"five"),  # seq 3
        (b"r.a", b"", b"six"),  # seq 4: r.a keeps 2 messages (seq 1 goes)
    ]
    out = await _publish(nc, "R", encode_request(recs))
    assert out["stored"] == [
        {"index": 0, "count": 2, "seq": 1},
        {"index": 5, "count": 2, "seq": 3},
    ]
    errs = [(e["index"], e["count"], e["error"]["err_code"]) for e in out["errors"]]
    assert errs == [(2, 1, 10071), (3, 1, 10060), (4, 1, 10054)]
    assert out["errors"][0]["error"]["description"] == "wrong last sequence: 2"
    st = (await js.stream_info("R")).state
    assert (st.messages, st.first_seq, st.last_seq) == (3, 2, 4)
    await nc.close()


async def test_bad_requests_are_refused_whole(server: Server) -> None:
    """Truncated, oversized-by-its-fields, garbled, wrong stream, a subject the stream does not
    take or that is not a publish subject: an error naming the problem, nothing stored, and the
    server serves on."""
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="BP", subjects=["bp.>"])
    await js.add_stream(name="OTHER", subjects=["other.>"])
    good = encode_request(_records(50))
    bad_hdr = bytearray(encode_request([(b"bp.1", b"NATS/1.0\r\nA: b\r\n\r\n", b"x")]))
    bad_hdr[HEADER.size + 8 : HEADER.size + 12] = (40).to_bytes(4, "little")  # header past its message
    cases: list[tuple[str, bytes, int, str]] = [
        ("BP", good[:-1], 10400, "the offsets say"),
        ("BP", good + b"extra", 10400, "the offsets say"),
        ("BP", good[:10], 10400, "shorter than its header"),
        ("BP", b"", 10400, "shorter than its header"),
        ("BP", b"JPBP" + bytes(12), 10400, "not a bulk publish request"),
        ("BP", b"{}" * 20, 10400, "not a bulk publish request"),
        ("BP", HEADER.pack(b"JPBP", 1, 0, 0, 0, 0), 10400, "without records"),
        ("BP", HEADER.pack(b"JPBP", 1, 0, 0, 10**9, 0), 10400, "do not fit"),
        ("BP", bytes(bad_hdr), 10400, "record 0: its header length"),
        ("BP", encode_request([(b"bp.1", b"NOPE/1.0\r\n\r\n", b"x")]), 10400, "record 0"),
        ("NOPE", good, 10059, "stream not found"),
        ("OTHER", good, 10400, "record 0: stream 'OTHER' does not take subject 'bp.0'"),
        ("BP", encode_request([*_records(3), (b"bp.*", b"", b"x")]), 10400, "record 3: 'bp.*'"),
        ("BP", encode_request([*_records(3), (b"", b"", b"x")]), 10400, "record 3"),
        ("BP", encode_request([(b"bp.\xff", b"", b"x")]), 10400, "not UTF-8"),
    ]
    for stream, body, code, text in cases:
        out = await _publish(nc, stream, body)
        assert out["error"]["err_code"] == code, (body[:40], out)
        assert text in out["error"]["description"], (body[:40], out)
    assert (await js.stream_info("BP")).state.messages == 0
    assert (await js.stream_info("OTHER")).state.messages == 0
    ok = await _publish(nc, "BP", good)
    assert ok["stored"] == [{"index": 0, "count": 50, "seq": 1}]
    await nc.close()


async def test_reference_encoder_and_decoder_agree() -> None:
    recs: list[Record] = [(b"a.b", b"", b""), (b"c", msg_id_header(b"1"), b"\x00\r\n"), (b"d", b"", b"y" * 9)]
    got = decode_request(encode_request(recs))
    assert got.subjects == [r[0] for r in recs]
    assert got.hdrs == [r[1] for r in recs]
    assert got.payloads == [r[2] for r in recs]


async def test_permissions_are_those_of_a_publish(tmp_path: Path) -> None:
    perms: dict[str, object] = {
        "publish": {"allow": ["$JS.API.>", "ok.>"]},
        "subscribe": {"allow": ["_INBOX.>"]},
    }
    users = [User(user="u", password="u", permissions=perms), User(user="admin", password="admin")]
    opts = ServerOptions(host="127.0.0.1", port=0, users=users, jetstream=True, store_dir=str(tmp_path))
    async with jetpy.Server(opts) as srv:
        admin = await nats.connect(srv.client_url, user="admin", password="admin")
        await admin.jetstream().add_stream(name="P", subjects=["ok.>", "secret.>"])
        nc = await nats.connect(srv.client_url, user="u", password="u")
        out = await _publish(nc, "P", encode_request([(b"ok.1", b"", b"a"), (b"secret.1", b"", b"b")]))
        assert out["error"]["err_code"] == 10403
        assert out["error"]["description"] == 'permissions violation for publish to "secret.1"'
        assert (await admin.jetstream().stream_info("P")).state.messages == 0
        out = await _publish(nc, "P", encode_request([(b"ok.1", b"", b"a"), (b"ok.2", b"", b"b")]))
        assert out["stored"] == [{"index": 0, "count": 2, "seq": 1}]
        await nc.close()
        await admin.close()


async def test_durable_before_the_reply_and_after_a_restart(tmp_path: Path) -> None:
    """A reply that says stored means on disk: the records and their ids survive a restart
    (a retried request after it is all duplicates)."""
    store = str(tmp_path / "js")
    recs = _records(2000, prefix=b"r")
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        await nc.jetstream().add_stream(name="BP", subjects=["bp.>"])
        out = await _publish(nc, "BP", encode_request(recs))
        assert out["stored"] == [{"index": 0, "count": 2000, "seq": 1}]
        await nc.close()
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        again = await _publish(nc, "BP", encode_request(recs))
        assert again["stored"] == [] and again["duplicates"] == [{"index": 0, "count": 2000, "seq": 1}]
        await nc.close()


async def test_large_request_is_stored_in_slices_while_others_are_served(server: Server) -> None:
    nc = await nats.connect(server.client_url, max_reconnect_attempts=0)
    js = nc.jetstream()
    await js.add_stream(name="BP", subjects=["bp.>"])
    body = encode_request(_records(6000))
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$JS.API.JETPY.PUBLISH.BP", body, reply=inbox)
    info = await js.account_info()  # answered while the request is stored
    assert info is not None
    out = json.loads((await sub.next_msg(timeout=10)).data)
    assert out["stored"] == [{"index": 0, "count": 6000, "seq": 1}]
    await nc.close()


async def test_stream_deleted_while_stored(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="BP", subjects=["bp.>"])
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$JS.API.JETPY.PUBLISH.BP", encode_request(_records(8000)), reply=inbox)
    await js.delete_stream("BP")
    out = json.loads((await sub.next_msg(timeout=10)).data)
    assert out["error"]["err_code"] == 10059, out
    await js.add_stream(name="BP", subjects=["bp.>"])
    assert (await js.stream_info("BP")).state.messages == 0
    ok = await _publish(nc, "BP", encode_request(_records(10)))
    assert ok["stored"] == [{"index": 0, "count": 10, "seq": 1}]
    await nc.close()


async def test_requests_past_the_queue_bound_are_refused_not_queued(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients sending faster than the stream stores do not grow the server's memory: past
    ``MAX_QUEUED_BYTES`` of waiting requests, one is refused (10167) with nothing stored."""
    monkeypatch.setattr(bulk_publish, "MAX_QUEUED_BYTES", 1)
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="BP", subjects=["bp.>"])
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    for k in range(3):  # one flush: the server reads them together
        await nc.publish(
            "$JS.API.JETPY.PUBLISH.BP", encode_request(_records(2000, prefix=b"%d" % k)), reply=inbox
        )
    outs = [json.loads((await sub.next_msg(timeout=10)).data) for _ in range(3)]
    stored = [o for o in outs if "error" not in o]
    busy = [o for o in outs if "error" in o]
    assert stored and busy, outs
    assert all(o["error"]["err_code"] == 10167 for o in busy)
    assert (await js.stream_info("BP")).state.messages == 2000 * len(stored)
    await nc.close()


async def test_bulk_publish_and_read_under_a_jetstream_domain(tmp_path: Path) -> None:
    """A server with a JetStream domain serves both bulk APIs under ``$JS.<domain>.API.`` too
    (the Spark source and sink's ``domain`` option sends there), and only the right shape."""
    from jetpy.protocol.bulk import decode_chunk

    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js"), jetstream_domain="hub") as srv:
        nc = await nats.connect(srv.client_url)
        try:
            await nc.jetstream().add_stream(name="DOM", subjects=["bp.>"])
            recs = _records(50)
            reply = await nc.request("$JS.hub.API.JETPY.PUBLISH.DOM", encode_request(recs), timeout=10)
            out = json.loads(reply.data)
            assert out["stored"] == [{"index": 0, "count": 50, "seq": 1}] and out["errors"] == []
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish("$JS.hub.API.JETPY.BULK.DOM", b'{"seq": 1}', reply=inbox)
            got: list[tuple[str, bytes]] = []
            while True:
                m = await sub.next_msg(timeout=5)
                assert m.data[:1] != b"{", m.data
                head, records = decode_chunk(m.data)
                got += [(r.subject, bytes(r.data)) for r in records]
                if head.last:
                    break
            assert got == [(s.decode(), d) for s, _, d in recs]
            # another domain's prefix has no responder; a subject of the wrong shape no answer
            with pytest.raises(nats.errors.NoRespondersError):
                await nc.request("$JS.other.API.JETPY.PUBLISH.DOM", encode_request(recs), timeout=1)
            with pytest.raises(nats.errors.TimeoutError):
                await nc.request("$JS.hub.API.JETPY.PUBLISH.DOM.x", encode_request(recs), timeout=0.5)
            assert (await nc.jetstream().stream_info("DOM")).state.messages == 50
        finally:
            await nc.close()


def _mixed_records(n: int) -> list[Record]:
    """Records that exercise every branch of the stream's rules, in runs and alone: ids (some
    repeated within the request), none, an empty one, headers that are not ``Nats-*``, a
    rollup, a TTL, an expected-last-sequence, a message too large."""
    recs: list[Record] = []
    for i in range(n):
        subj = b"in.%d" % (i % 5)
        k = i % 97
        if k == 10:
            hdr = msg_id_header(b"id:%d" % (i - 3))  # a duplicate of a record of this request
        elif k == 20:
            hdr = b""
        elif k == 30:
            hdr = b"NATS/1.0\r\nNats-Msg-Id: \r\n\r\n"
        elif k == 40:
            hdr = b"NATS/1.0\r\nX-Trace: %d\r\n\r\n" % i
        elif k == 50:
            hdr = b"NATS/1.0\r\nNats-Rollup: sub\r\nNats-Msg-Id: id:%d\r\n\r\n" % i
        elif k == 60:
            hdr = b"NATS/1.0\r\nNats-TTL: 1h\r\n\r\n"
        elif k == 70:
            hdr = b"NATS/1.0\r\nNats-Expected-Last-Sequence: 1\r\n\r\n"  # refused
        else:
            hdr = msg_id_header(b"id:%d" % i)
        recs.append((subj, hdr, b"y" * 300 if k == 80 else b"p%d" % i))
    return recs


def _header_dict(hdr: bytes) -> dict[str, str] | None:
    """The headers of a block, as nats-py takes them (it writes them back the same bytes)."""
    if not hdr:
        return None
    lines = hdr[len(b"NATS/1.0\r\n") : -4].decode().split("\r\n")
    return dict(line.split(": ", 1) for line in lines)


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_same_stream_as_single_publishes(server: Server, storage: str) -> None:
    """A bulk publish leaves the stream a run of single publishes of its records leaves (the
    same messages, sequences, duplicates and refusals) under every rule at once: the input
    subject transform, ``max_msg_size``, ``max_msgs_per_subject``, rollups, TTLs, the expected
    headers; and a consumer on it gets every message stored."""
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    recs = _mixed_records(1500)
    outcomes: dict[str, list[tuple[str, int]]] = {}
    for name in ("BULK", "ONE"):
        await js.add_stream(
            name=name,
            subjects=[f"{name}.in.>"],
            storage=storage,
            max_msg_size=200,
            max_msgs_per_subject=400,
            allow_rollup_hdrs=True,
            allow_msg_ttl=True,
            subject_transform=nats.js.api.SubjectTransform(src=f"{name}.in.>", dest=f"{name}.out.>"),
        )
    await js.add_consumer("BULK", durable_name="all", ack_policy="none")
    sub = await js.pull_subscribe_bind("all", stream="BULK")
    named = [(b"BULK." + s, h, p) for s, h, p in recs]
    out = await _publish(nc, "BULK", encode_request(named))
    bulk: list[tuple[str, int]] = [("", 0)] * len(recs)
    for r in out["stored"]:
        for j in range(r["count"]):
            bulk[r["index"] + j] = ("stored", r["seq"] + j)
    for r in out["duplicates"]:
        for j in range(r["count"]):
            bulk[r["index"] + j] = ("duplicate", r["seq"])
    for r in out["errors"]:
        for j in range(r["count"]):
            bulk[r["index"] + j] = (str(r["error"]["err_code"]), 0)
    outcomes["BULK"] = bulk
    one: list[tuple[str, int]] = []
    for s, h, p in recs:
        msg = await nc.request("ONE." + s.decode(), p, timeout=5, headers=_header_dict(h))
        ack = json.loads(msg.data)
        if "error" in ack:
            one.append((str(ack["error"]["err_code"]), 0))
        else:
            one.append(("duplicate" if ack.get("duplicate") else "stored", ack["seq"]))
    outcomes["ONE"] = one
    assert outcomes["BULK"] == outcomes["ONE"]
    kinds = {k for k, _ in one}
    assert kinds == {"stored", "duplicate", "10054", "10071"}
    a, b = await js.stream_info("BULK"), await js.stream_info("ONE")
    longer = len("BULK") - len("ONE")  # each stored subject's name is a byte longer
    assert (a.state.messages, a.state.first_seq, a.state.last_seq, a.state.bytes) == (
        b.state.messages,
        b.state.first_seq,
        b.state.last_seq,
        b.state.bytes + longer * b.state.messages,
    )
    seqs = [seq for kind, seq in one if kind == "stored"]
    for seq in seqs[-500:]:
        try:
            x = await js.get_msg("BULK", seq)
        except nats.js.errors.NotFoundError:
            with pytest.raises(nats.js.errors.NotFoundError):
                await js.get_msg("ONE", seq)
            continue
        y = await js.get_msg("ONE", seq)
        assert x.subject and y.subject
        assert (x.subject.split(".", 1)[1], x.data, x.headers) == (
            y.subject.split(".", 1)[1],
            y.data,
            y.headers,
        )
    got = 0
    while got < a.state.messages:
        got += len(await sub.fetch(1000, timeout=5))
    assert got == a.state.messages
    await nc.close()
