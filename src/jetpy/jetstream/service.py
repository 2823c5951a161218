"""JetStream: the composition of JetStream, and the only thing its host holds.

Builds the parts and hands each only what it needs: the committer (group commit and PubAck
release), the consumer manager (the registry's ``StreamEvents`` listener), the stream registry
(streams, the publish path, expiry), the report (``$JS.API.INFO`` and ``/jsz``), and the API
router with the stream, consumer and account routes, plus the direct-get, bulk-read and
bulk-publish handlers. Owns the order in which they start and stop, and the API of an account
without JetStream (:class:`JetStreamNotEnabled`). Nothing in JetStream imports this module.
"""

from __future__ import annotations

import logging
from typing import Any

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.bulk import BULK_SUBJECTS, DOMAIN_BULK_SUBJECTS, BulkRead
from jetpy.jetstream.api.bulk_publish import DOMAIN_PUBLISH_SUBJECTS, PUBLISH_SUBJECTS, BulkPublish
from jetpy.jetstream.api.clustering import single_server_routes
from jetpy.jetstream.api.consumers import ConsumerApi
from jetpy.jetstream.api.direct import DIRECT_SUBJECTS, DOMAIN_DIRECT_SUBJECTS, DirectGet
from jetpy.jetstream.api.guard import RequestGuard
from jetpy.jetstream.api.router import API_SUBJECTS, DOMAIN_API_SUBJECTS, ApiRouter, ApiStats, Route
from jetpy.jetstream.api.snapshot import SnapshotApi
from jetpy.jetstream.api.streams import StreamApi
from jetpy.jetstream.commit import Committer
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig
from jetpy.jetstream.ports import JetStreamConfig, MessageBus, PersistedStream, StoreProvider
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.report import Report, jsz_stats
from jetpy.jetstream.resources import ServerResources
from jetpy.jetstream.sourcing import Sourcing
from jetpy.meters import Histogram
from jetpy.store.base import StoreConfig, StreamStore

__all__ = ["JetStream", "JetStreamNotEnabled"]

log = logging.getLogger("jetpy.jetstream")


