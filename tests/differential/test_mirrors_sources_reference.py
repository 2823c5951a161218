"""Mirrors and sources compared with the newest nats-server (2.15.1): the same requests to both
servers, replies compared reply by reply once the values that differ by nature are masked
(times, ``active``, the origin identity in ``Nats-Stream-Source``, nats-server's ``cluster``,
``ts`` and ``_nats.*`` metadata).

Compared: create/info responses with their ``mirror``/``sources`` blocks, every copied message
(sequences, subjects, headers, payloads, and a mirror's timestamps, which are its origin's),
``Nats-Stream-Source`` values, what a mirror does at a gap, publishing to a mirror, a missing
origin's error, ``sources`` updates, and the refusals of invalid configs with their codes.

Deliberate difference, not compared: an ``external.api`` nothing serves is an error in jetpy's
info at once (nats-server shows nothing and retries silently).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import NoRespondersError

from conftest import Proc

pytestmark = pytest.mark.differential

S = 1_000_000_000


async def api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(f"$JS.API.{subject}", data, timeout=5)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


_TIMES = ("created", "time", "first_ts", "last_ts", "opt_start_time")


def masked(doc: Any) -> Any:
    """A reply without what differs by nature between two servers."""
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            if k in ("cluster", "ts"):  # jetpy writes neither (as nats-server 2.9)
                continue
            if k == "metadata" and isinstance(v, dict):
                v = {mk: mv for mk, mv in v.items() if not mk.startswith("_nats.")}
                if not v:
                    continue
            if k in _TIMES and isinstance(v, str):
                v = "<t>"
            elif k == "active" and isinstance(v, int):
                v = "never" if v == -1 else "heard"
            elif k == "hdrs" and isinstance(v, str):
                v = masked_headers(base64.b64decode(v).decode())
            out[k] = masked(v)
        return out
    if isinstance(doc, list):
        return [masked(v) for v in doc]
    return doc


def masked_headers(hdrs: str) -> str:
    lines = []
    for line in hdrs.split("\r\n"):
        if line.startswith("Nats-Stream-Source: "):
            fields = line.split(" ")
            if len(fields) == 7:  # the origin identity, random per stream
                fields[6] = "<identity>"
            line = " ".join(fields)
        lines.append(line)
    return "\r\n".join(lines)


async def holds(nc: Client, stream: str, n: int, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while (await api(nc, f"STREAM.INFO.{stream}"))["state"]["messages"] != n:
        assert time.monotonic() < deadline, f"{stream} never held {n}"
        await asyncio.sleep(0.05)


async def settled(nc: Client, stream: str, key: str, within: float = 10.0) -> dict[str, Any]:
    """The stream's info once every copy block has been heard from (active set)."""
    deadline = time.monotonic() + within
    while True:
        info = await api(nc, f"STREAM.INFO.{stream}", {"deleted_details": True})
        blocks = info.get(key) or []
        blocks = blocks if isinstance(blocks, list) else [blocks]
        if blocks and all(b["active"] >= 0 and b["lag"] == 0 for b in blocks):
            return info
        assert time.monotonic() < deadline, info
        await asyncio.sleep(0.05)


async def all_messages(nc: Client, stream: str) -> list[Any]:
    st = (await api(nc, f"STREAM.INFO.{stream}"))["state"]
    out = []
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        out.append(await api(nc, f"STREAM.MSG.GET.{stream}", {"seq": seq}))
    return out


