"""The shape of ``src/``: no import loops (counting every import, also those made only for
typing or inside functions, which import-linter's contracts here leave out) and no module over
800 lines. ``make lint`` runs the formatter check and import-linter; this keeps the rest."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
MAX_MODULE_LINES = 800  # split before this (DESIGN.md: one concept per module)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(path: Path, known: dict[str, Path], package: str) -> set[str]:
    """Every project module ``path`` imports, wherever the import stands. ``from pkg import
    name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in known:
                    found.add(sub)
                elif base in known:
                    found.add(base)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    g: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        g[name] = imports_of(path, known, package) - {name}
    return g


def test_no_import_loops_in_src() -> None:
    g = graph()
    # The root package names ``Server`` lazily (``jetpy.Server``) for embedding: it imports the
    # server only for typing and on first use, and nothing below imports the root itself.
    g["jetpy"] = set()
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            raise AssertionError("import loop: " + " -> ".join([*path[path.index(node) :], node]))
        if node in done:
            return
        for dep in sorted(g.get(node, ())):
            visit(dep, [*path, node])
        done.add(node)

    for name in g:
        visit(name, [])


def test_nothing_imports_the_root_package() -> None:
    g = graph()
    importers = sorted(name for name, deps in g.items() if "jetpy" in deps)
    assert importers == [], f"{importers} import the root package (import the module itself)"


def test_no_module_is_over_the_size_limit() -> None:
    big = {
        str(path.relative_to(SRC)): n
        for path in modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert big == {}, f"modules over {MAX_MODULE_LINES} lines: {big}"