class JetStream:
    """One account's JetStream (``config.account``); ``server`` is the server's resources its
    accounts share (None: this JetStream's alone)."""

    def __init__(
        self,
        config: JetStreamConfig,
        bus: MessageBus,
        stores: StoreProvider,
        server: ServerResources | None = None,
    ) -> None:
        self.config = config
        self.bus = bus
        self.committer = Committer(bus, config.sync_interval)
        self.consumers = ConsumerManager(bus, self.committer, config.domain)
        self.committer.on_commit = self.consumers.committed
        self.registry = StreamRegistry(
            bus,
            stores,
            self.committer,
            self.consumers,
            config.max_memory,
            config.max_storage,
            limits=config.limits,
            server=server,
            domain=config.domain,
        )
        self.api_stats = ApiStats()
        self.report = Report(config, self.registry, self.consumers, self.api_stats)
        self.router = ApiRouter(bus, self.api_stats)
        self.router.add(self.report.routes())
        self.sourcing = Sourcing(self.registry, bus)
        self.router.add(StreamApi(self.registry, self.committer, self.sourcing).routes())
        self.router.add(ConsumerApi(self.registry, self.consumers).routes())
        self.snapshots = SnapshotApi(self.registry, self.consumers, bus, self.sourcing)
        self.router.add(self.snapshots.routes())
        self.router.add(single_server_routes())
        self.router.guard = RequestGuard(self.registry, self._consumer_config)
        self.direct = DirectGet(self.registry.streams, bus, self.sourcing.direct_answerer)
        self._bulk = BulkRead(self.registry.streams, bus, self.registry.require)
        self._bulk_publish = BulkPublish(self.registry, self.committer, bus)
        self._subs: list[Any] = []

    def _consumer_config(self, stream: str, name: str) -> ConsumerConfig | None:
        s = self.registry.get(stream)
        c = self.consumers.get(s, name) if s is not None else None
        return c.config if c is not None else None

    async def start(self) -> None:
        recovered = await self.registry.recover()
        for storage in ("memory", "file"):  # what recovered streams use counts from the start
            self.registry.resources.recount(storage)
        self.committer.start([s.store for s in recovered if s.durable])
        for stream in recovered:
            self.consumers.recover(stream)
        self.consumers.start()
        self._subs = [
            self.bus.subscribe(API_SUBJECTS, self.router.handle),
            self.bus.subscribe(DIRECT_SUBJECTS, self.direct.handle),
            self.bus.subscribe(BULK_SUBJECTS, self._bulk.handle),
            self.bus.subscribe(PUBLISH_SUBJECTS, self._bulk_publish.handle),
        ]
        domain = self.config.domain
        if domain:  # the same API under the domain's prefix
            self._subs += [
                self.bus.subscribe(DOMAIN_API_SUBJECTS.format(domain), self.router.handle_domain),
                self.bus.subscribe(DOMAIN_DIRECT_SUBJECTS.format(domain), self.direct.handle_domain),
                self.bus.subscribe(DOMAIN_BULK_SUBJECTS.format(domain), self._bulk.handle_domain),
                self.bus.subscribe(DOMAIN_PUBLISH_SUBJECTS.format(domain), self._bulk_publish.handle_domain),
            ]
        self.registry.expiry.schedule()
        for stream in recovered:  # mirrors and sources go on from what they stored
            self.sourcing.started(stream)

    async def stop(self) -> None:
        self.sourcing.close()
        self.registry.expiry.cancel()
        self._bulk.stop()
        self._bulk_publish.stop()
        await self.router.stop()  # a large create or update still being worked on stops here
        await self.snapshots.stop()  # backups stop, restores are abandoned (their stores deleted)
        # final commit: flush and sync everything, release what is parked; then consumer state
        await self.committer.stop()
        await self.consumers.stop()
        for h in self._subs:
            self.bus.unsubscribe(h)
        self._subs = []
        self.registry.stop()
        self.registry.resources.close()

    # -- what the host reports ------------------------------------------------------------------

    @property
    def fsync_seconds(self) -> Histogram:
        return self.committer.fsync_seconds

    def jsz_stats(
        self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str
    ) -> dict[str, Any]:
        """/jsz over this account alone (the server's document adds up every account's)."""
        return jsz_stats(
            self.config,
            [self.report],
            accounts=accounts,
            streams=streams,
            consumers=consumers,
            config_detail=config,
            account=account,
        )


class _NoStores:
    """A store provider for a JetStream that is never started (see :class:`JetStreamNotEnabled`)."""

    def create(self, config: StoreConfig) -> StreamStore:
        raise ApiError.of(E.NOT_ENABLED_FOR_ACCOUNT)

    def recover(self) -> list[PersistedStream]:
        return []

    def remove(self, name: str) -> None:
        raise ApiError.of(E.NOT_ENABLED_FOR_ACCOUNT)

    def quarantine(self, name: str, reason: str) -> str:
        return ""


class JetStreamNotEnabled:
    """The JetStream API of an account without JetStream, on a server with it: every request
    answered 10039 (``JetStream not enabled for account``) in its endpoint's response type, as
    nats-server answers. The route table is a JetStream's own, built and never started."""

    def __init__(self, bus: MessageBus, domain: str = "") -> None:
        self.bus = bus
        self.domain = domain
        table = JetStream(JetStreamConfig(), bus, _NoStores()).router.routes
        self.router = ApiRouter(bus, ApiStats())
        self.router.add({key: Route(r.response, _not_enabled, r.args) for key, r in table.items()})
        self._subs: list[Any] = []

    def start(self) -> None:
        self._subs = [self.bus.subscribe(API_SUBJECTS, self.router.handle)]
        if self.domain:
            self._subs.append(
                self.bus.subscribe(DOMAIN_API_SUBJECTS.format(self.domain), self.router.handle_domain)
            )

    def stop(self) -> None:
        for h in self._subs:
            self.bus.unsubscribe(h)
        self._subs = []


def _not_enabled(args: list[str], hdr: bytes, body: bytes) -> Any:
    raise ApiError.of(E.NOT_ENABLED_FOR_ACCOUNT)
