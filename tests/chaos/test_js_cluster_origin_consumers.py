"""The consumer a mirror keeps on its origin stream in a cluster, compared step by step with a
3-server nats-server 2.15.1 cluster: a ``CONSUMER.DELETE`` naming it, the origin's leader stepping
down, the server running it killed, the mirror's leader stepping down, its mirror deleted; and
the mirror copying on through all of them with no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import APIError, NoStreamResponseError

from .jsapi import req, until
from .jscluster import ACCOUNTS, JsCluster, reference_cluster

pytestmark = pytest.mark.timeout(360)

QUICK = 8.0  # seconds: copying that goes on (a mirror that lost its consumer waits ~20 s to notice)


class Creates:
    """The ``direct`` consumer creates the mirror sends to its origin, and the consumer deletes
    sent to it, as seen on the wire."""

    def __init__(self) -> None:
        self.configs: list[dict[str, Any]] = []
        self.deletes = 0

    async def seen(self, msg: Msg) -> None:
        cfg = json.loads(msg.data).get("config", {})
        if cfg.get("direct"):
            self.configs.append(cfg)

    async def deleted(self, msg: Msg) -> None:
        self.deletes += 1


async def _mirrored(nc: Client, count: int, within: float) -> bool:
    """Whether the mirror holds ``count`` messages within ``within`` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        info = await until(nc, "$JS.API.STREAM.INFO.M")
        if info["state"]["messages"] >= count:
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.2)


async def _publish(nc: Client, first: int, count: int) -> None:
    js = nc.jetstream(timeout=5.0)
    for i in range(first, first + count):
        for _ in range(100):  # a leader being elected meanwhile (sent again: the id dedups)
            try:
                await js.publish(f"o.{i}", str(i).encode(), headers={"Nats-Msg-Id": str(i)})
                break
            except (nats.errors.TimeoutError, NoStreamResponseError, APIError):
                await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"o.{i} not stored")


async def _deliveries(nc: Client, subject: str, within: float = 2.5) -> int:
    """How many messages (copies, heartbeats) a consumer delivering on ``subject`` sends in
    ``within`` seconds: none once it is gone."""
    got: list[Msg] = []

    async def cb(msg: Msg) -> None:
        got.append(msg)

    sub = await nc.subscribe(subject, cb=cb)
    await asyncio.sleep(within)
    await sub.unsubscribe()
    return len(got)


async def _api_errors(nc: Client) -> int:
    errors: int = (await until(nc, "$JS.API.INFO"))["api"]["errors"]
    return errors


async def _all_replies(nc: Client, subject: str, within: float = 1.5) -> list[Any]:
    """Every reply to one request (nothing answered twice, nothing left unanswered)."""
    inbox = nc.new_inbox()
    got: list[Any] = []

    async def cb(msg: Msg) -> None:
        got.append(json.loads(msg.data))

    sub = await nc.subscribe(inbox, cb=cb)
    await nc.publish(subject, b"", reply=inbox)
    await asyncio.sleep(within)
    await sub.unsubscribe()
    return got


async def _leader(nc: Client, stream: str, other_than: str = "") -> str:
    for _ in range(150):
        leader: str = (await until(nc, f"$JS.API.STREAM.INFO.{stream}"))["cluster"].get("leader", "")
        if leader and leader != other_than:
            return leader
        await asyncio.sleep(0.2)
    raise AssertionError(f"{stream}: no leader other than {other_than!r}")


