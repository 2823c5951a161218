"""Applying a parsed configuration file to ``ServerOptions``, with nats-server's names and checks.

Owns the meaning of configuration keys: their aliases (``max_conn`` = ``max_connections``), types,
units (sizes, Go duration strings), nats-server's cross-checks inside a block, and the split of
what jetpy does not do into errors (it would change security or topology: TLS, clusters,
accounts...) and warnings (harmless to ignore: tuning and cosmetic keys). Also the checks
nats-server makes when it starts (``validate_options``). Knows nothing of the file syntax (that is
``conf_format``) or the command line (``flags``), and never starts anything.

Behaviour mirrors nats-server 2.9.10 as observed with ``nats-server -c FILE -t``:

* Keys compare case-insensitively. An unknown key is an error (``unknown field "foo"``), not a
  warning, unless it was used as a ``$variable`` (that is how variables are defined).
* ``ping_interval``/``write_deadline`` take Go duration strings (``"2m"``, ``"1h30m"``); a plain
  integer still works, as seconds, with nats-server's warning to convert it.
* ``jetstream`` is ``true``/``false``, ``"enabled"``/``"disabled"`` or a block. In the block,
  integer sizes are exact (``1G`` = 10^9, ``1GB`` = 2^30, from the file syntax) while size
  *strings* (``"1G"``) must end in K, M, G or T and are powers of 1024, as in nats-server.
* jetpy extension: ``jetstream { sync_interval: "2m" }`` (nats-server 2.10's ``sync``/
  ``sync_interval``); ``"always"`` means fsync before every acknowledgement.

User permissions are normalised to nats-server's JSON shape, each part optional::

    {"publish": {"allow": [...], "deny": [...]}, "subscribe": {...},
     "responses": {"max": 1, "ttl": 120.0}}   # ttl in seconds
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from jetpy.server.auth import valid_user_nkey
from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position, parse_config_file
from jetpy.server.options import DEFAULT_HOST, LOG_FORMATS, ServerOptions, TlsOptions, User, WebSocketOptions
from jetpy.server.tls import MIN_VERSIONS, server_context
from jetpy.server.websocket import origin_parts
from jetpy.subjects import is_valid_subject

__all__ = [
    "IGNORED_FIELDS",
    "LAME_DUCK_MIN_DURATION",
    "MAX_PAYLOAD_LIMIT",
    "UNSUPPORTED_FIELDS",
    "ConfigError",
    "apply_config",
    "load_config",
    "parse_duration",
    "validate_options",
]

# nats-server's hard limits and defaults for what the config file can say.
MAX_PAYLOAD_LIMIT = 2**31 - 1  # protocol lengths are int32 in nats-server; larger is "too big"
MAX_CONTROL_LINE_LIMIT = 2**31 - 1
MAX_SUB_TOKENS_LIMIT = 256  # nats-server's bound on max_sub_tokens
LAME_DUCK_MIN_DURATION = 30.0  # seconds; shorter would cut clients off before they can move
DEFAULT_RESPONSE_MAX_MSGS = 1  # allow_responses: true = one reply ...
DEFAULT_RESPONSE_TTL = 120.0  # ... within two minutes
STORAGE_STRING_SHIFTS = {"K": 10, "M": 20, "G": 30, "T": 40}  # "1G" in jetstream sizes = 2^30

# nats-server options jetpy cannot honour, and ignoring them would change who may connect or
# where data flows. Refused like the matching command-line flags.
UNSUPPORTED_FIELDS = frozenset(
    {
        "https",
        "cluster",
        "gateway",
        "leaf",
        "leafnodes",
        "mqtt",
        "accounts",
        "operator",
        "operators",
        "root_operator",
        "root_operators",
        "trusted",
        "trusted_keys",
        "resolver",
        "account_resolver",
        "accounts_resolver",
        "resolver_tls",
        "resolver_preload",
        "resolver_pinned_accounts",
        "system_account",
        "system",
        "mappings",
        "maps",
        "ocsp",
        "syslog",
        "remote_syslog",
    }
)
# nats-server options that are safe to ignore: tuning, diagnostics and cosmetics. Warned about.
IGNORED_FIELDS = frozenset(
    {
        "disable_sublist_cache",
        "no_sublist_cache",
        "http_base_path",
        "logfile_size_limit",
        "log_size_limit",
        "ports_file_dir",
        "prof_port",
        "max_traced_msg_len",
        "no_system_account",
        "no_system",
        "no_sys_acc",
        "no_header_support",
        "server_tags",
        "reconnect_error_reports",
        "connect_error_reports",
        "default_js_domain",
    }
)
JETSTREAM_UNSUPPORTED = frozenset({"key", "ek", "encryption_key", "cipher"})  # encryption at rest: refused
JETSTREAM_IGNORED = frozenset({"domain", "unique_tag", "max_outstanding_catchup", "limits", "extension_hint"})

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d*(?:\.\d*)?)(ns|us|µs|μs|ms|s|m|h)")
_PORT_RE = re.compile(r"[+-]?\d+")


class _Context:
    """What one ``apply_config`` run collects: the options being filled, warnings, errors."""

    def __init__(self, opts: ServerOptions) -> None:
        self.opts = opts
        self.warnings: list[str] = []
        self.errors: list[ConfigError] = []
        self.store_dir_at: Position | None = None

    def warn(self, pos: Position, message: str) -> None:
        self.warnings.append(f"{pos}: {message}")


Handler = Callable[[_Context, str, Any, Position], None]


def load_config(path: str, opts: ServerOptions | None = None) -> tuple[ServerOptions, list[str]]:
    """Parse the file at ``path`` and apply it over ``opts`` (a copy; defaults if None).

    Returns the new options and the warnings (each ``file:line:col: message``). Raises
    ``ConfigError`` for syntax errors and for every invalid key (all of them, one per line).
    """
    conf = parse_config_file(path)
    new, warnings = apply_config(conf, opts)
    new.config_file = path
    return new, warnings


def apply_config(conf: ConfigMap, opts: ServerOptions | None = None) -> tuple[ServerOptions, list[str]]:
    """Apply an already parsed configuration over a copy of ``opts``. See ``load_config``."""
    ctx = _Context(ServerOptions() if opts is None else copy.deepcopy(opts))
    _apply_block(ctx, conf, _TOP_LEVEL)
    if len(ctx.errors) == 1:
        raise ctx.errors[0]
    if ctx.errors:
        raise ConfigError("\n".join(str(e) for e in ctx.errors))
    return ctx.opts, ctx.warnings


def validate_options(opts: ServerOptions) -> None:
    """The cross-checks nats-server makes when it starts, after config file and flags merge."""
    if opts.tls is not None:
        if not opts.tls.cert_file or not opts.tls.key_file:  # (the flags; the file says more)
            raise ConfigError("TLS Server certificate must be present and valid")
        _checked_tls(opts.tls)
    ws = opts.websocket
    if ws is not None and ws.port:
        if ws.tls is None and not ws.no_tls:
            raise ConfigError("websocket requires TLS configuration")
        for origin in ws.allowed_origins:
            if origin_parts(origin) is None:
                raise ConfigError(
                    f"unable to parse allowed origin: parse {_q(origin)}: invalid URI for request"
                )
    if opts.https_port:
        if opts.http_port:
            raise ConfigError(
                "Can't start monitoring: can't specify both HTTP "
                f"({opts.http_port}) and HTTPs ({opts.https_port}) ports"
            )
        if opts.tls is None:
            raise ConfigError("Can't start monitoring: TLS cert and key required for HTTPS")
    if opts.log_format not in LOG_FORMATS:
        raise ConfigError(f"log_format: {_q(opts.log_format)} is not one of {', '.join(LOG_FORMATS)}")
    if opts.max_payload > opts.max_pending:
        raise ConfigError(
            f"max_payload ({opts.max_payload}) cannot be higher than max_pending ({opts.max_pending})"
        )
    if opts.no_auth_user:
        if not opts.users:
            raise ConfigError(f"no_auth_user: {_q(opts.no_auth_user)} present, but users are not defined")
        if all(u.user != opts.no_auth_user for u in opts.users):
            raise ConfigError(
                f"no_auth_user: {_q(opts.no_auth_user)} not present as user in authorization block"
            )


def parse_duration(text: str) -> float:
    """A Go ``time.ParseDuration`` string (``"1h30m"``, ``"250ms"``, ``"-5s"``, ``"0"``) in seconds."""
    sign = -1.0 if text.startswith("-") else 1.0
    s = text[1:] if text.startswith(("+", "-")) else text
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {json.dumps(text)}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.group(1) in ("", "."):
            raise ValueError(
                f'invalid duration {json.dumps(text)} (use a number and a unit, e.g. "2m", "10s", "1h30m")'
            )
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


# -- dispatch ---------------------------------------------------------------------------------


def _apply_block(ctx: _Context, block: ConfigMap, table: dict[str, Handler]) -> None:
    for key, value in block.items():
        pos = block.position(key)
        name = key.lower()
        try:
            handler = table.get(name)
            if handler is not None:
                handler(ctx, key, value, pos)
            elif key not in block.variables_used:  # a variable definition, not an option
                raise ConfigError(f'unknown field "{key}"', pos)
        except ConfigError as e:
            ctx.errors.append(e)


def _unsupported(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    if value is False:  # switching off something jetpy does not do anyway ("syslog: false") is fine
        return
    raise ConfigError(f'field "{key}" is not supported by jetpy yet', pos)


def _ignored(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    ctx.warn(pos, f'field "{key}" is not supported by jetpy; ignored')


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value}"
    if isinstance(value, str):
        return f"string {_q(value)}"
    if isinstance(value, datetime):
        return f"datetime {value.isoformat()}"
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _q(text: str) -> str:
    """Quote like Go's %q, as nats-server's messages do."""
    return json.dumps(text, ensure_ascii=False)


def _wrong(key: str, value: Any, expected: str, pos: Position) -> ConfigError:
    return ConfigError(f'invalid value for "{key}": expected {expected}, got {_describe(value)}', pos)


_V = TypeVar("_V")


def _expect(kind: type[_V], expected: str) -> Callable[[str, Any, Position], _V]:
    """A converter that takes a value of ``kind`` as it is and refuses anything else (a boolean
    is no integer here, though Python's bool is an int)."""

    def convert(key: str, value: Any, pos: Position) -> _V:
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise _wrong(key, value, expected, pos)
        return value

    return convert


_int = _expect(int, "an integer")
_str = _expect(str, "a string")
_bool = _expect(bool, "a boolean (true/false)")
_map = _expect(ConfigMap, "a map ({ ... })")


def _setter(attr: str, convert: Callable[[str, Any, Position], Any]) -> Handler:
    def handler(ctx: _Context, key: str, value: Any, pos: Position) -> None:
        setattr(ctx.opts, attr, convert(key, value, pos))

    return handler


def _go_duration(key: str, value: Any, pos: Position) -> float:
    if not isinstance(value, str):
        raise _wrong(key, value, 'a duration string such as "2m"', pos)
    try:
        return parse_duration(value)
    except ValueError as e:
        raise ConfigError(f"error parsing {key}: {e}", pos) from e


def _duration_setter(attr: str) -> Handler:
    """A duration option that, like nats-server, still takes integer seconds with a warning."""

    def handler(ctx: _Context, key: str, value: Any, pos: Position) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            ctx.warn(
                pos,
                f'invalid use of field "{key}": {key} should be converted to a duration '
                '(a quoted string such as "2m"; this integer was taken as seconds)',
            )
            seconds = float(value)
        else:
            seconds = _go_duration(key, value, pos)
        if seconds <= 0:  # nats-server takes it and then misbehaves; a timer needs a positive period
            raise ConfigError(f'invalid value for "{key}": must be a positive duration', pos)
        setattr(ctx.opts, attr, seconds)

    return handler


def _sub_tokens(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    n = _int(key, value, pos)
    if n > MAX_SUB_TOKENS_LIMIT:
        raise ConfigError(f"{key} value is too big", pos)
    if n < 0:
        raise ConfigError(f"{key} value can not be negative", pos)
    ctx.opts.max_sub_tokens = n


def _limited_int(attr: str, limit: int) -> Handler:
    def handler(ctx: _Context, key: str, value: Any, pos: Position) -> None:
        n = _int(key, value, pos)
        if n > limit:
            raise ConfigError(f"{key} value is too big", pos)
        setattr(ctx.opts, attr, n)

    return handler


# -- addresses --------------------------------------------------------------------------------


def _host_port(key: str, value: Any, pos: Position) -> tuple[str | None, int]:
    """``listen``/``http``: a port number, or ``host:port`` (``[::1]:4222``, ``:4222``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None, value
    text = _str(key, value, pos)
    if text.startswith("["):
        close = text.find("]")
        host, rest = (text[1:close], text[close + 1 :]) if close > 0 else ("", "")
        ok = rest.startswith(":")
        port_text = rest[1:]
    else:
        host, colon, port_text = text.rpartition(":")
        ok = bool(colon) and ":" not in host
    if not ok:
        raise ConfigError(f"could not parse address string {_q(text)}", pos)
    if not _PORT_RE.fullmatch(port_text):
        raise ConfigError(f"could not parse port {_q(port_text)}", pos)
    return host, int(port_text)


def _listen(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    host, port = _host_port(key, value, pos)
    if host is not None:
        ctx.opts.host = host or DEFAULT_HOST  # ":4222" means every interface, as nats-server
    ctx.opts.port = port


def _http(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    host, port = _host_port(key, value, pos)
    if host is not None:
        ctx.opts.http_host = host
    ctx.opts.http_port = port


def _lame_duck(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    seconds = _go_duration(key, value, pos)
    if seconds < LAME_DUCK_MIN_DURATION:
        raise ConfigError(f"invalid lame_duck_duration of {value}, minimum is 30 seconds", pos)
    ctx.opts.lame_duck_duration = seconds


def _lame_duck_grace(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    seconds = _go_duration(key, value, pos)
    if seconds < 0:
        raise ConfigError(f"invalid lame_duck_grace_period of {value}, must be positive", pos)
    ctx.opts.lame_duck_grace_period = seconds


def _trace_verbose(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    # nats-server's verbose trace adds the system account's traffic; jetpy has none, so it is trace.
    if _bool(key, value, pos):
        ctx.opts.trace = True


def _store_dir(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    if ctx.store_dir_at is not None:
        raise ConfigError(f"Duplicate 'store_dir' configuration (first set at {ctx.store_dir_at})", pos)
    ctx.opts.store_dir = _str(key, value, pos)
    ctx.store_dir_at = pos


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


def _authorization(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    block = _map(key, value, pos)
    auth = _AuthBlock()
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        try:
            if name in ("user", "username"):
                auth.user = _str(k, v, kpos)
            elif name in ("pass", "password"):
                auth.password = _str(k, v, kpos)
            elif name == "token":
                auth.token = _str(k, v, kpos)
            elif name == "timeout":
                auth.timeout = _auth_timeout(k, v, kpos)
            elif name == "users":
                auth.users = _users(k, v, kpos)
            elif name in ("default_permission", "default_permissions", "permissions"):
                auth.default_permissions = _permissions(k, v, kpos)
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
    ctx.opts.users = auth.users or []
    if auth.timeout is not None:
        ctx.opts.auth_timeout = auth.timeout


def _auth_timeout(key: str, value: Any, pos: Position) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _wrong(key, value, 'seconds or a duration string such as "2s"', pos)
    seconds = _go_duration(key, value, pos) if isinstance(value, str) else float(value)
    if seconds <= 0:
        raise ConfigError(f'invalid value for "{key}": must be a positive number of seconds', pos)
    return seconds


def _users(key: str, value: Any, pos: Position) -> list[User]:
    if not isinstance(value, ConfigList):
        raise ConfigError(f"Expected users field to be an array, got {_describe(value)}", pos)
    users: list[User] = []
    seen: set[str] = set()
    for i, entry in enumerate(value):
        epos = value.positions[i]
        if not isinstance(entry, ConfigMap):
            raise ConfigError(f"Expected user entry to be a map/struct, got {_describe(entry)}", epos)
        user = User(user="")
        for k, v in entry.items():
            kpos = entry.position(k)
            name = k.lower()
            if name in ("user", "username"):
                user.user = _str(k, v, kpos)
            elif name in ("pass", "password"):
                user.password = _str(k, v, kpos)
            elif name in ("permission", "permissions", "authorization"):
                user.permissions = _permissions(k, v, kpos)
            elif name == "nkey":
                user.nkey = _str(k, v, kpos)
                if not valid_user_nkey(user.nkey):
                    raise ConfigError("Not a valid public nkey for a user", kpos)
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
            raise ConfigError(f"Duplicate {'nkey' if user.nkey else 'user'} {_q(key)} detected", epos)
        seen.add(key)
        users.append(user)
    return users


def _permissions(key: str, value: Any, pos: Position) -> dict[str, object]:
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected permissions to be a map/struct, got {_describe(value)}", pos)
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
                    f"Unknown field name {_q(k)} parsing subject permissions, only 'allow' or "
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
                    f"Subject in permissions array cannot be cast to string, got {_describe(s)}",
                    value.positions[i],
                )
            subjects.append(s)
    else:
        raise ConfigError(
            f"Expected subject permissions to be a subject, or array of subjects, got {_describe(value)}", pos
        )
    for s in subjects:
        fields = s.split() if queues else [s]
        if len(fields) > 2 or not fields or not is_valid_subject(fields[0]):
            raise ConfigError(
                f"subject {_q(fields[0] if len(fields) == 2 else s)} is not a valid subject", pos
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
            out["max"] = _int(k, v, kpos)
        elif name in ("expires", "ttl"):
            if not isinstance(v, str):
                raise ConfigError("error parsing expires, not a duration string", kpos)
            out["ttl"] = _go_duration(k, v, kpos)
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
        raise _wrong(key, value, 'seconds or a duration string such as "2s"', pos)
    seconds = _go_duration(key, value, pos) if isinstance(value, str) else float(value)
    if seconds <= 0:
        raise ConfigError(f'invalid value for "{key}": must be a positive number of seconds', pos)
    return seconds


def _tls(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    block = _map(key, value, pos)
    fields: dict[str, Any] = {}
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        if name in ("cert_file", "key_file", "ca_file"):
            fields[name] = _str(k, v, kpos)
        elif name in ("verify", "verify_and_map"):
            fields[name] = _bool(k, v, kpos)
        elif name == "timeout":
            fields["timeout"] = _tls_timeout(k, v, kpos)
        elif name == "handshake_first":
            if not isinstance(v, bool):  # nats-server also takes a fallback delay ("300ms", "auto")
                raise ConfigError(f'field "{k}" is not supported by jetpy yet unless true or false', kpos)
            fields["handshake_first"] = v
        elif name == "min_version":
            version = _str(k, v, kpos)
            if version not in MIN_VERSIONS:
                raise ConfigError(f"error parsing tls config: unsupported TLS version: TLS {version}", kpos)
            fields["min_version"] = version
        elif name in TLS_UNSUPPORTED:
            raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
        elif k not in block.variables_used:
            raise ConfigError(f"error parsing tls config, unknown field {_q(k)}", kpos)
    for required in ("cert_file", "key_file"):
        if not fields.get(required):
            raise ConfigError(f"missing '{required}' in TLS configuration", pos)
    ctx.opts.tls = _checked_tls(TlsOptions(**fields), pos)


def _checked_tls(tls: TlsOptions, pos: Position | None = None) -> TlsOptions:
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


def _websocket(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    block = _map(key, value, pos)
    fields: dict[str, Any] = {}
    for k, v in block.items():
        kpos = block.position(k)
        name = k.lower()
        if name == "listen":
            host, port = _host_port(k, v, kpos)
            if host:
                fields["host"] = host
            fields["port"] = port
        elif name == "port":
            fields["port"] = _int(k, v, kpos)
        elif name in ("host", "net"):
            fields["host"] = _str(k, v, kpos)
        elif name in ("no_tls", "compression", "same_origin"):
            fields[name] = _bool(k, v, kpos)
        elif name == "tls":
            tls_ctx = _Context(ServerOptions())
            _tls(tls_ctx, k, v, kpos)
            fields["tls"] = tls_ctx.opts.tls
        elif name == "allowed_origins":
            origins = [v] if isinstance(v, str) else v
            if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
                raise _wrong(k, v, "a string or an array of strings", kpos)
            fields["allowed_origins"] = tuple(origins)
        elif name == "handshake_timeout":
            fields["handshake_timeout"] = _tls_timeout(k, v, kpos)
        elif name in WEBSOCKET_UNSUPPORTED:
            raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
        elif k not in block.variables_used:
            raise ConfigError(f'unknown field "{k}"', kpos)
    ctx.opts.websocket = WebSocketOptions(**fields)


# -- jetstream --------------------------------------------------------------------------------


def _jetstream(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    if isinstance(value, bool):
        ctx.opts.jetstream = value
    elif isinstance(value, str):
        word = value.lower()
        if word not in ("enabled", "enable", "disabled", "disable"):
            raise ConfigError(f"Expected 'enabled' or 'disabled' for string value, got {_q(value)}", pos)
        ctx.opts.jetstream = word.startswith("enable")
    elif isinstance(value, ConfigMap):
        ctx.opts.jetstream = True
        _apply_block(ctx, value, _JETSTREAM)
    else:
        raise ConfigError(f"Expected map, bool or string to define JetStream, got {_describe(value)}", pos)


def _storage_size(name: str) -> Handler:
    """Integers as written (the syntax already applied suffixes), or nats-server's size strings."""

    def handler(ctx: _Context, key: str, value: Any, pos: Position) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            size = value
        elif isinstance(value, str):
            text = value.strip()
            if not text:
                size = 0
            elif text[-1] not in STORAGE_STRING_SHIFTS:
                raise ConfigError(f"{name} sizes defined as strings must end in K, M, G, T", pos)
            elif not _PORT_RE.fullmatch(text[:-1]):
                raise ConfigError(f"{name}: cannot parse {_q(value)} as a size", pos)
            else:
                size = int(text[:-1]) << STORAGE_STRING_SHIFTS[text[-1]]
        else:
            raise ConfigError(f"{name} must be int64 or string", pos)
        setattr(ctx.opts, name, size)

    return handler


def _sync_interval(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    if isinstance(value, str) and value.lower() == "always":
        ctx.opts.sync_interval = None
        return
    seconds = _go_duration(key, value, pos)
    if seconds <= 0:
        raise ConfigError(f'invalid value for "{key}": must be a positive duration or "always"', pos)
    ctx.opts.sync_interval = seconds


def _jetstream_enabled(ctx: _Context, key: str, value: Any, pos: Position) -> None:
    ctx.opts.jetstream = _bool(key, value, pos)


_JETSTREAM: dict[str, Handler] = {
    "enabled": _jetstream_enabled,
    "enable": _jetstream_enabled,
    "store_dir": _store_dir,
    "storedir": _store_dir,
    "store": _store_dir,
    "max_memory_store": _storage_size("max_memory_store"),
    "max_mem_store": _storage_size("max_memory_store"),
    "max_mem": _storage_size("max_memory_store"),
    "max_file_store": _storage_size("max_file_store"),
    "max_file": _storage_size("max_file_store"),
    "sync_interval": _sync_interval,
    "sync": _sync_interval,
    **dict.fromkeys(JETSTREAM_UNSUPPORTED, _unsupported),
    **dict.fromkeys(JETSTREAM_IGNORED, _ignored),
}

_TOP_LEVEL: dict[str, Handler] = {
    "listen": _listen,
    "port": _setter("port", _int),
    "host": _setter("host", _str),
    "net": _setter("host", _str),
    "server_name": _setter("server_name", _str),
    "client_advertise": _setter("client_advertise", _str),
    "http": _http,
    "http_port": _setter("http_port", _int),
    "https_port": _setter("https_port", _int),
    "tls": _tls,
    "websocket": _websocket,
    "ws": _websocket,
    "monitor_port": _setter("http_port", _int),
    "max_payload": _limited_int("max_payload", MAX_PAYLOAD_LIMIT),
    "max_pending": _setter("max_pending", _int),
    "max_connections": _setter("max_connections", _int),
    "max_conn": _setter("max_connections", _int),
    "max_control_line": _limited_int("max_control_line", MAX_CONTROL_LINE_LIMIT),
    "max_subscriptions": _setter("max_subscriptions", _int),
    "max_subs": _setter("max_subscriptions", _int),
    "max_sub_tokens": _sub_tokens,
    "max_subscription_tokens": _sub_tokens,
    "ping_interval": _duration_setter("ping_interval"),
    "ping_max": _setter("ping_max", _int),
    "write_deadline": _duration_setter("write_deadline"),
    "lame_duck_duration": _lame_duck,
    "lame_duck_grace_period": _lame_duck_grace,
    "authorization": _authorization,
    "no_auth_user": _setter("no_auth_user", _str),
    "jetstream": _jetstream,
    "store_dir": _store_dir,
    "storedir": _store_dir,
    "debug": _setter("debug", _bool),
    "trace": _setter("trace", _bool),
    "trace_verbose": _trace_verbose,
    "logtime": _setter("logtime", _bool),
    "log_format": _setter("log_format", _str),
    "log_file": _setter("log_file", _str),
    "logfile": _setter("log_file", _str),
    "pid_file": _setter("pid_file", _str),
    "pidfile": _setter("pid_file", _str),
    **dict.fromkeys(UNSUPPORTED_FIELDS, _unsupported),
    **dict.fromkeys(IGNORED_FIELDS, _ignored),
}
