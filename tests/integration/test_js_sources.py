"""Sources end to end, through nats-py against a real jetpy server: a stream aggregating others
(own sequences, Nats-Stream-Source, transforms per source, overlapping subjects), its info,
``sources`` updates, restarts without a copy twice or a message skipped, and origins created
again."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from js_copies import api, holds, messages, until
from nats.aio.client import Client

import jetpy
from jetpy.server.app import Server


def source_of(m: dict[str, Any]) -> list[str]:
    """The fields of a message's Nats-Stream-Source header."""
    hdrs = base64.b64decode(m.get("hdrs", "")).decode()
    for line in hdrs.split("\r\n"):
        if line.startswith("Nats-Stream-Source: "):
            return line.removeprefix("Nats-Stream-Source: ").split(" ")
    raise AssertionError(f"no Nats-Stream-Source in {hdrs!r}")


@pytest.fixture
async def nc(server: Server) -> AsyncIterator[Client]:
    c = await nats.connect(server.client_url)
    yield c
    await c.close()


async def test_a_stream_aggregates_its_sources(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
    await api(nc, "STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"]})
    await js.publish("a.1", b"a1", headers={"Nats-Msg-Id": "same", "Nats-Expected-Stream": "A"})
    await js.publish("b.1", b"b1", headers={"Nats-Msg-Id": "same"})
    cfg = {
        "name": "S",
        "sources": [
            {"name": "A"},
            {"name": "B", "subject_transforms": [{"src": "b.>", "dest": "from.b.>"}]},
            {"name": "A", "filter_subject": "a.2"},  # overlaps the first: a.2 arrives twice
        ],
    }
    created = await api(nc, "STREAM.CREATE.S", cfg)
    assert created["sources"] == [
        {"name": "A", "lag": 0, "active": -1},
        {"name": "B", "lag": 0, "active": -1, "subject_transforms": [{"src": "b.>", "dest": "from.b.>"}]},
        {"name": "A", "lag": 0, "active": -1, "filter_subject": "a.2"},
    ]
    assert "duplicate_window" not in created["config"]  # copies are not de-duplicated (2.15)
    await js.publish("a.2", b"a2")
    info = await holds(nc, "S", 4)
    got = await messages(nc, "S")
    assert [m["seq"] for m in got] == [1, 2, 3, 4]  # its own numbers
    by_subject = Counter(m["subject"] for m in got)
    assert by_subject == {"a.1": 1, "from.b.1": 1, "a.2": 2}
    headers = {tuple(source_of(m)[:5]) for m in got}
    assert headers == {
        ("A", "1", ">", ">", "a.1"),
        ("A", "2", ">", ">", "a.2"),
        ("A", "2", "a.2", ">", "a.2"),
        ("B", "1", "b.>", "from.b.>", "b.1"),
    }
    idents = {source_of(m)[0]: source_of(m)[5] for m in got}
    assert len(idents["A"]) == 8 and idents["A"] != idents["B"]
    for m in got:  # what the origin checked on publish is not checked again, nor kept
        assert "Nats-Expected" not in base64.b64decode(m.get("hdrs", "")).decode()
    by_name = {(s["name"], s.get("filter_subject", "")): s for s in info["sources"]}
    assert by_name["A", ""]["seq"] == 2 and by_name["A", "a.2"]["seq"] == 2 and by_name["B", ""]["seq"] == 1
    assert all(s["lag"] == 0 and 0 <= s["active"] < 5_000_000_000 for s in info["sources"])


async def test_a_copy_of_a_copy_names_only_its_own_origin(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
    await api(nc, "STREAM.CREATE.S1", {"name": "S1", "sources": [{"name": "A"}]})
    await api(nc, "STREAM.CREATE.S2", {"name": "S2", "sources": [{"name": "S1"}]})
    await js.publish("a.x", b"x", headers={"K": "v"})
    await holds(nc, "S2", 1)
    (m,) = await messages(nc, "S2")
    hdrs = base64.b64decode(m["hdrs"]).decode()
    assert hdrs.count("Nats-Stream-Source") == 1 and "K: v" in hdrs
    assert source_of(m)[:5] == ["S1", "1", ">", ">", "a.x"]


async def test_sources_can_be_added_and_removed(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
    await api(nc, "STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"]})
    await js.publish("a.1", b"1")
    await js.publish("b.1", b"1")
    await api(nc, "STREAM.CREATE.S", {"name": "S", "sources": [{"name": "A"}]})
    await holds(nc, "S", 1)
    both = await api(nc, "STREAM.UPDATE.S", {"name": "S", "sources": [{"name": "A"}, {"name": "B"}]})
    assert [s["name"] for s in both["sources"]] == ["A", "B"]
    await holds(nc, "S", 2)
    await api(nc, "STREAM.UPDATE.S", {"name": "S", "sources": [{"name": "B"}]})
    await js.publish("a.2", b"2")
    await js.publish("b.2", b"2")
    info = await holds(nc, "S", 3)
    assert [s["name"] for s in info["sources"]] == ["B"]
    # A again: it goes on after its last copy, found in the stream (a.2 only)
    await api(nc, "STREAM.UPDATE.S", {"name": "S", "sources": [{"name": "B"}, {"name": "A"}]})
    await holds(nc, "S", 4)
    assert Counter(m["subject"] for m in await messages(nc, "S")) == {"a.1": 1, "a.2": 1, "b.1": 1, "b.2": 1}


