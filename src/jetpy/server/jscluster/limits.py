"""An account's JetStream limits on a cluster: checked by the meta leader against the account's
assignments before it proposes a stream (nats-server's ``jsClusteredStreamRequest``: the
limits are tracked from the meta layer, not from one server's streams).

Owns nats-server's rules for a create or an update: ``max_streams`` (10027, on create), a
stream ``max_consumers`` above the account's (10026), ``max_bytes_required`` (10113), a
``max_bytes`` above ``memory_max_stream_bytes``/``storage_max_stream_bytes`` (10122), then what
the stream reserves (``max_bytes`` times its replicas: every replica may hold that much, as a
publish counts each stream's bytes times its replicas, :mod:`.usage`) beyond what the account's
``max_memory``/``max_storage`` leaves after its other streams' reservations (10028 memory, 10047
storage).
A consumer's limits (``max_consumers``, ``max_ack_pending``) are the single server's, checked by
the consumer API against the account's consumer assignments. Must not know: Raft, the API's
envelope, the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError, ErrorCode
from jetpy.jetstream.models import AccountLimits, StreamConfig
from jetpy.server.jscluster.assignments import StreamAssignment

__all__ = ["check_create", "check_update", "reserved"]

_INSUFFICIENT: Final[dict[str, ErrorCode]] = {
    "memory": E.MEMORY_RESOURCES_EXCEEDED,
    "file": E.STORAGE_RESOURCES_EXCEEDED,
}


def reserved(assigned: Mapping[str, StreamAssignment], storage: str, skip: str = "") -> int:
    """What the account's streams of ``storage`` reserve across the cluster (each one's
    ``max_bytes`` times its replicas), but ``skip``'s."""
    total = 0
    for name, sa in assigned.items():
        if name == skip:
            continue
        cfg = msgspec.json.decode(sa.config, type=StreamConfig)
        if cfg.storage == storage and cfg.max_bytes > 0:
            total += cfg.max_bytes * (cfg.num_replicas or 1)
    return total


def check_create(limits: AccountLimits, assigned: Mapping[str, StreamAssignment], cfg: StreamConfig) -> None:
    """Refuse a new stream of the account past its limits (``assigned``: its streams)."""
    if cfg.name not in assigned and 0 < limits.max_streams <= len(assigned):
        raise ApiError.of(E.MAXIMUM_STREAMS_LIMIT)
    _check(limits, assigned, cfg)


def check_update(limits: AccountLimits, assigned: Mapping[str, StreamAssignment], cfg: StreamConfig) -> None:
    """:func:`check_create` for a new config of an assigned stream (its old reservation
    replaced)."""
    _check(limits, assigned, cfg)


def _check(limits: AccountLimits, assigned: Mapping[str, StreamAssignment], cfg: StreamConfig) -> None:
    if cfg.max_consumers > 0 and 0 < limits.max_consumers < cfg.max_consumers:
        raise ApiError.of(E.MAXIMUM_CONSUMERS_LIMIT)
    if limits.max_bytes_required and cfg.max_bytes <= 0:
        raise ApiError.of(E.STREAM_MAX_BYTES_REQUIRED)
    memory = cfg.storage == "memory"
    per_stream = limits.memory_max_stream_bytes if memory else limits.storage_max_stream_bytes
    if per_stream > 0 and cfg.max_bytes > per_stream:
        raise ApiError.of(E.STREAM_MAX_STREAM_BYTES_EXCEEDED)
    limit = limits.max_memory if memory else limits.max_storage
    if cfg.max_bytes <= 0 or limit <= 0:
        return
    if reserved(assigned, cfg.storage, cfg.name) + cfg.max_bytes * (cfg.num_replicas or 1) > limit:
        raise ApiError.of(_INSUFFICIENT[cfg.storage])
