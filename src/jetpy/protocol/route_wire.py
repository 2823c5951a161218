"""Route protocol values and frames: the INFO and CONNECT a route peer exchanges, and the lines
and message frames this server writes on a route. Sans-IO.

Owns what the JSON of a route's INFO and CONNECT means (nats-server's ``Info`` and route
``connectInfo``, read with Go's JSON rules from :mod:`connect`: a value of the wrong type is a
:class:`ProtocolError`), the INFO jetpy sends (nats-server 2.9's fields and order; no
``route_pool_size``, so 2.10+ peers keep one route to us, with the account named on every line,
as they do with 2.9 servers), and the spelling of ``RS+``/``RS-`` and of ``RMSG``/``HMSG``::

    RS+ <account> <subject>[ <queue> <weight>]\\r\\n
    RS- <account> <subject>[ <queue>]\\r\\n
    RMSG <account> <subject> [reply ]<size>\\r\\n<payload>\\r\\n         (no queue groups)
    RMSG <account> <subject> (+ <reply>|\\|) <queue>... <size>\\r\\n...  (for these groups only)
    HMSG <account> <subject> ... <hdr_len> <size>\\r\\n<headers><payload>\\r\\n

A frame without queue groups is the route's head (``RMSG <account> ``), the subject, a space and
the message's tail as :mod:`encode` builds it for clients (``[reply ]<sizes>\\r\\n<data>\\r\\n``):
the message path formats that tail once for every receiver, clients and routes alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from jetpy.protocol.connect import BOOL, INFO_FIELDS, INT32, INT64, STRING, STRINGS, decode_fields
from jetpy.protocol.encode import msg_tail

__all__ = [
    "CONNECT_FIELDS",
    "ROUTE_INFO_FIELDS",
    "RouteConnect",
    "RouteInfo",
    "connect_line",
    "decode_route_connect",
    "decode_route_info",
    "info_line",
    "msg_head",
    "queue_msg",
    "sub_line",
    "unsub_line",
]

# A route INFO: every field a client INFO has, and 2.10+'s route fields (read to see them).
ROUTE_INFO_FIELDS: Final[dict[str, str]] = {
    **INFO_FIELDS,
    "route_pool_size": INT64,
    "route_pool_idx": INT64,
    "route_account": STRING,
    "compression": STRING,
}

# nats-server's route connectInfo (``lang`` is how a client on the route port gives itself away)
CONNECT_FIELDS: Final[dict[str, str]] = {
    "echo": BOOL,
    "verbose": BOOL,
    "pedantic": BOOL,
    "user": STRING,
    "pass": STRING,
    "tls_required": BOOL,
    "headers": BOOL,
    "name": STRING,
    "cluster": STRING,
    "cluster_dynamic": BOOL,
    "lnoc": BOOL,
    "gateway": STRING,
    "lang": STRING,
}

_INT32_MAX: Final = (1 << 31) - 1
assert INFO_FIELDS["max_payload"] == INT32 and INFO_FIELDS["connect_urls"] == STRINGS


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """What a peer's INFO says (the fields a route acts on)."""

    server_id: str = ""
    server_name: str = ""
    version: str = ""
    proto: int = 0
    host: str = ""
    port: int = 0
    ip: str = ""  # nats-route://host:port/ of a server being gossiped (or the peer's advertise)
    cluster: str = ""
    cluster_dynamic: bool = False
    headers: bool = False
    auth_required: bool = False
    tls_required: bool = False
    max_payload: int = 0
    connect_urls: tuple[str, ...] = ()
    ws_connect_urls: tuple[str, ...] = ()
    leafnode_urls: tuple[str, ...] = ()  # the peer's leaf node URLs (told to this server's leaf nodes)
    ldm: bool = False
    jetstream: bool = False
    route_pool_size: int = 0
    route_pool_idx: int = 0
    route_account: str = ""
    gateway_url: str = ""  # the peer's gateway URL (in a super cluster)
    gateway: str = ""  # a gateway the peer gossips (with gateway_cmd 1) ...
    gateway_urls: tuple[str, ...] = ()  # ... and its URLs
    gateway_cmd: int = 0


@dataclass(frozen=True, slots=True)
class RouteConnect:
    """What a soliciting peer's CONNECT says."""

    name: str = ""  # the peer's server id
    cluster: str = ""
    cluster_dynamic: bool = False
    user: str = ""
    password: str = ""
    headers: bool = False
    verbose: bool = False
    tls_required: bool = False
    lang: str = ""
    gateway: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def decode_route_info(raw: bytes) -> RouteInfo:
    f = decode_fields(raw, ROUTE_INFO_FIELDS)
    return RouteInfo(
        server_id=f.get("server_id", ""),
        server_name=f.get("server_name", ""),
        version=f.get("version", ""),
        proto=f.get("proto", 0),
        host=f.get("host", ""),
        port=f.get("port", 0),
        ip=f.get("ip", ""),
        cluster=f.get("cluster", ""),
        cluster_dynamic=f.get("cluster_dynamic", False),
        headers=f.get("headers", False),
        auth_required=f.get("auth_required", False),
        tls_required=f.get("tls_required", False),
        max_payload=f.get("max_payload", 0),
        connect_urls=tuple(u for u in f.get("connect_urls", ()) if u),
        ws_connect_urls=tuple(u for u in f.get("ws_connect_urls", ()) if u),
        leafnode_urls=tuple(u for u in f.get("leafnode_urls", ()) if u),
        ldm=f.get("ldm", False),
        jetstream=f.get("jetstream", False),
        route_pool_size=f.get("route_pool_size", 0),
        route_pool_idx=f.get("route_pool_idx", 0),
        route_account=f.get("route_account", ""),
        gateway_url=f.get("gateway_url", ""),
        gateway=f.get("gateway", ""),
        gateway_urls=tuple(u for u in f.get("gateway_urls", ()) if u),
        gateway_cmd=f.get("gateway_cmd", 0),
    )


