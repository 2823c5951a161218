"""Streams through nats-py's JetStream API against a real jetpy server (embedded, file store)."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest
from nats.js.api import DiscardPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError

import jetpy
from jetpy.server.app import Server


async def test_add_stream_publish_info(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    info = await js.add_stream(name="ORDERS", subjects=["orders.>"])
    assert info.config.name == "ORDERS"
    assert info.state.messages == 0
    for i in range(10):
        ack = await js.publish(f"orders.{i % 3}", f"m{i}".encode())
        assert ack.stream == "ORDERS"
        assert ack.seq == i + 1
    si = await js.stream_info("ORDERS")
    assert si.state.messages == 10
    assert si.state.first_seq == 1
    assert si.state.last_seq == 10
    assert (await js.stream_info("ORDERS", subjects_filter=">")).state.subjects == {
        "orders.0": 4,
        "orders.1": 3,
        "orders.2": 3,
    }
    msg = await js.get_msg("ORDERS", 4)
    assert msg.data == b"m3"
    assert msg.subject == "orders.0"
    await nc.close()


async def test_idempotent_create_and_conflicts(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="A", subjects=["a.*"])
    await js.add_stream(name="A", subjects=["a.*"])  # identical config: fine
    with pytest.raises(BadRequestError) as e:
        await js.add_stream(name="A", subjects=["a.>"])
    assert e.value.err_code == 10058
    with pytest.raises(BadRequestError) as e2:
        await js.add_stream(name="B", subjects=["a.x"])
    assert e2.value.err_code == 10065
    with pytest.raises(NotFoundError):
        await js.stream_info("NOPE")
    await nc.close()


async def test_dedup_and_expected_headers(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="D", subjects=["d"])
    a1 = await js.publish("d", b"1", headers={"Nats-Msg-Id": "x"})
    a2 = await js.publish("d", b"1", headers={"Nats-Msg-Id": "x"})
    assert a1.seq == a2.seq == 1
    assert a2.duplicate
    with pytest.raises(BadRequestError) as e:
        await js.publish("d", b"2", headers={"Nats-Expected-Last-Sequence": "5"})
    assert e.value.err_code == 10071
    ok = await js.publish("d", b"2", headers={"Nats-Expected-Last-Sequence": "1"})
    assert ok.seq == 2
    with pytest.raises(BadRequestError) as e3:
        await js.publish("d", b"3", headers={"Nats-Expected-Stream": "OTHER"})
    assert e3.value.err_code == 10060
    await nc.close()


async def test_limits_discard_new_and_purge_delete(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="L", subjects=["l.*"], max_msgs=2, discard=DiscardPolicy.NEW))
    await js.publish("l.a", b"1")
    await js.publish("l.b", b"2")
    with pytest.raises(Exception) as e:
        await js.publish("l.a", b"3")
    assert "maximum messages exceeded" in str(e.value)
    await js.delete_msg("L", 1)
    si = await js.stream_info("L")
    assert si.state.messages == 1
    assert si.state.first_seq == 2
    await js.purge_stream("L")
    si = await js.stream_info("L")
    assert si.state.messages == 0
    assert si.state.last_seq == 2
    await nc.close()


async def test_no_stream_no_responders(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await js.publish("nobody.listens", b"x")
    await nc.close()


async def test_file_stream_survives_restart(tmp_path: Path) -> None:
    sd = str(tmp_path / "store")
    async with jetpy.Server(port=0, store_dir=sd) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="P", subjects=["p"], storage=StorageType.FILE)
        for i in range(50):
            await js.publish("p", str(i).encode(), headers={"Nats-Msg-Id": f"id{i}"})
        await nc.close()
    async with jetpy.Server(port=0, store_dir=sd) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        si = await js.stream_info("P")
        assert si.state.messages == 50
        assert (await js.get_msg("P", 50)).data == b"49"
        dup = await js.publish("p", b"49", headers={"Nats-Msg-Id": "id49"})
        assert dup.duplicate and dup.seq == 50
        assert (await js.publish("p", b"new")).seq == 51
        await nc.close()


async def test_deletes_and_purges_survive_restart(tmp_path: Path) -> None:
    sd = str(tmp_path / "store")
    async with jetpy.Server(port=0, store_dir=sd) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.*"])
        for i in range(10):
            await js.publish(f"r.{i % 2}", str(i).encode())
        await js.delete_msg("R", 3)
        await js.purge_stream("R", subject="r.1")
        await nc.close()
    async with jetpy.Server(port=0, store_dir=sd) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        si = await js.stream_info("R", subjects_filter=">")
        assert si.state.messages == 4  # r.0 had seqs 1,3,5,7,9; 3 deleted; r.1 purged
        assert si.state.subjects == {"r.0": 4}
        assert si.state.last_seq == 10
        with pytest.raises(NotFoundError):
            await js.get_msg("R", 3)
        await nc.close()
