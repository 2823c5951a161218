"""The ``jetpy-server`` command line: nats-server 2.9.10's flags, names and meanings.

Owns flag syntax (Go's ``flag`` package conventions: ``-flag`` or ``--flag``, ``-flag=value`` or
``-flag value``, booleans bare or ``-flag=false``, parsing stops at the first non-flag argument or
``--``), the flag table, precedence (the ``-c`` file is loaded first, explicit flags override it,
whatever their order) and the help text. Knows nothing of the config file format beyond calling
``config.load_config``; never prints, exits or starts anything: the caller (``main``) does.

Differences from nats-server, on purpose: a bad flag raises ``UsageError`` meant to exit with
status 1 (nats-server prints usage and exits 0); flags for features jetpy lacks (syslog,
profiling) are recognised and refused with "... is not supported yet" instead
of silently doing nothing; ``--no_auth_user`` is accepted as a jetpy extension; the merged options
are checked as nats-server checks them at startup, so ``-t`` also catches those mistakes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from jetpy.server.config import ConfigError, load_config, validate_options
from jetpy.server.config_cluster import apply_cluster_url, apply_routes
from jetpy.server.options import ServerOptions, TlsOptions
from jetpy.server.signals import COMMANDS as SIGNAL_COMMANDS

__all__ = [
    "FLAGS",
    "HELP_TEXT",
    "ConfigError",
    "Flag",
    "Override",
    "ParsedArgs",
    "UsageError",
    "load_options",
    "parse_args",
]

USAGE_EXIT_CODE = 1  # what a command-line mistake should exit with
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

FlagKind = Literal["bool", "int", "str"]
FlagValue = bool | int | str


class UsageError(Exception):
    """A command-line mistake: unknown flag, missing or malformed value, unsupported feature."""

    def __init__(self, message: str, exit_code: int = USAGE_EXIT_CODE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


Override = tuple[Callable[[ServerOptions, "FlagValue"], None], "FlagValue"]


@dataclass(slots=True)
class ParsedArgs:
    options: ServerOptions
    show_help: bool = False
    show_version: bool = False
    test_config: bool = False
    warnings: list[str] = field(default_factory=list)  # from the config file, "file:line:col: ..."
    signal: str = ""  # --signal <command>[=<pid or pid file>]: signal a running server
    overrides: list[Override] = field(default_factory=list)  # what the flags set, in order

    def reload(self) -> tuple[ServerOptions, list[str]]:
        """The options as they would be now: the ``-c`` file read again, the flags over it, as
        nats-server's reload merges them. Raises ``ConfigError`` as :func:`parse_args` does."""
        return load_options(self.options.config_file, self.overrides)


@dataclass(slots=True)
class _Run:
    """State of one parse: the control flags, the config path and what the value flags set."""

    show_help: bool = False
    show_version: bool = False
    test_config: bool = False
    config_file: str = ""
    signal: str = ""
    signal_flag: str = ""  # as it was typed: "-sl" or "--signal"
    overrides: list[Override] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Flag:
    """One flag and its aliases. ``apply`` sets options; ``control`` sets parse state; neither =
    recognised but unsupported, with ``unsupported`` naming the missing feature."""

    names: tuple[str, ...]
    kind: FlagKind
    apply: Callable[[ServerOptions, FlagValue], None] | None = None
    control: Callable[[_Run, FlagValue], None] | None = None
    unsupported: str = ""


def _set(attr: str) -> Callable[[ServerOptions, FlagValue], None]:
    def apply(opts: ServerOptions, value: FlagValue) -> None:
        setattr(opts, attr, value)

    return apply


def _set_cluster(attr: str) -> Callable[[ServerOptions, FlagValue], None]:
    def apply(opts: ServerOptions, value: FlagValue) -> None:
        setattr(opts.cluster, attr, value)

    return apply


def _debug_trace(debug: bool) -> Callable[[ServerOptions, FlagValue], None]:
    """-DV, -VV, -DVV: like nats-server, only switch on (``-DV=false`` changes nothing)."""

    def apply(opts: ServerOptions, value: FlagValue) -> None:
        if value:
            opts.trace = True
            opts.debug = opts.debug or debug

    return apply


def _tls_flag(field: str | None) -> Callable[[ServerOptions, FlagValue], None]:
    """--tls, --tlscert, --tlskey, --tlscacert, --tlsverify: any of them switches TLS on (the
    certificate and key are then required, as by nats-server); ``--tls=false`` does nothing."""

    def apply(opts: ServerOptions, value: FlagValue) -> None:
        if value is False:
            return
        tls = opts.tls or TlsOptions()
        opts.tls = replace(tls, **{field: value}) if field else tls  # type: ignore[arg-type]

    return apply


def _ctl(attr: str) -> Callable[[_Run, FlagValue], None]:
    def control(run: _Run, value: FlagValue) -> None:
        setattr(run, attr, value)

    return control


