"""Gateway protocol values and lines: the INFO and CONNECT gateways exchange, the INFO commands
and account lines of their interest protocol, and the reply subjects mapped across them.
Sans-IO.

Owns what the JSON of a gateway's INFO and CONNECT means (nats-server's ``Info`` and
``connectInfo``, read with Go's JSON rules from :mod:`connect`), what jetpy writes in them
(nats-server 2.9+'s fields and order, ``gateway_nrp`` and ``gateway_iom`` set; a gateway INFO
ends without the space a route's has), and these lines::

    INFO {"gateway":"B","gateway_cmd":1,"gateway_urls":[...]}    gossip: another gateway to dial
    INFO {"gateway":"B","gateway_cmd":2,"gateway_cmd_payload":"JEc="}   all of $G's interest follows
    INFO {"gateway":"B","gateway_cmd":3,"gateway_cmd_payload":"JEc="}   ... and is complete
    A+ <account>                A- <account>        (interest in an account again / none at all)

The command payload is the account name as Go encodes a byte slice (base64). The interest lines
(``RS+``/``RS-``) and message frames are the route's (:mod:`route_wire`); a gateway's queue
group always has weight 1.

**Mapped replies.** A request whose reply subject may not be known across the gateway yet
travels with the reply ``_GR_.<cluster hash>.<server hash>.<reply>``, so that the answer comes
straight back to the requester's cluster and server: both hashes are 6 characters of base 62
taken from the SHA-256 of the cluster name and of the server id (nats-server's ``getGWHash``);
servers older than ``gateway_nrp`` use ``$GR.<4 hex characters of the cluster name's
SHA-256>.<reply>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final

from jetpy.protocol.connect import BOOL, INFO_FIELDS, decode_fields
from jetpy.protocol.errors import ProtocolError
from jetpy.protocol.route_wire import CONNECT_FIELDS

__all__ = [
    "CMD_ALL_SUBS_COMPLETE",
    "CMD_ALL_SUBS_START",
    "CMD_GOSSIP",
    "GATEWAY_INFO_FIELDS",
    "OLD_REPLY_PREFIX",
    "REPLY_PREFIX",
    "GatewayConnect",
    "GatewayInfo",
    "account_line",
    "command_line",
    "connect_line",
    "decode_gateway_connect",
    "decode_gateway_info",
    "gossip_line",
    "gw_hash",
    "info_line",
    "old_hash",
    "routed_reply",
]

CMD_GOSSIP: Final = 1  # another gateway the remote knows: dial it
CMD_ALL_SUBS_START: Final = 2  # the remote sends all its interest in an account from now on
CMD_ALL_SUBS_COMPLETE: Final = 3  # ... and has sent it: interest-only for that account

REPLY_PREFIX: Final = b"_GR_."
OLD_REPLY_PREFIX: Final = b"$GR."
HASH_LENGTH: Final = 6
_DIGITS: Final = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SUBJECT_OFFSET: Final = len(REPLY_PREFIX) + 2 * (HASH_LENGTH + 1)  # where the real reply starts
_OLD_SUBJECT_OFFSET: Final = len(OLD_REPLY_PREFIX) + 5

GATEWAY_INFO_FIELDS: Final[dict[str, str]] = {**INFO_FIELDS, "gateway_iom": BOOL}
_INT32_MAX: Final = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class GatewayInfo:
    """What a gateway's INFO says (the fields a gateway acts on)."""

    server_id: str = ""
    server_name: str = ""
    version: str = ""
    host: str = ""
    port: int = 0
    headers: bool = False
    auth_required: bool = False
    tls_required: bool = False
    max_payload: int = 0
    gateway: str = ""
    gateway_urls: tuple[str, ...] = ()
    gateway_url: str = ""
    gateway_cmd: int = 0
    gateway_cmd_payload: str = ""  # decoded: an account name
    gateway_nrp: bool = False  # maps replies with _GR_ (else $GR.)
    gateway_iom: bool = False  # switches every account to interest-only at once


@dataclass(frozen=True, slots=True)
class GatewayConnect:
    """What a soliciting gateway's CONNECT says."""

    name: str = ""  # the peer's server id
    gateway: str = ""  # the peer's gateway (cluster) name; "" from a client or route
    user: str = ""
    password: str = ""
    tls_required: bool = False
    lang: str = ""


