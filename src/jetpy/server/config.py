"""Applying a parsed configuration file to ``ServerOptions``, with nats-server's names and checks.

Owns the meaning of configuration keys: their aliases (``max_conn`` = ``max_connections``), types,
units (sizes, Go duration strings), nats-server's cross-checks inside a block, and the split of
what jetpy does not do into errors (it would change security or topology: clusters,
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

The security blocks (``authorization``, ``tls``, ``websocket``) are ``config_security``'s; the
value converters and the run's context are ``config_values``'.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from jetpy.server import config_accounts as accounts
from jetpy.server import config_operator as operator
from jetpy.server import config_security as security
from jetpy.server.conf_format import ConfigError, ConfigMap, Position, parse_config_file
from jetpy.server.config_cluster import check_cluster_options, cluster_block
from jetpy.server.config_gateway import check_gateway_options, gateway_block
from jetpy.server.config_leaf import check_leaf_options, leafnodes_block
from jetpy.server.config_operator import check_resolver_options
from jetpy.server.config_values import (
    PORT_RE,
    Context,
    Handler,
    describe,
    go_duration,
    host_port,
    parse_duration,
    q,
    to_bool,
    to_int,
    to_str,
    wrong,
)
from jetpy.server.options import DEFAULT_HOST, LOG_FORMATS, ServerOptions
from jetpy.server.websocket import origin_parts
from jetpy.subjects import is_valid_literal_subject

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
        "mqtt",
        "resolver_tls",
        "resolver_pinned_accounts",
        "ocsp",
        "syslog",
        "remote_syslog",
        # refused on the command line too: a log that never rotates, a ports file never written
        "logfile_size_limit",
        "log_size_limit",
        "ports_file_dir",
    }
)
# nats-server options that are safe to ignore: tuning, diagnostics and cosmetics. Warned about.
IGNORED_FIELDS = frozenset(
    {
        "disable_sublist_cache",
        "no_sublist_cache",
        "prof_port",
        "max_traced_msg_len",
        "no_header_support",
        "reconnect_error_reports",
        "connect_error_reports",
    }
)
JETSTREAM_IGNORED = frozenset({"max_outstanding_catchup", "extension_hint"})


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
    ctx = Context(ServerOptions() if opts is None else copy.deepcopy(opts))
    _apply_block(ctx, conf, _TOP_LEVEL)
    if not ctx.errors:
        try:
            operator.finish_operator(ctx)
            accounts.check_accounts(ctx.opts, ctx.accounts_at)
        except ConfigError as e:
            ctx.errors.append(e)
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
        security.checked_tls(opts.tls)
    ws = opts.websocket
    if ws is not None and ws.port:
        if ws.tls is None and not ws.no_tls:
            raise ConfigError("websocket requires TLS configuration")
        for origin in ws.allowed_origins:
            if origin_parts(origin) is None:
                raise ConfigError(
                    f"unable to parse allowed origin: parse {q(origin)}: invalid URI for request"
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
        raise ConfigError(f"log_format: {q(opts.log_format)} is not one of {', '.join(LOG_FORMATS)}")
    if opts.max_payload > opts.max_pending:
        raise ConfigError(
            f"max_payload ({opts.max_payload}) cannot be higher than max_pending ({opts.max_pending})"
        )
    if opts.no_auth_user:
        if not opts.users:
            raise ConfigError(f"no_auth_user: {q(opts.no_auth_user)} present, but users are not defined")
        if all(u.user != opts.no_auth_user for u in opts.users):
            where = "authorization block or account configuration" if opts.accounts else "authorization block"
            raise ConfigError(f"no_auth_user: {q(opts.no_auth_user)} not present as user in {where}")
    accounts.check_accounts(opts)
    check_cluster_options(opts)
    check_gateway_options(opts)
    check_leaf_options(opts)
    check_resolver_options(opts)
    if not opts.js_key and (opts.js_prev_key or opts.js_cipher):
        what = "prev_encryption_key" if opts.js_prev_key else "cipher"
        raise ConfigError(
            f"jetstream {what} needs key: encryption at rest is on only with a key "
            "(jetstream { key: $JS_KEY }), and files are re-encrypted with it"
        )


# -- dispatch ---------------------------------------------------------------------------------


def _apply_block(ctx: Context, block: ConfigMap, table: dict[str, Handler]) -> None:
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


def _unsupported(ctx: Context, key: str, value: Any, pos: Position) -> None:
    if value is False or value == 0 or value == "":  # switching off what jetpy does not do anyway
        return  # ("syslog: false", "logfile_size_limit: 0") is fine
    raise ConfigError(f'field "{key}" is not supported by jetpy yet', pos)


def _ignored(ctx: Context, key: str, value: Any, pos: Position) -> None:
    ctx.warn(pos, f'field "{key}" is not supported by jetpy; ignored')


def _unsupported_unless_empty(why: str) -> Handler:
    """A block jetpy does not carry out: refused unless it says nothing (``limits {}``)."""

    def handler(ctx: Context, key: str, value: Any, pos: Position) -> None:
        if value in (False, None) or (isinstance(value, ConfigMap) and not value):
            return
        raise ConfigError(f'field "{key}" is not supported by jetpy yet: {why}', pos)

    return handler


def _setter(attr: str, convert: Callable[[str, Any, Position], Any]) -> Handler:
    def handler(ctx: Context, key: str, value: Any, pos: Position) -> None:
        setattr(ctx.opts, attr, convert(key, value, pos))

    return handler


def _duration_setter(attr: str) -> Handler:
    """A duration option that, like nats-server, still takes integer seconds with a warning."""

    def handler(ctx: Context, key: str, value: Any, pos: Position) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            ctx.warn(
                pos,
                f'invalid use of field "{key}": {key} should be converted to a duration '
                '(a quoted string such as "2m"; this integer was taken as seconds)',
            )
            seconds = float(value)
        else:
            seconds = go_duration(key, value, pos)
        if seconds <= 0:  # nats-server takes it and then misbehaves; a timer needs a positive period
            raise ConfigError(f'invalid value for "{key}": must be a positive duration', pos)
        setattr(ctx.opts, attr, seconds)

    return handler


def _sub_tokens(ctx: Context, key: str, value: Any, pos: Position) -> None:
    n = to_int(key, value, pos)
    if n > MAX_SUB_TOKENS_LIMIT:
        raise ConfigError(f"{key} value is too big", pos)
    if n < 0:
        raise ConfigError(f"{key} value can not be negative", pos)
    ctx.opts.max_sub_tokens = n


def _limited_int(attr: str, limit: int) -> Handler:
    def handler(ctx: Context, key: str, value: Any, pos: Position) -> None:
        n = to_int(key, value, pos)
        if n > limit:
            raise ConfigError(f"{key} value is too big", pos)
        setattr(ctx.opts, attr, n)

    return handler


# -- addresses --------------------------------------------------------------------------------


def _listen(ctx: Context, key: str, value: Any, pos: Position) -> None:
    host, port = host_port(key, value, pos)
    if host is not None:
        ctx.opts.host = host or DEFAULT_HOST  # ":4222" means every interface, as nats-server
    ctx.opts.port = port


def _server_tags(ctx: Context, key: str, value: Any, pos: Position) -> None:
    """``server_tags``: a list of strings (or one string), lower-cased as nats-server keeps them."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise wrong(key, value, "a list of strings", pos)
    ctx.opts.server_tags = [v.strip().lower() for v in values if v.strip()]


