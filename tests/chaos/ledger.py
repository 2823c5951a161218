"""A server's Raft logs with a power ledger: before each fsync of a log, each segment file's
length (what that fsync makes durable) is recorded in ``<log directory>.ledger``, so the harness
can simulate a power loss after a kill -9 by cutting every segment back to it
(``cluster.ChaosCluster.power_loss``). Also a disk whose fsync lies, for proving the harness.

    python -m chaos.ledger [--lying-fsync] <module> <the module's arguments>

(from ``tests/``) runs ``python -m <module> <arguments>`` with the ledger installed: every Raft
log of that server process keeps one (the test service's group, JetStream's meta, stream and
consumer groups alike). Only the Raft logs: a JetStream stream's own store is not covered (see
README's fault harness section).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from pathlib import Path

from jetpy.store.raftlog import StoreJob

LEDGER_SUFFIX = ".ledger"  # next to a Raft log's directory: its segments' lengths at the last fsync


def _record(d: Path) -> None:
    sizes = {p.name: p.stat().st_size for p in d.glob("*.rlog")}
    ledger = d.with_name(d.name + LEDGER_SUFFIX)
    tmp = ledger.with_name(ledger.name + ".tmp")
    tmp.write_text(json.dumps(sizes))
    os.replace(tmp, ledger)


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
                _record(d)
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
            _record(job._path)
        run(job)

    StoreJob.run = recording_run  # type: ignore[method-assign,assignment]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    lying = bool(args) and args[0] == "--lying-fsync"
    if lying:
        args = args[1:]
    if not args:
        print("usage: python -m chaos.ledger [--lying-fsync] <module> <arguments>", file=sys.stderr)
        return 2
    if lying:
        install_lying_fsync()
    else:
        install_power_ledger()
    sys.argv = [args[0], *args[1:]]
    runpy.run_module(args[0], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
