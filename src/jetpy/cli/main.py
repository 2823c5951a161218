"""The `jetpy` admin CLI: a client of any NATS server over the wire (`jetpy server` is routed
elsewhere by ``jetpy.entry``).

Owns the typer app, the global connection options (as the nats CLI: ``--server/-s`` defaulting to
``NATS_URL``, ``--user``, ``--password``, ``--creds``, ``--context``, plus ``--timeout`` for API
requests; accepted anywhere on the line, and filled from a nats CLI context, ``contexts``), the
registration of every command group, and the single place where failures become output and an
exit code: usage errors (unknown flags, bad values) print one line and exit 2, ``CliError`` prints
one line and exits with its code (see ``output.EXIT_*``). Commands find the connection settings
in ``ctx.obj``; each group lives in its own module.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from jetpy.cli.connect import DEFAULT_SERVER, ConnectOptions
from jetpy.cli.contexts import load_context
from jetpy.cli.output import EXIT_API, EXIT_INTERRUPTED, EXIT_USAGE, CliError, ReaderGone, error_line

__all__ = ["DEFAULT_SERVER", "GlobalOptions", "build_app", "main"]

# typer raises click's exceptions from wherever it takes click (recent typer vendors it)
_clickexc: Any = sys.modules[typer.BadParameter.__module__]
ClickException: type[Exception] = _clickexc.ClickException
UsageError: type[Exception] = _clickexc.UsageError
Abort: type[BaseException] = getattr(_clickexc, "Abort", typer.Abort)
NoArgsIsHelpError: type[Exception] = getattr(_clickexc, "NoArgsIsHelpError", UsageError)

GlobalOptions = ConnectOptions  # the name other clients (bench) know the global options by

# group name -> (module with ``app``, help, hidden aliases). Modules are imported only for the
# command being run (typer inspects every registered function's signature at start-up).
GROUPS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "stream": ("jetpy.cli.stream", "Manage JetStream streams.", ("str", "streams")),
    "consumer": ("jetpy.cli.consumer", "Manage JetStream consumers.", ("con", "consumers", "obs")),
    "kv": ("jetpy.cli.kv", "Use and manage Key-Value buckets.", ()),
    "object": ("jetpy.cli.obj", "Use and manage Object Store buckets.", ("obj",)),
    "server": ("jetpy.cli.server", "Inspect and check the server (`jetpy server` with flags runs one).", ()),
    "store": ("jetpy.cli.store", "Offline tools for a stopped server's file store.", ()),
    "cluster": ("jetpy.cli.cluster", "Run a local cluster of jetpy servers (`jetpy cluster up`).", ()),
}
# command name -> (module, function name)
COMMANDS: dict[str, tuple[str, str]] = {
    "pub": ("jetpy.cli.core", "pub"),
    "sub": ("jetpy.cli.core", "sub"),
    "request": ("jetpy.cli.core", "request"),
    "reply": ("jetpy.cli.core", "reply"),
    "apply": ("jetpy.cli.apply", "apply"),
    "bench": ("jetpy.bench.command", "bench"),
}
ALIASES: dict[str, str] = {"req": "request", **{a: g for g, (_, _, al) in GROUPS.items() for a in al}}
_GLOBAL_WITH_VALUE = frozenset(
    {"--server", "-s", "--user", "--password", "--creds", "--timeout", "--context"}
)
# global options a command defines for itself keep their place on its line (bench's --timeout)
_OWN_OPTIONS: dict[str, frozenset[str]] = {"bench": frozenset({"--timeout"})}


def _global_options(
    ctx: typer.Context,
    server_url: Annotated[
        str | None,
        typer.Option(
            "--server",
            "-s",
            envvar="NATS_URL",
            help="Server URL(s), comma separated.",
            show_default=DEFAULT_SERVER,
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", envvar="NATS_USER", help="Username (or a token without --password)."),
    ] = None,
    password: Annotated[
        str | None, typer.Option("--password", envvar="NATS_PASSWORD", help="Password.")
    ] = None,
    creds: Annotated[
        Path | None,
        typer.Option("--creds", envvar="NATS_CREDS", help="User credentials file (JWT and NKey seed)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.01, help="Seconds to wait for each server response.")
    ] = 5.0,
    context: Annotated[
        str | None,
        typer.Option(
            "--context", help="A nats CLI context (name or file); default: NATS_CONTEXT or the selected one."
        ),
    ] = None,
) -> None:
    """jetpy admin CLI: talk to a jetpy (or any NATS) server. `jetpy server --help` runs the server."""
    # flags and environment variables first, then the nats context, then the defaults
    nctx = load_context(context)
    if nctx is not None and user is None and password is None:
        user, password = (nctx.token, None) if nctx.token and not nctx.user else (nctx.user, nctx.password)
    ctx.obj = ConnectOptions(
        server=server_url or (nctx.url if nctx is not None and nctx.url else DEFAULT_SERVER),
        user=user,
        password=password,
        creds=str(creds) if creds is not None else (nctx.creds if nctx is not None else None),
        timeout=timeout,
    )


def build_app(only: str | None = None) -> typer.Typer:
    """The CLI with every command, or with just ``only`` (a canonical command or group name)."""
    cli = typer.Typer(
        name="jetpy",
        help="jetpy admin CLI: talk to a jetpy (or any NATS) server. `jetpy server --help` runs the server.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    cli.callback()(_global_options)
    for name, (module, func) in COMMANDS.items():
        if only in (None, name):
            fn: Callable[..., None] = getattr(importlib.import_module(module), func)
            cli.command(name)(fn)
    for name, (module, help_text, _aliases) in GROUPS.items():
        if only in (None, name):
            cli.add_typer(importlib.import_module(module).app, name=name, help=help_text)
    return cli


def _command_of(argv: list[str]) -> tuple[int, str] | None:
    """Where in ``argv`` the command is and its canonical name (aliases resolved), None if unknown."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        i += 2 if arg in _GLOBAL_WITH_VALUE else 1
    if i >= len(argv):
        return None
    word = ALIASES.get(argv[i], argv[i])
    return (i, word) if word in COMMANDS or word in GROUPS else None


