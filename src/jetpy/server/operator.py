"""Operator mode (decentralized JWT auth): the trusted operators, the accounts the MEMORY
resolver holds, and logging a user in with its user JWT.

Owns the trust chain nats-server checks: operator JWTs (self-signed) or ``trusted_keys`` are
trusted; an account JWT is trusted when an operator or one of its signing keys issued it; a
user JWT when its account (or a signing key of the account, named by ``issuer_account``)
issued it, neither has expired nor is not yet valid, the account has not revoked it, and the
client signed the connection's nonce with the user's key (unless the JWT is a bearer token).
The MEMORY resolver is ``resolver_preload``: every account is known when the server starts;
the public exports and imports of the account JWTs are carried out as the ``accounts {}``
block's (private exports with activation tokens are refused by name).
A user's permissions come from its JWT (or, when it has none, the account's
``default_permissions``), its limits (subscriptions, payload) are the tighter of its own and
its account's, and the account's ``conn`` limit bounds the connections in it.

Every refusal here ends as nats-server's ``Authorization Violation``; the reason goes to the
log only. Knows nothing of connections or sockets.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import nkeys

from jetpy.jetstream.models import AccountLimits as JsLimits
from jetpy.server.jwt_claims import (
    AccountClaims,
    JwtError,
    OperatorClaims,
    UserClaims,
    decode,
    is_public_key,
    verify_nonce,
)
from jetpy.server.options import (
    DEFAULT_RESPONSE_THRESHOLD,
    RESPONSE_TYPES,
    Export,
    Import,
    OperatorOptions,
)
from jetpy.server.permissions import Permissions

__all__ = [
    "CONNECTION_TYPES",
    "ConnLimits",
    "JwtUser",
    "OperatorError",
    "TrustedAccounts",
    "read_operator_jwt",
]

CONNECTION_TYPES: Final = frozenset(
    {"STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS"}
)


class OperatorError(ValueError):
    """An operator-mode configuration nats-server would not start with (its words)."""


@dataclass(frozen=True, slots=True)
class ConnLimits:
    """What a JWT user's connection may do: subscriptions and payload (-1: no limit of its own),
    connections in its account (-1: no limit), and when its authentication expires (0: never)."""

    max_subs: int = -1
    max_payload: int = -1
    max_account_conns: int = -1
    expires: float = 0.0
    account_expires: bool = False  # the account JWT expires first (not the user's)


@dataclass(frozen=True, slots=True)
class JwtUser:
    """A user logged in with a user JWT: its public key, name, account, permissions, limits."""

    public: str
    name: str
    account: str
    permissions: Permissions | None
    limits: ConnLimits


def read_operator_jwt(value: str) -> str:
    """The JWT an ``operator`` entry names: the token itself, or the file holding it."""
    text = value.strip()
    if text.startswith("eyJ"):
        return text
    try:
        return Path(value).read_text().strip()
    except OSError as e:
        raise OperatorError(f"error parsing operator JWT: {e.strerror}: {value}") from e


def _tighter(a: int, b: int) -> int:
    """The tighter of two limits where -1 (any negative) is none."""
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)


def _account_js_limits(claims: AccountClaims) -> JsLimits | None:
    lim = claims.nats.limits
    if not lim.jetstream_enabled:
        return None
    return JsLimits(
        max_memory=lim.mem_storage,
        max_storage=lim.disk_storage,
        max_streams=lim.streams,
        max_consumers=lim.consumer,
        max_ack_pending=lim.max_ack_pending,
        memory_max_stream_bytes=lim.mem_max_stream_bytes,
        storage_max_stream_bytes=lim.disk_max_stream_bytes,
        max_bytes_required=lim.max_bytes_required,
    )


class TrustedAccounts:
    """The trusted operators' keys and the accounts of the MEMORY resolver, verified."""

    def __init__(self, options: OperatorOptions) -> None:
        if options.operator_jwts and options.trusted_keys:
            raise OperatorError("conflicting options for 'TrustedKeys' and 'TrustedOperators'")
        keys: set[str] = set()
        self.operators: list[OperatorClaims] = []
        for token in options.operator_jwts:
            try:
                op = decode(token, OperatorClaims)
            except JwtError as e:
                raise OperatorError(f"error parsing operator JWT: {e}") from e
            if op.iss != op.sub:
                raise OperatorError("error parsing operator JWT: operator JWT is not self-signed")
            self.operators.append(op)
            keys.add(op.sub)
            keys.update(k for k in op.nats.signing_keys if is_public_key(k, nkeys.PREFIX_BYTE_OPERATOR))
        for key in options.trusted_keys:
            if not is_public_key(key, nkeys.PREFIX_BYTE_OPERATOR):
                raise OperatorError(f'trust key "{key}" required to be a valid public operator nkey')
            keys.add(key)
        self.trusted = frozenset(keys)
        self.accounts: dict[str, AccountClaims] = {}
        for public, token in options.preload:
            try:
                acc = decode(token, AccountClaims)
            except JwtError as e:
                raise OperatorError(f"invalid account JWT for {public}: {e}") from e
            if acc.sub != public:
                raise OperatorError(f"account JWT for {public} is the JWT of another account ({acc.sub})")
            if acc.iss not in self.trusted:
                raise OperatorError(f"account JWT for {public} is not issued by a trusted operator")
            self._check_supported(acc)
            self.accounts[public] = acc

    @staticmethod
    def _check_supported(acc: AccountClaims) -> None:
        """What jetpy does not carry out of an account JWT refuses the configuration, by name."""
        n = acc.nats
        what = [
            name
            for name, present in (
                ("mappings", n.mappings),
                ("tiered JetStream limits", n.limits.tiered_limits),
                ("scoped signing keys", acc.scoped_keys()),
            )
            if present
        ]
        if what:
            raise OperatorError(
                f"account JWT for {acc.sub}: {', '.join(what)} in account JWTs are not supported by jetpy"
            )

    @property
    def system_account(self) -> str:
        """The system account the operator JWT names ("" if none)."""
        return next((op.nats.system_account for op in self.operators if op.nats.system_account), "")

    def exports(self, account: str) -> tuple[Export, ...]:
        """The account JWT's exports, as the ``accounts {}`` block's (public ones only)."""
        acc = self.accounts[account]
        lim = acc.nats.limits
        if 0 <= lim.exports < len(acc.nats.exports):
            raise OperatorError(f"account JWT for {account}: more exports than its limit of {lim.exports}")
        out = []
        for e in acc.nats.exports:
            kind, subject = _kind_and_subject(account, "export", e)
            if not lim.wildcards and ("*" in subject.split(".") or ">" in subject.split(".")):
                raise OperatorError(
                    f"account JWT for {account}: export {subject!r} has wildcards, which its limits deny"
                )
            _refuse(
                account, "export", e, ("token_req", "account_token_position", "service_latency", "latency")
            )
            rtype = str(e.get("response_type") or "Singleton").lower()
            if rtype not in RESPONSE_TYPES:
                raise OperatorError(
                    f"account JWT for {account}: export {subject!r} has response type {rtype!r}"
                )
            threshold = e.get("response_threshold")
            seconds = (
                threshold / 1e9
                if isinstance(threshold, int) and threshold > 0
                else DEFAULT_RESPONSE_THRESHOLD
            )
            out.append(Export(kind, subject, None, rtype if kind == "service" else "singleton", seconds))
        return tuple(out)

    def imports(self, account: str) -> tuple[Import, ...]:
        """The account JWT's imports, as the ``accounts {}`` block's: a service's
        ``local_subject`` is its ``to``; a stream's ``local_subject`` its ``to``, its ``to`` (the
        older field) its prefix."""
        acc = self.accounts[account]
        lim = acc.nats.limits
        if 0 <= lim.imports < len(acc.nats.imports):
            raise OperatorError(f"account JWT for {account}: more imports than its limit of {lim.imports}")
        out = []
        for i in acc.nats.imports:
            kind, subject = _kind_and_subject(account, "import", i)
            _refuse(account, "import", i, ("token", "share", "allow_trace"))
            source = i.get("account")
            if not isinstance(source, str) or source not in self.accounts:
                raise OperatorError(
                    f"account JWT for {account}: import {subject!r} from an account not preloaded"
                )
            local, to = str(i.get("local_subject") or ""), str(i.get("to") or "")
            if kind == "service":
                if to and not local:
                    raise OperatorError(
                        f"account JWT for {account}: service import {subject!r} with 'to' (use local_subject)"
                    )
                out.append(Import(kind, source, subject, to=local))
            elif local and to:
                raise OperatorError(
                    f"account JWT for {account}: stream import {subject!r} with local_subject and to"
                )
            else:
                out.append(Import(kind, source, subject, to=local, prefix=to))
        return tuple(out)

    def js_limits(self, account: str) -> JsLimits | None:
        """The JetStream limits of an account from its JWT (None: no JetStream for it)."""
        return _account_js_limits(self.accounts[account])

    def revoked(self, token: str) -> bool:
        """Is the user JWT ``token`` (one that logged in) revoked by its account now?"""
        try:
            user = decode(token, UserClaims)
        except JwtError:
            return False
        acc = self.accounts.get(user.nats.issuer_account or user.iss)
        return acc is not None and acc.revoked(user.sub, user.iat)

    def login(self, token: str, nonce: str, sig: str, host: str, conn_type: str) -> JwtUser:
        """The user a CONNECT's ``jwt`` and ``sig`` prove, or :class:`JwtError` with the reason."""
        user = decode(token, UserClaims)
        now = time.time()
        if user.expired(now):
            raise JwtError("user JWT has expired")
        if user.not_yet_valid(now):
            raise JwtError("user JWT is not yet valid")
        account_key = user.nats.issuer_account or user.iss
        acc = self.accounts.get(account_key)
        if acc is None:
            raise JwtError(f"account {account_key} is not known")
        if user.iss != acc.sub and user.iss not in acc.signing_key_names():
            raise JwtError("user JWT issuer is not the account or one of its signing keys")
        if acc.expired(now):
            raise JwtError("account JWT has expired")
        if acc.revoked(user.sub, user.iat):
            raise JwtError("user JWT has been revoked")
        n = user.nats
        if n.bearer_token and acc.nats.limits.disallow_bearer:
            raise JwtError("bearer tokens are not allowed in the account")
        if not n.bearer_token and not verify_nonce(user.sub, nkeys.PREFIX_BYTE_USER, nonce, sig):
            raise JwtError("signature does not verify the nonce")
        if n.times:
            raise JwtError("time-of-day connection restrictions (times) are not supported by jetpy")
        if n.allowed_connection_types and conn_type not in n.allowed_connection_types:
            raise JwtError(f"connection type {conn_type} is not allowed")
        if n.src and not _source_allowed(n.src, host):
            raise JwtError(f"client address {host} is not allowed")
        perms = n if not n.empty else acc.nats.default_permissions
        limits = acc.nats.limits
        expires = min((e for e in (user.exp, acc.exp) if e), default=0)
        account_first = bool(acc.exp) and (not user.exp or acc.exp < user.exp)
        return JwtUser(
            public=user.sub,
            name=user.name,
            account=acc.sub,
            permissions=None if perms.empty else Permissions.from_config(perms.as_config()),
            limits=ConnLimits(
                max_subs=_tighter(n.subs, limits.subs),
                max_payload=_tighter(n.payload, limits.payload),
                max_account_conns=limits.conn,
                expires=float(expires),
                account_expires=account_first,
            ),
        )


def _kind_and_subject(account: str, what: str, entry: dict[str, object]) -> tuple[str, str]:
    kind, subject = entry.get("type"), entry.get("subject")
    if kind not in ("stream", "service") or not isinstance(subject, str) or not subject:
        raise OperatorError(
            f"account JWT for {account}: an {what} needs a type (stream or service) and a subject"
        )
    return str(kind), subject


def _refuse(account: str, what: str, entry: dict[str, object], fields: tuple[str, ...]) -> None:
    """What jetpy does not carry out of an export or import refuses the configuration, by name."""
    for name in fields:
        if entry.get(name):
            raise OperatorError(f"account JWT for {account}: {what} field {name!r} is not supported by jetpy")


def _source_allowed(src: tuple[str, ...] | str, host: str) -> bool:
    """Is ``host`` in one of the CIDR blocks of a user's ``src`` (a list, or one string with
    commas as older JWTs have it)?"""
    blocks = src.split(",") if isinstance(src, str) else src
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    for block in blocks:
        block = block.strip()
        if not block:
            continue
        try:
            if addr in ipaddress.ip_network(block, strict=False):
                return True
        except ValueError:
            continue
    return False