FLAGS: tuple[Flag, ...] = (
    # Server
    Flag(("a", "addr", "net"), "str", apply=_set("host")),
    Flag(("p", "port"), "int", apply=_set("port")),
    Flag(("n", "name", "server_name"), "str", apply=_set("server_name")),
    Flag(("P", "pid"), "str", apply=_set("pid_file")),
    Flag(("m", "http_port"), "int", apply=_set("http_port")),
    Flag(("ms", "https_port"), "int", apply=_set("https_port")),
    Flag(("c", "config"), "str", control=_ctl("config_file")),
    Flag(("t",), "bool", control=_ctl("test_config")),
    Flag(("sl", "signal"), "str", control=_ctl("signal")),
    Flag(("client_advertise",), "str", apply=_set("client_advertise")),
    Flag(("ports_file_dir",), "str", unsupported="the ports file"),
    # Logging
    Flag(("l", "log"), "str", apply=_set("log_file")),
    Flag(("T", "logtime"), "bool", apply=_set("logtime")),
    Flag(("log_format",), "str", apply=_set("log_format")),  # jetpy extension: text or json
    Flag(("s", "syslog"), "bool", unsupported="syslog"),
    Flag(("r", "remote_syslog"), "str", unsupported="syslog"),
    Flag(("D", "debug"), "bool", apply=_set("debug")),
    Flag(("V", "trace"), "bool", apply=_set("trace")),
    Flag(("VV",), "bool", apply=_debug_trace(debug=False)),
    Flag(("DV",), "bool", apply=_debug_trace(debug=True)),
    Flag(("DVV",), "bool", apply=_debug_trace(debug=True)),
    Flag(("log_size_limit",), "int", unsupported="log rotation"),
    Flag(("max_traced_msg_len",), "int", unsupported="trace truncation"),
    # JetStream
    Flag(("js", "jetstream"), "bool", apply=_set("jetstream")),
    Flag(("sd", "store_dir"), "str", apply=_set("store_dir")),
    # Authorization
    Flag(("user",), "str", apply=_set("username")),
    Flag(("pass",), "str", apply=_set("password")),
    Flag(("auth",), "str", apply=_set("token")),
    Flag(("no_auth_user",), "str", apply=_set("no_auth_user")),  # jetpy extension
    # TLS
    Flag(("tls",), "bool", apply=_tls_flag(None)),
    Flag(("tlscert",), "str", apply=_tls_flag("cert_file")),
    Flag(("tlskey",), "str", apply=_tls_flag("key_file")),
    Flag(("tlsverify",), "bool", apply=_tls_flag("verify")),
    Flag(("tlscacert",), "str", apply=_tls_flag("ca_file")),
    Flag(("help_tls",), "bool", unsupported="TLS help"),
    # Cluster
    Flag(("routes",), "str", apply=lambda o, v: apply_routes(o, str(v))),
    Flag(("cluster", "cluster_listen"), "str", apply=lambda o, v: apply_cluster_url(o, str(v))),
    Flag(("cluster_name",), "str", apply=_set_cluster("name")),
    Flag(("no_advertise",), "bool", apply=_set_cluster("no_advertise")),
    Flag(("cluster_advertise",), "str", apply=_set_cluster("advertise")),
    Flag(("connect_retries",), "int", apply=_set_cluster("connect_retries")),
    # Profiling
    Flag(("profile",), "int", unsupported="the profiling port"),
    # Common
    Flag(("h", "help"), "bool", control=_ctl("show_help")),
    Flag(("v", "version"), "bool", control=_ctl("show_version")),
)
_BY_NAME: dict[str, Flag] = {name: f for f in FLAGS for name in f.names}
_COMMANDS = {"version": "show_version", "help": "show_help"}  # nats-server's positional commands

# Go's strconv.ParseInt(s, 0, 64): optional sign, 0x/0o/0b prefixes, a leading 0 means octal,
# underscores only between digits.
_GO_INT = re.compile(
    r"[+-]?(?:0[xX](?:_?[0-9a-fA-F])+|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0(?:_?[0-7])*|[1-9](?:_?[0-9])*)"
)
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_args(argv: list[str]) -> ParsedArgs:
    """Parse ``argv`` (without the program name), load ``-c`` if given, apply the flags over it.

    Raises ``UsageError`` for command-line mistakes and ``ConfigError`` for a bad config file or
    options that cannot work together. With ``-h``/``-v`` nothing else is looked at.
    """
    run = _Run()
    unsupported: list[str] = []
    rest = _parse_flags(argv, run, unsupported)
    if rest:
        command = _COMMANDS.get(rest[0])
        if command is None:
            raise UsageError(f'unrecognized command: "{rest[0]}"')
        setattr(run, command, True)
    if run.show_help or run.show_version:
        return ParsedArgs(ServerOptions(), show_help=run.show_help, show_version=run.show_version)
    if unsupported:
        raise UsageError(unsupported[0])
    if run.signal:  # nats-server signals and exits before it reads any config
        if run.signal.partition("=")[0] not in SIGNAL_COMMANDS:
            # stop is SIGKILL (kill -9 does it); reopen asks for log rotation, which jetpy lacks
            raise UsageError(
                f"{run.signal_flag}: signalling a running server (use kill) is not supported yet"
            )
        return ParsedArgs(ServerOptions(), signal=run.signal)
    if run.test_config and not run.config_file:
        raise UsageError("must specify [-c, --config] option to check configuration file syntax")
    opts, warnings = load_options(run.config_file, run.overrides)
    return ParsedArgs(opts, test_config=run.test_config, warnings=warnings, overrides=list(run.overrides))


