"""`jetpy kv ...`: add, info, put, get, del, purge, history, watch, ls, rm.

Owns: the KV bucket's stream configuration (``kv_stream_config``, the ADR-8 conventions as the nats
CLI applies them, shared with `apply`), creating buckets through the streams API, and the key
verbs, which go through nats-py's ``KeyValue`` (reads by direct/last-by-subject get, writes as
publishes, history/watch/keys through ordered consumers). Bucket and key names are checked before
connecting, so a bad name never reaches the server.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.buckets import create_bucket, show_bucket
from jetpy.cli.common import confirm, options, parse_or_usage
from jetpy.cli.connect import ApiFailure, Session, run
from jetpy.cli.output import CliError, emit_json, info, print_table, usage

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

__all__ = ["KV_STREAM_PREFIX", "app", "kv_stream_config"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

KV_STREAM_PREFIX = "KV_"
MAX_HISTORY = 64  # the KV convention's limit on values kept per key
DEFAULT_DUPLICATE_WINDOW = 120 * 1_000_000_000

JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print JSON.")]
BucketArg = Annotated[str, typer.Argument(help="Bucket name.", show_default=False)]
KeyArg = Annotated[str, typer.Argument(help="Key.", show_default=False)]


def _bucket(name: str) -> str:
    return parse_or_usage(V.check_bucket, name, "bucket")


def _key(key: str) -> str:
    return parse_or_usage(V.check_key, key, "key")


def kv_stream_config(
    bucket: str,
    *,
    history: int = 1,
    ttl: int = 0,
    max_value_size: int = -1,
    max_bytes: int = -1,
    storage: str = "file",
    replicas: int = 1,
    description: str | None = None,
) -> dict[str, Any]:
    """The stream (wire names) behind a KV bucket; ``ttl`` in nanoseconds."""
    if not 1 <= history <= MAX_HISTORY:
        raise ValueError(f"history must be between 1 and {MAX_HISTORY}, not {history}")
    if storage not in ("file", "memory"):
        raise ValueError(f"storage must be file or memory, not {storage!r}")
    cfg: dict[str, Any] = {
        "name": KV_STREAM_PREFIX + bucket,
        "subjects": [f"$KV.{bucket}.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": max_bytes,
        "max_age": ttl,
        "max_msgs_per_subject": history,
        "max_msg_size": max_value_size,
        "storage": storage,
        "discard": "new",
        "num_replicas": replicas,
        "duplicate_window": min(ttl, DEFAULT_DUPLICATE_WINDOW) if ttl else DEFAULT_DUPLICATE_WINDOW,
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
    }
    if description:
        cfg["description"] = description
    return cfg


async def _open(s: Session, bucket: str) -> KeyValue:
    import nats.js.errors

    try:
        return await s.js.key_value(bucket)
    except nats.js.errors.NotFoundError as exc:
        raise CliError(f"bucket {bucket!r} not found", err_code=getattr(exc, "err_code", None)) from exc


def _when(created: Any) -> str:
    if isinstance(created, datetime):
        return created.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(created, int | float) and created:
        return datetime.fromtimestamp(created / 1e9 if created > 1e12 else created, UTC).strftime(
            "%Y-%m-%d %H:%M:%S"
        )
    return str(created) if created else "-"


def _op(op: str | None) -> str:
    return {None: "PUT", "DEL": "DEL", "PURGE": "PURGE"}.get(op, op or "PUT")


def _text(value: bytes | None) -> str:
    if not value:
        return ""
    try:
        return value.decode()
    except UnicodeDecodeError:
        return repr(value)


def _status_pairs(bucket: str, si: dict[str, Any]) -> list[tuple[str, Any]]:
    cfg, st = si.get("config") or {}, si.get("state") or {}
    return [
        ("Bucket", bucket),
        ("Description", cfg.get("description") or "-"),
        ("History", cfg.get("max_msgs_per_subject", 1)),
        ("TTL", V.format_duration(cfg.get("max_age", 0), zero="forever")),
        ("Max Value Size", V.format_bytes(cfg.get("max_msg_size", -1))),
        ("Max Bucket Size", V.format_bytes(cfg.get("max_bytes", -1))),
        ("Storage", cfg.get("storage", "file")),
        ("Replicas", cfg.get("num_replicas", 1)),
        ("Values Stored", f"{st.get('messages', 0):,}"),
        ("Size", V.format_bytes(st.get("bytes", 0))),
        ("Backing Stream", cfg.get("name", "")),
    ]


@app.command("add")
def add(
    ctx: typer.Context,
    bucket: BucketArg,
    history: Annotated[int, typer.Option("--history", help=f"Values kept per key (1-{MAX_HISTORY}).")] = 1,
    ttl: Annotated[str, typer.Option("--ttl", help="How long values live: 1h, 1d; 0 forever.")] = "0",
    max_value_size: Annotated[
        str, typer.Option("--max-value-size", help="Largest value (-1 unlimited).")
    ] = "-1",
    max_bucket_size: Annotated[
        str, typer.Option("--max-bucket-size", help="Bucket size limit (-1 unlimited).")
    ] = "-1",
    storage: Annotated[str, typer.Option("--storage", help="file or memory.")] = "file",
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Replicas.")] = 1,
    description: Annotated[str | None, typer.Option("--description", help="A description.")] = None,
    json_out: JsonOut = False,
) -> None:
    """Create a Key-Value bucket."""
    _bucket(bucket)
    try:
        cfg = kv_stream_config(
            bucket,
            history=history,
            ttl=parse_or_usage(V.parse_duration, ttl, "--ttl"),
            max_value_size=parse_or_usage(V.parse_size, max_value_size, "--max-value-size"),
            max_bytes=parse_or_usage(V.parse_size, max_bucket_size, "--max-bucket-size"),
            storage=storage.lower(),
            replicas=replicas,
            description=description,
        )
    except ValueError as exc:
        usage(str(exc))
    create_bucket(ctx, bucket, cfg, "Key-Value Bucket", _status_pairs, json_out)


@app.command("info")
def info_cmd(ctx: typer.Context, bucket: BucketArg, json_out: JsonOut = False) -> None:
    """Show a bucket's configuration and size."""
    _bucket(bucket)
    show_bucket(ctx, bucket, f"{KV_STREAM_PREFIX}{bucket}", "Key-Value Bucket", _status_pairs, json_out)


