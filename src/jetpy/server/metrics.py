"""Metrics: ``GET /metrics``, the monitoring documents in the Prometheus text format.

Owns the names and label sets, which are prometheus-nats-exporter's (v0.20 run with ``-varz
-connz_detailed -subz -routez -healthz -jsz=all``), so that dashboards and alerts written for
the exporter work unchanged against jetpy's monitoring port with no exporter in between:

- ``gnatsd_varz_<field>``: every number of /varz, nested objects flattened with ``_``
  (``gnatsd_varz_jetstream_stats_storage``), ``start``/``config_load_time`` as epoch
  milliseconds, the strings ``server_id``/``server_name``/``version`` as ``{value="..."} 1``;
  all gauges, as the exporter types them;
- ``gnatsd_connz_*``: the sums over the open connections (``in_msgs``... as counters) and, per
  connection (the first ``DEFAULT_LIST_SIZE`` by cid), the same with ``cid``, ``kind``, ``type``,
  ``ip``, ``port``, ``name``, ``lang``, ``version`` labels; ``gnatsd_subsz_*``,
  ``gnatsd_routez_num_routes`` and per route ``gnatsd_routez_route_{info,rtt_seconds,
  subscriptions,uptime_seconds,in_msgs,out_msgs,in_bytes,out_bytes}`` (labels ``server_id``,
  ``rid``; ``route_info`` adds ``remote_id``, ``remote_name``, ``account``, ``ip``,
  ``compression``), per gateway connection ``gnatsd_gatewayz_{outbound,inbound}_gateway_{info,
  configured}`` (labels ``gateway_name``, ``remote_gateway_name``, ``server_id``; ``info`` adds
  ``start``, ``last_activity``, ``uptime``, ``idle``) and ``..._conn_{rtt,pending_bytes,in_msgs,
  out_msgs,in_bytes,out_bytes,subscriptions}`` (plus ``cid``; ``rtt`` in seconds), as the
  exporter's ``-gatewayz`` has them, ``gnatsd_leafz_conn_nodes_total`` and per leaf link
  ``gnatsd_leafz_conn_{rtt,in_msgs,out_msgs,in_bytes,out_bytes,subscriptions}`` (labels
  ``server_id``, ``name``, ``account``, ``ip``, ``port``) as its ``-leafz`` has them,
  ``gnatsd_healthz_status`` (0 = ok);
- ``gnatsd_accstatz_{current_connections,total_connections,subscriptions,leaf_nodes,
  sent_messages,sent_bytes,received_messages,received_bytes,slow_consumers}`` per account
  (labels ``server_id``, ``account``, ``account_id``, ``account_name``; every account, as the
  exporter's ``-accstatz`` asks with ``unused=1``);
- ``jetstream_server_*``, ``jetstream_account_*``, ``jetstream_stream_*`` and
  ``jetstream_consumer_*`` from /jsz with the exporter's labels (``server_id``, ``server_name``,
  ``cluster``, ``domain``, ``meta_leader``, ``is_meta_leader``, then ``account``,
  ``account_id``, ``account_name``, ``stream_name``, ``stream_leader``, ``is_stream_leader``,
  ``stream_raft_group``, then ``consumer_name``, ``consumer_leader``, ``is_consumer_leader``,
  ``consumer_desc``);

plus jetpy's own ``jetpy_*``: the group commit's fsync round latency (a histogram), the file
stores' read and write bytes and calls, the event loop's lag (a histogram and the last sample)
and how long the previous scrape took to build. The exporter's ``server_id`` label is the
monitoring URL it polls unless told otherwise; here it is the server's id.

Knows nothing of HTTP (``monitor`` serves the reply) and reads the server only through the
monitor's documents (``monitor_endpoints``) and the JetStream service's report.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

from jetpy.meters import STORE_IO, Histogram
from jetpy.server.loop_lag import LoopLag
from jetpy.server.monitor_accounts import accstatz_entries
from jetpy.server.monitor_endpoints import DEFAULT_LIST_SIZE, Endpoints, Reply, pending_bytes
from jetpy.server.monitor_format import Query

__all__ = ["CONTENT_TYPE", "Metrics", "escape_label"]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
# /varz strings the exporter turns into {value="..."} gauges; it drops every other string
_VARZ_LABEL_KEYS: Final = frozenset(
    {"server_id", "server_name", "version", "cluster_name", "jetstream_meta_leader", "jetstream_meta_name"}
)
_VARZ_EPOCH_MS: Final = frozenset({"start", "config_load_time"})  # the exporter's epoch milliseconds
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]+")
_NEEDS_ESCAPE = re.compile(r'[\\"\n]')

_ACCSTATZ_FAMILIES: Final = (
    ("current_connections", ("conns",)),
    ("total_connections", ("total_conns",)),
    ("subscriptions", ("num_subscriptions",)),
    ("leaf_nodes", ("leafnodes",)),
    ("sent_messages", ("sent", "msgs")),
    ("sent_bytes", ("sent", "bytes")),
    ("received_messages", ("received", "msgs")),
    ("received_bytes", ("received", "bytes")),
    ("slow_consumers", ("slow_consumers",)),
)
_STREAM_FAMILIES: Final = (
    ("total_messages", "Total number of messages from a stream", ("state", "messages")),
    ("total_bytes", "Total stored bytes from a stream", ("state", "bytes")),
    ("first_seq", "First sequence from a stream", ("state", "first_seq")),
    ("last_seq", "Last sequence from a stream", ("state", "last_seq")),
    ("consumer_count", "Total number of consumers from a stream", ("state", "consumer_count")),
    ("subject_count", "Total number of subjects in a stream", ("state", "num_subjects")),
    (
        "limit_bytes",
        "The maximum configured storage limit (in bytes) for a JetStream stream. A value of -1 indicates no limit.",
        ("config", "max_bytes"),
    ),
    (
        "limit_messages",
        "The maximum number of messages allowed in a JetStream stream as per its configuration. "
        "A value of -1 indicates no limit.",
        ("config", "max_msgs"),
    ),
)
_CONSUMER_FAMILIES: Final = (
    (
        "ack_floor_consumer_seq",
        "Number of ack floor consumer seq from a consumer",
        ("ack_floor", "consumer_seq"),
    ),
    ("ack_floor_stream_seq", "Number of ack floor stream seq from a consumer", ("ack_floor", "stream_seq")),
    ("delivered_consumer_seq", "Latest sequence number of a stream consumer", ("delivered", "consumer_seq")),
    ("delivered_stream_seq", "Latest sequence number of a stream", ("delivered", "stream_seq")),
    ("num_ack_pending", "Number of pending acks from a consumer", ("num_ack_pending",)),
    ("num_pending", "Number of pending messages from a consumer", ("num_pending",)),
    ("num_redelivered", "Number of redelivered messages from a consumer", ("num_redelivered",)),
    ("num_waiting", "Number of inflight fetch requests from a pull consumer", ("num_waiting",)),
)
_SERVER_JS_FAMILIES: Final = (
    ("max_memory", "JetStream Max Memory", ("config", "max_memory")),
    ("max_storage", "JetStream Max Storage", ("config", "max_storage")),
    ("total_consumers", "Total number of consumers in JetStream", ("consumers",)),
    ("total_message_bytes", "Total number of bytes stored in JetStream", ("bytes",)),
    ("total_messages", "Total number of stored messages in JetStream", ("messages",)),
    ("total_streams", "Total number of streams in JetStream", ("streams",)),
)
_ACCOUNT_FAMILIES: Final = (
    ("max_memory", "JetStream Account Max Memory in bytes", ("max_memory",)),
    ("max_storage", "JetStream Account Max Storage in bytes", ("max_storage",)),
    ("memory_used", "Total number of bytes used by JetStream memory", ("memory",)),
    ("storage_used", "Total number of bytes used by JetStream storage", ("storage",)),
)
_CONN_SUMS: Final = (
    # (name, the exporter's type, the row's attribute)
    ("in_bytes", "counter", "in_bytes"),
    ("in_msgs", "counter", "in_msgs"),
    ("out_bytes", "counter", "out_bytes"),
    ("out_msgs", "counter", "out_msgs"),
    ("pending_bytes", "gauge", "pending"),
    ("subscriptions", "gauge", "subs"),
)


def escape_label(value: str) -> str:
    """A label value as the text format needs it: backslash, double quote and newline escaped."""
    if _NEEDS_ESCAPE.search(value) is None:
        return value
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs)


def _num(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def _dig(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = doc
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


class _Out:
    """The text being written: families in order, each a HELP and a TYPE line then samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, help_text: str, kind: str = "gauge") -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: str, value: float) -> None:
        self.lines.append(f"{name}{{{labels}}} {_num(value)}")

    def gauge(self, name: str, help_text: str, labels: str, value: float) -> None:
        self.family(name, help_text)
        self.sample(name, labels, value)

    def rows(self, name: str, help_text: str, rows: list[tuple[str, Any]], kind: str = "gauge") -> None:
        """One family with a sample per ``(labels, value)``; rows without a number are skipped."""
        self.family(name, help_text, kind)
        for labels, value in rows:
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.sample(name, labels, value)

    def histogram(self, name: str, help_text: str, labels: str, h: Histogram) -> None:
        self.family(name, help_text, "histogram")
        for bound, n in h.cumulative():
            self.sample(f"{name}_bucket", f'{labels},le="{_num(bound)}"', n)
        self.sample(f"{name}_sum", labels, h.sum)
        self.sample(f"{name}_count", labels, h.count)

    def text(self) -> bytes:
        self.lines.append("")
        return "\n".join(self.lines).encode()


