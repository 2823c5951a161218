"""Helpers every command group shares: reading the global options, options typed the nats CLI's
way (sizes, durations), loading JSON config files, confirmations, and config diffs.

Owns: ``options(ctx)``, ``parse_or_usage`` (a bad value is a usage error, exit 2), ``load_json_config``,
``confirm`` (destructive verbs need ``--force`` when nobody can be asked), and ``config_diff``, the
field-by-field comparison `stream edit` and `apply` print.
Must not know: nats-py or any particular API.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import typer

from jetpy.cli.connect import ConnectOptions
from jetpy.cli.output import emit_json, info, usage

__all__ = [
    "config_diff",
    "confirm",
    "format_value",
    "listed_elsewhere",
    "load_json_config",
    "options",
    "parse_or_usage",
]

T = TypeVar("T")


def options(ctx: typer.Context) -> ConnectOptions:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, ConnectOptions) else ConnectOptions()


def parse_or_usage(parse: Callable[[str], T], value: str, flag: str) -> T:
    try:
        return parse(value)
    except ValueError as exc:
        usage(f"{flag}: {exc}")


def listed_elsewhere(items: list[Any], json_out: bool, empty: str) -> bool:
    """For a list command: print ``items`` as JSON (``--json``) or ``empty`` when there are none,
    and say so (True); False when the caller is to print its table."""
    if json_out:
        emit_json(items)
        return True
    if not items:
        info(empty)
        return True
    return False


def load_json_config(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from ``path``; anything else is a usage error naming the file."""
    try:
        text = path.read_text()
    except OSError as exc:
        usage(f"cannot read {what} config {str(path)!r}: {exc.strerror or exc}")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        usage(f"{path}: not valid JSON: {exc}")
    if not isinstance(doc, dict):
        usage(f"{path}: a {what} config must be a JSON object")
    # `nats stream info --json` output can be fed back: take its config
    config = doc.get("config")
    if isinstance(config, dict) and "state" in doc:
        return config
    return doc


def confirm(question: str, force: bool) -> None:
    """Go on if ``--force`` or the user says yes; without a terminal, refuse (exit 2)."""
    if force:
        return
    if not sys.stdin.isatty():
        usage(f"{question.rstrip('?')}: refusing without --force (no terminal to ask)")
    if not typer.confirm(question, default=False):
        usage("cancelled")


def format_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(", ", ": "), sort_keys=True)


def config_diff(current: Mapping[str, Any], desired: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(field, current, desired)`` for every field ``desired`` sets to a different value."""
    out = []
    for key in sorted(desired):
        want = desired[key]
        have = current.get(key)
        if _normal(have) != _normal(want):
            out.append((key, have, want))
    return out


def _normal(v: Any) -> Any:
    """Absent, null, false, 0, "" and [] are what the server omits for "not set"."""
    if v in (None, False, 0, "", [], {}):
        return None
    if isinstance(v, list):
        return [_normal(x) for x in v]
    if isinstance(v, dict):
        return {k: _normal(x) for k, x in v.items() if _normal(x) is not None}
    return v
