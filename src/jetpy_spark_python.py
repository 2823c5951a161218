"""Spark's Python workers run the job's own interpreter, unless the user chose one.

Spark starts its Python workers (and the driver-side process that looks data sources up) with
``spark.pyspark.python``, else ``PYSPARK_PYTHON``, else ``python3`` from ``PATH``. A job started
as ``.venv/bin/python job.py`` without activating the virtual environment would get workers
from the system's Python, without pyspark or jetpy's data source, and fail with
``DATA_SOURCE_NOT_FOUND``. So jetpy installs ``jetpy-spark-python.pth``: at every interpreter
start it calls :func:`install`, which waits (one import hook) until the process imports pyspark
and then sets ``PYSPARK_PYTHON`` to ``sys.executable`` if it is unset. A choice the user made
wins: ``PYSPARK_PYTHON`` already set, or ``spark.pyspark.python`` (Spark ranks the setting
above the variable).

It runs in every interpreter of the environment, so it is a top-level module that imports
nothing but ``os`` and ``sys`` (importing the ``jetpy`` package would cost each start ~8 ms).
"""

from __future__ import annotations

import os
import sys

__all__ = ["install", "use_this_python"]


def use_this_python() -> None:
    """``PYSPARK_PYTHON`` = this interpreter, unless the user set it."""
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable


class OnPySpark:
    """A meta path finder that finds nothing: it notices the first import of pyspark."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pyspark":
            use_this_python()
            if self in sys.meta_path:
                sys.meta_path.remove(self)  # type: ignore[comparison-overlap]


def install() -> None:
    """Called at interpreter start (``jetpy-spark-python.pth``; twice where ``lib64`` links to
    ``lib``, so it installs one hook at most)."""
    if "pyspark" in sys.modules:
        use_this_python()
    elif not any(type(f).__name__ == "OnPySpark" for f in sys.meta_path):
        sys.meta_path.insert(0, OnPySpark())  # type: ignore[arg-type]
