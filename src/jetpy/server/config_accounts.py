"""Config accounts: the ``accounts {}`` block, ``system_account`` and subject ``mappings``,
applied to ``ServerOptions`` with nats-server's names and errors.

An account is ``NAME: { users, jetstream, exports, imports, mappings, default_permissions }``
(or just a name in an array: ``accounts: [A, B]``). Its users go to ``ServerOptions.users``
naming the account; the rest is one :class:`~jetpy.server.options.AccountOptions`. The checks
that need every account (an import of an account that does not exist or of something it does
not export to the importer, import cycles, the system account) are :func:`check_accounts`',
made once the whole file is read, with nats-server's texts (``Error adding stream import
"foo": stream import not authorized``). What jetpy does not carry out is refused by name: an
account's ``nkey`` (operator mode), ``limits``, ``msg_trace``, JetStream ``cluster_traffic``,
export ``latency``, ``allow_trace`` and ``account_token_position``, import ``share`` and
``allow_trace``.
"""

from __future__ import annotations

from typing import Any, Final

from jetpy.jetstream.models import AccountLimits
from jetpy.jetstream.transform import mapping_error
from jetpy.server import config_security as security
from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position
from jetpy.server.config_values import Context, describe, go_duration, q, to_bool, to_int, to_str
from jetpy.server.options import (
    DEFAULT_SYSTEM_ACCOUNT,
    GLOBAL_ACCOUNT,
    RESPONSE_TYPES,
    AccountOptions,
    Export,
    Import,
    Mapping,
    MappingDestination,
    ServerOptions,
)
from jetpy.subjects import is_valid_subject, subject_is_subset, subjects_overlap

__all__ = [
    "accounts",
    "check_accounts",
    "jetstream_limits",
    "mappings",
    "system_account",
    "system_account_name",
]

MAX_WEIGHT: Final = 100  # a mapping destination's weight is a percentage

# nats-server options of these blocks jetpy does not carry out: refused, never ignored
_ACCOUNT_UNSUPPORTED: Final = frozenset({"nkey", "limits", "msg_trace", "trace_dest"})
_EXPORT_UNSUPPORTED: Final = frozenset({"latency", "allow_trace", "account_token_position"})
_IMPORT_UNSUPPORTED: Final = frozenset({"share", "allow_trace"})

# an account's jetstream {} keys (nats-server's aliases) -> AccountLimits field
_JS_SIZES: Final = {
    "max_memory": "max_memory",
    "max_mem": "max_memory",
    "mem": "max_memory",
    "memory": "max_memory",
    "max_store": "max_storage",
    "max_file": "max_storage",
    "max_disk": "max_storage",
    "store": "max_storage",
    "disk": "max_storage",
    "max_streams": "max_streams",
    "streams": "max_streams",
    "max_consumers": "max_consumers",
    "consumers": "max_consumers",
    "max_ack_pending": "max_ack_pending",
    "mem_max_stream_bytes": "memory_max_stream_bytes",
    "memory_max_stream_bytes": "memory_max_stream_bytes",
    "disk_max_stream_bytes": "storage_max_stream_bytes",
    "store_max_stream_bytes": "storage_max_stream_bytes",
}
_JS_REQUIRED: Final = frozenset({"max_bytes_required", "max_stream_bytes", "max_bytes"})


def system_account_name(opts: ServerOptions) -> str:
    """The system account's name ("" when ``no_system_account``)."""
    if opts.no_system_account and not opts.system_account:
        return ""
    return opts.system_account or DEFAULT_SYSTEM_ACCOUNT


# -- accounts {} ------------------------------------------------------------------------------


