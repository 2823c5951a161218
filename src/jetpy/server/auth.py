"""Authentication of CONNECT: single user/password, token, or a users list; bcrypt hashes.

Owns the decision "may this CONNECT in, and as whom". Knows nothing of connections: it gets the
CONNECT options and answers with the authorized user name or ``None``.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

import bcrypt

from jetpy.protocol.connect import ConnectOptions
from jetpy.server.options import ServerOptions

__all__ = ["Authenticator"]

BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")  # nats-server treats these passwords/tokens as hashes


def _secret_matches(configured: str, given: str) -> bool:
    if configured.startswith(BCRYPT_PREFIXES):
        try:
            return bcrypt.checkpw(given.encode(), configured.encode())
        except ValueError:
            return False
    return hmac.compare_digest(configured.encode(), given.encode())


@dataclass(slots=True)
class Authenticator:
    options: ServerOptions

    @property
    def required(self) -> bool:
        o = self.options
        return bool(o.username or o.token or o.users)

    @property
    def anonymous_user(self) -> str | None:
        """The user a client without credentials becomes (``no_auth_user``), if one is set up."""
        o = self.options
        if o.no_auth_user and any(u.user == o.no_auth_user for u in o.users):
            return o.no_auth_user
        return None

    def authenticate(self, connect: ConnectOptions) -> str | None:
        """The authorized user name ("" for token or no auth), or None to refuse."""
        o = self.options
        if not self.required:
            return ""
        user, password, token = connect.user, connect.password, connect.auth_token
        if o.users:
            if not user and not token and o.no_auth_user:
                return o.no_auth_user if any(u.user == o.no_auth_user for u in o.users) else None
            for u in o.users:
                if hmac.compare_digest(u.user.encode(), user.encode()):
                    return u.user if _secret_matches(u.password, password) else None
            return None
        if o.token:
            return "" if token and _secret_matches(o.token, token) else None
        if o.username:
            if not user and o.no_auth_user == o.username:
                return o.username
            if hmac.compare_digest(o.username.encode(), user.encode()) and _secret_matches(
                o.password, password
            ):
                return o.username
        return None
