"""A new user's first try, as a subprocess with a clean environment (no activated virtual
environment, no PYSPARK_PYTHON): `jetpy stream add` with its defaults, `jetpy pub`, then the
README's read example run as `.venv/bin/python job.py` gets rows. Without jetpy-spark-python.pth
Spark's workers would be the system's python3 and the source not found."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import Proc

pytestmark = pytest.mark.spark

BIN = Path(sys.executable).parent


def _clean_env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1", "LANG": "C.UTF-8"}


def test_readme_read_example_with_venv_python(js_server: Proc, tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    url = js_server.url

    def cli(*args: str) -> None:
        r = subprocess.run([str(BIN / "jetpy"), "-s", url, *args], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r

    cli("stream", "add", "NEWUSER", "--subjects", "newuser.>", "--defaults")
    cli("pub", "newuser.eu", "order {{Count}}", "--count", "25", "--jetstream", "--quiet")
    job = tmp_path / "job.py"
    job.write_text(
        textwrap.dedent(
            f"""
            from pyspark.sql import SparkSession

            spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            df = (spark.read.format("jetstream")
                  .option("servers", "{url}").option("stream", "NEWUSER").load())
            rows = df.orderBy("seq").collect()
            print("ROWS", len(rows), rows[0].subject, bytes(rows[-1].data).decode())
            spark.stop()
            """
        )
    )
    r = subprocess.run(
        [str(BIN / "python"), str(job)], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=240
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ROWS 25 newuser.eu order 25" in r.stdout, r.stdout
