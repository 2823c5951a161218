"""`jetpy object ...`: add, put, get, ls, rm, info.

Owns: the Object Store bucket's stream configuration (ADR-20 conventions, shared with `apply`)
and the object verbs through nats-py's ``ObjectStore`` (chunks published under ``$O.<bucket>.C``,
metadata under ``$O.<bucket>.M``, reads through an ordered consumer with the digest checked).
Files are streamed from and to disk, never read whole into memory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.buckets import create_bucket, show_bucket
from jetpy.cli.common import confirm, options, parse_or_usage
from jetpy.cli.connect import ApiFailure, Session, run
from jetpy.cli.output import CliError, emit_json, info, print_table, usage

if TYPE_CHECKING:
    from nats.js.object_store import ObjectStore

__all__ = ["OBJ_STREAM_PREFIX", "app", "obj_stream_config"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

OBJ_STREAM_PREFIX = "OBJ_"

JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print JSON.")]
BucketArg = Annotated[str, typer.Argument(help="Bucket name.", show_default=False)]
Force = Annotated[bool, typer.Option("--force", "-f", help="Do not ask for confirmation.")]


def _bucket(name: str) -> str:
    return parse_or_usage(V.check_bucket, name, "bucket")


def obj_stream_config(
    bucket: str,
    *,
    ttl: int = 0,
    max_bytes: int = -1,
    storage: str = "file",
    replicas: int = 1,
    description: str | None = None,
) -> dict[str, Any]:
    """The stream (wire names) behind an Object Store bucket; ``ttl`` in nanoseconds."""
    if storage not in ("file", "memory"):
        raise ValueError(f"storage must be file or memory, not {storage!r}")
    cfg: dict[str, Any] = {
        "name": OBJ_STREAM_PREFIX + bucket,
        "subjects": [f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
        "retention": "limits",
        "max_age": ttl,
        "max_bytes": max_bytes,
        "storage": storage,
        "num_replicas": replicas,
        "discard": "new",
        "allow_rollup_hdrs": True,
        "allow_direct": True,
    }
    if description:
        cfg["description"] = description
    return cfg


async def _open(s: Session, bucket: str) -> ObjectStore:
    import nats.js.errors

    try:
        return await s.js.object_store(bucket)
    except nats.js.errors.NotFoundError as exc:
        raise CliError(
            f"object store bucket {bucket!r} not found", err_code=getattr(exc, "err_code", None)
        ) from exc


def _status_pairs(bucket: str, si: dict[str, Any]) -> list[tuple[str, Any]]:
    cfg, st = si.get("config") or {}, si.get("state") or {}
    return [
        ("Bucket", bucket),
        ("Description", cfg.get("description") or "-"),
        ("TTL", V.format_duration(cfg.get("max_age", 0), zero="forever")),
        ("Max Bucket Size", V.format_bytes(cfg.get("max_bytes", -1))),
        ("Storage", cfg.get("storage", "file")),
        ("Replicas", cfg.get("num_replicas", 1)),
        ("Size", V.format_bytes(st.get("bytes", 0))),
        ("Backing Stream", cfg.get("name", "")),
    ]


@app.command("add")
def add(
    ctx: typer.Context,
    bucket: BucketArg,
    ttl: Annotated[str, typer.Option("--ttl", help="How long objects live: 1d; 0 forever.")] = "0",
    max_bucket_size: Annotated[
        str, typer.Option("--max-bucket-size", help="Size limit (-1 unlimited).")
    ] = "-1",
    storage: Annotated[str, typer.Option("--storage", help="file or memory.")] = "file",
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Replicas.")] = 1,
    description: Annotated[str | None, typer.Option("--description", help="A description.")] = None,
    json_out: JsonOut = False,
) -> None:
    """Create an Object Store bucket."""
    _bucket(bucket)
    try:
        cfg = obj_stream_config(
            bucket,
            ttl=parse_or_usage(V.parse_duration, ttl, "--ttl"),
            max_bytes=parse_or_usage(V.parse_size, max_bucket_size, "--max-bucket-size"),
            storage=storage.lower(),
            replicas=replicas,
            description=description,
        )
    except ValueError as exc:
        usage(str(exc))
    create_bucket(ctx, bucket, cfg, "Object Store", _status_pairs, json_out)


@app.command("info")
def info_cmd(ctx: typer.Context, bucket: BucketArg, json_out: JsonOut = False) -> None:
    """Show an Object Store bucket's configuration and size."""
    _bucket(bucket)
    show_bucket(ctx, bucket, f"{OBJ_STREAM_PREFIX}{bucket}", "Object Store", _status_pairs, json_out)


