"""A short slice of the JetStream fault harness in every test run (``make chaos`` runs the long
ones): three clustered JetStream servers under every one of the nemesis's faults, with publishes
retried until acknowledged, a durable consumer's worker and a KV bucket's compare-and-set
registers; nothing acknowledged lost or moved on any replica of the stream, no id twice, every
replica identical, the consumer never skipping a message nor delivering one again after its ack
was confirmed, the registers linearizable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .jsrun import run
from .nemesis import FAULTS

SECONDS = float(os.environ.get("JETPY_CHAOS_SLICE", "10")) * 1.5  # seconds of faults
SLICE_FAULTS = FAULTS

pytestmark = pytest.mark.timeout(300)


async def test_every_fault_on_jetstream_loses_nothing_acknowledged(tmp_path: Path) -> None:
    result = await run(tmp_path, 3, SECONDS, 21, SLICE_FAULTS)
    print(result.text)
    r = result.report
    assert r["publishes"]["acked"] > 0 and r["operations"]["register"]["ok"] > 0
    assert len(r["publishes"]["replicas"]) == 3  # every replica read back
    assert r["consumer"]["confirmed_acks"] > 0
    assert result.ok, result.text
