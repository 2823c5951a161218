"""`jetpy stream ...`: add, ls, info, subjects, edit, rm, purge, get, view (and backup, restore).

Owns: the stream flags (spelled as the nats CLI's `nats stream add`), turning them (or a JSON
config file) into the ``$JS.API.STREAM.*`` request bodies, and printing streams, their per-subject
counts and their messages. Talks to the server only through ``connect.Session``; raw API JSON is
kept so that ``--json`` shows exactly what the server said.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.backup import stream_backup, stream_restore
from jetpy.cli.cluster_ops import cluster_section, stream_cluster_app
from jetpy.cli.common import (
    config_diff,
    confirm,
    format_value,
    listed_elsewhere,
    load_json_config,
    options,
    parse_or_usage,
)
from jetpy.cli.connect import Session, run
from jetpy.cli.output import busy, emit_json, info, print_sections, print_table, usage
from jetpy.cli.reports import stream_report

__all__ = ["app", "format_stream_info", "stream_flags_config"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
app.command("backup")(stream_backup)  # the verbs live in cli/backup.py
app.command("restore")(stream_restore)

_RETENTION = {
    "limits": "limits",
    "interest": "interest",
    "workqueue": "workqueue",
    "work": "workqueue",
    "workq": "workqueue",
    "work_queue": "workqueue",
}
_STORAGE = {"file": "file", "memory": "memory", "mem": "memory"}
_DISCARD = {"old": "old", "new": "new"}

# -- shared flag declarations (add and edit) --------------------------------------------------------

Subjects = Annotated[
    list[str] | None,
    typer.Option("--subjects", help="Subjects the stream stores (comma separated or repeated)."),
]
Description = Annotated[str | None, typer.Option("--description", help="A description of the stream.")]
Storage = Annotated[str | None, typer.Option("--storage", help="file or memory.")]
Retention = Annotated[str | None, typer.Option("--retention", help="limits, interest or workqueue.")]
Discard = Annotated[str | None, typer.Option("--discard", help="When full: discard old or new messages.")]
MaxMsgs = Annotated[int | None, typer.Option("--max-msgs", help="Maximum messages (-1 unlimited).")]
MaxPerSubject = Annotated[
    int | None, typer.Option("--max-msgs-per-subject", help="Maximum messages per subject (-1 unlimited).")
]
MaxBytes = Annotated[str | None, typer.Option("--max-bytes", help="Maximum size: 1GB, 512MB, -1 unlimited.")]
MaxAge = Annotated[str | None, typer.Option("--max-age", help="Maximum age: 1d, 12h, 0 unlimited.")]
MaxMsgSize = Annotated[
    str | None, typer.Option("--max-msg-size", help="Largest message accepted (-1 unlimited).")
]
MaxConsumers = Annotated[
    int | None, typer.Option("--max-consumers", help="Maximum consumers (-1 unlimited).")
]
DupeWindow = Annotated[str | None, typer.Option("--dupe-window", help="Duplicate detection window: 2m, 1h.")]
Replicas = Annotated[int | None, typer.Option("--replicas", min=1, help="Replicas (1 on a single server).")]
AllowRollup = Annotated[
    bool | None, typer.Option("--allow-rollup/--no-allow-rollup", help="Allow Nats-Rollup headers.")
]
DenyDelete = Annotated[
    bool | None, typer.Option("--deny-delete/--allow-delete", help="Deny message deletes.")
]
DenyPurge = Annotated[bool | None, typer.Option("--deny-purge/--allow-purge", help="Deny purges.")]
AllowDirect = Annotated[
    bool | None,
    typer.Option(
        "--allow-direct/--no-allow-direct",
        help="Allow direct get (DIRECT.GET); `stream add` turns it on unless told, as the nats CLI.",
    ),
]
NoAck = Annotated[bool | None, typer.Option("--no-ack/--ack", help="Do not acknowledge publishes.")]
JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print the server's JSON.")]
Force = Annotated[bool, typer.Option("--force", "-f", help="Do not ask for confirmation.")]
StreamArg = Annotated[str, typer.Argument(help="Stream name.", show_default=False)]


def _choice(table: dict[str, str], value: str | None, flag: str) -> str | None:
    if value is None:
        return None
    v = table.get(value.lower())
    if v is None:
        usage(f"{flag}: invalid value {value!r} (choose from {', '.join(sorted(set(table.values())))})")
    return v


def stream_flags_config(
    *,
    subjects: list[str] | None = None,
    description: str | None = None,
    storage: str | None = None,
    retention: str | None = None,
    discard: str | None = None,
    max_msgs: int | None = None,
    max_msgs_per_subject: int | None = None,
    max_bytes: str | None = None,
    max_age: str | None = None,
    max_msg_size: str | None = None,
    max_consumers: int | None = None,
    dupe_window: str | None = None,
    replicas: int | None = None,
    allow_rollup: bool | None = None,
    deny_delete: bool | None = None,
    deny_purge: bool | None = None,
    allow_direct: bool | None = None,
    no_ack: bool | None = None,
) -> dict[str, Any]:
    """The stream config fields the given flags set (wire names), validated; usage error if bad."""
    cfg: dict[str, Any] = {}
    if subjects is not None:
        subs = [s.strip() for item in subjects for s in item.split(",") if s.strip()]
        for s in subs:
            parse_or_usage(V.check_subject, s, "--subjects")
        cfg["subjects"] = subs
    if description is not None:
        cfg["description"] = description
    for key, val in (
        ("storage", _choice(_STORAGE, storage, "--storage")),
        ("retention", _choice(_RETENTION, retention, "--retention")),
        ("discard", _choice(_DISCARD, discard, "--discard")),
    ):
        if val is not None:
            cfg[key] = val
    for key, num, flag in (
        ("max_msgs", max_msgs, "--max-msgs"),
        ("max_msgs_per_subject", max_msgs_per_subject, "--max-msgs-per-subject"),
        ("max_consumers", max_consumers, "--max-consumers"),
    ):
        if num is not None:
            if num < -1:
                usage(f"{flag}: must be -1 (unlimited) or more, not {num}")
            cfg[key] = num
    if max_bytes is not None:
        cfg["max_bytes"] = parse_or_usage(V.parse_size, max_bytes, "--max-bytes")
    if max_msg_size is not None:
        cfg["max_msg_size"] = parse_or_usage(V.parse_size, max_msg_size, "--max-msg-size")
    if max_age is not None:
        cfg["max_age"] = parse_or_usage(V.parse_duration, max_age, "--max-age")
    if dupe_window is not None:
        cfg["duplicate_window"] = parse_or_usage(V.parse_duration, dupe_window, "--dupe-window")
    if replicas is not None:
        cfg["num_replicas"] = replicas
    for key, flag_val in (
        ("allow_rollup_hdrs", allow_rollup),
        ("deny_delete", deny_delete),
        ("deny_purge", deny_purge),
        ("allow_direct", allow_direct),
        ("no_ack", no_ack),
    ):
        if flag_val is not None:
            cfg[key] = flag_val
    return cfg


def _yes_no(v: Any) -> str:
    return "yes" if v else "no"


def format_stream_info(si: dict[str, Any]) -> None:
    """Print a STREAM.INFO response as nats' `stream info` does: configuration, then state."""
    cfg = si.get("config") or {}
    st = si.get("state") or {}
    conf: list[tuple[str, Any]] = [("Name", cfg.get("name", ""))]
    if cfg.get("description"):
        conf.append(("Description", cfg["description"]))
    conf += [
        ("Subjects", ", ".join(cfg.get("subjects") or []) or "-"),
        ("Replicas", cfg.get("num_replicas", 1)),
        ("Storage", cfg.get("storage", "file")),
        ("Retention", cfg.get("retention", "limits")),
        ("Discard Policy", cfg.get("discard", "old")),
        ("Acknowledgements", _yes_no(not cfg.get("no_ack"))),
        ("Maximum Messages", V.format_count(cfg.get("max_msgs", -1))),
        ("Maximum Per Subject", V.format_count(cfg.get("max_msgs_per_subject", -1))),
        ("Maximum Bytes", V.format_bytes(cfg.get("max_bytes", -1))),
        ("Maximum Age", V.format_duration(cfg.get("max_age", 0))),
        ("Maximum Message Size", V.format_bytes(cfg.get("max_msg_size", -1))),
        ("Maximum Consumers", V.format_count(cfg.get("max_consumers", -1))),
        ("Duplicate Window", V.format_duration(cfg.get("duplicate_window", 0), zero="off")),
        ("Allows Msg Delete", _yes_no(not cfg.get("deny_delete"))),
        ("Allows Purge", _yes_no(not cfg.get("deny_purge"))),
        ("Allows Rollups", _yes_no(cfg.get("allow_rollup_hdrs"))),
        ("Direct Get", _yes_no(cfg.get("allow_direct"))),
    ]
    if cfg.get("sealed"):
        conf.append(("Sealed", "yes"))
    state: list[tuple[str, Any]] = [
        ("Messages", V.format_count(st.get("messages", 0))),
        ("Bytes", V.format_bytes(st.get("bytes", 0))),
        ("First Sequence", f"{st.get('first_seq', 0):,} @ {V.format_time(st.get('first_ts'))}"),
        ("Last Sequence", f"{st.get('last_seq', 0):,} @ {V.format_time(st.get('last_ts'))}"),
        ("Deleted Messages", V.format_count(st.get("num_deleted", 0))),
        ("Number of Subjects", V.format_count(st.get("num_subjects", 0))),
        ("Active Consumers", V.format_count(st.get("consumer_count", 0))),
    ]
    lost = st.get("lost")
    if isinstance(lost, dict) and lost.get("msgs"):
        state.append(("Lost Messages", f"{len(lost['msgs']):,} ({V.format_bytes(lost.get('bytes', 0))})"))
    sections = [("Configuration", conf)]
    cluster = cluster_section(si.get("cluster"))
    if cluster:
        sections.append(("Cluster Information", cluster))
    if isinstance(si.get("mirror"), dict):
        sections.append(("Mirror Information", _copy_lines(si["mirror"])))
    for src in si.get("sources") or []:
        sections.append(("Source Information", _copy_lines(src)))
    print_sections([*sections, ("State", state)])


