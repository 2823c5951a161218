"""A push consumer's ``deliver_group``, compared with the newest nats-server (2.15.1): only
members of that queue group on the deliver subject give it someone to deliver to. A plain
subscriber, or another queue group, neither binds it (``push_bound``) nor receives anything; a
plain subscriber gets copies while the group is there, and nothing once it has gone."""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.errors import TimeoutError as NatsTimeout

from conftest import Proc

pytestmark = pytest.mark.differential


async def _api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    doc: dict[str, Any] = json.loads((await nc.request(f"$JS.API.{subject}", data, timeout=3)).data)
    return doc


async def _drain(sub: Subscription) -> int:
    """How many messages reach ``sub`` before it has been quiet for half a second."""
    got = 0
    while True:
        try:
            await sub.next_msg(timeout=0.5)
        except NatsTimeout:
            return got
        got += 1


async def _bound(nc: Client, name: str) -> bool:
    return bool((await _api(nc, f"CONSUMER.INFO.DG.{name}")).get("push_bound"))


async def _push(nc: Client, name: str, deliver: str) -> bool:
    cfg = {"name": name, "deliver_subject": deliver, "deliver_group": "g", "ack_policy": "none"}
    created = await _api(nc, f"CONSUMER.CREATE.DG.{name}", {"stream_name": "DG", "config": cfg})
    assert "error" not in created, created
    return bool(created.get("push_bound"))


async def _deliveries(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    nc = await nats.connect(url)
    try:
        await _api(nc, "STREAM.CREATE.DG", {"name": "DG", "subjects": ["dg.>"], "storage": "memory"})
        for i in range(3):
            await nc.request("dg.a", str(i).encode(), timeout=3)
        plain = await nc.subscribe("to.plain")
        other = await nc.subscribe("to.other", queue="other")
        mixed = await nc.subscribe("to.mixed")
        group = await nc.subscribe("to.mixed", queue="g")
        await nc.flush()
        for name, deliver, subs in (
            ("PLAIN", "to.plain", (plain,)),
            ("OTHER", "to.other", (other,)),
            ("MIXED", "to.mixed", (mixed, group)),
        ):
            out[f"{name} created bound"] = await _push(nc, name, deliver)
            out[f"{name} got"] = [await _drain(s) for s in subs]
            out[f"{name} bound"] = await _bound(nc, name)
        await group.unsubscribe()
        await nc.flush()
        await nc.request("dg.a", b"late", timeout=3)
        out["MIXED got once the group left"] = await _drain(mixed)
        out["MIXED bound once the group left"] = await _bound(nc, "MIXED")
        late = await nc.subscribe("to.plain", queue="g")  # the group arrives: PLAIN delivers
        out["PLAIN got once the group came"] = await _drain(late)
        out["PLAIN bound once the group came"] = await _bound(nc, "PLAIN")
    finally:
        await nc.close()
    return out


async def test_deliver_group_decides_who_binds_a_push_consumer(jetpy_proc: Proc, newest_proc: Proc) -> None:
    theirs = await _deliveries(newest_proc.url)
    assert theirs["PLAIN got"] == [0] and theirs["MIXED got"] == [3, 3], theirs
    assert await _deliveries(jetpy_proc.url) == theirs
