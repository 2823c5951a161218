"""Monitoring endpoints, jetpy against Debian's nats-server: the same field names with the same
JSON types.

Both servers get the same clients and traffic; then every document's *shape* (field names,
nested, and the JSON type of each value) is compared. Values differ by nature (ids, times,
ports). Deliberate differences are listed in ``ALLOWED`` with the reason for each; anything
else, missing or extra, fails.
"""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from conftest import Proc, reference_cmd, start_process
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions

pytestmark = pytest.mark.differential

# path of a field ("varz.tls_timeout", "connz.connections[].rtt") -> why jetpy differs
ALLOWED: dict[str, str] = {
    "accstatz.account_statz[].name": "extra: nats-server 2.10+ names the account (the exporter reads it)",
    "accstatz.account_statz[].num_subscriptions": "extra: nats-server 2.10+ counts the account's "
    "subscriptions (the exporter reads it)",
    "routez.server_name": "extra: nats-server 2.10+ names itself in /routez (compared with 2.15.1 in "
    "test_cluster_monitor_reference.py)",
}

# endpoint name -> path queried on both servers
ENDPOINTS: dict[str, str] = {
    "varz": "/varz",
    "connz": "/connz?subs=detail",
    "connz_list": "/connz?subs=1",
    "connz_closed": "/connz?state=closed",
    "subsz": "/subsz",
    "subsz_list": "/subsz?subs=1",
    "healthz": "/healthz",
    "jsz": "/jsz",
    "accountz": "/accountz",
    "accstatz": "/accstatz",
    "routez": "/routez",
    "gatewayz": "/gatewayz",
    "leafz": "/leafz",
}
# accountz differences are reported under "accountz" whichever query produced them
SECTION = {"connz_list": "connz", "connz_closed": "connz", "subsz_list": "subsz"}


