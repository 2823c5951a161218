"""System events and requests: nats-server's ``$SYS`` subjects, for ``nats server ls/ping``,
nats-surveyor and the nats CLI's server reports.

Owns, with nats-server 2.15's message shapes (compared field by field with the reference in
``tests/integration/test_sysevents.py``):

- requests ``$SYS.REQ.SERVER.PING`` (and ``.STATSZ``): ``{"server": <ServerInfo>, "statsz":
  {...}}``; ``$SYS.REQ.SERVER.PING.<ENDPOINT>`` and ``$SYS.REQ.SERVER.<server id>.<ENDPOINT>``
  for VARZ, CONNZ, SUBSZ, JSZ, HEALTHZ, ACCOUNTZ, ROUTEZ, LEAFZ, GATEWAYZ, RAFTZ: ``{"server": ...,
  "data": <the monitoring document>}`` or ``{"server": ..., "error": {"code", "description"}}``;
  IDZ: ``{"name", "host", "id"}``. A JSON body carries the endpoint's options (nats-server's
  names: ``{"subscriptions": true, "limit": 10}``) and the filters ``server_name``, ``host``,
  ``cluster``, ``domain``, ``tags``: a server the filter does not match stays silent;
- events ``$SYS.ACCOUNT.<account>.CONNECT`` and ``.DISCONNECT`` (``client_connect`` /
  ``client_disconnect`` advisories) for the clients of every account, published only when
  someone listens.

All of it lives in the system account (``system_account``, ``$SYS`` by default), as in
nats-server: only its users make these requests and see these events, and a cluster carries
them between servers (``$SYS.REQ.SERVER.PING`` is answered by every server). Without a system
account (``no_system_account``) there are none. Knows the server only as the monitor's
:class:`MonitoredServer` (the documents are ``monitor_endpoints``'), the system account's broker
through its internal subscriptions, and a connection only by the fields an event reports.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, Protocol

from jetpy.server.broker import Broker, Subscription
from jetpy.server.connection import ClientConnection
from jetpy.server.identity import NATS_COMPAT_VERSION
from jetpy.server.monitor_endpoints import (
    DEFAULT_LIST_SIZE,
    JSON,
    Endpoints,
    MonitoredServer,
    Reply,
)
from jetpy.server.monitor_format import Query, QueryError, go_number, go_time, ns

__all__ = ["ENDPOINTS", "SystemEvents"]

PREFIX: Final = "$SYS.REQ.SERVER."
CONNECT_EVENT: Final = "io.nats.server.advisory.v1.client_connect"
DISCONNECT_EVENT: Final = "io.nats.server.advisory.v1.client_disconnect"
CONNECT_SUBJECT: Final = "$SYS.ACCOUNT.{}.CONNECT"  # .format(account)
DISCONNECT_SUBJECT: Final = "$SYS.ACCOUNT.{}.DISCONNECT"
FLAG_JETSTREAM: Final = 1  # ServerInfo.flags bit: JetStream enabled (nats-server's ServerCapability)
MAX_OPTIONS_BYTES: Final = 64 * 1024  # a request body larger than this is refused unread

# endpoint -> (monitor path, {option in the JSON body: query parameter of the monitor})
ENDPOINTS: Final[dict[str, tuple[str, dict[str, str]]]] = {
    "VARZ": ("/varz", {}),
    "CONNZ": (
        "/connz",
        {
            "sort": "sort",
            "auth": "auth",
            "subscriptions": "subs",
            "offset": "offset",
            "limit": "limit",
            "cid": "cid",
            "state": "state",
            "user": "user",
            "acc": "acc",
            "mqtt_client": "mqtt_client",
        },
    ),
    "SUBSZ": (
        "/subsz",
        {"subscriptions": "subs", "offset": "offset", "limit": "limit", "test": "test", "account": "acc"},
    ),
    "JSZ": (
        "/jsz",
        {
            "accounts": "accounts",
            "streams": "streams",
            "consumer": "consumers",
            "config": "config",
            "offset": "offset",
            "limit": "limit",
            "leader_only": "leader-only",
            "account": "acc",
        },
    ),
    "HEALTHZ": ("/healthz", {"js-enabled-only": "js-enabled-only", "js-server-only": "js-server-only"}),
    "ACCOUNTZ": ("/accountz", {"account": "acc"}),
    "ROUTEZ": ("/routez", {"subscriptions": "subs"}),
    "LEAFZ": ("/leafz", {"subscriptions": "subs"}),
    "GATEWAYZ": (
        "/gatewayz",
        {"name": "gw_name", "accounts": "accs", "account_name": "acc_name", "subscriptions": "subs"},
    ),
    "RAFTZ": ("/raftz", {"account": "acc", "group": "group"}),  # 2.11+
}
_FILTERS: Final = ("server_name", "cluster", "host", "domain", "tags")


class EventsHost(MonitoredServer, Protocol):
    http_port: int  # the bound monitoring port (0: monitoring off), reported by VARZ


class SystemEvents:
    """The ``$SYS`` requests one server answers and the events it publishes."""

    def __init__(self, server: EventsHost, spawn: Callable[[Coroutine[Any, Any, None]], object]) -> None:
        """``spawn`` runs a coroutine in the background (an endpoint's answer is awaited)."""
        self.server = server
        self.endpoints = Endpoints(server)
        self._spawn = spawn
        self._seq = 0
        self._subs: list[Subscription] = []
        self.broker: Broker | None = None  # the system account's (None: no system account)

    def start(self) -> None:
        system = self.server.accounts.system()
        if system is None:
            return
        self.broker = broker = system.broker
        sid = self.server.server_id
        subjects: dict[str, Callable[[bytes, bytes | None, int, bytes], None]] = {
            PREFIX + "PING": self._statsz,
            PREFIX + "PING.STATSZ": self._statsz,
            PREFIX + "PING.IDZ": self._idz,
            f"{PREFIX}{sid}.STATSZ": self._statsz,
            f"{PREFIX}{sid}.IDZ": self._idz,
        }
        for name in ENDPOINTS:
            handler = self._endpoint_handler(name)
            subjects[f"{PREFIX}PING.{name}"] = handler
            subjects[f"{PREFIX}{sid}.{name}"] = handler
        self._subs = [broker.subscribe_internal(subject, h) for subject, h in subjects.items()]

    @property
    def subscription_count(self) -> int:
        """The request handlers' subscriptions (in the system account)."""
        return len(self._subs)

    def stop(self) -> None:
        if self.broker is not None:
            for sub in self._subs:
                self.broker.unsubscribe_internal(sub)
        self._subs = []
        self.broker = None

    # -- what every message says about this server ----------------------------------------------

    def server_info(self) -> dict[str, Any]:
        """nats-server's ServerInfo block; ``seq`` counts the system messages sent."""
        s = self.server
        self._seq += 1
        return {
            "name": s.server_name,
            "host": s.options.host,
            "id": s.server_id,
            "ver": NATS_COMPAT_VERSION,
            "jetstream": s.jetstream is not None,
            "flags": FLAG_JETSTREAM if s.jetstream is not None else 0,
            "seq": self._seq,
            "time": go_time(time.time()),
        }

    def _send(self, subject: str, doc: dict[str, Any]) -> None:
        if self.broker is not None:
            self.broker.publish_internal(subject, None, json.dumps(doc, separators=(",", ":")).encode())

    # -- requests ---------------------------------------------------------------------------------

    def _options(self, reply: bytes | None, hdr_len: int, data: bytes) -> dict[str, Any] | None:
        """The request's options, or None when it is not for this server (filtered out, no
        reply subject) or already answered with an error."""
        if not reply:
            return None
        body = data[hdr_len:]
        if not body.strip():
            return {}
        try:
            if len(body) > MAX_OPTIONS_BYTES:
                raise ValueError(f"request options over {MAX_OPTIONS_BYTES} bytes")
            opts = json.loads(body)
            if not isinstance(opts, dict):
                raise ValueError("request options must be a JSON object")
        except ValueError as e:
            self._error(reply, 400, str(e).splitlines()[0][:200])
            return None
        if not self._matches(opts):
            return None
        return opts

    def _matches(self, opts: dict[str, Any]) -> bool:
        s = self.server
        mine = {"server_name": s.server_name, "host": s.options.host, "cluster": "", "domain": ""}
        for key in _FILTERS:
            want = opts.get(key)
            if not want:
                continue
            if key == "tags":
                return False  # jetpy servers carry no tags: any tag filter excludes it
            if str(want) != mine[key]:
                return False
        return True

    def _error(self, reply: bytes, code: int, description: str) -> None:
        self._send(
            reply.decode(),
            {"server": self.server_info(), "error": {"code": code, "description": description}},
        )

    def _statsz(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if self._options(reply, hdr_len, data) is None or reply is None:
            return
        self._send(reply.decode(), {"server": self.server_info(), "statsz": self.statsz()})

    def _idz(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if self._options(reply, hdr_len, data) is None or reply is None:
            return
        s = self.server
        self._send(reply.decode(), {"name": s.server_name, "host": s.options.host, "id": s.server_id})

    def _endpoint_handler(self, name: str) -> Callable[[bytes, bytes | None, int, bytes], None]:
        path, names = ENDPOINTS[name]
        handler: Callable[[Query], Awaitable[Reply]] = self.endpoints.routes[path][1]

        def on_request(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            opts = self._options(reply, hdr_len, data)
            if opts is None or reply is None:
                return
            query: dict[str, str] = {}
            for key, value in opts.items():
                param = names.get(key)
                if param is None or value is None:
                    continue
                if isinstance(value, bool):
                    query[param] = "true" if value else "false"
                elif isinstance(value, int | str):
                    query[param] = str(value)
                else:
                    self._error(reply, 400, f"option {key!r} has the wrong type")
                    return
            self._spawn(self._answer(reply.decode(), name, handler, Query(query)))

        return on_request

    async def _answer(
        self, reply: str, name: str, handler: Callable[[Query], Awaitable[Reply]], query: Query
    ) -> None:
        self.endpoints.http_port = self.server.http_port
        try:
            answer = await handler(query)
        except QueryError as e:
            self._send(reply, {"server": self.server_info(), "error": {"code": 400, "description": str(e)}})
            return
        if answer.content_type != JSON:
            text = answer.body.decode(errors="replace").strip()
            self._send(
                reply, {"server": self.server_info(), "error": {"code": answer.status, "description": text}}
            )
            return
        doc = json.loads(answer.body)
        if name == "HEALTHZ":
            doc["status_code"] = answer.status  # 2.10+ reports the HTTP status in the document
        elif name == "SUBSZ" and "server_id" not in doc:  # 2.10+ always names the server and page
            page = {"total": 0, "offset": 0, "limit": DEFAULT_LIST_SIZE}
            doc = {"server_id": self.server.server_id, "now": go_time(time.time()), **doc, **page}
        self._send(reply, {"server": self.server_info(), "data": doc})

    def statsz(self) -> dict[str, Any]:
        """nats-server's ServerStats for this server."""
        s = self.server
        usage = self.endpoints.usage
        in_msgs, out_msgs, in_bytes, out_bytes = s.totals()
        stats: dict[str, Any] = {
            "start": go_time(s.start_time),
            "mem": usage.rss(),
            "cores": usage.cores(),
            "cpu": go_number(usage.cpu_percent()),
            "connections": len(s.connections),
            "total_connections": s.total_connections,
            "active_accounts": 1 if s.connections else 0,
            "subscriptions": s.broker.subs.count,
            "sent": {"msgs": out_msgs, "bytes": out_bytes},
            "sent_to_clients": {"msgs": out_msgs, "bytes": out_bytes},
            "received": {"msgs": in_msgs, "bytes": in_bytes},
            "received_from_clients": {"msgs": in_msgs, "bytes": in_bytes},
            "slow_consumers": s.slow_consumers,
            "active_servers": 1,
        }
        js = s.jetstream
        if js is not None:
            st = js.jsz_stats(accounts=False, streams=False, consumers=False, config=False, account="")
            stats["jetstream"] = {
                "config": st.get("config", {}),
                "stats": {
                    k: st[k]
                    for k in (
                        "memory",
                        "storage",
                        "reserved_memory",
                        "reserved_storage",
                        "accounts",
                        "ha_assets",
                        "api",
                    )
                    if k in st
                },
            }
        stats["gomaxprocs"] = usage.usable_cores()
        return stats

    # -- events -----------------------------------------------------------------------------------

    def _listened(self, subject: str) -> bool:
        broker = self.broker
        return broker is not None and broker.has_interest(subject.encode())

    def connected(self, conn: ClientConnection) -> None:
        subject = CONNECT_SUBJECT.format(conn.account.name)
        if not self._listened(subject):
            return
        now = time.time()
        self._send(
            subject,
            {
                "type": CONNECT_EVENT,
                "id": _event_id(),
                "timestamp": go_time(now),
                "server": self.server_info(),
                "client": _client_info(conn, stop=None),
            },
        )

    def disconnected(self, conn: ClientConnection) -> None:
        subject = DISCONNECT_SUBJECT.format(conn.account.name)
        if not conn.connected or not self._listened(subject):
            return
        stop = conn.stop_time or time.time()
        self._send(
            subject,
            {
                "type": DISCONNECT_EVENT,
                "id": _event_id(),
                "timestamp": go_time(stop),
                "server": self.server_info(),
                "client": _client_info(conn, stop=stop),
                # as nats-server: what the client sent, and what it was sent
                "sent": {"msgs": conn.in_msgs, "bytes": conn.in_bytes},
                "received": {"msgs": conn.out_msgs, "bytes": conn.out_bytes},
                "reason": conn.close_reason,
            },
        )


def _client_info(conn: ClientConnection, stop: float | None) -> dict[str, Any]:
    """nats-server's ClientInfo as its connect/disconnect events carry it (empty fields omitted)."""
    account = conn.account.name
    info: dict[str, Any] = {
        "start": go_time(conn.start),
        "host": conn.host,
        "id": conn.cid,
        "acc": account,
    }
    for key, value in (("user", conn.user), ("name", conn.name), ("lang", conn.lang), ("ver", conn.version)):
        if value:
            info[key] = value
    if stop is not None:
        if conn.rtt > 0:
            info["rtt"] = ns(conn.rtt)
        info["stop"] = go_time(stop)
    info.update(name_tag=account, kind="Client", client_type=conn.client_type)
    return info


_ALPHABET: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _event_id() -> str:
    """A unique event id, 22 base-62 characters like nats-server's NUIDs."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(22))
