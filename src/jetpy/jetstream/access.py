"""Access: which subjects a stream or consumer reads and writes, and whether a caller may.

nats-server checks a JetStream request only by its API subject, so a user allowed to publish
``$JS.API.>`` can make the server read, capture or write any subject for it. jetpy also asks the
caller's permissions (a :class:`~jetpy.jetstream.ports.Caller`) about the subjects the request
touches, each a pattern that must be allowed *entirely*:

* a stream *captures* its subjects (``subjects``, else its name): reading them, so each must be
  one the caller may subscribe to; what it stores is read under stored subjects (the captured
  ones, or anything at all when a ``subject_transform`` renames them);
* a mirror or source *reads* what it copies from its origin: its filters, else every subject the
  origin stores (anything at all when the origin is in another domain or does not exist yet, so
  that no copy can outgrow what its creator may read);
* a consumer *reads* its filters (else the stream's stored subjects) and *writes* to its deliver
  subject; ``republish`` writes to its destination (any subject when it maps tokens);
* destroying messages (delete, purge, an update that may drop them) *writes* the stream's
  subjects.

Refusals are :data:`~jetpy.jetstream.errors.PERMISSIONS_VIOLATION` (403, err_code 10403,
``permissions violation for subscribe to "secret.>"``). Pure: knows no network and no store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.jetstream.ports import Caller

__all__ = [
    "captured",
    "check_read",
    "check_write",
    "consumer_reads",
    "copies_read",
    "republish_writes",
    "stored",
    "violation",
]

EVERYTHING = ">"


def captured(cfg: StreamConfig) -> list[str]:
    """The subjects a stream takes messages from (nats-server's default: its name)."""
    return list(cfg.subjects) or ([cfg.name] if cfg.mirror is None and not cfg.sources else [])


def stored(cfg: StreamConfig) -> list[str]:
    """Patterns covering the subjects a stream stores messages under."""
    if cfg.subject_transform is not None or cfg.mirror is not None or cfg.sources:
        return [EVERYTHING]  # renamed or copied from elsewhere: any subject at all
    return captured(cfg)


def copies_read(cfg: StreamConfig, origin: Callable[[str], StreamConfig | None]) -> list[str]:
    """What a stream's mirror and sources read from their origins (``origin`` looks a local
    stream's config up by name)."""
    reads: list[str] = []
    for src in ([cfg.mirror] if cfg.mirror is not None else []) + list(cfg.sources):
        filters = [t.src for t in src.subject_transforms] or (
            [src.filter_subject] if src.filter_subject else []
        )
        if filters:
            reads.extend(filters)
            continue
        found = origin(src.name) if src.external is None else None
        reads.extend(stored(found) if found is not None else [EVERYTHING])
    return reads


def consumer_reads(stream: StreamConfig, cfg: ConsumerConfig, subject_filter: str = "") -> list[str]:
    """What a consumer delivers: its filters, else every stored subject of the stream."""
    filters = list(cfg.filter_subjects) or [f for f in (cfg.filter_subject, subject_filter) if f]
    return filters or stored(stream)


def republish_writes(cfg: StreamConfig) -> list[str]:
    """Where ``republish`` publishes (any subject when its destination maps tokens)."""
    rp = cfg.republish
    if rp is None or not rp.dest:
        return []
    return [EVERYTHING] if "{{" in rp.dest or "$" in rp.dest else [rp.dest]


def violation(action: str, subject: str) -> ApiError:
    return ApiError.of(E.PERMISSIONS_VIOLATION, action=action, subject=f'"{subject}"')


def check_read(caller: Caller | None, patterns: Iterable[str]) -> None:
    """Raise :func:`violation` unless the caller may subscribe to all of ``patterns``."""
    if caller is None:
        return
    for p in patterns:
        if not caller.may_subscribe_all(p):
            raise violation("subscribe", p)


def check_write(caller: Caller | None, patterns: Iterable[str]) -> None:
    """Raise :func:`violation` unless the caller may publish to all of ``patterns``."""
    if caller is None:
        return
    for p in patterns:
        if not caller.may_publish_all(p):
            raise violation("publish", p)
