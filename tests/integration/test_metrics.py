"""``GET /metrics``: the Prometheus text format, prometheus-nats-exporter's names, jetpy's own
meters, the scrape cost with 1,000 streams, and the monitor's answers to bad input.

Every scrape is parsed by ``prometheus_client``'s own parser (the format's reference reader in
Python), from a real server over a real socket with nats-py clients.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from test_monitor import get, get_json

from jetpy.server.app import Server

SCRAPE_BUDGET = 0.100  # seconds of server time for one scrape of a server with 1,000 streams


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server(port=0, http_port=-1, store_dir=str(tmp_path)) as s:
        yield s


async def scrape(srv: Server) -> dict[str, list[Sample]]:
    resp = await get(srv, "/metrics")
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(resp.body.decode()):
        for s in family.samples:
            samples.setdefault(s.name, []).append(s)
    return samples


def one(samples: dict[str, list[Sample]], name: str, **labels: str) -> float:
    found = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name} {labels}: {found}"
    return found[0]


async def test_metrics_parse_with_the_exporters_names(srv: Server) -> None:
    nc = await nats.connect(srv.client_url, name='app "one" \\ <script>alert(1)</script>')
    try:
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"], max_msgs=1000)
        for i in range(10):
            await js.publish("orders.new", f"order {i}".encode())
        sub = await js.pull_subscribe("orders.>", durable="SHIP")
        msgs = await sub.fetch(4)
        await msgs[0].ack()
        await asyncio.sleep(0.6)  # two loop-lag samples at least
        m = await scrape(srv)
    finally:
        await nc.close()
    sid = srv.server_id
    # server (gnatsd_varz_*), flattened like the exporter, label gauges for strings
    assert one(m, "gnatsd_varz_connections", server_id=sid) == 1
    assert one(m, "gnatsd_varz_in_msgs", server_id=sid) >= 10
    assert one(m, "gnatsd_varz_max_payload", server_id=sid) == 1024 * 1024
    assert one(m, "gnatsd_varz_jetstream_stats_api_total", server_id=sid) >= 2
    assert one(m, "gnatsd_varz_version", server_id=sid, value="2.10.0") == 1
    assert one(m, "gnatsd_varz_start", server_id=sid) == pytest.approx(srv.start_time * 1000, abs=1)
    for name in (
        "gnatsd_varz_cpu",
        "gnatsd_varz_mem",
        "gnatsd_varz_slow_consumers",
        "gnatsd_varz_subscriptions",
    ):
        assert name in m, name
    # connections: the sums and the per-connection series, the client's name escaped and intact
    assert one(m, "gnatsd_connz_num_connections", server_id=sid) == 1
    # (the parser spells counter samples with _total; the text has the exporter's names)
    (detail,) = [s for s in m["gnatsd_connz_in_msgs_total"] if "cid" in s.labels]
    assert detail.labels["name"] == 'app "one" \\ <script>alert(1)</script>'
    assert detail.labels["lang"] == "python3" and detail.value >= 10
    assert one(m, "gnatsd_healthz_status", server_id=sid) == 0
    assert one(m, "gnatsd_subsz_num_subscriptions", server_id=sid) >= 1
    # JetStream: server totals, per stream and per consumer with the exporter's labels
    assert one(m, "jetstream_server_total_streams", server_id=sid) == 1
    assert one(m, "jetstream_server_total_messages", server_id=sid) == 10
    assert one(m, "jetstream_stream_total_messages", stream_name="ORDERS", account="$G") == 10
    assert one(m, "jetstream_stream_last_seq", stream_name="ORDERS") == 10
    assert one(m, "jetstream_stream_consumer_count", stream_name="ORDERS") == 1
    assert one(m, "jetstream_stream_limit_messages", stream_name="ORDERS") == 1000
    assert one(m, "jetstream_stream_limit_bytes", stream_name="ORDERS") == -1
    labels = {"stream_name": "ORDERS", "consumer_name": "SHIP"}
    assert one(m, "jetstream_consumer_num_pending", **labels) == 6
    assert one(m, "jetstream_consumer_num_ack_pending", **labels) == 3
    assert one(m, "jetstream_consumer_delivered_stream_seq", **labels) == 4
    assert one(m, "jetstream_consumer_ack_floor_stream_seq", **labels) == 1
    assert one(m, "jetstream_consumer_num_redelivered", **labels) == 0
    assert set(m["jetstream_consumer_num_waiting"][0].labels) >= {
        "server_id",
        "server_name",
        "cluster",
        "account",
        "stream_name",
        "consumer_name",
        "is_consumer_leader",
    }
    # jetpy's own: every publish to the file stream went through a group commit
    assert one(m, "jetpy_group_commit_fsync_seconds_count", server_id=sid) >= 1
    inf = one(m, "jetpy_group_commit_fsync_seconds_bucket", server_id=sid, le="+Inf")
    assert inf == one(m, "jetpy_group_commit_fsync_seconds_count", server_id=sid)
    assert one(m, "jetpy_store_write_bytes_total", server_id=sid) > 0
    assert one(m, "jetpy_store_writes_total", server_id=sid) >= 1
    assert one(m, "jetpy_event_loop_lag_seconds_count", server_id=sid) >= 2
    assert "jetpy_store_read_bytes_total" in m and "jetpy_event_loop_lag_last_seconds" in m


async def test_a_scrape_of_1000_streams_stays_under_100ms(srv: Server) -> None:
    nc = await nats.connect(srv.client_url)
    try:
        js = nc.jetstream()
        for i in range(1000):
            await js.add_stream(name=f"S{i:04d}", subjects=[f"s{i}.>"], storage="memory" if i % 2 else "file")
        await js.add_consumer("S0000", durable_name="C")
        await js.publish("s0.x", b"x")
        costs = []
        for _ in range(3):
            m = await scrape(srv)
            costs.append(srv_scrape_seconds(srv))
    finally:
        await nc.close()
    assert len(m["jetstream_stream_total_messages"]) == 1000
    print(f"/metrics with 1,000 streams: {min(costs) * 1000:.1f} ms of server time (runs {costs})")
    assert min(costs) < SCRAPE_BUDGET


def srv_scrape_seconds(srv: Server) -> float:
    monitor = srv._monitor
    assert monitor is not None
    return monitor.metrics.last_scrape


async def test_metrics_without_jetstream(tmp_path: Path) -> None:
    async with Server(port=0, http_port=-1) as s:
        m = await scrape(s)
    assert one(m, "jetstream_server_jetstream_disabled", server_id=s.server_id) == 1
    assert "jetstream_stream_total_messages" not in m and "jetpy_group_commit_fsync_seconds_count" not in m


async def test_unknown_endpoints_are_a_short_json_404(srv: Server) -> None:
    resp = await get(srv, "/nope")
    assert resp.status == 404 and resp.headers["content-type"] == "application/json"
    assert resp.json() == {"code": 404, "error": "no monitoring endpoint at /nope"}
    long = await get(srv, "/" + "x" * 5000)
    assert long.status == 404 and len(long.body) < 300


async def test_huge_paging_values_are_clamped(srv: Server) -> None:
    nc = await nats.connect(srv.client_url)
    try:
        started = time.perf_counter()
        cz = await get_json(srv, f"/connz?limit={2**62}&offset={2**62}")
        assert (cz["limit"], cz["offset"], cz["connections"]) == (100_000, 2**32, [])
        first = await get_json(srv, f"/connz?limit={2**62}")
        assert first["num_connections"] == 1 and first["limit"] == 100_000
        assert (await get_json(srv, f"/subsz?subs=1&limit={2**62}&offset=-{2**62}"))["limit"] == 100_000
        assert "now" in await get_json(srv, f"/jsz?accounts=1&limit={2**62}&offset={2**62}")
        assert time.perf_counter() - started < 5
    finally:
        await nc.close()
