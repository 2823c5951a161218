"""nats CLI contexts: the connection settings ``nats context save`` writes, read by jetpy.

Owns where contexts live (``$XDG_CONFIG_HOME/nats/context/<name>.json``, by default under
``~/.config``), which one is selected (``--context NAME`` or a path to a context file, else
``NATS_CONTEXT``, else the name in ``nats/context.txt`` that ``nats context select`` writes), and
what jetpy takes from one: ``url``, ``user``, ``password``, ``token`` and ``creds``. A context
only fills what neither a flag nor an environment variable (``NATS_URL``...) gave, as with the
nats CLI. Must not know: how a connection is made.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from jetpy.cli.output import usage

__all__ = ["Context", "context_dir", "load_context"]


@dataclass(frozen=True, slots=True)
class Context:
    name: str
    url: str | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds: str | None = None


def context_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nats"


def _selected() -> str | None:
    env = os.environ.get("NATS_CONTEXT")
    if env:
        return env
    try:
        name = (context_dir() / "context.txt").read_text().strip()
    except OSError:
        return None
    return name or None


def load_context(flag: str | None) -> Context | None:
    """The context named by ``--context`` (a name or a file path), else the selected one; None
    when none is selected. A named context that cannot be read is a usage error."""
    chosen = flag or _selected()
    if not chosen:
        return None
    if chosen.endswith(".json") or os.sep in chosen:
        path = Path(chosen).expanduser()
    else:
        path = context_dir() / "context" / f"{chosen}.json"
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        usage(f"nats context {chosen!r}: cannot read {path}: {exc.strerror or exc}")
    except ValueError as exc:
        usage(f"nats context {chosen!r}: {path} is not valid JSON: {exc}")
    if not isinstance(doc, dict):
        usage(f"nats context {chosen!r}: {path} is not a JSON object")

    def text(key: str) -> str | None:
        value = doc.get(key)
        return str(value) if value else None

    creds = text("creds")
    return Context(
        name=path.stem,
        url=text("url"),
        user=text("user"),
        password=text("password"),
        token=text("token"),
        creds=str(Path(creds).expanduser()) if creds else None,
    )
