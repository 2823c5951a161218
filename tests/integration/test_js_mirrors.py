"""Mirrors end to end, through nats-py against a real jetpy server: what a mirror copies and how
(the origin's sequences, subjects, headers, timestamps), where it starts, what it does at a gap,
after a restart, when its origin goes or comes back, its info block and its errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from js_copies import api, holds, messages, until
from nats.aio.client import Client
from nats.errors import NoRespondersError

import jetpy
from jetpy.cli.backup_protocol import backup_stream, restore_stream
from jetpy.server.app import Server


@pytest.fixture
async def nc(server: Server) -> AsyncIterator[Client]:
    c = await nats.connect(server.client_url)
    yield c
    await c.close()


async def test_a_mirror_is_its_origin_message_for_message(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    await js.publish("o.a", b"1")
    await js.publish("o.b", b"2", headers={"X": "y", "Nats-Expected-Last-Sequence": "1"})
    created = await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
    assert created["mirror"] == {"name": "O", "lag": 0, "active": -1}
    assert "subjects" not in created["config"]  # a mirror takes no publishes of its own
    await holds(nc, "M", 2)
    for i in range(3, 8):
        await js.publish(f"o.{i}", str(i).encode())
    info = await holds(nc, "M", 7)
    ours, theirs = await messages(nc, "M"), await messages(nc, "O")
    # the header the origin checked on publish is not checked again, nor kept
    assert ours[1].pop("hdrs") != theirs[1].pop("hdrs")
    assert ours == theirs
    assert info["mirror"]["name"] == "O" and info["mirror"]["lag"] == 0
    assert 0 <= info["mirror"]["active"] < 5_000_000_000
    assert info["state"]["consumer_count"] == 0  # the mirror's consumer on O is not reported
    assert (await api(nc, "STREAM.INFO.O"))["state"]["consumer_count"] == 0
    with pytest.raises(NoRespondersError):  # a mirror has no subjects: nobody takes publishes
        await nc.request("M", b"x", timeout=1)


async def test_where_a_mirror_starts_and_what_it_takes(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    for i in range(1, 7):
        await js.publish(f"o.{'ab'[i % 2]}.{i}", str(i).encode())
    await api(nc, "STREAM.CREATE.M1", {"name": "M1", "mirror": {"name": "O", "opt_start_seq": 4}})
    info = await holds(nc, "M1", 3)
    assert (info["state"]["first_seq"], info["state"]["last_seq"], info["state"].get("num_deleted")) == (
        4,
        6,
        None,
    )
    t4 = (await api(nc, "STREAM.MSG.GET.O", {"seq": 5}))["message"]["time"]
    await api(nc, "STREAM.CREATE.M2", {"name": "M2", "mirror": {"name": "O", "opt_start_time": t4}})
    assert (await holds(nc, "M2", 2))["state"]["first_seq"] == 5
    await api(nc, "STREAM.CREATE.M3", {"name": "M3", "mirror": {"name": "O", "filter_subject": "o.a.*"}})
    info = await holds(nc, "M3", 3)
    assert [m["seq"] for m in await messages(nc, "M3")] == [2, 4, 6]  # the origin's numbers
    assert info["state"]["deleted"] == [3, 5]
    transforms = [{"src": "o.b.*", "dest": "copy.$1"}]
    await api(
        nc, "STREAM.CREATE.M4", {"name": "M4", "mirror": {"name": "O", "subject_transforms": transforms}}
    )
    await holds(nc, "M4", 3)
    assert [m["subject"] for m in await messages(nc, "M4")] == ["copy.1", "copy.3", "copy.5"]
    assert (await api(nc, "STREAM.INFO.M4"))["mirror"]["subject_transforms"] == transforms


async def test_a_gap_in_the_origin_reads_as_deleted_in_the_mirror(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"]})
    for i in range(10):
        await js.publish(f"g.{i}", b"g")
    await api(nc, "STREAM.MSG.DELETE.G", {"seq": 5})
    await api(nc, "STREAM.MSG.DELETE.G", {"seq": 7, "no_erase": True})
    await api(nc, "STREAM.PURGE.G", {"seq": 3})
    await api(nc, "STREAM.CREATE.GM", {"name": "GM", "mirror": {"name": "G"}})
    info = await holds(nc, "GM", 6)
    st = info["state"]
    assert (st["first_seq"], st["last_seq"], st["num_deleted"], st["deleted"]) == (3, 10, 2, [5, 7])


async def test_a_gap_while_copying_is_skipped_and_logged(
    nc: Client, caplog: pytest.LogCaptureFixture
) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"]})
    # a mirror that takes two messages, then refuses more (discard new): copying waits
    mirror = {"name": "GM", "mirror": {"name": "G"}, "max_msgs": 2, "discard": "new"}
    await api(nc, "STREAM.CREATE.GM", mirror)
    for i in range(6):
        await js.publish(f"g.{i}", b"g")
    await holds(nc, "GM", 2)
    # the origin loses 3 and 4 before they are copied
    await api(nc, "STREAM.MSG.DELETE.G", {"seq": 3})
    await api(nc, "STREAM.MSG.DELETE.G", {"seq": 4})
    await api(nc, "STREAM.UPDATE.GM", {**mirror, "max_msgs": -1})
    st = (await holds(nc, "GM", 4))["state"]
    assert (st["last_seq"], st["deleted"]) == (6, [3, 4])
    assert "skipped sequences 3-4 of 'G'" in caplog.text


async def test_a_mirror_goes_on_after_a_restart(tmp_path: Path) -> None:
    store = str(tmp_path / "js")
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "storage": "file"})
        for i in range(5):
            await js.publish(f"o.{i}", b"before")
        await holds(nc, "M", 5)
        await nc.close()
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        for i in range(5):
            await js.publish(f"o.{i}", b"after")
        await holds(nc, "M", 10)
        assert await messages(nc, "M") == await messages(nc, "O")
        await nc.close()


async def test_an_origin_that_appears_later_is_mirrored(nc: Client) -> None:
    created = await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "LATER"}})
    assert "error" not in created

    async def missing() -> bool:
        return bool((await api(nc, "STREAM.INFO.M"))["mirror"].get("error"))

    await until(missing)
    err = (await api(nc, "STREAM.INFO.M"))["mirror"]["error"]
    assert err == {"code": 404, "err_code": 10059, "description": "stream not found"}
    await api(nc, "STREAM.CREATE.LATER", {"name": "LATER", "subjects": ["later"]})
    await nc.jetstream().publish("later", b"x")
    info = await holds(nc, "M", 1, within=8)
    assert "error" not in info["mirror"]


async def test_an_origin_created_again_with_other_contents_stops_the_mirror(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    for i in range(3):
        await js.publish(f"o.{i}", b"first life")
    await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
    await holds(nc, "M", 3)
    await api(nc, "STREAM.DELETE.O")
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    for i in range(5):
        await js.publish(f"o.{i}", b"second life")

    async def reported() -> bool:
        return "diverged" in json.dumps((await api(nc, "STREAM.INFO.M"))["mirror"].get("error"))

    await until(reported, within=20)  # the health check notices the old consumer is gone
    info = await api(nc, "STREAM.INFO.M")
    assert info["mirror"]["error"]["err_code"] == 10029
    assert {m["data"] for m in await messages(nc, "M")} == {"Zmlyc3QgbGlmZQ=="}  # kept, not mixed
    # the origin created once more, this time after what the mirror holds: followed again
    await api(nc, "STREAM.DELETE.O")
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "first_seq": 4})
    await js.publish("o.4", b"third life")
    info = await holds(nc, "M", 4, within=20)
    assert "error" not in info["mirror"]


async def test_an_origin_restored_with_the_same_history_is_followed(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    await js.publish("o.1", b"1")
    await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
    await holds(nc, "M", 1)
    await api(nc, "STREAM.DELETE.O")
    # created again beyond what the mirror holds: no history to contradict
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "first_seq": 5})
    await js.publish("o.5", b"5")
    info = await holds(nc, "M", 2, within=20)
    assert "error" not in info["mirror"]
    assert [m["seq"] for m in await messages(nc, "M")] == [1, 5]


async def test_an_external_api_nobody_serves_is_an_error_at_once(nc: Client) -> None:
    cfg = {"name": "X", "mirror": {"name": "O", "external": {"api": "$JS.far.API", "deliver": "dl"}}}
    assert "error" not in await api(nc, "STREAM.CREATE.X", cfg)

    async def failed() -> bool:
        return bool((await api(nc, "STREAM.INFO.X"))["mirror"].get("error"))

    await until(failed, within=3)
    m = (await api(nc, "STREAM.INFO.X"))["mirror"]
    assert m["external"] == {"api": "$JS.far.API", "deliver": "dl"}
    assert m["error"] == {
        "code": 500,
        "err_code": 10029,
        "description": 'no responders for "$JS.far.API.CONSUMER.CREATE.O"',
    }


async def test_removing_the_mirror_promotes_the_stream(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    await js.publish("o.1", b"1")
    await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
    await holds(nc, "M", 1)
    changed = await api(nc, "STREAM.UPDATE.M", {"name": "M", "mirror": {"name": "P"}})
    assert changed["error"]["err_code"] == 10055
    promoted = await api(nc, "STREAM.UPDATE.M", {"name": "M", "subjects": ["m.>"]})
    assert "error" not in promoted and "mirror" not in promoted
    await js.publish("o.2", b"2")
    ack = await js.publish("m.own", b"mine")
    assert (ack.stream, ack.seq) == ("M", 2)
    await asyncio.sleep(0.3)
    assert [m["subject"] for m in await messages(nc, "M")] == ["o.1", "m.own"]


async def test_work_queue_origins_are_refused_until_built(nc: Client) -> None:
    await api(nc, "STREAM.CREATE.W", {"name": "W", "subjects": ["w"], "retention": "workqueue"})
    await nc.jetstream().publish("w", b"job")
    await api(nc, "STREAM.CREATE.WM", {"name": "WM", "mirror": {"name": "W"}})

    async def failed() -> bool:
        return bool((await api(nc, "STREAM.INFO.WM"))["mirror"].get("error"))

    await until(failed, within=3)
    err = (await api(nc, "STREAM.INFO.WM"))["mirror"]["error"]
    assert err["err_code"] == 10012 and "workqueue" in err["description"]
    assert (await api(nc, "STREAM.INFO.W"))["state"]["messages"] == 1  # nothing taken from it


async def test_consumers_of_a_mirror_get_the_copies_as_they_come(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "storage": "memory"})
    sub = await js.pull_subscribe("", durable="reader", stream="M")
    await js.publish("o.1", b"first")
    got = await sub.fetch(1, timeout=5)
    assert (got[0].subject, got[0].data, got[0].metadata.sequence.stream) == ("o.1", b"first", 1)
    pushed = await js.subscribe("", stream="M", ordered_consumer=True)
    await js.publish("o.2", b"second")
    seen = [(await pushed.next_msg(timeout=5)).data for _ in range(2)]
    assert seen == [b"first", b"second"]


async def test_a_restored_mirror_copies_on_and_a_restored_origin_is_followed(
    nc: Client, tmp_path: Path
) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
    for i in range(3):
        await js.publish(f"o.{i}", b"x")
    await holds(nc, "M", 3)
    await backup_stream(nc, "M", tmp_path / "m")
    await api(nc, "STREAM.DELETE.M")
    await js.publish("o.3", b"while the mirror was away")
    restored = await restore_stream(nc, tmp_path / "m")
    assert restored is not None
    await holds(nc, "M", 4)  # a restored mirror goes on from its state
    assert await messages(nc, "M") == await messages(nc, "O")
    # the origin backed up, deleted and restored: the same history, so the mirror follows it
    await backup_stream(nc, "O", tmp_path / "o")
    await api(nc, "STREAM.DELETE.O")
    await restore_stream(nc, tmp_path / "o")
    await js.publish("o.4", b"after the restore")
    info = await holds(nc, "M", 5, within=20)
    assert "error" not in info["mirror"]
    assert await messages(nc, "M") == await messages(nc, "O")


async def test_a_listener_on_the_deliver_subjects_takes_nothing_from_the_mirror(nc: Client) -> None:
    """The link listens on its deliver subject before it asks for the consumer, as nats-server's
    does: a subscriber already on ``$JS.M.>`` (here in the same account) sees copies go by but the
    mirror misses none and never starts over."""
    js = nc.jetstream(publish_async_max_pending=5000)
    seen = 0

    async def count(_msg: object) -> None:
        nonlocal seen
        seen += 1

    await nc.subscribe("$JS.M.>", cb=count)
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
    for i in range(2_000):
        await js.publish_async(f"o.{i % 7}", b"x")
    await js.publish_async_completed()
    await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
    info = await holds(nc, "M", 2_000)
    assert info["state"]["first_seq"] == 1 and info["state"]["last_seq"] == 2_000
    assert seen >= 2_000
