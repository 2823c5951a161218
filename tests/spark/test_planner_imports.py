"""What Spark's planner processes import of the source: Spark starts a new Python process for
each streaming query's planner (and for planning batch reads), which unpickles the data source
and calls the reader's planning methods; the decoders of the read paths and the server's
protocol package are left to the tasks that read."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

PLANNER = """
import json, sys
import jetpy.spark.datasource, jetpy.spark.reader
print(json.dumps(sorted(m for m in sys.modules if m.startswith("jetpy"))))
"""


def test_the_planner_path_leaves_the_decoders_to_the_tasks() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PLANNER], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(out.stdout))
    assert {"jetpy.spark.reader", "jetpy.spark.paths", "jetpy.spark.wire"} <= loaded, loaded
    for heavy in ("jetpy.spark.bulk", "jetpy.spark.consumer", "jetpy.protocol", "jetpy.protocol.bulk"):
        assert heavy not in loaded, loaded