def accounts(ctx: Context, key: str, value: Any, pos: Position) -> None:
    found: list[AccountOptions] = []
    users: list[Any] = []
    if isinstance(value, ConfigList):  # accounts: [A, B]: accounts with nothing in them
        for i, name in enumerate(value):
            if not isinstance(name, str):
                raise ConfigError(f"Expected an account name, got {describe(name)}", value.positions[i])
            found.append(AccountOptions(name))
    elif isinstance(value, ConfigMap):
        for name, body in value.items():
            apos = value.position(name)
            try:
                acc, acc_users = _account(ctx, name, body, apos)
            except ConfigError as e:
                ctx.errors.append(e)
                continue
            found.append(acc)
            users.extend(acc_users)
    else:
        raise ConfigError(f"Expected map to define accounts, got {describe(value)}", pos)
    seen = {u.nkey or u.user for u in ctx.opts.users}
    for u in users:
        ident = u.nkey or u.user
        if ident in seen:
            raise ConfigError(f"Duplicate {'nkey' if u.nkey else 'user'} {q(ident)} detected", pos)
        seen.add(ident)
    ctx.opts.accounts = found
    ctx.opts.users = [*ctx.opts.users, *users]
    ctx.accounts_at = pos


def _account(ctx: Context, name: str, body: Any, pos: Position) -> tuple[AccountOptions, list[Any]]:
    if name == GLOBAL_ACCOUNT:
        raise ConfigError(
            f"{q(name)} is the global account: its users belong in the authorization block", pos
        )
    if not isinstance(body, ConfigMap):
        raise ConfigError(f"Expected map entry for account {q(name)}, got {describe(body)}", pos)
    js: AccountLimits | None = None
    exports: list[Export] = []
    imports: list[Import] = []
    maps: tuple[Mapping, ...] = ()
    users: list[Any] = []
    default_perms: dict[str, object] | None = None
    for k, v in body.items():
        kpos = body.position(k)
        lk = k.lower()
        try:
            if lk == "users":
                users = security.users_list(k, v, kpos)
            elif lk == "jetstream":
                js = jetstream_limits(k, v, kpos)
            elif lk == "exports":
                exports = _exports(k, v, kpos)
            elif lk == "imports":
                imports = _imports(k, v, kpos)
            elif lk in ("mappings", "maps"):
                maps = _mappings(k, v, kpos)
            elif lk in ("default_permissions", "default_permission"):
                default_perms = security.permissions(k, v, kpos)
            elif lk in _ACCOUNT_UNSUPPORTED:
                raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
            elif k not in body.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        except ConfigError as e:
            ctx.errors.append(e)
    for u in users:
        u.account = name
        if u.permissions is None and default_perms is not None:
            u.permissions = dict(default_perms)
    return AccountOptions(name, js, tuple(exports), tuple(imports), maps), users


def jetstream_limits(key: str, value: Any, pos: Position) -> AccountLimits | None:
    """An account's ``jetstream``: enabled (no limits), disabled (None) or its limits."""
    if isinstance(value, bool):
        return AccountLimits() if value else None
    if isinstance(value, str):
        word = value.lower()
        if word not in ("enabled", "enable", "disabled", "disable"):
            raise ConfigError(f"Expected 'enabled' or 'disabled' for string value, got {q(value)}", pos)
        return AccountLimits() if word.startswith("enable") else None
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected map, bool or string to define JetStream, got {describe(value)}", pos)
    fields: dict[str, Any] = {}
    for k, v in value.items():
        kpos = value.position(k)
        lk = k.lower()
        if lk in _JS_SIZES:
            fields[_JS_SIZES[lk]] = to_int(k, v, kpos)
        elif lk in _JS_REQUIRED:
            if not isinstance(v, bool):
                raise ConfigError(f"Expected a parseable bool for {q(k)}, got {v}", kpos)
            fields["max_bytes_required"] = v
        elif lk == "cluster_traffic":
            raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
        elif k not in value.variables_used:
            raise ConfigError(f'unknown field "{k}"', kpos)
    return AccountLimits(**fields)


def _subject(key: str, value: Any, pos: Position) -> str:
    subject = to_str(key, value, pos)
    if not is_valid_subject(subject):
        raise ConfigError(f"Subject {q(subject)} is not a valid subject", pos)
    return subject