def decode_gateway_info(raw: bytes) -> GatewayInfo:
    f = decode_fields(raw, GATEWAY_INFO_FIELDS)
    payload = f.get("gateway_cmd_payload", "")
    if payload:
        try:
            payload = base64.b64decode(payload, validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            raise ProtocolError(None, "invalid gateway_cmd_payload") from None
    return GatewayInfo(
        server_id=f.get("server_id", ""),
        server_name=f.get("server_name", ""),
        version=f.get("version", ""),
        host=f.get("host", ""),
        port=f.get("port", 0),
        headers=f.get("headers", False),
        auth_required=f.get("auth_required", False),
        tls_required=f.get("tls_required", False),
        max_payload=f.get("max_payload", 0),
        gateway=f.get("gateway", ""),
        gateway_urls=tuple(u for u in f.get("gateway_urls", ()) if u),
        gateway_url=f.get("gateway_url", ""),
        gateway_cmd=f.get("gateway_cmd", 0),
        gateway_cmd_payload=payload,
        gateway_nrp=f.get("gateway_nrp", False),
        gateway_iom=f.get("gateway_iom", False),
    )


def decode_gateway_connect(raw: bytes) -> GatewayConnect:
    f = decode_fields(raw, CONNECT_FIELDS)
    return GatewayConnect(
        name=f.get("name", ""),
        gateway=f.get("gateway", ""),
        user=f.get("user", ""),
        password=f.get("pass", ""),
        tls_required=f.get("tls_required", False),
        lang=f.get("lang", ""),
    )


def _line(doc: dict[str, Any]) -> bytes:
    return b"INFO " + json.dumps(doc, separators=(",", ":")).encode() + b"\r\n"


def _bare(gateway: str, server_id: str = "", server_name: str = "") -> dict[str, Any]:
    """An INFO with nothing but a gateway's name set, Go's zero values in every other
    non-omitted field (how nats-server spells its gateway commands)."""
    return {
        "server_id": server_id,
        "server_name": server_name,
        "version": "",
        "proto": 0,
        "go": "",
        "host": "",
        "port": 0,
        "headers": False,
        "max_payload": 0,
        "gateway": gateway,
    }


def info_line(
    *,
    server_id: str,
    server_name: str,
    version: str,
    host: str,
    port: int,
    max_payload: int,
    gateway: str,
    gateway_urls: list[str],
    gateway_url: str,
    auth_required: bool = False,
    tls_required: bool = False,
    iom: bool = True,
) -> bytes:
    """The INFO a gateway listener greets with (and sends its inbound gateways again when the
    cluster's gateway URLs change), in nats-server 2.9's field order."""
    doc: dict[str, Any] = {
        "server_id": server_id,
        "server_name": server_name,
        "version": version,
        "proto": 0,
        "go": "",
        "host": host,
        "port": port,
        "headers": True,
    }
    if auth_required:
        doc["auth_required"] = True
    if tls_required:
        doc["tls_required"] = True
        doc["tls_verify"] = True
    doc["max_payload"] = min(max_payload, _INT32_MAX)
    doc.update(
        gateway=gateway,
        gateway_urls=gateway_urls,
        gateway_url=gateway_url,
        gateway_nrp=True,
    )
    if iom:
        doc["gateway_iom"] = True
    return _line(doc)


def connect_line(
    *, server_id: str, gateway: str, user: str = "", password: str = "", tls: bool = False
) -> bytes:
    """The CONNECT a soliciting gateway sends once it has the remote's INFO (nats-server's
    connectInfo: echo off, headers false, the server id as ``name``)."""
    doc: dict[str, Any] = {"echo": False, "verbose": False, "pedantic": False}
    if user:
        doc["user"] = user
    if password:
        doc["pass"] = password
    doc.update(tls_required=tls, headers=False, name=server_id, cluster="", gateway=gateway)
    return b"CONNECT " + json.dumps(doc, separators=(",", ":")).encode() + b"\r\n"


def command_line(gateway: str, cmd: int, account: bytes) -> bytes:
    """An interest-mode command about ``account`` (:data:`CMD_ALL_SUBS_START` or
    :data:`CMD_ALL_SUBS_COMPLETE`)."""
    doc = _bare(gateway)
    doc["gateway_cmd"] = cmd
    doc["gateway_cmd_payload"] = base64.b64encode(account).decode()
    return _line(doc)


def gossip_line(gateway: str, urls: list[str], server_id: str = "", server_name: str = "") -> bytes:
    """A gateway to dial: to an inbound gateway (with this server's id) or, with ``GW`` before
    the server id, to the routes of this cluster (which then dial it too)."""
    doc = _bare(gateway, server_id, server_name)
    doc["gateway_urls"] = urls
    doc["gateway_cmd"] = CMD_GOSSIP
    return _line(doc)


def account_line(account: bytes, interest: bool) -> bytes:
    return (b"A+ " if interest else b"A- ") + account + b"\r\n"


def gw_hash(name: str) -> bytes:
    """nats-server's getGWHash: 6 characters of base 62 from the SHA-256 of ``name``."""
    digest = hashlib.sha256(name.encode()).digest()
    return bytes(_DIGITS[b % 62] for b in digest[:HASH_LENGTH])


def old_hash(name: str) -> bytes:
    """The 4-character hash of the ``$GR.`` prefix (servers before ``gateway_nrp``)."""
    return hashlib.sha256(name.encode()).hexdigest()[:4].encode()


def routed_reply(subject: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(cluster hash, server hash, real subject) of a mapped reply subject (server hash ``b""``
    in the old form), or None if ``subject`` is not one."""
    if subject.startswith(REPLY_PREFIX) and len(subject) > _SUBJECT_OFFSET:
        c, s = len(REPLY_PREFIX), len(REPLY_PREFIX) + HASH_LENGTH + 1
        return subject[c : c + HASH_LENGTH], subject[s : s + HASH_LENGTH], subject[_SUBJECT_OFFSET:]
    if subject.startswith(OLD_REPLY_PREFIX) and len(subject) > _OLD_SUBJECT_OFFSET:
        c = len(OLD_REPLY_PREFIX)
        return subject[c : c + 4], b"", subject[_OLD_SUBJECT_OFFSET:]
    return None
