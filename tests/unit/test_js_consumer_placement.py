"""Which servers a consumer's replicas go on: its count on a stream of a given size, and the
servers it keeps or takes when its own replicas change."""

from __future__ import annotations

from jetpy.jetstream.models import ConsumerConfig
from jetpy.server.jscluster.consumer_placement import rescale, wanted_replicas
from jetpy.server.jscluster.meta import ConsumerAssignment


def _ca(peers: list[str]) -> ConsumerAssignment:
    return ConsumerAssignment("S", "C", b"{}", "C-R3F-x", peers, 1)


def test_replicas_on_a_stream() -> None:
    assert wanted_replicas(ConsumerConfig(durable_name="D"), 3) == 3  # 0: the stream's
    assert wanted_replicas(ConsumerConfig(durable_name="D"), 1) == 1
    assert wanted_replicas(ConsumerConfig(name="E"), 3) == 1  # an ephemeral: one
    assert wanted_replicas(ConsumerConfig(durable_name="D", num_replicas=3), 1) == 1  # capped
    assert wanted_replicas(ConsumerConfig(durable_name="D", num_replicas=1), 3) == 1


def test_rescaled_keeps_what_it_has_first() -> None:
    stream = ["n1", "n2", "n3", "n4", "n5"]
    assert rescale(_ca(["n2", "n4", "n5"]), 1, stream, {}) == ["n2"]
    # more: the servers it has, then the stream's holding the fewest consumers
    load = {"n1": 5, "n3": 0, "n4": 2, "n5": 9}
    assert rescale(_ca(["n2"]), 3, stream, load) == ["n2", "n3", "n4"]
    # a server the stream no longer has is not kept
    assert rescale(_ca(["n9", "n1"]), 2, stream, {"n3": 0, "n2": 1, "n4": 1, "n5": 1}) == ["n1", "n3"]
