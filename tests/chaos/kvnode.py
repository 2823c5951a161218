"""One server of the fault harness: a jetpy server (the same flags as ``jetpy-server``) running
its member of the replicated test service's group (``kvservice``).

    python -m chaos.kvnode --group KV --founders n1,n2,n3 --tick 0.05 [--power-ledger] -- <server flags>

(from ``tests/``). ``--founders``: the servers that found the group (this one joins as a new
member when it is not among them); ``--tick``: seconds per Raft tick (elections after 10 to 20
ticks of silence); ``--snapshot-entries``: snapshot and compact the log that often;
``--power-ledger``: before each fsync of the log, record in ``<group>.ledger`` how long each
segment file is (``ledger``); ``--lying-fsync``: the same for a disk whose fsync lies (a broken
server, to prove the harness catches what it causes).
Stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from jetpy.server.app import Server
from jetpy.server.flags import parse_args
from jetpy.server.logs import setup_logging
from jetpy.server.nrg import GroupConfig

from .kvservice import KVMachine, KVService
from .ledger import install_lying_fsync, install_power_ledger

log = logging.getLogger("jetpy.server")


async def serve(ns: argparse.Namespace, server_args: list[str]) -> int:
    parsed = parse_args(server_args)
    opts = parsed.options
    setup_logging(opts)
    server = Server(opts)
    await server.start()
    assert server.raft is not None
    config = GroupConfig(
        tick=ns.tick,
        snapshot_entries=ns.snapshot_entries,
        timeout=ns.timeout,
        election_ticks=ns.election_ticks,
    )
    founders = [f for f in ns.founders.split(",") if f]
    machine = KVMachine()
    group = await server.raft.start_group(ns.group, machine, founders, config)
    service = KVService(group, machine, server.broker, server.server_name, ns.timeout)
    log.info("kv service ready on %s (member %s)", service.subject, group.member)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    service.close()
    await server.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--" in args:
        i = args.index("--")
        own, server_args = args[:i], args[i + 1 :]
    else:
        own, server_args = args, []
    p = argparse.ArgumentParser(prog="kvnode")
    p.add_argument("--group", default="KV")
    p.add_argument("--founders", default="")
    p.add_argument("--tick", type=float, default=0.05)
    p.add_argument("--election-ticks", type=int, default=10)
    p.add_argument("--snapshot-entries", type=int, default=0)
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--power-ledger", action="store_true")
    p.add_argument("--lying-fsync", action="store_true", help="a broken disk (see install_lying_fsync)")
    ns = p.parse_args(own)
    if ns.lying_fsync:
        install_lying_fsync()
    elif ns.power_ledger:
        install_power_ledger()
    try:
        import uvloop  # as jetpy-server runs
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(serve(ns, server_args))
    return uvloop.run(serve(ns, server_args))


if __name__ == "__main__":
    sys.exit(main())
