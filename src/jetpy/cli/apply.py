"""`jetpy apply -f FILE`: make streams, consumers and KV buckets match a YAML (or JSON) file.

Owns: the declarative file format, its validation (every key checked against the fields the
JetStream API knows, durations and sizes parsed, names checked: a bad file is a usage error and
nothing is sent), the plan (what exists, what would be created or changed, field by field), and
applying it in dependency order (streams and buckets before consumers), stopping at the first error.

The format (field names are the JSON API's; durations like ``1d``/``30s`` and sizes like ``1GB``
are accepted where the API wants nanoseconds or bytes)::

    streams:
      - name: ORDERS
        subjects: ["orders.>"]
        max_age: 7d
        consumers:                 # consumers of this stream
          - name: PROCESSOR
            ack_policy: explicit
    consumers:                     # or top level, naming their stream
      - stream: ORDERS
        name: AUDIT
    kv:
      - bucket: CONFIG
        history: 5
        ttl: 1h

Only the fields a file names are managed: a field the file leaves out keeps the value it has on
the server (so a second apply of the same file changes nothing). Nothing is ever deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from jetpy.cli import values as V
from jetpy.cli.common import config_diff, options
from jetpy.cli.connect import ApiFailure, Session, run
from jetpy.cli.output import emit_json, info, usage

__all__ = ["Change", "apply", "load_spec"]

STREAM_FIELDS: Final = frozenset(
    {
        "name",
        "description",
        "subjects",
        "retention",
        "max_consumers",
        "max_msgs",
        "max_bytes",
        "max_age",
        "max_msgs_per_subject",
        "max_msg_size",
        "discard",
        "discard_new_per_subject",
        "storage",
        "num_replicas",
        "no_ack",
        "duplicate_window",
        "placement",
        "mirror",
        "sources",
        "sealed",
        "deny_delete",
        "deny_purge",
        "allow_rollup_hdrs",
        "allow_direct",
        "mirror_direct",
        "republish",
        "subject_transform",
        "compression",
        "first_seq",
        "metadata",
        "allow_msg_ttl",
        "subject_delete_marker_ttl",
        "consumer_limits",
    }
)
CONSUMER_FIELDS: Final = frozenset(
    {
        "name",
        "durable_name",
        "description",
        "deliver_policy",
        "opt_start_seq",
        "opt_start_time",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "backoff",
        "filter_subject",
        "filter_subjects",
        "replay_policy",
        "rate_limit_bps",
        "sample_freq",
        "max_waiting",
        "max_ack_pending",
        "flow_control",
        "idle_heartbeat",
        "headers_only",
        "max_batch",
        "max_expires",
        "max_bytes",
        "inactive_threshold",
        "num_replicas",
        "mem_storage",
        "metadata",
        "deliver_subject",
        "deliver_group",
        "pause_until",
        "priority_policy",
        "priority_groups",
        "priority_timeout",
    }
)
KV_FIELDS: Final = frozenset(
    {
        "bucket",
        "description",
        "history",
        "ttl",
        "max_value_size",
        "max_bytes",
        "max_bucket_size",
        "storage",
        "replicas",
    }
)
DURATIONS: Final = frozenset(
    {
        "max_age",
        "duplicate_window",
        "ack_wait",
        "idle_heartbeat",
        "inactive_threshold",
        "max_expires",
        "subject_delete_marker_ttl",
        "priority_timeout",
    }
)
SIZES: Final = frozenset({"max_bytes", "max_msg_size"})
ENUMS: Final[dict[str, frozenset[str]]] = {
    "retention": frozenset({"limits", "interest", "workqueue"}),
    "storage": frozenset({"file", "memory"}),
    "discard": frozenset({"old", "new"}),
    "ack_policy": frozenset({"none", "all", "explicit"}),
    "deliver_policy": frozenset(
        {"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"}
    ),
    "replay_policy": frozenset({"instant", "original"}),
    "compression": frozenset({"none", "s2"}),
}


@dataclass
class Spec:
    streams: list[dict[str, Any]] = field(default_factory=list)
    consumers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    kv: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # bucket, stream fields it manages


@dataclass
class Change:
    kind: str  # stream, consumer, kv
    name: str  # as shown: ORDERS, ORDERS > PROCESSOR, CONFIG
    action: str  # create, update, unchanged
    fields: list[tuple[str, Any, Any]]
    subject: str = ""
    body: dict[str, Any] = field(default_factory=dict)
    then: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # requests sent after it


# -- the file -----------------------------------------------------------------------------------------


def _convert(where: str, key: str, value: Any) -> Any:
    """One field's value as the API wants it (nanoseconds, bytes, checked enums)."""
    try:
        if key in DURATIONS and isinstance(value, str):
            return V.parse_duration(value)
        if key in SIZES and isinstance(value, str):
            return V.parse_size(value)
        if key == "backoff" and isinstance(value, list):
            return [V.parse_duration(v) if isinstance(v, str) else v for v in value]
    except ValueError as exc:
        usage(f"{where}: {key}: {exc}")
    if key in ENUMS:
        if not isinstance(value, str) or value.lower() not in ENUMS[key]:
            usage(f"{where}: {key}: {value!r} is not one of {', '.join(sorted(ENUMS[key]))}")
        return value.lower()
    if key in ("subjects", "filter_subjects"):
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            usage(f"{where}: {key} must be a list of subjects")
        for s in value:
            try:
                V.check_subject(s)
            except ValueError as exc:
                usage(f"{where}: {key}: {exc}")
    return value