def _copy_lines(block: dict[str, Any]) -> list[tuple[str, Any]]:
    """A mirror's or a source's block of the info, as nats' `stream info` shows it."""
    lines: list[tuple[str, Any]] = [("Stream Name", block.get("name", ""))]
    if block.get("filter_subject"):
        lines.append(("Subject Filter", block["filter_subject"]))
    for tr in block.get("subject_transforms") or []:
        lines.append(("Subject Mapping", f"{tr.get('src') or '>'} to {tr.get('dest') or '>'}"))
    ext = block.get("external") or {}
    if ext.get("api"):
        lines.append(("Ext. API Prefix", ext["api"]))
    if ext.get("deliver"):
        lines.append(("Ext. Delivery Prefix", ext["deliver"]))
    lines.append(("Lag", V.format_count(block.get("lag", 0))))
    active = block.get("active", -1)
    lines.append(("Last Seen", "never" if active < 0 else V.format_duration(active, zero="now")))
    err = block.get("error")
    if isinstance(err, dict):
        lines.append(("Error", f"{err.get('description', '')} ({err.get('err_code', 0)})"))
    return lines


def _header_info(name: str, si: dict[str, Any]) -> None:
    info(f"Information for Stream {name} created {V.format_time(si.get('created'))}\n")
    format_stream_info(si)