def decode_route_connect(raw: bytes) -> RouteConnect:
    f = decode_fields(raw, CONNECT_FIELDS)
    return RouteConnect(
        name=f.get("name", ""),
        cluster=f.get("cluster", ""),
        cluster_dynamic=f.get("cluster_dynamic", False),
        user=f.get("user", ""),
        password=f.get("pass", ""),
        headers=f.get("headers", False),
        verbose=f.get("verbose", False),
        tls_required=f.get("tls_required", False),
        lang=f.get("lang", ""),
        gateway=f.get("gateway", ""),
    )


def info_line(
    *,
    server_id: str,
    server_name: str,
    version: str,
    go: str,
    host: str,
    port: int,
    max_payload: int,
    cluster: str,
    cluster_dynamic: bool = False,
    auth_required: bool = False,
    tls_required: bool = False,
    tls_verify: bool = False,
    ip: str = "",
    nonce: str = "",
    connect_urls: list[str] | None = None,
    ws_connect_urls: list[str] | None = None,
    leafnode_urls: list[str] | None = None,
    ldm: bool = False,
    gateway_url: str = "",
    trailing_space: bool = True,
) -> bytes:
    """A route INFO in nats-server 2.9's field order (``proto`` 2: accounts on every line).
    nats-server ends the INFO it greets a route with by a space before CRLF, and forwarded
    (gossiped) ones without."""
    doc: dict[str, Any] = {
        "server_id": server_id,
        "server_name": server_name,
        "version": version,
        "proto": 2,
        "go": go,
        "host": host,
        "port": port,
        "headers": True,
    }
    if auth_required:
        doc["auth_required"] = True
    if tls_required:
        doc["tls_required"] = True
    if tls_verify:
        doc["tls_verify"] = True
    doc["max_payload"] = min(max_payload, _INT32_MAX)
    if ip:
        doc["ip"] = ip
    if nonce:
        doc["nonce"] = nonce
    doc["cluster"] = cluster
    if cluster_dynamic:
        doc["cluster_dynamic"] = True
    if connect_urls:
        doc["connect_urls"] = connect_urls
    if ws_connect_urls:
        doc["ws_connect_urls"] = ws_connect_urls
    if leafnode_urls:
        doc["leafnode_urls"] = leafnode_urls
    if ldm:
        doc["ldm"] = True
    if gateway_url:
        doc["gateway_url"] = gateway_url
    body = json.dumps(doc, separators=(",", ":")).encode()
    return b"INFO " + body + (b" \r\n" if trailing_space else b"\r\n")


def connect_line(
    *, server_id: str, cluster: str, dynamic: bool, user: str = "", password: str = "", tls: bool = False
) -> bytes:
    """The CONNECT a soliciting server sends (nats-server's route connectInfo; no ``lnoc``:
    peers then announce their leaf nodes' interest with RS+, which jetpy reads)."""
    doc: dict[str, Any] = {"echo": True, "verbose": False, "pedantic": False}
    if user:
        doc["user"] = user
    if password:
        doc["pass"] = password
    doc.update(tls_required=tls, headers=True, name=server_id, cluster=cluster)
    if dynamic:
        doc["cluster_dynamic"] = True
    return b"CONNECT " + json.dumps(doc, separators=(",", ":")).encode() + b"\r\n"


def sub_line(account: bytes, subject: bytes, queue: bytes | None, weight: int) -> bytes:
    if queue is None:
        return b"RS+ %b %b\r\n" % (account, subject)
    return b"RS+ %b %b %b %d\r\n" % (account, subject, queue, weight)


def unsub_line(account: bytes, subject: bytes, queue: bytes | None) -> bytes:
    if queue is None:
        return b"RS- %b %b\r\n" % (account, subject)
    return b"RS- %b %b %b\r\n" % (account, subject, queue)


def msg_head(account: bytes, headers: bool) -> bytes:
    """``RMSG <account> `` (``HMSG`` with headers): what goes before the subject."""
    return (b"HMSG " if headers else b"RMSG ") + account + b" "


def queue_msg(
    head: bytes, subject: bytes, reply: bytes | None, queues: list[bytes], hdr_len: int, data: bytes
) -> bytes:
    """A frame for the queue groups ``queues`` (and every plain subscriber) on the peer; ``head``
    is what goes before the subject (:func:`msg_head`, or ``LMSG ``/``HMSG `` on a leaf node)."""
    marker = b" + " + reply + b" " if reply else b" | "
    return head + subject + marker + b" ".join(queues) + b" " + msg_tail(None, hdr_len, data)
