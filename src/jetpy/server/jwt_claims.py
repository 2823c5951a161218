"""Decentralized-auth JWTs (nats-io/jwt v2): decoding, signature checks and the claims' shapes.

Owns what a NATS JWT is: three base64 URL-safe parts (header, claims, signature), a header
``{"typ": "JWT", "alg": "ed25519-nkey"}``, claims naming their issuer (``iss``, a public nkey) and
subject (``sub``), and an ed25519 signature by the issuer over ``header.claims``. Also public nkeys
(base32 of a role prefix byte, the 32-byte key and a CRC-16) and a signature over a connection's
nonce. The claim types (operator, account, user) are typed msgspec structs holding the fields
jetpy acts on; other fields are kept out of the way (unknown fields are ignored, as by
nats-server). Signatures are checked by PyNaCl's ed25519 (through the key encoding of the
``nkeys`` package): no cryptography of our own.

Knows nothing of the server: :func:`decode` raises :class:`JwtError` with nats-server's words for
what is wrong, and callers decide what a refusal looks like.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Final, TypeVar

import msgspec
import nacl.exceptions
import nacl.signing
import nkeys

__all__ = [
    "AccountClaims",
    "JetStreamLimits",
    "JwtError",
    "OperatorClaims",
    "UserClaims",
    "decode",
    "decode_public_key",
    "is_public_key",
    "verify_nonce",
]

NKEY_LENGTH: Final = 56  # a public nkey: 35 bytes (prefix, key, CRC-16) in base32
ALGORITHM: Final = "ed25519-nkey"  # nats-io/jwt v2's; v1 tokens ("ed25519") are not accepted
NO_LIMIT: Final = -1


class JwtError(ValueError):
    """A JWT that cannot be trusted or read (its text says why)."""


def decode_public_key(public: str, prefix: int) -> bytes | None:
    """The raw ed25519 key of a public nkey of the role ``prefix`` (``nkeys.PREFIX_BYTE_*``), or
    None if it is not one (wrong length, bad base32, another role, bad checksum)."""
    if len(public) != NKEY_LENGTH:
        return None
    try:
        raw = base64.b32decode(public + "=" * (-len(public) % 8))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != prefix:
        return None
    if nkeys.crc16(bytearray(raw[:-2])) != int.from_bytes(raw[-2:], "little"):
        return None
    return raw[1:33]


def is_public_key(public: str, prefix: int) -> bool:
    return decode_public_key(public, prefix) is not None


def _signature(sig: str) -> bytes | None:
    """A raw signature: base64 URL-safe without padding, else standard base64 (nats-server)."""
    try:
        if "=" not in sig:
            return base64.b64decode(sig + "=" * (-len(sig) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        pass
    try:
        return base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return None


def _verify(key: bytes, data: bytes, raw_sig: bytes) -> bool:
    try:
        nacl.signing.VerifyKey(key).verify(data, raw_sig)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, nacl.exceptions.TypeError):
        return False
    return True


def verify_nonce(public: str, prefix: int, nonce: str, sig: str) -> bool:
    """Does ``sig`` verify as the holder of the nkey ``public`` (of role ``prefix``) signing
    ``nonce``?"""
    key = decode_public_key(public, prefix)
    raw = _signature(sig) if sig else None
    return key is not None and raw is not None and _verify(key, nonce.encode(), raw)


# -- the claims ---------------------------------------------------------------------------------


class _Claims(msgspec.Struct, frozen=True):
    jti: str = ""
    iat: int = 0
    iss: str = ""
    sub: str = ""
    name: str = ""
    exp: int = 0
    nbf: int = 0

    def expired(self, now: float | None = None) -> bool:
        return bool(self.exp) and (time.time() if now is None else now) > self.exp

    def not_yet_valid(self, now: float | None = None) -> bool:
        return bool(self.nbf) and (time.time() if now is None else now) < self.nbf


class OperatorData(msgspec.Struct, frozen=True):
    type: str = ""
    version: int = 0
    signing_keys: tuple[str, ...] = ()
    system_account: str = ""
    account_server_url: str = ""


class OperatorClaims(_Claims, frozen=True):
    nats: OperatorData = OperatorData()


class JetStreamLimits(msgspec.Struct, frozen=True):
    """An account's JetStream limits (0 memory and disk: JetStream is not enabled for it)."""

    mem_storage: int = 0
    disk_storage: int = 0
    streams: int = 0
    consumer: int = 0
    max_ack_pending: int = 0
    mem_max_stream_bytes: int = 0
    disk_max_stream_bytes: int = 0
    max_bytes_required: bool = False


class AccountLimits(JetStreamLimits, frozen=True):
    """nats-io/jwt's operator limits of an account: NATS (subs, data, payload), account (conn,
    leaf, imports, exports, wildcards) and JetStream; -1 is no limit."""

    subs: int = NO_LIMIT
    data: int = NO_LIMIT
    payload: int = NO_LIMIT
    conn: int = NO_LIMIT
    leaf: int = NO_LIMIT
    imports: int = NO_LIMIT
    exports: int = NO_LIMIT
    wildcards: bool = True
    disallow_bearer: bool = False
    tiered_limits: dict[str, JetStreamLimits] = {}

    @property
    def jetstream_enabled(self) -> bool:
        return self.mem_storage != 0 or self.disk_storage != 0


class SubjectPermission(msgspec.Struct, frozen=True):
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


class ResponsePermission(msgspec.Struct, frozen=True):
    max: int = 0
    ttl: int = 0  # nanoseconds


