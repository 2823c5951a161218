"""Accounts across a cluster, as processes on loopback: two jetpy servers, and jetpy with
nats-server 2.9.10 or 2.15.1 (either as the seed), all with the same accounts. Interest and
messages carry their account over the routes, so an account's subject space spans the cluster
and no other account sees into it; a stream import delivers once whichever servers the publisher
and the subscriber are on, a service import answers across servers, and the system account's
requests are answered by every server of the cluster."""

from __future__ import annotations

import asyncio
import collections
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cluster_support import JETPY, NEWEST, OLDEST, Member, start_member, wait_mesh
from conftest import wait_for

pytestmark = pytest.mark.timeout(120)

CONF = """
authorization { users: [{user: g, password: g}] }
no_auth_user: g
accounts {
  A: { users: [{user: a, password: a}], exports: [{stream: "feed.>"}, {service: "svc.>"}] }
  B: {
    users: [{user: b, password: b}]
    imports: [{stream: {account: A, subject: "feed.>"}, prefix: "fromA"}, {service: {account: A, subject: "svc.>"}}]
  }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""

LAYOUTS = [
    pytest.param([JETPY, JETPY], id="jetpy-jetpy"),
    pytest.param([JETPY, OLDEST], id="jetpy-seed-2.9.10"),
    pytest.param([OLDEST, JETPY], id="2.9.10-seed"),
    pytest.param([JETPY, NEWEST], id="jetpy-seed-2.15.1"),
]


@pytest.fixture(params=LAYOUTS)
def members(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Member]]:
    conf = tmp_path / "accounts.conf"
    conf.write_text(CONF)
    kinds: list[str] = request.param
    started: list[Member] = []
    try:
        seed = start_member(tmp_path, kinds[0], "S0", (), "-c", str(conf))
        started.append(seed)
        started.append(start_member(tmp_path, kinds[1], "S1", [seed.route_url], "-c", str(conf)))
        yield started
    finally:
        for m in started:
            m.proc.stop(signal.SIGKILL)


async def login(member: Member, user: str) -> NATS:
    return await nats.connect(member.url.replace("//", f"//{user}:{user}@"), allow_reconnect=False)


async def test_accounts_span_the_cluster_and_stay_apart(members: list[Member]) -> None:
    await wait_mesh([m.url for m in members])
    s0, s1 = members
    a0, a1, b0, b1 = await login(s0, "a"), await login(s1, "a"), await login(s0, "b"), await login(s1, "b")
    got: dict[str, list[tuple[str, bytes]]] = collections.defaultdict(list)

    def into(key: str) -> Any:
        async def cb(m: Msg) -> None:
            got[key].append((m.subject, m.data))

        return cb

    try:
        # the same subject in A and B, subscribers on the other server
        await a1.subscribe("shared", cb=into("a1"))
        await b1.subscribe("shared", cb=into("b1"))
        # B's stream import, a subscriber on each server
        await b0.subscribe("fromA.>", cb=into("b0 import"))
        await b1.subscribe("fromA.>", cb=into("b1 import"))
        for nc in (a1, b0, b1):
            await nc.flush()
        await asyncio.sleep(0.5)  # interest crosses the route

        await a0.publish("shared", b"a's")
        await b0.publish("shared", b"b's")
        await a0.publish("feed.0", b"from s0")
        await a1.publish("feed.1", b"from s1")
        await a0.flush()
        await a1.flush()
        await b0.flush()
        await wait_for(
            lambda: len(got["b0 import"]) == 2 and len(got["b1 import"]) == 2 and len(got["b1"]) == 1
        )
        await asyncio.sleep(0.3)  # nothing more arrives
        assert got["a1"] == [("shared", b"a's")] and got["b1"] == [("shared", b"b's")]
        for key in ("b0 import", "b1 import"):  # once each, whichever server published
            assert sorted(got[key]) == [("fromA.feed.0", b"from s0"), ("fromA.feed.1", b"from s1")], key

        # B asks A's service on the other server: the reply comes back across the route
        async def serve(m: Msg) -> None:
            info = json.loads((m.headers or {}).get("Nats-Request-Info", "{}"))
            await a0.publish(m.reply, f"{m.subject} for {info.get('acc')}".encode())

        await a0.subscribe("svc.>", cb=serve)
        await a0.flush()
        await asyncio.sleep(0.5)
        reply = await b1.request("svc.time", b"?", timeout=3)
        assert reply.data == b"svc.time for B"
    finally:
        for nc in (a0, a1, b0, b1):
            await nc.close()


async def test_every_server_answers_the_system_account(members: list[Member]) -> None:
    await wait_mesh([m.url for m in members])
    admin = await login(members[0], "sys")
    app = await login(members[1], "a")
    answers: list[dict[str, Any]] = []
    try:

        async def on_answer(m: Msg) -> None:
            answers.append(json.loads(m.data))

        inbox = admin.new_inbox()
        await admin.subscribe(inbox, cb=on_answer)
        await admin.flush()
        await asyncio.sleep(0.5)
        await admin.publish("$SYS.REQ.SERVER.PING", b"", reply=inbox)
        await admin.flush()
        await wait_for(lambda: len(answers) == 2, within=5)
        assert sorted(a["server"]["name"] for a in answers) == ["S0", "S1"]
        # an application account has no $SYS to ask
        with pytest.raises(nats.errors.NoRespondersError):
            await app.request("$SYS.REQ.SERVER.PING", b"", timeout=2)
    finally:
        await admin.close()
        await app.close()
