"""Settings jetpy does not carry out yet, refused rather than stored and ignored.

A stream or consumer config that sets one of these is answered with an error naming the field
(``STREAM_INVALID_CONFIG`` / ``CONSUMER_CREATE``: "<field> is not supported by this server
yet"), so that nobody believes they have, say, a mirror that copies nothing. Each entry goes
away when its feature lands; ``tests/jetstream/test_accepted_fields.py`` holds every config
field to "has an observed effect, or is refused here". Placement is refused where this single,
unclustered server cannot satisfy it (a named cluster or tags), as a clustered nats-server
refuses a placement no peer matches (10005); nats-server without a cluster ignores it.

Must not know: streams, consumers or the API beyond the configs.
"""

from __future__ import annotations

from typing import Final

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, StreamConfig

__all__ = [
    "UNBUILT_CONSUMER_FIELDS",
    "UNBUILT_STREAM_FIELDS",
    "check_direct_built",
    "check_stream_built",
]

NOT_YET: Final = "{} is not supported by this server yet"

UNBUILT_STREAM_FIELDS: Final[tuple[str, ...]] = ()  # every stream field is carried out
UNBUILT_CONSUMER_FIELDS: Final[tuple[str, ...]] = ()  # every consumer field is carried out


def check_stream_built(cfg: StreamConfig, clustered: bool = False) -> None:
    """Raise for a setting this server would not carry out (``clustered``: JetStream on a
    cluster, which places streams by ``placement``)."""
    copies = ([cfg.mirror] if cfg.mirror is not None else []) + list(cfg.sources)
    if any(src.consumer is not None for src in copies):
        # ADR-60's user-made durable consumer for copying work-queue and interest streams
        raise ApiError.of(E.STREAM_INVALID_CONFIG, err=NOT_YET.format("a mirror's or source's consumer"))
    placement = cfg.placement
    if not clustered and placement is not None and (placement.cluster or placement.tags):
        raise ApiError.of(
            E.CLUSTER_NO_PEERS, err="no suitable peers for placement: this server is not clustered"
        )


def check_direct_built(stream: StreamConfig, cfg: ConsumerConfig) -> None:
    """A ``direct`` consumer (a mirror's or source's own) on a work-queue or interest stream:
    its deliveries would remove messages before the copy is on disk (nats-server 2.14 copies
    those streams with a durable, acknowledging consumer, not built here yet). Refused, so the
    mirror or source shows this error in its info instead of emptying its origin."""
    if cfg.direct and stream.retention != "limits":
        raise ApiError.of(
            E.CONSUMER_CREATE,
            err=NOT_YET.format(f"mirroring or sourcing a {stream.retention} stream"),
        )
