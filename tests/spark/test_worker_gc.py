"""A Python worker's collections after its reads: Spark's daemon runs a full ``gc.collect()``
after every task of a reused worker, which with pyspark, pyarrow and numpy loaded walks tens of
thousands of objects (about 40 ms a task). A worker's reads freeze what it imported, so later
collections walk only what later tasks made; and they keep the worker's C heap for the next
task's large buffers (``jetpy.heap``). Checked in a fresh process reading from a real
server through the reader's ``partitions`` and ``read``, as Spark's planner and workers do."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import Proc
from heap_probe import CHURN

from .conftest import make_stream

pytestmark = pytest.mark.spark

SCRIPT = CHURN + textwrap.dedent(
    """
    import gc, json, pickle, sys
    from jetpy.spark.options import parse_source
    from jetpy.spark.reader import JetStreamBatchReader

    reader = JetStreamBatchReader(parse_source({"servers": sys.argv[1], "stream": sys.argv[2]}, False))
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions()]

    def task(p):
        rows = sum(b.num_rows for b in reader.read(p))
        gc.collect()  # what Spark's daemon does after each task
        return rows, gc.get_freeze_count(), len(gc.get_objects())

    before = (gc.get_freeze_count(), len(gc.get_objects()))
    first = task(parts[0])
    later = [task(p) for p in parts[1:] + parts]
    print(json.dumps({"before": before, "first": first, "later": later, "faults": churn_faults()}))
    """
)


def test_reads_freeze_what_the_worker_imported(js_server: Proc) -> None:
    make_stream(js_server.url, "GCWORKER", ["gcw.>"], 400, lambda i: f"gcw.{i % 4}")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, js_server.url, "GCWORKER"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    res = json.loads(out.stdout)
    frozen0, walked0 = res["before"]
    rows, frozen1, _ = res["first"]
    assert frozen0 == 0 and walked0 > 20_000, res  # pyspark, pyarrow, numpy: all walked
    assert frozen1 > 20_000, res  # the first read froze what the worker had imported
    later = res["later"]
    # whatever it imported as it went (the decoder's modules), the next read settled too
    assert later[0][1] >= frozen1, res
    assert all(frozen <= later[0][1] for _, frozen, _ in later[1:]), res  # nothing more frozen
    assert all(walked < 2_000 for _, _, walked in later), res
    assert rows + sum(r for r, _, _ in later) == 800, res  # every message, read twice
    # its reads kept the worker's C heap (jetpy.heap): 200 MiB made and dropped, pages reused
    assert res["faults"] < 2_000, res
