"""The ``leafnodes {}`` block, with nats-server's names, values and errors, and the start-up
checks of a hub and of a leaf node.

Owns what ``leafnodes { listen | host/port, advertise, no_advertise, authorization { user,
password | users [{user, password, account}], account, timeout }, tls {}, reconnect, remotes:
[{ url | urls, account, credentials, tls, deny_imports, deny_exports, hub }] }`` means, and the
checks nats-server makes when the server starts (``cannot find local account "A" specified in
leafnode remote``, ``... in leafnode authorization``). ``reconnect`` (or ``reconnect_delay``,
``reconnect_interval``) is seconds, or a duration string as 2.10+ reads it.

Refused, because jetpy does not do them: websocket remotes (``ws://``, ``wss://``,
``websocket``, ``ws_compression``, ``ws_no_masking``), ``compression`` other than off,
``min_version``, ``nkey`` in a remote or in the authorization, ``permissions`` and the
tuning keys of the block (``write_deadline``, ``isolate_leafnode_interest``, ...).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position
from jetpy.server.config_accounts import system_account_name
from jetpy.server.config_cluster import go_type, refuse
from jetpy.server.config_security import tls_options, users_list
from jetpy.server.config_values import (
    Context,
    go_duration,
    listen_key,
    q,
    to_bool,
    to_map,
    to_str,
)
from jetpy.server.options import GLOBAL_ACCOUNT, LeafNodeOptions, LeafRemote, ServerOptions, TlsOptions

__all__ = ["check_leaf_options", "leaf_accounts", "leafnodes_block", "parse_leaf_url"]


_COMPRESSION_OFF: Final = frozenset({"off", "disabled", "false", "0"})
_REFUSED: Final = frozenset(
    {
        "min_version",
        "write_deadline",
        "isolate_leafnode_interest",
        "isolate",
        "permissions",
        "ping_interval",
        "ping_max",
        "websocket",
    }
)
_REMOTE_REFUSED: Final = frozenset(
    {
        "websocket",
        "ws_compression",
        "ws_no_masking",
        "nkey",
        "no_randomize",
        "dont_randomize",
        "first_info_timeout",
        "disabled",
        "local_isolation",
        "request_isolation",
        "proxy",
        "jetstream_cluster_migrate",
    }
)
_SCHEMES: Final = frozenset({"nats", "tls", "nats-leaf"})


def leafnodes_block(ctx: Context, key: str, value: Any, pos: Position) -> None:
    """The top-level ``leafnodes`` (or ``leaf``) key."""
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected leafnodes to be a map, got {go_type(value)}", pos)
    lo = ctx.opts.leafnodes
    for k, v in value.items():
        kpos = value.position(k)
        name = k.lower()
        try:
            if listen_key(lo, name, k, v, kpos):
                pass
            elif name == "advertise":
                lo.advertise = to_str(k, v, kpos)
            elif name == "no_advertise":
                lo.no_advertise = to_bool(k, v, kpos)
            elif name == "authorization":
                _authorization(lo, k, v, kpos)
            elif name == "remotes":
                lo.remotes = _remotes(k, v, kpos)
            elif name in ("reconnect", "reconnect_delay", "reconnect_interval"):
                lo.reconnect = _seconds(k, v, kpos)
            elif name == "tls":
                lo.tls = _leaf_tls(k, v, kpos)
            elif name == "compression":
                if not (v is False or (isinstance(v, str) and v.lower() in _COMPRESSION_OFF)):
                    raise refuse(k, kpos, "leaf node compression (only off)")
            elif name in _REFUSED:
                raise refuse(k, kpos)
            elif k not in value.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        except ConfigError as e:
            ctx.errors.append(e)


def _seconds(key: str, value: Any, pos: Position) -> float:
    if isinstance(value, str):
        seconds = go_duration(key, value, pos)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ConfigError(f'invalid value for "{key}": expected seconds or a duration', pos)
    if seconds <= 0:
        raise ConfigError(f'invalid value for "{key}": must be a positive number of seconds', pos)
    return seconds


def _authorization(lo: LeafNodeOptions, key: str, value: Any, pos: Position) -> None:
    """``authorization { user, password, users: [...], account, timeout }`` (nats-server reads
    no token here: ``unknown field "token"``)."""
    block = to_map(key, value, pos)
    lo.auth_set = True
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        if name in ("user", "username"):
            lo.username = to_str(k, v, kpos)
        elif name in ("pass", "password"):
            lo.password = to_str(k, v, kpos)
        elif name == "account":
            lo.account = to_str(k, v, kpos)
        elif name == "timeout":
            lo.auth_timeout = _seconds(k, v, kpos)
        elif name == "users":
            users = users_list(k, v, kpos, with_account=True)
            for u, upos in zip(users, v.positions, strict=True):
                if u.nkey:
                    raise refuse("nkey", upos, "leaf node users with nkeys")
                if u.permissions is not None:
                    raise refuse("permissions", upos, "leaf node users with permissions")
            lo.users = users
        elif name in ("nkey", "permissions"):
            raise refuse(k, kpos)
        elif k not in block.variables_used:
            raise ConfigError(f'unknown field "{k}"', kpos)


def _leaf_tls(key: str, value: Any, pos: Position) -> TlsOptions:
    opts = tls_options(key, value, pos)
    if opts.verify_and_map:
        raise refuse("verify_and_map", pos, "on leaf nodes (use verify and the leaf node authorization)")
    if opts.handshake_first:
        raise refuse("handshake_first", pos, "on leaf nodes")
    return opts


def _subjects(key: str, value: Any, pos: Position) -> tuple[str, ...]:
    items = list(value) if isinstance(value, ConfigList) else [value]
    positions = value.positions if isinstance(value, ConfigList) else [pos]
    return tuple(to_str(key, item, ipos) for item, ipos in zip(items, positions, strict=True))


def _remotes(key: str, value: Any, pos: Position) -> list[LeafRemote]:
    if not isinstance(value, ConfigList):
        raise ConfigError(f"Expected remotes field to be an array, got {go_type(value)}", pos)
    out: list[LeafRemote] = []
    for item, ipos in zip(value, value.positions, strict=True):
        block = to_map(key, item, ipos)
        urls: list[str] = []
        fields: dict[str, Any] = {}
        for k, v in block.items():
            kpos = block.position(k)
            lk = k.lower()
            if lk in ("url", "urls"):
                items = list(v) if isinstance(v, ConfigList) else [v]
                positions = v.positions if isinstance(v, ConfigList) else [kpos]
                for u, upos in zip(items, positions, strict=True):
                    url = to_str(k, u, upos).strip()
                    parse_leaf_url(url, upos)
                    if url not in urls:
                        urls.append(url)
            elif lk in ("account", "local"):
                fields["account"] = to_str(k, v, kpos)
            elif lk in ("credentials", "creds"):
                fields["credentials"] = to_str(k, v, kpos)
            elif lk == "tls":
                fields["tls"] = _leaf_tls(k, v, kpos)
            elif lk in ("deny_imports", "deny_import"):
                fields["deny_imports"] = _subjects(k, v, kpos)
            elif lk in ("deny_exports", "deny_export"):
                fields["deny_exports"] = _subjects(k, v, kpos)
            elif lk == "hub":
                fields["hub"] = to_bool(k, v, kpos)
            elif lk == "compression":
                if not (v is False or (isinstance(v, str) and v.lower() in _COMPRESSION_OFF)):
                    raise refuse(k, kpos, "leaf node compression (only off)")
            elif lk in _REMOTE_REFUSED:
                raise refuse(k, kpos)
            elif k not in block.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        out.append(LeafRemote(urls=tuple(urls), **fields))
    return out


def parse_leaf_url(url: str, pos: Position | None = None) -> tuple[str, int]:
    """``(host, port)`` of ``nats://[user:pass@]host[:port]`` (``tls://`` too; port 7422 when
    absent, nats-server's leaf port). A websocket URL is refused."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme in ("ws", "wss"):
        raise ConfigError(f"leaf node remote {q(url)}: websocket remotes are not supported by jetpy yet", pos)
    try:
        port = parts.port or 7422
    except ValueError:
        port = 0
    if scheme not in _SCHEMES or not parts.hostname or not port:
        raise ConfigError(f"error parsing leafnode remote url {q(url)}", pos)
    return parts.hostname, port