def _exports(key: str, value: Any, pos: Position) -> list[Export]:
    if not isinstance(value, ConfigList):
        raise ConfigError(f"Exports should be an array, got {describe(value)}", pos)
    out: list[Export] = []
    for i, entry in enumerate(value):
        epos = value.positions[i]
        if not isinstance(entry, ConfigMap):
            raise ConfigError(f"Export Items should be a map with type entry, got {describe(entry)}", epos)
        kind = subject = rtype = ""
        threshold: float | None = None
        allowed: tuple[str, ...] | None = None
        for k, v in entry.items():
            kpos = entry.position(k)
            lk = k.lower()
            if lk in ("stream", "service"):
                if kind:
                    raise ConfigError(f"Detected {lk} {q(str(v))} but already saw a {kind}", kpos)
                kind, subject = lk, _subject(k, v, kpos)
            elif lk in ("response", "response_type"):
                rtype = to_str(k, v, kpos).lower()
                if rtype not in RESPONSE_TYPES:
                    raise ConfigError(f"Unknown response type: {q(str(v))}", kpos)
            elif lk in ("threshold", "response_threshold", "response_max_time", "response_time"):
                threshold = go_duration(k, v, kpos)
                if threshold <= 0:
                    raise ConfigError(f"Invalid response threshold of {v}", kpos)
            elif lk == "accounts":
                allowed = _names(k, v, kpos)
            elif lk in _EXPORT_UNSUPPORTED:
                raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
            elif k not in entry.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        if not kind:
            raise ConfigError("Export needs a stream or a service subject", epos)
        if kind == "stream" and (rtype or threshold is not None):
            raise ConfigError("Detected response directive on non-service", epos)
        export = Export(kind, subject, allowed, rtype or "singleton")
        if threshold is not None:
            export = Export(kind, subject, allowed, rtype or "singleton", threshold)
        out.append(export)
    return out


def _names(key: str, value: Any, pos: Position) -> tuple[str, ...]:
    if not isinstance(value, ConfigList) or not all(isinstance(n, str) for n in value):
        raise ConfigError(f"Expected an array of account names for {q(key)}, got {describe(value)}", pos)
    return tuple(value)


def _imports(key: str, value: Any, pos: Position) -> list[Import]:
    if not isinstance(value, ConfigList):
        raise ConfigError(f"Imports should be an array, got {describe(value)}", pos)
    out: list[Import] = []
    for i, entry in enumerate(value):
        epos = value.positions[i]
        if not isinstance(entry, ConfigMap):
            raise ConfigError(f"Import Items should be a map with type entry, got {describe(entry)}", epos)
        kind = account = subject = to = prefix = ""
        for k, v in entry.items():
            kpos = entry.position(k)
            lk = k.lower()
            if lk in ("stream", "service"):
                if kind:
                    raise ConfigError(f"Detected {lk} but already saw a {kind}", kpos)
                kind = lk
                account, subject = _source(k, v, kpos)
            elif lk == "to":
                to = _subject(k, v, kpos)
            elif lk == "prefix":
                prefix = to_str(k, v, kpos)
            elif lk in _IMPORT_UNSUPPORTED:
                raise ConfigError(f'field "{k}" is not supported by jetpy yet', kpos)
            elif k not in entry.variables_used:
                raise ConfigError(f'unknown field "{k}"', kpos)
        if not kind:
            raise ConfigError("Import needs a stream or a service", epos)
        if kind == "service" and prefix:
            # nats-server takes it and ignores it: refused here rather than silently unused
            raise ConfigError('"prefix" applies to stream imports only (a service import takes "to")', epos)
        if prefix and not is_valid_subject(f"{prefix}.{subject}"):
            raise ConfigError(f"Prefix {q(prefix)} does not make a valid subject", epos)
        if to and (err := mapping_error(subject, to)) is not None:
            raise ConfigError(f"Error adding {kind} import {q(subject)}: {err}", epos)
        if kind == "stream" and to and prefix:
            raise ConfigError("A stream import takes a prefix or a to, not both", epos)
        out.append(Import(kind, account, subject, to, prefix))
    return out


