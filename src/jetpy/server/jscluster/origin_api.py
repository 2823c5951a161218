"""The consumers mirrors and sources keep on a cluster's streams (their origins), as nats-server
keeps them.

A mirror's or source's consumer (``direct`` set: ack none, flow controlled, one delivery, an
inactivity threshold) is not an assignment of the meta group: the origin stream's leader
creates it in its own engine, on its replica, and answers the create, as nats-server's stream
leader does (``CONSUMER.CREATE`` with ``direct`` is answered by no other server). It is not
replicated, not listed, not counted in the stream's ``consumer_count``. It stays on the server
that created it when the stream's leader moves (its replica there goes on storing, so it goes on
delivering, as nats-server's does), and goes when nothing listens on its deliver subject for its
inactivity threshold (its mirror or source stopped, or set up a new one) or with its server. A
``CONSUMER.DELETE`` naming it is the cluster's like any other: the meta leader, which does not
hold it, answers "consumer not found" and the consumer goes on copying, as on a nats-server
2.15.1 cluster. Every other ``CONSUMER.CREATE`` is the cluster's (:mod:`.consumer_api`).

Must not know: the meta group, what a mirror or source does with the deliveries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from jetpy.jetstream.api.router import Elsewhere, Route
from jetpy.server.jscluster.local import Replica

__all__ = ["origin_consumer_route"]


class _Direct(msgspec.Struct):
    direct: bool = False


class _Request(msgspec.Struct):
    config: _Direct | None = None


_decode = msgspec.json.Decoder(_Request).decode


def _is_direct(body: bytes) -> bool:
    try:
        req = _decode(body)
    except (msgspec.DecodeError, ValueError):
        return False  # the cluster's route answers the error
    return req.config is not None and req.config.direct


def origin_consumer_route(
    single: Route[Any],
    cluster: Route[Any],
    replica: Callable[[str], Replica | None],
    assigned: Callable[[str], bool],
) -> Route[Any]:
    """``CONSUMER.CREATE``: a ``direct`` one on a stream the cluster has (``assigned``) by the
    stream's leader with the single server's handler (``single``), any other by the cluster's
    (``cluster``: an unknown stream's refusal too)."""

    def answer(args: list[str], hdr: bytes, body: bytes) -> Any:
        if args and assigned(args[0]) and _is_direct(body):
            rep = replica(args[0])
            if rep is None or not rep.is_leader or rep.behind:
                raise Elsewhere
            return single.handler(args, hdr, body)
        return cluster.handler(args, hdr, body)

    return Route(cluster.response, answer, cluster.args, cluster.counts_success)
