"""Stream features of nats-server 2.10-2.15, compared with the newest nats-server (2.15.1):
input subject transforms (every mapping function), republish (headers, ``headers_only``, the
source filter, with a transform in front), gets by ``start_time`` (MSG.GET and DIRECT.GET), and
``Nats-Expected-Last-Subject-Sequence-Subject``. The same requests go to jetpy and to the
reference; replies must agree once times are masked."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from conftest import JETPY_SERVER, Proc, newest_cmd, start_process

pytestmark = pytest.mark.differential

TRANSFORMS: list[tuple[str, str, list[str]]] = [
    ("a.*.*", "b.$2.$1", ["a.x.y"]),
    ("a.*.*", "b.{{wildcard(2)}}.{{wildcard(1)}}", ["a.x.y"]),
    ("p.*.*", "q.{{partition(5,1,2)}}.{{wildcard(1)}}", ["p.a.b", "p.foo.bar", "p.1.2", "p.xyz.q"]),
    ("p.*", "q.{{partition(3)}}.$1", ["p.a", "p.b", "p.c", "p.hello"]),
    ("s.*", "t.{{splitFromLeft(1,2)}}", ["s.abcdef", "s.a"]),
    ("s.*", "t.{{splitFromRight(1,2)}}", ["s.abcdef", "s.a"]),
    ("s.*", "t.{{sliceFromLeft(1,2)}}", ["s.abcde", "s.a"]),
    ("s.*", "t.{{sliceFromRight(1,2)}}", ["s.abcde", "s.ab"]),
    ("s.*", "t.{{split(1,-)}}", ["s.a-b-c", "s.-a--b-", "s.abc"]),
    ("s.*", "t.{{left(1,2)}}.{{right(1,2)}}", ["s.abcdef", "s.a"]),
    ("m.>", "n.>", ["m.a", "m.a.b.c"]),
    ("m.*.>", "n.$1.>", ["m.a.b", "m.a.b.c"]),
    ("", "pre.>", ["x", "x.y"]),
]


async def api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(f"$JS.API.{subject}", data, timeout=3)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


def masked(doc: Any) -> Any:
    """Volatile values (times, created) out of a reply."""
    if isinstance(doc, dict):
        return {k: ("<t>" if k in ("time", "created", "ts") else masked(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [masked(v) for v in doc]
    return doc


async def transform_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list[Any] = []
    for i, (src, dest, subjects) in enumerate(TRANSFORMS):
        name = f"T{i}"
        cfg = {
            "name": name,
            "subjects": [src] if src else ["x", "x.y"],
            "subject_transform": {"src": src, "dest": dest},
            "storage": "memory",
        }
        created = await api(nc, f"STREAM.CREATE.{name}", cfg)
        out.append(created.get("error"))
        for subject in subjects:
            await js.publish(subject, b"x")
            got = await api(nc, f"STREAM.MSG.GET.{name}", {"last_by_subj": ">"})
            out.append((subject, got["message"]["subject"]))
        await api(nc, f"STREAM.DELETE.{name}")
    await nc.close()
    return out


async def test_input_subject_transforms_store_what_nats_server_stores(
    jetpy_proc: Proc, newest_proc: Proc
) -> None:
    ours, ref = await asyncio.gather(transform_run(jetpy_proc.url), transform_run(newest_proc.url))
    assert ours == ref
    assert ("p.foo.bar", "q.0.foo") in ref  # the partition hash, pinned


def republished(m: Msg) -> tuple[str, dict[str, str], bytes]:
    headers = {k: ("<t>" if k == "Nats-Time-Stamp" else v) for k, v in (m.headers or {}).items()}
    return m.subject, headers, m.data


async def republish_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    got: list[Msg] = []

    async def collect(m: Msg) -> None:
        got.append(m)

    await nc.subscribe("rp.>", cb=collect)
    await nc.subscribe("rph.>", cb=collect)
    out: list[Any] = [
        (await api(nc, "STREAM.CREATE.R", {
            "name": "R", "subjects": ["in.>"], "republish": {"src": "in.a", "dest": "rp.a"}})).get("error"),
        (await api(nc, "STREAM.CREATE.H", {
            "name": "H", "subjects": ["h.>"], "republish": {"src": "h.>", "dest": "rph.>", "headers_only": True}
        })).get("error"),
        (await api(nc, "STREAM.CREATE.X", {
            "name": "X", "subjects": ["x.*"], "subject_transform": {"src": "x.*", "dest": "y.$1"},
            "republish": {"src": "y.*", "dest": "rp.y.$1"}})).get("error"),
    ]  # fmt: skip
    await js.publish("in.a", b"1", headers={"H": "1"})
    await js.publish("in.b", b"2")
    await js.publish("in.a", b"3")
    await js.publish("h.z", b"payload", headers={"A": "b"})
    await js.publish("h.z", b"more")
    await js.publish("x.q", b"transformed")
    await nc.flush()
    for _ in range(100):
        if len(got) >= 5:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    out.extend(republished(m) for m in sorted(got, key=lambda m: (m.subject, m.data)))
    await nc.close()
    return out


async def test_republish_sends_what_nats_server_sends(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(republish_run(jetpy_proc.url), republish_run(newest_proc.url))
    assert ours == ref
    assert len(ref) == 3 + 5


async def republish_rules_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    out: list[Any] = []
    for cfg in [
        {"name": "X", "subjects": ["x.*"], "republish": {"src": "zz.>", "dest": "rp.>"}},
        {"name": "X", "subjects": ["x.*"], "republish": {"src": "x.*", "dest": "x.b"}},
        {"name": "X", "subjects": ["x.*"], "subject_transform": {"src": "x.*", "dest": "y.$1"},
         "republish": {"src": "y.*", "dest": "x.$1"}},
    ]:  # fmt: skip
        out.append((await api(nc, "STREAM.CREATE.X", cfg)).get("error"))
        await api(nc, "STREAM.DELETE.X")
    await nc.close()
    return out


async def test_republish_rules_are_the_newest_ones(jetpy_proc: Proc, newest_proc: Proc) -> None:
    """2.15 takes a republish source outside the stream's subjects (2.9/2.10 refused it); the
    destination may still not feed the stream."""
    ours, ref = await asyncio.gather(
        republish_rules_run(jetpy_proc.url), republish_rules_run(newest_proc.url)
    )
    assert ours == ref
    assert ref[0] is None and ref[1] is not None


async def get_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await api(
        nc, "STREAM.CREATE.D", {"name": "D", "subjects": ["d.>"], "allow_direct": True, "storage": "memory"}
    )
    for i in range(3):
        await js.publish(f"d.{i % 2}", str(i).encode())
    second = (await api(nc, "STREAM.MSG.GET.D", {"seq": 2}))["message"]["time"]
    bodies: list[Any] = [
        {"start_time": second},
        {"start_time": second, "next_by_subj": "d.0"},
        {"start_time": "2100-01-01T00:00:00Z"},
        {"start_time": "2000-01-01T00:00:00Z"},
        {"start_time": "bad"},
        {"start_time": 5},
        {"start_time": None},
        {"start_time": second, "seq": 1},
        {"start_time": second, "last_by_subj": "d.1"},
    ]
    out: list[Any] = []
    for body in bodies:
        out.append(masked(await api(nc, "STREAM.MSG.GET.D", body)))
        reply = await nc.request("$JS.API.DIRECT.GET.D", json.dumps(body).encode(), timeout=3)
        out.append(republished(reply)[1:])
    await nc.close()
    return out


async def test_gets_by_start_time_answer_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(get_run(jetpy_proc.url), get_run(newest_proc.url))
    assert ours == ref


async def expected_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await api(nc, "STREAM.CREATE.E", {"name": "E", "subjects": ["e.>"], "storage": "memory"})
    for subject in ("e.a", "e.b", "e.a"):
        await js.publish(subject, b"x")
    out: list[Any] = []
    on = "Nats-Expected-Last-Subject-Sequence-Subject"
    for headers in [
        {"Nats-Expected-Last-Subject-Sequence": "2", on: "e.b"},
        {"Nats-Expected-Last-Subject-Sequence": "3", on: "e.b"},
        {"Nats-Expected-Last-Subject-Sequence": "3", on: "e.*"},
        {"Nats-Expected-Last-Subject-Sequence": "0", on: "e.zz"},
        {on: "e.b"},
        {"Nats-Expected-Last-Subject-Sequence": "5", on: "bad..subj"},
        {"Nats-Expected-Last-Subject-Sequence": "6"},
    ]:
        reply = await nc.request("e.c", b"x", headers=headers, timeout=3)
        out.append(json.loads(reply.data))  # the PubAck's spacing differs between versions
    await nc.close()
    return out


async def test_expected_last_subject_sequence_on_another_subject(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(expected_run(jetpy_proc.url), expected_run(newest_proc.url))
    assert ours == ref


API_CASES: list[tuple[str, Any]] = [
    ("STREAM.LEADER.STEPDOWN.S", None),
    ("STREAM.LEADER.STEPDOWN.NOPE", None),
    ("STREAM.PEER.REMOVE.S", {"peer": "x"}),
    ("STREAM.PEER.REMOVE.NOPE", None),
    ("CONSUMER.LEADER.STEPDOWN.S.C", None),
    ("CONSUMER.LEADER.STEPDOWN.S.NOPE", None),
    ("STREAM.SNAPSHOT.S", None),
    ("STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x"}),
    ("STREAM.RESTORE.S", None),
]


async def api_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    await api(nc, "STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
    await api(
        nc, "CONSUMER.CREATE.S.C", {"stream_name": "S", "config": {"name": "C", "ack_policy": "explicit"}}
    )
    out = [await api(nc, subject, body) for subject, body in API_CASES]
    await nc.close()
    return out


async def test_requests_a_single_server_cannot_serve_are_answered(
    jetpy_proc: Proc, newest_proc: Proc
) -> None:
    """Clustering requests (10010 on a single server) and snapshot/restore requests get nats-server's
    answers instead of leaving the requester to time out."""
    ours, ref = await asyncio.gather(api_run(jetpy_proc.url), api_run(newest_proc.url))
    assert ours == ref


async def limits_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    out: list[Any] = [(await api(nc, "INFO"))["limits"]]
    configs: list[dict[str, Any]] = [
        {"name": "A", "subjects": ["a"], "storage": "memory", "max_bytes": 200 * 1024},
        {"name": "B", "subjects": ["b"], "storage": "file", "max_bytes": 300 * 1024},
        {"name": "C", "subjects": ["c"], "storage": "memory"},
        {"name": "D", "subjects": ["d"], "storage": "file"},
        {"name": "E", "subjects": ["e"], "storage": "memory", "max_bytes": 90 * 1024},
        {"name": "F", "subjects": ["f"], "storage": "memory", "max_bytes": 20 * 1024},
    ]
    for cfg in configs:
        out.append((await api(nc, f"STREAM.CREATE.{cfg['name']}", cfg)).get("error"))
    for subject, most in (("c", 200), ("d", 400)):
        for i in range(most):
            ack = json.loads((await nc.request(subject, b"x" * 1000, timeout=3)).data)
            if "error" in ack:
                out.append((subject, i, ack))
                break
    info = await api(nc, "INFO")
    out.append({k: info[k] for k in ("memory", "storage", "reserved_memory", "reserved_storage")})
    await nc.close()
    return out


async def test_server_resource_limits_as_nats_server_enforces_them(tmp_path: Path) -> None:
    """``max_memory_store``/``max_file_store``: what streams reserve with ``max_bytes`` must fit
    (10028/10047), and publishes stop with 10023 once the streams use the limit."""
    procs = []
    for side, cmd in (("jetpy", JETPY_SERVER), ("ref", newest_cmd())):
        conf = tmp_path / f"{side}.conf"
        conf.write_text(
            f'jetstream {{ store_dir: "{tmp_path / side}", max_memory_store: 100KB, max_file_store: 200KB }}\n'
        )
        base = cmd if side == "jetpy" else cmd[:1]
        procs.append(
            start_process([*base, "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)], tmp_path / f"{side}.log")
        )
    try:
        ours, ref = await asyncio.gather(limits_run(procs[0].url), limits_run(procs[1].url))
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)
    assert ours == ref
    assert ref[-2] == ("d", 199, ref[-2][2]) and "insufficient resources" in json.dumps(ref[-2][2])
