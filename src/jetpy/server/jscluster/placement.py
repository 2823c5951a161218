"""Placing a stream's replicas on servers, by the stream's ``placement {cluster, tags}``.

Owns: the rule (the servers of the cluster, none of those excluded, carrying every tag asked
for, compared lower-cased as nats-server does; the least loaded first, ties broken at random),
nats-server's refusal when too few match (10005 ``no suitable peers for placement``, with
``, tags not matched ['t']`` naming the tags some server lacked), and the document a server
gives of its tags when the meta leader asks (``$JSC.ST`` in the system account). Must not
know: the meta group, Raft, the API's routes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import Placement

__all__ = ["TAGS_SUBJECT", "ServerTags", "choose", "suits"]

TAGS_SUBJECT = "$JSC.ST"
"""In the system account: every server answers with its :class:`ServerTags`."""


class ServerTags(msgspec.Struct, frozen=True):
    name: str
    tags: list[str]


def suits(
    server: str, placement: Placement | None, cluster: str, tags_of: Mapping[str, Sequence[str]]
) -> bool:
    """Whether ``server`` (of this cluster) may hold a replica of a stream with ``placement``."""
    if placement is None:
        return True
    if placement.cluster and placement.cluster != cluster:
        return False
    return all(t.lower() in tags_of.get(server, ()) for t in placement.tags)


def choose(
    servers: Sequence[str],
    load: Mapping[str, int],
    replicas: int,
    placement: Placement | None,
    cluster: str,
    tags_of: Mapping[str, Sequence[str]],
) -> list[str]:
    """``replicas`` of ``servers`` (this cluster's, the excluded ones left out already)."""
    candidates = list(servers)
    want = [t.lower() for t in placement.tags] if placement is not None else []
    unmatched: list[str] = []
    if placement is not None and placement.cluster and placement.cluster != cluster:
        candidates = []
    elif want:
        unmatched = [t for t in want if any(t not in tags_of.get(s, ()) for s in candidates)]
        candidates = [s for s in candidates if all(t in tags_of.get(s, ()) for t in want)]
    if len(candidates) < replicas:
        err = "no suitable peers for placement"
        if unmatched:
            err += ", tags not matched [" + ", ".join(f"'{t}'" for t in unmatched) + "]"
        raise ApiError.of(E.CLUSTER_NO_PEERS, err=err)
    shuffled = random.sample(candidates, len(candidates))
    return sorted(shuffled, key=lambda s: load.get(s, 0))[:replicas]
