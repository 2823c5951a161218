"""What the CLI prints and how it ends: exit codes, the one-line errors, JSON and rich tables.

Owns: the exit-code contract scripts rely on (``EXIT_*``), ``CliError`` (every failure a command
reports: a message and an exit code), the error line format (``jetpy: error: ...`` on stderr,
with the server's ``err_code`` when it sent one), ``--json`` output, and the rich console used for
tables (imported lazily: commands that print one line do not pay for rich).
Must not know: nats-py, the JetStream API, any particular command.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final, NoReturn

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "EXIT_API",
    "EXIT_CONNECT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "ReaderGone",
    "busy",
    "console",
    "emit_json",
    "error_line",
    "fail",
    "info",
    "print_table",
    "reader_gone",
    "usage",
]

EXIT_OK: Final = 0
EXIT_API: Final = 1
"""The server refused or failed the operation (JetStream API error, not found, timeout, no
responders, a failed check, damage found by ``store check``)."""
EXIT_USAGE: Final = 2
"""Bad command line or input file: unknown flag, invalid name or value. Nothing was sent."""
EXIT_CONNECT: Final = 3
"""Could not connect: server unreachable, authentication or authorization failed."""
EXIT_INTERRUPTED: Final = 130

_TERMINAL_WIDTH_FALLBACK: Final = 200
"""Width for tables when stdout is not a terminal: wide enough that piped tables do not wrap."""


class ReaderGone(Exception):
    """stdout was closed by its reader (``jetpy stream view X | head``): stop quietly, exit 0."""


def reader_gone() -> ReaderGone:
    """Point stdout at /dev/null (so the final flush cannot fail again) and return the exception."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return ReaderGone()


class CliError(Exception):
    """A failure to report as one line on stderr with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_API, err_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.err_code = err_code


def fail(message: str, exit_code: int = EXIT_API, err_code: int | None = None) -> NoReturn:
    raise CliError(message, exit_code, err_code)


def usage(message: str) -> NoReturn:
    raise CliError(message, EXIT_USAGE)


def error_line(err: CliError) -> str:
    text = " ".join(err.message.split())  # always exactly one line
    if err.err_code is not None and f"{err.err_code}" not in text:
        text += f" (err_code {err.err_code})"
    return f"jetpy: error: {text}"


_console: Console | None = None


def console() -> Console:
    """The stdout console: colours and terminal width on a tty, plain and wide when piped."""
    global _console
    if _console is None:
        from rich.console import Console

        tty = sys.stdout.isatty()
        _console = Console(
            file=sys.stdout,
            width=None if tty else _TERMINAL_WIDTH_FALLBACK,
            highlight=False,
            soft_wrap=not tty,
        )
    return _console


def info(message: str) -> None:
    """A plain line on stdout (no markup interpretation)."""
    sys.stdout.write(message + "\n")


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def print_table(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    right: Sequence[str] = (),
    footer: str | None = None,
) -> None:
    """A rounded rich table; ``right`` names the right-aligned (numeric) columns."""
    from rich import box
    from rich.table import Table

    table: Table = Table(title=title, box=box.ROUNDED, title_justify="left", show_edge=True)
    for col in columns:
        table.add_column(col, justify="right" if col in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(str(c) for c in row))
    out = console()
    out.print(table, markup=False)
    if footer:
        out.print(footer, markup=False, highlight=False)


def print_sections(sections: Sequence[tuple[str, Sequence[tuple[str, Any]]]]) -> None:
    """``Title`` then aligned ``key: value`` lines, as ``nats stream info`` prints a stream."""
    out = sys.stdout
    width = max((len(k) for _, pairs in sections for k, _ in pairs), default=0)
    for i, (title, pairs) in enumerate(sections):
        if i:
            out.write("\n")
        out.write(f"{title}:\n\n")
        for key, value in pairs:
            out.write(f"  {key.rjust(width)}: {value}\n")


def busy(what: str) -> AbstractContextManager[object]:
    """A live spinner on stderr while a long request runs (a purge of a big stream), only when
    stderr is a terminal: scripts and pipes see nothing of it."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(f"{what}...", spinner="dots")