def _fields(
    where: str, doc: Any, known: frozenset[str], extra: frozenset[str] = frozenset()
) -> dict[str, Any]:
    if not isinstance(doc, dict):
        usage(f"{where}: expected a mapping of fields")
    unknown = sorted(str(k) for k in doc if k not in known and k not in extra)
    if unknown:
        usage(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    return {k: _convert(where, k, v) for k, v in doc.items() if k not in extra}


def _list(doc: dict[str, Any], key: str, source: str) -> list[Any]:
    items = doc.get(key) or []
    if not isinstance(items, list):
        usage(f"{source}: {key} must be a list")
    return items


def _consumer(where: str, stream: str, doc: Any) -> tuple[str, dict[str, Any]]:
    cfg = _fields(where, doc, CONSUMER_FIELDS, frozenset({"stream"}))
    name = cfg.get("name") or cfg.get("durable_name")
    if not isinstance(name, str):
        usage(f"{where}: a consumer needs a name")
    try:
        V.check_consumer_name(name)
    except ValueError as exc:
        usage(f"{where}: {exc}")
    cfg["name"] = name
    cfg.setdefault("durable_name", name)
    return stream, cfg


def load_spec(path: Path) -> Spec:
    """Parse and validate the whole file; any problem is a usage error naming where it is."""
    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        usage(f"cannot read {str(path)!r}: {exc.strerror or exc}")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        usage(f"{path}{at}: not valid YAML: {getattr(exc, 'problem', None) or exc}")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        usage(f"{path}: expected a mapping with streams, consumers and kv")
    unknown = sorted(str(k) for k in doc if k not in ("streams", "consumers", "kv"))
    if unknown:
        usage(
            f"{path}: unknown top-level key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            "(expected streams, consumers, kv)"
        )
    spec = Spec()
    seen: set[str] = set()
    for i, sdoc in enumerate(_list(doc, "streams", str(path))):
        where = f"{path}: streams[{i}]"
        cfg = _fields(where, sdoc, STREAM_FIELDS, frozenset({"consumers"}))
        name = cfg.get("name")
        if not isinstance(name, str):
            usage(f"{where}: a stream needs a name")
        try:
            V.check_stream_name(name)
        except ValueError as exc:
            usage(f"{where}: {exc}")
        if name in seen:
            usage(f"{where}: stream {name} appears twice")
        seen.add(name)
        spec.streams.append(cfg)
        for j, cdoc in enumerate(_list(sdoc, "consumers", where)):
            spec.consumers.append(_consumer(f"{where}.consumers[{j}]", name, cdoc))
    for i, cdoc in enumerate(_list(doc, "consumers", str(path))):
        where = f"{path}: consumers[{i}]"
        stream = cdoc.get("stream") if isinstance(cdoc, dict) else None
        if not isinstance(stream, str):
            usage(f"{where}: a top-level consumer needs its stream")
        spec.consumers.append(_consumer(where, stream, cdoc))
    names = [(s, c["name"]) for s, c in spec.consumers]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        s, c = sorted(dupes)[0]
        usage(f"{path}: consumer {s} > {c} appears twice")
    for i, kdoc in enumerate(_list(doc, "kv", str(path))):
        where = f"{path}: kv[{i}]"
        spec.kv.append(_kv(where, kdoc, seen))
    return spec


def _kv(where: str, kdoc: Any, seen: set[str]) -> tuple[str, dict[str, Any]]:
    from jetpy.cli.kv import DEFAULT_DUPLICATE_WINDOW, KV_STREAM_PREFIX, MAX_HISTORY

    if not isinstance(kdoc, dict):
        usage(f"{where}: expected a mapping of fields")
    unknown = sorted(str(k) for k in kdoc if k not in KV_FIELDS)
    if unknown:
        usage(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    bucket = kdoc.get("bucket")
    if not isinstance(bucket, str):
        usage(f"{where}: a bucket needs a name (bucket:)")
    try:
        V.check_bucket(bucket)
        fields: dict[str, Any] = {}
        if "history" in kdoc:
            h = kdoc["history"]
            if not isinstance(h, int) or not 1 <= h <= MAX_HISTORY:
                raise ValueError(f"history must be between 1 and {MAX_HISTORY}")
            fields["max_msgs_per_subject"] = h
        if "ttl" in kdoc:
            ttl = V.parse_duration(str(kdoc["ttl"]))
            fields["max_age"] = ttl
            fields["duplicate_window"] = (
                min(ttl, DEFAULT_DUPLICATE_WINDOW) if ttl else DEFAULT_DUPLICATE_WINDOW
            )
        if "max_value_size" in kdoc:
            fields["max_msg_size"] = V.parse_size(kdoc["max_value_size"])
        for key in ("max_bytes", "max_bucket_size"):
            if key in kdoc:
                fields["max_bytes"] = V.parse_size(kdoc[key])
        if "storage" in kdoc:
            fields["storage"] = _convert(where, "storage", kdoc["storage"])
        if "replicas" in kdoc:
            fields["num_replicas"] = int(kdoc["replicas"])
        if "description" in kdoc:
            fields["description"] = str(kdoc["description"])
    except (ValueError, TypeError) as exc:
        usage(f"{where}: {exc}")
    stream = KV_STREAM_PREFIX + bucket
    if stream in seen:
        usage(f"{where}: bucket {bucket} appears twice (or as stream {stream})")
    seen.add(stream)
    return bucket, fields


# -- the plan -----------------------------------------------------------------------------------------


async def _current(s: Session, subject: str) -> dict[str, Any] | None:
    """The ``config`` of a stream/consumer INFO, or None if it does not exist."""
    try:
        resp = await s.api(subject)
    except ApiFailure as exc:
        if exc.code == 404:
            return None
        raise
    cfg = resp.get("config")
    return cfg if isinstance(cfg, dict) else {}


async def plan(s: Session, spec: Spec) -> list[Change]:
    from jetpy.cli.kv import KV_STREAM_PREFIX, kv_stream_config

    changes: list[Change] = []
    created: set[str] = set()

    def stream_change(
        kind: str,
        shown: str,
        stream: str,
        desired: dict[str, Any],
        create_cfg: dict[str, Any],
        cur: dict[str, Any] | None,
    ) -> None:
        if cur is None:
            created.add(stream)
            changes.append(
                Change(
                    kind, shown, "create", config_diff({}, create_cfg), f"STREAM.CREATE.{stream}", create_cfg
                )
            )
            return
        diff = config_diff(cur, desired)
        if not diff:
            changes.append(Change(kind, shown, "unchanged", []))
        else:
            changes.append(Change(kind, shown, "update", diff, f"STREAM.UPDATE.{stream}", {**cur, **desired}))

    for cfg in spec.streams:
        name = cfg["name"]
        stream_change("stream", name, name, cfg, cfg, await _current(s, f"STREAM.INFO.{name}"))
    for bucket, fields in spec.kv:
        stream = KV_STREAM_PREFIX + bucket
        full = kv_stream_config(bucket)
        full.update(fields)
        stream_change("kv", bucket, stream, fields, full, await _current(s, f"STREAM.INFO.{stream}"))
    for stream, ccfg in spec.consumers:
        name = ccfg["name"]
        shown = f"{stream} > {name}"
        cur = None if stream in created else await _current_consumer(s, stream, name)
        body = {"stream_name": stream, "config": ccfg}
        subject = f"CONSUMER.CREATE.{stream}.{name}"
        if cur is None:
            changes.append(Change("consumer", shown, "create", config_diff({}, ccfg), subject, body))
            continue
        diff = config_diff(cur, ccfg)
        if not diff:
            changes.append(Change("consumer", shown, "unchanged", []))
        else:
            # an update never changes a consumer's pause (as nats-server): CONSUMER.PAUSE does
            then = []
            if any(key == "pause_until" for key, _, _ in diff):
                then.append((f"CONSUMER.PAUSE.{stream}.{name}", {"pause_until": ccfg.get("pause_until")}))
            changes.append(
                Change(
                    "consumer",
                    shown,
                    "update",
                    diff,
                    subject,
                    {"stream_name": stream, "config": {**cur, **ccfg}},
                    then,
                )
            )
    return changes


async def _current_consumer(s: Session, stream: str, name: str) -> dict[str, Any] | None:
    try:
        return await _current(s, f"CONSUMER.INFO.{stream}.{name}")
    except ApiFailure as exc:
        if exc.err_code == 10059:  # the stream does not exist (yet): the consumer will be created
            return None
        raise


def _show(key: str, value: Any) -> str:
    from jetpy.cli.common import format_value

    if key in DURATIONS and isinstance(value, int):
        return V.format_duration(value, zero="0")
    if key in SIZES and isinstance(value, int) and value >= 1024:
        return f"{value} ({V.format_bytes(value)})"
    return "-" if value is None else format_value(value)


def _print_plan(changes: list[Change]) -> None:
    sign = {"create": "+", "update": "~", "unchanged": "="}
    for c in changes:
        info(f"{sign[c.action]} {c.kind} {c.name}" + (" (no changes)" if c.action == "unchanged" else ""))
        for key, old, new in c.fields:
            if c.action == "create":
                info(f"    {key}: {_show(key, new)}")
            else:
                info(f"    {key}: {_show(key, old)} -> {_show(key, new)}")


def apply(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Option("--file", "-f", help="YAML (or JSON) file describing the desired state.")
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan, change nothing.")] = False,
    json_out: Annotated[
        bool, typer.Option("--json", "-j", help="Print the plan and result as JSON.")
    ] = False,
) -> None:
    """Create or update streams, consumers and KV buckets to match a file; prints the diff first."""
    spec = load_spec(file)
    done: list[str] = []

    async def go(s: Session) -> list[Change]:
        changes = await plan(s, spec)
        if not json_out:
            _print_plan(changes)
            counts = {a: sum(c.action == a for c in changes) for a in ("create", "update", "unchanged")}
            info(
                f"\nPlan: {counts['create']} to create, {counts['update']} to update, "
                f"{counts['unchanged']} unchanged"
            )
        if dry_run:
            return changes
        for c in changes:
            if c.action == "unchanged":
                continue
            verb = "create" if c.action == "create" else "update"
            what = f"could not {verb} {c.kind} {c.name}"
            for subject, body in [(c.subject, c.body), *c.then]:
                await s.api(
                    subject,
                    body,
                    what=what
                    + (f" (already applied: {', '.join(done)})" if done else " (nothing was changed)"),
                )
            done.append(f"{c.action}d {c.kind} {c.name}")
            if not json_out:
                info(f"{c.action.capitalize()}d {c.kind} {c.name}")
        return changes

    changes = run(options(ctx), go)
    if json_out:
        emit_json(
            {
                "dry_run": dry_run,
                "changes": [
                    {
                        "kind": c.kind,
                        "name": c.name,
                        "action": c.action,
                        "fields": {k: {"from": a, "to": b} for k, a, b in c.fields},
                    }
                    for c in changes
                ],
            }
        )
        return
    if dry_run:
        info("Dry run: nothing was changed")
    elif not any(c.action != "unchanged" for c in changes):
        info("Nothing to do: the server already matches the file")
    else:
        info("Apply complete")