# -- add / edit -------------------------------------------------------------------------------------


@app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[
        str | None, typer.Argument(help="Stream name (or from --config).", show_default=False)
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="JSON file with the stream configuration.")
    ] = None,
    subjects: Subjects = None,
    description: Description = None,
    storage: Storage = None,
    retention: Retention = None,
    discard: Discard = None,
    max_msgs: MaxMsgs = None,
    max_msgs_per_subject: MaxPerSubject = None,
    max_bytes: MaxBytes = None,
    max_age: MaxAge = None,
    max_msg_size: MaxMsgSize = None,
    max_consumers: MaxConsumers = None,
    dupe_window: DupeWindow = None,
    replicas: Replicas = None,
    allow_rollup: AllowRollup = None,
    deny_delete: DenyDelete = None,
    deny_purge: DenyPurge = None,
    allow_direct: AllowDirect = None,
    no_ack: NoAck = None,
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Accepted for nats CLI compatibility; jetpy never prompts.")
    ] = False,
    json_out: JsonOut = False,
) -> None:
    """Create a stream from flags (as `nats stream add`) or a JSON config file."""
    cfg: dict[str, Any] = load_json_config(config, "stream") if config is not None else {}
    if name is not None:
        if cfg.get("name") not in (None, name):
            usage(f"stream name {name!r} does not match {cfg['name']!r} in {config}")
        cfg["name"] = name
    if not cfg.get("name"):
        usage('a stream name is required (argument or "name" in --config)')
    parse_or_usage(V.check_stream_name, str(cfg["name"]), "stream")
    cfg.update(
        stream_flags_config(
            subjects=subjects,
            description=description,
            storage=storage,
            retention=retention,
            discard=discard,
            max_msgs=max_msgs,
            max_msgs_per_subject=max_msgs_per_subject,
            max_bytes=max_bytes,
            max_age=max_age,
            max_msg_size=max_msg_size,
            max_consumers=max_consumers,
            dupe_window=dupe_window,
            replicas=replicas,
            allow_rollup=allow_rollup,
            deny_delete=deny_delete,
            deny_purge=deny_purge,
            allow_direct=allow_direct,
            no_ack=no_ack,
        )
    )
    if config is None:
        cfg.setdefault("allow_direct", True)  # the nats CLI's default (a --config file says for itself)
    stream = str(cfg["name"])

    async def go(s: Session) -> dict[str, Any]:
        return await s.api(f"STREAM.CREATE.{stream}", cfg, what=f"could not create stream {stream}")

    si = run(options(ctx), go)
    if json_out:
        emit_json(si)
    else:
        info(f"Stream {stream} was created\n")
        format_stream_info(si)


