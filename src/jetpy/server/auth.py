"""Authentication of CONNECT: single user/password, token, a users list (bcrypt hashes allowed),
nkey users (an ed25519 signature of the connection's nonce), users mapped from a verified
client certificate (``verify_and_map``) and, in operator mode, users with a user JWT (the trust
checks are ``operator``'s).

Owns the decision "may this CONNECT in, and as whom": the answer is an :class:`Identity` (the
user's name, how it proved it, its compiled permissions and its account), or ``None``. Also the nonce INFO carries when nkey users exist, and what the log says about a
refused client. Knows nothing of connections or sockets: it gets the CONNECT options, the nonce
the connection was greeted with and the names in the client's certificate.

nkeys are checked as nats-server checks them (``jwt_claims``: the public key decodes with the
user prefix and its CRC-16, the signature as base64 URL-safe without padding or standard base64,
and verifies over the nonce).
A nonce is random per connection, so a signature from another connection never verifies.
"""

from __future__ import annotations

import base64
import hmac
import logging
import secrets
from dataclasses import dataclass, field
from typing import Final

import bcrypt
import nkeys

from jetpy.protocol.connect import ConnectOptions
from jetpy.server.jwt_claims import JwtError, is_public_key
from jetpy.server.jwt_claims import verify_nonce as verify_key_nonce
from jetpy.server.operator import ConnLimits, TrustedAccounts
from jetpy.server.options import GLOBAL_ACCOUNT, ServerOptions
from jetpy.server.permissions import Permissions

__all__ = ["GLOBAL_ACCOUNT", "Authenticator", "CertNames", "Identity", "new_nonce", "valid_user_nkey"]

BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")  # nats-server treats these passwords/tokens as hashes
NONCE_BYTES: Final = 11  # nats-server's: 15 characters of base64 (URL-safe, no padding)
NKEY_LENGTH: Final = 56  # a public nkey: 35 bytes (prefix, key, CRC-16) in base32

log = logging.getLogger("jetpy.server")


@dataclass(frozen=True, slots=True)
class Identity:
    """Whom a client authenticated as. ``user`` is the user name or public nkey ("" for a token
    or when no authentication is required); ``kind`` is how ("user", "nkey", "token", "cert",
    "jwt" or "none"); ``account`` is where its subjects live; ``limits`` what a JWT user's
    connection may do (None: the server's limits only)."""

    user: str = ""
    kind: str = "none"
    permissions: Permissions | None = None
    account: str = GLOBAL_ACCOUNT
    limits: ConnLimits | None = None

    @property
    def log_name(self) -> str | None:
        """How log lines name the client after its address (None: no authentication)."""
        if self.kind == "none":
            return None
        if self.kind == "token":
            return ""
        return self.user


ANONYMOUS: Final = Identity()


@dataclass(frozen=True, slots=True)
class CertNames:
    """What a verified client certificate says of its holder, in the order ``verify_and_map``
    tries them: e-mail addresses, DNS names and URIs of the subject alternative name, then the
    subject as Go prints it (``CN=alice,OU=eng,O=Acme``; empty when it has attributes Go prints
    only as object identifiers)."""

    emails: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    uris: tuple[str, ...] = ()
    subject: str = ""

    def candidates(self) -> tuple[str, ...]:
        return (*self.emails, *self.dns_names, *self.uris, *((self.subject,) if self.subject else ()))


def new_nonce() -> str:
    """A fresh nonce for one connection's INFO."""
    return base64.urlsafe_b64encode(secrets.token_bytes(NONCE_BYTES)).rstrip(b"=").decode()


def valid_user_nkey(public: str) -> bool:
    """Is ``public`` a user's public nkey (``U...``)?"""
    return is_public_key(public, nkeys.PREFIX_BYTE_USER)


def verify_nonce(public: str, nonce: str, sig: str) -> bool:
    """Does ``sig`` verify as the holder of the user nkey ``public`` signing ``nonce``?"""
    return verify_key_nonce(public, nkeys.PREFIX_BYTE_USER, nonce, sig)


def _secret_matches(configured: str, given: str) -> bool:
    if configured.startswith(BCRYPT_PREFIXES):
        try:
            return bcrypt.checkpw(given.encode(), configured.encode())
        except ValueError:
            return False
    return hmac.compare_digest(configured.encode(), given.encode())


