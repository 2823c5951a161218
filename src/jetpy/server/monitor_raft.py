"""``/raftz``: this server's Raft groups as nats-server 2.11+ shows them (compared with 2.15.1).

Owns the document: ``{"$SYS": {<group>: {...}}}`` (the system account's name: ``system_account``) with nats-server's field names, order and
omissions (printed with its three-space indentation by the endpoint), the ``acc`` and ``group``
filters (no ``acc``: the system account, where every jetpy group lives; another account: ``{}``)
and when there is nothing to show (no groups: nats-server's 404). Read from the host's typed
status; knows nothing of HTTP and changes nothing.

jetpy's values where nats-server's have no counterpart: ``ipq_proposal_len`` is the proposals
waiting to go into an entry, the other queue lengths are 0 (a group's loop has no such queues),
and the ``wal`` holds no timestamps per entry: ``first_ts`` is Go's zero time and ``last_ts``
the last write to the log.
"""

from __future__ import annotations

from typing import Any, Final

from jetpy.server.monitor_format import go_duration, go_time, ns
from jetpy.server.nrg import GroupStatus, RaftHost

__all__ = ["NO_RAFT_NODES", "RAFTZ_INDENT", "SYSTEM_ACCOUNT", "raftz"]

SYSTEM_ACCOUNT: Final = "$SYS"
NO_RAFT_NODES: Final = "No Raft nodes registered"  # nats-server's 404 text
GO_ZERO_TIME: Final = "0001-01-01T00:00:00Z"
RAFTZ_INDENT: Final = 3  # nats-server's json.MarshalIndent(groups, "", "   ")


def raftz(
    host: RaftHost | None, account: str, group: str, system: str = SYSTEM_ACCOUNT
) -> dict[str, Any] | None:
    """The document for the ``acc`` and ``group`` filters, the groups under the system account's
    name (``system``: ``system_account``); None: no Raft groups here (a 404)."""
    if host is None or not host.groups:
        return None
    doc: dict[str, Any] = {}
    if (account or system) == system:
        groups = {st.group: _group(st, system) for st in host.status() if not group or st.group == group}
        if groups:
            doc[system] = groups
    return doc


def _group(st: GroupStatus, system: str) -> dict[str, Any]:
    g: dict[str, Any] = {
        "id": st.id,
        "state": st.state,
        "size": st.voters + sum(1 for p in st.peers if not p.voter) + (1 if st.observer else 0),
        "quorum_needed": st.quorum,
    }
    if st.observer:
        g["observer"] = True
    g["committed"] = st.committed
    g["applied"] = st.applied
    if st.catching_up:
        g["catching_up"] = True
    if st.leader:
        g["leader"] = st.leader
    if st.leader_since is not None:
        g["leader_since"] = go_time(st.leader_since)
    g["ever_had_leader"] = st.ever_had_leader
    g["term"] = st.term
    if st.vote:
        g["voted_for"] = st.vote
    g.update(
        pterm=st.last_term,
        pindex=st.last_index,
        system_account=True,
        traffic_account=system,
        ipq_proposal_len=st.proposals_queued,
        ipq_entry_len=0,
        ipq_resp_len=0,
        ipq_apply_len=0,
        wal={
            "messages": max(0, st.last_index - st.first_index + 1),
            "bytes": st.log_bytes,
            "first_seq": st.first_index,
            "first_ts": GO_ZERO_TIME,
            "last_seq": st.last_index,
            "last_ts": go_time(st.last_append) if st.last_append is not None else GO_ZERO_TIME,
            "consumer_count": 0,
        },
    )
    if st.error:
        g["wal_error"] = st.error
    peers: dict[str, Any] = {}
    is_leader = st.state == "LEADER"
    for p in st.peers:
        peer: dict[str, Any] = {"name": p.name, "known": True}
        if is_leader and p.match:
            peer["last_replicated_index"] = p.match
        if p.last_seen is not None and (is_leader or p.id == st.leader):
            peer["last_seen"] = go_duration(ns(p.last_seen))
        peers[p.id] = peer
    g["peers"] = peers
    return g
