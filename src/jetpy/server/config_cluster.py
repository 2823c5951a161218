"""The ``cluster {}`` block and the cluster flags, with nats-server's names, values and errors,
and the start-up checks of a clustered configuration.

Owns what ``cluster { name, listen | host/port, routes, authorization { user, password,
timeout }, advertise, no_advertise, connect_retries, pool_size, compression }`` and the flags
``--cluster``/``--cluster_listen``, ``--routes``, ``--cluster_name``, ``--cluster_advertise``,
``--no_advertise`` and ``--connect_retries`` mean (nats-server 2.9's texts: ``Cluster
authorization does not support tokens``, ``expected cluster password to be set``, ``solicited
routes require cluster capabilities, e.g. --cluster``, a duplicate route is a warning), and the
block's ``tls {}`` (the server block's fields and checks, less ``handshake_first`` and
``verify_and_map``).

Refused, because jetpy does not do them yet and ignoring them would change security or data
flow: ``permissions`` (import/export), ``accounts`` (pinned accounts), ``pool_size`` other than
-1 (jetpy keeps one route per peer, which is what -1 asks for), ``compression`` other than off,
and the block's ``ping_interval``/``ping_max``/``write_deadline`` (routes use the server's).
JetStream on a clustered server is clustered JetStream (``jetpy.server.jscluster``): it needs a
``server_name``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final
from urllib.parse import urlsplit

from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position
from jetpy.server.config_security import tls_options
from jetpy.server.config_values import (
    Context,
    go_duration,
    listen_key,
    q,
    to_bool,
    to_int,
    to_map,
    to_str,
)
from jetpy.server.options import ClusterOptions, ServerOptions, TlsOptions

__all__ = [
    "RouteURLError",
    "apply_cluster_url",
    "apply_routes",
    "check_cluster_options",
    "cluster_block",
    "cluster_size",
    "go_type",
    "parse_route_url",
    "peer_authorization",
    "refuse",
]

_NOT_YET: Final = "is not supported by jetpy yet"
_COMPRESSION_OFF: Final = frozenset({"off", "disabled", "false", "0"})


def go_type(value: Any) -> str:
    """A config value's type as Go's %T names it in nats-server's messages."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    return type(value).__name__


def refuse(key: str, pos: Position, why: str = "") -> ConfigError:
    """The error for a field jetpy knows but does not do yet."""
    return ConfigError(f'field "{key}" {_NOT_YET}{": " + why if why else ""}', pos)


def cluster_block(ctx: Context, key: str, value: Any, pos: Position) -> None:
    """The top-level ``cluster`` key."""
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected map to define cluster, got {go_type(value)}", pos)
    c = ctx.opts.cluster
    for k, v in value.items():
        kpos = value.position(k)
        name = k.lower()
        try:
            if name == "name":
                c.name = to_str(k, v, kpos)
            elif listen_key(c, name, k, v, kpos):
                pass
            elif name == "authorization":
                _authorization(ctx, c, k, v, kpos)
            elif name == "routes":
                c.routes = _routes(ctx, k, v, kpos)
            elif name in ("cluster_advertise", "advertise"):
                c.advertise = to_str(k, v, kpos)
            elif name == "no_advertise":
                c.no_advertise = to_bool(k, v, kpos)
            elif name == "connect_retries":
                c.connect_retries = to_int(k, v, kpos)
            elif name == "pool_size":
                if to_int(k, v, kpos) != -1:
                    raise refuse(k, kpos, "route pooling (jetpy keeps one route per server: pool_size -1)")
            elif name == "compression":
                if not (v is False or (isinstance(v, str) and v.lower() in _COMPRESSION_OFF)):
                    raise refuse(k, kpos, "route compression (only off)")
            elif name == "tls":
                c.tls = _route_tls(k, v, kpos)
            elif name in ("permissions", "accounts", "ping_interval", "ping_max", "write_deadline"):
                raise refuse(k, kpos)
            elif k not in value.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        except ConfigError as e:
            ctx.errors.append(e)


def _route_tls(key: str, value: Any, pos: Position) -> TlsOptions:
    """The cluster's ``tls {}``: the server block's fields, less what has no meaning on a route
    (the handshake always comes first there) or is not built for routes (mapping a peer's
    certificate to the cluster user)."""
    opts = tls_options(key, value, pos)
    if opts.verify_and_map:
        raise refuse("verify_and_map", pos, "on routes (use verify and the cluster authorization)")
    if opts.handshake_first:
        raise ConfigError(
            'field "handshake_first" does not apply to routes: their TLS handshake always comes first', pos
        )
    return opts


def _authorization(ctx: Context, c: ClusterOptions, key: str, value: Any, pos: Position) -> None:
    user, password, timeout = peer_authorization("Cluster", key, value, pos)
    c.username, c.password = user, password
    if timeout is not None:
        c.auth_timeout = timeout