def _http(ctx: Context, key: str, value: Any, pos: Position) -> None:
    host, port = host_port(key, value, pos)
    if host is not None:
        ctx.opts.http_host = host
    ctx.opts.http_port = port


def _lame_duck(ctx: Context, key: str, value: Any, pos: Position) -> None:
    seconds = go_duration(key, value, pos)
    if seconds < LAME_DUCK_MIN_DURATION:
        raise ConfigError(f"invalid lame_duck_duration of {value}, minimum is 30 seconds", pos)
    ctx.opts.lame_duck_duration = seconds


def _lame_duck_grace(ctx: Context, key: str, value: Any, pos: Position) -> None:
    seconds = go_duration(key, value, pos)
    if seconds < 0:
        raise ConfigError(f"invalid lame_duck_grace_period of {value}, must be positive", pos)
    ctx.opts.lame_duck_grace_period = seconds


def _trace_verbose(ctx: Context, key: str, value: Any, pos: Position) -> None:
    # nats-server's verbose trace adds the system account's traffic; jetpy has none, so it is trace.
    if to_bool(key, value, pos):
        ctx.opts.trace = True


def _store_dir(ctx: Context, key: str, value: Any, pos: Position) -> None:
    if ctx.store_dir_at is not None:
        raise ConfigError(f"Duplicate 'store_dir' configuration (first set at {ctx.store_dir_at})", pos)
    ctx.opts.store_dir = to_str(key, value, pos)
    ctx.store_dir_at = pos