def by_source(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """nats-server lists sources in map order: compare them sorted."""
    return sorted(sources, key=lambda s: json.dumps(s, sort_keys=True))


async def copy_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list[Any] = []
    out.append(
        masked(await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "allow_direct": True}))
    )
    await js.publish("o.a.1", b"1")
    await js.publish(
        "o.b.2", b"2", headers={"H": "v", "Nats-Msg-Id": "m2", "Nats-Expected-Last-Sequence": "1"}
    )
    await js.publish("o.a.3", b"3", headers={"Nats-Expected-Stream": "O"})
    out.append(masked(await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})))
    out.append(
        masked(
            await api(
                nc,
                "STREAM.CREATE.MT",
                {
                    "name": "MT",
                    "mirror": {"name": "O", "subject_transforms": [{"src": "o.a.*", "dest": "t.$1"}]},
                },
            )
        )
    )
    out.append(
        masked(await api(nc, "STREAM.CREATE.MS", {"name": "MS", "mirror": {"name": "O", "opt_start_seq": 2}}))
    )
    out.append(masked(await api(nc, "STREAM.CREATE.S1", {"name": "S1", "sources": [{"name": "O"}]})))
    sources = [
        {"name": "O", "filter_subject": "o.a.*"},
        {"name": "P", "subject_transforms": [{"src": "p.>", "dest": "q.>"}]},
    ]
    await api(nc, "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]})
    await js.publish("p.x", b"px")
    created = masked(await api(nc, "STREAM.CREATE.S2", {"name": "S2", "sources": sources}))
    created["sources"] = by_source(created["sources"])
    out.append(created)
    for stream, n in (("M", 3), ("MT", 2), ("MS", 2), ("S1", 3), ("S2", 3)):
        await holds(nc, stream, n)
    await js.publish("o.b.4", b"4")
    for stream, n in (("M", 4), ("MS", 3), ("S1", 4)):
        await holds(nc, stream, n)
    for stream in ("M", "MT", "MS"):
        info = masked(await settled(nc, stream, "mirror"))
        out.append(info)
        out.append(masked(await all_messages(nc, stream)))
    for stream in ("S1", "S2"):
        info = masked(await settled(nc, stream, "sources"))
        info["sources"] = by_source(info["sources"])
        out.append(info)
        msgs = masked(await all_messages(nc, stream))
        if stream == "S2":  # two sources: their copies interleave as they come
            msgs = sorted(msgs, key=lambda m: json.dumps(m["message"]["hdrs"]))
            for m in msgs:
                m["message"]["seq"] = "<seq>"
        out.append(msgs)
    origin_times = [m["message"]["time"] for m in await all_messages(nc, "O")]
    mirror_times = [m["message"]["time"] for m in await all_messages(nc, "M")]
    out.append(("mirror keeps the origin's times", mirror_times == origin_times))
    out.append((await api(nc, "CONSUMER.NAMES.O"))["consumers"])  # the copies' consumers are hidden
    try:
        await nc.request("M", b"x", timeout=1)
        out.append("answered")
    except NoRespondersError:
        out.append("no responders")
    await nc.close()
    return out


async def test_mirrors_and_sources_copy_as_nats_server_copies(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(copy_run(jetpy_proc.url), copy_run(newest_proc.url))
    for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
        assert a == b, i
    # pinned: the mirror keeps the origin's times, sources write the 2.15 header
    assert ("mirror keeps the origin's times", True) in ref
    assert "Nats-Stream-Source: O 1 > > o.a.1 <identity>" in json.dumps(ref)
    assert "Nats-Stream-Source: P 1 p.> q.> p.x <identity>" in json.dumps(ref)


async def gap_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list[Any] = []
    await api(nc, "STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"]})
    for i in range(10):
        await js.publish(f"g.{i}", b"g")
    out.append(await api(nc, "STREAM.MSG.DELETE.G", {"seq": 5}))
    out.append(await api(nc, "STREAM.MSG.DELETE.G", {"seq": 7, "no_erase": True}))
    out.append(await api(nc, "STREAM.PURGE.G", {"seq": 3}))
    out.append(masked(await api(nc, "STREAM.CREATE.GM", {"name": "GM", "mirror": {"name": "G"}})))
    out.append(masked(await api(nc, "STREAM.CREATE.GS", {"name": "GS", "sources": [{"name": "G"}]})))
    await holds(nc, "GM", 6)
    await holds(nc, "GS", 6)
    out.append(masked(await settled(nc, "GM", "mirror")))
    out.append(masked(await all_messages(nc, "GM")))
    out.append(masked(await settled(nc, "GS", "sources")))
    await nc.close()
    return out


