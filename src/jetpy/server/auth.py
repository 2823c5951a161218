"""Authentication of CONNECT: single user/password, token, a users list (bcrypt hashes allowed),
nkey users (an ed25519 signature of the connection's nonce) and users mapped from a verified
client certificate (``verify_and_map``).

Owns the decision "may this CONNECT in, and as whom": the answer is an :class:`Identity` (the
user's name, how it proved it, its compiled permissions and its account), or ``None``. Also the nonce INFO carries when nkey users exist, and what the log says about a
refused client. Knows nothing of connections or sockets: it gets the CONNECT options, the nonce
the connection was greeted with and the names in the client's certificate.

nkeys are checked as nats-server checks them: the public key decodes (base32, the user prefix,
its CRC-16), the signature decodes as base64 URL-safe without padding or, failing that, standard
base64, and verifies over the nonce (PyNaCl's ed25519 through the ``nkeys`` package's encoding).
A nonce is random per connection, so a signature from another connection never verifies.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Final

import bcrypt
import nacl.exceptions
import nacl.signing
import nkeys

from jetpy.protocol.connect import ConnectOptions
from jetpy.server.options import GLOBAL_ACCOUNT, ServerOptions
from jetpy.server.permissions import Permissions

__all__ = ["GLOBAL_ACCOUNT", "Authenticator", "CertNames", "Identity", "new_nonce", "valid_user_nkey"]

BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")  # nats-server treats these passwords/tokens as hashes
NONCE_BYTES: Final = 11  # nats-server's: 15 characters of base64 (URL-safe, no padding)
NKEY_LENGTH: Final = 56  # a public nkey: 35 bytes (prefix, key, CRC-16) in base32


@dataclass(frozen=True, slots=True)
class Identity:
    """Whom a client authenticated as. ``user`` is the user name or public nkey ("" for a token
    or when no authentication is required); ``kind`` is how ("user", "nkey", "token", "cert" or
    "none"); ``account`` is where its subjects live (always the global account for now)."""

    user: str = ""
    kind: str = "none"
    permissions: Permissions | None = None
    account: str = GLOBAL_ACCOUNT

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


def _user_key(public: str) -> bytes | None:
    """The raw ed25519 key of a public user nkey, or None if it is not one (bad base32, wrong
    prefix, bad checksum)."""
    if len(public) != NKEY_LENGTH:
        return None
    try:
        raw = base64.b32decode(public + "=" * (-len(public) % 8))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != nkeys.PREFIX_BYTE_USER:
        return None
    if nkeys.crc16(bytearray(raw[:-2])) != int.from_bytes(raw[-2:], "little"):
        return None
    return raw[1:33]


def valid_user_nkey(public: str) -> bool:
    """Is ``public`` a user's public nkey (``U...``)?"""
    return _user_key(public) is not None


def _signature(sig: str) -> bytes | None:
    """The raw signature: base64 URL-safe without padding, else standard base64 (nats-server)."""
    for decode in (_raw_url_b64, _std_b64):
        try:
            return decode(sig)
        except (binascii.Error, ValueError):
            continue
    return None


def _raw_url_b64(text: str) -> bytes:
    if "=" in text:
        raise ValueError("padding")
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def _std_b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def verify_nonce(public: str, nonce: str, sig: str) -> bool:
    """Does ``sig`` verify as the holder of ``public`` signing ``nonce``?"""
    key = _user_key(public)
    raw = _signature(sig) if sig else None
    if key is None or raw is None:
        return False
    try:
        nacl.signing.VerifyKey(key).verify(nonce.encode(), raw)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, nacl.exceptions.TypeError):
        return False
    return True


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

    def __post_init__(self) -> None:
        self._users = {}
        self._nkeys = {}
        for u in self.options.users:
            perms = Permissions.from_config(u.permissions) if u.permissions is not None else None
            if u.nkey:
                self._nkeys[u.nkey] = (perms, u.account)
            else:
                self._users[u.user] = (u.password, perms, u.account)

    @property
    def required(self) -> bool:
        o = self.options
        return bool(o.username or o.token or o.users)

    @property
    def uses_nonce(self) -> bool:
        """Are there nkey users (INFO then carries a nonce to sign)?"""
        return bool(self._nkeys)

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
        self, connect: ConnectOptions, nonce: str = "", cert: CertNames | None = None, tls_map: bool = False
    ) -> Identity | None:
        """Who the client is, or None to refuse (nats-server's order: nkey, then a certificate
        mapped to a user when the client's port has ``verify_and_map``, then user/password with
        no_auth_user, then token or single user)."""
        o = self.options
        if not self.required:
            return ANONYMOUS
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