def _split_globals(args: list[str], command: str) -> tuple[list[str], list[str]]:
    """As the nats CLI, global options may follow the command (``jetpy stream ls -s URL``):
    ``(global options with their values, the command's own words)``; ``--`` ends the search,
    and an option the command defines itself (bench's ``--timeout``) stays the command's."""
    own = _OWN_OPTIONS.get(command, frozenset())
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.partition("=")[0]
        if name in _GLOBAL_WITH_VALUE and name not in own:
            if "=" in arg and arg.startswith("--"):
                front.append(arg)
                i += 1
                continue
            if i + 1 < len(args):
                front.extend(args[i : i + 2])
                i += 2
                continue
        rest.append(arg)
        i += 1
    return front, rest


def _usage_line(exc: Any) -> str:
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"jetpy: error: {' '.join(exc.format_message().split())}{where}"


def main(argv: list[str]) -> int:
    """Run the CLI on ``argv`` (without the program name) and return the exit code."""
    found = _command_of(argv)
    only = None
    if found is not None:
        i, only = found
        argv = [*argv[:i], only, *argv[i + 1 :]]  # an alias becomes the name it is registered under
        globals_, rest = _split_globals(argv[i + 1 :], only)
        argv = [*argv[:i], *globals_, only, *rest]
    command = typer.main.get_command(build_app(only))
    try:
        rv = command.main(args=argv, prog_name="jetpy", standalone_mode=False)
    except CliError as exc:
        sys.stderr.write(error_line(exc) + "\n")
        return exc.exit_code
    except ReaderGone:
        return 0
    except NoArgsIsHelpError:  # the help was printed: `jetpy` alone is fine, `jetpy stream` is incomplete
        return EXIT_USAGE if argv else 0
    except UsageError as exc:
        sys.stderr.write(_usage_line(exc) + "\n")
        return EXIT_USAGE
    except ClickException as exc:  # typer.BadParameter and friends raised by commands
        sys.stderr.write(_usage_line(exc) + "\n")
        return EXIT_USAGE if getattr(exc, "exit_code", 1) == 2 else EXIT_API
    except Abort:
        sys.stderr.write("jetpy: aborted\n")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        sys.stderr.write("jetpy: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: still one line (JETPY_DEBUG=1 shows the traceback)
        if os.environ.get("JETPY_DEBUG"):
            raise
        sys.stderr.write(f"jetpy: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
        return EXIT_API
    except SystemExit as exc:  # bench and typer may still exit directly
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        sys.stderr.write(f"jetpy: error: {exc.code}\n")
        return EXIT_API
    if isinstance(rv, int) and not isinstance(rv, bool):
        return rv
    return 0
