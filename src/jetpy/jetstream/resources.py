"""The server's JetStream resource limits: ``max_memory_store`` and ``max_file_store``.

Owns, per storage type, the limit, what streams reserve (the sum of their ``max_bytes``) and what
they use, and nats-server's two rules: a stream whose ``max_bytes`` would reserve more than the
limit leaves is refused at create/update (10028 memory, 10047 storage), and a publish arriving
while the streams of its storage type use the limit or more is refused with 10023.

Usage is kept cheaply for the publish path: every stored message adds an upper bound of its size
to a running total, and only when that total reaches the limit is it recomputed exactly from the
stores (removals since the last count only ever make the total too high, never too low), so a
publish is refused only on the exact count, as nats-server refuses it.

Must not know: the network, the API envelope, consumers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError, ErrorCode
from jetpy.jetstream.models import StreamConfig
from jetpy.jetstream.stream import Stream

__all__ = ["MSG_SIZE_BOUND", "Gauge", "ResourceLimits"]

Storage = Literal["file", "memory"]

MSG_SIZE_BOUND: Final = 64
"""Added to subject + data per stored message for the running total: more than either store
counts per message (16 in memory, 34 on file), so the total never falls short."""

_INSUFFICIENT: Final[dict[str, ErrorCode]] = {
    "memory": E.MEMORY_RESOURCES_EXCEEDED,
    "file": E.STORAGE_RESOURCES_EXCEEDED,
}


class Gauge:
    """One storage type's limit and running usage (the publish path reads these two)."""

    __slots__ = ("limit", "storage", "used")

    def __init__(self, storage: Storage, limit: int) -> None:
        self.storage = storage
        self.limit = limit if limit > 0 else 1 << 62
        self.used = 0


class ResourceLimits:
    def __init__(self, streams: Mapping[str, Stream], max_memory: int, max_storage: int) -> None:
        self._streams = streams
        self.gauges: dict[str, Gauge] = {
            "memory": Gauge("memory", max_memory),
            "file": Gauge("file", max_storage),
        }

    def gauge(self, storage: str) -> Gauge:
        return self.gauges[storage]

    # -- usage ----------------------------------------------------------------------------------

    def recount(self, storage: str) -> int:
        """Measure what the streams of ``storage`` use now; the running total becomes exact."""
        used = sum(s.store.state().bytes for s in self._streams.values() if s.config.storage == storage)
        self.gauges[storage].used = used
        return used

    def exhausted(self, storage: str) -> bool:
        """Is the limit used up, by the exact count? (Called when the running total says so.)"""
        g = self.gauges[storage]
        return self.recount(storage) >= g.limit

    def reserved(self, storage: str, skip: str = "") -> int:
        return sum(
            s.config.max_bytes
            for s in self._streams.values()
            if s.config.storage == storage and s.config.max_bytes > 0 and s.name != skip
        )

    # -- create and update ----------------------------------------------------------------------

    def check_reservation(self, cfg: StreamConfig, skip: str = "") -> None:
        """Refuse a config whose ``max_bytes`` does not fit what the limit leaves (``skip``: the
        stream being updated, whose old reservation is replaced)."""
        if cfg.max_bytes <= 0:
            return
        g = self.gauges[cfg.storage]
        if self.reserved(cfg.storage, skip) + cfg.max_bytes > g.limit:
            raise ApiError.of(_INSUFFICIENT[cfg.storage])
