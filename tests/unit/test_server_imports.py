"""The server package's own import graph: only the entry points import ``app`` (no import loops
anywhere in ``src/`` is tests/test_house.py's).

import-linter sees runtime imports only (the project excludes those under TYPE_CHECKING); an
import made for typing alone is still an arrow back up, so this reads every ``import`` in every
module of ``jetpy.server``, wherever it stands (module top, TYPE_CHECKING blocks, functions).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import jetpy.server

SERVER_DIR = Path(jetpy.server.__file__).parent
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
ENTRY_POINTS = {"jetpy.server.main", "jetpy.server.__main__"}
ROOT = "jetpy.server.app"


def module_name(path: Path) -> str:
    return "jetpy.server" if path.stem == "__init__" else f"jetpy.server.{path.stem}"


def is_server_module(name: str) -> bool:
    return name.count(".") == 2 and (SERVER_DIR / f"{name.rsplit('.', 1)[1]}.py").exists()


def server_imports(path: Path) -> set[str]:
    """Every ``jetpy.server`` module that ``path`` imports, however and wherever it does."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from jetpy.server import x" may name a module x
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(n for n in names if n.startswith("jetpy.server.") and is_server_module(n))
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): server_imports(p) - {module_name(p)} for p in sorted(SERVER_DIR.glob("*.py"))}


def function_level_imports(path: Path) -> list[str]:
    """``jetpy.server`` imports made inside functions (a way to hide a loop)."""
    tree = ast.parse(path.read_text(), str(path))
    hidden: list[str] = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jetpy.server"):
                    hidden.append(f"{fn.name}: {node.module}")
    return hidden


def test_only_the_entry_points_import_the_composition_root() -> None:
    importers = {name for name, deps in graph().items() if ROOT in deps}
    assert importers <= ENTRY_POINTS, f"{sorted(importers - ENTRY_POINTS)} import {ROOT}"


def test_the_composition_root_imports_its_parts_at_module_top() -> None:
    assert function_level_imports(SERVER_DIR / "app.py") == []


def test_the_import_linter_contract_names_every_other_server_module() -> None:
    config = tomllib.loads(PYPROJECT.read_text())
    contract = next(
        c for c in config["tool"]["importlinter"]["contracts"] if c.get("forbidden_modules") == [ROOT]
    )
    others = set(graph()) - ENTRY_POINTS - {ROOT, "jetpy.server"}
    # subpackages are named whole (a package stands for every module in it)
    others |= {f"jetpy.server.{p.name}" for p in SERVER_DIR.iterdir() if (p / "__init__.py").exists()}
    assert set(contract["source_modules"]) == others
