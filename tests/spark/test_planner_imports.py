"""What Spark's planner processes import: Spark starts a new Python process for each streaming
query's planner (and daemons for its workers and for planning batch reads), which unpickles the
data source and calls the reader's planning methods. The decoders of the read paths and the
server's protocol package are left to the tasks that read; pyspark itself is imported from the
installed package, with its bytecode, not from the source-only ``pyspark.zip`` Spark puts first
on ``PYTHONPATH``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

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


WHERE = "import json, sys, pyspark; print(json.dumps([pyspark.__file__, sys.path]))"


def _where(pythonpath: str) -> tuple[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    out = subprocess.run(
        [sys.executable, "-c", WHERE], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    origin, path = json.loads(out.stdout)
    return origin, path


def _installed_zip() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"


def test_spark_processes_import_the_installed_pyspark_not_its_zip() -> None:
    zip_ = _installed_zip()
    if not zip_.is_file():
        pytest.skip("this PySpark ships no pyspark.zip")
    origin, path = _where(str(zip_))  # as Spark starts its Python processes
    assert ".zip" not in origin and origin.endswith(os.path.join("pyspark", "__init__.py")), origin
    assert str(zip_) not in path


def test_a_zip_of_another_spark_install_is_left_alone(tmp_path: Path) -> None:
    zip_ = _installed_zip()
    if not zip_.is_file():
        pytest.skip("this PySpark ships no pyspark.zip")
    other = tmp_path / "spark" / "python" / "lib" / "pyspark.zip"  # a SPARK_HOME of its own
    other.parent.mkdir(parents=True)
    shutil.copy(zip_, other)
    origin, path = _where(str(other))
    assert str(other) in path
    assert origin.startswith(str(other)), origin
