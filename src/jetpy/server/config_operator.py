"""Config operator mode: the ``operator``, ``trusted_keys``, ``resolver`` and
``resolver_preload`` keys, with nats-server's names and checks.

Owns reading these keys into ``ServerOptions.operator`` and what operator mode makes of the rest
of the configuration once the file is read (:func:`finish_operator`): the accounts of the
preloaded account JWTs become the server's accounts (named by their public keys, with the
JetStream limits of their JWTs), the system account defaults to the one the operator JWT
names, and what operator mode excludes is refused with nats-server's words (users or accounts
configured directly, ``no_auth_user``). The ``MEMORY`` resolver and the ``full`` one
(``resolver { type: full, dir }``: the accounts of its directory's JWTs are the server's too,
see ``resolver``) are built; ``cache`` and ``URL(...)`` resolvers, ``allow_delete: true`` and a
full resolver with a cluster are refused by name. The trust checks themselves are
``operator``'s.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Final

from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position
from jetpy.server.config_values import Context, describe, go_duration, q, to_bool, to_int, to_str
from jetpy.server.jwt_dir import JwtDirectory
from jetpy.server.operator import OperatorError, TrustedAccounts, read_operator_jwt
from jetpy.server.options import OperatorOptions, ServerOptions

__all__ = ["FULL", "HANDLERS", "MEMORY", "check_resolver_options", "finish_operator"]

log = logging.getLogger("jetpy.server")

MEMORY: Final = "MEMORY"
FULL: Final = "full"
DEFAULT_LIMIT: Final = 0  # account JWTs a full resolver holds at most (0: no limit)


def _opts(ctx: Context) -> OperatorOptions:
    return ctx.opts.operator or OperatorOptions()


def _strings(key: str, value: Any, pos: Position) -> list[str]:
    items = list(value) if isinstance(value, ConfigList) else [value]
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f'invalid value for "{key}": expected a string, got {describe(item)}', pos)
        out.append(item)
    return out


def _operator(ctx: Context, key: str, value: Any, pos: Position) -> None:
    tokens = []
    for entry in _strings(key, value, pos):
        path = entry
        if not entry.strip().startswith("eyJ") and not Path(entry).exists() and pos.source:
            beside = Path(pos.source).parent / entry  # relative to the configuration file
            if beside.exists():
                path = str(beside)
        try:
            tokens.append(read_operator_jwt(path))
        except OperatorError as e:
            raise ConfigError(str(e), pos) from e
    ctx.opts.operator = dataclasses.replace(_opts(ctx), operator_jwts=tuple(tokens))
    ctx.operator_at = pos


def _trusted_keys(ctx: Context, key: str, value: Any, pos: Position) -> None:
    keys = [k for entry in _strings(key, value, pos) for k in entry.split()]
    ctx.opts.operator = dataclasses.replace(_opts(ctx), trusted_keys=tuple(keys))
    ctx.operator_at = ctx.operator_at or pos


def _resolver(ctx: Context, key: str, value: Any, pos: Position) -> None:
    if isinstance(value, ConfigMap):
        _directory_resolver(ctx, value, pos)
        return
    text = to_str(key, value, pos).strip()
    if text.upper().startswith("URL("):
        raise ConfigError(
            "resolver URL(...) (an account server) is not supported by jetpy: "
            "use resolver: MEMORY with resolver_preload",
            pos,
        )
    if text.upper() != MEMORY:
        raise ConfigError(f"resolver {q(text)} is not supported: expected MEMORY", pos)
    ctx.opts.operator = dataclasses.replace(_opts(ctx), resolver=MEMORY)
    ctx.resolver_at = pos


def _directory_resolver(ctx: Context, block: ConfigMap, pos: Position) -> None:
    """``resolver { type: full, dir, allow_delete, interval, timeout, limit }``."""
    kind, path, limit = FULL, "", DEFAULT_LIMIT
    for name, v in block.items():
        at = block.position(name)
        k = name.lower()
        if k == "type":
            kind = to_str(name, v, at).lower()
            if kind not in (FULL, "cache"):
                raise ConfigError(f"resolver type {q(kind)} is not supported", at)
        elif k == "dir":
            path = to_str(name, v, at)
        elif k == "allow_delete":
            if to_bool(name, v, at):
                raise ConfigError(
                    "resolver allow_delete: true is not supported by jetpy ($SYS.REQ.CLAIMS.DELETE "
                    "is not built)",
                    at,
                )
        elif k in ("interval", "timeout"):
            # the pace of the sync between clustered servers and of a lookup there: a full
            # resolver on a server without routes (jetpy refuses routes with it) makes neither
            go_duration(name, v, at)
        elif k == "limit":
            limit = to_int(name, v, at)
        else:
            raise ConfigError(f"resolver {q(name)} is not supported by jetpy", at)
    if kind != FULL:
        raise ConfigError(
            'resolver of type "cache" is not supported by jetpy: use type: full (or MEMORY)', pos
        )
    if not path:
        raise ConfigError("resolver of type full needs a dir", pos)
    ctx.opts.operator = dataclasses.replace(
        _opts(ctx), resolver=FULL, resolver_dir=path, resolver_limit=limit
    )
    ctx.resolver_at = pos


def _preload(ctx: Context, key: str, value: Any, pos: Position) -> None:
    if not isinstance(value, ConfigMap):
        raise ConfigError(f"Expected map to define resolver_preload, got {describe(value)}", pos)
    found: list[tuple[str, str]] = []
    for name, token in value.items():
        if not isinstance(token, str) or token.count(".") != 2:
            raise ConfigError("invalid account JWT", value.position(name))
        found.append((name, token.strip()))
    ctx.opts.operator = dataclasses.replace(_opts(ctx), preload=tuple(found))
    ctx.resolver_at = ctx.resolver_at or pos


HANDLERS: Final = {
    "operator": _operator,
    "operators": _operator,
    "root_operator": _operator,
    "root_operators": _operator,
    "trusted_keys": _trusted_keys,
    "trusted": _trusted_keys,
    "resolver": _resolver,
    "account_resolver": _resolver,
    "accounts_resolver": _resolver,
    "resolver_preload": _preload,
}


def check_resolver_options(opts: ServerOptions) -> None:
    """At start (flags applied): the full resolver on a clustered server is refused."""
    if opts.operator is not None and opts.operator.resolver == FULL and opts.cluster.enabled:
        raise ConfigError(
            "resolver of type full with a cluster is not supported by jetpy: the resolvers' "
            "sync of account JWTs over routes is not built"
        )


def finish_operator(ctx: Context) -> None:
    """After the whole file: operator mode's checks, its accounts and its system account."""
    o = ctx.opts
    op = o.operator
    if op is None:
        return
    pos = ctx.operator_at or ctx.resolver_at or Position("", 1, 1)
    if not op.operator_jwts and not op.trusted_keys:
        raise ConfigError(
            "resolver and resolver_preload need trusted operators (operator or trusted_keys)", pos
        )
    if o.accounts:
        raise ConfigError("operators do not allow Accounts to be configured directly", pos)
    if o.users or o.username or o.token:
        raise ConfigError("operators do not allow users to be configured directly", pos)
    if o.no_auth_user:
        raise ConfigError("no_auth_user not compatible with Trusted Operator", pos)
    if op.resolver not in (MEMORY, FULL):
        raise ConfigError(
            "operator mode needs an account resolver: jetpy has resolver: MEMORY (with "
            "resolver_preload); the account server URL resolver is not supported",
            pos,
        )
    try:
        trusted = TrustedAccounts(op)
    except OperatorError as e:
        raise ConfigError(str(e), ctx.resolver_at or pos) from e
    try:
        for name in trusted.accounts:
            trusted.account_options(name)  # the preloaded accounts must all be usable
    except OperatorError as e:
        raise ConfigError(str(e), ctx.resolver_at or pos) from e
    if op.resolver == FULL:  # in the order of their names, as the resolver keeps them at runtime
        o.operator = op = _with_directory(op, trusted)
    names = sorted(trusted.accounts) if op.resolver == FULL else list(trusted.accounts)
    o.accounts = [trusted.account_options(name) for name in names]
    named = trusted.system_account
    if o.system_account and named and o.system_account != named:
        raise ConfigError("system_account in config and operator JWT must be identical", pos)
    if not o.system_account and not o.no_system_account:
        o.system_account = named
    if o.system_account and o.system_account not in trusted.accounts:
        raise ConfigError("error resolving system account: account missing", pos)


def _with_directory(op: OperatorOptions, trusted: TrustedAccounts) -> OperatorOptions:
    """The full resolver's options with the account JWTs of its directory added to the
    preloaded ones (the newer of two for one account). A JWT there that cannot be used (not
    issued by a trusted operator, damaged, with what jetpy does not carry out) is left in the
    directory and skipped with a warning, as it would be refused were it pushed now."""
    tokens = dict(op.preload)
    for public, token in JwtDirectory(op.resolver_dir).load().items():
        try:
            claims = trusted.verify(public, token)
        except OperatorError as e:
            log.warning("resolver directory %s: account JWT skipped: %s", op.resolver_dir, e)
            continue
        known = trusted.accounts.get(public)
        if known is not None and known.iat >= claims.iat:
            continue
        trusted.accounts[public] = claims
        tokens[public] = token
    for public in [p for p in tokens if p not in dict(op.preload)]:
        try:
            trusted.account_options(public)
        except OperatorError as e:
            log.warning("resolver directory %s: account JWT skipped: %s", op.resolver_dir, e)
            del trusted.accounts[public], tokens[public]
    return dataclasses.replace(op, preload=tuple(sorted(tokens.items())))
