"""Every field of StreamConfig and ConsumerConfig that jetpy accepts has an effect a client can
observe, or is refused with a clear error: nothing is stored and ignored.

Each field maps to a check run against a real server over nats-py (what the field does, seen end
to end), or to ``REFUSED`` (``jetpy.jetstream.unbuilt`` names it; the check then asserts the
refusal). A field added to the models without an entry here fails the first test, so a new
setting cannot slip in unexamined. Informational fields (descriptions, metadata, names) have
their effect in being kept and reported.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

import jetpy
from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.jetstream.unbuilt import UNBUILT_CONSUMER_FIELDS, UNBUILT_STREAM_FIELDS

S = 1_000_000_000
Check = Callable[["Ctx"], Awaitable[None]]


class Ctx:
    def __init__(self, nc: Client, store_dir: Path) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.store_dir = store_dir
        self.n = 0

    def name(self) -> str:
        self.n += 1
        return f"F{self.n}"

    async def api(self, subject: str, body: Any = None) -> dict[str, Any]:
        data = b"" if body is None else json.dumps(body).encode()
        reply = await self.nc.request(f"$JS.API.{subject}", data, timeout=5)
        doc: dict[str, Any] = json.loads(reply.data)
        return doc

    async def stream(self, **cfg: Any) -> tuple[str, dict[str, Any]]:
        name = self.name()
        cfg = {"name": name, "subjects": [f"{name.lower()}.>"], **cfg}
        doc = await self.api(f"STREAM.CREATE.{name}", cfg)
        return name, doc

    async def ok_stream(self, **cfg: Any) -> str:
        name, doc = await self.stream(**cfg)
        assert "error" not in doc, doc
        return name

    async def info(self, name: str) -> dict[str, Any]:
        return await self.api(f"STREAM.INFO.{name}")

    async def pub(
        self, subject: str, data: bytes = b"x", headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        reply = await self.nc.request(subject, data, headers=headers, timeout=5)
        doc: dict[str, Any] = json.loads(reply.data)
        return doc

    async def consumer(self, stream: str, **cfg: Any) -> dict[str, Any]:
        name = cfg.setdefault("name", self.name())
        return await self.api(f"CONSUMER.CREATE.{stream}.{name}", {"stream_name": stream, "config": cfg})

    async def ok_consumer(self, stream: str, **cfg: Any) -> dict[str, Any]:
        doc = await self.consumer(stream, **cfg)
        assert "error" not in doc, doc
        return doc

    async def fetch(
        self, stream: str, consumer: str, batch: int = 10, expires: float = 0.3, **fields: Any
    ) -> list[Any]:
        """The messages a pull request (with ``fields`` added to it) gets before a status."""
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        body = {"batch": batch, "expires": int(expires * S), **fields}
        await self.nc.publish(
            f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", json.dumps(body).encode(), reply=inbox
        )
        got = []
        deadline = time.monotonic() + expires + 1
        while time.monotonic() < deadline:
            try:
                m = await sub.next_msg(timeout=max(0.01, deadline - time.monotonic()))
            except NatsTimeout:
                break
            if m.headers and m.headers.get("Status"):
                break
            got.append(m)
            if len(got) == batch:
                break
        await sub.unsubscribe()
        return got


def refused(doc: dict[str, Any]) -> str:
    assert "error" in doc, doc
    return str(doc["error"]["description"])


# -- streams ----------------------------------------------------------------------------------


async def s_name(c: Ctx) -> None:
    name = await c.ok_stream()
    assert (await c.info(name))["config"]["name"] == name


async def s_description(c: Ctx) -> None:
    name = await c.ok_stream(description="orders of the day")
    assert (await c.info(name))["config"]["description"] == "orders of the day"


async def s_subjects(c: Ctx) -> None:
    await c.ok_stream(subjects=["only.this"])
    assert (await c.pub("only.this"))["seq"] == 1
    with pytest.raises(NoRespondersError):
        await c.nc.request("only.that", b"x", timeout=1)


async def s_retention(c: Ctx) -> None:
    name = await c.ok_stream(retention="workqueue")
    await c.pub(f"{name.lower()}.a")
    await c.ok_consumer(name, ack_policy="explicit")
    cons = (await c.api(f"CONSUMER.NAMES.{name}"))["consumers"][0]
    msgs = await c.fetch(name, cons, 1)
    await msgs[0].ack_sync()
    assert (await c.info(name))["state"]["messages"] == 0
    interest = await c.ok_stream(retention="interest")
    await c.pub(f"{interest.lower()}.a")  # nobody interested: acknowledged, not kept
    assert (await c.info(interest))["state"]["messages"] == 0


async def s_max_consumers(c: Ctx) -> None:
    name = await c.ok_stream(max_consumers=1)
    await c.ok_consumer(name)
    assert refused(await c.consumer(name)) == "maximum consumers limit reached"


async def s_max_msgs(c: Ctx) -> None:
    name = await c.ok_stream(max_msgs=2)
    for _ in range(3):
        await c.pub(f"{name.lower()}.a")
    assert (await c.info(name))["state"]["messages"] == 2


async def s_max_bytes(c: Ctx) -> None:
    name = await c.ok_stream(max_bytes=300)
    for _ in range(10):
        await c.pub(f"{name.lower()}.a", b"y" * 50)
    assert (await c.info(name))["state"]["bytes"] <= 300


async def s_max_age(c: Ctx) -> None:
    name = await c.ok_stream(max_age=S // 2, storage="memory")
    await c.pub(f"{name.lower()}.a")
    await asyncio.sleep(1.2)
    assert (await c.info(name))["state"]["messages"] == 0


async def s_max_msgs_per_subject(c: Ctx) -> None:
    name = await c.ok_stream(max_msgs_per_subject=1)
    for _ in range(3):
        await c.pub(f"{name.lower()}.a")
    await c.pub(f"{name.lower()}.b")
    assert (await c.info(name))["state"]["messages"] == 2


async def s_max_msg_size(c: Ctx) -> None:
    name = await c.ok_stream(max_msg_size=10)
    assert (await c.pub(f"{name.lower()}.a", b"z" * 11))["error"]["err_code"] == 10054


async def s_discard(c: Ctx) -> None:
    name = await c.ok_stream(max_msgs=1, discard="new")
    await c.pub(f"{name.lower()}.a")
    assert "error" in await c.pub(f"{name.lower()}.a")


async def s_storage(c: Ctx) -> None:
    mem = await c.ok_stream(storage="memory")
    file = await c.ok_stream(storage="file")
    streams = c.store_dir / "jetstream" / "$G" / "streams"
    assert (streams / file).is_dir()
    assert not (streams / mem).exists()


async def s_num_replicas(c: Ctx) -> None:
    await c.ok_stream(num_replicas=1)
    _, doc = await c.stream(num_replicas=3)
    assert doc["error"]["err_code"] == 10074  # a single server cannot replicate


async def s_no_ack(c: Ctx) -> None:
    name = await c.ok_stream(no_ack=True)
    with pytest.raises(NatsTimeout):
        await c.nc.request(f"{name.lower()}.a", b"x", timeout=0.5)
    assert (await c.info(name))["state"]["messages"] == 1


async def s_template_owner(c: Ctx) -> None:
    _, doc = await c.stream(template_owner="T")
    assert "template" in refused(doc)


async def s_duplicate_window(c: Ctx) -> None:
    name = await c.ok_stream(duplicate_window=S // 2)
    subj = f"{name.lower()}.a"
    await c.pub(subj, headers={"Nats-Msg-Id": "m"})
    assert (await c.pub(subj, headers={"Nats-Msg-Id": "m"})).get("duplicate") is True
    await asyncio.sleep(0.7)  # the window has passed: a new message
    assert "duplicate" not in await c.pub(subj, headers={"Nats-Msg-Id": "m"})


async def s_placement(c: Ctx) -> None:
    _, doc = await c.stream(placement={"cluster": "east"})
    assert "placement" in refused(doc)
    await c.ok_stream(placement={})  # empty: nothing asked


async def until(probe: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not await probe():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.05)


async def s_mirror(c: Ctx) -> None:
    origin = await c.ok_stream()
    await c.pub(f"{origin.lower()}.a", b"one")
    await c.pub(f"{origin.lower()}.b", b"two")
    mirror = await c.ok_stream(subjects=[], mirror={"name": origin})

    async def copied() -> bool:
        return bool((await c.info(mirror))["state"]["messages"] == 2)

    await until(copied)
    got = await c.api(f"STREAM.MSG.GET.{mirror}", {"seq": 2})
    want = await c.api(f"STREAM.MSG.GET.{origin}", {"seq": 2})
    assert got["message"] == want["message"]  # subject, sequence, data and time: the origin's
    # ADR-60's own durable consumer for the copy (work-queue and interest origins): not built
    consumer = {"name": "C", "deliver_subject": "dc"}
    _, doc = await c.stream(subjects=[], mirror={"name": origin, "consumer": consumer})
    assert "consumer is not supported" in refused(doc)


async def s_sources(c: Ctx) -> None:
    a, b = await c.ok_stream(), await c.ok_stream()
    await c.pub(f"{a.lower()}.x", b"from a")
    await c.pub(f"{b.lower()}.y", b"from b")
    name = await c.ok_stream(sources=[{"name": a}, {"name": b}])

    async def copied() -> bool:
        return bool((await c.info(name))["state"]["messages"] == 2)

    await until(copied)
    froms = set()
    for seq in (1, 2):
        m = await c.js.get_msg(name, seq)
        assert m.headers is not None
        froms.add(m.headers["Nats-Stream-Source"].split(" ")[:2][0])
    assert froms == {a, b}


async def s_compression(c: Ctx) -> None:
    """Sealed blocks are rewritten compressed (max_bytes makes 32 KB blocks, as nats-server)."""
    name = await c.ok_stream(compression="s2", max_bytes=120_000)
    payload = b"a compressible payload " * 40
    for _ in range(80):
        await c.pub(f"{name.lower()}.a", payload)
    msgs = c.store_dir / "jetstream" / "$G" / "streams" / name / "msgs"
    deadline = time.monotonic() + 10
    while True:
        sealed = sorted(msgs.glob("*.blk"))[:-1]
        if sealed and all(p.read_bytes()[:4] == b"JPBF" for p in sealed):
            break
        assert time.monotonic() < deadline, [p.read_bytes()[:4] for p in sealed]
        await c.pub(f"{name.lower()}.b", b"x")  # a commit puts finished copies in place
        await asyncio.sleep(0.05)
    assert sum(p.stat().st_size for p in sealed) < len(sealed) * 32_000 // 4
    info = await c.info(name)
    assert info["config"]["compression"] == "s2"
    got = await c.api(f"STREAM.MSG.GET.{name}", {"seq": info["state"]["first_seq"]})
    assert base64.b64decode(got["message"]["data"]) == payload


async def s_first_seq(c: Ctx) -> None:
    name = await c.ok_stream(first_seq=1000)
    assert (await c.pub(f"{name.lower()}.a"))["seq"] == 1000


async def s_subject_transform(c: Ctx) -> None:
    name = c.name()
    cfg = {"name": name, "subjects": ["tin.*"], "subject_transform": {"src": "tin.*", "dest": "tout.$1"}}
    assert "error" not in await c.api(f"STREAM.CREATE.{name}", cfg)
    await c.pub("tin.a")
    got = await c.api(f"STREAM.MSG.GET.{name}", {"seq": 1})
    assert got["message"]["subject"] == "tout.a"


async def s_republish(c: Ctx) -> None:
    name = await c.ok_stream(republish={"dest": "copied.>"})
    sub = await c.nc.subscribe("copied.>")
    await c.pub(f"{name.lower()}.a", b"hi")
    m = await sub.next_msg(timeout=2)
    assert (m.subject, m.data, m.headers and m.headers["Nats-Sequence"]) == (
        f"copied.{name.lower()}.a",
        b"hi",
        "1",
    )


async def s_allow_direct(c: Ctx) -> None:
    name = await c.ok_stream(allow_direct=True)
    await c.pub(f"{name.lower()}.a", b"d")
    m = await c.nc.request(f"$JS.API.DIRECT.GET.{name}", json.dumps({"seq": 1}).encode(), timeout=2)
    assert m.data == b"d"


async def s_mirror_direct(c: Ctx) -> None:
    _, doc = await c.stream(mirror_direct=True)
    assert refused(doc) == "stream has no mirror but does have mirror direct"
    origin = await c.ok_stream(allow_direct=True)
    await c.pub(f"{origin.lower()}.a", b"d")
    mirror = await c.ok_stream(subjects=[], mirror={"name": origin})
    assert (await c.info(mirror))["config"]["mirror_direct"] is True  # taken from the origin

    answered = set()

    async def mirror_answers() -> bool:
        m = await c.nc.request(f"$JS.API.DIRECT.GET.{origin}", json.dumps({"seq": 1}).encode(), timeout=2)
        assert m.data == b"d"
        answered.add(m.headers["Nats-Stream"] if m.headers else "")
        return mirror in answered

    await until(mirror_answers)  # the origin and its caught-up mirror share the direct gets


async def s_discard_new_per_subject(c: Ctx) -> None:
    name = await c.ok_stream(max_msgs_per_subject=1, discard="new", discard_new_per_subject=True)
    await c.pub(f"{name.lower()}.a")
    assert (await c.pub(f"{name.lower()}.a"))["error"][
        "description"
    ] == "maximum messages per subject exceeded"


async def s_sealed(c: Ctx) -> None:
    name = await c.ok_stream()
    await c.pub(f"{name.lower()}.a")
    cfg = (await c.info(name))["config"]
    assert "error" not in await c.api(f"STREAM.UPDATE.{name}", {**cfg, "sealed": True})
    assert (await c.pub(f"{name.lower()}.a"))["error"]["err_code"] == 10109


async def s_deny_delete(c: Ctx) -> None:
    name = await c.ok_stream(deny_delete=True)
    await c.pub(f"{name.lower()}.a")
    assert "not permitted" in refused(await c.api(f"STREAM.MSG.DELETE.{name}", {"seq": 1}))


async def s_deny_purge(c: Ctx) -> None:
    name = await c.ok_stream(deny_purge=True)
    assert "not permitted" in refused(await c.api(f"STREAM.PURGE.{name}", {}))


async def s_allow_rollup_hdrs(c: Ctx) -> None:
    name = await c.ok_stream(allow_rollup_hdrs=True)
    for _ in range(3):
        await c.pub(f"{name.lower()}.a")
    await c.pub(f"{name.lower()}.a", headers={"Nats-Rollup": "sub"})
    assert (await c.info(name))["state"]["messages"] == 1


async def s_consumer_limits(c: Ctx) -> None:
    name = await c.ok_stream(consumer_limits={"inactive_threshold": 5 * S, "max_ack_pending": 7})
    doc = await c.ok_consumer(name, ack_policy="explicit")
    assert (doc["config"]["inactive_threshold"], doc["config"]["max_ack_pending"]) == (5 * S, 7)


async def s_allow_msg_ttl(c: Ctx) -> None:
    name = await c.ok_stream(allow_msg_ttl=True, storage="memory")
    await c.pub(f"{name.lower()}.a", headers={"Nats-TTL": "1s"})
    await asyncio.sleep(1.5)
    assert (await c.info(name))["state"]["messages"] == 0


async def s_subject_delete_marker_ttl(c: Ctx) -> None:
    name = await c.ok_stream(
        max_age=S // 2,
        allow_msg_ttl=True,
        subject_delete_marker_ttl=S,
        allow_rollup_hdrs=True,
        storage="memory",
    )
    await c.pub(f"{name.lower()}.a")
    await asyncio.sleep(0.8)  # expired at 0.5 s; the marker then lives until max_age takes it too
    got = await c.api(f"STREAM.MSG.GET.{name}", {"last_by_subj": f"{name.lower()}.a"})
    assert got["message"]["seq"] == 2  # the delete marker the expiry left


async def s_metadata(c: Ctx) -> None:
    name = await c.ok_stream(metadata={"owner": "team-a"})
    assert (await c.info(name))["config"]["metadata"] == {"owner": "team-a"}


STREAM_CHECKS: dict[str, Check] = {
    "name": s_name,
    "description": s_description,
    "subjects": s_subjects,
    "retention": s_retention,
    "max_consumers": s_max_consumers,
    "max_msgs": s_max_msgs,
    "max_bytes": s_max_bytes,
    "max_age": s_max_age,
    "max_msgs_per_subject": s_max_msgs_per_subject,
    "max_msg_size": s_max_msg_size,
    "discard": s_discard,
    "storage": s_storage,
    "num_replicas": s_num_replicas,
    "no_ack": s_no_ack,
    "template_owner": s_template_owner,
    "duplicate_window": s_duplicate_window,
    "placement": s_placement,
    "mirror": s_mirror,
    "sources": s_sources,
    "compression": s_compression,
    "first_seq": s_first_seq,
    "subject_transform": s_subject_transform,
    "republish": s_republish,
    "allow_direct": s_allow_direct,
    "mirror_direct": s_mirror_direct,
    "discard_new_per_subject": s_discard_new_per_subject,
    "sealed": s_sealed,
    "deny_delete": s_deny_delete,
    "deny_purge": s_deny_purge,
    "allow_rollup_hdrs": s_allow_rollup_hdrs,
    "consumer_limits": s_consumer_limits,
    "allow_msg_ttl": s_allow_msg_ttl,
    "subject_delete_marker_ttl": s_subject_delete_marker_ttl,
    "metadata": s_metadata,
}


# -- consumers --------------------------------------------------------------------------------


async def filled(c: Ctx, n: int = 3, **cfg: Any) -> str:
    name = await c.ok_stream(**cfg)
    for i in range(n):
        await c.pub(f"{name.lower()}.{'ab'[i % 2]}", str(i).encode())
    return name


async def c_durable_name(c: Ctx) -> None:
    s = await filled(c)
    doc = await c.api(f"CONSUMER.DURABLE.CREATE.{s}.D", {"stream_name": s, "config": {"durable_name": "D"}})
    assert doc["config"]["durable_name"] == "D"
    assert (c.store_dir / "jetstream" / "$G" / "streams" / s / "obs" / "D").is_dir()  # state kept on disk


async def c_name(c: Ctx) -> None:
    s = await filled(c)
    await c.ok_consumer(s, name="NAMED")
    assert (await c.api(f"CONSUMER.NAMES.{s}"))["consumers"] == ["NAMED"]


async def c_description(c: Ctx) -> None:
    s = await filled(c)
    assert (await c.ok_consumer(s, description="audit"))["config"]["description"] == "audit"


async def c_deliver_policy(c: Ctx) -> None:
    s = await filled(c)
    doc = await c.ok_consumer(s, deliver_policy="last")
    assert [m.data for m in await c.fetch(s, doc["name"])] == [b"2"]


async def c_opt_start_seq(c: Ctx) -> None:
    s = await filled(c)
    doc = await c.ok_consumer(s, deliver_policy="by_start_sequence", opt_start_seq=2)
    assert [m.data for m in await c.fetch(s, doc["name"])] == [b"1", b"2"]


async def c_opt_start_time(c: Ctx) -> None:
    s = await filled(c, 2)
    t = (await c.api(f"STREAM.MSG.GET.{s}", {"seq": 2}))["message"]["time"]
    doc = await c.ok_consumer(s, deliver_policy="by_start_time", opt_start_time=t)
    assert [m.data for m in await c.fetch(s, doc["name"])] == [b"1"]


async def c_ack_policy(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.ok_consumer(s, ack_policy="explicit")
    await c.fetch(s, doc["name"])
    info = await c.api(f"CONSUMER.INFO.{s}.{doc['name']}")
    assert info["num_ack_pending"] == 1


async def c_ack_wait(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.ok_consumer(s, ack_policy="explicit", ack_wait=S // 2)
    assert len(await c.fetch(s, doc["name"])) == 1
    await asyncio.sleep(0.7)
    again = await c.fetch(s, doc["name"])
    assert len(again) == 1 and again[0].metadata.num_delivered == 2


async def c_max_deliver(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.ok_consumer(s, ack_policy="explicit", ack_wait=S // 5, max_deliver=1)
    assert len(await c.fetch(s, doc["name"])) == 1
    await asyncio.sleep(0.4)
    assert await c.fetch(s, doc["name"]) == []


async def c_backoff(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.ok_consumer(s, ack_policy="explicit", backoff=[S // 5, 5 * S], max_deliver=3)
    await c.fetch(s, doc["name"], 1)
    await asyncio.sleep(0.4)
    assert len(await c.fetch(s, doc["name"], 1)) == 1  # the first step: 0.2 s
    assert await c.fetch(s, doc["name"], 1, expires=0.5) == []  # the second: 5 s


async def c_filter_subject(c: Ctx) -> None:
    s = await filled(c)
    doc = await c.ok_consumer(s, filter_subject=f"{s.lower()}.b")
    assert [m.data for m in await c.fetch(s, doc["name"])] == [b"1"]


async def c_filter_subjects(c: Ctx) -> None:
    s = await filled(c, 4)
    doc = await c.ok_consumer(s, filter_subjects=[f"{s.lower()}.b"])
    assert [m.data for m in await c.fetch(s, doc["name"])] == [b"1", b"3"]


async def c_replay_policy(c: Ctx) -> None:
    s = await c.ok_stream()
    await c.pub(f"{s.lower()}.a", b"0")
    await asyncio.sleep(0.5)
    await c.pub(f"{s.lower()}.a", b"1")
    doc = await c.ok_consumer(s, replay_policy="original")
    t0 = time.monotonic()
    got = await c.fetch(s, doc["name"], 2, expires=2)
    assert len(got) == 2 and time.monotonic() - t0 >= 0.4  # replayed at the original pace


async def c_rate_limit_bps(c: Ctx) -> None:
    s = await c.ok_stream()
    for _ in range(3):
        await c.pub(f"{s.lower()}.a", b"r" * 40)
    inbox = c.nc.new_inbox()
    sub = await c.nc.subscribe(inbox)
    await c.ok_consumer(s, deliver_subject=inbox, rate_limit_bps=800)  # 100 B/s: ~0.5 s a message
    t0 = time.monotonic()
    for _ in range(3):
        await sub.next_msg(timeout=5)
    assert time.monotonic() - t0 >= 0.8


async def c_sample_freq(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.ok_consumer(s, ack_policy="explicit", sample_freq="100%")
    metrics = await c.nc.subscribe(f"$JS.EVENT.METRIC.CONSUMER.ACK.{s}.>")
    (msg,) = await c.fetch(s, doc["name"])
    await msg.ack()
    assert json.loads((await metrics.next_msg(timeout=2)).data)["stream_seq"] == 1


async def c_max_waiting(c: Ctx) -> None:
    s = await c.ok_stream()
    doc = await c.ok_consumer(s, max_waiting=1)
    inbox = c.nc.new_inbox()
    sub = await c.nc.subscribe(inbox)
    body = json.dumps({"batch": 1, "expires": 2 * S}).encode()
    for _ in range(2):
        await c.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.{doc['name']}", body, reply=inbox)
    m = await sub.next_msg(timeout=2)
    assert m.headers is not None and m.headers.get("Status") == "409"


async def c_max_ack_pending(c: Ctx) -> None:
    s = await filled(c, 3)
    doc = await c.ok_consumer(s, ack_policy="explicit", max_ack_pending=1)
    assert len(await c.fetch(s, doc["name"], 3)) == 1


async def c_flow_control(c: Ctx) -> None:
    s = await filled(c, 1)
    inbox = c.nc.new_inbox()
    sub = await c.nc.subscribe(inbox)
    for _ in range(6):  # past the 4 MB flow-control window
        await c.pub(f"{s.lower()}.big", b"f" * 900_000)
    await c.ok_consumer(s, deliver_subject=inbox, flow_control=True, idle_heartbeat=S)
    seen_fc = False
    for _ in range(10):
        m = await sub.next_msg(timeout=3)
        if m.headers and m.headers.get("Status") == "100" and m.reply:
            seen_fc = True
            break
    assert seen_fc


async def c_headers_only(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.ok_consumer(s, headers_only=True)
    (m,) = await c.fetch(s, doc["name"])
    assert m.data == b"" and m.headers is not None and m.headers["Nats-Msg-Size"] == "1"


async def c_max_batch(c: Ctx) -> None:
    s = await c.ok_stream()
    doc = await c.ok_consumer(s, max_batch=2)
    inbox = c.nc.new_inbox()
    sub = await c.nc.subscribe(inbox)
    await c.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.{doc['name']}", b'{"batch": 5}', reply=inbox)
    m = await sub.next_msg(timeout=2)
    assert m.headers is not None and "MaxRequestBatch" in m.headers.get("Description", "")


async def c_max_expires(c: Ctx) -> None:
    s = await c.ok_stream()
    doc = await c.ok_consumer(s, max_expires=S)
    inbox = c.nc.new_inbox()
    sub = await c.nc.subscribe(inbox)
    body = json.dumps({"batch": 1, "expires": 5 * S}).encode()
    await c.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.{doc['name']}", body, reply=inbox)
    m = await sub.next_msg(timeout=2)
    assert m.headers is not None and "MaxRequestExpires" in m.headers.get("Description", "")


async def c_max_bytes(c: Ctx) -> None:
    s = await c.ok_stream()
    doc = await c.ok_consumer(s, max_bytes=100)
    inbox = c.nc.new_inbox()
    sub = await c.nc.subscribe(inbox)
    await c.nc.publish(
        f"$JS.API.CONSUMER.MSG.NEXT.{s}.{doc['name']}", b'{"batch": 1, "max_bytes": 1000}', reply=inbox
    )
    m = await sub.next_msg(timeout=2)
    assert m.headers is not None and "MaxRequestMaxBytes" in m.headers.get("Description", "")


async def c_deliver_subject(c: Ctx) -> None:
    s = await filled(c, 1)
    sub = await c.nc.subscribe("pushed.here")
    await c.ok_consumer(s, deliver_subject="pushed.here")
    assert (await sub.next_msg(timeout=2)).data == b"0"


async def c_deliver_group(c: Ctx) -> None:
    s = await filled(c, 2)
    a = await c.nc.subscribe("grouped", queue="g")
    b = await c.nc.subscribe("grouped", queue="g")
    await c.ok_consumer(s, deliver_subject="grouped", deliver_group="g")
    got = 0
    for sub in (a, b):
        while True:
            try:
                await sub.next_msg(timeout=0.5)
                got += 1
            except NatsTimeout:
                break
    assert got == 2  # each message once across the group
    plain = await c.nc.subscribe("ungrouped")  # not of the group: nobody to deliver to
    info = await c.ok_consumer(s, deliver_subject="ungrouped", deliver_group="g")
    assert not info.get("push_bound")
    with pytest.raises(NatsTimeout):
        await plain.next_msg(timeout=0.5)


async def c_idle_heartbeat(c: Ctx) -> None:
    s = await c.ok_stream()
    sub = await c.nc.subscribe("beats")
    await c.ok_consumer(s, deliver_subject="beats", idle_heartbeat=S // 2)
    m = await sub.next_msg(timeout=3)
    assert m.headers is not None and m.headers.get("Description") == "Idle Heartbeat"


async def c_inactive_threshold(c: Ctx) -> None:
    s = await c.ok_stream()
    doc = await c.ok_consumer(s, inactive_threshold=S // 2)
    await asyncio.sleep(1.5)
    assert doc["name"] not in (await c.api(f"CONSUMER.NAMES.{s}"))["consumers"]


async def c_num_replicas(c: Ctx) -> None:
    s = await c.ok_stream()
    assert (await c.consumer(s, num_replicas=3))["error"]["err_code"] == 10074


async def c_mem_storage(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.api(
        f"CONSUMER.DURABLE.CREATE.{s}.M",
        {"stream_name": s, "config": {"durable_name": "M", "mem_storage": True}},
    )
    assert "error" not in doc
    assert not (c.store_dir / "jetstream" / "$G" / "streams" / s / "obs" / "M").exists()  # state in memory


async def c_direct(c: Ctx) -> None:
    s = await filled(c, 2)
    sub = await c.nc.subscribe("dd")
    doc = await c.ok_consumer(s, direct=True, deliver_subject="dd")
    assert (await sub.next_msg(timeout=2)).data == b"0"
    # a mirror's or source's own consumer: not listed, not counted
    assert doc["name"] not in (await c.api(f"CONSUMER.NAMES.{s}"))["consumers"]
    assert (await c.info(s))["state"]["consumer_count"] == 0


async def c_metadata(c: Ctx) -> None:
    s = await c.ok_stream()
    assert (await c.ok_consumer(s, metadata={"k": "v"}))["config"]["metadata"] == {"k": "v"}


async def c_pause_until(c: Ctx) -> None:
    s = await filled(c, 2)
    doc = await c.ok_consumer(s, ack_policy="explicit", pause_until="2100-01-01T00:00:00Z")
    assert doc["paused"] is True and doc["pause_remaining"] > 0
    assert await c.fetch(s, doc["name"]) == []  # nothing goes out while paused
    resumed = await c.api(f"CONSUMER.PAUSE.{s}.{doc['name']}", {})
    assert resumed["paused"] is False
    assert [m.data for m in await c.fetch(s, doc["name"])] == [b"0", b"1"]


async def c_priority_groups(c: Ctx) -> None:
    s = await filled(c, 1)
    doc = await c.ok_consumer(s, ack_policy="explicit", priority_groups=["jobs"], priority_policy="overflow")
    inbox = c.nc.new_inbox()
    sub = await c.nc.subscribe(inbox)
    body = json.dumps({"batch": 1, "group": "other"}).encode()
    await c.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.{doc['name']}", body, reply=inbox)
    m = await sub.next_msg(timeout=2)
    assert m.headers is not None and m.headers.get("Description") == "Bad Request - Invalid Priority Group"
    assert [m.data for m in await c.fetch(s, doc["name"], group="jobs")] == [b"0"]


async def c_priority_policy(c: Ctx) -> None:
    s = await filled(c, 2)
    doc = await c.ok_consumer(s, ack_policy="explicit", priority_groups=["g"], priority_policy="overflow")
    # overflow: a request asking for a backlog of 3 gets nothing while 2 wait; one asking for a
    # backlog of 2 gets messages only while 2 are left, so just one
    assert await c.fetch(s, doc["name"], group="g", min_pending=3) == []
    assert [m.data for m in await c.fetch(s, doc["name"], group="g", min_pending=2)] == [b"0"]


async def c_priority_timeout(c: Ctx) -> None:
    s = await filled(c, 3)
    cfg = {"ack_policy": "explicit", "priority_groups": ["g"], "priority_policy": "pinned_client"}
    doc = await c.ok_consumer(s, **cfg, priority_timeout=S)
    (m,) = await c.fetch(s, doc["name"], batch=1, group="g")
    pin = m.headers["Nats-Pin-Id"]
    info = await c.api(f"CONSUMER.INFO.{s}.{doc['name']}")
    assert info["priority_groups"][0]["pinned_client_id"] == pin
    assert await c.fetch(s, doc["name"], batch=1, group="g") == []  # pinned to another client
    await asyncio.sleep(1)  # the pin times out: the next client without one is pinned
    (m,) = await c.fetch(s, doc["name"], batch=1, group="g")
    assert m.headers["Nats-Pin-Id"] != pin


CONSUMER_CHECKS: dict[str, Check] = {
    "durable_name": c_durable_name,
    "name": c_name,
    "description": c_description,
    "deliver_policy": c_deliver_policy,
    "opt_start_seq": c_opt_start_seq,
    "opt_start_time": c_opt_start_time,
    "ack_policy": c_ack_policy,
    "ack_wait": c_ack_wait,
    "max_deliver": c_max_deliver,
    "backoff": c_backoff,
    "filter_subject": c_filter_subject,
    "filter_subjects": c_filter_subjects,
    "replay_policy": c_replay_policy,
    "rate_limit_bps": c_rate_limit_bps,
    "sample_freq": c_sample_freq,
    "max_waiting": c_max_waiting,
    "max_ack_pending": c_max_ack_pending,
    "flow_control": c_flow_control,
    "headers_only": c_headers_only,
    "max_batch": c_max_batch,
    "max_expires": c_max_expires,
    "max_bytes": c_max_bytes,
    "deliver_subject": c_deliver_subject,
    "deliver_group": c_deliver_group,
    "idle_heartbeat": c_idle_heartbeat,
    "inactive_threshold": c_inactive_threshold,
    "num_replicas": c_num_replicas,
    "mem_storage": c_mem_storage,
    "direct": c_direct,
    "metadata": c_metadata,
    "pause_until": c_pause_until,
    "priority_groups": c_priority_groups,
    "priority_policy": c_priority_policy,
    "priority_timeout": c_priority_timeout,
}


def test_every_config_field_has_a_check() -> None:
    assert set(STREAM_CHECKS) == {f.name for f in msgspec.structs.fields(StreamConfig)}
    assert set(CONSUMER_CHECKS) == {f.name for f in msgspec.structs.fields(ConsumerConfig)}
    # what is refused for now is exactly what unbuilt.py names
    assert set(UNBUILT_STREAM_FIELDS) <= set(STREAM_CHECKS)
    assert set(UNBUILT_CONSUMER_FIELDS) <= set(CONSUMER_CHECKS)


@pytest.fixture
async def ctx(tmp_path: Path) -> Any:
    async with jetpy.Server(port=0, store_dir=str(tmp_path / "js")) as srv:
        nc = await nats.connect(srv.client_url)
        yield Ctx(nc, tmp_path / "js")
        await nc.close()


@pytest.mark.parametrize("field", sorted(STREAM_CHECKS))
async def test_stream_field_has_its_effect_or_is_refused(ctx: Ctx, field: str) -> None:
    await STREAM_CHECKS[field](ctx)


@pytest.mark.parametrize("field", sorted(CONSUMER_CHECKS))
async def test_consumer_field_has_its_effect_or_is_refused(ctx: Ctx, field: str) -> None:
    await CONSUMER_CHECKS[field](ctx)
