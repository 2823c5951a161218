"""The ``gateway {}`` block, with nats-server's names, values and errors, and the start-up
checks of a server in a super cluster.

Owns what ``gateway { name, listen | host/port, advertise, authorization { user, password,
timeout }, gateways: [{name, url | urls, tls}], connect_retries, reject_unknown_cluster, tls }``
means, and nats-server's checks of it (``gateway has no name``, ``gateway "A" has no port
specified (select -1 for random port)``, ``gateway in the list 0 has no name``, ``gateway "B"
has no URL``; a duplicate URL is a warning). The block's ``tls {}`` is the server block's,
less ``handshake_first`` (a gateway's handshake always comes first) and ``verify_and_map``.

Refused, because jetpy does not do them yet: the block's ``permissions`` and ``accounts``, route-style tuning
(``ping_interval``, ``write_deadline``, ``compression``), as for routes JetStream on a server of a
super cluster, and the full account resolver (see :func:`check_gateway_options`). Every account
the server starts with (``accounts {}``, an operator's preloaded accounts)
crosses the gateways in its own name.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position
from jetpy.server.config_cluster import go_type, peer_authorization, refuse
from jetpy.server.config_operator import FULL
from jetpy.server.config_security import tls_options
from jetpy.server.config_values import Context, listen_key, q, to_bool, to_int, to_map, to_str
from jetpy.server.options import RemoteGateway, ServerOptions, TlsOptions

__all__ = [
    "GATEWAY_FULL_RESOLVER",
    "GATEWAY_JETSTREAM",
    "check_gateway_options",
    "gateway_block",
    "parse_gateway_url",
]

GATEWAY_JETSTREAM: Final = (
    "JetStream in a super cluster is not supported yet: JetStream (-js, jetstream {}) and a gateway "
    "(gateway {}) cannot be combined"
)
GATEWAY_FULL_RESOLVER: Final = (
    "resolver of type full with a gateway is not supported by jetpy: the gateways carry the "
    "accounts the server starts with (accounts {}, the resolver's preload), not those the resolver "
    "adds while it runs"
)
_REFUSED: Final = frozenset(
    {"permissions", "accounts", "ping_interval", "ping_max", "write_deadline", "compression"}
)


def gateway_block(ctx: Context, key: str, value: Any, pos: Position) -> None:
    """The top-level ``gateway`` key."""
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected gateway to be a map, got {go_type(value)}", pos)
    g = ctx.opts.gateway
    for k, v in value.items():
        kpos = value.position(k)
        name = k.lower()
        try:
            if name == "name":
                g.name = to_str(k, v, kpos)
            elif listen_key(g, name, k, v, kpos):
                pass
            elif name in ("advertise", "gateway_advertise"):
                g.advertise = to_str(k, v, kpos)
            elif name == "authorization":
                user, password, timeout = peer_authorization("Gateway", k, v, kpos)
                g.username, g.password = user, password
                if timeout is not None:
                    g.auth_timeout = timeout
            elif name == "gateways":
                g.gateways = _remotes(ctx, k, v, kpos)
            elif name == "connect_retries":
                g.connect_retries = to_int(k, v, kpos)
            elif name in ("reject_unknown", "reject_unknown_cluster"):
                g.reject_unknown = to_bool(k, v, kpos)
            elif name == "tls":
                g.tls = _gateway_tls(k, v, kpos)
            elif name in _REFUSED:
                raise refuse(k, kpos)
            elif k not in value.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        except ConfigError as e:
            ctx.errors.append(e)


def _gateway_tls(key: str, value: Any, pos: Position) -> TlsOptions:
    opts = tls_options(key, value, pos)
    if opts.verify_and_map:
        raise refuse("verify_and_map", pos, "on gateways (use verify and the gateway authorization)")
    if opts.handshake_first:
        raise ConfigError(
            'field "handshake_first" does not apply to gateways: their TLS handshake always comes first', pos
        )
    return opts


def _remotes(ctx: Context, key: str, value: Any, pos: Position) -> list[RemoteGateway]:
    if not isinstance(value, ConfigList):
        raise ConfigError(f"Expected gateways field to be an array, got {go_type(value)}", pos)
    out: list[RemoteGateway] = []
    for item, ipos in zip(value, value.positions, strict=True):
        block = to_map(key, item, ipos)
        name = ""
        urls: list[str] = []
        tls: TlsOptions | None = None
        for k, v in block.items():
            kpos = block.position(k)
            lk = k.lower()
            if lk == "name":
                name = to_str(k, v, kpos)
            elif lk in ("url", "urls"):
                items = list(v) if isinstance(v, ConfigList) else [v]
                positions = v.positions if isinstance(v, ConfigList) else [kpos]
                for u, upos in zip(items, positions, strict=True):
                    url = to_str(k, u, upos).strip()
                    if url in urls:
                        ctx.warn(upos, f"invalid use of field {q(url)}: Duplicate gateway entry detected")
                        continue
                    parse_gateway_url(url, upos)
                    urls.append(url)
            elif lk == "tls":
                tls = _gateway_tls(k, v, kpos)
            elif k not in block.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        out.append(RemoteGateway(name, tuple(urls), tls))
    return out


def parse_gateway_url(url: str, pos: Position | None = None) -> tuple[str, int]:
    """``(host, port)`` of ``nats://[user:pass@]host:port`` (any scheme)."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ConfigError(f"error parsing gateway url [{q(url)}]", pos)
    return parts.hostname, port


def check_gateway_options(opts: ServerOptions) -> None:
    """nats-server's start-up checks of the gateway settings, and jetpy's refusal of JetStream
    and of the full account resolver in a super cluster (raises ``ConfigError``)."""
    g = opts.gateway
    if not g.name and not g.port:
        return
    if not g.name:
        raise ConfigError("gateway has no name")
    if not g.port:
        raise ConfigError(f"gateway {q(g.name)} has no port specified (select -1 for random port)")
    if " " in g.name:
        raise ConfigError("gateway name cannot contain spaces")
    for i, remote in enumerate(g.gateways):
        if not remote.name:
            raise ConfigError(f"gateway in the list {i} has no name")
        if not remote.urls:
            raise ConfigError(f"gateway {q(remote.name)} has no URL")
    if opts.jetstream:
        raise ConfigError(GATEWAY_JETSTREAM)
    if opts.operator is not None and opts.operator.resolver == FULL:
        raise ConfigError(GATEWAY_FULL_RESOLVER)
