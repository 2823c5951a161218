"""Leader stepdowns: a stream's group (``$JS.API.STREAM.LEADER.STEPDOWN.<stream>``, answered by
the stream's leader) and the meta group (``$JS.API.META.LEADER.STEPDOWN``, from the system
account, answered by the meta leader).

Owns: reading a stepdown request (``{"placement": {"preferred", "cluster", "tags"}}``; a body
that is not a JSON object or array is read as none, as nats-server reads it), choosing the
successor among the group's other voters that are connected (the preferred server, else the
most caught-up one), nats-server's refusals (10005: ``preferred server "X" not known``, ``...
is already leader``, ``no replacement peer connected``), handing leadership over and waiting
until it moved, so that an info asked after the answer names the new leader. Must not know:
the routes, the wire of the system account, what a group replicates.

A placement's tags are matched against the servers' ``server_tags`` (lower-cased), as
placement matches them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import LeaderStepdownRequest
from jetpy.jetstream.api.requests import decode_request
from jetpy.jetstream.errors import ApiError
from jetpy.server.nrg import ProposalError, RaftGroup

__all__ = ["needs_tags", "read_request", "step_down", "successor"]

log = logging.getLogger("jetpy.jetstream")


def read_request(body: bytes) -> LeaderStepdownRequest:
    """The request (10025 for a malformed JSON object); a body that does not start as JSON
    (``garbage``) is no request, as nats-server takes it."""
    if body.strip()[:1] not in (b"{", b"["):
        return LeaderStepdownRequest()
    return decode_request(body, LeaderStepdownRequest)


def needs_tags(req: LeaderStepdownRequest) -> bool:
    return req.placement is not None and bool(req.placement.tags)


def successor(
    group: RaftGroup, req: LeaderStepdownRequest, cluster: str, tags_of: Mapping[str, Sequence[str]]
) -> str:
    """The member of ``group`` (led here) to hand leadership to, by the request's placement
    (``tags_of``: the servers' tags, needed when it names some); raises nats-server's 10005
    refusals."""
    st = group.status()
    place = req.placement
    voters = [p for p in st.peers if p.voter]
    if place is not None and place.preferred:
        if place.preferred == group.server_name:
            raise ApiError.of(
                E.CLUSTER_NO_PEERS, err=f'preferred server "{place.preferred}" is already leader'
            )
        voters = [p for p in voters if p.name == place.preferred]
        if not voters:
            raise ApiError.of(E.CLUSTER_NO_PEERS, err=f'preferred server "{place.preferred}" not known')
    if place is not None and place.cluster and place.cluster != cluster:
        voters = []
    if place is not None and place.tags:
        want = [t.lower() for t in place.tags]
        voters = [p for p in voters if all(t in tags_of.get(p.name, ()) for t in want)]
    live = [p for p in voters if p.active]
    if not live:
        raise ApiError.of(E.CLUSTER_NO_PEERS, err="no replacement peer connected")
    return max(live, key=lambda p: p.match or 0).id


async def step_down(group: RaftGroup, target: str) -> None:
    """Hand the group's leadership to ``target`` and wait until it took it (a group error
    otherwise: 10041 with the reason)."""
    try:
        await group.transfer_leadership(target)
    except ProposalError as exc:
        log.warning("raft %s: leadership was not handed over: %s", group.name, exc)
        raise ApiError.of(E.RAFT_GENERAL, err=str(exc)) from None
