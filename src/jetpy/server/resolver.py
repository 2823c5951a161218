"""The full account resolver at runtime: nats-server's ``$SYS.REQ`` claims requests, answered
in the system account, and what an account JWT pushed there does to the running server.

Owns, with nats-server 2.15's message shapes (compared with the reference in
``tests/differential/test_resolver_reference.py``):

- ``$SYS.REQ.CLAIMS.UPDATE`` and ``$SYS.REQ.ACCOUNT.<account>.CLAIMS.UPDATE`` (``nsc push``):
  the body is an account JWT; it is verified (signature, a trusted operator or its signing key
  as issuer, the account the subject names), stored in the directory (``jwt_dir``) and taken
  by the running server, answered ``{"server": ..., "data": {"account", "code": 200,
  "message": "jwt updated"}}`` or ``{"server": ..., "error": {"account", "code": 500,
  "description": "jwt update resulted in error - <why>"}}``; past ``limit`` accounts, ``jwt
  store is full``. A JWT older than the account's stored one is refused (nats-server stores
  it over the newer);
- ``$SYS.REQ.ACCOUNT.<account>.CLAIMS.LOOKUP``: the stored JWT (an empty body when none);
- ``$SYS.REQ.CLAIMS.LIST``: ``{"data": [<account>...], "server": ...}``;
- ``$SYS.REQ.CLAIMS.DELETE``: answered with nats-server's error without ``allow_delete``
  (``allow_delete: true`` is refused by the configuration: deleting accounts is not built).

A new account is added to the running server (its subject space, its imports, its JetStream
when its limits enable it); an account it runs already takes the new JWT's revocations, limits
and permissions (its connected users are checked again: one revoked is closed), while a change
of its exports, imports or JetStream limits is refused in the reply (nothing stored: these take
a restart with the JWT in the directory or the preload). Beyond nats-server, which stores it
and fails its logins later, a JWT no trusted operator issued is refused in the reply.
Knows the server as :class:`ResolverHost`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol

from jetpy.server.accounts import Account, Accounts
from jetpy.server.auth import Authenticator
from jetpy.server.broker import Broker, Subscription
from jetpy.server.jwt_claims import AccountClaims, JwtError, decode
from jetpy.server.jwt_dir import JwtDirectory
from jetpy.server.operator import OperatorError, TrustedAccounts
from jetpy.server.options import AccountOptions, OperatorOptions, ServerOptions

__all__ = ["AccountResolver", "ResolverHost"]

log = logging.getLogger("jetpy.server")

UPDATE_OLD: Final = "$SYS.REQ.CLAIMS.UPDATE"
UPDATE: Final = "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE"
LOOKUP: Final = "$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP"
LIST: Final = "$SYS.REQ.CLAIMS.LIST"
DELETE: Final = "$SYS.REQ.CLAIMS.DELETE"
UPDATED: Final = "jwt updated"
UPDATE_FAILED: Final = "jwt update resulted in error"
NO_ACCOUNT: Final = "n/a"  # the account an unreadable JWT is answered for, as nats-server's
MAX_JWT_BYTES: Final = 1024 * 1024


class ResolverHost(Protocol):
    """The running server, as the resolver changes it."""

    options: ServerOptions
    accounts: Accounts
    auth: Authenticator

    def server_info(self) -> dict[str, Any]:
        """nats-server's ServerInfo block of a system message."""
        ...

    async def account_added(self, account: Account) -> None:
        """A new account runs: start its JetStream (or its 10039 answers)."""
        ...

    def account_updated(self, account: Account) -> None:
        """An account's JWT changed: check its connected users again."""
        ...


class _Refused(Exception):
    """An update refused: the account to answer for and why."""

    def __init__(self, account: str, why: str) -> None:
        super().__init__(why)
        self.account = account


