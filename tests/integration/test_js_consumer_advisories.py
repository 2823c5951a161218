"""Consumer advisories on ``$JS.EVENT.ADVISORY.>``: created/deleted, max deliveries, terminated and
naked messages, with the fields nats-server sends (type, id, timestamp and the event's own)."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig

from conftest import wait_for
from jetpy.server.app import Server


def _common(adv: dict[str, Any], kind: str) -> None:
    assert adv["type"] == f"io.nats.jetstream.advisory.v1.{kind}"
    assert isinstance(adv["id"], str) and adv["id"]
    datetime.fromisoformat(adv["timestamp"].replace("Z", "+00:00")[:26] + "+00:00")
    assert adv["stream"] == "A"


async def test_consumer_advisories(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    events: list[tuple[str, dict[str, Any]]] = []

    async def on_event(msg: Any) -> None:
        events.append((msg.subject, json.loads(msg.data)))

    await nc.subscribe("$JS.EVENT.ADVISORY.>", cb=on_event)
    await nc.flush()
    await js.add_stream(name="A", subjects=["a"])
    for i in range(3):
        await js.publish("a", b"%d" % i)
    await js.add_consumer(
        "A", ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT, max_deliver=2, ack_wait=0.3)
    )
    sub = await js.pull_subscribe("a", durable="C", stream="A")
    m1, m2, m3 = await sub.fetch(3, timeout=2)
    await m1.nak()
    await m2.term()
    await nc.publish(m3.reply, b"+TERM no good")
    again = await sub.fetch(1, timeout=2)
    assert again[0].metadata.sequence.stream == 1 and again[0].metadata.num_delivered == 2
    # the second delivery of 1 was the last: its ack wait ends in MAX_DELIVERIES
    await wait_for(lambda: any(".MAX_DELIVERIES." in s for s, _ in events), within=5)
    await js.delete_consumer("A", "C")
    await wait_for(lambda: any(".CONSUMER.DELETED." in s for s, _ in events))
    await nc.close()

    by = {s.split(".")[4]: (s, a) for s, a in events if ".CONSUMER." in s and "MSG_TERMINATED" not in s}
    terms = [(s, a) for s, a in events if "MSG_TERMINATED" in s]

    subj, created = by["CREATED"]
    assert subj == "$JS.EVENT.ADVISORY.CONSUMER.CREATED.A.C"
    _common(created, "consumer_action")
    assert created["consumer"] == "C" and created["action"] == "create"

    subj, nak = by["MSG_NAKED"]
    assert subj == "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.A.C"
    _common(nak, "nak")
    assert (nak["consumer"], nak["consumer_seq"], nak["stream_seq"], nak["deliveries"]) == ("C", 1, 1, 1)

    assert [s for s, _ in terms] == ["$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.A.C"] * 2
    for _, t in terms:
        _common(t, "terminated")
    assert [(t["consumer_seq"], t["stream_seq"], t["deliveries"]) for _, t in terms] == [(2, 2, 1), (3, 3, 1)]
    assert "reason" not in terms[0][1] and terms[1][1]["reason"] == "no good"

    subj, maxd = by["MAX_DELIVERIES"]
    assert subj == "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.A.C"
    _common(maxd, "max_deliver")
    assert (maxd["consumer"], maxd["stream_seq"], maxd["deliveries"]) == ("C", 1, 2)

    subj, deleted = by["DELETED"]
    assert subj == "$JS.EVENT.ADVISORY.CONSUMER.DELETED.A.C"
    _common(deleted, "consumer_action")
    assert deleted["action"] == "delete"


async def test_advisories_cost_nothing_without_listeners(server: Server) -> None:
    """No subscriber, no advisory: a late subscriber sees only what happens after it."""
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="A", subjects=["a"])
    await js.add_consumer("A", ConsumerConfig(durable_name="EARLY", ack_policy=AckPolicy.EXPLICIT))
    seen: list[str] = []

    async def on_event(msg: Any) -> None:
        seen.append(msg.subject)

    await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.>", cb=on_event)
    await nc.flush()
    await js.add_consumer("A", ConsumerConfig(durable_name="LATE", ack_policy=AckPolicy.EXPLICIT))
    await wait_for(lambda: bool(seen))
    await asyncio.sleep(0.1)
    assert seen == ["$JS.EVENT.ADVISORY.CONSUMER.CREATED.A.LATE"]
    await nc.close()