@app.command("put")
def put(
    ctx: typer.Context,
    bucket: BucketArg,
    key: KeyArg,
    value: Annotated[str | None, typer.Argument(help="The value (stdin if absent).")] = None,
) -> None:
    """Store a value under a key; prints the new revision."""
    _bucket(bucket)
    _key(key)
    if value is not None:
        data = value.encode()
    elif not sys.stdin.isatty():
        data = sys.stdin.buffer.read()
    else:
        usage("give a value or pipe it on stdin")

    async def go(s: Session) -> int:
        kv = await _open(s, bucket)
        return int(await kv.put(key, data))

    rev = run(options(ctx), go)
    info(str(rev))


@app.command("get")
def get(
    ctx: typer.Context,
    bucket: BucketArg,
    key: KeyArg,
    revision: Annotated[int | None, typer.Option("--revision", min=1, help="A specific revision.")] = None,
    raw: Annotated[bool, typer.Option("--raw", "-r", help="Only the value.")] = False,
    json_out: JsonOut = False,
) -> None:
    """Print a key's value (its latest revision, or --revision)."""
    _bucket(bucket)
    _key(key)

    async def go(s: Session) -> dict[str, Any]:
        import nats.js.errors

        kv = await _open(s, bucket)
        try:
            e = await kv.get(key, revision=revision)
        except nats.js.errors.NotFoundError as exc:  # KeyNotFoundError, KeyDeletedError
            deleted = " (deleted)" if getattr(exc, "op", None) else ""
            raise CliError(f"key {key!r} not found in bucket {bucket!r}{deleted}") from exc
        return {
            "bucket": bucket,
            "key": e.key,
            "revision": e.revision,
            "created": _when(e.created),
            "value": e.value or b"",
        }

    e = run(options(ctx), go)
    if raw:
        sys.stdout.buffer.write(e["value"])
        if not e["value"].endswith(b"\n") and sys.stdout.isatty():
            sys.stdout.buffer.write(b"\n")
        sys.stdout.flush()
    elif json_out:
        emit_json({**e, "value": _text(e["value"])})
    else:
        created = f" created @ {e['created']}" if e["created"] != "-" else ""
        info(f"{bucket} > {key} revision: {e['revision']}{created}\n")
        info(_text(e["value"]))


