"""What an account's streams store across the cluster, for its ``max_memory``/``max_storage`` at
publish: a stream's leader refuses a message that would take the account past its limit with
10002 before proposing it (nats-server's ``wouldExceedLimits`` on the leader), so every replica
applies the same entries.

The rule: the account's use of a storage type is, for each of its streams of that type, the
stream's bytes times its replicas (every replica holds what the leader holds once caught up),
and the new message counts once per replica of its stream; past the limit, 10002. So the limit
has the effect ``$JS.API.INFO`` reports (:mod:`.api`: each stream's leader's bytes times its
replicas): a message is refused when INFO's storage plus the message times its replicas would
pass the limit, so the account's INFO stays within its limit. An R1 stream counts its bytes once, as on a single server
(:mod:`jetpy.jetstream.resources`, where every stream is R1), and a stream's create reserves
its ``max_bytes`` times its replicas against the same limits (:mod:`.limits`).

A stream's bytes: for a stream this server leads, its replica's exact bytes, so a stream's
leader counts its own streams without depending on when any report arrives; for one it
follows, its replica's (behind its leader's by the entries in flight); for one it holds no
replica of, the most its servers last reported. Every server reports, each
:data:`REPORT_INTERVAL`, the bytes of its replicas of each account with such a limit
(``$JSC.ARU.<account>`` in the system account). The most reported, not the sum of the reports,
times the replicas: the leader holds the most (its followers apply what it appended), so the
most reported is its figure at its last report, INFO's count then; a sum falls short of INFO
by a replica that lags, is down or has not reported yet.

nats-server 2.15.1 counts every replica too, from reports: each server's count of the account
is what its own replicas hold plus what every other server last reported of theirs (each
server's report sums its replicas), and the new message once per replica. Its reports lag: a
stream's followers' bytes count from their servers' next reports, so an account filling fast
passes the limit by what was stored since (down to counting the leader's replica alone: the
stream once); once the reports have arrived, its steady state is every replica's bytes, this
rule's figure. What other servers' replicas took since their last report lags here the same
way for the streams this server holds no replica of.

The running total: each exact count is kept, and each accepted message adds its share (its
size times its replicas), until a message would pass the limit by it, or
:data:`REPORT_INTERVAL` after the count: then the account is counted exactly again, so a
publish is refused on an exact count only, as a single server's refuses it.

Owns: the reports, the totals, the check. Must not know: how a stream runs, Raft, the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from jetpy.jetstream.models import StreamConfig
from jetpy.jetstream.resources import stored_size
from jetpy.server.broker import Broker, Subscription
from jetpy.server.jscluster.local import Replica

if TYPE_CHECKING:
    from jetpy.server.jscluster.account import AccountScope

__all__ = ["REPORT_INTERVAL", "USAGE_SUBJECT", "ClusterUsage", "limit_of", "replicas_of"]

USAGE_SUBJECT: Final = "$JSC.ARU.{}"
"""In the system account: a server's report of what its replicas of the account's streams hold."""
REPORT_INTERVAL: Final = 1.0  # seconds between a server's reports, and between exact counts


class UsageReport(msgspec.Struct, frozen=True):
    server: str
    streams: dict[str, int]  # the bytes its replica of each of the account's streams holds


def replicas_of(peers: Sequence[str]) -> int:
    """How many replicas a stream's account use counts (its assigned servers, as
    ``$JS.API.INFO`` counts them; at least its one)."""
    return max(len(peers), 1)


def limit_of(scope: AccountScope, storage: str) -> int:
    """The account's limit for ``storage`` (0: none)."""
    limits = scope.limits
    limit = limits.max_memory if storage == "memory" else limits.max_storage
    return max(limit, 0)


class ClusterUsage:
    def __init__(self, server_name: str, system: Broker, scopes: Mapping[str, AccountScope]) -> None:
        self.server_name = server_name
        self.system = system
        self.scopes = scopes
        self.reported: dict[str, dict[str, dict[str, int]]] = {}  # account, server, stream: bytes
        # (account, storage): the running total and when it was last counted exactly
        self._totals: dict[tuple[str, str], tuple[int, float]] = {}
        self._sub: Subscription | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sub = self.system.subscribe_internal(USAGE_SUBJECT.format(">"), self._on_report)
        self._task = asyncio.get_running_loop().create_task(self._report(), name="jetstream-usage")

    def stop(self) -> None:
        if self._sub is not None:
            self.system.unsubscribe_internal(self._sub)
            self._sub = None
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _report(self) -> None:
        while True:
            await asyncio.sleep(REPORT_INTERVAL)
            for account, scope in list(self.scopes.items()):
                if not (limit_of(scope, "memory") or limit_of(scope, "file")):
                    continue
                held = {name: rep.stream.store.state().bytes for name, rep in scope.replicas.items()}
                doc = msgspec.json.encode(UsageReport(self.server_name, held))
                self.system.publish_internal(USAGE_SUBJECT.format(account), None, doc)

    def _on_report(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        with contextlib.suppress(msgspec.DecodeError, ValueError):
            report = msgspec.json.decode(data[hdr_len:], type=UsageReport)
            if report.server != self.server_name:
                account = subject.decode()[len(USAGE_SUBJECT.format("")) :]
                self.reported.setdefault(account, {})[report.server] = report.streams

    def used(self, scope: AccountScope, storage: str) -> int:
        """The account's streams of ``storage``, counted exactly: each one's bytes (this
        server's replica's, else the most any server reported) times its replicas."""
        reports = self.reported.get(scope.account, {})
        total = 0
        for name, sa in scope.assignments.items():
            rep = scope.replicas.get(name)
            if rep is not None:
                if rep.stream.config.storage != storage:
                    continue
                held = rep.stream.store.state().bytes
            else:
                if msgspec.json.decode(sa.config, type=StreamConfig).storage != storage:
                    continue
                held = max((r.get(name, 0) for r in reports.values()), default=0)
            total += held * replicas_of(sa.peers)
        return total

    def would_exceed(self, scope: AccountScope, rep: Replica, subject: int, hdr: int, data: int) -> bool:
        """Would this message take the account past its limit for the stream's storage? (A
        stream's leader asks before it proposes the message.)"""
        storage = rep.stream.config.storage
        limit = limit_of(scope, storage)
        if not limit:
            return False
        size = stored_size(storage, subject, hdr, data)
        add = size * replicas_of(rep.assigned_peers)
        key = (scope.account, storage)
        now = time.monotonic()
        total, counted = self._totals.get(key, (0, 0.0))
        if total + add > limit or now - counted > REPORT_INTERVAL:
            total, counted = self.used(scope, storage), now
        if total + add > limit:
            self._totals[key] = (total, counted)
            return True
        self._totals[key] = (total + add, counted)
        return False
