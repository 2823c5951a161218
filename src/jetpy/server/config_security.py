"""Config security blocks: ``authorization`` (users, nkeys, permissions), ``tls`` and
``websocket``, applied to ``ServerOptions`` with nats-server's names and errors.

User permissions are normalised to nats-server's JSON shape, each part optional::

    {"publish": {"allow": [...], "deny": [...]}, "subscribe": {...},
     "responses": {"max": 1, "ttl": 120.0}}   # ttl in seconds

Subscribe entries may name a queue group (``"foo.> workers"``). A tls block is checked by
building its server context, so a missing or mismatched file is refused when the file loads.
Options of these blocks that jetpy does not carry out are refused by name.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from jetpy.server.auth import valid_user_nkey
from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position
from jetpy.server.config_values import (
    Context,
    describe,
    go_duration,
    host_port,
    q,
    to_bool,
    to_int,
    to_map,
    to_str,
    wrong,
)
from jetpy.server.options import GLOBAL_ACCOUNT, ServerOptions, TlsOptions, User, WebSocketOptions
from jetpy.server.tls import MIN_VERSIONS, server_context
from jetpy.subjects import is_valid_subject

__all__ = [
    "TLS_UNSUPPORTED",
    "WEBSOCKET_UNSUPPORTED",
    "authorization",
    "checked_tls",
    "permissions",
    "tls",
    "tls_options",
    "users_list",
    "websocket",
]

DEFAULT_RESPONSE_MAX_MSGS = 1  # allow_responses: true = one reply ...
DEFAULT_RESPONSE_TTL = 120.0  # ... within two minutes


# -- authorization ----------------------------------------------------------------------------


class _AuthBlock:
    """What an ``authorization {}`` block said, checked as a whole once it has been read."""

    def __init__(self) -> None:
        self.user: str = ""
        self.password: str = ""
        self.token: str = ""
        self.timeout: float | None = None
        self.users: list[User] | None = None
        self.default_permissions: dict[str, object] | None = None


def authorization(ctx: Context, key: str, value: Any, pos: Position) -> None:
    block = to_map(key, value, pos)
    auth = _AuthBlock()
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        try:
            if name in ("user", "username"):
                auth.user = to_str(k, v, kpos)
            elif name in ("pass", "password"):
                auth.password = to_str(k, v, kpos)
            elif name == "token":
                auth.token = to_str(k, v, kpos)
            elif name == "timeout":
                auth.timeout = _auth_timeout(k, v, kpos)
            elif name == "users":
                auth.users = users_list(k, v, kpos)
            elif name in ("default_permission", "default_permissions", "permissions"):
                auth.default_permissions = permissions(k, v, kpos)
            elif k not in block.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        except ConfigError as e:
            ctx.errors.append(e)
    if (auth.user or auth.password) and auth.token:
        raise ConfigError("Cannot have a user/pass and token", pos)
    if auth.users is not None and auth.user:
        raise ConfigError("Can not have a single user/pass and a users array", pos)
    if auth.users is not None and auth.token:
        raise ConfigError("Can not have a token and a users array", pos)
    if auth.default_permissions is not None:
        if auth.users:
            for u in auth.users:
                if u.permissions is None:
                    u.permissions = copy.deepcopy(auth.default_permissions)
        else:
            ctx.warn(pos, "default_permissions apply to the users array only; ignored")
    ctx.opts.username, ctx.opts.password, ctx.opts.token = auth.user, auth.password, auth.token
    # the global account's users; the accounts' own users (accounts {}) stay
    others = [u for u in ctx.opts.users if u.account != GLOBAL_ACCOUNT]
    seen = {u.nkey or u.user for u in others}
    for u in auth.users or []:
        ident = u.nkey or u.user
        if ident in seen:
            raise ConfigError(f"Duplicate {'nkey' if u.nkey else 'user'} {q(ident)} detected", pos)
    ctx.opts.users = [*(auth.users or []), *others]
    if auth.timeout is not None:
        ctx.opts.auth_timeout = auth.timeout


def _auth_timeout(key: str, value: Any, pos: Position) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise wrong(key, value, 'seconds or a duration string such as "2s"', pos)
    seconds = go_duration(key, value, pos) if isinstance(value, str) else float(value)
    if seconds <= 0:
        raise ConfigError(f'invalid value for "{key}": must be a positive number of seconds', pos)
    return seconds


def users_list(key: str, value: Any, pos: Position, with_account: bool = False) -> list[User]:
    """A ``users`` array (of the authorization block or of an account; ``with_account``: of the
    leaf node authorization, where each user names the account it binds to)."""
    if not isinstance(value, ConfigList):
        raise ConfigError(f"Expected users field to be an array, got {describe(value)}", pos)
    users: list[User] = []
    seen: set[str] = set()
    for i, entry in enumerate(value):
        epos = value.positions[i]
        if not isinstance(entry, ConfigMap):
            raise ConfigError(f"Expected user entry to be a map/struct, got {describe(entry)}", epos)
        user = User(user="")
        for k, v in entry.items():
            kpos = entry.position(k)
            name = k.lower()
            if name in ("user", "username"):
                user.user = to_str(k, v, kpos)
            elif name in ("pass", "password"):
                user.password = to_str(k, v, kpos)
            elif name in ("permission", "permissions", "authorization"):
                user.permissions = permissions(k, v, kpos)
            elif name == "nkey":
                user.nkey = to_str(k, v, kpos)
                if not valid_user_nkey(user.nkey):
                    raise ConfigError("Not a valid public nkey for a user", kpos)
            elif name == "account" and with_account:
                user.account = to_str(k, v, kpos)
            elif name == "allowed_connection_types":
                raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
            elif k not in entry.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        if user.nkey:
            if user.user or user.password:
                raise ConfigError("Nkey users do not take usernames or passwords", epos)
        elif not user.user:
            raise ConfigError("User entry requires a user", epos)
        key = user.nkey or user.user
        if key in seen:
            raise ConfigError(f"Duplicate {'nkey' if user.nkey else 'user'} {q(key)} detected", epos)
        seen.add(key)
        users.append(user)
    return users


def permissions(key: str, value: Any, pos: Position) -> dict[str, object]:
    """A ``permissions`` map, in the normalised shape (see the module)."""
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected permissions to be a map/struct, got {describe(value)}", pos)
    perms: dict[str, object] = {}
    for k, v in value.items():
        kpos = value.position(k)
        name = k.lower()
        if name in ("pub", "publish", "import"):
            perms["publish"] = _subject_permission(k, v, kpos, queues=False)
        elif name in ("sub", "subscribe", "export"):
            perms["subscribe"] = _subject_permission(k, v, kpos, queues=True)
        elif name == "allow_responses":
            responses = _response_permission(k, v, kpos)
            if responses is not None:
                perms["responses"] = responses
        elif k not in value.variables_used:
            raise ConfigError(f'Unknown field "{k}" parsing permissions', kpos)
    return perms


def _subject_permission(key: str, value: Any, pos: Position, queues: bool) -> dict[str, list[str]]:
    """``"a.b"``, ``["a", "b"]`` (both meaning allow) or ``{allow: ..., deny: ...}``; subscribe
    entries may name a queue group after the subject (``"a.> workers"``)."""
    if isinstance(value, ConfigMap):
        out: dict[str, list[str]] = {}
        for k, v in value.items():
            name = k.lower()
            if name not in ("allow", "deny"):
                raise ConfigError(
                    f"Unknown field name {q(k)} parsing subject permissions, only 'allow' or "
                    "'deny' are permitted",
                    value.position(k),
                )
            out[name] = _subjects(k, v, value.position(k), queues)
        return out
    return {"allow": _subjects(key, value, pos, queues)}


def _subjects(key: str, value: Any, pos: Position, queues: bool = False) -> list[str]:
    if isinstance(value, str):
        subjects = [value]
    elif isinstance(value, ConfigList):
        subjects = []
        for i, s in enumerate(value):
            if not isinstance(s, str):
                raise ConfigError(
                    f"Subject in permissions array cannot be cast to string, got {describe(s)}",
                    value.positions[i],
                )
            subjects.append(s)
    else:
        raise ConfigError(
            f"Expected subject permissions to be a subject, or array of subjects, got {describe(value)}", pos
        )
    for s in subjects:
        fields = s.split() if queues else [s]
        if len(fields) > 2 or not fields or not is_valid_subject(fields[0]):
            raise ConfigError(
                f"subject {q(fields[0] if len(fields) == 2 else s)} is not a valid subject", pos
            )
    return subjects


def _response_permission(key: str, value: Any, pos: Position) -> dict[str, object] | None:
    if isinstance(value, bool):
        return {"max": DEFAULT_RESPONSE_MAX_MSGS, "ttl": DEFAULT_RESPONSE_TTL} if value else None
    if not isinstance(value, ConfigMap):
        raise ConfigError("error parsing response permissions, expected a boolean or a map", pos)
    out: dict[str, object] = {"max": DEFAULT_RESPONSE_MAX_MSGS, "ttl": DEFAULT_RESPONSE_TTL}
    for k, v in value.items():
        kpos = value.position(k)
        name = k.lower()
        if name in ("max", "max_msgs", "max_messages", "max_responses"):
            out["max"] = to_int(k, v, kpos)
        elif name in ("expires", "ttl"):
            if not isinstance(v, str):
                raise ConfigError("error parsing expires, not a duration string", kpos)
            out["ttl"] = go_duration(k, v, kpos)
        else:
            raise ConfigError(f'Unknown field "{k}" parsing permissions', kpos)
    return out


# -- tls --------------------------------------------------------------------------------------

# nats-server's tls options jetpy does not carry out yet: refused rather than ignored
TLS_UNSUPPORTED = frozenset(
    {
        "cipher_suites",
        "curve_preferences",
        "insecure",
        "pinned_certs",
        "cert_store",
        "cert_match_by",
        "cert_match",
        "cert_match_skip_invalid",
        "ca_certs_match",
        "ocsp_peer",
        "verify_cert_and_check_known_urls",
        "connection_rate_limit",
        "certs",
        "first_info_timeout",
    }
)


def _tls_timeout(key: str, value: Any, pos: Position) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise wrong(key, value, 'seconds or a duration string such as "2s"', pos)
    seconds = go_duration(key, value, pos) if isinstance(value, str) else float(value)
    if seconds <= 0:
        raise ConfigError(f'invalid value for "{key}": must be a positive number of seconds', pos)
    return seconds


def tls(ctx: Context, key: str, value: Any, pos: Position) -> None:
    ctx.opts.tls = tls_options(key, value, pos)


def tls_options(key: str, value: Any, pos: Position) -> TlsOptions:
    """A ``tls {}`` block (the server's, or the cluster's), checked as nats-server checks it."""
    block = to_map(key, value, pos)
    fields: dict[str, Any] = {}
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        if name in ("cert_file", "key_file", "ca_file"):
            fields[name] = to_str(k, v, kpos)
        elif name in ("verify", "verify_and_map"):
            fields[name] = to_bool(k, v, kpos)
        elif name == "timeout":
            fields["timeout"] = _tls_timeout(k, v, kpos)
        elif name == "handshake_first":
            if not isinstance(v, bool):  # nats-server also takes a fallback delay ("300ms", "auto")
                raise ConfigError(f'field "{k}" is not supported by jetpy yet unless true or false', kpos)
            fields["handshake_first"] = v
        elif name == "min_version":
            version = to_str(k, v, kpos)
            if version not in MIN_VERSIONS:
                raise ConfigError(f"error parsing tls config: unsupported TLS version: TLS {version}", kpos)
            fields["min_version"] = version
        elif name in TLS_UNSUPPORTED:
            raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
        elif k not in block.variables_used:
            raise ConfigError(f"error parsing tls config, unknown field {q(k)}", kpos)
    for required in ("cert_file", "key_file"):
        if not fields.get(required):
            raise ConfigError(f"missing '{required}' in TLS configuration", pos)
    return checked_tls(TlsOptions(**fields), pos)


def checked_tls(tls: TlsOptions, pos: Position | None = None) -> TlsOptions:
    """``tls`` if its files make a server context, else nats-server's error for them."""
    for path in (tls.cert_file, tls.key_file):
        if not os.path.exists(path):
            raise ConfigError(
                f"error parsing X509 certificate/key pair: open {path}: no such file or directory", pos
            )
    if tls.ca_file and not os.path.exists(tls.ca_file):
        raise ConfigError(f"open {tls.ca_file}: no such file or directory", pos)
    try:
        server_context(tls)
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
        reason = getattr(e, "reason", None) or str(e)
        if "PEM lib" in reason:  # OpenSSL's word for a key that is missing or does not match
            reason = "the key file holds no private key for the certificate (PEM lib)"
        raise ConfigError(f"error parsing X509 certificate/key pair: {reason}", pos) from None
    return tls


