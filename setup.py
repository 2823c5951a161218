"""Only what pyproject.toml cannot say: the wheel carries ``jetpy-spark-python.pth`` at its
root (next to the packages), which points Spark's Python workers at the job's interpreter
(``jetpy_spark_python.py``). Editable installs skip such files: ``make`` copies it into
the development environment."""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "jetpy-spark-python.pth"


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(os.path.join("src", PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


setup(cmdclass={"build_py": BuildPy})