@app.command("edit")
def edit(
    ctx: typer.Context,
    name: StreamArg,
    config: Annotated[
        Path | None, typer.Option("--config", help="JSON file with the new configuration (replaces it).")
    ] = None,
    subjects: Subjects = None,
    description: Description = None,
    discard: Discard = None,
    max_msgs: MaxMsgs = None,
    max_msgs_per_subject: MaxPerSubject = None,
    max_bytes: MaxBytes = None,
    max_age: MaxAge = None,
    max_msg_size: MaxMsgSize = None,
    max_consumers: MaxConsumers = None,
    dupe_window: DupeWindow = None,
    replicas: Replicas = None,
    allow_rollup: AllowRollup = None,
    deny_delete: DenyDelete = None,
    deny_purge: DenyPurge = None,
    allow_direct: AllowDirect = None,
    no_ack: NoAck = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the changes, change nothing.")] = False,
    force: Force = False,
    json_out: JsonOut = False,
) -> None:
    """Change a stream's configuration; prints the differences first."""
    parse_or_usage(V.check_stream_name, name, "stream")
    changes = load_json_config(config, "stream") if config is not None else {}
    if changes.get("name") not in (None, name):
        usage(f"stream name {name!r} does not match {changes['name']!r} in {config}")
    changes.update(
        stream_flags_config(
            subjects=subjects,
            description=description,
            discard=discard,
            max_msgs=max_msgs,
            max_msgs_per_subject=max_msgs_per_subject,
            max_bytes=max_bytes,
            max_age=max_age,
            max_msg_size=max_msg_size,
            max_consumers=max_consumers,
            dupe_window=dupe_window,
            replicas=replicas,
            allow_rollup=allow_rollup,
            deny_delete=deny_delete,
            deny_purge=deny_purge,
            allow_direct=allow_direct,
            no_ack=no_ack,
        )
    )
    changes.pop("name", None)
    if not changes:
        usage("nothing to change: give flags or --config")

    async def load(s: Session) -> dict[str, Any]:
        cur = await s.api(f"STREAM.INFO.{name}", what=f"could not load stream {name}")
        return cur.get("config") or {}

    current = run(options(ctx), load)
    diff = config_diff(current, changes)
    if diff and not json_out:
        info(f"Differences for stream {name}:")
        for key, old, new in diff:
            info(f"  ~ {key}: {format_value(old)} -> {format_value(new)}")
    si: dict[str, Any] | None = None
    if diff and not dry_run:
        confirm(f"Really edit stream {name}?", force)  # as the nats CLI: the diff, then the question

        async def update(s: Session) -> dict[str, Any]:
            new = {**current, **changes}
            return await s.api(f"STREAM.UPDATE.{name}", new, what=f"could not update stream {name}")

        si = run(options(ctx), update)
    if json_out:
        emit_json({"changes": {k: {"from": a, "to": b} for k, a, b in diff}, "updated": si})
        return
    if not diff:
        info(f"Stream {name} already has this configuration: nothing to change")
        return
    if si is None:
        info("\nDry run: nothing was changed")
        return
    info(f"\nStream {name} was updated\n")
    format_stream_info(si)


