"""The ``jetpy bench`` command: its flags, and turning them into a run and a report.

Owns the command-line surface of the benchmark (modelled on ``nats bench``) and exit codes:
0 complete, 1 ran but not every message was accounted for, 2 usage error or could not run,
130 interrupted. The connection settings come from the CLI's global options through ``ctx.obj``
(anything satisfying ``ConnectSettings``), so this module never imports the CLI. The engine is
imported when the command runs, so other commands do not pay for nats-py and asyncio.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from typing import Annotated, cast

import typer

from jetpy.bench.options import (
    DEFAULT_BATCH,
    DEFAULT_MSGS,
    DEFAULT_STREAM,
    DEFAULT_TIMEOUT,
    DEFAULT_WINDOW,
    AckKind,
    BenchOptions,
    ConnectSettings,
    ConsumerKind,
    OptionsError,
    StorageKind,
    parse_size,
)

__all__ = ["bench"]

EXIT_INCOMPLETE = 1
EXIT_CANNOT_RUN = 2
EXIT_INTERRUPTED = 130


@dataclass(frozen=True, slots=True)
class _EnvSettings:
    """Used when the command runs without the CLI's global options (as nats tools: NATS_URL)."""

    server: str = field(default_factory=lambda: os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    user: str | None = None
    password: str | None = None
    creds: str | None = None


def bench(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="Subject to publish to (the stream's subject with --js).")],
    pub: Annotated[
        int, typer.Option("--pub", min=0, help="Publishers (requesters with --request), one connection each.")
    ] = 1,
    sub: Annotated[
        int,
        typer.Option(
            "--sub",
            min=0,
            help="Subscribers, each receiving every message (repliers with --request; consumers with --js).",
        ),
    ] = 0,
    msgs: Annotated[
        int, typer.Option("--msgs", min=1, help="Messages in total, split across publishers.")
    ] = DEFAULT_MSGS,
    size: Annotated[str, typer.Option("--size", help="Payload size: 128, 1KB, 1MB.")] = "128",
    request: Annotated[
        bool, typer.Option("--request", help="Request/reply latency (p50/p90/p99/max) instead of pub/sub.")
    ] = False,
    js: Annotated[
        bool,
        typer.Option("--js", help="JetStream: publish into a stream created for the run and deleted after."),
    ] = False,
    storage: Annotated[
        StorageKind, typer.Option("--storage", case_sensitive=False, help="Stream storage with --js.")
    ] = StorageKind.FILE,
    stream: Annotated[
        str, typer.Option("--stream", help="Stream --js creates (an existing one of that name is replaced).")
    ] = DEFAULT_STREAM,
    pull: Annotated[
        bool, typer.Option("--pull", help="--js consumers share one durable pull consumer.")
    ] = False,
    push: Annotated[
        bool, typer.Option("--push", help="--js consumers each get their own push consumer (default).")
    ] = False,
    ack: Annotated[
        AckKind, typer.Option("--ack", case_sensitive=False, help="Ack policy of --js consumers.")
    ] = AckKind.EXPLICIT,
    batch: Annotated[
        int, typer.Option("--batch", min=1, help="Messages per fetch with --pull.")
    ] = DEFAULT_BATCH,
    window: Annotated[
        int, typer.Option("--window", min=1, help="Un-acked JetStream publishes in flight per publisher.")
    ] = DEFAULT_WINDOW,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.001, help="Seconds the measured phase may last at most.")
    ] = DEFAULT_TIMEOUT,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Never show the progress bar.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as one JSON line.")] = False,
) -> None:
    """Measure a server: publish, pub/sub, request/reply or JetStream throughput (like `nats bench`)."""
    if pull and push:
        raise typer.BadParameter("--pull and --push are exclusive", param_hint="--pull/--push")
    if (pull or push) and not js:
        raise typer.BadParameter("--pull/--push choose the consumer of --js", param_hint="--pull/--push")
    try:
        opts = BenchOptions(
            subject=subject,
            pubs=pub,
            subs=sub,
            msgs=msgs,
            size=parse_size(size),
            request=request,
            js=js,
            storage=storage,
            stream=stream,
            consumer=ConsumerKind.PULL if pull else ConsumerKind.PUSH,
            ack=ack,
            batch=batch,
            window=window,
            timeout=timeout,
        )
    except OptionsError as exc:
        raise typer.BadParameter(str(exc)) from exc
    settings = cast(ConnectSettings, ctx.obj) if ctx.obj is not None else _EnvSettings()

    # Imported here: the engine pulls in nats-py and asyncio machinery other commands do not need.
    from jetpy.bench.clients import BenchError, Counters
    from jetpy.bench.progress import run_with_progress
    from jetpy.bench.report import describe, format_report
    from jetpy.bench.runner import run

    if not json_output:
        typer.echo(describe(opts, settings.server))
    counters = Counters()
    show_progress = not no_progress and sys.stderr.isatty()
    try:
        result = asyncio.run(
            run_with_progress(run(opts, settings, counters), counters, enabled=show_progress)
        )
    except BenchError as exc:
        typer.echo(f"jetpy bench: {exc}", err=True)
        raise typer.Exit(EXIT_CANNOT_RUN) from exc
    except KeyboardInterrupt as exc:
        typer.echo("jetpy bench: interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from exc
    typer.echo(result.to_json() if json_output else format_report(result))
    raise typer.Exit(0 if result.complete else EXIT_INCOMPLETE)
