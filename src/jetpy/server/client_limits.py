"""ClientLimits: the limits a JWT user's connection carries (operator mode).

Owns, for one connection, what its :class:`~jetpy.server.operator.ConnLimits` make it do once it
has logged in: its account's ``conn`` limit (the login refused with nats-server's ``maximum
account active connections exceeded``), the subscriptions it may hold (the tighter of its own,
its account's and the server's ``max_subscriptions``), the payload it may publish (the tighter of
those and the server's ``max_payload``: more is ``Maximum Payload Violation``, as by the parser),
and the end of its authentication (when its user or account JWT expires the connection is
closed with ``User Authentication Expired``, or ``Account Authentication Expired`` when the
account's came first); all of it taken again when its JWTs change while it is connected (a
pushed account JWT, a reload), as are the server's ``max_control_line`` and ``max_payload`` on a
reload (:meth:`ClientLimits.limits_changed`). A client without JWT limits pays nothing. A mixin
of :class:`~jetpy.server.connection.ClientConnection`, knowing it only by the attributes below.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final

from jetpy.protocol.errors import (
    ERR_ACCOUNT_EXPIRED,
    ERR_AUTH_EXPIRED,
    ERR_MAX_ACCOUNT_CONNECTIONS,
    ERR_MAX_PAYLOAD,
)
from jetpy.protocol.ops import ERR, PUB, PUBR, PUBS, Op
from jetpy.protocol.parser import Parser
from jetpy.server.auth import Identity
from jetpy.server.client_log import ClientIdentity, ClientLog

if TYPE_CHECKING:
    from jetpy.server.accounts import Account

__all__ = ["PAYLOAD_VIOLATION", "ClientLimits"]

PAYLOAD_VIOLATION: Final = b"\x00max payload"
"""The argument of the ERR op :meth:`ClientLimits.clip_payloads` puts where a message read with
CONNECT is over the JWT's payload limit (no client can send it: it holds a NUL)."""


class ClientLimits:
    """The JWT limits half of a client connection (a mixin)."""

    identity: Identity
    account: Account
    parser: Parser
    ident: ClientIdentity
    log: ClientLog
    sub_limit: int = -1  # the JWT's subscriptions limit (-1: none of its own)
    _over_size = 0  # the size of the message clip_payloads found over the limit
    _expiry_timer: asyncio.TimerHandle | None = None

    if TYPE_CHECKING:

        def close_with_error(self, err: str, reason: str = "") -> None: ...

    def _take_limits(self, server_max_payload: int) -> bool:
        """Apply the identity's limits after login; False when its account is full (the client
        has then been told and closed)."""
        lim = self.identity.limits
        if lim is None:
            return True
        if lim.max_account_conns >= 0 and self.account.connections >= lim.max_account_conns:
            self.log.error(self.ident, ERR_MAX_ACCOUNT_CONNECTIONS)
            self.close_with_error(ERR_MAX_ACCOUNT_CONNECTIONS, reason="Maximum Account Connections Exceeded")
            return False
        self.apply_limits(server_max_payload)
        return True

    def apply_limits(self, server_max_payload: int) -> None:
        """Take the identity's subscription and payload limits and the end of its
        authentication: at login, and again when its JWTs change (a reload, or an account JWT
        pushed to the resolver) for a client that stays connected."""
        lim = self.identity.limits
        if lim is None:
            return
        self.sub_limit = lim.max_subs
        self.limits_payload(server_max_payload)
        self._cancel_expiry()
        if lim.expires:
            delay = max(lim.expires - time.time(), 0.0)
            self._expiry_timer = asyncio.get_running_loop().call_later(delay, self._auth_expired)

    def limits_changed(self, max_control_line: int, max_payload: int) -> None:
        """New protocol limits for what this client sends from now on (nats-server's reload)."""
        self.parser.max_control_line = max_control_line
        self.limits_payload(max_payload)

    def limits_payload(self, server_max_payload: int) -> None:
        """The payload this client may publish: the server's, or its JWT's when tighter."""
        lim = self.identity.limits
        own = lim.max_payload if lim is not None else -1
        self.parser.max_payload = server_max_payload if own < 0 else min(own, server_max_payload)

    def clip_payloads(self, ops: list[Op], connect: Op) -> None:
        """Ops read together with CONNECT were parsed before its payload limit applied: cut them
        at the first message over it, where the client is then closed (``payload_violation``)."""
        limit = self.parser.max_payload
        start = next(i for i, op in enumerate(ops) if op is connect) + 1
        for j in range(start, len(ops)):
            op = ops[j]
            if op[0] == PUB:
                sizes = [len(op[4])]
            elif op[0] == PUBS:
                sizes = [len(d) for d in op[2]]
            elif op[0] == PUBR:
                sizes = [len(d) for d in op[4]]
            else:
                continue
            over = next((k for k, size in enumerate(sizes) if size > limit), None)
            if over is None:
                continue
            self._over_size = sizes[over]
            del ops[j + (over > 0) :]
            if over > 0:  # the run's messages before the large one still go out
                ops[j] = (op[0], op[1], *(field[:over] for field in op[2:]))
            ops.append((ERR, PAYLOAD_VIOLATION))
            return

    def payload_violation(self) -> None:
        self.log.error(
            self.ident, f"maximum payload exceeded: {self._over_size} vs {self.parser.max_payload}"
        )
        self.close_with_error(ERR_MAX_PAYLOAD, reason="Maximum Message Payload Exceeded")

    def max_subs(self, server_max_subs: int) -> int:
        """Subscriptions this client may hold (-1: no limit), given the server's
        ``max_subscriptions`` (0 or less: none)."""
        server = server_max_subs if server_max_subs > 0 else -1
        own = self.sub_limit
        if own < 0:
            return server
        return own if server < 0 else min(own, server)

    def _auth_expired(self) -> None:
        self._expiry_timer = None
        lim = self.identity.limits
        err = ERR_ACCOUNT_EXPIRED if lim is not None and lim.account_expires else ERR_AUTH_EXPIRED
        self.log.error(self.ident, err)
        self.close_with_error(err, reason="Authentication Expired")

    def _cancel_expiry(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