def peer_authorization(what: str, key: str, value: Any, pos: Position) -> tuple[str, str, float | None]:
    """A server-to-server ``authorization { user, password, timeout }`` block (``what``:
    "Cluster" or "Gateway", as nats-server's errors name it): (user, password, timeout or
    None). Tokens, several users, permissions and nkeys are refused."""
    block = to_map(key, value, pos)
    user = password = ""
    timeout: float | None = None
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        if name in ("user", "username"):
            user = to_str(k, v, kpos)
        elif name in ("pass", "password"):
            password = to_str(k, v, kpos)
        elif name == "timeout":
            if isinstance(v, str):
                timeout = go_duration(k, v, kpos)
            elif isinstance(v, int | float) and not isinstance(v, bool):
                timeout = float(v)
            else:
                raise ConfigError(f'invalid value for "{k}": expected seconds or a duration', kpos)
            if timeout <= 0:
                raise ConfigError(f'invalid value for "{k}": must be a positive number of seconds', kpos)
        elif name == "token":
            raise ConfigError(f"{what} authorization does not support tokens", pos)
        elif name == "users":
            raise ConfigError(f"{what} authorization does not allow multiple users", pos)
        elif name in ("permissions", "default_permissions", "default_permission", "nkeys"):
            raise refuse(k, kpos)
        elif k not in block.variables_used:
            raise ConfigError(f'unknown field "{k}"', kpos)
    return user, password, timeout


def _routes(ctx: Context, key: str, value: Any, pos: Position) -> list[str]:
    items = list(value) if isinstance(value, ConfigList) else [value]
    positions = value.positions if isinstance(value, ConfigList) else [pos]
    out: list[str] = []
    for item, ipos in zip(items, positions, strict=True):
        url = to_str(key, item, ipos).strip()
        if url in out:
            ctx.warn(ipos, f"invalid use of field {q(url)}: Duplicate route entry detected")
            continue
        out.append(url)
    return out


def apply_cluster_url(opts: ServerOptions, url: str) -> None:
    """``--cluster nats://[user:pass@]host:port``: where routes are accepted (port -1: any),
    with the credentials peers must give (none clears the file's, as in nats-server)."""
    c = opts.cluster
    if not url:
        c.port = 0
        return
    _scheme, sep, rest = url.partition("://")
    netloc = (rest if sep else url).split("/", 1)[0]
    creds, at, hostport = netloc.rpartition("@")
    host, colon, port = hostport.rpartition(":")
    if not colon:
        raise ConfigError("missing port in address")
    try:
        c.port = int(port)
    except ValueError:
        raise ConfigError(f"invalid port {q(port)} in cluster URL") from None
    c.host = host.strip("[]")
    if at:
        user, has_pass, password = creds.partition(":")
        if not has_pass:
            raise ConfigError("expected cluster password to be set")
        c.username, c.password = user, password
    else:
        c.username = c.password = ""


def apply_routes(opts: ServerOptions, text: str) -> None:
    """``--routes url1,url2``."""
    opts.cluster.routes = [r.strip() for r in text.split(",") if r.strip()]


def check_cluster_options(opts: ServerOptions) -> None:
    """nats-server's start-up checks of the cluster settings (clustered JetStream's among
    them: a server name); raises ``ConfigError``."""
    c = opts.cluster
    if c.routes and not c.enabled:
        raise ConfigError("solicited routes require cluster capabilities, e.g. --cluster")
    if not c.enabled:
        return
    if " " in c.name or "\n" in c.name:
        raise ConfigError("cluster name cannot contain spaces")
    if opts.jetstream and not opts.server_name:
        raise ConfigError("jetstream cluster requires `server_name` to be set")
    if opts.jetstream and opts.no_system_account and not opts.system_account:
        raise ConfigError(
            "clustered JetStream needs the system account (no_system_account is set): "
            "its Raft groups' traffic crosses the routes there"
        )
    if opts.jetstream and opts.js_unique_tag:  # a single server places nothing: no effect there
        raise ConfigError(
            'field "unique_tag" is not supported by jetpy yet: clustered JetStream places replicas '
            f"by a stream's placement tags, not on servers with distinct {q(opts.js_unique_tag)} tags"
        )
    if opts.jetstream and not c.routes:  # nats-server's refusal too (a seed lists itself)
        if opts.leafnodes.remotes:  # which nats-server would take for the system account's
            raise ConfigError(
                "JetStream cluster requires configured routes: clustered JetStream over a leaf "
                "node is not supported by jetpy"
            )
        raise ConfigError(
            "JetStream cluster requires configured routes or solicited leafnode for the system account"
        )
    for url in c.routes:
        try:
            parse_route_url(url)
        except RouteURLError as e:
            raise ConfigError(str(e)) from None


def cluster_size(c: ClusterOptions, to_self: Collection[str] = ()) -> int:
    """How many servers the configured routes name, this one included: each distinct host:port,
    one of them on this server's own route port (a server finds itself in a shared list), or
    among ``to_self`` (the routes found to reach this server: its own address under another
    name), or else this server besides. With routes to a seed only, the cluster is the seed and
    this one."""
    own = {("127.0.0.1", c.port), ("localhost", c.port), ("0.0.0.0", c.port), (c.host, c.port)}
    others = set()
    for url in c.routes:
        if url in to_self:
            continue
        try:
            hp = parse_route_url(url)
        except RouteURLError:
            continue
        if hp not in own:
            others.add(hp)
    return len(others) + 1


class RouteURLError(ValueError):
    """A route URL that cannot be dialled."""


def parse_route_url(url: str) -> tuple[str, int]:
    """``(host, port)`` of ``nats-route://[user:pass@]host:port`` (any scheme, as nats-server)."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError as e:
        raise RouteURLError(f"error parsing route url [{q(url)}]: {e}") from None
    if not parts.hostname or port is None:
        raise RouteURLError(f"error parsing route url [{q(url)}]: missing host or port")
    return parts.hostname, port