# -- read -------------------------------------------------------------------------------------------


@app.command("info")
def info_cmd(ctx: typer.Context, name: StreamArg, json_out: JsonOut = False) -> None:
    """Show a stream's configuration and state."""
    parse_or_usage(V.check_stream_name, name, "stream")

    async def go(s: Session) -> dict[str, Any]:
        return await s.api(f"STREAM.INFO.{name}", what=f"could not load stream {name}")

    si = run(options(ctx), go)
    if json_out:
        emit_json(si)
    else:
        _header_info(name, si)


@app.command("ls")
def ls(
    ctx: typer.Context,
    subject: Annotated[
        str | None, typer.Option("--subject", help="Only streams storing this subject.")
    ] = None,
    names: Annotated[bool, typer.Option("--names", "-n", help="Only the names, one per line.")] = False,
    json_out: JsonOut = False,
) -> None:
    """List streams."""
    body: dict[str, Any] = {"subject": subject} if subject else {}

    async def go(s: Session) -> list[Any]:
        if names:
            return await s.paged("STREAM.NAMES", "streams", body)
        return await s.paged("STREAM.LIST", "streams", body)

    items = run(options(ctx), go)
    if names:
        names_sorted = sorted(str(n) for n in items)
        if json_out:
            emit_json(names_sorted)
        else:
            for n in names_sorted:
                info(n)
        return
    items.sort(key=lambda si: str((si.get("config") or {}).get("name", "")))
    if listed_elsewhere(items, json_out, "No streams defined"):
        return
    rows = []
    for si in items:
        cfg, st = si.get("config") or {}, si.get("state") or {}
        rows.append(
            (
                cfg.get("name", ""),
                cfg.get("description") or "",
                V.format_time(si.get("created")),
                V.format_count(st.get("messages", 0)),
                V.format_bytes(st.get("bytes", 0)),
                V.format_time(st.get("last_ts")) if st.get("messages") else "never",
            )
        )
    print_table(
        "Streams",
        ["Name", "Description", "Created", "Messages", "Size", "Last Message"],
        rows,
        right=("Messages", "Size"),
    )