# -- jetstream --------------------------------------------------------------------------------


def _jetstream(ctx: Context, key: str, value: Any, pos: Position) -> None:
    if isinstance(value, bool):
        ctx.opts.jetstream = value
    elif isinstance(value, str):
        word = value.lower()
        if word not in ("enabled", "enable", "disabled", "disable"):
            raise ConfigError(f"Expected 'enabled' or 'disabled' for string value, got {q(value)}", pos)
        ctx.opts.jetstream = word.startswith("enable")
    elif isinstance(value, ConfigMap):
        ctx.opts.jetstream = True
        _apply_block(ctx, value, _JETSTREAM)
    else:
        raise ConfigError(f"Expected map, bool or string to define JetStream, got {describe(value)}", pos)


def _storage_size(name: str) -> Handler:
    """Integers as written (the syntax already applied suffixes), or nats-server's size strings."""

    def handler(ctx: Context, key: str, value: Any, pos: Position) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            size = value
        elif isinstance(value, str):
            text = value.strip()
            if not text:
                size = 0
            elif text[-1] not in STORAGE_STRING_SHIFTS:
                raise ConfigError(f"{name} sizes defined as strings must end in K, M, G, T", pos)
            elif not PORT_RE.fullmatch(text[:-1]):
                raise ConfigError(f"{name}: cannot parse {q(value)} as a size", pos)
            else:
                size = int(text[:-1]) << STORAGE_STRING_SHIFTS[text[-1]]
        else:
            raise ConfigError(f"{name} must be int64 or string", pos)
        setattr(ctx.opts, name, size)

    return handler


def _sync_interval(ctx: Context, key: str, value: Any, pos: Position) -> None:
    if isinstance(value, str) and value.lower() == "always":
        ctx.opts.sync_interval = None
        return
    seconds = go_duration(key, value, pos)
    if seconds <= 0:
        raise ConfigError(f'invalid value for "{key}": must be a positive duration or "always"', pos)
    ctx.opts.sync_interval = seconds


CIPHERS = {"chacha": "chachapoly", "chachapoly": "chachapoly", "aes": "aes"}
"""nats-server's spellings of ``jetstream { cipher }`` -> the cipher (store/crypto.py)."""


def _cipher(ctx: Context, key: str, value: Any, pos: Position) -> None:
    name = CIPHERS.get(to_str(key, value, pos).lower())
    if name is None:
        raise ConfigError(f"Unknown cipher type: {q(value)}", pos)
    ctx.opts.js_cipher = name


def _jetstream_enabled(ctx: Context, key: str, value: Any, pos: Position) -> None:
    ctx.opts.jetstream = to_bool(key, value, pos)