def shape(value: Any) -> Any:
    """A value's JSON type, recursively; a list's elements are merged into one shape."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, list):
        merged: Any = None
        for item in value:
            merged = merge(merged, shape(item))
        return ["list", merged]
    assert isinstance(value, dict)
    return {k: shape(v) for k, v in value.items()}


def merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out.get(k), v)
        return out
    return a


def differences(ref: Any, ours: Any, path: str) -> dict[str, str]:
    """Field path -> "missing" / "extra" / "type <ref> != <ours>"."""
    out: dict[str, str] = {}
    if isinstance(ref, dict) and isinstance(ours, dict):
        for k in ref.keys() - ours.keys():
            out[f"{path}.{k}"] = "missing"
        for k in ours.keys() - ref.keys():
            out[f"{path}.{k}"] = "extra"
        for k in ref.keys() & ours.keys():
            out.update(differences(ref[k], ours[k], f"{path}.{k}"))
    elif isinstance(ref, list) and isinstance(ours, list):
        if ref[1] is not None and ours[1] is not None:
            out.update(differences(ref[1], ours[1], f"{path}[]"))
        elif ref[1] != ours[1]:
            out[f"{path}[]"] = f"element {ref[1]} != {ours[1]}"
    elif ref != ours:
        out[path] = f"type {ref} != {ours}"
    return out


def fetch(base: str, path: str) -> Any:
    try:
        with urllib.request.urlopen(base + path, timeout=5) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # /healthz answers 503 with a JSON body
        return json.loads(e.read())


async def fetch_all(base: str) -> dict[str, Any]:
    return {name: await asyncio.to_thread(fetch, base, path) for name, path in ENDPOINTS.items()}


async def drive(url: str) -> list[Any]:
    """The same clients and traffic on either server; returns the clients left open."""
    alpha = await nats.connect(url, name="alpha", allow_reconnect=False)
    beta = await nats.connect(url, name="beta", allow_reconnect=False)
    await alpha.subscribe("foo.*")
    await alpha.subscribe("foo.bar", queue="q1")
    await beta.subscribe("bar")
    await alpha.flush()
    await beta.flush()
    for _ in range(3):
        await beta.publish("foo.bar", b"hello")
    await beta.flush()
    await alpha.flush()
    gamma = await nats.connect(url, name="gamma", allow_reconnect=False)
    await gamma.close()
    await asyncio.sleep(0.1)  # let both servers record gamma as closed
    return [alpha, beta]


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[Proc]:
    p = start_process(reference_cmd(tmp_path, "-m", "-1"), tmp_path / "ref.log", want_http=True)
    yield p
    p.stop(signal.SIGKILL)


@pytest.fixture
async def ours() -> AsyncIterator[Server]:
    async with Server(ServerOptions(host="127.0.0.1", port=0, http_port=-1)) as srv:
        yield srv


async def test_monitoring_documents_have_nats_servers_shape(reference: Proc, ours: Server) -> None:
    ref_clients = await drive(reference.url)
    our_clients = await drive(ours.client_url)
    try:
        ref_docs = await fetch_all(f"http://127.0.0.1:{reference.http_port}")
        our_docs = await fetch_all(ours.monitor_url)
    finally:
        for nc in ref_clients + our_clients:
            await nc.close()

    # the scenario must be rich enough to exercise the optional fields on both sides
    for docs in (ref_docs, our_docs):
        assert {c["name"] for c in docs["connz"]["connections"]} >= {"alpha", "beta"}
        assert [c["name"] for c in docs["connz_closed"]["connections"]] == ["gamma"]
        assert docs["subsz_list"]["subscriptions_list"]
        assert docs["jsz"]["disabled"] is True and docs["healthz"] == {"status": "ok"}

    found: dict[str, str] = {}
    for name in ENDPOINTS:
        found.update(differences(shape(ref_docs[name]), shape(our_docs[name]), SECTION.get(name, name)))
    unexplained = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unexplained, f"monitoring fields differ from nats-server: {unexplained}"
    stale = {k for k in ALLOWED if k not in found}
    assert not stale, f"ALLOWED lists differences that no longer exist: {stale}"


async def test_jetstream_sections_have_nats_servers_shape(tmp_path: Path) -> None:
    async with Server(
        ServerOptions(host="127.0.0.1", port=0, http_port=-1, jetstream=True, store_dir=str(tmp_path / "jp"))
    ) as srv:
        if srv.jetstream is None or not callable(getattr(srv.jetstream, "jsz_stats", None)):
            pytest.skip(
                "jetpy's JetStream does not report jsz_stats() yet; only the disabled /jsz is compared"
            )
        ref = start_process(
            reference_cmd(tmp_path, "-m", "-1", "-js", "-sd", str(tmp_path / "ref")),
            tmp_path / "ref.log",
            want_http=True,
        )
        try:
            docs: list[dict[str, Any]] = []
            for url, base in (
                (ref.url, f"http://127.0.0.1:{ref.http_port}"),
                (srv.client_url, srv.monitor_url),
            ):
                nc = await nats.connect(url, allow_reconnect=False)
                js = nc.jetstream()
                await js.add_stream(name="S", subjects=["s.>"])
                await js.publish("s.1", b"x")
                await js.publish("s.2", b"y")
                sub = await js.pull_subscribe("s.>", durable="D")
                (m, _) = await sub.fetch(2, timeout=2)
                await m.ack_sync()
                await nc.close()
                docs.append(
                    {
                        "varz": (await asyncio.to_thread(fetch, base, "/varz"))["jetstream"],
                        "jsz": await asyncio.to_thread(
                            fetch, base, "/jsz?accounts=1&streams=1&consumers=1&config=1"
                        ),
                    }
                )
        finally:
            ref.stop(signal.SIGKILL)
    found: dict[str, str] = {}
    for name in ("varz", "jsz"):
        found.update(differences(shape(docs[0][name]), shape(docs[1][name]), f"js.{name}"))
    # StreamConfig fields that nats-server 2.10/2.11 added and 2.9 (the reference here) lacks
    newer = {
        f"js.jsz.account_details[].stream_detail[].config.{f}": "extra"
        for f in ("allow_msg_ttl", "compression", "consumer_limits")
    }
    found = {k: v for k, v in found.items() if newer.get(k) != v}
    assert not found, f"JetStream monitoring fields differ from nats-server: {found}"