def _info_dict(oi: Any) -> dict[str, Any]:
    return {
        "bucket": oi.bucket,
        "name": oi.name,
        "size": oi.size or 0,
        "chunks": oi.chunks or 0,
        "mtime": oi.mtime or "",
        "digest": oi.digest or "",
        "deleted": bool(oi.deleted),
        "description": oi.description or "",
    }


@app.command("put")
def put(
    ctx: typer.Context,
    bucket: BucketArg,
    file: Annotated[Path, typer.Argument(help="File to store ('-' for stdin).", show_default=False)],
    name: Annotated[
        str | None, typer.Option("--name", help="Object name (default: the file's name).")
    ] = None,
    description: Annotated[str | None, typer.Option("--description", help="A description.")] = None,
    json_out: JsonOut = False,
) -> None:
    """Store a file as an object (replacing an object of the same name)."""
    _bucket(bucket)
    stdin = str(file) == "-"
    obj_name = name if name is not None else (None if stdin else file.name)
    if obj_name is None:
        usage("--name is required when reading from stdin")
    parse_or_usage(V.check_object_name, obj_name, "--name")
    if not stdin and not file.is_file():
        usage(f"cannot read {str(file)!r}: not a file")

    async def go(s: Session) -> dict[str, Any]:
        import nats.js.api

        store = await _open(s, bucket)
        meta = nats.js.api.ObjectMeta(name=obj_name, description=description)
        if stdin:
            oi = await store.put(obj_name, sys.stdin.buffer.read(), meta=meta)
        else:
            with open(file, "rb") as f:  # noqa: ASYNC230 - one task; nats-py reads it chunk by chunk
                oi = await store.put(obj_name, f, meta=meta)
        return _info_dict(oi)

    res = run(options(ctx), go)
    if json_out:
        emit_json(res)
    else:
        info(
            f"Stored {res['name']!r} in bucket {bucket}: {V.format_bytes(res['size'])} in {res['chunks']} chunks"
        )


