"""The clustering requests of ``$JS.API`` on a server without a JetStream cluster.

``STREAM.LEADER.STEPDOWN``, ``STREAM.PEER.REMOVE`` and ``CONSUMER.LEADER.STEPDOWN`` ask a
replicated stream's or consumer's Raft group to act; a single server has none, so it answers
10010 "JetStream clustering support required", whatever the stream or consumer, as nats-server
does (rather than leaving the requester to time out). Must not know: streams, consumers.
"""

from __future__ import annotations

from typing import Any

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import (
    ConsumerLeaderStepdownResponse,
    StreamLeaderStepdownResponse,
    StreamRemovePeerResponse,
)
from jetpy.jetstream.api.router import Route
from jetpy.jetstream.errors import ApiError

__all__ = ["single_server_routes"]


def _clustering_required(args: list[str], hdr: bytes, body: bytes) -> StreamLeaderStepdownResponse:
    raise ApiError.of(E.CLUSTER_REQUIRED)


def _no_peers(args: list[str], hdr: bytes, body: bytes) -> StreamRemovePeerResponse:
    raise ApiError.of(E.CLUSTER_REQUIRED)


def _no_consumer_group(args: list[str], hdr: bytes, body: bytes) -> ConsumerLeaderStepdownResponse:
    raise ApiError.of(E.CLUSTER_REQUIRED)


def single_server_routes() -> dict[str, Route[Any]]:
    return {
        "STREAM.LEADER.STEPDOWN": Route(StreamLeaderStepdownResponse, _clustering_required, 1),
        "STREAM.PEER.REMOVE": Route(StreamRemovePeerResponse, _no_peers, 1),
        "CONSUMER.LEADER.STEPDOWN": Route(ConsumerLeaderStepdownResponse, _no_consumer_group, 2),
    }
