"""JetStream's resource limits: the server's (``max_memory_store``, ``max_file_store``, shared by
every account) and each account's own (its ``jetstream {}`` limits).

Owns, per storage type, the limits, what streams reserve (the sum of their ``max_bytes``) and
what they use, and nats-server's rules:

* creating or updating a stream: an account's ``max_streams`` (10027, on create), a stream
  ``max_consumers`` above the account's (10026), ``max_bytes_required`` (10113), a ``max_bytes``
  above the account's ``memory_max_stream_bytes``/``storage_max_stream_bytes`` (10122), then a
  ``max_bytes`` that does not fit what the account's limit leaves, or the server's (10028
  memory, 10047 storage);
* publishing: a message that would take the account past its ``max_memory``/``max_storage`` is
  refused with 10002, and one arriving while the streams of its storage type use the server's
  limit or more with 10023.

A single server's streams have one replica each, so each counts its bytes once; a cluster's
count of an account is each stream's bytes times its replicas, of which this is the case of one.

Usage is kept cheaply for the publish path: every stored message adds an upper bound of its size
to running totals (the server's and the account's), and only when a total says a limit is near
is it recomputed exactly from the stores (removals since the last count only ever make a total
too high, never too low), so a publish is refused only on the exact count, as nats-server
refuses it.

Must not know: the network, the API envelope, consumers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError, ErrorCode
from jetpy.jetstream.models import AccountLimits, StreamConfig
from jetpy.jetstream.stream import Stream

__all__ = ["MSG_SIZE_BOUND", "Gauge", "ResourceLimits", "ServerResources", "stored_size"]

Storage = Literal["file", "memory"]

MSG_SIZE_BOUND: Final = 64
"""Added to subject + data per stored message for the running total: more than either store
counts per message (16 in memory, 34 on file), so the total never falls short."""

UNLIMITED: Final = 1 << 62

_INSUFFICIENT: Final[dict[str, ErrorCode]] = {
    "memory": E.MEMORY_RESOURCES_EXCEEDED,
    "file": E.STORAGE_RESOURCES_EXCEEDED,
}

# what a message costs in each store, on top of subject, headers and payload (nats-server's
# memStoreMsgSize and fileStoreMsgSize: the account limit is checked against these)
_MEMORY_OVERHEAD: Final = 16
_FILE_OVERHEAD: Final = 30
_FILE_HEADERS_OVERHEAD: Final = 4


def stored_size(storage: str, subject: int, hdr: int, data: int) -> int:
    """What a message of these lengths counts in a store of ``storage``."""
    if storage == "memory":
        return subject + hdr + data + _MEMORY_OVERHEAD
    return subject + hdr + data + _FILE_OVERHEAD + (_FILE_HEADERS_OVERHEAD if hdr else 0)


class Gauge:
    """One storage type's limit and running usage (the publish path reads these two)."""

    __slots__ = ("limit", "storage", "used")

    def __init__(self, storage: Storage, limit: int) -> None:
        self.storage = storage
        self.limit = limit if limit > 0 else UNLIMITED
        self.used = 0


def _usage(streams: Mapping[str, Stream], storage: str) -> int:
    return sum(s.store.state().bytes for s in streams.values() if s.config.storage == storage)


def _reserved(streams: Mapping[str, Stream], storage: str, skip: str = "") -> int:
    return sum(
        s.config.max_bytes
        for s in streams.values()
        if s.config.storage == storage and s.config.max_bytes > 0 and s.name != skip
    )


class ServerResources:
    """The server's limits, over every account's streams."""

    def __init__(self, max_memory: int, max_storage: int) -> None:
        self.gauges: dict[str, Gauge] = {
            "memory": Gauge("memory", max_memory),
            "file": Gauge("file", max_storage),
        }
        self.accounts: list[Mapping[str, Stream]] = []  # each account's streams

    def recount(self, storage: str) -> int:
        used = sum(_usage(streams, storage) for streams in self.accounts)
        self.gauges[storage].used = used
        return used

    def exhausted(self, storage: str) -> bool:
        return self.recount(storage) >= self.gauges[storage].limit

    def reserved(self, storage: str, skip: Mapping[str, Stream] | None = None, name: str = "") -> int:
        return sum(_reserved(streams, storage, name if streams is skip else "") for streams in self.accounts)


