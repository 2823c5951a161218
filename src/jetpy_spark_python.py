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

Spark also starts each of its Python processes (the workers' daemon, the planner of every
streaming query) with ``<SPARK_HOME>/python/lib/pyspark.zip`` first on ``PYTHONPATH``. With
PySpark installed from PyPI that zip lies inside the installed package and holds sources only,
so each process compiled all of pyspark it imported again (zipimport caches no bytecode): a
streaming query's planner spent about 0.85 s of CPU starting instead of 0.3 s. When the zip is
the one inside the installed, importable pyspark package (the same files), :func:`install`
takes it off ``sys.path`` and the process imports that package, with its cached bytecode. A
Spark installed elsewhere (``SPARK_HOME`` with its own zip) is left as it is.

It runs in every interpreter of the environment, so it is a top-level module that imports
nothing but ``os`` and ``sys`` (importing the ``jetpy`` package would cost each start ~8 ms).
"""

from __future__ import annotations

import os
import sys

__all__ = ["install", "prefer_installed_pyspark", "use_this_python"]


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


def prefer_installed_pyspark() -> None:
    """Take Spark's ``pyspark.zip`` off ``sys.path`` where it is the one inside the installed
    pyspark package (``<dir>/pyspark/python/lib/pyspark.zip``, ``<dir>/pyspark/__init__.py``, and
    ``<dir>`` on ``sys.path``): that package then imports with its bytecode cached."""
    zips = [p for p in sys.path if p.endswith("pyspark.zip")]
    if not zips or "pyspark" in sys.modules:
        return  # every interpreter of the environment runs this: nothing more unless needed
    on_path = {os.path.realpath(p) for p in sys.path if p}
    for entry in zips:
        lib = os.path.dirname(os.path.realpath(entry))
        package = os.path.dirname(os.path.dirname(lib))
        if (
            os.path.basename(entry) == "pyspark.zip"
            and lib == os.path.join(package, "python", "lib")
            and os.path.basename(package) == "pyspark"
            and os.path.isfile(os.path.join(package, "__init__.py"))
            and os.path.dirname(package) in on_path
        ):
            sys.path.remove(entry)


def install() -> None:
    """Called at interpreter start (``jetpy-spark-python.pth``; twice where ``lib64`` links to
    ``lib``, so it installs one hook at most)."""
    prefer_installed_pyspark()
    if "pyspark" in sys.modules:
        use_this_python()
    elif not any(type(f).__name__ == "OnPySpark" for f in sys.meta_path):
        sys.meta_path.insert(0, OnPySpark())  # type: ignore[arg-type]
