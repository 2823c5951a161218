"""A replicated stream's cluster advisories, in the stream's account, as nats-server sends them:
``$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<stream>`` from the server whose replica became the
leader, and ``$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.<stream>`` from a leader that stepped down
because most of its group was out of reach.

Owns: the two documents (``type``, ``id``, ``timestamp``, ``stream``, then ``leader`` and every
member's health including the leader's own, or the members alone), the rule saying a stepdown
lost its quorum (fewer members heard from, this one included, than a quorum), and publishing
only when someone listens. Must not know: why a leader changes, the wire.
"""

from __future__ import annotations

import time

import msgspec

from jetpy.jetstream.models import PeerInfo, format_time
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import new_identity
from jetpy.server.jscluster.report import peer_infos
from jetpy.server.nrg import GroupStatus

__all__ = ["LEADER_ELECTED", "QUORUM_LOST", "leader_changed", "quorum_lost"]

LEADER_ELECTED = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.{}"
QUORUM_LOST = "$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.{}"
_TYPE = "io.nats.jetstream.advisory.v1.{}"
_json = msgspec.json.Encoder()


def quorum_lost(st: GroupStatus) -> bool:
    """Whether a group stepped down for want of a quorum of members heard from."""
    heard = 1 + sum(1 for p in st.peers if p.voter and p.active)
    return heard < st.quorum


def leader_changed(bus: MessageBus, stream: str, st: GroupStatus, server: str, leading: bool) -> None:
    """The advisory for this replica becoming (``leading``) or ceasing to be its stream's
    leader, if any (a replicated stream's only)."""
    if st.voters <= 1:
        return
    if leading:
        subject = LEADER_ELECTED.format(stream)
        kind = "stream_leader_elected"
    elif quorum_lost(st):
        subject = QUORUM_LOST.format(stream)
        kind = "stream_quorum_lost"
    else:
        return
    if not bus.has_interest(subject):
        return
    replicas = peer_infos(st)
    doc: dict[str, object] = {
        "type": _TYPE.format(kind),
        "id": new_identity() + new_identity(),
        "timestamp": format_time(time.time_ns()),
        "stream": stream,
    }
    if leading:
        doc["leader"] = server
        replicas.append(PeerInfo(name=server, current=True, peer=st.id))
    doc["replicas"] = replicas
    bus.publish(subject, None, _json.encode(doc))