async def test_a_gap_in_the_origin_as_nats_server_leaves_it(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(gap_run(jetpy_proc.url), gap_run(newest_proc.url))
    assert ours == ref
    assert ref[5]["state"]["deleted"] == [5, 7]


async def missing_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    out: list[Any] = []
    out.append(masked(await api(nc, "STREAM.CREATE.NM", {"name": "NM", "mirror": {"name": "NOPE"}})))
    out.append(masked(await api(nc, "STREAM.CREATE.NS", {"name": "NS", "sources": [{"name": "NOPE"}]})))
    deadline = time.monotonic() + 10
    while True:
        m = (await api(nc, "STREAM.INFO.NM"))["mirror"]
        s = (await api(nc, "STREAM.INFO.NS"))["sources"][0]
        if "error" in m and "error" in s:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    out.append(masked(m))
    out.append(masked(s))
    await nc.close()
    return out


async def test_a_missing_origin_is_reported_as_nats_server_reports_it(
    jetpy_proc: Proc, newest_proc: Proc
) -> None:
    ours, ref = await asyncio.gather(missing_run(jetpy_proc.url), missing_run(newest_proc.url))
    assert ours == ref
    assert ref[2]["error"] == {"code": 404, "err_code": 10059, "description": "stream not found"}


async def update_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list[Any] = []
    for name in ("A", "B"):
        await api(nc, f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name.lower()}.>"]})
        await js.publish(f"{name.lower()}.1", name.encode())
    await api(nc, "STREAM.CREATE.U", {"name": "U", "sources": [{"name": "A"}]})
    await holds(nc, "U", 1)
    upd = masked(await api(nc, "STREAM.UPDATE.U", {"name": "U", "sources": [{"name": "A"}, {"name": "B"}]}))
    upd["sources"] = by_source(upd["sources"])
    out.append(upd)
    await holds(nc, "U", 2)
    upd = masked(await api(nc, "STREAM.UPDATE.U", {"name": "U", "sources": [{"name": "B"}]}))
    out.append(upd)
    await js.publish("a.2", b"A")
    await js.publish("b.2", b"B")
    await holds(nc, "U", 3)
    info = masked(await settled(nc, "U", "sources"))
    out.append(info)
    await api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "A"}})
    await holds(nc, "M", 2)
    out.append(
        masked(await api(nc, "STREAM.UPDATE.M", {"name": "M", "mirror": {"name": "A"}, "max_msgs": 10}))
    )
    out.append(await api(nc, "STREAM.UPDATE.M", {"name": "M", "mirror": {"name": "B"}}))
    out.append(await api(nc, "STREAM.UPDATE.A", {"name": "A", "subjects": ["a.>"], "mirror": {"name": "B"}}))
    promoted = masked(await api(nc, "STREAM.UPDATE.M", {"name": "M", "subjects": ["m.>"]}))
    out.append(promoted)
    await nc.close()
    return out


async def test_updates_as_nats_server_takes_them(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(update_run(jetpy_proc.url), update_run(newest_proc.url))
    for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
        assert a == b, i


async def ttl_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "allow_msg_ttl": True})
    for name, cfg in (
        ("M", {"mirror": {"name": "O"}}),
        ("MT", {"mirror": {"name": "O"}, "allow_msg_ttl": True}),
        ("S", {"sources": [{"name": "O"}]}),
        ("ST", {"sources": [{"name": "O"}], "allow_msg_ttl": True}),
    ):
        await api(nc, f"STREAM.CREATE.{name}", {"name": name, **cfg})
    await js.publish("o.short", b"x", headers={"Nats-TTL": "1s"})
    await js.publish("o.long", b"y")
    for name in ("M", "MT", "S", "ST"):
        await holds(nc, name, 2)
    await asyncio.sleep(2.5)
    out = [
        (name, (await api(nc, f"STREAM.INFO.{name}"))["state"]["messages"])
        for name in ("O", "M", "MT", "S", "ST")
    ]
    await nc.close()
    return out


