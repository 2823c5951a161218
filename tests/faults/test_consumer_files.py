"""Bit flips, zeroed ranges, truncation and deletion of a durable consumer's files on a stopped
server, then a restart: each run reports exactly what the consumer redelivered or skipped.

The store: stream ``F`` with 2,000 messages, durable ``D`` that AckSync'ed the first 1,000 and
holds 200 more unacknowledged, durable ``E`` that took nothing; stopped cleanly. One of D's
files is damaged at random (seeded), jetpy-server restarts on it as a process, and:

* ``o.dat`` damaged or gone: the log names the consumer, the file and the reason; D restarts
  from its stated position (stream sequence 1, deliver policy all): nothing is skipped, the
  1,000 confirmed acks are delivered again (the state recording them is gone: counted and
  reported, not a failure);
* ``meta.dat`` damaged or gone: D is offline (CONSUMER.INFO answers 10195 naming the file), its
  files untouched, E delivers all 2,000;
* a change that left the bytes as they were (zeros over zeros): D carries on exactly, no
  confirmed ack comes back.

``JETPY_FAULT_RUNS`` sets the runs per fault kind (``make faults-consumer``: 10; ``make test``: 1).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
from pathlib import Path

import nats
import pytest

from faults.consumer_faults import (
    DURABLE,
    STREAM,
    AckRun,
    Damage,
    ack_some,
    damage,
    drain,
    fault_runs,
    jetpy,
    publish,
)

MESSAGES = 2_000
CONFIRMED = 1_000
UNACKED = 200
KINDS = ("flip", "zero", "truncate", "delete")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[int]]:
    """The stopped store every run copies, and D's confirmed acks."""
    import asyncio

    root = tmp_path_factory.mktemp("consumer-files")
    store = root / "store"

    async def build() -> set[int]:
        p = jetpy(store, root / "build.log")
        try:
            await publish(p, MESSAGES)
            nc = await nats.connect(p.url)
            js = nc.jetstream()
            await js.add_consumer(STREAM, durable_name="E", ack_policy="explicit")
            await nc.close()
            return await ack_some(p, CONFIRMED, UNACKED)
        finally:
            assert p.stop(signal.SIGTERM) == 0

    return store, asyncio.run(build())


def consumer_dir(store: Path, name: str = DURABLE) -> Path:
    return store / "jetstream" / "$G" / "streams" / STREAM / "obs" / name


async def _state_run(base: tuple[Path, set[int]], tmp: Path, kind: str, seed: int) -> tuple[Damage, AckRun]:
    src, confirmed = base
    store = tmp / f"{kind}-{seed}"
    shutil.copytree(src, store)
    hit = damage(consumer_dir(store) / "o.dat", kind, random.Random(seed))
    p = jetpy(store, tmp / f"{kind}-{seed}.log")
    run = AckRun(confirmed=set(confirmed), sent=set(confirmed))
    try:
        run.after = await drain(p)
    finally:
        p.stop(signal.SIGKILL)
    log = p.log()
    if hit.changed:
        assert f"consumer '{STREAM} > {DURABLE}' state file " in log, log
        assert "restarting from stream sequence 1 (deliver policy all)" in log, log
    else:
        assert "state file" not in log, log
    return hit, run


async def test_damaged_or_deleted_state_file_never_skips(base: tuple[Path, set[int]], tmp_path: Path) -> None:
    reports = []
    for kind in KINDS:
        for i in range(fault_runs(1) if kind != "delete" else 1):
            hit, run = await _state_run(base, tmp_path, kind, 7000 + 100 * KINDS.index(kind) + i)
            reports.append(f"o.dat {hit.kind} {hit.detail} (changed: {hit.changed}): {run.report(MESSAGES)}")
            assert not run.skipped(MESSAGES), "\n".join(reports)
            if hit.changed:  # the state is gone: D starts over, every confirmed ack comes again
                assert run.redelivered_confirmed() == sorted(run.confirmed), "\n".join(reports)
            else:
                assert not run.redelivered_confirmed(), "\n".join(reports)
    print("\n".join(reports))


async def test_damaged_or_deleted_metadata_takes_only_that_consumer_offline(
    base: tuple[Path, set[int]], tmp_path: Path
) -> None:
    src, _ = base
    reports = []
    for kind in KINDS:
        for i in range(fault_runs(1) if kind != "delete" else 1):
            store = tmp_path / f"meta-{kind}-{i}"
            shutil.copytree(src, store)
            hit = damage(
                consumer_dir(store) / "meta.dat", kind, random.Random(8000 + 100 * KINDS.index(kind) + i)
            )
            files = {f.name: f.read_bytes() for f in consumer_dir(store).iterdir()}
            p = jetpy(store, tmp_path / f"meta-{kind}-{i}.log")
            try:
                nc = await nats.connect(p.url)
                reply = json.loads((await nc.request(f"$JS.API.CONSUMER.INFO.{STREAM}.{DURABLE}", b"")).data)
                await nc.close()
                after_e = await drain(p, "E")
            finally:
                p.stop(signal.SIGKILL)
            what = f"meta.dat {hit.kind} {hit.detail} (changed: {hit.changed})"
            if hit.changed:
                assert reply["error"]["err_code"] == 10195, (what, reply)
                assert "meta.dat" in reply["error"]["description"], (what, reply)
                assert f"consumer '{STREAM} > {DURABLE}' is offline: metadata file" in p.log()
                # nothing of D was touched
                assert {f.name: f.read_bytes() for f in consumer_dir(store).iterdir()} == files
            else:
                assert reply["name"] == DURABLE, (what, reply)
            reports.append(
                f"{what}: D {'offline' if 'error' in reply else 'served'}, E delivered {len(after_e)}"
            )
            assert after_e == set(range(1, MESSAGES + 1)), "\n".join(reports)
    print("\n".join(reports))