async def _steps(urls: list[str], kill: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    nc = await nats.connect(servers=urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        creates = Creates()
        await nc.subscribe("$JS.API.CONSUMER.CREATE.O", cb=creates.seen)
        await nc.subscribe("$JS.API.CONSUMER.CREATE.O.>", cb=creates.seen)
        await nc.subscribe("$JS.API.CONSUMER.DELETE.O.>", cb=creates.deleted)
        got = await until(
            nc, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "num_replicas": 3}
        )
        assert "error" not in got, got
        got = await until(
            nc, "$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "num_replicas": 3}
        )
        assert "error" not in got, got
        await _publish(nc, 1, 20)
        assert await _mirrored(nc, 20, 30.0)
        holder = await _leader(nc, "O")  # runs the mirror's consumer
        assert len(creates.configs) == 1, creates.configs
        name, deliver = creates.configs[0]["name"], creates.configs[0]["deliver_subject"]

        # a CONSUMER.DELETE naming it: the meta leader does not hold it
        errors = await _api_errors(nc)
        out["delete replies"] = await _all_replies(nc, f"$JS.API.CONSUMER.DELETE.O.{name}")
        out["delete errors counted"] = await _api_errors(nc) - errors
        await _publish(nc, 21, 10)
        out["copied on after the delete"] = await _mirrored(nc, 30, QUICK)
        out["creates after the delete"] = len(creates.configs) - 1

        # the origin's leader steps down: the consumer stays on its server, delivering from its replica
        got = await until(nc, "$JS.API.STREAM.LEADER.STEPDOWN.O")
        assert got.get("success") is True, got
        out["a new origin leader"] = await _leader(nc, "O", other_than=holder) != holder
        await _publish(nc, 31, 10)
        out["copied on after the stepdown"] = await _mirrored(nc, 40, QUICK)
        out["creates after the stepdown"] = len(creates.configs) - 1
        out["the old leader's consumer delivers"] = await _deliveries(nc, deliver) > 0

        # the server running it killed: the mirror sets up a consumer on the origin's leader
        deletes = creates.deletes
        kill(holder)
        await _publish(nc, 41, 10)
        out["copied on after the kill"] = await _mirrored(nc, 50, 90.0)
        out["creates after the kill"] = len(creates.configs) - 1
        out["deletes sent over the kill"] = creates.deletes - deletes

        # the mirror's leader steps down: the new one sets up a consumer, the old one sends no delete
        errors, deletes = await _api_errors(nc), creates.deletes
        got = await until(nc, "$JS.API.STREAM.LEADER.STEPDOWN.M")
        assert got.get("success") is True, got
        await _publish(nc, 51, 10)
        out["copied on after the mirror's stepdown"] = await _mirrored(nc, 60, QUICK)
        out["creates after the mirror's stepdown"] = len(creates.configs) - 1
        out["errors counted over the mirror's stepdown"] = await _api_errors(nc) - errors
        out["deletes sent over the mirror's stepdown"] = creates.deletes - deletes
        info = await until(nc, "$JS.API.STREAM.INFO.M")
        state = info["state"]
        out["mirror"] = (state["messages"], state["first_seq"], state["last_seq"], "error" in info["mirror"])
        for seq in range(1, 61):
            msg = (await req(nc, "$JS.API.STREAM.MSG.GET.M", {"seq": seq}))["message"]
            assert msg["subject"] == f"o.{seq}", (seq, msg)

        # its mirror deleted: the consumer goes once nothing listens (its inactivity threshold)
        deliver = creates.configs[-1]["deliver_subject"]
        deletes = creates.deletes
        got = await until(nc, "$JS.API.STREAM.DELETE.M")
        assert got.get("success") is True, got
        await asyncio.sleep(13.0)  # the threshold is 10 s
        out["deletes sent when the mirror was deleted"] = creates.deletes - deletes
        out["deliveries once its mirror was deleted"] = await _deliveries(nc, deliver)
    finally:
        await nc.close()
    return out


async def test_a_mirrors_origin_consumer_as_nats_server_keeps_it(tmp_path: Path) -> None:
    conf = tmp_path / "accounts.conf"
    conf.write_text(ACCOUNTS)
    with reference_cluster(tmp_path, "-c", str(conf)) as members:
        by_name = {m.name: m for m in members}
        want = await _steps([m.url for m in members], lambda name: by_name[name].kill())
    c = JsCluster(tmp_path / "jetpy", extra=("-c", str(conf)))
    try:
        c.start()
        got = await _steps(c.urls, c.kill)
    finally:
        c.stop()
    assert want["copied on after the delete"] and want["the old leader's consumer delivers"], want
    assert want["mirror"] == (60, 1, 60, False), want
    assert got == want
