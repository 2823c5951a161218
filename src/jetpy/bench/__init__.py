"""jetpy.bench: `jetpy bench`, a benchmark client of any NATS server over the wire (nats-py only).

Modules: ``options`` (what a run is asked to do), ``stats`` (what it measured), ``clients``
(connections, counters, the fast publisher), ``core`` and ``jetstream`` (the choreographies),
``runner`` (dispatch), ``progress`` and ``report`` (presentation), ``command`` (the typer command
the CLI registers). It must not import jetpy.server, jetpy.store or jetpy.jetstream (import-linter).

The engine (``run``, ``BenchError``) is loaded on first use so that importing the command, which
every CLI start does, does not import nats-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jetpy.bench.options import BenchOptions, ConnectSettings, Mode, OptionsError
from jetpy.bench.stats import BenchResult

__all__ = ["BenchError", "BenchOptions", "BenchResult", "ConnectSettings", "Mode", "OptionsError", "run"]

if TYPE_CHECKING:
    from jetpy.bench.clients import BenchError
    from jetpy.bench.runner import run


def __getattr__(name: str) -> Any:
    if name == "run":
        from jetpy.bench.runner import run

        return run
    if name == "BenchError":
        from jetpy.bench.clients import BenchError

        return BenchError
    raise AttributeError(name)
