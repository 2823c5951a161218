"""A jetpy server with clustered JetStream and fast Raft timers, for the tests: ``jetpy-server
-js`` runs nats-server's timers (a heartbeat a second, elections after 5-10 s), which nats-server
offers no setting for and neither does jetpy's command line; the tests start it through the
server's embedding API (``Server(opts, raft_config=GroupConfig(...))``) with timers they can wait
for.

    python -m chaos.jsnode --tick 0.05 --election-ticks 10 [--snapshot-entries N] [--slow-jetstream S] -- <jetpy-server flags, without -js>

(from ``tests/``). Stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from jetpy.server import app, js_wiring
from jetpy.server.app import Server
from jetpy.server.flags import parse_args
from jetpy.server.logs import setup_logging
from jetpy.server.nrg import GroupConfig


async def serve(ns: argparse.Namespace, server_args: list[str]) -> int:
    opts = parse_args(server_args).options
    if ns.slow_jetstream:
        _slow_jetstream(ns.slow_jetstream)
    setup_logging(opts)
    config = GroupConfig(
        tick=ns.tick,
        election_ticks=ns.election_ticks,
        timeout=ns.timeout,
        snapshot_entries=ns.snapshot_entries,
    )
    server = Server(opts, raft_config=config, jetstream=True)
    await server.start()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    await server.shutdown()
    return 0


def _slow_jetstream(seconds: float) -> None:
    """JetStream started ``seconds`` after the rest of the server (its routes up meanwhile): a
    process slow to start, as on a loaded machine."""
    start = js_wiring.start_jetstream

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(seconds)
        return await start(*args, **kwargs)

    vars(app)["start_jetstream"] = slow  # the name the server starts it by


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    i = args.index("--") if "--" in args else len(args)
    p = argparse.ArgumentParser(prog="jsnode")
    p.add_argument("--tick", type=float, default=0.05)
    p.add_argument("--election-ticks", type=int, default=10)
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--snapshot-entries", type=int, default=0, help="0: the server's default")
    p.add_argument("--profile", default="", help="write cProfile stats here on exit")
    p.add_argument("--slow-jetstream", type=float, default=0.0, help="start JetStream this much later")
    ns = p.parse_args(args[:i])
    if ns.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        try:
            return _run(ns, args[i + 1 :])
        finally:
            prof.disable()
            prof.dump_stats(ns.profile)
    return _run(ns, args[i + 1 :])


def _run(ns: argparse.Namespace, server_args: list[str]) -> int:
    try:
        import uvloop  # as jetpy-server runs
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(serve(ns, server_args))
    return uvloop.run(serve(ns, server_args))


if __name__ == "__main__":
    sys.exit(main())