class Metrics:
    """Renders /metrics from the monitor's documents; ``last_scrape`` is the previous one's cost."""

    def __init__(self, endpoints: Endpoints, loop_lag: LoopLag) -> None:
        self.endpoints = endpoints
        self.loop_lag = loop_lag
        self.last_scrape = 0.0  # seconds the previous scrape took to build

    async def handle(self, q: Query) -> Reply:
        started = time.perf_counter()
        body = self.render()
        self.last_scrape = time.perf_counter() - started
        return Reply(200, body, CONTENT_TYPE)

    def render(self) -> bytes:
        out = _Out()
        server = self.endpoints.server
        sid = f'server_id="{escape_label(server.server_id)}"'
        self._varz(out, sid)
        self._connz(out, sid)
        self._subsz(out, sid)
        health = self.endpoints.health()
        out.gauge("gnatsd_healthz_status", "status", sid, 0 if health["status"] == "ok" else 1)
        out.gauge(
            "gnatsd_healthz_status_value", "status", f'{sid},value="{escape_label(health["status"])}"', 1
        )
        self._routez(out, sid)
        self._accstatz(out, sid)
        if server.gateways is not None:
            self._gatewayz(out, server.server_id)
        if server.leafnodes is not None:
            self._leafz(out, sid)
        self._jetstream(out, server.server_id, server.server_name)
        self._own(out, sid)
        return out.text()

    # -- core -------------------------------------------------------------------------------------

    def _varz(self, out: _Out, sid: str) -> None:
        varz = self.endpoints.varz_doc()
        start_ms = round(self.endpoints.server.start_time * 1000)
        flat: dict[str, Any] = {}
        _flatten(varz, "", flat)
        for key in sorted(flat):
            value = flat[key]
            name = f"gnatsd_varz_{key}"
            if key in _VARZ_EPOCH_MS:
                out.gauge(name, key, sid, start_ms)
            elif isinstance(value, str):
                if key in _VARZ_LABEL_KEYS:
                    out.gauge(name, key, f'{sid},value="{escape_label(value)}"', 1)
            elif isinstance(value, int | float) and not isinstance(value, bool):
                out.gauge(name, key, sid, value)

    def _connz(self, out: _Out, sid: str) -> None:
        conns = sorted(self.endpoints.server.connections.values(), key=lambda c: c.cid)
        rows = [
            (
                c,
                {
                    "in_bytes": c.in_bytes,
                    "in_msgs": c.in_msgs,
                    "out_bytes": c.out_bytes,
                    "out_msgs": c.out_msgs,
                    "pending": pending_bytes(c),
                    "subs": len(c.subs),
                },
            )
            for c in conns
        ]
        detail = [
            (
                f"{sid},"
                + _labels(
                    (
                        ("cid", str(c.cid)),
                        ("kind", c.kind),
                        ("type", "nats"),
                        ("ip", c.host),
                        ("port", str(c.port)),
                        ("name", c.name),
                        ("lang", c.lang),
                        ("version", c.version),
                    )
                ),
                vals,
            )
            for c, vals in rows[:DEFAULT_LIST_SIZE]
        ]
        n = len(conns)
        for name, value in (
            ("limit", DEFAULT_LIST_SIZE),
            ("num_connections", n),
            ("offset", 0),
            ("total", n),
        ):
            out.gauge(f"gnatsd_connz_{name}", name, sid, value)
        for name, kind, attr in _CONN_SUMS:
            full = f"gnatsd_connz_{name}"
            out.family(full, name, kind)
            out.sample(full, sid, sum(vals[attr] for _c, vals in rows))
            for labels, vals in detail:
                out.sample(full, labels, vals[attr])

    def _routez(self, out: _Out, sid: str) -> None:
        """The exporter's route families: one sample per route (labels ``server_id``, ``rid``;
        ``route_info`` also names the peer), durations in seconds."""
        doc = self.endpoints.routez_doc(Query({}))
        routes = doc["routes"]
        out.gauge("gnatsd_routez_num_routes", "num_routes", sid, doc["num_routes"])
        base = [(f'{sid},rid="{r["rid"]}"', r) for r in routes]
        out.rows(
            "gnatsd_routez_route_info",
            "route_info",
            [
                (
                    _labels(
                        [
                            ("server_id", doc["server_id"]),
                            ("rid", str(r["rid"])),
                            ("remote_id", r["remote_id"]),
                            ("remote_name", r["remote_name"]),
                            ("account", ""),
                            ("ip", r["ip"]),
                            ("compression", r["compression"]),
                        ]
                    ),
                    1,
                )
                for r in routes
            ],
        )
        out.rows("gnatsd_routez_route_rtt_seconds", "rtt_seconds", [(k, _seconds(r["rtt"])) for k, r in base])
        for field in ("subscriptions", "in_msgs", "out_msgs", "in_bytes", "out_bytes"):
            out.rows(f"gnatsd_routez_route_{field}", field, [(k, r[field]) for k, r in base])
        out.rows(
            "gnatsd_routez_route_uptime_seconds",
            "uptime_seconds",
            [(k, _uptime_seconds(r["uptime"])) for k, r in base],
        )

    def _accstatz(self, out: _Out, sid: str) -> None:
        server = self.endpoints.server
        rows = [
            (
                f"{sid},"
                + _labels((("account", a["acc"]), ("account_id", a["acc"]), ("account_name", a["name"]))),
                a,
            )
            for a in accstatz_entries(server.accounts, server.connections.values(), unused=True)
        ]
        for name, path in _ACCSTATZ_FAMILIES:
            out.rows(f"gnatsd_accstatz_{name}", name, [(labels, _dig(a, path)) for labels, a in rows])

    def _gatewayz(self, out: _Out, server_id: str) -> None:
        """The exporter's gateway families: per outbound and inbound gateway connection."""
        doc = self.endpoints.gatewayz_doc(Query({}))
        local = doc.get("name", "")
        for side in ("outbound", "inbound"):
            links: list[tuple[str, dict[str, Any]]] = []
            for remote, value in (doc[f"{side}_gateways"] or {}).items():
                links.extend((remote, rgw) for rgw in (value if isinstance(value, list) else [value]))
            if not links:
                continue
            prefix = f"gnatsd_gatewayz_{side}_gateway"
            info, configured, conns = [], [], []
            for remote, rgw in links:
                c = rgw["connection"]
                gw = [("gateway_name", local), ("remote_gateway_name", remote), ("server_id", server_id)]
                times = [
                    ("start", _go_time_string(c["start"])),
                    ("last_activity", _go_time_string(c["last_activity"])),
                    ("uptime", c["uptime"]),
                    ("idle", c["idle"]),
                ]
                info.append((_labels(gw + times), 0))
                configured.append((_labels(gw), int(rgw["configured"])))
                conn = [("gateway_name", local), ("cid", str(c["cid"])), *gw[1:]]
                conns.append((_labels(conn), c))
            out.rows(f"{prefix}_info", "info", info)
            out.rows(f"{prefix}_configured", "configured", configured)
            out.rows(f"{prefix}_conn_rtt", "rtt", [(k, _seconds(c["rtt"])) for k, c in conns])
            for field in ("pending_bytes", "in_msgs", "out_msgs", "in_bytes", "out_bytes", "subscriptions"):
                out.rows(f"{prefix}_conn_{field}", field, [(k, c[field]) for k, c in conns])

    def _leafz(self, out: _Out, sid: str) -> None:
        """The exporter's leaf node families: the links' count, and per link (labels
        ``server_id``, ``name``, ``account``, ``ip``, ``port``) its traffic and round trip."""
        doc = self.endpoints.leafz_doc(Query({}))
        out.gauge("gnatsd_leafz_conn_nodes_total", "nodes_total", sid, doc["leafnodes"])
        rows = [
            (
                f"{sid},"
                + _labels(
                    (
                        ("name", x["name"]),
                        ("account", x["account"]),
                        ("ip", x["ip"]),
                        ("port", str(x["port"])),
                    )
                ),
                x,
            )
            for x in doc["leafs"] or ()
        ]
        out.rows("gnatsd_leafz_conn_rtt", "rtt", [(k, _seconds(x["rtt"])) for k, x in rows])
        for field in ("in_msgs", "out_msgs", "in_bytes", "out_bytes", "subscriptions"):
            out.rows(f"gnatsd_leafz_conn_{field}", field, [(k, x[field]) for k, x in rows])

    def _subsz(self, out: _Out, sid: str) -> None:
        for key, value in sorted(self.endpoints.sublist_stats().items()):
            out.gauge(f"gnatsd_subsz_{key}", key, sid, value)

    # -- JetStream --------------------------------------------------------------------------------

    def _jetstream(self, out: _Out, server_id: str, server_name: str) -> None:
        js = self.endpoints.server.jetstream
        server_labels = _labels(
            (
                ("server_id", server_id),
                ("server_name", server_name),
                ("cluster", ""),
                ("domain", self.endpoints.server.options.jetstream_domain),
                ("meta_leader", ""),
                ("is_meta_leader", "true"),
            )
        )
        out.gauge(
            "jetstream_server_jetstream_disabled",
            "JetStream disabled or not",
            server_labels,
            0 if js is not None else 1,
        )
        if js is None:
            return
        jsz = js.jsz_stats(accounts=True, streams=True, consumers=True, config=True, account="")
        for name, help_text, path in _SERVER_JS_FAMILIES:
            out.gauge(f"jetstream_server_{name}", help_text, server_labels, _dig(jsz, path) or 0)
        accounts: list[tuple[str, Mapping[str, Any]]] = []
        streams: list[tuple[str, Mapping[str, Any]]] = []
        consumers: list[tuple[str, Mapping[str, Any]]] = []
        config = jsz.get("config") or {}
        for acc in jsz.get("account_details") or []:
            name = str(acc.get("name", ""))
            acc_labels = f"{server_labels}," + _labels(
                (("account", name), ("account_id", str(acc.get("id", name))), ("account_name", name))
            )
            accounts.append(
                (acc_labels, {**acc, **{k: config.get(k, -1) for k in ("max_memory", "max_storage")}})
            )
            for st in acc.get("stream_detail") or []:
                leader = str((st.get("cluster") or {}).get("leader", ""))
                st_labels = f"{acc_labels}," + _labels(
                    (
                        ("stream_name", str(st.get("name", ""))),
                        ("stream_leader", leader),
                        ("is_stream_leader", "true" if leader in ("", server_name) else "false"),
                        ("stream_raft_group", ""),
                    )
                )
                streams.append((st_labels, st))
                for c in st.get("consumer_detail") or []:
                    cleader = str((c.get("cluster") or {}).get("leader", ""))
                    c_labels = f"{st_labels}," + _labels(
                        (
                            ("consumer_name", str(c.get("name", ""))),
                            ("consumer_leader", cleader),
                            ("is_consumer_leader", "true" if cleader in ("", server_name) else "false"),
                            ("consumer_desc", str((c.get("config") or {}).get("description", ""))),
                        )
                    )
                    consumers.append((c_labels, c))
        for name, help_text, path in _ACCOUNT_FAMILIES:
            out.rows(f"jetstream_account_{name}", help_text, [(lb, _dig(d, path)) for lb, d in accounts])
        for name, help_text, path in _STREAM_FAMILIES:
            out.rows(f"jetstream_stream_{name}", help_text, [(lb, _dig(d, path)) for lb, d in streams])
        for name, help_text, path in _CONSUMER_FAMILIES:
            out.rows(f"jetstream_consumer_{name}", help_text, [(lb, _dig(d, path)) for lb, d in consumers])

    # -- jetpy's own ------------------------------------------------------------------------------

    def _own(self, out: _Out, sid: str) -> None:
        js = self.endpoints.server.jetstream
        if js is not None:
            out.histogram(
                "jetpy_group_commit_fsync_seconds",
                "Wall time of each group commit's fsync round (one round covers every message appended since the last)",
                sid,
                js.fsync_seconds,
            )
        io = STORE_IO
        out.family(
            "jetpy_store_write_bytes_total", "Bytes file stores handed to the OS (process-wide)", "counter"
        )
        out.sample("jetpy_store_write_bytes_total", sid, io.write_bytes)
        out.family(
            "jetpy_store_writes_total",
            "Block writes by file stores, one per commit flush (process-wide)",
            "counter",
        )
        out.sample("jetpy_store_writes_total", sid, io.writes)
        out.family(
            "jetpy_store_read_bytes_total",
            "Bytes file stores read from block files (process-wide)",
            "counter",
        )
        out.sample("jetpy_store_read_bytes_total", sid, io.read_bytes)
        out.family(
            "jetpy_store_reads_total",
            "Block reads by file stores, one per read-ahead or bulk read (process-wide)",
            "counter",
        )
        out.sample("jetpy_store_reads_total", sid, io.reads)
        server = self.endpoints.server
        out.family("jetpy_auth_failures_total", "Client connections refused for their credentials", "counter")
        out.sample("jetpy_auth_failures_total", sid, server.auth_failures)
        out.family(
            "jetpy_permission_violations_total",
            "Publishes, reply subjects and subscriptions refused by a user's permissions, by kind",
            "counter",
        )
        for kind in ("publish", "reply", "subscribe"):
            out.sample(
                "jetpy_permission_violations_total", f'{sid},kind="{kind}"', server.violations.get(kind, 0)
            )
        lag = self.loop_lag
        out.histogram(
            "jetpy_event_loop_lag_seconds", "How late the event loop woke from a timer", sid, lag.histogram
        )
        out.gauge("jetpy_event_loop_lag_last_seconds", "The latest event loop lag sample", sid, lag.last)
        out.gauge(
            "jetpy_metrics_scrape_seconds",
            "Server time the previous /metrics scrape took to build",
            sid,
            self.last_scrape,
        )