def leaf_accounts(opts: ServerOptions) -> list[str]:
    """The accounts the block names (remotes', the authorization's and its users')."""
    lo = opts.leafnodes
    names = [r.account for r in lo.remotes if r.account]
    if lo.account:
        names.append(lo.account)
    names.extend(u.account for u in lo.users if u.account != GLOBAL_ACCOUNT)
    return names


def check_leaf_options(opts: ServerOptions) -> None:
    """nats-server's start-up checks of the leaf node settings (raises ``ConfigError``)."""
    lo = opts.leafnodes
    if not lo.enabled:
        return
    known = {a.name for a in opts.accounts} | {GLOBAL_ACCOUNT, system_account_name(opts)}
    operator = opts.operator is not None
    for remote in lo.remotes:
        if not remote.urls:
            raise ConfigError("leafnode remote has no url")
        if remote.account and remote.account not in known and not operator:
            raise ConfigError(f"cannot find local account {q(remote.account)} specified in leafnode remote")
    auth_accounts = ([lo.account] if lo.account else []) + [u.account for u in lo.users]
    for name in auth_accounts:
        if name not in known and not operator:
            raise ConfigError(f"cannot find local account {q(name)} specified in leafnode authorization")
    if lo.users and lo.username:
        raise ConfigError("can not have a single user/pass and a users array")
