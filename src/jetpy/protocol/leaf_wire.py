"""Leaf node protocol values and lines: the INFO a hub greets a leaf node with, the CONNECT the
leaf node answers, and the interest lines of the leaf dialect. Sans-IO.

Owns what the JSON of a leaf INFO and CONNECT means (nats-server's ``Info`` and
``leafConnectInfo``, read with Go's JSON rules from :mod:`connect`), the INFO and CONNECT jetpy
sends (nats-server 2.9's fields and order: no ``compression``, so a 2.10+ peer keeps the link
uncompressed, as it does with a 2.9 server), and the leaf dialect's lines, which name no
account (the link is bound to one)::

    LS+ <subject>[ <queue> <weight>]\\r\\n        LS- <subject>[ <queue>]\\r\\n
    LMSG <subject> [reply ]<size>\\r\\n<payload>\\r\\n
    LMSG <subject> (+ <reply>|\\|) <queue>... <size>\\r\\n...
    HMSG <subject> ... <hdr_len> <size>\\r\\n<headers><payload>\\r\\n

The exchange: the hub greets with INFO (``nonce`` to sign, ``leafnode_urls``); the leaf node
answers CONNECT (its server id and name, credentials, ``remote_account``), then its interest and
a PING; the hub sends INFO again (``connect_info``, ``remote_account``: the account it bound the
link to), then its interest. Each side's interest starts with ``LS+ $LDS.<id>``, the subject that
tells a server its own interest came back to it (a loop, :data:`LOOP_PREFIX`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from jetpy.protocol.connect import BOOL, INFO_FIELDS, INT64, STRING, STRINGS, decode_fields

__all__ = [
    "LEAF_CONNECT_FIELDS",
    "LOOP_PREFIX",
    "LeafConnect",
    "LeafInfo",
    "connect_line",
    "decode_leaf_connect",
    "decode_leaf_info",
    "info_line",
    "sub_line",
    "unsub_line",
]

LOOP_PREFIX: Final = b"$LDS."
"""The loop-detection subjects' prefix: each server subscribes ``$LDS.<random>`` for every leaf
link, and one that hears its own subject from a leaf link is in a loop."""

LEAF_INFO_FIELDS: Final[dict[str, str]] = {**INFO_FIELDS, "compression": STRING}

# nats-server's leafConnectInfo (``lang``: a client on the leaf port gives itself away)
LEAF_CONNECT_FIELDS: Final[dict[str, str]] = {
    "version": STRING,
    "nkey": STRING,
    "jwt": STRING,
    "sig": STRING,
    "user": STRING,
    "pass": STRING,
    "auth_token": STRING,
    "server_id": STRING,
    "domain": STRING,
    "name": STRING,
    "is_hub": BOOL,
    "cluster": STRING,
    "headers": BOOL,
    "jetstream": BOOL,
    "deny_pub": STRINGS,
    "compression": STRING,
    "compress_mode": STRING,
    "remote_account": STRING,
    "protocol": INT64,
    "tls_required": BOOL,
    "lang": STRING,
    "gateway": STRING,
}

_INT32_MAX: Final = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class LeafInfo:
    """What a hub's INFO says (the fields a leaf node acts on)."""

    server_id: str = ""
    server_name: str = ""
    version: str = ""
    headers: bool = False
    auth_required: bool = False
    tls_required: bool = False
    max_payload: int = 0
    nonce: str = ""
    cluster: str = ""
    domain: str = ""
    connect_info: bool = False  # the INFO after CONNECT
    remote_account: str = ""  # the hub's account the link is bound to
    leafnode_urls: tuple[str, ...] = ()
    gateway: str = ""  # a gateway's INFO: dialled the wrong port
    cluster_dynamic: bool = False


@dataclass(frozen=True, slots=True)
class LeafConnect:
    """What a leaf node's CONNECT says."""

    server_id: str = ""
    name: str = ""
    version: str = ""
    cluster: str = ""
    headers: bool = False
    hub: bool = False  # ``is_hub``: the dialling server is the hub (``remotes: [{hub: true}]``)
    remote_account: str = ""
    user: str = ""
    password: str = ""
    token: str = ""
    nkey: str = ""
    jwt: str = ""
    sig: str = ""
    deny_pub: tuple[str, ...] = ()
    jetstream: bool = False
    domain: str = ""
    lang: str = ""
    gateway: str = ""


