"""The `jetpy` admin CLI: a client of any NATS server over the wire (`jetpy server` is routed
elsewhere by ``jetpy.entry``).

Owns the typer app, the global connection options (as the nats CLI: ``--server/-s`` defaulting to
``NATS_URL``, ``--user``, ``--password``, ``--creds``) and the mapping of typer's exits to a return
code. Each command lives in its own module and is only registered here; commands find the
connection settings in ``ctx.obj``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from jetpy.bench.command import bench

__all__ = ["DEFAULT_SERVER", "GlobalOptions", "app", "main"]

DEFAULT_SERVER = "nats://127.0.0.1:4222"


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    """How to reach the server; every command reads it from ``ctx.obj``."""

    server: str
    user: str | None = None
    password: str | None = None
    creds: str | None = None


app = typer.Typer(
    name="jetpy",
    help="jetpy admin CLI: talk to a jetpy (or any NATS) server. `jetpy server --help` runs the server.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    server: Annotated[
        str,
        typer.Option("--server", "-s", envvar="NATS_URL", help="Server URL(s), comma separated."),
    ] = DEFAULT_SERVER,
    user: Annotated[str | None, typer.Option("--user", help="Username or token.")] = None,
    password: Annotated[str | None, typer.Option("--password", help="Password.")] = None,
    creds: Annotated[
        Path | None, typer.Option("--creds", help="User credentials file (JWT and NKey seed).")
    ] = None,
) -> None:
    ctx.obj = GlobalOptions(
        server=server, user=user, password=password, creds=str(creds) if creds is not None else None
    )


app.command("bench")(bench)


def main(argv: list[str]) -> int:
    """Run the CLI on ``argv`` (without the program name) and return the exit code."""
    try:
        app(args=argv, prog_name="jetpy")
    except SystemExit as exc:  # typer's standalone mode always ends in sys.exit
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code)  # a message passed to sys.exit
        return 1
    return 0
