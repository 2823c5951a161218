"""The server's identity: what it calls itself, which version it claims, and its INFO document.

Owns ``NATS_COMPAT_VERSION`` (the nats-server version whose protocol and JetStream API we
implement), the protocol level INFO and /varz announce, server ids shaped like nats-server's,
the ``go`` field that carries jetpy's own version, and the INFO a client is greeted with. Values
in, values out: knows nothing of sockets, connections, the monitor or the rest of the server.
"""

from __future__ import annotations

import base64
import ipaddress
import platform
import secrets
import socket
from typing import Any, Final

from jetpy.protocol import encode as enc
from jetpy.version import VERSION

__all__ = [
    "JETPY_VERSION",
    "NATS_COMPAT_VERSION",
    "PROTO",
    "client_info",
    "go_version",
    "info_document",
    "listen_hosts",
    "new_server_id",
]

# The nats-server version whose protocol and JetStream API we implement. Clients gate features on
# INFO's "version", so this is what they must see; jetpy's own version is in "go".
NATS_COMPAT_VERSION: Final = "2.10.0"
JETPY_VERSION: Final = VERSION  # jetpy's own release
PROTO: Final = 1  # the server protocol level INFO and /varz announce (nats-server's PROTO)
SERVER_ID_LENGTH: Final = 56  # nats-server ids are public nkeys: 56 characters of base32


def new_server_id() -> str:
    """A fresh id that looks like nats-server's: ``N`` and 55 more base32 characters."""
    raw = base64.b32encode(secrets.token_bytes(35)).decode().rstrip("=")
    return ("N" + raw)[:SERVER_ID_LENGTH]


def go_version() -> str:
    """INFO's and /varz's ``go`` field: the runtime, and jetpy's own version."""
    return f"python{platform.python_version()} jetpy{JETPY_VERSION}"


def info_document(
    *,
    server_id: str,
    server_name: str,
    host: str,
    port: int,
    auth_required: bool,
    max_payload: int,
    jetstream: bool,
    tls_required: bool = False,
    tls_verify: bool = False,
) -> dict[str, Any]:
    """The INFO every client is greeted with, before its own ``client_id``/``client_ip``
    (nats-server's field order; ``auth_required``, ``tls_required``, ``tls_verify`` and
    ``jetstream`` only when true)."""
    info: dict[str, Any] = {
        "server_id": server_id,
        "server_name": server_name,
        "version": NATS_COMPAT_VERSION,
        "proto": PROTO,
        "go": go_version(),
        "host": host,
        "port": port,
        "headers": True,
    }
    if auth_required:
        info["auth_required"] = True
    if tls_required:
        info["tls_required"] = True
    if tls_verify:
        info["tls_verify"] = True
    info["max_payload"] = max_payload
    if jetstream:
        info["jetstream"] = True
    return info


def client_info(
    document: dict[str, Any],
    client_id: int,
    client_ip: str,
    nonce: str = "",
    ldm: bool = False,
    cluster: dict[str, Any] | None = None,
) -> bytes:
    """The INFO line for one client: ``document`` with that client's id and address, the nonce
    it must sign when nkey users exist, (when clustered) the ``cluster`` name and
    ``connect_urls``, and ``ldm`` when the server is in lame duck mode, in nats-server's order."""
    info = {**document, "client_id": client_id, "client_ip": client_ip}
    if nonce:
        info["nonce"] = nonce
    if cluster:
        info.update(cluster)
    if ldm:
        info["ldm"] = True
    return enc.info(info)


def listen_hosts(host: str) -> list[str]:
    """The addresses clients reach a server listening on ``host`` at, for INFO ``connect_urls``:
    ``host`` itself, or for every interface (``0.0.0.0``, ``::``) this machine's addresses other
    than loopback, as nats-server lists them (loopback only when there is nothing else)."""
    if host not in ("0.0.0.0", "::", ""):
        return [host]
    found: list[str] = []
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)
    except OSError:
        infos = []
    for family, _, _, _, addr in infos:
        ip = str(addr[0])
        if host == "0.0.0.0" and family != socket.AF_INET:
            continue
        if not ipaddress.ip_address(ip.partition("%")[0]).is_loopback and ip not in found:
            found.append(ip)
    return found or (["127.0.0.1"] if host != "::" else ["::1"])
