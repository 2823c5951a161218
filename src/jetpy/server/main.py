"""`jetpy-server` (and `jetpy server`): nats-server's command line, then run until a signal.

Owns process concerns only: argument handling (delegated to ``flags``), logging (``logs``), the pid
file, uvloop, and signals: SIGTERM/SIGINT shut down gracefully (clients flushed and closed,
stores synced), a second one exits at once; SIGHUP reloads the ``-c`` file (``reload``); SIGUSR2 enters lame duck mode (``lameduck``) and
exits when it is done;
``--signal <command>[=<pid>]`` signals a running server instead of starting one (``signals``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from jetpy.heap import MMAP_THRESHOLD, TRIM_THRESHOLD, keep_heap
from jetpy.server.app import Server
from jetpy.server.identity import JETPY_VERSION, NATS_COMPAT_VERSION
from jetpy.server.logs import setup_logging
from jetpy.server.options import ServerOptions
from jetpy.server.reload import reload_config
from jetpy.server.signals import send_signal

if TYPE_CHECKING:
    from jetpy.server.flags import ParsedArgs

__all__ = ["main", "setup_logging"]

log = logging.getLogger("jetpy.server")


async def serve(opts: ServerOptions, parsed: ParsedArgs | None = None) -> int:
    server = Server(opts)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    # the handlers are in place before the server says it is ready (a signal sent right after
    # "Server is ready" must not find the default action, which for SIGHUP ends the process);
    # what arrives while it starts is done once it has started
    early: list[Callable[[], None]] = []
    started = False

    def when_started(action: Callable[[], None]) -> None:
        if started:
            action()
        elif action not in early:
            early.append(action)

    def reload() -> None:
        reload_config(server, parsed.reload if parsed else lambda: (opts, []), _reconfigure)

    def on_hangup() -> None:  # nats-server's SIGHUP: reload the config file
        log.info('Trapped "hangup" signal')
        when_started(reload)

    loop.add_signal_handler(signal.SIGHUP, on_hangup)
    ldm: list[asyncio.Task[None]] = []

    def lame_duck() -> None:
        if not ldm:
            ldm.append(loop.create_task(server.lame_duck()))
            ldm[0].add_done_callback(lambda _: stopping.set())

    def on_lame_duck() -> None:  # nats-server's SIGUSR2: lame duck mode, then exit
        log.info('Trapped "user defined signal 2" signal')
        when_started(lame_duck)

    loop.add_signal_handler(signal.SIGUSR2, on_lame_duck)

    def on_signal(signame: str) -> None:
        if stopping.is_set():
            log.warning("second %s: exiting now", signame)
            os._exit(1)
        log.info("Trapped %s signal, shutting down", signame)
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    await server.start()
    started = True
    for action in early:
        if not stopping.is_set():
            action()
    await stopping.wait()
    for task in ldm:
        task.cancel()  # a signal to stop ends lame duck mode early
    await server.shutdown()
    log.info("Server Exiting..")
    return 0


def _reconfigure(opts: ServerOptions, changed: set[str]) -> None:
    """The process's part of a reload: the logging options and the pid file."""
    if changed & {"debug", "trace", "logtime", "log_file", "log_format"}:
        setup_logging(opts)
    if "pid_file" in changed and opts.pid_file:
        with open(opts.pid_file, "w") as f:
            f.write(str(os.getpid()))


def main(argv: list[str] | None = None) -> int:
    from jetpy.server.config import ConfigError
    from jetpy.server.flags import HELP_TEXT, UsageError, parse_args

    args = sys.argv[1:] if argv is None else argv
    try:
        parsed = parse_args(args)
    except UsageError as e:
        print(f"jetpy-server: {e}", file=sys.stderr)
        print("Use -h for help.", file=sys.stderr)
        return e.exit_code
    except ConfigError as e:
        print(f"jetpy-server: {e}", file=sys.stderr)
        return 1
    if parsed.show_help:
        print(HELP_TEXT)
        return 0
    if parsed.show_version:
        print(f"jetpy-server: v{JETPY_VERSION} (nats-server protocol {NATS_COMPAT_VERSION})")
        return 0
    if parsed.signal:
        return send_signal(parsed.signal)
    opts = parsed.options
    for warning in parsed.warnings:
        print(f"jetpy-server: warning: {warning}", file=sys.stderr)
    if parsed.test_config:
        # nats-server -t fails on warnings too: a config that only warns is not clean
        if parsed.warnings:
            return 1
        print(f"jetpy-server: configuration file {opts.config_file} test is successful")
        return 0
    setup_logging(opts)
    log.info("Starting jetpy-server version %s", JETPY_VERSION)
    if keep_heap():  # large replies reuse mapped pages (jetpy.heap says why)
        log.debug("C heap kept: trim threshold %d, mmap threshold %d", TRIM_THRESHOLD, MMAP_THRESHOLD)
    if opts.pid_file:
        with open(opts.pid_file, "w") as f:
            f.write(str(os.getpid()))
    try:
        import uvloop
    except ImportError:  # uvloop is a dependency; the fallback keeps odd platforms working
        uvloop = None  # type: ignore[assignment]
    try:
        if uvloop is not None:
            return uvloop.run(serve(opts, parsed))
        return asyncio.run(serve(opts, parsed))
    except OSError as e:
        log.error("Error listening on port: %s", e)
        return 1
    except ConfigError as e:  # found as the server starts (an operator's account with JetStream
        # on a cluster): said as a refusal, not a traceback
        log.error("%s", e)
        print(f"jetpy-server: {e}", file=sys.stderr)
        return 1
    finally:
        if opts.pid_file:
            try:
                os.unlink(opts.pid_file)
            except OSError:
                pass