@dataclass(slots=True)
class Authenticator:
    """The server's authentication configuration, compiled (permissions once per user)."""

    options: ServerOptions
    _users: dict[str, tuple[str, Permissions | None, str]] = field(init=False)
    _nkeys: dict[str, tuple[Permissions | None, str]] = field(init=False)
    _trusted: TrustedAccounts | None = field(init=False)

    def __post_init__(self) -> None:
        self._users = {}
        self._nkeys = {}
        op = self.options.operator
        self._trusted = TrustedAccounts(op) if op is not None else None
        for u in self.options.users:
            perms = Permissions.from_config(u.permissions) if u.permissions is not None else None
            if u.nkey:
                self._nkeys[u.nkey] = (perms, u.account)
            else:
                self._users[u.user] = (u.password, perms, u.account)

    @property
    def required(self) -> bool:
        o = self.options
        return bool(o.username or o.token or o.users or self._trusted)

    @property
    def uses_nonce(self) -> bool:
        """Are there nkey or JWT users (INFO then carries a nonce to sign)?"""
        return bool(self._nkeys or self._trusted)

    @property
    def anonymous_user(self) -> str | None:
        """The user a client without credentials becomes (``no_auth_user``), if one is set up."""
        o = self.options
        if o.no_auth_user and o.no_auth_user in self._users:
            return o.no_auth_user
        return None

    def anonymous(self) -> Identity:
        """The identity of a client that logs in without CONNECT (``no_auth_user``)."""
        name = self.anonymous_user
        if name is None:
            return ANONYMOUS
        _, perms, account = self._users[name]
        return Identity(name, "user", perms, account)

    def authenticate(
        self,
        connect: ConnectOptions,
        nonce: str = "",
        cert: CertNames | None = None,
        tls_map: bool = False,
        host: str = "",
        conn_type: str = "STANDARD",
    ) -> Identity | None:
        """Who the client is, or None to refuse (nats-server's order: nkey, then a certificate
        mapped to a user when the client's port has ``verify_and_map``, then user/password with
        no_auth_user, then token or single user; in operator mode, a user JWT only)."""
        o = self.options
        if not self.required:
            return ANONYMOUS
        if self._trusted is not None:
            return self._jwt_user(self._trusted, connect, nonce, host, conn_type)
        if self._nkeys and connect.nkey:
            if (
                connect.nkey not in self._nkeys
                or not nonce
                or not verify_nonce(connect.nkey, nonce, connect.sig)
            ):
                return None
            perms, account = self._nkeys[connect.nkey]
            return Identity(connect.nkey, "nkey", perms, account)
        if self._users:
            if tls_map:
                return self._mapped(cert)
            user = connect.user
            if not user and o.no_auth_user in self._users:
                return self.anonymous()
            for name, (password, perms, account) in self._users.items():
                if hmac.compare_digest(name.encode(), user.encode()):
                    if not _secret_matches(password, connect.password):
                        return None
                    return Identity(name, "user", perms, account)
            return None
        if self._nkeys:
            return None
        if o.token:
            return (
                Identity("", "token")
                if connect.auth_token and _secret_matches(o.token, connect.auth_token)
                else None
            )
        if o.username:
            if not connect.user and o.no_auth_user == o.username:
                return Identity(o.username, "user")
            if hmac.compare_digest(o.username.encode(), connect.user.encode()) and _secret_matches(
                o.password, connect.password
            ):
                return Identity(o.username, "user")
        return None

    def revoked(self, connect: ConnectOptions) -> bool:
        """Has the account of the JWT user who sent ``connect`` revoked it (a reload)?"""
        return self._trusted is not None and bool(connect.jwt) and self._trusted.revoked(connect.jwt)

    @staticmethod
    def _jwt_user(
        trusted: TrustedAccounts, connect: ConnectOptions, nonce: str, host: str, conn_type: str
    ) -> Identity | None:
        if not connect.jwt or not nonce:
            return None
        try:
            user = trusted.login(connect.jwt, nonce, connect.sig, host, conn_type)
        except JwtError as e:
            log.debug("user JWT refused: %s", e)
            return None
        return Identity(user.public, "jwt", user.permissions, user.account, user.limits)

    def _mapped(self, cert: CertNames | None) -> Identity | None:
        """verify_and_map: the first name in the certificate that is a configured user."""
        if cert is None:
            return None
        for name in cert.candidates():
            entry = self._users.get(name)
            if entry is not None:
                return Identity(name, "cert", entry[1], entry[2])
        return None

    def error_text(self, connect: ConnectOptions) -> str:
        """nats-server 2.15's log line for refused credentials: who the client claimed to be,
        never the secret it gave."""
        if connect.nkey and self._nkeys:
            return f'authentication error - Nkey "{connect.nkey}"'
        if connect.user:
            return f'authentication error - User "{connect.user}"'
        if connect.auth_token:
            return 'authentication error - Token "[REDACTED]"'
        return "authentication error"