def decode_leaf_info(raw: bytes) -> LeafInfo:
    f = decode_fields(raw, LEAF_INFO_FIELDS)
    return LeafInfo(
        server_id=f.get("server_id", ""),
        server_name=f.get("server_name", ""),
        version=f.get("version", ""),
        headers=f.get("headers", False),
        auth_required=f.get("auth_required", False),
        tls_required=f.get("tls_required", False),
        max_payload=f.get("max_payload", 0),
        nonce=f.get("nonce", ""),
        cluster=f.get("cluster", ""),
        domain=f.get("domain", ""),
        connect_info=f.get("connect_info", False),
        remote_account=f.get("remote_account", ""),
        leafnode_urls=tuple(u for u in f.get("leafnode_urls", ()) if u),
        gateway=f.get("gateway", ""),
        cluster_dynamic=f.get("cluster_dynamic", False),
    )


def decode_leaf_connect(raw: bytes) -> LeafConnect:
    f = decode_fields(raw, LEAF_CONNECT_FIELDS)
    return LeafConnect(
        server_id=f.get("server_id", ""),
        name=f.get("name", ""),
        version=f.get("version", ""),
        cluster=f.get("cluster", ""),
        headers=f.get("headers", False),
        hub=f.get("is_hub", False),
        remote_account=f.get("remote_account", ""),
        user=f.get("user", ""),
        password=f.get("pass", ""),
        token=f.get("auth_token", ""),
        nkey=f.get("nkey", ""),
        jwt=f.get("jwt", ""),
        sig=f.get("sig", ""),
        deny_pub=tuple(s for s in f.get("deny_pub", ()) if s),
        jetstream=f.get("jetstream", False),
        domain=f.get("domain", ""),
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
    client_id: int,
    auth_required: bool = False,
    tls_required: bool = False,
    tls_verify: bool = False,
    nonce: str = "",
    cluster: str = "",
    domain: str = "",
    leafnode_urls: list[str] | None = None,
    remote_account: str = "",
) -> bytes:
    """A hub's INFO in nats-server 2.9's field order; with ``remote_account`` it is the INFO
    after CONNECT (``connect_info``)."""
    doc: dict[str, Any] = {
        "server_id": server_id,
        "server_name": server_name,
        "version": version,
        "proto": 1,
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
    doc["client_id"] = client_id
    if nonce:
        doc["nonce"] = nonce
    if cluster:
        doc["cluster"] = cluster
    if domain:
        doc["domain"] = domain
    doc["info_on_connect"] = True
    if remote_account:
        doc["connect_info"] = True
    if leafnode_urls:
        doc["leafnode_urls"] = leafnode_urls
    if remote_account:
        doc["remote_account"] = remote_account
    return b"INFO " + json.dumps(doc, separators=(",", ":")).encode() + b" \r\n"


def connect_line(
    *,
    version: str,
    server_id: str,
    name: str,
    cluster: str,
    user: str = "",
    password: str = "",
    jwt: str = "",
    sig: str = "",
    tls: bool = False,
    hub: bool = False,
    remote_account: str = "",
    deny_pub: tuple[str, ...] = (),
    jetstream: bool = False,
    domain: str = "",
) -> bytes:
    """The CONNECT a leaf node sends its hub (nats-server 2.9's leafConnectInfo)."""
    doc: dict[str, Any] = {"version": version}
    if jwt:
        doc["jwt"] = jwt
        doc["sig"] = sig
    if user:
        doc["user"] = user
    if password:
        doc["pass"] = password
    doc["tls_required"] = tls
    doc["server_id"] = server_id
    if domain:
        doc["domain"] = domain
    doc["name"] = name
    if hub:
        doc["is_hub"] = True
    doc["cluster"] = cluster
    doc["headers"] = True
    if jetstream:
        doc["jetstream"] = True
    if deny_pub:
        doc["deny_pub"] = list(deny_pub)
    if remote_account:
        doc["remote_account"] = remote_account
    return b"CONNECT " + json.dumps(doc, separators=(",", ":")).encode() + b"\r\n"


def sub_line(subject: bytes, queue: bytes | None, weight: int) -> bytes:
    if queue is None:
        return b"LS+ %b\r\n" % subject
    return b"LS+ %b %b %d\r\n" % (subject, queue, weight)


def unsub_line(subject: bytes, queue: bytes | None) -> bytes:
    if queue is None:
        return b"LS- %b\r\n" % subject
    return b"LS- %b %b\r\n" % (subject, queue)