async def test_a_restart_copies_nothing_twice_and_skips_nothing(tmp_path: Path) -> None:
    store = str(tmp_path / "js")
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        for name in ("A", "B"):
            await api(nc, f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name.lower()}.>"]})
        await api(nc, "STREAM.CREATE.S", {"name": "S", "sources": [{"name": "A"}, {"name": "B"}]})
        for i in range(20):
            await js.publish(f"a.{i}", b"a")
            await js.publish(f"b.{i}", b"b")
        await holds(nc, "S", 40)
        await nc.close()
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        for i in range(20, 25):
            await js.publish(f"a.{i}", b"a")
        await holds(nc, "S", 45)
        await js.publish("b.20", b"b")
        await holds(nc, "S", 46)
        seen = Counter((source_of(m)[0], int(source_of(m)[1])) for m in await messages(nc, "S"))
        assert seen == Counter({**{("A", s): 1 for s in range(1, 26)}, **{("B", s): 1 for s in range(1, 22)}})
        await nc.close()


async def test_an_origin_created_again_is_copied_from_its_start(
    nc: Client, caplog: pytest.LogCaptureFixture
) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]})
    await js.publish("p.old", b"1")
    await api(nc, "STREAM.CREATE.S", {"name": "S", "sources": [{"name": "P"}]})
    await holds(nc, "S", 1)
    await api(nc, "STREAM.DELETE.P")
    await api(nc, "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]})
    await js.publish("p.new", b"2")
    await holds(nc, "S", 2, within=15)
    first, second = await messages(nc, "S")
    assert (second["subject"], source_of(second)[1]) == ("p.new", "1")
    assert source_of(first)[5] != source_of(second)[5]  # two incarnations of P
    assert "source stream \"P\" for stream '$G > S' was recreated" in caplog.text


async def test_a_source_the_stream_refuses_is_shown_and_tried_again(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
    await js.publish("a.1", b"x" * 100)
    cfg = {"name": "S", "sources": [{"name": "A"}], "max_msg_size": 50, "subjects": ["s"]}
    assert "error" not in await api(nc, "STREAM.CREATE.S", cfg)

    async def shown() -> bool:
        return bool((await api(nc, "STREAM.INFO.S"))["sources"][0].get("error"))

    await until(shown, within=5)
    err = (await api(nc, "STREAM.INFO.S"))["sources"][0]["error"]
    assert err["err_code"] == 10054  # message size exceeds maximum allowed
    await api(nc, "STREAM.UPDATE.S", {**cfg, "max_msg_size": -1})
    info = await holds(nc, "S", 1, within=20)
    assert "error" not in info["sources"][0]


async def test_where_a_source_starts(nc: Client) -> None:
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
    for i in range(1, 6):
        await js.publish(f"a.{i}", str(i).encode())
    await api(nc, "STREAM.CREATE.S1", {"name": "S1", "sources": [{"name": "A", "opt_start_seq": 4}]})
    await holds(nc, "S1", 2)
    assert [source_of(m)[1] for m in await messages(nc, "S1")] == ["4", "5"]
    t = (await api(nc, "STREAM.MSG.GET.A", {"seq": 3}))["message"]["time"]
    await api(nc, "STREAM.CREATE.S2", {"name": "S2", "sources": [{"name": "A", "opt_start_time": t}]})
    await holds(nc, "S2", 3)

    async def same() -> bool:
        return [source_of(m)[1] for m in await messages(nc, "S2")] == ["3", "4", "5"]

    await until(same)