class AccountResolver:
    """The ``resolver { type: full }`` of one server."""

    def __init__(
        self,
        server: ResolverHost,
        options: OperatorOptions,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
    ) -> None:
        """``spawn`` runs a coroutine in the background (a new account's JetStream starting
        before the update is answered)."""
        self.server = server
        self._spawn = spawn
        self.directory = JwtDirectory(options.resolver_dir)
        self.limit = options.resolver_limit
        self._subs: list[Subscription] = []
        self._broker: Broker | None = None

    def start(self) -> None:
        """Store the JWTs the server started with (of the preloaded and the directory's, the
        newer) and answer the claims requests in the system account."""
        self.directory.create()
        op = self.server.options.operator
        stored = self.directory.load()
        for public, token in op.preload if op is not None else ():
            if stored.get(public) != token:
                self.directory.save(public, token)
        system = self.server.accounts.system()
        if system is None:
            return
        self._broker = broker = system.broker
        handlers: dict[str, Callable[[bytes, bytes | None, int, bytes], None]] = {
            UPDATE_OLD: self._update,
            UPDATE: self._update,
            LOOKUP: self._lookup,
            LIST: self._list,
            DELETE: self._delete,
        }
        self._subs = [broker.subscribe_internal(s, h) for s, h in handlers.items()]

    def stop(self) -> None:
        if self._broker is not None:
            for sub in self._subs:
                self._broker.unsubscribe_internal(sub)
        self._subs = []
        self._broker = None

    # -- replies ----------------------------------------------------------------------------------

    def _send(self, reply: bytes | None, doc: dict[str, Any] | bytes) -> None:
        if not reply or self._broker is None:
            return
        body = doc if isinstance(doc, bytes) else json.dumps(doc, separators=(",", ":")).encode()
        self._broker.publish_internal(reply.decode(), None, body)

    def _answer(self, reply: bytes | None, account: str, error: str = "") -> None:
        server = self.server.server_info()
        if not error:
            log.debug("%s - %s", UPDATED, account)
            self._send(
                reply, {"server": server, "data": {"account": account, "code": 200, "message": UPDATED}}
            )
            return
        log.error("%s - %s - %s", UPDATE_FAILED, account, error)
        data = {"account": account, "code": 500, "description": f"{UPDATE_FAILED} - {error}"}
        self._send(reply, {"server": server, "error": data})

    # -- requests ---------------------------------------------------------------------------------

    def _update(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        tokens = subject.split(b".")
        named = tokens[3].decode("utf-8", "replace") if len(tokens) == 6 else ""
        try:
            public, added = self.update(data[hdr_len:], named)
        except _Refused as e:
            self._answer(reply, e.account, str(e))
            return
        if added is None:
            self._answer(reply, public)
        else:  # answered once its JetStream runs: its users may use it as soon as they are told
            self._spawn(self._added(added, reply))

    async def _added(self, account: Account, reply: bytes | None) -> None:
        try:
            await self.server.account_added(account)
        except Exception as e:  # the account runs; its JetStream did not start
            log.exception("account %s: JetStream did not start", account.name)
            self._answer(reply, account.name, f"JetStream of the account did not start: {e}")
            return
        self._answer(reply, account.name)

    def update(self, body: bytes, named: str = "") -> tuple[str, Account | None]:
        """Take the account JWT ``body`` (for the account ``named`` by the subject, if one);
        returns the account and, when it is new to the server, its :class:`Account` (whose
        JetStream is to start), or raises :class:`_Refused`."""
        if len(body) > MAX_JWT_BYTES:
            raise _Refused(named or NO_ACCOUNT, f"JWT over {MAX_JWT_BYTES} bytes")
        token = body.decode("utf-8", "replace").strip()
        try:
            claims = decode(token, AccountClaims)
        except JwtError as e:
            raise _Refused(NO_ACCOUNT, str(e)) from None
        public = claims.sub
        if named and named != public:
            raise _Refused(named, "subject does not match jwt content")
        trusted = self.server.auth.trusted
        if trusted is None:
            raise _Refused(public, "the server is not in operator mode")
        try:
            trusted.verify(public, token)
        except OperatorError as e:
            raise _Refused(public, str(e)) from None
        known = trusted.accounts.get(public)
        if known is not None and known.iat > claims.iat:
            # nats-server stores it over the newer one; an older JWT (a replay, say, of one
            # without the revocations of today's) must not replace it
            raise _Refused(public, "a newer JWT of the account is stored (an older one is not taken)")
        stored = self.directory.names()
        if self.limit > 0 and known is None and public not in stored and len(stored) >= self.limit:
            raise _Refused(public, "jwt store is full")
        options = self._plan(trusted, claims)
        try:
            self.directory.save(public, token)
        except OSError as e:
            raise _Refused(public, f"cannot store the JWT: {e.strerror or e}") from None
        return public, self._apply(trusted, claims, token, options)

    def _plan(self, trusted: TrustedAccounts, claims: AccountClaims) -> AccountOptions:
        """The account the JWT makes, if the running server can take it (else _Refused)."""
        public = claims.sub
        known = trusted.accounts.get(public)
        trusted.accounts[public] = claims
        try:
            options = trusted.account_options(public)
        except OperatorError as e:
            raise _Refused(public, str(e)) from None
        finally:
            if known is None:
                del trusted.accounts[public]
            else:
                trusted.accounts[public] = known
        running = self.server.accounts.get(public)
        if running is not None:
            was = running.options
            if (options.exports, options.imports) != (was.exports, was.imports):
                raise _Refused(
                    public, "changing an account's exports or imports at runtime is not supported by jetpy"
                )
            js = options.jetstream if self.server.options.jetstream else None
            if js != was.jetstream:
                raise _Refused(
                    public, "changing an account's JetStream limits at runtime is not supported by jetpy"
                )
        return options

    def _apply(
        self, trusted: TrustedAccounts, claims: AccountClaims, token: str, options: AccountOptions
    ) -> Account | None:
        server = self.server
        public = claims.sub
        trusted.accounts[public] = claims
        opts = server.options
        op = opts.operator
        if op is not None:  # what a reload compares the configuration with
            preload = dict(op.preload)
            preload[public] = token
            accounts = sorted(
                [a for a in opts.accounts if a.name != public] + [options], key=lambda a: a.name
            )
            server.options = dataclasses.replace(
                opts,
                operator=dataclasses.replace(op, preload=tuple(sorted(preload.items()))),
                accounts=accounts,
            )
        running = server.accounts.get(public)
        if running is None:
            return server.accounts.add(options)
        server.account_updated(running)
        return None

    def _lookup(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        public = subject.split(b".")[3].decode("utf-8", "replace")
        self._send(reply, (self.directory.get(public) or "").encode())

    def _list(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        self._send(reply, {"data": self.directory.names(), "server": self.server.server_info()})

    def _delete(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """Deleting accounts is not built (``allow_delete: true`` is refused by the
        configuration): answered as nats-server answers without ``allow_delete``."""
        parts = data[hdr_len:].strip().split(b".")
        if len(parts) != 3:
            issuer, why = "", "expected 3 chunks"
        else:
            issuer, why = _issuer(parts[1]), "delete must be enabled in server config"
        error = {"code": 500, "description": f"delete accounts request by {issuer} failed - {why}"}
        log.error("%s", error["description"])
        self._send(reply, {"server": self.server.server_info(), "error": error})


def _issuer(claims: bytes) -> str:
    """The ``iss`` of a JWT's claims part (for the log and the reply only; "" if unreadable)."""
    try:
        doc = json.loads(base64.urlsafe_b64decode(claims + b"=" * (-len(claims) % 4)))
    except (ValueError, binascii.Error):
        return ""
    iss = doc.get("iss") if isinstance(doc, dict) else None
    return iss if isinstance(iss, str) and iss.isalnum() and len(iss) <= 64 else ""
