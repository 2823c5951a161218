"""``jetpy-server --signal <command>[=<pid>]``: nats-server's way to signal a running server.

Owns the commands jetpy answers and their Unix signals (``reload`` = SIGHUP, ``quit`` = SIGINT,
``term`` = SIGTERM, ``ldm`` = SIGUSR2: lame duck mode), the target (a pid, a pid file, or else the one jetpy-server process running,
found by its command line as nats-server finds its own with ``pgrep``), and nats-server's
messages when that fails. Never starts a server; ``main`` exits with what :func:`send_signal`
returns.
"""

from __future__ import annotations

import os
import signal
import sys
from itertools import pairwise
from pathlib import Path

__all__ = ["COMMANDS", "SignalError", "send_signal"]

COMMANDS: dict[str, signal.Signals] = {
    "reload": signal.SIGHUP,
    "quit": signal.SIGINT,
    "term": signal.SIGTERM,
    "ldm": signal.SIGUSR2,
}


class SignalError(Exception):
    """The signal could not be sent: bad pid, no server running, or more than one."""


def send_signal(spec: str) -> int:
    """Send ``<command>[=<pid or pid file>]``; 0 when sent, 1 (with the reason on stderr) if not."""
    try:
        command, pid = _parse(spec)
        os.kill(pid, COMMANDS[command])
    except (SignalError, OSError) as e:
        print(f"jetpy-server: {e}", file=sys.stderr)
        return 1
    return 0


def _parse(spec: str) -> tuple[str, int]:
    command, _, target = spec.partition("=")
    if command not in COMMANDS:
        raise SignalError(f'unknown signal "{command}"')
    if "=" in target:
        raise SignalError(f"invalid signal parameters: {target.split('=')[1:]}")
    if not target:
        return command, _the_running_server()
    text = target
    if not target.isdigit():  # nats-server: a pid, or the path of a pid file
        try:
            text = Path(target).read_text().strip()
        except OSError as e:
            raise SignalError(f"could not read pid file {target}: {e.strerror}") from None
    if not text.isdigit():
        raise SignalError(f"invalid pid: {text}")
    return command, int(text)


def _the_running_server() -> int:
    pids = [pid for pid in _server_pids() if pid != os.getpid()]
    if not pids:
        raise SignalError("no jetpy-server processes running")
    if len(pids) > 1:
        listed = "\n".join(str(p) for p in sorted(pids))
        raise SignalError(f"multiple jetpy-server processes running:\n{listed}")
    return pids[0]


def _server_pids() -> list[int]:
    """Processes whose command line runs a server: ``jetpy-server``, ``python -m jetpy.server``
    or ``jetpy server`` (Linux /proc; elsewhere none are found: give a pid)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        names = [a.rsplit(b"/", 1)[-1] for a in args]
        runs_server = (
            b"jetpy-server" in names
            or (b"-m", b"jetpy.server") in pairwise(args)
            or (b"jetpy", b"server") in pairwise(names)
        )
        if runs_server and not any(a in (b"--signal", b"-sl", b"-signal", b"--sl") for a in args):
            found.append(int(entry.name))
    return found
