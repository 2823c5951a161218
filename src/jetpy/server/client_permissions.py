"""ClientPermissions: a client connection's identity and what its permissions make it do.

Owns, for one connection: taking an :class:`~jetpy.server.auth.Identity` (after CONNECT, a
no_auth_user login or a reload), the replies it may send under ``allow_responses``, a
violation's -ERR, log line and count, the delivery checks (messages a wildcard subscription may
not see, requests whose replies it may answer), which replace the connection's own delivery
methods only for clients that need them, and the removal of subscriptions a reload no longer
allows. The decisions themselves are :class:`~jetpy.server.permissions.Permissions`'. A mixin of
:class:`~jetpy.server.connection.ClientConnection`, knowing it only by the attributes below.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from jetpy.protocol import encode as enc
from jetpy.server.auth import Identity
from jetpy.server.broker import Broker, Subscription
from jetpy.server.client_log import ClientIdentity, ClientLog
from jetpy.server.permissions import Permissions, Replies

__all__ = ["ClientPermissions"]

log = logging.getLogger("jetpy.server")


class _Counts(Protocol):
    violations: dict[str, int]  # permission violations by kind, for /metrics


class ClientPermissions:
    """The permissions half of a client connection (a mixin)."""

    identity: Identity
    user: str
    ident: ClientIdentity
    perms: Permissions | None
    _pub_ok: Callable[[bytes], bool] | None
    replies: Replies | None
    closed: bool
    subs: dict[bytes, Subscription]
    broker: Broker
    log: ClientLog
    server: _Counts

    if TYPE_CHECKING:

        def send(self, data: bytes) -> None: ...

        def deliver(
            self,
            sub: Subscription,
            subject: bytes,
            reply: bytes | None,
            hdr_len: int,
            data: bytes,
            tail: bytes,
        ) -> None: ...

        def deliver_run(
            self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]
        ) -> None: ...

        def deliver_batch(
            self,
            sub: Subscription,
            subjects: list[bytes],
            replies: list[bytes] | None,
            hdrs: list[bytes],
            datas: list[bytes],
        ) -> bool: ...

    def _set_identity(self, identity: Identity) -> None:
        """Take ``identity`` (a CONNECT, a no_auth_user login or a reload): its name for logs and
        monitoring, its permissions, and the delivery checks those need."""
        self.identity = identity
        self.user = identity.user
        self.ident.user = identity.log_name
        self.ident.nkey = identity.kind == "nkey"
        self.ident.account = identity.account
        perms = self.perms = identity.permissions
        self._pub_ok = perms.may_publish if perms is not None and perms.checks_publish else None
        resp = perms.responses if perms is not None else None
        if resp is None:
            self.replies = None
        elif self.replies is None or self.replies.permission != resp:
            self.replies = Replies(resp)
        for sub in self.subs.values():  # (a reload: what the new permissions filter)
            sub.filtered = perms is not None and perms.filters(sub.subject)
        self._install_checks()

    def _install_checks(self) -> None:
        """Deliveries are checked only for a client that needs it (a subscription to filter, or
        replies to track): everyone else keeps the class's methods (no cost on the hot path)."""
        needed = self.replies is not None or any(sub.filtered for sub in self.subs.values())
        if needed:
            self.deliver = self._deliver_checked  # type: ignore[method-assign]
            self.deliver_run = self._deliver_run_checked  # type: ignore[method-assign]
            self.deliver_batch = _one_by_one  # type: ignore[method-assign]
        else:
            for name in ("deliver", "deliver_run", "deliver_batch"):
                self.__dict__.pop(name, None)

    def _filter_new(self, sub: Subscription) -> None:
        """A subscription was made: does it need its deliveries checked?"""
        perms = self.perms
        if perms is not None and perms.filters(sub.subject):
            sub.filtered = True
            self._install_checks()

    def _answers(self, subject: bytes) -> bool:
        """May the client publish to ``subject`` as a reply to a request it received?"""
        replies = self.replies
        return replies is not None and replies.may_answer(subject, time.monotonic())

    def _violation(self, kind: str, err: str, log_text: str) -> None:
        """A refused publish, reply subject or subscription: -ERR and a log line; the connection
        stays open, as in nats-server."""
        self.server.violations[kind] = self.server.violations.get(kind, 0) + 1
        self.send(enc.err(err))
        self.log.error(self.ident, log_text)

    def _deliver_checked(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None:
        if sub.filtered and self.perms is not None and self.perms.denies_delivery(subject):
            return
        if reply and self.replies is not None and not self.closed:
            self.replies.received(reply, time.monotonic())
        type(self).deliver(self, sub, subject, reply, hdr_len, data, tail)

    def _deliver_run_checked(
        self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]
    ) -> None:
        if sub.filtered and self.perms is not None and self.perms.denies_delivery(subject):
            return
        type(self).deliver_run(self, sub, subject, datas, tails)

    def _remove_unauthorized_subs(self) -> None:
        """After a reload: subscriptions the new permissions refuse are removed, each with an
        -ERR and nats-server's notice."""
        perms = self.perms
        if perms is None:
            return
        for sid, sub in list(self.subs.items()):
            if perms.may_subscribe(sub.subject, sub.queue):
                continue
            del self.subs[sid]
            self.broker.remove(sub)
            subject, sid_text = sub.subject.decode(errors="replace"), sid.decode(errors="replace")
            self.send(enc.err(f'Permissions Violation for Subscription to "{subject}" (sid "{sid_text}")'))
            who = f'Nkey "{self.user}"' if self.identity.kind == "nkey" else f'User "{self.user or "N/A"}"'
            log.info('Removed sub "%s" (sid "%s") for %s - not authorized', subject, sid_text, who)


def _one_by_one(
    sub: Subscription,
    subjects: list[bytes],
    replies: list[bytes] | None,
    hdrs: list[bytes],
    datas: list[bytes],
) -> bool:
    """``deliver_batch`` of a client whose deliveries are checked: the broker then delivers the
    batch message by message (through the checked ``deliver``)."""
    return False
