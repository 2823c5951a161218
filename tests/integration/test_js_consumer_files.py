"""Consumer state loss is never silent: a durable consumer whose files are missing or damaged
when the server starts is reported (a log line naming the stream, the consumer, the file and
the reason) and either restarts from a stated, safe position or is kept offline.

* state (``o.dat``) missing, damaged or impossible: the consumer restarts from the first message
  it could ever have been meant to deliver (``Consumer.restart_position``), so nothing
  unacknowledged is skipped; a damaged file is kept as ``o.dat.damaged``;
* state pointing past the stream's last sequence: moved back to it, so newly stored messages are
  delivered;
* metadata (``meta.dat``) damaged or missing: only that consumer is offline, its files untouched;
  CONSUMER.INFO/CREATE answer 10195 naming the file and the reason, LIST names it under
  ``offline`` and ``missing``, NAMES lists it, an explicit DELETE removes it; the stream and the
  other consumers are served.

Embedded servers restarted on the same store dir. The kill -9 and random-damage runs are in
``tests/faults/test_consumer_files.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

import jetpy
from jetpy.cli.backup_protocol import backup_stream, restore_stream
from jetpy.store.base import ConsumerState
from jetpy.store.consumer_state import CONSUMER_MAGIC, read_consumer_state, write_framed_atomic

pytestmark = pytest.mark.asyncio

MSGS = 100
ACKED = 40  # D acked 1..40 (AckSync), delivered 41..60 without acking


def obs(store_dir: Path, consumer: str) -> Path:
    return store_dir / "jetstream" / "$G" / "streams" / "S" / "obs" / consumer


async def build(store_dir: Path) -> None:
    """Stream S (100 messages on s.1), durables D (40 acked, 20 more delivered) and E (none),
    and N (deliver new, created after the 100, then 10 more published: 101..110)."""
    async with jetpy.Server(port=0, store_dir=str(store_dir)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.*"])
        for i in range(MSGS):
            await js.publish("s.1", b"%d" % i)
        for name in ("D", "E"):
            await js.add_consumer("S", ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT))
        sub = await js.pull_subscribe("s.*", durable="D", stream="S")
        msgs = await sub.fetch(60, timeout=2)
        for m in msgs[:ACKED]:
            await m.ack_sync()
        await asyncio.sleep(1.2)  # N's creation is more than the restart clock margin after 1..100
        await js.add_consumer(
            "S",
            ConsumerConfig(durable_name="N", ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW),
        )
        for i in range(10):
            await js.publish("s.1", b"new%d" % i)
        await nc.close()


async def api(nc: Client, subject: str, body: bytes = b"") -> Any:
    return json.loads((await nc.request(subject, body, timeout=2)).data)


async def fetch_all(js: nats.js.JetStreamContext, durable: str) -> list[int]:
    sub = await js.pull_subscribe("s.*", durable=durable, stream="S")
    got: list[int] = []
    while True:
        try:
            msgs = await sub.fetch(200, timeout=0.5)
        except TimeoutError:  # nats-py raises both its own and the builtin one
            return got
        got += [m.metadata.sequence.stream for m in msgs]
        for m in msgs:
            await m.ack()


def errors(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


async def test_missing_state_restarts_from_the_start_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "js"
    await build(store)
    (obs(store, "D") / "o.dat").unlink()
    (obs(store, "N") / "o.dat").unlink()
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        log = errors(caplog)
        d_file, n_file = obs(store, "D") / "o.dat", obs(store, "N") / "o.dat"
        assert (
            f"consumer 'S > D' state file {d_file} is missing: restarting from stream sequence 1 (deliver policy all)"
            in log
        )
        assert (
            f"consumer 'S > N' state file {n_file} is missing: restarting from stream sequence 101 (deliver policy new)"
            in log
        )
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        info = await js.consumer_info("S", "D")
        assert (info.ack_floor.stream_seq, info.num_pending, info.num_ack_pending) == (0, 110, 0)
        assert await fetch_all(js, "D") == list(range(1, 111))  # everything again, nothing skipped
        assert await fetch_all(js, "N") == list(range(101, 111))
        await nc.close()
    assert read_consumer_state(d_file) is not None  # the new state was written


async def test_damaged_state_is_kept_aside_and_the_consumer_restarts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "js"
    await build(store)
    odat = obs(store, "D") / "o.dat"
    data = bytearray(odat.read_bytes())
    data[len(data) // 2] ^= 0x10
    odat.write_bytes(bytes(data))
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        log = errors(caplog)
        assert f"consumer 'S > D' state file {odat} is damaged (" in log
        assert (
            "checksum mismatch (offset 12)), kept as o.dat.damaged: restarting from stream sequence 1" in log
        )
        assert (obs(store, "D") / "o.dat.damaged").read_bytes() == bytes(data)
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        assert await fetch_all(js, "D") == list(range(1, 111))
        e = await js.consumer_info("S", "E")  # the other consumers are untouched
        assert e.num_pending == 110 and e.delivered.stream_seq == 0
        await nc.close()


async def test_impossible_state_is_treated_as_damaged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "js"
    await build(store)
    bad = ConsumerState(
        delivered_consumer_seq=5, delivered_stream_seq=5, ack_floor_consumer_seq=9, ack_floor_stream_seq=50
    )
    write_framed_atomic(obs(store, "D") / "o.dat", CONSUMER_MAGIC, msgspec.msgpack.encode(bad))
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        assert "ack floor stream sequence 50 is above the delivered stream sequence 5" in errors(caplog)
        nc = await nats.connect(srv.client_url)
        assert await fetch_all(nc.jetstream(), "D") == list(range(1, 111))
        await nc.close()


async def test_state_past_the_streams_end_is_moved_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "js"
    await build(store)
    past = ConsumerState(
        delivered_consumer_seq=500,
        delivered_stream_seq=500,
        ack_floor_consumer_seq=500,
        ack_floor_stream_seq=500,
    )
    write_framed_atomic(obs(store, "D") / "o.dat", CONSUMER_MAGIC, msgspec.msgpack.encode(past))
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        assert (
            "delivered stream sequence 500 is past the stream's last sequence 110): delivered position "
            "moved back to 110, messages stored from 111 on are delivered" in errors(caplog)
        )
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.publish("s.1", b"after")
        assert await fetch_all(js, "D") == [111]
        await nc.close()


async def test_damaged_metadata_takes_only_that_consumer_offline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "js"
    await build(store)
    meta = obs(store, "D") / "meta.dat"
    data = bytearray(meta.read_bytes())
    data[20] ^= 0x01
    meta.write_bytes(bytes(data))
    files = {p.name: p.read_bytes() for p in obs(store, "D").iterdir()}
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        assert f"consumer 'S > D' is offline: metadata file {meta} unreadable (" in errors(caplog)
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        info = await api(nc, "$JS.API.CONSUMER.INFO.S.D")
        err = info["error"]
        assert (err["code"], err["err_code"]) == (500, 10195)
        assert str(err["description"]).startswith(f"consumer is offline: {meta}: ")
        assert "checksum mismatch" in str(err["description"])
        listed = await api(nc, "$JS.API.CONSUMER.LIST.S")
        assert [c["name"] for c in listed["consumers"]] == ["E", "N"]
        assert listed["missing"] == ["D"] and list(listed["offline"]) == ["D"]
        assert listed["total"] == 2
        assert (await api(nc, "$JS.API.CONSUMER.NAMES.S"))["consumers"] == ["D", "E", "N"]
        create = {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        refused = await api(nc, "$JS.API.CONSUMER.CREATE.S.D", json.dumps(create).encode())
        assert refused["error"]["err_code"] == 10195
        # the stream and the other consumers are served
        assert (await js.stream_info("S")).state.messages == 110
        assert len(await fetch_all(js, "E")) == 110
        # nothing of D was touched
        assert {p.name: p.read_bytes() for p in obs(store, "D").iterdir()} == files
        # an explicit delete removes it
        assert (await api(nc, "$JS.API.CONSUMER.DELETE.S.D"))["success"] is True
        assert not obs(store, "D").exists()
        gone = await api(nc, "$JS.API.CONSUMER.INFO.S.D")
        assert gone["error"]["err_code"] == 10014
        await nc.close()


async def test_missing_metadata_takes_the_consumer_offline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "js"
    await build(store)
    (obs(store, "D") / "meta.dat").unlink()
    (obs(store, "E") / "meta.dat").unlink()  # E never delivered: a creation that never completed
    (obs(store, "E") / "o.dat").unlink()
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        log = errors(caplog)
        assert "consumer 'S > D' is offline: metadata file" in log and "meta.dat is missing" in log
        assert "consumer 'S > E' has no files (its creation never completed): ignored" in log
        nc = await nats.connect(srv.client_url)
        info = await api(nc, "$JS.API.CONSUMER.INFO.S.D")
        assert info["error"]["err_code"] == 10195
        assert (await api(nc, "$JS.API.CONSUMER.NAMES.S"))["consumers"] == ["D", "N"]
        await nc.close()


async def test_an_offline_consumer_keeps_an_interest_streams_messages(tmp_path: Path) -> None:
    """What an offline consumer wants is unknown (its config is in the damaged file): while it is
    offline, an interest stream removes nothing, not even what the other consumers acked."""
    store = tmp_path / "js"
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.*"], retention="interest")
        for name, filt in (("A", "s.*"), ("B", "s.1")):
            cfg = ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT, filter_subject=filt)
            await js.add_consumer("S", cfg)
        for i in range(10):
            await js.publish("s.1", b"%d" % i)
        await nc.close()
    (obs(store, "A") / "meta.dat").write_bytes(b"JPMT damaged")
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        assert await fetch_all(js, "B") == list(range(1, 11))
        await js.publish("s.2", b"new")  # B does not want it: dropped at once if A could not
        assert (await js.stream_info("S")).state.messages == 11
        await nc.close()


async def test_a_restored_consumers_state_survives_a_restart(tmp_path: Path) -> None:
    """A restore syncs the stream it fills, so its consumers' states are written as restored
    (never held back to what a commit has covered: that would redeliver everything)."""
    store = tmp_path / "js"
    await build(store)
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await backup_stream(nc, "S", tmp_path / "bk")
        await js.delete_stream("S")
        await restore_stream(nc, tmp_path / "bk")
        before = await js.consumer_info("S", "D")
        assert (before.ack_floor.stream_seq, before.delivered.stream_seq) == (ACKED, 60)
        await nc.close()
    async with jetpy.Server(port=0, store_dir=str(store)) as srv:
        nc = await nats.connect(srv.client_url)
        after = await nc.jetstream().consumer_info("S", "D")
        assert (after.ack_floor.stream_seq, after.delivered.stream_seq, after.num_ack_pending) == (
            ACKED,
            60,
            60 - ACKED,
        )
        await nc.close()
