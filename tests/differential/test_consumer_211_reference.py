"""Consumer features of nats-server 2.11+, compared with the newest nats-server (2.15.1) reply by
reply: consumer pause (``pause_until``, ``CONSUMER.PAUSE``, what a paused consumer answers and
sends, the pause advisories), priority groups (config checks and their codes, the pull request
fields and their status lines, ``pinned_client`` with ``Nats-Pin-Id``, 423 and ``CONSUMER.UNPIN``,
``overflow``, ``prioritized``, ConsumerInfo's ``priority_groups``, the pinned/unpinned
advisories), and pull requests as 2.10+ take them (odd numbers, ``409 Batch Completed``, ``408
Requests Pending``, ``no_wait`` endings, heartbeats, requesters that are gone).

The same requests go to jetpy and to the reference. What differs by nature is masked: times,
advisory ids, pin ids (replaced by ``<pin1>``, ``<pin2>``... in order of appearance), the
``_nats.*`` metadata nats-server adds, ``pause_remaining`` (kept as "is there some"), and the
detail of a 10025 that Go's JSON decoder words itself (the code and err_code are compared)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout

from conftest import Proc

pytestmark = pytest.mark.differential

S = 1_000_000_000
FAR = "2100-01-01T00:00:00Z"
TIME_KEYS = {"created", "ts", "timestamp", "last_active"}
# 10025 descriptions both servers word alike (the rest is Go's JSON decoder speaking)
SAME_WORDS = ("consumer group not specified", "unexpected end of JSON input", "unknown field")


class Masks:
    """Replaces pin ids by ``<pin1>``, ``<pin2>``... in order of appearance."""

    def __init__(self) -> None:
        self.pins: dict[str, str] = {}

    def pin(self, value: str) -> str:
        if not value:
            return value
        return self.pins.setdefault(value, f"<pin{len(self.pins) + 1}>")

    def doc(self, doc: Any) -> Any:
        if isinstance(doc, list):
            return [self.doc(v) for v in doc]
        if not isinstance(doc, dict):
            return doc
        out: dict[str, Any] = {}
        for k, v in doc.items():
            if k in TIME_KEYS or k == "id":
                out[k] = "<>"
            elif k == "pinned_ts":
                out[k] = v if v == "0001-01-01T00:00:00Z" else "<ts>"
            elif k in ("pinned_client_id", "pinned_id"):
                out[k] = self.pin(v)
            elif k == "pause_remaining":
                out[k] = v > 0
            elif k == "metadata":
                kept = {mk: mv for mk, mv in v.items() if not mk.startswith("_nats.")}
                if kept:
                    out[k] = kept
            elif k == "error" and isinstance(v, dict) and v.get("err_code") == 10025:
                words = v["description"]
                same = any(w in words for w in SAME_WORDS)
                out[k] = {**v, "description": words if same else "invalid JSON: <decoder>"}
            else:
                out[k] = self.doc(v)
        return out


async def api(nc: Client, subject: str, body: Any = None) -> Any:
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    try:
        reply = await nc.request(f"$JS.API.{subject}", data, timeout=2)
    except NatsTimeout:
        return "<no reply>"
    return json.loads(reply.data)


def cfg(stream: str, **config: Any) -> dict[str, Any]:
    return {"stream_name": stream, "config": config}


async def pull(
    nc: Client, masks: Masks, stream: str, consumer: str, body: Any, wait: float = 0.6
) -> list[Any]:
    """What a pull request gets on its own inbox: messages (data, pin) and statuses, until a
    status that ends it or ``wait`` seconds."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", data, reply=inbox)
    got: list[Any] = []
    end = time.monotonic() + wait
    while (left := end - time.monotonic()) > 0:
        try:
            m = await sub.next_msg(timeout=left)
        except NatsTimeout:
            break
        h = m.headers or {}
        if h.get("Status"):
            extra = {k: v for k, v in h.items() if k.startswith("Nats-")}
            got.append(("status", h["Status"], h.get("Description"), extra))
            if h["Status"] != "100":
                break
        else:
            got.append(("msg", m.data.decode(), masks.pin(h.get("Nats-Pin-Id", ""))))
    await sub.unsubscribe()
    return got