# -- websocket --------------------------------------------------------------------------------

# nats-server's websocket options jetpy does not carry out yet: refused rather than ignored
WEBSOCKET_UNSUPPORTED = frozenset(
    {
        "advertise",
        "authorization",
        "authentication",
        "no_auth_user",
        "jwt_cookie",
        "user_cookie",
        "username_cookie",
        "pass_cookie",
        "password_cookie",
        "token_cookie",
        "headers",
        "ping_interval",
    }
)


def websocket(ctx: Context, key: str, value: Any, pos: Position) -> None:
    block = to_map(key, value, pos)
    fields: dict[str, Any] = {}
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        if name == "listen":
            host, port = host_port(k, v, kpos)
            if host:
                fields["host"] = host
            fields["port"] = port
        elif name == "port":
            fields["port"] = to_int(k, v, kpos)
        elif name in ("host", "net"):
            fields["host"] = to_str(k, v, kpos)
        elif name in ("no_tls", "compression", "same_origin"):
            fields[name] = to_bool(k, v, kpos)
        elif name == "tls":
            tls_ctx = Context(ServerOptions())
            tls(tls_ctx, k, v, kpos)
            fields["tls"] = tls_ctx.opts.tls
        elif name == "allowed_origins":
            origins = [v] if isinstance(v, str) else v
            if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
                raise wrong(k, v, "a string or an array of strings", kpos)
            fields["allowed_origins"] = tuple(origins)
        elif name == "handshake_timeout":
            fields["handshake_timeout"] = _tls_timeout(k, v, kpos)
        elif name in WEBSOCKET_UNSUPPORTED:
            raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
        elif k not in block.variables_used:
            raise ConfigError(f'unknown field "{k}"', kpos)
    ctx.opts.websocket = WebSocketOptions(**fields)