class Permissions(msgspec.Struct, frozen=True):
    pub: SubjectPermission = SubjectPermission()
    sub: SubjectPermission = SubjectPermission()
    resp: ResponsePermission | None = None

    @property
    def empty(self) -> bool:
        return not (self.pub.allow or self.pub.deny or self.sub.allow or self.sub.deny or self.resp)

    def as_config(self) -> dict[str, object]:
        """In the shape of the config file's (``Permissions.from_config`` compiles it)."""
        out: dict[str, object] = {
            "publish": {"allow": list(self.pub.allow), "deny": list(self.pub.deny)},
            "subscribe": {"allow": list(self.sub.allow), "deny": list(self.sub.deny)},
        }
        if self.resp is not None:
            # nats-server's defaults for a zero: one response within two minutes
            out["responses"] = {"max": self.resp.max or 1, "ttl": self.resp.ttl / 1e9 or 120.0}
        return out


class AccountData(msgspec.Struct, frozen=True):
    type: str = ""
    version: int = 0
    limits: AccountLimits = AccountLimits()
    signing_keys: tuple[str | dict[str, object], ...] = ()
    revocations: dict[str, int] = {}
    default_permissions: Permissions = Permissions()
    exports: tuple[dict[str, object], ...] = ()
    imports: tuple[dict[str, object], ...] = ()
    mappings: dict[str, object] = {}


class AccountClaims(_Claims, frozen=True):
    nats: AccountData = AccountData()

    def signing_key_names(self) -> tuple[str, ...]:
        """The account's signing keys: plain keys, or the ``key`` of a scoped one."""
        out: list[str] = []
        for k in self.nats.signing_keys:
            if isinstance(k, str):
                out.append(k)
            elif isinstance(k.get("key"), str):
                out.append(str(k["key"]))
        return tuple(out)

    def scoped_keys(self) -> tuple[str, ...]:
        """Signing keys with a scope (their users' permissions come from the scope)."""
        return tuple(str(k["key"]) for k in self.nats.signing_keys if isinstance(k, dict) and "key" in k)

    def revoked(self, user: str, issued_at: int) -> bool:
        """Was a user JWT for ``user`` issued at ``issued_at`` revoked (its key's revocation, or
        every user's ``*``, at or after that time)?"""
        revs = self.nats.revocations
        for key in (user, "*"):
            at = revs.get(key)
            if at is not None and issued_at <= at:
                return True
        return False


class UserData(Permissions, frozen=True):
    type: str = ""
    version: int = 0
    issuer_account: str = ""
    subs: int = NO_LIMIT
    data: int = NO_LIMIT
    payload: int = NO_LIMIT
    bearer_token: bool = False
    src: tuple[str, ...] | str = ()
    times: tuple[dict[str, object], ...] = ()
    allowed_connection_types: tuple[str, ...] = ()


class UserClaims(_Claims, frozen=True):
    nats: UserData = UserData()


_KINDS: Final = {
    "operator": (OperatorClaims, nkeys.PREFIX_BYTE_OPERATOR),
    "account": (AccountClaims, nkeys.PREFIX_BYTE_ACCOUNT),
    "user": (UserClaims, nkeys.PREFIX_BYTE_USER),
}
_ISSUERS: Final = {  # who may sign each kind: an operator signs accounts, an account users
    "operator": nkeys.PREFIX_BYTE_OPERATOR,
    "account": nkeys.PREFIX_BYTE_OPERATOR,
    "user": nkeys.PREFIX_BYTE_ACCOUNT,
}


C = TypeVar("C", OperatorClaims, AccountClaims, UserClaims)


class _Header(msgspec.Struct, frozen=True):
    typ: str = ""
    alg: str = ""


def _part(text: str) -> bytes:
    if "=" in text:
        raise JwtError("invalid encoding")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as e:
        raise JwtError("invalid encoding") from e


def decode(token: str, kind: type[C]) -> C:
    """The claims of ``token`` if it is a well-formed JWT of ``kind`` (``OperatorClaims``,
    ``AccountClaims`` or ``UserClaims``) whose signature verifies with its issuer's key; the
    issuer's role is checked too (an operator issues accounts, an account users). Whether the
    issuer is *trusted* is the caller's business. Expiry is not checked here."""
    name = next((n for n, (t, _) in _KINDS.items() if t is kind), "")
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise JwtError("expected 3 chunks")
    try:
        header = msgspec.json.decode(_part(parts[0]), type=_Header)
    except msgspec.DecodeError as e:
        raise JwtError(f"invalid header: {e}") from e
    if header.typ.upper() != "JWT":
        raise JwtError(f"not supported type {header.typ!r}")
    if header.alg.lower() != ALGORITHM:
        raise JwtError(f"unexpected {header.alg!r} algorithm")
    try:
        claims = msgspec.json.decode(_part(parts[1]), type=kind)
    except msgspec.DecodeError as e:
        raise JwtError(f"invalid claims: {e}") from e
    nats_type = getattr(getattr(claims, "nats", None), "type", "")
    if nats_type != name:
        raise JwtError(f"not {name} claim")
    _, subject_prefix = _KINDS[name]
    if not is_public_key(claims.sub, subject_prefix):
        raise JwtError(f"subject is not a public {name} key")
    key = decode_public_key(claims.iss, _ISSUERS[name])
    if key is None:
        raise JwtError("issuer is not a valid key for this claim")
    sig = _part(parts[2])
    if not _verify(key, f"{parts[0]}.{parts[1]}".encode(), sig):
        raise JwtError("claim failed V2 signature verification")
    return claims