async def both(jetpy: Proc, ref: Proc, scenario: Any) -> tuple[Any, Any]:
    async def run(url: str) -> Any:
        nc = await nats.connect(url)
        try:
            return await scenario(nc, Masks())
        finally:
            await nc.close()

    ours, theirs = await asyncio.gather(run(jetpy.url), run(ref.url))
    return ours, theirs


def advisories(nc: Client, masks: Masks) -> tuple[list[Any], Any]:
    """Consumer advisories as they come (subject, masked body), and the subscription task."""
    seen: list[Any] = []

    async def on(m: Any) -> None:
        seen.append((m.subject, masks.doc(json.loads(m.data))))

    return seen, nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.>", cb=on)


def assert_same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours.keys() == theirs.keys()
    for k in theirs:
        assert ours[k] == theirs[k], f"{k}\nreference: {theirs[k]}\njetpy:     {ours[k]}"


# -- pause ------------------------------------------------------------------------------------------


async def test_pause_api_and_documents_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        seen, sub = advisories(nc, masks)
        await sub
        out: dict[str, Any] = {}
        await api(nc, "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"], "storage": "memory"})
        out["create paused"] = masks.doc(
            await api(
                nc, "CONSUMER.CREATE.P.C", cfg("P", durable_name="C", ack_policy="explicit", pause_until=FAR)
            )
        )
        out["update keeps the pause"] = masks.doc(
            await api(nc, "CONSUMER.CREATE.P.C", cfg("P", durable_name="C", ack_policy="explicit"))
        )
        out["create action with another pause"] = masks.doc(
            await api(
                nc,
                "CONSUMER.CREATE.P.C",
                {
                    **cfg("P", durable_name="C", ack_policy="explicit", pause_until="2101-01-01T00:00:00Z"),
                    "action": "create",
                },
            )
        )
        await api(nc, "CONSUMER.CREATE.P.U", cfg("P", durable_name="U", ack_policy="explicit"))
        out["an update cannot pause"] = masks.doc(
            await api(
                nc, "CONSUMER.CREATE.P.U", cfg("P", durable_name="U", ack_policy="explicit", pause_until=FAR)
            )
        )
        for i, body in enumerate(
            [
                {},
                None,
                {"pause_until": "2100-01-01T01:30:00.123456789123+01:30"},
                {"pause_until": "2000-01-01T00:00:00Z"},
                {"pause_until": "1970-01-01T00:00:00Z"},
                {"pause_until": "0001-01-01T00:00:00Z"},
                {"pause_until": FAR},
                b"null",
                {"pause_until": FAR, "extra": 1},
                {"pause_until": "garbage"},
                {"pause_until": 5},
                b"{bad",
            ]
        ):
            out[f"pause {i} {body!r}"] = masks.doc(await api(nc, "CONSUMER.PAUSE.P.C", body))
            out[f"info {i}"] = masks.doc(await api(nc, "CONSUMER.INFO.P.C"))
        out["push consumer"] = masks.doc(
            await api(nc, "CONSUMER.CREATE.P.PU", cfg("P", durable_name="PU", deliver_subject="pu.x"))
        )
        out["pause push"] = masks.doc(await api(nc, "CONSUMER.PAUSE.P.PU", {"pause_until": FAR}))
        out["missing consumer"] = masks.doc(await api(nc, "CONSUMER.PAUSE.P.NOPE", {}))
        out["missing stream"] = masks.doc(await api(nc, "CONSUMER.PAUSE.NOPE.C", {}))
        out["bad body, missing stream"] = masks.doc(await api(nc, "CONSUMER.PAUSE.NOPE.C", b"{bad"))
        out["short subject"] = await api(nc, "CONSUMER.PAUSE.P", {})
        out["long subject"] = await api(nc, "CONSUMER.PAUSE.P.C.x", {})
        out["ephemeral paused"] = masks.doc(
            await api(nc, "CONSUMER.CREATE.P", cfg("P", ack_policy="explicit", pause_until=FAR))
        )
        out["ephemeral paused"]["name"] = out["ephemeral paused"]["config"]["name"] = "<eph>"
        out["bad pause_until on create"] = masks.doc(
            await api(
                nc, "CONSUMER.CREATE.P.B", cfg("P", durable_name="B", pause_until="2100-02-30T00:00:00Z")
            )
        )
        await nc.flush()
        await asyncio.sleep(0.2)
        named = (".P.C", ".P.U", ".P.PU")  # the ephemeral's name differs by nature
        out["advisories"] = [(s, b) for s, b in seen if s.endswith(named)]
        return out

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert_same(ours, theirs)
    assert theirs["create paused"]["paused"] is True
    assert theirs["info 2"]["config"]["pause_until"] == "2100-01-01T00:00:00.123456789Z"