def _source(key: str, value: Any, pos: Position) -> tuple[str, str]:
    if not isinstance(value, ConfigMap):
        raise ConfigError("Expect an account name and a subject", pos)
    account = subject = ""
    for k, v in value.items():
        kpos = value.position(k)
        lk = k.lower()
        if lk == "account":
            account = to_str(k, v, kpos)
        elif lk == "subject":
            subject = _subject(k, v, kpos)
        elif k not in value.variables_used:
            raise ConfigError(f'unknown field "{k}"', kpos)
    if not account or not subject:
        raise ConfigError("Expect an account name and a subject", pos)
    return account, subject


# -- mappings ---------------------------------------------------------------------------------


def mappings(ctx: Context, key: str, value: Any, pos: Position) -> None:
    """The top-level ``mappings``: the global account's."""
    ctx.opts.mappings = _mappings(key, value, pos)


def _mappings(key: str, value: Any, pos: Position) -> tuple[Mapping, ...]:
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected a map of subject mappings, got {describe(value)}", pos)
    out: list[Mapping] = []
    for src, dest in value.items():
        mpos = value.position(src)
        if not is_valid_subject(src):
            raise ConfigError(f"Subject {q(src)} is not a valid subject", mpos)
        dests: tuple[MappingDestination, ...]
        if isinstance(dest, str):
            dests = (MappingDestination(dest),)
        elif isinstance(dest, ConfigMap):
            dests = (_destination(dest, mpos),)
        elif isinstance(dest, ConfigList):
            dests = tuple(
                _destination(d, dest.positions[i])
                if isinstance(d, ConfigMap)
                else _no_entry(dest.positions[i])
                for i, d in enumerate(dest)
            )
        else:
            raise ConfigError("Expected an entry for the mapping destination", mpos)
        totals: dict[str, float] = {}
        for d in dests:
            err = mapping_error(src, d.subject)
            if err is not None:
                raise ConfigError(f"Error adding mapping for {q(src)} to {q(d.subject)} : {err}", mpos)
            totals[d.cluster] = totals.get(d.cluster, 0.0) + d.weight
        if any(total > MAX_WEIGHT for total in totals.values()):
            raise ConfigError(f"Error adding mapping for {q(src)} : total weight needs to be <= 100", mpos)
        out.append(Mapping(src, dests))
    return tuple(out)


def _no_entry(pos: Position) -> MappingDestination:
    raise ConfigError("Expected an entry for the mapping destination", pos)


def _destination(entry: ConfigMap, pos: Position) -> MappingDestination:
    subject = cluster = ""
    weight: float | None = None
    wpos = pos
    for k, v in entry.items():
        kpos = entry.position(k)
        lk = k.lower()
        if lk in ("dest", "destination"):
            subject = to_str(k, v, kpos)
        elif lk == "weight":
            wpos = kpos
            weight = _weight(v, kpos)
        elif lk == "cluster":
            cluster = to_str(k, v, kpos)
        else:
            raise ConfigError(f"Unknown field {q(k)} for mapping destination", kpos)
    if weight is None:
        raise ConfigError(f"Missing weight for mapping destination {q(subject)}", pos)
    if not 0 <= weight <= MAX_WEIGHT:
        raise ConfigError(f"Invalid weight {weight:g} for mapping destination", wpos)
    return MappingDestination(subject, weight, cluster)


def _weight(value: Any, pos: Position) -> float:
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip().removesuffix("%")
        try:
            return float(int(text))
        except ValueError:
            raise ConfigError(f"Invalid weight {q(value)} for mapping destination", pos) from None
    raise ConfigError(f"Unknown entry type for weight of {value}", pos)


# -- system_account ---------------------------------------------------------------------------


def system_account(ctx: Context, key: str, value: Any, pos: Position) -> None:
    ctx.opts.system_account = to_str(key, value, pos)


