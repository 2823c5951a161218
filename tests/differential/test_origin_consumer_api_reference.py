"""The consumer a mirror or source keeps on its origin is not the API's, compared with the newest
nats-server (2.15.1) on a single server: ``CONSUMER.INFO``, ``PAUSE``, ``UNPIN`` and ``DELETE``
naming it are answered "consumer not found" (each counted as an API error), it is not listed, and
it goes on copying, with no new consumer set up and nothing missing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from conftest import Proc

pytestmark = pytest.mark.differential


async def _api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    doc: dict[str, Any] = json.loads((await nc.request(f"$JS.API.{subject}", data, timeout=5)).data)
    return doc


async def _holds(nc: Client, stream: str, count: int, within: float) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while (await _api(nc, f"STREAM.INFO.{stream}"))["state"]["messages"] < count:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def _steps(url: str) -> dict[str, Any]:
    nc = await nats.connect(url)
    creates: list[dict[str, Any]] = []

    async def seen(msg: Msg) -> None:
        creates.append(json.loads(msg.data)["config"])

    out: dict[str, Any] = {}
    try:
        await nc.subscribe("$JS.API.CONSUMER.CREATE.O", cb=seen)
        js = nc.jetstream()
        await _api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        await _api(nc, "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
        await _api(nc, "STREAM.CREATE.S", {"name": "S", "sources": [{"name": "O"}]})
        for i in range(5):
            await js.publish(f"o.{i}", str(i).encode())
        assert await _holds(nc, "M", 5, 10.0) and await _holds(nc, "S", 5, 10.0)
        assert len(creates) == 2 and all(c["direct"] for c in creates), creates
        errors = (await _api(nc, "INFO"))["api"]["errors"]
        for cfg in creates:
            kind = "mirror" if cfg["deliver_subject"].startswith("$JS.M.") else "source"
            name = cfg["name"]
            out[f"{kind} info"] = await _api(nc, f"CONSUMER.INFO.O.{name}")
            out[f"{kind} pause"] = await _api(
                nc, f"CONSUMER.PAUSE.O.{name}", {"pause_until": "2099-01-01T00:00:00Z"}
            )
            out[f"{kind} unpin"] = await _api(nc, f"CONSUMER.UNPIN.O.{name}", {"group": "g"})
            out[f"{kind} delete"] = await _api(nc, f"CONSUMER.DELETE.O.{name}")
        out["errors counted"] = (await _api(nc, "INFO"))["api"]["errors"] - errors
        names = await _api(nc, "CONSUMER.NAMES.O")
        out["listed"] = (names["total"], names["consumers"])
        for i in range(5, 10):
            await js.publish(f"o.{i}", str(i).encode())
        # a copy that lost its consumer notices after ~20 s without a heartbeat
        out["mirror copies on"] = await _holds(nc, "M", 10, 5.0)
        out["source copies on"] = await _holds(nc, "S", 10, 5.0)
        out["consumers set up anew"] = len(creates) - 2
        got = [await _api(nc, "STREAM.MSG.GET.M", {"seq": seq}) for seq in range(1, 11)]
        out["mirror's subjects"] = [g.get("message", {}).get("subject") for g in got]
    finally:
        await nc.close()
    return out


async def test_an_origin_consumer_is_not_the_apis_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(_steps(jetpy_proc.url), _steps(newest_proc.url))
    assert ref["mirror delete"]["error"]["err_code"] == 10014, ref
    assert ref["mirror copies on"] and ref["source copies on"], ref
    assert ref["mirror's subjects"] == [f"o.{i}" for i in range(10)], ref
    assert ours == ref