@app.command("subjects")
def subjects_cmd(
    ctx: typer.Context,
    name: StreamArg,
    filter_subject: Annotated[str, typer.Argument(help="Only subjects matching this filter.")] = ">",
    sort: Annotated[
        str, typer.Option("--sort", help="Order by subject (name) or by messages (count).")
    ] = "name",
    json_out: JsonOut = False,
) -> None:
    """Per-subject message counts of a stream (as `nats stream subjects`)."""
    parse_or_usage(V.check_stream_name, name, "stream")
    parse_or_usage(V.check_subject, filter_subject, "filter")
    if sort not in ("name", "count", "subject", "messages"):
        usage(f"--sort: invalid value {sort!r} (choose from name, count)")

    async def go(s: Session) -> dict[str, int]:
        counts: dict[str, int] = {}
        while True:  # nats-server pages large subject maps (total/offset/limit)
            resp = await s.api(
                f"STREAM.INFO.{name}",
                {"subjects_filter": filter_subject, "offset": len(counts)},
                what=f"could not load stream {name}",
            )
            page = (resp.get("state") or {}).get("subjects") or {}
            new = {k: int(v) for k, v in page.items() if k not in counts}
            counts.update(new)
            if not new or len(counts) >= int(resp.get("total") or 0):
                return counts

    counts = run(options(ctx), go)
    if json_out:
        emit_json(dict(sorted(counts.items())))
        return
    if not counts:
        info(f"No subjects found matching {filter_subject} in stream {name}")
        return
    if sort in ("count", "messages"):
        items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    else:
        items = sorted(counts.items())
    total = sum(counts.values())
    print_table(
        f"{len(counts):,} Subjects in stream {name}",
        ["Subject", "Messages"],
        [(k, f"{v:,}") for k, v in items],
        right=("Messages",),
        footer=f"Total: {total:,} messages in {len(counts):,} subjects",
    )


# -- delete -----------------------------------------------------------------------------------------


@app.command("rm")
def rm(ctx: typer.Context, name: StreamArg, force: Force = False) -> None:
    """Delete a stream and all its messages."""
    parse_or_usage(V.check_stream_name, name, "stream")
    confirm(f"Really delete stream {name}?", force)

    async def go(s: Session) -> None:
        await s.api(f"STREAM.DELETE.{name}", what=f"could not delete stream {name}")

    run(options(ctx), go)
    info(f"Stream {name} was deleted")


@app.command("purge")
def purge(
    ctx: typer.Context,
    name: StreamArg,
    subject: Annotated[str | None, typer.Option("--subject", help="Only messages on this subject.")] = None,
    seq: Annotated[
        int | None, typer.Option("--seq", min=1, help="Purge up to (not including) this sequence.")
    ] = None,
    keep: Annotated[int | None, typer.Option("--keep", min=0, help="Keep this many newest messages.")] = None,
    force: Force = False,
    json_out: JsonOut = False,
) -> None:
    """Remove messages from a stream (all, or by subject, up to a sequence, or keeping the newest N)."""
    parse_or_usage(V.check_stream_name, name, "stream")
    if seq is not None and keep is not None:
        usage("--seq and --keep are exclusive")
    body: dict[str, Any] = {}
    if subject:
        body["filter"] = parse_or_usage(V.check_subject, subject, "--subject")
    if seq is not None:
        body["seq"] = seq
    if keep is not None:
        body["keep"] = keep
    confirm(f"Really purge stream {name}?", force)

    async def go(s: Session) -> dict[str, Any]:
        resp = await s.api(f"STREAM.PURGE.{name}", body, what=f"could not purge stream {name}")
        return {"purged": int(resp.get("purged") or 0)}

    with busy(f"Purging stream {name}"):  # a big stream takes a while: a live spinner on a terminal
        res = run(options(ctx), go)
    if json_out:
        emit_json(res)
    else:
        info(f"Purged {res['purged']:,} messages from stream {name}")


# -- messages ---------------------------------------------------------------------------------------