def _flatten(doc: Mapping[str, Any], prefix: str, into: dict[str, Any]) -> None:
    """/varz's nested objects as ``outer_inner`` keys, names cleaned to Prometheus' alphabet."""
    for key, value in doc.items():
        clean = _NOT_NAME.sub("_", str(key)).strip("_")
        if not clean:
            continue
        full = f"{prefix}_{clean}" if prefix else clean
        if isinstance(value, Mapping):
            _flatten(value, full, into)
        else:
            into[full] = value


_GO_UNITS: Final = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"([0-9.]+)(ns|µs|us|ms|s|m|h)")
_UPTIME_PART = re.compile(r"(\d+)([ydhms])")
_UPTIME_UNITS: Final = {"y": 365 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


def _seconds(go: str) -> float:
    """A Go duration string (``"203µs"``, ``"1.5s"``) in seconds."""
    return sum(float(n) * _GO_UNITS[u] for n, u in _GO_PART.findall(go))


def _go_time_string(rfc3339: str) -> str:
    """A monitoring timestamp (``2026-01-02T15:04:05.123Z``) as Go's ``time.Time.String()`` writes
    it (``2026-01-02 15:04:05.123 +0000 UTC``), the exporter's ``start`` and ``last_activity``."""
    return rfc3339.replace("T", " ").removesuffix("Z") + " +0000 UTC"


def _uptime_seconds(text: str) -> float:
    """nats-server's uptime (``"7d13h49m13s"``) in seconds, as the exporter parses it."""
    return float(sum(int(n) * _UPTIME_UNITS[u] for n, u in _UPTIME_PART.findall(text)))
