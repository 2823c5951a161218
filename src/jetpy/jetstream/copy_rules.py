"""The config rules of mirrors and sources that look at their origins (nats-server's
``checkStreamCfg`` where it can see the origin stream): a mirror or source may not take smaller
messages than its origin stores (10030 / 10046), a mirror answers direct gets exactly when its
origin does (``mirror_direct`` follows ``allow_direct``; in pedantic mode a difference is refused),
an ``external`` delivery prefix may not capture an origin's subjects (10022), and following
sources and mirrors from a stream must not lead back to it ("detected cycle").

``validate.check_stream_config`` calls these, in nats-server's order, when its caller hands it a
lookup of the other streams. Must not know: running streams, stores, the API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import StreamConfig, StreamSource
from jetpy.subjects import subjects_overlap

__all__ = ["Lookup", "check_cycles", "check_delivery_prefix", "mirror_origin", "source_origin"]

Lookup: TypeAlias = Callable[[str], "StreamConfig | None"]
"""Another stream's config by name (None: no such stream here)."""


def mirror_origin(cfg: StreamConfig, origins: Lookup, seen: list[str], pedantic: bool) -> bool:
    """The checks of a (not external) mirror against its origin, if it exists here; returns
    the ``mirror_direct`` it gets. The origin's subjects are added to ``seen``."""
    assert cfg.mirror is not None
    origin = origins(cfg.mirror.name)
    if origin is None:
        return cfg.mirror_direct
    seen.extend(origin.subjects)
    if cfg.max_msg_size > 0 and origin.max_msg_size > 0 and cfg.max_msg_size < origin.max_msg_size:
        raise ApiError.of(E.MIRROR_MAX_MESSAGE_SIZE_TOO_BIG)
    if pedantic and cfg.mirror_direct != origin.allow_direct:
        raise ApiError.of(E.PEDANTIC, err="origin stream has direct get set, mirror has it disabled")
    return origin.allow_direct


def source_origin(cfg: StreamConfig, src: StreamSource, origins: Lookup, seen: list[str]) -> None:
    """The checks of a (not external) source against its origin, if it exists here."""
    origin = origins(src.name)
    if origin is None:
        return
    seen.extend(origin.subjects)
    if cfg.max_msg_size > 0 and origin.max_msg_size > 0 and cfg.max_msg_size < origin.max_msg_size:
        raise ApiError.of(E.SOURCE_MAX_MESSAGE_SIZE_TOO_BIG)


def check_delivery_prefix(prefix: str, seen: list[str]) -> None:
    """An ``external.deliver`` prefix whose deliveries the origins' subjects would capture."""
    if not prefix:
        return
    for subj in seen:
        if subjects_overlap(subj, f"{prefix}.{subj}"):
            raise ApiError.of(E.STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS, prefix=prefix, subject=subj)


def check_cycles(cfg: StreamConfig, origins: Lookup) -> None:
    """Following sources and mirrors from ``cfg`` must not come back to a stream already seen
    (for sources, only when the subjects really flow back: nats-server's rule)."""
    to_visit = [cfg]
    visited: set[str] = set()
    while to_visit:
        cur = to_visit.pop(0)
        visited.add(cur.name)
        for src in cur.sources:
            if src.external is not None:
                continue
            if src.name in visited:
                if not src.filter_subject or any(
                    subjects_overlap(s, src.filter_subject) for s in cur.subjects
                ):
                    raise ApiError.of(E.STREAM_INVALID_CONFIG, err="detected cycle")
            else:
                nxt = origins(src.name)
                if nxt is not None:
                    to_visit.append(nxt)
        m = cur.mirror
        if m is not None and m.external is None:
            if m.name in visited:
                raise ApiError.of(E.STREAM_INVALID_CONFIG, err="detected cycle")
            nxt = origins(m.name)
            if nxt is not None:
                to_visit.append(nxt)
