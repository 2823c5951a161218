"""Config operator mode: the ``operator``, ``trusted_keys``, ``resolver`` and
``resolver_preload`` keys, with nats-server's names and checks.

Owns reading these keys into ``ServerOptions.operator`` and what operator mode makes of the rest
of the configuration once the file is read (:func:`finish_operator`): the accounts of the
preloaded account JWTs become the server's accounts (named by their public keys, with the
JetStream limits of their JWTs), the system account defaults to the one the operator JWT
names, and what operator mode excludes is refused with nats-server's words (users or accounts
configured directly, ``no_auth_user``). Only the ``MEMORY`` resolver is built: ``full``,
``cache`` and ``URL(...)`` resolvers are refused by name. The trust checks themselves are
``operator``'s.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Final

from jetpy.server.conf_format import ConfigError, ConfigList, ConfigMap, Position
from jetpy.server.config_values import Context, describe, q, to_str
from jetpy.server.operator import OperatorError, TrustedAccounts, read_operator_jwt
from jetpy.server.options import AccountOptions, OperatorOptions

__all__ = ["HANDLERS", "finish_operator"]

MEMORY: Final = "MEMORY"


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
        kind = next((str(v) for k, v in value.items() if k.lower() == "type"), "")
        raise ConfigError(
            f"resolver of type {q(kind or 'full')} (an account server or directory resolver) is not "
            "supported by jetpy: use resolver: MEMORY with resolver_preload",
            pos,
        )
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
    if op.resolver != MEMORY:
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
        o.accounts = [
            AccountOptions(name, trusted.js_limits(name), trusted.exports(name), trusted.imports(name))
            for name in trusted.accounts
        ]
    except OperatorError as e:
        raise ConfigError(str(e), ctx.resolver_at or pos) from e
    named = trusted.system_account
    if o.system_account and named and o.system_account != named:
        raise ConfigError("system_account in config and operator JWT must be identical", pos)
    if not o.system_account and not o.no_system_account:
        o.system_account = named
    if o.system_account and o.system_account not in trusted.accounts:
        raise ConfigError("error resolving system account: account missing", pos)
