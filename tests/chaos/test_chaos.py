"""A short slice of the fault harness in every test run (``make chaos`` runs the long ones):
three and five servers under every fault the nemesis knows, nothing acknowledged lost, no
duplicates, the registers linearizable, the replicas identical; and the harness itself proven by
servers whose fsync lies: the same faults must then show the acknowledged writes they lose."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .nemesis import FAULTS
from .run import run

SECONDS = float(os.environ.get("JETPY_CHAOS_SLICE", "10"))  # seconds of faults per run

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize(("size", "seed"), [(3, 11), (5, 12)])
async def test_every_fault_loses_nothing_acknowledged(tmp_path: Path, size: int, seed: int) -> None:
    result = await run(tmp_path, size, SECONDS, seed, FAULTS)
    print(result.text)
    r = result.report
    assert r["appends"]["acked"] > 0 and r["operations"]["register"]["ok"] > 0
    assert result.ok, result.text


async def test_the_harness_catches_a_disk_whose_fsync_lies(tmp_path: Path) -> None:
    # (no snapshots: a snapshot is written with a real fsync and would keep what the log lost)
    result = await run(tmp_path, 3, 8, 13, ("power-loss-all",), lying_fsync=True, snapshot_entries=0)
    print(result.text)
    r = result.report
    assert not result.ok
    assert r["appends"]["lost"] or any(v["linearizable"] is False for v in r["registers"]) or r["stuck"]
