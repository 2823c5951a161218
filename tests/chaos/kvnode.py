"""One server of the fault harness: a jetpy server (the same flags as ``jetpy-server``) running
its member of the replicated test service's group (``kvservice``).

    python -m chaos.kvnode --group KV --founders n1,n2,n3 --tick 0.05 [--power-ledger] -- <server flags>

(from ``tests/``). ``--founders``: the servers that found the group (this one joins as a new
member when it is not among them); ``--tick``: seconds per Raft tick (elections after 10 to 20
ticks of silence); ``--snapshot-entries``: snapshot and compact the log that often;
``--power-ledger``: before each fsync of the log, record in ``<group>.ledger`` how long each
segment file is (what that fsync makes durable), so the harness can simulate a power loss after
a kill -9 by cutting every segment back to it (``cluster.power_loss``); ``--lying-fsync``: the
same for a disk whose fsync lies (a broken server, to prove the harness catches what it causes).
Stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from jetpy.server.app import Server
from jetpy.server.flags import parse_args
from jetpy.server.logs import setup_logging
from jetpy.server.nrg import GroupConfig
from jetpy.store.raftlog import StoreJob

from .kvservice import KVMachine, KVService

log = logging.getLogger("jetpy.server")
LEDGER_SUFFIX = ".ledger"


def install_lying_fsync(every: float = 1.0) -> None:
    """A broken disk, for proving the harness: fsync returns at once, and what was written lands
    on the disk only once every ``every`` seconds (nats-server's ``sync_interval`` behaves so,
    its default being 2 minutes). The ledger records only those landings, so a power loss takes
    whatever was acknowledged since the last one."""
    run = StoreJob.run
    landed: dict[Path, float] = {}

    def lying_run(job: StoreJob) -> None:
        if job.kind == "sync":
            d = job._path
            now = time.monotonic()
            if now - landed.get(d, 0.0) >= every:
                landed[d] = now
                sizes = {p.name: p.stat().st_size for p in d.glob("*.rlog")}
                ledger = d.with_name(d.name + LEDGER_SUFFIX)
                tmp = ledger.with_name(ledger.name + ".tmp")
                tmp.write_text(json.dumps(sizes))
                os.replace(tmp, ledger)
        run(job)

    StoreJob.run = lying_run  # type: ignore[method-assign,assignment]


def install_power_ledger() -> None:
    """Record, before every sync job runs, each segment's length (see the module doc). Nothing
    is appended while a sync runs (the group persists its next batch only after it), so these
    are exactly the bytes that sync covers; recording them before rather than after keeps every
    simulated loss to bytes a real power loss could lose too."""
    run = StoreJob.run

    def recording_run(job: StoreJob) -> None:
        if job.kind == "sync":
            d = job._path
            sizes = {p.name: p.stat().st_size for p in d.glob("*.rlog")}
            ledger = d.with_name(d.name + LEDGER_SUFFIX)
            tmp = ledger.with_name(ledger.name + ".tmp")
            tmp.write_text(json.dumps(sizes))
            os.replace(tmp, ledger)
        run(job)

    StoreJob.run = recording_run  # type: ignore[method-assign,assignment]


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
