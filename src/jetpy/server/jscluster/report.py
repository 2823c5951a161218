"""The cluster's JetStream state as the API and the monitoring report it.

Owns: a stream's ``cluster`` block (stream info, ``STREAM.LIST``, create and update replies,
/jsz), built from its Raft group's status as nats-server fills it: the cluster's name and the
leader's; for a replicated stream also its group, since when its leader leads, the account its
group's traffic crosses and each other replica's health (``current``, ``offline``, ``active``
as nanoseconds since it was last heard from, ``lag`` in entries, ``peer`` its member id).
Also /jsz's ``meta_cluster`` and, for each stream this server holds a replica of, the stream
detail's ``cluster`` block (and its ``stream_raft_group`` when asked for Raft details).
Must not know: how a group runs, the API's routes, HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from jetpy.jetstream.jsz_models import MetaClusterInfo, MetaSnapshotStats
from jetpy.jetstream.models import ZERO_TIME, ClusterInfo, PeerInfo, format_time
from jetpy.server.nrg import GroupStatus
from jetpy.server.nrg.status import CURRENT, OFFLINE

__all__ = ["NS", "cluster_block", "jsz_overlay", "meta_cluster", "peer_infos"]

NS = 1_000_000_000


def peer_infos(st: GroupStatus) -> list[PeerInfo]:
    """The group's members other than this one, as this one sees them (a follower knows only
    its leader's health: current while it hears from it)."""
    return [
        PeerInfo(
            name=p.name,
            current=p.health == CURRENT or (p.id == st.leader and p.active),
            offline=p.health == OFFLINE,
            active=int((p.last_seen or 0.0) * NS),
            lag=p.lag or 0,
            peer=p.id,
        )
        for p in st.peers
    ]


def cluster_block(
    cluster: str, st: GroupStatus | None, names: dict[str, str], replicated: bool, traffic_account: str
) -> ClusterInfo:
    """A stream's ``cluster`` block from its group's status on this server (None: its member
    is not started yet). ``replicated``: more than one replica (nats-server reports an R1
    stream's cluster and leader only)."""
    if st is None:
        return ClusterInfo(name=cluster)
    leader = names.get(st.leader, st.leader) if st.leader else ""
    if not replicated:
        return ClusterInfo(name=cluster, leader=leader)
    since = st.leader_since
    return ClusterInfo(
        name=cluster,
        raft_group=st.group,
        leader=leader,
        leader_since=format_time(int(since * NS)) if since is not None else "",
        system_account=bool(traffic_account),
        traffic_account=traffic_account,
        replicas=peer_infos(st),
    )


def meta_cluster(cluster: str, st: GroupStatus | None, names: dict[str, str]) -> MetaClusterInfo:
    """/jsz's ``meta_cluster`` from the meta group's status here (None: not formed yet)."""
    if st is None:
        return MetaClusterInfo(name=cluster)
    return MetaClusterInfo(
        name=cluster,
        leader=names.get(st.leader, st.leader) if st.leader else "",
        peer=st.leader,
        replicas=peer_infos(st),
        cluster_size=st.voters,
        quorum_needed=st.quorum,
        pending=max(0, st.committed - st.applied),
        pending_requests=st.proposals_pending,
        snapshot=MetaSnapshotStats(
            pending_entries=max(0, st.last_index - st.first_index + 1),
            pending_size=st.log_bytes,
            last_time=format_time(int(st.last_snapshot[0] * NS)) if st.last_snapshot else ZERO_TIME,
            last_duration=int(st.last_snapshot[1] * NS) if st.last_snapshot else 0,
        ),
    )


def jsz_overlay(
    doc: dict[str, Any],
    meta: MetaClusterInfo,
    account: str,
    replica: Callable[[str], tuple[ClusterInfo, str] | None],
    raft: bool,
) -> None:
    """Put the cluster's view into /jsz's document (``jsz_stats``' builtins): ``meta_cluster``,
    and each of ``account``'s streams' ``cluster`` block from ``replica`` (its block and its
    group's name, None: no replica here), with ``stream_raft_group`` when ``raft``."""
    doc["meta_cluster"] = msgspec.to_builtins(meta)
    for detail in doc.get("account_details") or ():
        if detail.get("name") != account:
            continue
        for sd in detail.get("stream_detail") or ():
            got = replica(sd.get("name", ""))
            if got is None:
                continue
            block, group = got
            sd["cluster"] = msgspec.to_builtins(block)
            if raft and group:
                sd["stream_raft_group"] = group
