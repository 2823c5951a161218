"""Cluster monitoring on jetpy servers in this process: /routez (plain, subs=1, subs=detail) with
the peer's identity, subscriptions and counters, /varz's cluster block and route counts,
``$SYS.REQ.SERVER.PING.ROUTEZ``, the exporter's route metrics parsed by prometheus_client, and
the dashboard's routes table in a real browser."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_dashboard_browser import browser, row_of, until

from cluster_support import embedded_cluster
from conftest import wait_for
from jetpy.server.app import Server
from jetpy.server.options import AccountOptions, ServerOptions, User

pytestmark = pytest.mark.timeout(90)


def get(srv: Server, path: str) -> Any:
    with urllib.request.urlopen(srv.monitor_url + path, timeout=5) as r:
        body = r.read()
    return body.decode() if path == "/metrics" else json.loads(body)


async def aget(srv: Server, path: str) -> Any:
    return await asyncio.to_thread(get, srv, path)


# an application user in the global account, and the system account's user for $SYS requests
ACCOUNTS = ServerOptions(
    users=[User("app", "app"), User("sys", "sys", account="SYS")],
    accounts=[AccountOptions("SYS")],
    system_account="SYS",
)


def app_subs(route: dict[str, Any]) -> list[dict[str, Any]]:
    """A route's announced subscriptions in the global account (each server also announces its
    system account's request handlers, as nats-server does)."""
    return [s for s in route.get("subscriptions_list_detail", []) if s["sid"].startswith("$G ")]


async def test_routez_varz_and_metrics_describe_the_routes() -> None:
    async with embedded_cluster(2, monitor=True, base=ACCOUNTS) as (a, b):
        nb = await nats.connect(b.client_url, user="app", password="app")
        await nb.subscribe("foo.*")
        await nb.subscribe("bar", queue="q1")
        await nb.subscribe("bar", queue="q1")
        await nb.flush()
        na = await nats.connect(a.client_url, user="app", password="app")
        await wait_for(lambda: a.broker.subs.has_interest(b"bar"))
        for _ in range(3):
            await na.publish("foo.x", b"hello")
        await na.flush()
        await wait_for(
            lambda: b.cluster is not None and sum(r.in_msgs for r in b.cluster.remotes.values()) >= 3
        )

        routez = await aget(a, "/routez?subs=detail")
        assert (routez["server_id"], routez["server_name"], routez["num_routes"]) == (a.server_id, "E0", 1)
        (route,) = routez["routes"]
        assert (route["remote_id"], route["remote_name"]) == (b.server_id, "E1")
        assert route["did_solicit"] is False and route["is_configured"] is False
        system = b.events.subscription_count  # b's system account's request handlers, announced too
        assert route["out_msgs"] == 3 and route["out_bytes"] == 15 and route["subscriptions"] == 2 + system
        assert route["compression"] == "off"
        assert sorted(app_subs(route), key=lambda d: d["subject"]) == [
            {"subject": "bar", "qgroup": "q1", "sid": "$G bar q1", "msgs": 0, "cid": route["rid"]},
            {"subject": "foo.*", "sid": "$G foo.*", "msgs": 3, "cid": route["rid"]},
        ]
        (back,) = (await aget(b, "/routez?subs=1"))["routes"]
        assert back["did_solicit"] is True and back["is_configured"] is True and back["in_msgs"] == 3
        # a has no interest of its own to announce but its system account's
        assert all(s.startswith("$SYS.REQ.SERVER.") for s in back["subscriptions_list"])
        assert len(back["subscriptions_list"]) == a.events.subscription_count

        varz = await aget(b, "/varz")
        assert varz["cluster"] == {
            "name": "C1",
            "addr": "127.0.0.1",
            "cluster_port": b.cluster.port if b.cluster else 0,
            "auth_timeout": 2,
            "urls": [f"127.0.0.1:{a.cluster.port if a.cluster else 0}"],
            "tls_timeout": 2,
            "pool_size": -1,
        }
        assert (varz["routes"], varz["remotes"]) == (1, 1)
        assert varz["connect_urls"] == [f"127.0.0.1:{b.port}", f"127.0.0.1:{a.port}"]
        assert varz["in_msgs"] >= 3  # routed messages count, as in nats-server

        # the system request answers the same document
        # the system request answers the same document, to the system account's users only; every
        # server of the cluster answers, the request crossing the route in the system account
        ns = await nats.connect(a.client_url, user="sys", password="sys")
        answers: list[Any] = []
        inbox = ns.new_inbox()

        async def on_answer(m: Any) -> None:
            answers.append(json.loads(m.data))

        await ns.subscribe(inbox, cb=on_answer)
        await ns.publish("$SYS.REQ.SERVER.PING.ROUTEZ", b"", reply=inbox)
        await wait_for(lambda: len(answers) == 2)
        assert sorted(x["server"]["name"] for x in answers) == ["E0", "E1"]
        assert all(x["data"]["num_routes"] == 1 for x in answers)
        with pytest.raises(nats.errors.NoRespondersError):
            await na.request("$SYS.REQ.SERVER.PING.ROUTEZ", b"", timeout=2)
        await ns.close()

        families = {f.name: f for f in text_string_to_metric_families(await aget(a, "/metrics"))}
        assert families["gnatsd_routez_num_routes"].samples[0].value == 1
        (info,) = families["gnatsd_routez_route_info"].samples
        assert info.labels["remote_name"] == "E1" and info.labels["remote_id"] == b.server_id
        (out,) = families["gnatsd_routez_route_out_msgs"].samples
        # the three messages, and the system request that went to E1 in the system account
        assert out.value == 4 and out.labels == {"server_id": a.server_id, "rid": str(route["rid"])}
        assert families["gnatsd_routez_route_subscriptions"].samples[0].value == 2 + system
        assert families["gnatsd_varz_cluster_cluster_port"].samples[0].value == (
            a.cluster.port if a.cluster else 0
        )
        assert families["gnatsd_varz_remotes"].samples[0].value == 1
        await na.close()
        await nb.close()


async def test_a_server_without_a_cluster_reports_none() -> None:
    async with Server(port=0, http_port=-1) as srv:
        varz = await aget(srv, "/varz")
        assert varz["cluster"] == {} and varz["routes"] == 0 and "connect_urls" not in varz
        assert (await aget(srv, "/routez"))["routes"] == []


async def test_the_dashboard_shows_the_routes(tmp_path: Path) -> None:
    async with embedded_cluster(2, monitor=True) as (a, _b):
        driver = await asyncio.to_thread(browser, tmp_path / "profile")
        try:
            await asyncio.to_thread(driver.get, a.monitor_url + "/dashboard?refresh=500")
            cells = await until(driver, "the route to E1", lambda d: row_of(d, "routes", "E1"))
            assert cells[3] == "accepted"
            overview = await asyncio.to_thread(driver.find_element, "id", "overview")
            assert "C1 (1 routes)" in overview.text
            logs = await asyncio.to_thread(driver.get_log, "browser")
            assert [e for e in logs if e.get("level") == "SEVERE"] == []
        finally:
            await asyncio.to_thread(driver.quit)