@app.command("del")
def delete(
    ctx: typer.Context,
    bucket: BucketArg,
    key: Annotated[str | None, typer.Argument(help="Key to delete; without it the whole bucket.")] = None,
    force: Annotated[bool, typer.Option("--force", "-f", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a key (keeps its history), or the whole bucket when no key is given."""
    _bucket(bucket)
    if key is None:
        _remove_bucket(ctx, bucket, force)
        return
    _key(key)

    async def go(s: Session) -> None:
        kv = await _open(s, bucket)
        await kv.delete(key)

    run(options(ctx), go)
    info(f"Deleted key {key!r} from bucket {bucket}")


@app.command("purge")
def purge(
    ctx: typer.Context,
    bucket: BucketArg,
    key: KeyArg,
    force: Annotated[bool, typer.Option("--force", "-f", help="Do not ask for confirmation.")] = False,
) -> None:
    """Remove a key and all its history."""
    _bucket(bucket)
    _key(key)
    confirm(f"Really purge key {key!r} and its history from bucket {bucket}?", force)

    async def go(s: Session) -> None:
        kv = await _open(s, bucket)
        await kv.purge(key)

    run(options(ctx), go)
    info(f"Purged key {key!r} from bucket {bucket}")


def _remove_bucket(ctx: typer.Context, bucket: str, force: bool) -> None:
    confirm(f"Really delete bucket {bucket} and all its values?", force)

    async def go(s: Session) -> None:
        try:
            await s.api(f"STREAM.DELETE.{KV_STREAM_PREFIX}{bucket}")
        except ApiFailure as exc:
            if exc.code == 404:
                raise CliError(f"bucket {bucket!r} not found", err_code=exc.err_code) from exc
            raise

    run(options(ctx), go)
    info(f"Bucket {bucket} was deleted")


@app.command("rm")
def rm(
    ctx: typer.Context,
    bucket: BucketArg,
    force: Annotated[bool, typer.Option("--force", "-f", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a bucket and all its values."""
    _bucket(bucket)
    _remove_bucket(ctx, bucket, force)


@app.command("history")
def history(ctx: typer.Context, bucket: BucketArg, key: KeyArg, json_out: JsonOut = False) -> None:
    """Every stored revision of a key."""
    _bucket(bucket)
    _key(key)

    async def go(s: Session) -> list[dict[str, Any]]:
        import nats.js.errors

        kv = await _open(s, bucket)
        try:
            entries = await kv.history(key)
        except nats.js.errors.NoKeysError:
            return []
        return [
            {
                "key": e.key,
                "revision": e.revision,
                "operation": _op(e.operation),
                "created": _when(e.created),
                "value": _text(e.value),
            }
            for e in entries
        ]

    rows = run(options(ctx), go)
    if json_out:
        emit_json(rows)
        return
    if not rows:
        raise CliError(f"key {key!r} not found in bucket {bucket!r}")
    print_table(
        f"History for {bucket} > {key}",
        ["Key", "Revision", "Op", "Created", "Length", "Value"],
        [
            (r["key"], r["revision"], r["operation"], r["created"], len(r["value"]), r["value"][:60])
            for r in rows
        ],
        right=("Revision", "Length"),
    )


@app.command("watch")
def watch(
    ctx: typer.Context,
    bucket: BucketArg,
    key: Annotated[str, typer.Argument(help="Key or pattern (wildcards * and >).")] = ">",
    count: Annotated[
        int, typer.Option("--count", min=0, help="Exit after this many updates (0: never).")
    ] = 0,
    wait: Annotated[str | None, typer.Option("--wait", help="Exit after this long.")] = None,
    json_out: Annotated[bool, typer.Option("--json", "-j", help="One JSON object per update.")] = False,
) -> None:
    """Print the current value of matching keys, then every change, until interrupted."""
    import json

    _bucket(bucket)
    parse_or_usage(V.check_key_pattern, key, "key")
    limit = parse_or_usage(V.parse_duration, wait, "--wait") / 1e9 if wait else None

    async def go(s: Session) -> int:
        import asyncio

        import nats.errors
        from nats.js.kv import KeyValue

        kv = await _open(s, bucket)
        watcher = await kv.watch(key)
        sys.stderr.write(f"Watching bucket {bucket} key {key}\n")
        sys.stderr.flush()
        loop = asyncio.get_running_loop()
        deadline = None if limit is None else loop.time() + limit
        n = 0
        try:
            while count == 0 or n < count:
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    break
                try:
                    e = await watcher.updates(timeout=left)  # type: ignore[no-untyped-call]
                except nats.errors.TimeoutError:
                    break
                if e is None:
                    continue  # the end of the current values; updates follow
                if not isinstance(e, KeyValue.Entry):
                    break  # the watcher stopped
                n += 1
                if json_out:
                    sys.stdout.write(
                        json.dumps(
                            {
                                "key": e.key,
                                "revision": e.revision,
                                "operation": _op(e.operation),
                                "created": _when(e.created),
                                "value": _text(e.value),
                            }
                        )
                        + "\n"
                    )
                else:
                    sys.stdout.write(
                        f"[{_when(e.created)}] {_op(e.operation)} {bucket} > {e.key}"
                        f" (revision {e.revision}): {_text(e.value)}\n"
                    )
                sys.stdout.flush()
        finally:
            await watcher.stop()  # type: ignore[no-untyped-call]
        return n

    try:
        run(options(ctx), go)
    except CliError as exc:
        if exc.exit_code != 130:
            raise


@app.command("ls")
def ls(
    ctx: typer.Context,
    bucket: Annotated[
        str | None, typer.Argument(help="List this bucket's keys (all buckets if absent).")
    ] = None,
    json_out: JsonOut = False,
) -> None:
    """List buckets, or the keys of one bucket."""
    if bucket is not None:
        _bucket(bucket)

        async def keys(s: Session) -> list[str]:
            import nats.js.errors

            kv = await _open(s, bucket)
            try:
                return sorted(await kv.keys())
            except nats.js.errors.NoKeysError:
                return []

        names = run(options(ctx), keys)
        if json_out:
            emit_json(names)
        elif not names:
            info(f"No keys in bucket {bucket}")
        else:
            for k in names:
                info(k)
        return

    async def buckets(s: Session) -> list[Any]:
        streams = await s.paged("STREAM.LIST", "streams")
        return [
            si for si in streams if str((si.get("config") or {}).get("name", "")).startswith(KV_STREAM_PREFIX)
        ]

    items = sorted(run(options(ctx), buckets), key=lambda si: str(si["config"]["name"]))
    if json_out:
        emit_json(
            [{"bucket": si["config"]["name"][len(KV_STREAM_PREFIX) :], "stream_info": si} for si in items]
        )
        return
    if not items:
        info("No Key-Value buckets found")
        return
    rows = []
    for si in items:
        cfg, st = si["config"], si.get("state") or {}
        rows.append(
            (
                cfg["name"][len(KV_STREAM_PREFIX) :],
                cfg.get("description") or "",
                V.format_time(si.get("created")),
                V.format_bytes(st.get("bytes", 0)),
                f"{st.get('messages', 0):,}",
                V.format_time(st.get("last_ts")) if st.get("messages") else "never",
            )
        )
    print_table(
        "Key-Value Buckets",
        ["Bucket", "Description", "Created", "Size", "Values", "Last Update"],
        rows,
        right=("Size", "Values"),
    )
