"""Entry point of the benchmark engine: options and connection settings in, one result out.

Owns only the dispatch between the core and JetStream choreographies; everything measurable lives
in ``core`` and ``jetstream``, and presentation in ``report`` and ``progress``.
"""

from __future__ import annotations

from jetpy.bench.clients import Counters, make_payload
from jetpy.bench.core import run_core
from jetpy.bench.jetstream import run_jetstream
from jetpy.bench.options import BenchOptions, ConnectSettings
from jetpy.bench.stats import BenchResult

__all__ = ["run"]


async def run(opts: BenchOptions, settings: ConnectSettings, counters: Counters | None = None) -> BenchResult:
    """Run one benchmark against the server in ``settings``. Raises ``BenchError`` if it cannot run."""
    counters = counters if counters is not None else Counters()
    payload = make_payload(opts.size)
    if opts.js:
        return await run_jetstream(opts, settings, counters, payload)
    return await run_core(opts, settings, counters, payload)
