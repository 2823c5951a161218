"""What `kv` and `object` share about their buckets: creating the bucket's stream and showing it.

Both are client conventions over a stream (``KV_<bucket>``, ``OBJ_<bucket>``); the verbs differ
in the stream configuration and the labels, not in how the stream is created or reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from jetpy.cli.common import options
from jetpy.cli.connect import ApiFailure, Session, run
from jetpy.cli.output import CliError, emit_json, info, print_sections

__all__ = ["create_bucket", "show_bucket"]

StatusPairs = Callable[[str, dict[str, Any]], Any]


def create_bucket(
    ctx: typer.Context, bucket: str, cfg: dict[str, Any], label: str, status: StatusPairs, json_out: bool
) -> None:
    """Create the bucket's stream from ``cfg`` and print what the server made of it."""

    async def go(s: Session) -> dict[str, Any]:
        return await s.api(
            f"STREAM.CREATE.{cfg['name']}", cfg, what=f"could not create {label.lower()} {bucket}"
        )

    si = run(options(ctx), go)
    if json_out:
        emit_json(si)
    else:
        info(f"{label} {bucket} was created\n")
        print_sections([(label, status(bucket, si))])


def show_bucket(
    ctx: typer.Context, bucket: str, stream: str, label: str, status: StatusPairs, json_out: bool
) -> None:
    """Print the bucket's stream info (404 becomes "bucket not found")."""

    async def go(s: Session) -> dict[str, Any]:
        try:
            return await s.api(f"STREAM.INFO.{stream}")
        except ApiFailure as exc:
            if exc.code == 404:
                raise CliError(f"{label.lower()} {bucket!r} not found", err_code=exc.err_code) from exc
            raise

    si = run(options(ctx), go)
    if json_out:
        emit_json(si)
    else:
        print_sections([(label, status(bucket, si))])
