"""/gatewayz and /varz's gateway block side by side: a jetpy server (cluster A) and nats-server
2.15.1 (cluster B) joined by a gateway, the same subscriptions made on each, each server's view
of the other compared field by field (names, order, omissions, values that must agree), with
the query parameters (accs, acc_name, gw_name, subs, subs=detail) and a bad one. Both carry the
system account ``$SYS`` across and list it; its subscriptions are each implementation's own
(the ``$SYS`` requests each answers), so they are compared in shape and count only.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster_support import JETPY, NEWEST, wait_mesh
from super_support import Node, super_cluster

pytestmark = pytest.mark.timeout(120)


def _get(node: Node, path: str) -> tuple[int, Any]:
    assert node.proc is not None
    url = f"http://127.0.0.1:{node.proc.http_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def _doc(node: Node, path: str) -> Any:
    status, body = await asyncio.to_thread(_get, node, path)
    assert status == 200, body
    return body


# clients without credentials are "app" in the global account; "sys" is the system account's user,
# who may ask the $SYS requests
SYSTEM_USER = """
authorization { users: [{user: app, password: app}] }
no_auth_user: app
accounts { $SYS: { users: [{user: sys, password: sys}] } }
"""


def _g_only(accounts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in accounts if a["name"] != "$SYS"]


def _sorted_subs(acc: dict[str, Any]) -> dict[str, Any]:
    out = dict(acc)
    for key in ("subscriptions_list", "subscriptions_list_detail"):
        if key in out:
            out[key] = sorted(out[key], key=str)
    return out


async def test_gatewayz_and_varz_as_nats_server_shapes_them(tmp_path: Path) -> None:
    with super_cluster(tmp_path, {"A": [JETPY], "B": [NEWEST]}, SYSTEM_USER, monitor=True) as clusters:
        (a,), (b,) = clusters["A"], clusters["B"]
        await wait_mesh([a.url, b.url], within=20.0)
        ids = {n.name: (await _doc(n, "/varz"))["server_id"] for n in (a, b)}
        clients = [await nats.connect(n.url) for n in (a, b)]
        for nc in clients:
            await nc.subscribe("foo")
            await nc.subscribe("bar.*", queue="q1")
            await nc.flush()

        async def both_see_two() -> bool:
            for node in (a, b):
                doc = await _doc(node, "/gatewayz?acc_name=$G")
                (out,) = doc["outbound_gateways"].values()
                if out["accounts"][0].get("num_subs") != 2:
                    return False
            return True

        for _ in range(100):
            if await both_see_two():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the subscriptions did not cross the gateway")

        docs = {n.name: await _doc(n, "/gatewayz?accs=1&subs=1") for n in (a, b)}
        for node, other in ((a, b), (b, a)):
            doc = docs[node.name]
            assert list(doc) == [
                "server_id",
                "now",
                "name",
                "host",
                "port",
                "outbound_gateways",
                "inbound_gateways",
            ]
            assert (doc["server_id"], doc["name"], doc["host"], doc["port"]) == (
                ids[node.name],
                node.cluster,
                "127.0.0.1",
                node.gw_port,
            )
            assert list(doc["outbound_gateways"]) == [other.cluster]
            assert list(doc["inbound_gateways"]) == [other.cluster]
            out = doc["outbound_gateways"][other.cluster]
            (inb,) = doc["inbound_gateways"][other.cluster]
            assert list(out) == ["configured", "connection", "accounts"] and out["configured"] is True
            assert list(inb) == ["configured", "connection", "accounts"] and inb["configured"] is False
            assert out["connection"]["kind"] == inb["connection"]["kind"] == "Gateway"
            assert out["connection"]["name"] == inb["connection"]["name"] == ids[other.name]
            assert out["connection"]["port"] == other.gw_port
            assert inb["connection"]["subscriptions"] == 0
            assert [_sorted_subs(x) for x in _g_only(out["accounts"])] == [
                {
                    "name": "$G",
                    "interest_mode": "Interest-Only",
                    "interest_only_threshold": 1000,
                    "num_subs": 2,
                    "num_queue_subs": 1,
                    "subscriptions_list": ["bar.*", "foo"],
                }
            ]
            assert _g_only(inb["accounts"]) == [
                {"name": "$G", "interest_mode": "Interest-Only", "interest_only_threshold": 1000}
            ]
        ja, ra = docs[a.name], docs[b.name]
        j_out, r_out = ja["outbound_gateways"]["B"], ra["outbound_gateways"]["A"]
        j_in, r_in = ja["inbound_gateways"]["B"][0], ra["inbound_gateways"]["A"][0]
        assert list(j_out["connection"]) == list(r_out["connection"])
        assert list(j_in["connection"]) == list(r_in["connection"])
        for doc, remote in ((ja, "B"), (ra, "A")):
            out, (inb,) = doc["outbound_gateways"][remote], doc["inbound_gateways"][remote]
            # both list the system account, its subscriptions counted with the connection's
            assert sorted(x["name"] for x in out["accounts"]) == ["$G", "$SYS"]
            assert sorted(x["name"] for x in inb["accounts"]) == ["$G", "$SYS"]
            (sys_out,) = (x for x in out["accounts"] if x["name"] == "$SYS")
            assert list(sys_out) == [
                "name",
                "interest_mode",
                "interest_only_threshold",
                "num_subs",
                "subscriptions_list",
            ]
            assert sys_out["num_subs"] == len(sys_out["subscriptions_list"]) > 0
            assert out["connection"]["subscriptions"] == sum(x.get("num_subs", 0) for x in out["accounts"])

        # subs=detail for one account: the remote's subscriptions with the connection's cid
        for node, other in ((a, b), (b, a)):
            doc = await _doc(node, "/gatewayz?acc_name=$G&subs=detail")
            out = doc["outbound_gateways"][other.cluster]
            (acc,) = out["accounts"]
            cid = out["connection"]["cid"]
            assert sorted(acc["subscriptions_list_detail"], key=lambda d: d["subject"]) == [
                {"subject": "bar.*", "qgroup": "q1", "sid": "", "msgs": 0, "cid": cid},
                {"subject": "foo", "sid": "", "msgs": 0, "cid": cid},
            ]
            (inb,) = doc["inbound_gateways"][other.cluster]
            assert _g_only(inb["accounts"]) == [
                {"name": "$G", "interest_mode": "Interest-Only", "interest_only_threshold": 1000}
            ]

        # gw_name: one remote (null when there is no outbound to it); without accs no accounts
        for node, other in ((a, b), (b, a)):
            doc = await _doc(node, f"/gatewayz?gw_name={other.cluster}")
            assert list(doc["outbound_gateways"]) == [other.cluster]
            assert "accounts" not in doc["outbound_gateways"][other.cluster]
            doc = await _doc(node, "/gatewayz?gw_name=Z")
            assert doc["outbound_gateways"] is None and doc["inbound_gateways"] == {}
        bad = [await asyncio.to_thread(_get, n, "/gatewayz?accs=x") for n in (a, b)]
        assert bad[0] == bad[1] and bad[0][0] == 400

        # /varz's gateway block
        varz = {n.name: (await _doc(n, "/varz"))["gateway"] for n in (a, b)}
        for node, other in ((a, b), (b, a)):
            assert varz[node.name] == {
                "name": node.cluster,
                "host": "127.0.0.1",
                "port": node.gw_port,
                "auth_timeout": 2,
                "tls_timeout": 2,
                "gateways": [{"name": other.cluster, "urls": [f"127.0.0.1:{other.gw_port}"]}],
            }
        # the same document through the system request, with its options
        sys_client = await nats.connect(a.url, user="sys", password="sys")  # the system account's
        msg = await sys_client.request(
            f"$SYS.REQ.SERVER.{ids[a.name]}.GATEWAYZ", b'{"name": "B", "account_name": "$G"}', timeout=2
        )
        await sys_client.close()
        data = json.loads(msg.data)["data"]
        assert list(data["outbound_gateways"]) == ["B"]
        assert [x["name"] for x in data["outbound_gateways"]["B"]["accounts"]] == ["$G"]
        # /metrics: the exporter's -gatewayz families, one sample per connection
        assert a.proc is not None
        url = f"http://127.0.0.1:{a.proc.http_port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
        samples = {f.name: f.samples for f in text_string_to_metric_families(text)}
        for side in ("outbound", "inbound"):
            (configured,) = samples[f"gnatsd_gatewayz_{side}_gateway_configured"]
            assert configured.labels == {
                "gateway_name": "A",
                "remote_gateway_name": "B",
                "server_id": ids[a.name],
            }
            assert configured.value == (1 if side == "outbound" else 0)
            (info,) = samples[f"gnatsd_gatewayz_{side}_gateway_info"]
            assert info.labels["start"].endswith(" +0000 UTC") and info.value == 0
            (subs,) = samples[f"gnatsd_gatewayz_{side}_gateway_conn_subscriptions"]
            assert subs.labels["remote_gateway_name"] == "B" and int(subs.labels["cid"]) > 0
            # the connection's: $G's two and the system account's (nats-server's $SYS requests)
            assert subs.value > 2 if side == "outbound" else subs.value == 0
            (rtt,) = samples[f"gnatsd_gatewayz_{side}_gateway_conn_rtt"]
            assert 0 <= rtt.value < 1
        for nc in clients:
            await nc.close()