def no_system_account(ctx: Context, key: str, value: Any, pos: Position) -> None:
    ctx.opts.no_system_account = to_bool(key, value, pos)


# -- checks over every account ------------------------------------------------------------------


def check_accounts(opts: ServerOptions, pos: Position | None = None) -> None:
    """nats-server's checks once every account is known: imports name accounts that exist and
    subjects they export to the importer, service imports form no cycle, the system account
    exists (when named) and has no JetStream."""
    by_name = {a.name: a for a in opts.accounts}
    names = {*by_name, GLOBAL_ACCOUNT, DEFAULT_SYSTEM_ACCOUNT}
    for acc in opts.accounts:
        for imp in acc.imports:
            if imp.account not in names:
                raise ConfigError(f"{q(imp.account)} account not defined for {imp.kind} import", pos)
            exporter = by_name.get(imp.account)
            if exporter is None or not any(_authorizes(e, imp, acc.name) for e in exporter.exports):
                raise ConfigError(
                    f"Error adding {imp.kind} import {q(imp.subject)}: {imp.kind} import not authorized", pos
                )
    cycle = _service_cycle(opts.accounts)
    if cycle is not None:
        raise ConfigError(f"Error adding service import {q(cycle)}: import forms a cycle", pos)
    cycle = _stream_cycle(opts.accounts)
    if cycle is not None:
        raise ConfigError(f"Error adding stream import {q(cycle)}: import forms a cycle", pos)
    sys_name = system_account_name(opts)
    if opts.system_account and sys_name not in names:
        raise ConfigError("error resolving system account: account missing", pos)
    sys_acc = by_name.get(sys_name)
    if sys_acc is not None and sys_acc.jetstream is not None:
        raise ConfigError("Not allowed to enable JetStream on the system account", pos)


def _authorizes(export: Export, imp: Import, importer: str) -> bool:
    """Does ``export`` let ``importer`` import ``imp`` (same kind, the import's subject within
    the export's, and the importer among the accounts of a private export)?"""
    if export.kind != imp.kind or not subject_is_subset(imp.subject, export.subject):
        return False
    return export.accounts is None or importer in export.accounts


def _service_cycle(accs: list[AccountOptions]) -> str | None:
    """The subject of a service import that leads back to its own account, if any: a request
    would go round for ever."""
    edges: dict[str, list[tuple[str, str, str]]] = {}  # importer -> (local subject, exporter, subject)
    for acc in accs:
        for imp in acc.imports:
            if imp.kind == "service":
                edges.setdefault(acc.name, []).append((imp.to or imp.subject, imp.account, imp.subject))
    return _cycle(edges)


def _stream_cycle(accs: list[AccountOptions]) -> str | None:
    """The subject of a stream import that comes back to the account it was published in."""
    # a message published in the exporter on ``subject`` reaches the importer on its local subject
    edges: dict[str, list[tuple[str, str, str]]] = {}  # exporter -> (subject, importer, local subject)
    for acc in accs:
        for imp in acc.imports:
            if imp.kind == "stream":
                local = f"{imp.prefix}.{imp.subject}" if imp.prefix else imp.to or imp.subject
                edges.setdefault(imp.account, []).append((imp.subject, acc.name, local))
    return _cycle(edges)


def _cycle(edges: dict[str, list[tuple[str, str, str]]]) -> str | None:
    """A path ``account --subject--> account`` through edges whose subjects overlap that comes
    back to where it started; the first edge's subject."""
    for start, first_edges in edges.items():
        for first in first_edges:
            stack = [(first[1], first[2], {start})]
            while stack:
                acc, subject, seen = stack.pop()
                if acc == start:
                    return first[0]
                if acc in seen:
                    continue
                for src, nxt, nxt_subject in edges.get(acc, ()):
                    if subjects_overlap(subject, src):
                        stack.append((nxt, nxt_subject, seen | {acc}))
    return None
