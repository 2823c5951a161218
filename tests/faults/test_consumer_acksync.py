"""kill -9 under consume with AckSync: a confirmed ack is never redelivered, nothing is skipped.

A durable pull consumer fetches batches and acks every message with AckSync (nats-py's
``ack_sync``, the double ack), many at once, while jetpy-server runs as a process on a file store;
the server is killed with SIGKILL at a random moment, restarted, and the consumer drained. Each
run reports exactly which confirmed acks came back (expected: none) and which messages never
acknowledged were skipped (expected: none). ``JETPY_FAULT_RUNS`` sets the number of runs
(``make faults-consumer`` makes many; ``make test`` two).
"""

from __future__ import annotations

import random
import signal
from pathlib import Path

from faults.consumer_faults import AckRun, consume_until_killed, drain, fault_runs, jetpy, publish

MESSAGES = 30_000


async def test_kill9_never_redelivers_a_confirmed_ack_nor_skips(tmp_path: Path) -> None:
    runs = fault_runs(2)
    reports = []
    for i in range(runs):
        rng = random.Random(1000 + i)
        store = tmp_path / f"store{i}"
        p = jetpy(store, tmp_path / f"{i}-a.log")
        run = AckRun()
        try:
            await publish(p, MESSAGES)
            await consume_until_killed(p, run, rng, rng.uniform(0.3, 1.2))
            p = jetpy(store, tmp_path / f"{i}-b.log")
            run.after = await drain(p)
        finally:
            p.stop(signal.SIGKILL)
        assert run.confirmed, "the kill came before any ack was confirmed: the run checked nothing"
        reports.append(run.report(MESSAGES))
        assert not run.redelivered_confirmed() and not run.skipped(MESSAGES), "\n".join(reports)
    print("\n".join(f"run {i}: {r}" for i, r in enumerate(reports)))
