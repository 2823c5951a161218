"""Config reload (SIGHUP, ``--signal reload``): what changed in the config file, whether a running
server may take it, and nats-server's words for both.

Owns the table of options (:data:`OPTIONS`): each one's name in nats-server's ``Options`` (its
reload messages name those), whether nats-server 2.9.10 and 2.15.1 change it at runtime (both
agree on every option jetpy has), and the ``Reloaded: ...`` line it logs. :func:`diff_options`
compares the running options with the file's; one option that cannot change refuses the whole
reload (``config reload not supported for MaxPending: old=67108864, new=10485760``) and the old
configuration keeps running, as in nats-server. :func:`reload_config` is the whole sequence a
signal starts: read the file again (flags still win), diff, apply, log.

Applying a change to the running server and its clients is the server's (its ``reload``);
logging and the pid file are the process's (the ``reconfigure`` callback). Knows nothing of
connections or sockets.

Reloadable, as in nats-server: ``max_payload`` and ``max_control_line`` (also for connected
clients), ``max_connections`` (clients over a lowered limit are closed), ``ping_interval``,
``ping_max``, ``write_deadline``, the authorization block (user, password, token, users,
timeout: connected clients whose credentials no longer pass are closed, and so are those whose
user moved to another account; the accounts' users the same; in operator mode the account
JWTs, a connected user its account now revokes closed with ``User Authentication Revoked``),
subject mappings (every account's
and the top level's: connected clients publish through the new ones), ``client_advertise``,
``debug``, ``trace``, ``logtime``, ``log_file``, ``log_format``, ``pid_file``. Refused: ``host``, ``port``,
``server_name``, ``server_tags``, ``http``/``http_port``, ``https_port``, ``max_pending``, ``tls`` and ``websocket``
(nats-server reloads certificates and origins; jetpy refuses the change for now), the rest of the
accounts block (accounts, their JetStream limits, exports and imports: nats-server reloads them;
jetpy refuses for now), ``system_account``, ``no_auth_user``,
``lame_duck_duration``, ``lame_duck_grace_period``, and the JetStream options (nats-server restarts JetStream for some of
those; jetpy refuses them).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jetpy.gotime import go_duration
from jetpy.server.config import ConfigError
from jetpy.server.options import AccountOptions, ServerOptions

__all__ = ["OPTIONS", "Option", "ReloadError", "Reloadable", "diff_options", "reload_config"]

log = logging.getLogger("jetpy.server")

NO_CONFIG_FILE = "can only reload config when a file is provided using -c or --config"


class ReloadError(Exception):
    """The new configuration cannot be applied to the running server (nothing was)."""


@dataclass(frozen=True, slots=True)
class Option:
    """One option: its ``ServerOptions`` attribute, nats-server's ``Options`` field name, how
    nats-server prints its value, and its ``Reloaded:`` line (None: it cannot be reloaded)."""

    attr: str
    go_name: str
    reloaded: str | None = None  # a format with {value}
    kind: str = "value"  # or "duration": seconds, printed as Go prints a time.Duration;
    # "switch": a block shown as enabled/disabled

    def show(self, value: Any) -> str:
        if self.kind == "secret":  # a key is never written to the log
            return "[REDACTED]" if value else ""
        if self.kind == "switch":
            return "enabled" if value else "disabled"
        if self.kind == "duration" and isinstance(value, int | float):
            return go_duration(round(value * 1e9))
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):  # Go's %v of a float64: 3, 2.5
            return str(int(value)) if value.is_integer() else repr(value)
        if value is None:
            return "<nil>"
        return str(value)


# In the order of nats-server's Options struct: the first option that cannot change is named.
OPTIONS: tuple[Option, ...] = (
    Option("config_file", "ConfigFile"),
    Option("server_name", "ServerName"),
    Option("server_tags", "Tags"),  # placement reads them at start
    Option("host", "Host"),
    Option("port", "Port"),
    Option("client_advertise", "ClientAdvertise", "Reload: client_advertise = {value}"),
    Option("trace", "Trace", "Reloaded: trace = {value}"),
    Option("debug", "Debug", "Reloaded: debug = {value}"),
    Option("logtime", "Logtime", "Reloaded: logtime = {value}"),
    Option("max_connections", "MaxConn", "Reloaded: max_connections = {value}"),
    Option("max_subscriptions", "MaxSubs"),
    Option("max_sub_tokens", "MaxSubTokens"),
    Option("users", "Users", "Reloaded: authorization users"),
    Option("no_auth_user", "NoAuthUser"),
    # operator mode: changed account JWTs reload when the accounts and their JetStream stay
    Option("operator", "TrustedOperators", "Reloaded: authorization users"),
    # an account's mappings reload (the rest of the accounts block does not, see diff_options);
    # the top-level mappings are the global account's
    Option("accounts", "Accounts", "Reloaded: accounts"),
    Option("mappings", "Mappings", "Reloaded: accounts"),
    Option("system_account", "SystemAccount"),
    Option("no_system_account", "NoSystemAccount"),
    Option("username", "Username", "Reloaded: authorization username"),
    Option("password", "Password", "Reloaded: authorization password"),
    Option("token", "Authorization", "Reloaded: authorization token"),
    Option("ping_interval", "PingInterval", "Reloaded: ping_interval = {value}", "duration"),
    Option("ping_max", "MaxPingsOut", "Reloaded: ping_max = {value}"),
    Option("http_host", "HTTPHost"),
    Option("http_port", "HTTPPort"),
    Option("https_port", "HTTPSPort"),
    Option("http_base_path", "HTTPBasePath"),
    Option("auth_timeout", "AuthTimeout", "Reloaded: authorization timeout = {value}"),
    Option("max_control_line", "MaxControlLine", "Reloaded: max_control_line = {value}"),
    Option("max_payload", "MaxPayload", "Reloaded: max_payload = {value}"),
    Option("max_pending", "MaxPending"),
    Option("tls", "TLSConfig", kind="switch"),
    Option("websocket", "Websocket", kind="switch"),
    Option("jetstream", "JetStream"),
    Option("jetstream_domain", "JetStreamDomain"),
    Option("max_memory_store", "JetStreamMaxMemory"),
    Option("max_file_store", "JetStreamMaxStore"),
    Option("store_dir", "StoreDir"),
    Option("sync_interval", "SyncInterval", kind="duration"),
    Option("js_key", "JetStreamKey", kind="secret"),
    Option("js_prev_key", "JetStreamOldKey", kind="secret"),
    Option("js_cipher", "JetStreamCipher"),
    Option("js_unique_tag", "JetStreamUniqueTag"),
    Option("pid_file", "PidFile", "Reloaded: pid_file = {value}"),
    Option("log_file", "LogFile", "Reloaded: log_file = {value}"),
    Option("log_format", "LogFormat", "Reloaded: log_format = {value}"),  # jetpy's own option
    Option("write_deadline", "WriteDeadline", "Reloaded: write_deadline = {value}", "duration"),
    Option("lame_duck_duration", "LameDuckDuration", kind="duration"),
    Option("lame_duck_grace_period", "LameDuckGracePeriod", kind="duration"),
    Option("cluster", "Cluster"),  # routes, name, authorization: a restart takes them
    Option("gateway", "Gateway"),  # gateways, name, authorization: a restart takes them
    Option("leafnodes", "LeafNode"),  # remotes, listener, authorization: a restart takes them
)
_RANDOM_PORTS = (0, -1)


def diff_options(old: ServerOptions, new: ServerOptions) -> list[tuple[Option, str]]:
    """The options that changed, each with its ``Reloaded:`` line. Raises :class:`ReloadError`
    naming the first one (in nats-server's order) that a running server cannot change."""
    changed: list[tuple[Option, str]] = []
    for opt in OPTIONS:
        before, after = getattr(old, opt.attr), getattr(new, opt.attr)
        if before == after or (opt.attr == "port" and after in _RANDOM_PORTS):
            continue
        if opt.attr == "accounts" and not _only_mappings(before, after):
            raise ReloadError(
                "config reload not supported for Accounts: only the accounts' mappings and users "
                "change at runtime; accounts, their JetStream, exports and imports take a restart"
            )
        if opt.reloaded is None:
            raise ReloadError(
                f"config reload not supported for {opt.go_name}: "
                f"old={opt.show(before)}, new={opt.show(after)}"
            )
        changed.append((opt, opt.reloaded.format(value=opt.show(after))))
    return changed


def _only_mappings(before: list[AccountOptions], after: list[AccountOptions]) -> bool:
    """Do two accounts blocks differ in their mappings alone?"""
    return [dataclasses.replace(a, mappings=()) for a in before] == [
        dataclasses.replace(a, mappings=()) for a in after
    ]


class Reloadable(Protocol):
    """The running server, as a reload sees it."""

    @property
    def options(self) -> ServerOptions: ...

    def reload(self, new: ServerOptions, changed: set[str]) -> None:
        """Take the new options; ``changed`` names the attributes that differ."""


def reload_config(
    server: Reloadable,
    load: Callable[[], tuple[ServerOptions, list[str]]],
    reconfigure: Callable[[ServerOptions, set[str]], None],
) -> bool:
    """Reload the config file into the running server, as nats-server does on SIGHUP: ``load``
    reads the file again (flags applied over it), what changed is applied (``server.reload``,
    then ``reconfigure`` for the process: logging, pid file), and every step is logged. A file
    that does not parse, or changes what cannot change, is refused with a logged error (with
    the file's ``file:line:col``) and the running configuration stays. True if reloaded."""
    if not server.options.config_file:
        log.error("Failed to reload server configuration: %s", NO_CONFIG_FILE)
        return False
    try:
        new, warnings = load()
        changes = diff_options(server.options, new)
    except (ConfigError, ReloadError, OSError) as e:
        log.error("Failed to reload server configuration: %s", e)
        return False
    for warning in warnings:
        log.warning("%s", warning)
    if new.port in _RANDOM_PORTS:  # the port the server runs on stays what it is
        new.port = server.options.port
    for line in dict.fromkeys(line for _, line in changes):  # accounts and mappings share a line
        log.info("%s", line)
    changed = {opt.attr for opt, _ in changes}
    server.reload(new, changed)
    reconfigure(new, changed)
    log.info("Reloaded server configuration")
    return True