def _decode_msg(m: dict[str, Any]) -> dict[str, Any]:
    """A MSG.GET ``message`` with headers parsed and data decoded."""
    data = base64.b64decode(m.get("data") or "")
    headers: dict[str, list[str]] = {}
    raw_hdr = base64.b64decode(m.get("hdrs") or "")
    for line in raw_hdr.decode(errors="replace").split("\r\n")[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers.setdefault(k.strip(), []).append(v.strip())
    return {
        "subject": m.get("subject", ""),
        "seq": m.get("seq", 0),
        "time": m.get("time", ""),
        "headers": headers,
        "data": data,
    }


def _print_msg(stream: str, m: dict[str, Any], raw: bool) -> None:
    if raw:
        sys.stdout.buffer.write(m["data"] + b"\n")
        sys.stdout.flush()
        return
    info(f"[{m['seq']}] Subject: {m['subject']} Received: {V.format_time(m['time'])}")
    for k, vs in m["headers"].items():
        for v in vs:
            info(f"  {k}: {v}")
    info("")
    sys.stdout.flush()
    sys.stdout.buffer.write(m["data"] + b"\n\n")
    sys.stdout.flush()


def _json_msg(stream: str, m: dict[str, Any]) -> dict[str, Any]:
    try:
        data: Any = m["data"].decode()
    except UnicodeDecodeError:
        data = {"base64": base64.b64encode(m["data"]).decode()}
    return {
        "stream": stream,
        "seq": m["seq"],
        "subject": m["subject"],
        "time": m["time"],
        "headers": m["headers"],
        "data": data,
    }


@app.command("get")
def get(
    ctx: typer.Context,
    name: StreamArg,
    seq: Annotated[int | None, typer.Argument(min=1, help="Sequence to get.", show_default=False)] = None,
    last_for: Annotated[
        str | None, typer.Option("--last-for", help="The last message on this subject.")
    ] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Only the payload.")] = False,
    json_out: JsonOut = False,
) -> None:
    """Get one message by sequence, or the last one on a subject."""
    parse_or_usage(V.check_stream_name, name, "stream")
    if (seq is None) == (last_for is None):
        usage("give a sequence or --last-for SUBJECT (one of them)")
    body: dict[str, Any] = {"seq": seq} if seq is not None else {"last_by_subj": last_for}

    async def go(s: Session) -> dict[str, Any]:
        resp = await s.api(f"STREAM.MSG.GET.{name}", body, what=f"could not get message from stream {name}")
        return _decode_msg(resp.get("message") or {})

    m = run(options(ctx), go)
    if json_out:
        emit_json(_json_msg(name, m))
    else:
        _print_msg(name, m, raw)


@app.command("view")
def view(
    ctx: typer.Context,
    name: StreamArg,
    subject: Annotated[str, typer.Option("--subject", help="Only messages on this subject (filter).")] = ">",
    since: Annotated[int, typer.Option("--since", min=1, help="Start at this sequence.")] = 1,
    count: Annotated[
        int, typer.Option("--count", "-n", min=0, help="At most this many (0: to the end).")
    ] = 0,
    raw: Annotated[bool, typer.Option("--raw", help="Only the payloads, one per line.")] = False,
    json_out: JsonOut = False,
) -> None:
    """Print a stream's messages in order (no consumer is created)."""
    parse_or_usage(V.check_stream_name, name, "stream")
    parse_or_usage(V.check_subject, subject, "--subject")
    as_json = json_out

    async def go(s: Session) -> int:
        import json

        seq = since
        n = 0
        while count == 0 or n < count:
            try:
                resp = await s.api(
                    f"STREAM.MSG.GET.{name}",
                    {"seq": seq, "next_by_subj": subject},
                    what=f"could not read stream {name}",
                )
            except Exception as exc:
                if getattr(exc, "err_code", None) == 10037:  # no message found: the end
                    break
                raise
            m = _decode_msg(resp.get("message") or {})
            if as_json:
                sys.stdout.write(json.dumps(_json_msg(name, m)) + "\n")
            else:
                _print_msg(name, m, raw)
            n += 1
            seq = int(m["seq"]) + 1
        return n

    n = run(options(ctx), go)
    if n == 0 and not as_json and not raw:
        info(f"No messages in stream {name} matching {subject} from sequence {since}")


app.command("report")(stream_report)  # the nats CLI's `stream report` (cli/reports.py)
app.add_typer(
    stream_cluster_app(format_stream_info),
    name="cluster",
    help="Manage a replicated stream's Raft group (step-down, peer-remove).",
)