def _domain(ctx: Context, key: str, value: Any, pos: Position) -> None:
    domain = to_str(key, value, pos)
    if any(c in domain for c in ".*>"):
        raise ConfigError("invalid domain name: may not contain ., * or >", pos)
    if domain and not is_valid_literal_subject(f"$JS.{domain}.API"):
        raise ConfigError(
            f"invalid domain name: derived {q(f'$JS.{domain}.API.>')} is not a valid subject", pos
        )
    ctx.opts.jetstream_domain = domain


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
    "domain": _domain,
    "key": _setter("js_key", to_str),
    "ek": _setter("js_key", to_str),
    "encryption_key": _setter("js_key", to_str),
    "prev_key": _setter("js_prev_key", to_str),
    "prev_ek": _setter("js_prev_key", to_str),
    "prev_encryption_key": _setter("js_prev_key", to_str),
    "cipher": _cipher,
    "unique_tag": _setter("js_unique_tag", to_str),  # refused with a cluster (check_cluster_options)
    "limits": _unsupported_unless_empty(
        "the server's JetStream limits (max_ack_pending, max_request_batch, duplicate_window, "
        "max_ha_assets, batch) are not built; the accounts' limits are (accounts { A { jetstream {...} } })"
    ),
    **dict.fromkeys(JETSTREAM_IGNORED, _ignored),
}

_TOP_LEVEL: dict[str, Handler] = {
    "listen": _listen,
    "port": _setter("port", to_int),
    "host": _setter("host", to_str),
    "net": _setter("host", to_str),
    "server_name": _setter("server_name", to_str),
    "server_tags": _server_tags,
    "client_advertise": _setter("client_advertise", to_str),
    "http": _http,
    "http_port": _setter("http_port", to_int),
    "https_port": _setter("https_port", to_int),
    "http_base_path": _setter("http_base_path", to_str),
    "tls": security.tls,
    "websocket": security.websocket,
    "ws": security.websocket,
    "monitor_port": _setter("http_port", to_int),
    "max_payload": _limited_int("max_payload", MAX_PAYLOAD_LIMIT),
    "max_pending": _setter("max_pending", to_int),
    "max_connections": _setter("max_connections", to_int),
    "max_conn": _setter("max_connections", to_int),
    "max_control_line": _limited_int("max_control_line", MAX_CONTROL_LINE_LIMIT),
    "max_subscriptions": _setter("max_subscriptions", to_int),
    "max_subs": _setter("max_subscriptions", to_int),
    "max_sub_tokens": _sub_tokens,
    "max_subscription_tokens": _sub_tokens,
    "ping_interval": _duration_setter("ping_interval"),
    "ping_max": _setter("ping_max", to_int),
    "write_deadline": _duration_setter("write_deadline"),
    "lame_duck_duration": _lame_duck,
    "lame_duck_grace_period": _lame_duck_grace,
    "authorization": security.authorization,
    "no_auth_user": _setter("no_auth_user", to_str),
    "accounts": accounts.accounts,
    "system_account": accounts.system_account,
    "system": accounts.system_account,
    "no_system_account": accounts.no_system_account,
    "no_system": accounts.no_system_account,
    "no_sys_acc": accounts.no_system_account,
    "mappings": accounts.mappings,
    "maps": accounts.mappings,
    "jetstream": _jetstream,
    "cluster": cluster_block,
    "gateway": gateway_block,
    "leafnodes": leafnodes_block,
    "leaf": leafnodes_block,
    "store_dir": _store_dir,
    "storedir": _store_dir,
    "debug": _setter("debug", to_bool),
    "trace": _setter("trace", to_bool),
    "trace_verbose": _trace_verbose,
    "logtime": _setter("logtime", to_bool),
    "log_format": _setter("log_format", to_str),
    "log_file": _setter("log_file", to_str),
    "logfile": _setter("log_file", to_str),
    "pid_file": _setter("pid_file", to_str),
    "pidfile": _setter("pid_file", to_str),
    "default_js_domain": _unsupported_unless_empty(
        "sending an account's JetStream API requests to another domain (over a leaf node) is not built"
    ),
    **operator.HANDLERS,
    **dict.fromkeys(UNSUPPORTED_FIELDS, _unsupported),
    **dict.fromkeys(IGNORED_FIELDS, _ignored),
}