async def test_a_paused_consumer_answers_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        js = nc.jetstream()
        out: dict[str, Any] = {}
        await api(nc, "STREAM.CREATE.PP", {"name": "PP", "subjects": ["pp.>"], "storage": "memory"})
        for i in range(3):
            await js.publish("pp.a", str(i).encode())
        await api(nc, "CONSUMER.CREATE.PP.C", cfg("PP", durable_name="C", ack_policy="explicit", ack_wait=S))
        out["before"] = await pull(nc, masks, "PP", "C", {"batch": 1, "expires": S // 2})
        out["pause"] = masks.doc(await api(nc, "CONSUMER.PAUSE.PP.C", {"pause_until": FAR}))
        out["no_wait"] = await pull(nc, masks, "PP", "C", {"batch": 5, "no_wait": True})
        out["no_wait with expires"] = await pull(
            nc, masks, "PP", "C", {"batch": 2, "no_wait": True, "expires": S // 2}
        )
        out["heartbeats"] = await pull(
            nc, masks, "PP", "C", {"batch": 2, "expires": S, "idle_heartbeat": 4 * S // 10}, wait=1.6
        )
        out["integer body"] = await pull(nc, masks, "PP", "C", b"1", wait=0.4)
        info = await api(nc, "CONSUMER.INFO.PP.C")
        out["info"] = masks.doc(
            {k: info[k] for k in ("num_pending", "num_ack_pending", "num_redelivered", "paused")}
        )
        out["resume"] = masks.doc(await api(nc, "CONSUMER.PAUSE.PP.C", {}))
        # the redelivery first, then the rest (a request waiting across CONSUMER.PAUSE's resumption
        # is served at once by jetpy, by nats-server only once something else wakes the consumer
        # up: tests/integration/test_js_consumer_pause.py)
        out["after resume"] = await pull(nc, masks, "PP", "C", {"batch": 3, "expires": S})
        return out

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert_same(ours, theirs)
    assert [s[1] for s in theirs["heartbeats"]] == ["100", "100", "408"]
    assert [m[1] for m in theirs["after resume"]] == ["0", "1", "2"]


async def test_a_paused_push_consumer_sends_what_nats_server_sends(
    jetpy_proc: Proc, newest_proc: Proc
) -> None:
    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        js = nc.jetstream()
        await api(nc, "STREAM.CREATE.PS", {"name": "PS", "subjects": ["ps.>"], "storage": "memory"})
        for i in range(3):
            await js.publish("ps.a", str(i).encode())
        until = time.time() + 1.6
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(until)) + f".{int(until % 1 * 1e6):06d}Z"
        got: list[tuple[float, str]] = []

        async def on(m: Any) -> None:
            status = (m.headers or {}).get("Status")
            got.append((time.time() - until, f"status {status}" if status else m.data.decode()))

        await nc.subscribe("deliver.ps", cb=on)
        body = cfg(
            "PS", durable_name="C", deliver_subject="deliver.ps", idle_heartbeat=S // 2, pause_until=stamp
        )
        created = masks.doc(await api(nc, "CONSUMER.CREATE.PS.C", body))
        await asyncio.sleep(2.2)
        early = [what for t, what in got if t < -0.05]
        late = [what for t, what in got if t > -0.05 and not what.startswith("status")]
        return {"created paused": created["paused"], "while paused": sorted(set(early)), "after": late}

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert ours == theirs
    assert theirs == {"created paused": True, "while paused": ["status 100"], "after": ["0", "1", "2"]}


# -- priority groups --------------------------------------------------------------------------------

CONFIGS: list[dict[str, Any]] = [
    {"priority_groups": ["g"]},
    {"priority_timeout": S},
    {"priority_timeout": -1},
    {"priority_policy": "overflow"},
    {"priority_policy": "overflow", "priority_groups": [""]},
    {"priority_policy": "overflow", "priority_groups": ["a.b"]},
    {"priority_policy": "overflow", "priority_groups": ["x" * 17]},
    {"priority_policy": "overflow", "priority_groups": ["g"], "deliver_subject": "dd"},
    {"priority_policy": "none", "priority_groups": []},
    {"priority_policy": "overflow", "priority_groups": ["g", "h"]},
    {"priority_policy": "pinned_client", "priority_groups": ["g"]},
    {"priority_policy": "pinned_client", "priority_groups": ["g"], "priority_timeout": -5},
    {"priority_policy": "prioritized", "priority_groups": ["A-z_0=9/x"]},
    {"priority_policy": "overflow", "priority_groups": ["g"], "priority_timeout": S},
]


async def test_priority_group_configs_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        await api(nc, "STREAM.CREATE.V", {"name": "V", "subjects": ["v.>"], "storage": "memory"})
        out: dict[str, Any] = {}
        for i, extra in enumerate(CONFIGS):
            out[f"{i} {extra}"] = masks.doc(
                await api(
                    nc,
                    f"CONSUMER.CREATE.V.C{i}",
                    cfg("V", durable_name=f"C{i}", ack_policy="explicit", **extra),
                )
            )
        pedantic = {
            **cfg(
                "V",
                durable_name="PD",
                ack_policy="explicit",
                priority_policy="pinned_client",
                priority_groups=["g"],
                priority_timeout=-5,
            ),
            "pedantic": True,
        }
        out["pedantic"] = masks.doc(await api(nc, "CONSUMER.CREATE.V.PD", pedantic))
        await api(nc, "CONSUMER.CREATE.V.U", cfg("V", durable_name="U", ack_policy="explicit"))
        updates: list[dict[str, Any]] = [
            {"priority_policy": "overflow", "priority_groups": ["g"]},
            {"priority_policy": "pinned_client", "priority_groups": ["h"], "priority_timeout": 5 * S},
            {},
        ]
        for i, extra in enumerate(updates):
            out[f"update {i}"] = masks.doc(
                await api(
                    nc, "CONSUMER.CREATE.V.U", cfg("V", durable_name="U", ack_policy="explicit", **extra)
                )
            )
        return out

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert_same(ours, theirs)
    assert theirs["0 {'priority_groups': ['g']}"]["error"]["err_code"] == 10196


REQUESTS: list[tuple[str, Any]] = [
    ("PLAIN", {"batch": 1, "group": "g"}),
    ("PLAIN", {"batch": 1, "min_pending": 1}),
    ("PLAIN", {"batch": 1, "id": "x"}),
    ("PLAIN", {"batch": 1, "priority": 3}),
    ("PLAIN", {"batch": 1, "priority": 10}),
    ("OV", {"batch": 1}),
    ("OV", {"batch": 1, "group": "zz"}),
    ("OV", {"batch": 1, "group": "g", "id": "x"}),
    ("OV", {"batch": 1, "group": "", "min_pending": 1}),
    ("OV", {"batch": 1, "group": "g", "min_pending": 100, "expires": S // 2}),
    ("OV", {"batch": 1, "group": "g", "min_pending": 6, "expires": S // 2}),
    ("OV", {"batch": 1, "group": "g", "min_ack_pending": 1, "expires": S // 2}),
    ("OV", {"batch": 1, "group": "g", "min_ack_pending": 3, "expires": S // 2}),
    ("OV", {"batch": 1, "group": "g", "min_pending": -1, "expires": S // 2}),
    ("OV", {"batch": 1, "group": "g", "min_pending": "x"}),
    ("PR", {"batch": 1, "group": "g", "min_pending": 1}),
    ("PR", {"batch": 1, "group": "g", "priority": 2}),
    ("PN", {"batch": 1, "group": "g", "min_pending": 1}),
    ("PN", {"batch": 1, "group": "g", "id": "nope", "expires": S // 2}),
    ("PN", {"batch": 1, "group": "g", "expires": S // 2}),
    ("PN", {"batch": 1, "group": "g", "id": "nope", "expires": S // 2}),
    ("PN", {"batch": 1, "group": "g", "expires": S // 2}),
]


async def test_priority_group_pulls_and_pins_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        seen, sub = advisories(nc, masks)
        await sub
        js = nc.jetstream()
        await api(nc, "STREAM.CREATE.W", {"name": "W", "subjects": ["w.>"], "storage": "memory"})
        for i in range(6):
            await js.publish("w.a", str(i).encode())
        groups: dict[str, Any] = {"priority_groups": ["g"]}
        await api(nc, "CONSUMER.CREATE.W.PLAIN", cfg("W", durable_name="PLAIN", ack_policy="explicit"))
        await api(
            nc,
            "CONSUMER.CREATE.W.OV",
            cfg("W", durable_name="OV", ack_policy="explicit", priority_policy="overflow", **groups),
        )
        await api(
            nc,
            "CONSUMER.CREATE.W.PN",
            cfg(
                "W",
                durable_name="PN",
                ack_policy="explicit",
                priority_policy="pinned_client",
                priority_timeout=S,
                **groups,
            ),
        )
        await api(
            nc,
            "CONSUMER.CREATE.W.PR",
            cfg("W", durable_name="PR", ack_policy="explicit", priority_policy="prioritized", **groups),
        )
        out: dict[str, Any] = {}
        for i, (consumer, body) in enumerate(REQUESTS):
            out[f"{i} {consumer} {body}"] = await pull(nc, masks, "W", consumer, body)
        info = masks.doc(await api(nc, "CONSUMER.INFO.W.PN"))
        out["info pinned"] = info["priority_groups"]
        out["with the pin"] = await pull(
            nc,
            masks,
            "W",
            "PN",
            {"batch": 1, "group": "g", "id": _unmask(masks, "<pin1>"), "expires": S // 2},
        )
        out["another pin"] = await pull(nc, masks, "W", "PN", {"batch": 1, "group": "g", "id": "WRONG"})
        for body in [
            b"",
            {},
            {"group": "zz"},
            {"group": ""},
            b"null",
            {"group": 5},
            {"group": "g", "x": 1},
            {"group": "g"},
        ]:
            out[f"unpin {body!r}"] = masks.doc(await api(nc, "CONSUMER.UNPIN.W.PN", body))
        out["unpin overflow"] = masks.doc(await api(nc, "CONSUMER.UNPIN.W.OV", {"group": "g"}))
        out["unpin no groups"] = masks.doc(await api(nc, "CONSUMER.UNPIN.W.PLAIN", {"group": "g"}))
        out["unpin missing"] = masks.doc(await api(nc, "CONSUMER.UNPIN.W.NOPE", {"group": "g"}))
        out["unpin missing stream"] = masks.doc(await api(nc, "CONSUMER.UNPIN.NOPE.X", {"group": "g"}))
        out["unpin short"] = await api(nc, "CONSUMER.UNPIN.W", {"group": "g"})
        out["info unpinned"] = masks.doc(await api(nc, "CONSUMER.INFO.W.PN"))["priority_groups"]
        out["old pin"] = await pull(
            nc,
            masks,
            "W",
            "PN",
            {"batch": 1, "group": "g", "id": _unmask(masks, "<pin1>"), "expires": S // 2},
        )
        out["new pin"] = await pull(nc, masks, "W", "PN", {"batch": 1, "group": "g", "expires": S // 2})
        await asyncio.sleep(1.3)  # the pin times out
        out["info after the timeout"] = masks.doc(await api(nc, "CONSUMER.INFO.W.PN"))["priority_groups"]
        out["overflow info"] = masks.doc(await api(nc, "CONSUMER.INFO.W.OV"))["priority_groups"]
        out["plain info"] = masks.doc(await api(nc, "CONSUMER.INFO.W.PLAIN")).get("priority_groups")
        await nc.flush()
        await asyncio.sleep(0.1)
        out["advisories"] = [(s, b) for s, b in seen if "PINNED" in s]
        return out

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert_same(ours, theirs)
    assert theirs["info pinned"][0]["pinned_client_id"].startswith("<pin")
    assert [s[1] for s in theirs["another pin"]] == ["423"]


def _unmask(masks: Masks, placeholder: str) -> str:
    return next(real for real, fake in masks.pins.items() if fake == placeholder)


async def test_overflow_and_prioritized_hand_out_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        js = nc.jetstream()
        await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "storage": "memory"})
        groups: dict[str, Any] = {"priority_groups": ["g"], "ack_policy": "explicit"}
        await api(
            nc, "CONSUMER.CREATE.O.OV", cfg("O", durable_name="OV", priority_policy="overflow", **groups)
        )
        await api(
            nc, "CONSUMER.CREATE.O.PR", cfg("O", durable_name="PR", priority_policy="prioritized", **groups)
        )
        got: dict[str, list[str]] = {}
        subs = []
        for name in ("ov-near", "ov-far", "p5", "p1a", "p1b", "bare"):
            inbox = f"_INBOX.{name}"
            got[name] = []

            async def on(m: Any, name: str = name) -> None:
                if not (m.headers or {}).get("Status"):
                    got[name].append(m.data.decode())

            subs.append(await nc.subscribe(inbox, cb=on))

        async def ask(consumer: str, inbox: str, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.O.{consumer}", data, reply=f"_INBOX.{inbox}")
            await nc.flush()

        await ask("OV", "ov-near", {"batch": 10, "group": "g", "expires": 3 * S})
        await ask("OV", "ov-far", {"batch": 10, "group": "g", "min_pending": 4, "expires": 3 * S})
        for prio, inbox in ((5, "p5"), (1, "p1a"), (1, "p1b")):
            await ask("PR", inbox, {"batch": 2, "group": "g", "priority": prio, "expires": 3 * S})
        await ask("PR", "bare", b"1")
        await asyncio.sleep(0.1)
        for i in range(7):
            await js.publish("o.a", str(i).encode())
        await asyncio.sleep(0.5)
        return got

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert ours == theirs
    assert theirs["p1a"] == ["0", "2"] and theirs["bare"] == ["6"]


# -- pull requests as 2.10+ take them ----------------------------------------------------------------

ODD: list[Any] = [
    {"batch": 1, "expires": -5},
    {"batch": 1, "expires": -5, "no_wait": True},
    {"batch": 0, "expires": S // 4},
    {"batch": -3, "expires": S // 4},
    {"batch": 1, "max_bytes": -1, "expires": S // 4},
    {"batch": 1, "idle_heartbeat": -1, "expires": S // 4},
    {"batch": 1, "idle_heartbeat": S // 8},
    {"batch": 1, "idle_heartbeat": S // 8 + 1, "expires": S // 4},
    {"batch": 1, "idle_heartbeat": 1, "expires": 2},
    {"batch": 1, "no_wait": True, "idle_heartbeat": S},
    {"batch": 1, "expires": "1s"},
    {"batch": 1, "expires": 1.5},
    {"batch": "2"},
    {"batch": None, "expires": S // 4},
    {"expires": S // 4},
]


async def test_odd_pull_requests_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        js = nc.jetstream()
        await api(nc, "STREAM.CREATE.X", {"name": "X", "subjects": ["x.>"], "storage": "memory"})
        await api(nc, "CONSUMER.CREATE.X.C", cfg("X", durable_name="C", ack_policy="none"))
        out: dict[str, Any] = {
            f"{i} {body}": await pull(nc, masks, "X", "C", body) for i, body in enumerate(ODD)
        }
        for i in range(5):
            await js.publish("x.a", str(i).encode())
        out["batch completed"] = await pull(nc, masks, "X", "C", {"batch": 2, "max_bytes": 10000})
        out["batch completed, no_wait"] = await pull(
            nc, masks, "X", "C", {"batch": 1, "max_bytes": 10000, "no_wait": True}
        )
        out["no_wait ends with 404"] = await pull(nc, masks, "X", "C", {"batch": 5, "no_wait": True})
        # 2 left for a request still wanting 3 (at max_ack_pending): a no_wait one is told so
        await api(nc, "STREAM.CREATE.XM", {"name": "XM", "subjects": ["xm.>"], "storage": "memory"})
        for i in range(3):
            await js.publish("xm.a", str(i).encode())
        mcfg = cfg("XM", durable_name="M", ack_policy="explicit", max_ack_pending=1)
        await api(nc, "CONSUMER.CREATE.XM.M", mcfg)
        first = asyncio.create_task(pull(nc, masks, "XM", "M", {"batch": 4, "expires": S}, wait=1.5))
        await asyncio.sleep(0.2)
        out["requests pending"] = await pull(nc, masks, "XM", "M", {"batch": 1, "no_wait": True})
        out["the first"] = await first
        await api(
            nc,
            "CONSUMER.CREATE.X.W",
            cfg("X", durable_name="W", ack_policy="explicit", max_waiting=1, deliver_policy="new"),
        )
        waiting = asyncio.create_task(pull(nc, masks, "X", "W", {"batch": 1, "expires": S}, wait=1.5))
        await asyncio.sleep(0.2)
        out["max_waiting"] = await pull(nc, masks, "X", "W", {"batch": 1, "expires": S})
        out["max_waiting with heartbeats"] = await pull(
            nc, masks, "X", "W", {"batch": 1, "expires": S, "idle_heartbeat": S // 4}, wait=0.4
        )
        out["the waiting one"] = await waiting
        return out

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert_same(ours, theirs)
    assert theirs["requests pending"] == [("status", "408", "Requests Pending", {})]
    assert theirs["max_waiting with heartbeats"] == []


async def test_requesters_that_are_gone_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    """A request whose requester has gone (its inbox unsubscribed) takes nothing and holds no
    place; a fetch that timed out leaves every message to the next one."""

    async def scenario(nc: Client, masks: Masks) -> dict[str, Any]:
        js = nc.jetstream()
        out: dict[str, Any] = {}
        await api(nc, "STREAM.CREATE.D", {"name": "D", "subjects": ["d.>"], "storage": "memory"})
        await api(nc, "CONSUMER.CREATE.D.C", cfg("D", durable_name="C", ack_policy="explicit", max_waiting=1))
        psub = await js.pull_subscribe_bind("C", "D")
        try:
            await psub.fetch(5, timeout=0.3)
        except TimeoutError:  # nats-py's own, or asyncio's when its deadline is spent
            out["first fetch"] = "timed out"
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.D.C", b'{"batch": 5}', reply=inbox)
        await nc.flush()
        await sub.unsubscribe()
        await nc.flush()
        await asyncio.sleep(0.1)  # the first fetch's own request has expired on the server too
        out["num_waiting once its requester is gone"] = (await api(nc, "CONSUMER.INFO.D.C"))["num_waiting"]
        for i in range(5):
            await js.publish("d.a", str(i).encode())
        out["next fetch"] = [m.data.decode() for m in await psub.fetch(5, timeout=1)]
        return out

    ours, theirs = await both(jetpy_proc, newest_proc, scenario)
    assert ours == theirs
    assert theirs["next fetch"] == ["0", "1", "2", "3", "4"]