async def test_copies_with_a_ttl_expire_where_nats_server_expires_them(
    jetpy_proc: Proc, newest_proc: Proc
) -> None:
    """A copied ``Nats-TTL`` is kept in the headers; the copy expires only in a stream that
    allows message TTLs (2.15.1: the others keep it)."""
    ours, ref = await asyncio.gather(ttl_run(jetpy_proc.url), ttl_run(newest_proc.url))
    assert ours == ref
    assert ref == [("O", 1), ("M", 2), ("MT", 1), ("S", 2), ("ST", 1)]


BAD: list[dict[str, Any]] = [
    {"name": "B1", "subjects": ["m"], "mirror": {"name": "X"}},
    {"name": "B2", "mirror": {"name": "X"}, "sources": [{"name": "Y"}]},
    {"name": "B3", "mirror": {"name": "X"}, "first_seq": 5},
    {"name": "B4", "mirror": {"name": "X", "filter_subject": "a", "subject_transforms": [{"src": "b", "dest": "c"}]}},
    {"name": "B5", "mirror": {"name": "a.b"}},
    {"name": "B6", "mirror": {"name": "X", "subject_transforms": [{"src": "a.>", "dest": "b.>"}, {"src": "a.b", "dest": "c"}]}},
    {"name": "B7", "mirror": {"name": "X", "subject_transforms": [{"src": "a.*", "dest": "c.{{wildcard(2)}}"}]}},
    {"name": "B8", "mirror": {"name": "X"}, "subject_delete_marker_ttl": 5 * S, "allow_msg_ttl": True},
    {"name": "B9", "subjects": ["b9"], "mirror_direct": True},
    {"name": "B10", "sources": [{"name": ""}]},
    {"name": "B11", "sources": [{"name": "X"}, {"name": "X"}]},
    {"name": "B12", "sources": [{"name": "X", "filter_subject": "a", "subject_transforms": [{"src": "b", "dest": "c"}]}]},
    {"name": "B13", "sources": [{"name": "X", "subject_transforms": [{"src": "a..b", "dest": "c"}]}]},
    {"name": "B14", "sources": [{"name": "X", "subject_transforms": [{"src": "a.*", "dest": "c.{{wildcard(2)}}"}]}]},
    {"name": "B15", "sources": [{"name": "X", "subject_transforms": [{"src": "a.>", "dest": ""}, {"src": "a.b", "dest": ""}]}]},
    {"name": "B16", "sources": [{"name": "X", "external": {"api": "$JS.API", "deliver": "dl"}}]},
    {"name": "B17", "sources": [{"name": "X", "external": {"api": "$JS.x.API", "deliver": "dl.*"}}]},
    {"name": "B18", "mirror": {"name": "X", "external": {"api": "$JS.*.API"}}},
    {"name": "B19", "mirror": {"name": "BIG"}, "max_msg_size": 10},
    {"name": "B20", "sources": [{"name": "BIG"}], "max_msg_size": 10},
    {"name": "B21", "mirror": {"name": "BIG"}, "mirror_direct": True, "pedantic": True},
    {"name": "CYC", "subjects": ["cyc.>"], "sources": [{"name": "LOOP"}]},
]  # fmt: skip


async def refusals_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    out: list[Any] = []
    await api(nc, "STREAM.CREATE.BIG", {"name": "BIG", "subjects": ["big"], "max_msg_size": 100})
    await api(nc, "STREAM.CREATE.LOOP", {"name": "LOOP", "subjects": ["loop.>"]})
    for cfg in BAD:
        out.append((cfg["name"], (await api(nc, f"STREAM.CREATE.{cfg['name']}", cfg)).get("error")))
    # a cycle: LOOP sourcing CYC, which sources LOOP
    loop = {"name": "LOOP", "subjects": ["loop.>"], "sources": [{"name": "CYC"}]}
    out.append(("LOOP", (await api(nc, "STREAM.UPDATE.LOOP", loop)).get("error")))
    await nc.close()
    return out


async def test_invalid_configs_are_refused_as_nats_server_refuses_them(
    jetpy_proc: Proc, newest_proc: Proc
) -> None:
    ours, ref = await asyncio.gather(refusals_run(jetpy_proc.url), refusals_run(newest_proc.url))
    for a, b in zip(ours, ref, strict=True):
        assert a == b
