"""Issuing operator, account and user JWTs and creds files for tests, as ``nsc`` does: nkeys
for every entity, claims in nats-io/jwt's v2 format, each JWT signed (ed25519, through the
``nkeys`` package) by its issuer's seed."""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys

HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


@dataclass(frozen=True)
class Key:
    """An nkey: its seed and public key."""

    seed: bytes
    public: str

    @classmethod
    def new(cls, prefix: int) -> Key:
        seed = nkeys.encode_seed(os.urandom(32), prefix)
        return cls(seed, nkeys.from_seed(seed).public_key.decode())

    def sign(self, data: bytes) -> bytes:
        return bytes(nkeys.from_seed(self.seed).sign(data))


def operator_key() -> Key:
    return Key.new(nkeys.PREFIX_BYTE_OPERATOR)


def account_key() -> Key:
    return Key.new(nkeys.PREFIX_BYTE_ACCOUNT)


def user_key() -> Key:
    return Key.new(nkeys.PREFIX_BYTE_USER)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encode(claims: dict[str, Any], signer: Key, header: dict[str, Any] | None = None) -> str:
    """A JWT of ``claims`` signed by ``signer`` (its ``iss``, unless the claims name one)."""
    claims = {"jti": _b64(os.urandom(24)), "iat": int(time.time()), "iss": signer.public, **claims}
    head = _b64(json.dumps(header or HEADER).encode())
    body = _b64(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64(signer.sign(f'{head}.{body}'.encode()))}"


def operator_jwt(op: Key, signing_keys: tuple[str, ...] = (), system_account: str = "", **extra: Any) -> str:
    nats: dict[str, Any] = {"type": "operator", "version": 2}
    if signing_keys:
        nats["signing_keys"] = list(signing_keys)
    if system_account:
        nats["system_account"] = system_account
    return encode({"name": "OP", "sub": op.public, "nats": nats, **extra}, op)


def account_jwt(
    acc: Key,
    signer: Key,
    name: str = "A",
    limits: dict[str, Any] | None = None,
    signing_keys: tuple[str, ...] = (),
    revocations: dict[str, int] | None = None,
    nats_extra: dict[str, Any] | None = None,
    **extra: Any,
) -> str:
    """An account JWT; ``nats_extra`` goes into its ``nats`` claims (default_permissions...),
    ``extra`` into the top-level claims (exp...)."""
    lim: dict[str, Any] = {
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
        "conn": -1, "leaf": -1,
    }  # fmt: skip
    lim.update(limits or {})
    nats: dict[str, Any] = {"limits": lim, "type": "account", "version": 2}
    if signing_keys:
        nats["signing_keys"] = list(signing_keys)
    if revocations:
        nats["revocations"] = revocations
    nats.update(nats_extra or {})
    return encode({"name": name, "sub": acc.public, "nats": nats, **extra}, signer)


def user_jwt(
    user: Key,
    signer: Key,
    issuer_account: str = "",
    name: str = "u",
    permissions: dict[str, Any] | None = None,
    **extra: Any,
) -> str:
    """A user JWT; ``permissions`` holds what goes into its ``nats`` claims (pub, sub, resp,
    bearer_token, src, allowed_connection_types...), ``extra`` top-level claims (exp, nbf)."""
    nats: dict[str, Any] = {"subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2}
    nats.update(permissions or {})
    if issuer_account:
        nats["issuer_account"] = issuer_account
    return encode({"name": name, "sub": user.public, "nats": nats, **extra}, signer)


def creds(token: str, user: Key) -> str:
    """A creds file's text, as nsc writes it."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{token}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{user.seed.decode()}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


def write_creds(path: Path, token: str, user: Key) -> str:
    path.write_text(creds(token, user))
    return str(path)


@dataclass
class World:
    """An operator (with a signing key), a system account SYS, account A (limits, a signing key,
    a revoked user) and account B (JetStream on, signed by the operator's signing key), and
    users of each: what a test's configuration and creds files are made of."""

    op: Key
    op_signing: Key
    sys: Key
    a: Key
    a_signing: Key
    b: Key
    operator_jwt: str
    account_jwts: dict[str, str]
    revoked: Key

    def config(self, op_file: Path, store_dir: Path | None = None, extra: str = "") -> str:
        preload = "\n".join(f"  {k}: {v}" for k, v in self.account_jwts.items())
        js = f"jetstream {{ store_dir: {json.dumps(str(store_dir))} }}\n" if store_dir else ""
        return (
            f"operator: {json.dumps(str(op_file))}\nsystem_account: {self.sys.public}\n{js}"
            f"resolver: MEMORY\nresolver_preload {{\n{preload}\n}}\n{extra}"
        )


A_LIMITS: dict[str, Any] = {"conn": 2, "subs": 3, "payload": 64, "data": 10, "disallow_bearer": True}
B_LIMITS = {"mem_storage": 1_000_000, "disk_storage": 2_000_000, "streams": 2, "consumer": 3}


def world(now: int | None = None) -> World:
    op, op_signing = operator_key(), operator_key()
    sys_acc, a, a_signing, b, revoked = account_key(), account_key(), account_key(), account_key(), user_key()
    at = int(time.time()) if now is None else now
    accounts = {
        sys_acc.public: account_jwt(sys_acc, op, "SYS"),
        a.public: account_jwt(
            a,
            op,
            "A",
            limits=A_LIMITS,
            signing_keys=(a_signing.public,),
            revocations={revoked.public: at + 3600},
        ),
        b.public: account_jwt(b, op_signing, "B", limits=B_LIMITS),
    }
    token = operator_jwt(op, signing_keys=(op_signing.public,), system_account=sys_acc.public)
    return World(op, op_signing, sys_acc, a, a_signing, b, token, accounts, revoked)