@app.command("get")
def get(
    ctx: typer.Context,
    bucket: BucketArg,
    name: Annotated[str, typer.Argument(help="Object name.", show_default=False)],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-O", help="File to write ('-' for stdout; default: the object's name)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", "-f", help="Overwrite an existing file.")] = False,
) -> None:
    """Retrieve an object into a file (its digest is verified)."""
    _bucket(bucket)
    parse_or_usage(V.check_object_name, name, "name")
    to_stdout = output is not None and str(output) == "-"
    target = output if output is not None else Path(os.path.basename(name) or "object")
    if not to_stdout and target.exists() and not force:
        usage(f"{str(target)!r} exists: pass --force to overwrite it")
    partial = target.with_name(target.name + ".partial")

    async def go(s: Session) -> dict[str, Any]:
        import nats.js.errors

        store = await _open(s, bucket)
        try:
            if to_stdout:
                res = await store.get(name, writeinto=sys.stdout.buffer)  # type: ignore[arg-type]
            else:
                with open(partial, "wb") as f:  # noqa: ASYNC230 - one task, written chunk by chunk
                    res = await store.get(name, writeinto=f)
        except (nats.js.errors.ObjectNotFoundError, nats.js.errors.ObjectDeletedError) as exc:
            raise CliError(f"object {name!r} not found in bucket {bucket!r}") from exc
        except nats.js.errors.DigestMismatchError as exc:
            raise CliError(f"object {name!r}: the data does not match its digest") from exc
        return _info_dict(res.info)

    try:
        res = run(options(ctx), go)
    except BaseException:
        partial.unlink(missing_ok=True)  # never leave half an object behind
        raise
    if to_stdout:
        sys.stdout.flush()
        return
    os.replace(partial, target)
    info(f"Wrote {V.format_bytes(res['size'])} to {str(target)!r}")


@app.command("ls")
def ls(
    ctx: typer.Context,
    bucket: Annotated[
        str | None, typer.Argument(help="List this bucket's objects (all buckets if absent).")
    ] = None,
    json_out: JsonOut = False,
) -> None:
    """List Object Store buckets, or the objects in one."""
    if bucket is not None:
        _bucket(bucket)

        async def objects(s: Session) -> list[dict[str, Any]]:
            import nats.js.errors

            store = await _open(s, bucket)
            try:
                return [_info_dict(o) for o in await store.list(ignore_deletes=True)]
            except nats.js.errors.NotFoundError:
                return []

        items = sorted(run(options(ctx), objects), key=lambda o: str(o["name"]))
        if json_out:
            emit_json(items)
        elif not items:
            info(f"No objects in bucket {bucket}")
        else:
            print_table(
                f"Objects in bucket {bucket}",
                ["Name", "Size", "Chunks", "Time"],
                [
                    (o["name"], V.format_bytes(o["size"]), o["chunks"], V.format_time(o["mtime"]))
                    for o in items
                ],
                right=("Size", "Chunks"),
            )
        return

    async def buckets(s: Session) -> list[Any]:
        streams = await s.paged("STREAM.LIST", "streams")
        return [
            si
            for si in streams
            if str((si.get("config") or {}).get("name", "")).startswith(OBJ_STREAM_PREFIX)
        ]

    found = sorted(run(options(ctx), buckets), key=lambda si: str(si["config"]["name"]))
    if json_out:
        emit_json(
            [{"bucket": si["config"]["name"][len(OBJ_STREAM_PREFIX) :], "stream_info": si} for si in found]
        )
        return
    if not found:
        info("No Object Store buckets found")
        return
    print_table(
        "Object Store Buckets",
        ["Bucket", "Description", "Created", "Size"],
        [
            (
                si["config"]["name"][len(OBJ_STREAM_PREFIX) :],
                si["config"].get("description") or "",
                V.format_time(si.get("created")),
                V.format_bytes((si.get("state") or {}).get("bytes", 0)),
            )
            for si in found
        ],
        right=("Size",),
    )


@app.command("rm")
def rm(
    ctx: typer.Context,
    bucket: BucketArg,
    name: Annotated[str | None, typer.Argument(help="Object to delete; without it the whole bucket.")] = None,
    force: Force = False,
) -> None:
    """Delete an object, or the whole bucket when no object is named."""
    _bucket(bucket)
    if name is None:
        confirm(f"Really delete object store {bucket} and all its objects?", force)

        async def drop(s: Session) -> None:
            try:
                await s.api(f"STREAM.DELETE.{OBJ_STREAM_PREFIX}{bucket}")
            except ApiFailure as exc:
                if exc.code == 404:
                    raise CliError(
                        f"object store bucket {bucket!r} not found", err_code=exc.err_code
                    ) from exc
                raise

        run(options(ctx), drop)
        info(f"Object Store {bucket} was deleted")
        return
    parse_or_usage(V.check_object_name, name, "name")
    confirm(f"Really delete object {name!r} from bucket {bucket}?", force)

    async def go(s: Session) -> None:
        import nats.js.errors

        store = await _open(s, bucket)
        try:
            await store.delete(name)
        except (nats.js.errors.ObjectNotFoundError, nats.js.errors.ObjectDeletedError) as exc:
            raise CliError(f"object {name!r} not found in bucket {bucket!r}") from exc

    run(options(ctx), go)
    info(f"Deleted object {name!r} from bucket {bucket}")