class ResourceLimits:
    """One account's view: its limits, and the server's it shares with the other accounts."""

    def __init__(
        self,
        streams: Mapping[str, Stream],
        max_memory: int = -1,
        max_storage: int = -1,
        limits: AccountLimits | None = None,
        server: ServerResources | None = None,
    ) -> None:
        self._streams = streams
        self.server = server if server is not None else ServerResources(max_memory, max_storage)
        self.server.accounts.append(streams)
        self.limits = limits if limits is not None else AccountLimits()
        self.account_gauges: dict[str, Gauge] = {
            "memory": Gauge("memory", self.limits.max_memory),
            "file": Gauge("file", self.limits.max_storage),
        }

    def close(self) -> None:
        """The account's JetStream stops: its streams no longer count for the server."""
        if self._streams in self.server.accounts:
            self.server.accounts.remove(self._streams)

    def gauge(self, storage: str) -> Gauge:
        """The server's gauge for ``storage`` (shared by every account)."""
        return self.server.gauges[storage]

    def account_gauge(self, storage: str) -> Gauge:
        return self.account_gauges[storage]

    # -- usage ----------------------------------------------------------------------------------

    def recount(self, storage: str) -> int:
        """Measure what this account's streams of ``storage`` use now (and the server's total);
        the running totals become exact."""
        used = _usage(self._streams, storage)
        self.account_gauges[storage].used = used
        self.server.recount(storage)
        return used

    def exhausted(self, storage: str) -> bool:
        """Is the server's limit used up, by the exact count? (Called when the running total
        says so.)"""
        return self.server.exhausted(storage)

    def account_exceeded(self, storage: str, size: int) -> bool:
        """Would ``size`` more bytes take the account past its limit, by the exact count?
        (Called when the running total says so.)"""
        g = self.account_gauges[storage]
        g.used = _usage(self._streams, storage)
        return g.used + size > g.limit

    def reserved(self, storage: str, skip: str = "") -> int:
        """What this account's streams reserve."""
        return _reserved(self._streams, storage, skip)

    # -- create and update ----------------------------------------------------------------------

    def check_create(self, cfg: StreamConfig) -> None:
        """Refuse a new stream past the account's limits or what the limits leave."""
        lim = self.limits
        if lim.max_streams > 0 and len(self._streams) >= lim.max_streams:
            raise ApiError.of(E.MAXIMUM_STREAMS_LIMIT)
        self._check_config(cfg, "")

    def check_update(self, cfg: StreamConfig, name: str) -> None:
        """:meth:`check_create` for an update of the stream ``name`` (its old reservation is
        replaced, and it is already counted)."""
        self._check_config(cfg, name)

    def _check_config(self, cfg: StreamConfig, skip: str) -> None:
        lim = self.limits
        if cfg.max_consumers > 0 and 0 < lim.max_consumers < cfg.max_consumers:
            raise ApiError.of(E.MAXIMUM_CONSUMERS_LIMIT)
        if lim.max_bytes_required and cfg.max_bytes <= 0:
            raise ApiError.of(E.STREAM_MAX_BYTES_REQUIRED)
        per_stream = lim.memory_max_stream_bytes if cfg.storage == "memory" else lim.storage_max_stream_bytes
        if per_stream > 0 and cfg.max_bytes > per_stream:
            raise ApiError.of(E.STREAM_MAX_STREAM_BYTES_EXCEEDED)
        self.check_reservation(cfg, skip)

    def check_reservation(self, cfg: StreamConfig, skip: str = "") -> None:
        """Refuse a config whose ``max_bytes`` does not fit what the account's limit leaves, or
        the server's (``skip``: the stream being updated, whose old reservation is replaced)."""
        if cfg.max_bytes <= 0:
            return
        acc = self.account_gauges[cfg.storage]
        if self.reserved(cfg.storage, skip) + cfg.max_bytes > acc.limit:
            raise ApiError.of(_INSUFFICIENT[cfg.storage])
        g = self.server.gauges[cfg.storage]
        if self.server.reserved(cfg.storage, self._streams, skip) + cfg.max_bytes > g.limit:
            raise ApiError.of(_INSUFFICIENT[cfg.storage])

    def consumer_limit(self, stream: StreamConfig) -> int:
        """How many consumers a stream may have (0: no limit): its own ``max_consumers``, or the
        account's when that is lower (nats-server applies the account's per stream)."""
        mine, acc = stream.max_consumers, self.limits.max_consumers
        if mine <= 0 or 0 < acc < mine:
            return max(acc, 0)
        return mine
