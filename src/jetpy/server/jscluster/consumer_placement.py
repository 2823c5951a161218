"""Which servers a consumer's replicas are on, as its stream's placement or its own replicas
change (nats-server's rules, checked against nats-server 2.15).

Owns: a consumer following its stream's new placement (:func:`follow`, applied by the meta
group with the stream's change, so it is the same on every server and never lags the stream):
a durable with ``num_replicas`` 0 (the stream's), and every consumer of a work-queue or
interest stream (they must have the stream's replicas), takes the stream's replica count;
any other keeps its own, capped by the stream's (its config's ``num_replicas`` lowered to it,
as nats-server rewrites it: a stream scaled back up does not raise it again); each keeps the
servers it has that the stream still has, and takes the stream's others in their order for
the rest. And placing a consumer whose own ``num_replicas`` an update changed
(:func:`rescale`: the servers it has first, then the stream's least loaded). Servers new to a
consumer are ``joined``: they join its Raft group as new members and catch up from it. An
ephemeral consumer on a server removed from its stream moves like the others (nats-server
deletes it). Must not know: the meta group's log, Raft, the API.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import msgspec

from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.server.jscluster.assignments import ConsumerAssignment

__all__ = ["follow", "placed", "rescale", "wanted_replicas"]


def wanted_replicas(cfg: ConsumerConfig, stream_replicas: int, interest: bool = False) -> int:
    """How many replicas a consumer has on a stream of ``stream_replicas``: 0 is the stream's
    for a durable, one for an ephemeral but the stream's on an ``interest`` stream (as
    nats-server makes them: an interest stream's leader decides from every consumer's state)."""
    if cfg.num_replicas:
        return min(cfg.num_replicas, stream_replicas)
    return stream_replicas if cfg.durable_name or interest else 1


def placed(ca: ConsumerAssignment, peers: list[str]) -> ConsumerAssignment:
    """``ca`` on ``peers``: those it did not have join its group (``joined``), the others keep
    their place among those that joined."""
    if peers == ca.peers:
        return ca
    joined = [p for p in ca.joined if p in peers] + [p for p in peers if p not in ca.peers]
    return msgspec.structs.replace(ca, peers=peers, joined=joined)


def follow(ca: ConsumerAssignment, scfg: StreamConfig, stream_peers: Sequence[str]) -> ConsumerAssignment:
    """``ca`` after its stream's placement became ``stream_peers`` (unchanged: ``ca`` itself)."""
    cfg = msgspec.json.decode(ca.config, type=ConsumerConfig)
    n = len(stream_peers)
    if scfg.retention != "limits":  # the stream's replicas, always
        want = n
        if cfg.num_replicas and cfg.num_replicas != n:
            cfg = msgspec.structs.replace(cfg, num_replicas=n)
    else:
        want = wanted_replicas(cfg, n)
        if cfg.num_replicas > n:
            cfg = msgspec.structs.replace(cfg, num_replicas=n)
    keep = [p for p in ca.peers if p in stream_peers]
    peers = (keep + [p for p in stream_peers if p not in keep])[:want]
    config = msgspec.json.encode(cfg)
    moved = placed(ca, peers)
    if config != ca.config:
        moved = msgspec.structs.replace(moved, config=config)
    return moved


def rescale(
    ca: ConsumerAssignment, replicas: int, stream_peers: Sequence[str], load: Mapping[str, int]
) -> list[str]:
    """The servers of ``ca`` with ``replicas`` replicas now: fewer keep the first it has, more
    add the stream's servers holding the fewest consumers (ties at random)."""
    keep = [p for p in ca.peers if p in stream_peers][:replicas]
    others = random.sample([p for p in stream_peers if p not in keep], len(stream_peers) - len(keep))
    others.sort(key=lambda s: load.get(s, 0))
    return keep + others[: replicas - len(keep)]
