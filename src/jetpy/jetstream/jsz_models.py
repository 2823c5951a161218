"""The /jsz document (nats-server's ``JSInfo``) as msgspec Structs, on top of ``models``.

Owns the shape of what JetStream reports to the monitor: the configured limits, the usage
counters, and per account the stream details with their consumers, with nats-server's field
names and order (Go's ``JSInfo``, ``JetStreamStats``, ``AccountDetail``, ``StreamDetail``) and
what it omits. ``server_id``, ``now`` and the paging of accounts are the monitor's. Knows nothing
of streams as running things, the monitor or HTTP.
"""

from __future__ import annotations

import msgspec

from jetpy.jetstream.models import (
    ZERO_TIME,
    ClusterInfo,
    ConsumerInfo,
    JetStreamApiStats,
    PeerInfo,
    StorageUsage,
    StreamConfig,
    StreamState,
    _always,
    _Wire,
)

__all__ = [
    "AccountDetail",
    "JSInfo",
    "JetStreamStats",
    "JszConfig",
    "MetaClusterInfo",
    "MetaSnapshotStats",
    "StreamDetail",
]


class JszConfig(_Wire, frozen=True):
    """The JetStream limits as configured (Go's ``JetStreamConfig``, as /jsz writes it)."""

    max_memory: int = _always(0)
    max_storage: int = _always(0)
    store_dir: str = ""
    domain: str = ""


class StreamDetail(_Wire, frozen=True):
    """One stream: ``config`` only when asked for, ``consumer_detail`` when asked for and there
    are consumers. A single server names itself the ``cluster`` leader."""

    name: str = _always("")
    created: str = _always(ZERO_TIME)
    cluster: ClusterInfo | None = None
    config: StreamConfig | None = None
    state: StreamState = _always(StreamState())
    consumer_detail: list[ConsumerInfo] = msgspec.field(default_factory=list)


class MetaSnapshotStats(_Wire, frozen=True):
    """The meta group's log since its last snapshot here (Go's ``MetaSnapshotStats``): entries
    and bytes not yet compacted, when the last snapshot was taken (the zero time: never) and
    how long it took (ns, omitted before the first)."""

    pending_entries: int = _always(0)
    pending_size: int = _always(0)
    last_time: str = _always(ZERO_TIME)
    last_duration: int = 0


class MetaClusterInfo(_Wire, frozen=True):
    """The meta group as one server sees it (Go's ``MetaClusterInfo``): the cluster's name, the
    leader's name and its member id (``peer``), the other members, how many there are and how
    many make a quorum, the entries committed but not yet applied here (``pending``), the
    assignment changes proposed here and not yet answered (``pending_requests``), the info
    requests queued (``pending_infos``: none, infos are gathered as they come) and the log
    since its last snapshot."""

    name: str = ""
    leader: str = ""
    peer: str = ""
    replicas: list[PeerInfo] = msgspec.field(default_factory=list)
    cluster_size: int = _always(0)
    quorum_needed: int = _always(0)
    pending: int = _always(0)
    pending_requests: int = _always(0)
    pending_infos: int = _always(0)
    snapshot: MetaSnapshotStats | None = None


class JetStreamStats(StorageUsage, frozen=True):
    """Go's ``JetStreamStats``: usage, how many accounts use JetStream, HA assets, api counters."""

    accounts: int = _always(0)
    ha_assets: int = _always(0)
    api: JetStreamApiStats = _always(JetStreamApiStats())


class AccountDetail(_Wire, frozen=True):
    """One account: its name and id, then its ``JetStreamStats`` (written out: Go embeds them
    after the name, where a Struct base cannot put them) and, when asked for, its streams."""

    name: str = _always("")
    id: str = _always("")
    memory: int = _always(0)
    storage: int = _always(0)
    reserved_memory: int = _always(0)
    reserved_storage: int = _always(0)
    accounts: int = _always(0)
    ha_assets: int = _always(0)
    api: JetStreamApiStats = _always(JetStreamApiStats())
    stream_detail: list[StreamDetail] = msgspec.field(default_factory=list)


class JSInfo(JetStreamStats, frozen=True):
    """The /jsz document without the monitor's ``server_id`` and ``now``. Go writes ``config``
    before the stats; the monitor puts the top level in nats-server's order."""

    config: JszConfig = _always(JszConfig())
    streams: int = _always(0)
    consumers: int = _always(0)
    messages: int = _always(0)
    bytes: int = _always(0)
    account_details: list[AccountDetail] = msgspec.field(default_factory=list)