def load_options(config_file: str, overrides: list[Override]) -> tuple[ServerOptions, list[str]]:
    """The ``-c`` file (if any), the flags applied over it, checked as nats-server checks them."""
    warnings: list[str] = []
    if config_file:
        opts, warnings = load_config(config_file)
    else:
        opts = ServerOptions()
    for apply, value in overrides:
        apply(opts, value)
    validate_options(opts)
    return opts, warnings


def _parse_flags(argv: list[str], run: _Run, unsupported: list[str]) -> list[str]:
    """Go ``flag.Parse``: consume flags, return the arguments left after them."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            return argv[i + 1 :]
        dashes = 2 if arg[1] == "-" else 1
        body = arg[dashes:]
        if not body or body[0] in "-=":
            raise UsageError(f"bad flag syntax: {arg}")
        name, has_value, value = body.partition("=")
        flag = _BY_NAME.get(name)
        if flag is None:
            raise UsageError(f"flag provided but not defined: -{name}")
        i += 1
        if flag.kind != "bool" and not has_value:
            if i >= len(argv):
                raise UsageError(f"flag needs an argument: -{name}")
            value, i = argv[i], i + 1
        parsed = _convert(flag, name, value if (has_value or flag.kind != "bool") else None)
        if flag.control is not None:
            flag.control(run, parsed)
            if name in ("sl", "signal"):
                run.signal_flag = arg.partition("=")[0]
        elif flag.apply is not None:
            run.overrides.append((flag.apply, parsed))
        elif not (flag.kind == "bool" and parsed is False):  # "--tls=false" asks for nothing
            unsupported.append(f"{arg.partition('=')[0]}: {flag.unsupported} is not supported yet")
    return argv[i:]


def _convert(flag: Flag, name: str, value: str | None) -> FlagValue:
    if flag.kind == "bool":
        if value is None or value in _GO_TRUE:
            return True
        if value in _GO_FALSE:
            return False
        raise UsageError(f'invalid boolean value "{value}" for -{name}: parse error')
    assert value is not None
    if flag.kind == "int":
        if not _GO_INT.fullmatch(value):
            raise UsageError(f'invalid value "{value}" for flag -{name}: parse error')
        digits = value.replace("_", "")
        sign = -1 if digits.startswith("-") else 1
        digits = digits.lstrip("+-")
        if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
            number = sign * int(digits, 8)  # Go: a leading zero is octal
        else:
            number = sign * int(digits, 0)
        if not INT64_MIN <= number <= INT64_MAX:
            raise UsageError(f'invalid value "{value}" for flag -{name}: value out of range')
        return number
    return value


HELP_TEXT = """\
Usage: jetpy-server [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222)
    -n, --name
        --server_name <server_name>  Server name (default: auto)
    -P, --pid <file>                 File to store PID
    -m, --http_port <port>           Use port for http monitoring
    -ms,--https_port <port>          Use port for https monitoring (the TLS certificate below)
    -c, --config <file>              Configuration file (nats-server format)
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to jetpy-server process (ldm, reload, quit, term)
                                     <pid> can be a PID or the path to a PID file
        --client_advertise <string>  Client URL to advertise

Logging Options:
    -l, --log <file>                 File to redirect log output
    -T, --logtime                    Timestamp log entries (default: true)
        --log_format <text|json>     nats-server's lines, or one JSON object per line
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Verbose trace (same as -V in jetpy)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace

JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory

TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections
        --no_auth_user <user>        User for connections without credentials

Cluster Options:
        --routes <rurl-1, rurl-2>    Routes to solicit and connect
        --cluster <cluster-url>      Cluster URL for solicited routes
        --cluster_name <string>      Cluster Name, if not set one will be dynamically generated
        --no_advertise <bool>        Do not advertise known cluster information to clients
        --cluster_advertise <string> Cluster URL to advertise to other servers
        --connect_retries <number>   For implicit routes, number of connect retries
        --cluster_listen <url>       Cluster url from which members can solicit routes

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version

Flags are nats-server's: -flag or --flag, -flag=value or -flag value; explicit flags override
the configuration file. Recognised but not supported yet: --help_tls, syslog (-s, -r),
--ports_file_dir, --log_size_limit, --max_traced_msg_len, --profile; of --signal's commands,
stop (use kill -9) and reopen (log rotation).
"""
