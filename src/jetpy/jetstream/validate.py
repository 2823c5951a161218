"""Stream and consumer config validation: nats-server's defaults, rules and error codes.

Owns the pure decisions ``STREAM.CREATE/UPDATE`` and ``CONSUMER.CREATE`` make about a config:
which defaults are filled in (``max_msgs`` 0 -> -1, ``duplicate_window`` 2m, ``ack_wait`` 30s, ...),
which configs are refused and with which ``err_code``, and what an update may change. Every check
raises :class:`~jetpy.jetstream.errors.ApiError` with nats-server's code and text and returns a new
(frozen) config otherwise. Rules run in nats-server's order, so the first error reported matches.

Knows nothing of running streams, stores or the API router: facts that need the world (other
streams' subjects, whether a deliver subject has a subscriber, account limits) are the caller's,
except the other consumers of a work-queue stream, which :func:`check_consumer_config` takes.

Behaviour is nats-server 2.10/2.11 (single server: R>1 is refused with 10074). Where 2.11 changed
2.10, 2.11 wins (negative limits are clamped to -1, pedantic mode); where later versions relaxed a
rule the later one wins too (a republish source need not overlap the stream's subjects, as in
2.15: with an input transform the stored subjects need not match them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from msgspec.structs import replace

from jetpy.jetstream import errors as E
from jetpy.jetstream.copy_rules import (
    Lookup,
    check_cycles,
    check_delivery_prefix,
    mirror_origin,
    source_origin,
)
from jetpy.jetstream.errors import ApiError, ErrorCode
from jetpy.jetstream.models import (
    JS_MAX_DESCRIPTION_LEN,
    JS_MAX_METADATA_LEN,
    JS_MAX_NAME_LEN,
    ConsumerConfig,
    RePublish,
    StreamConfig,
    StreamSource,
    parse_time,
)
from jetpy.jetstream.transform import mapping_error, transform_error
from jetpy.patterns import PatternSet, all_overlap, any_nested, first_overlapping_pair, overlapping_others
from jetpy.subjects import is_literal, is_valid_subject, subject_is_subset, subjects_overlap

__all__ = [
    "ACK_WAIT_DEFAULT",
    "DEFAULT_DUPLICATE_WINDOW",
    "EPHEMERAL_INACTIVE_THRESHOLD",
    "MAX_ACK_PENDING_DEFAULT",
    "MAX_REPLICAS",
    "MAX_WAITING_DEFAULT",
    "MIN_HEARTBEAT",
    "PINNED_TTL_DEFAULT",
    "check_consumer_config",
    "check_consumer_update",
    "check_stream_config",
    "check_stream_create",
    "check_stream_update",
    "is_valid_name",
]

_MS: Final = 1_000_000
_S: Final = 1_000 * _MS

# -- defaults and bounds (nats-server's constants, with their reasons) ---------------------------
DEFAULT_DUPLICATE_WINDOW: Final = 120 * _S  # dedupe window when none is set (or max_age if shorter)
MIN_DURATION: Final = 100 * _MS  # max_age and duplicate_window below this are typos, not intent
MIN_MARKER_TTL: Final = 1 * _S  # subject delete markers (and Nats-TTL) have 1s granularity
MAX_REPLICAS: Final = 5  # raft groups beyond 5 peers only add latency
ACK_WAIT_DEFAULT: Final = 30 * _S  # for ack explicit/all consumers
MAX_ACK_PENDING_DEFAULT: Final = 1000  # bounds redelivery state for acking consumers
MAX_WAITING_DEFAULT: Final = 512  # queued pull requests per pull consumer
EPHEMERAL_INACTIVE_THRESHOLD: Final = 5 * _S  # an ephemeral without interest is deleted after this
PINNED_TTL_DEFAULT: Final = 120 * _S  # pinned_client priority groups re-pin after this
MIN_HEARTBEAT: Final = 100 * _MS  # push heartbeats faster than this are a client bug
MIN_MAX_EXPIRES: Final = 1 * _MS

_NAME_FORBIDDEN: Final = frozenset(" \t\r\n\f.*>")
_PATH_SEPARATORS: Final = frozenset("/\\")
_PRIORITY_GROUP: Final = re.compile(r"[a-zA-Z0-9/_=-]{1,16}\Z")
_JS_API_ALL: Final = "$JS.API.>"


def _invalid(err: str) -> ApiError:
    """The generic "stream invalid config" (10052) every unnamed rule answers with."""
    return ApiError.of(E.STREAM_INVALID_CONFIG, err=err)


def _pedantic(err: str) -> ApiError:
    return ApiError.of(E.PEDANTIC, err=err)


def _fail(code: ErrorCode, **kw: object) -> ApiError:
    return ApiError.of(code, **kw)


def is_valid_name(name: str) -> bool:
    """A stream/consumer name: non-empty, no ``.``, ``*``, ``>``, whitespace or path separator."""
    return bool(name) and _NAME_FORBIDDEN.isdisjoint(name) and _PATH_SEPARATORS.isdisjoint(name)


def _metadata_len(metadata: dict[str, str]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items())


def _collide(a: str, b: str) -> bool:
    return subjects_overlap(a, b)


# ================================================================================================
# Streams
# ================================================================================================

# Limits where 0 means "unset" and anything below -1 is nonsense: both become -1 (unlimited).
_UNLIMITED_FIELDS: Final = ("max_msgs", "max_msgs_per_subject", "max_bytes", "max_msg_size", "max_consumers")


def check_stream_config(
    cfg: StreamConfig, *, pedantic: bool = False, origins: Lookup | None = None, max_replicas: int = 1
) -> StreamConfig:
    """nats-server's ``checkStreamCfg``: the normalized config, or ``ApiError``.
    ``max_replicas``: the JetStream servers there are (1: a single server, which refuses R>1
    with 10074; a cluster refuses more replicas than servers with 10023).

    Used for both create and update (update adds :func:`check_stream_update`). Subject overlap
    with other streams (10065) is the caller's; with ``origins`` the rules that look at a
    mirror's or source's origin apply too (its message size, ``mirror_direct`` taken from its
    ``allow_direct``, source cycles), in nats-server's order.
    """
    _check_stream_name(cfg.name)
    if len(cfg.description) > JS_MAX_DESCRIPTION_LEN:
        raise _invalid(f"stream description is too long, maximum allowed is {JS_MAX_DESCRIPTION_LEN}")
    if _metadata_len(cfg.metadata) > JS_MAX_METADATA_LEN:
        raise _invalid(f"stream metadata exceeds maximum size of {JS_MAX_METADATA_LEN} bytes")

    changes: dict[str, object] = {}
    replicas = cfg.num_replicas or 1
    if replicas > MAX_REPLICAS:
        raise _invalid(f"maximum replicas is {MAX_REPLICAS}")
    if replicas < 0:
        raise _fail(E.REPLICAS_COUNT_CANNOT_BE_NEGATIVE)
    if replicas != cfg.num_replicas:
        changes["num_replicas"] = replicas

    for field in _UNLIMITED_FIELDS:
        value: int = getattr(cfg, field)
        if value == 0 or value < -1:
            if pedantic and value < -1:
                raise _pedantic(f"{field} must be set to -1")
            changes[field] = -1

    if cfg.max_age < 0:
        raise _invalid("max age can not be negative")
    if 0 < cfg.max_age < MIN_DURATION:
        raise _invalid("max age needs to be >= 100ms")

    dup = cfg.duplicate_window
    if dup == 0 and cfg.mirror is None and not cfg.sources:  # 2.15: copies are not de-duplicated
        if cfg.max_age and cfg.max_age < DEFAULT_DUPLICATE_WINDOW:
            if pedantic:
                raise _pedantic("duplicate window cannot be bigger than max age")
            dup = cfg.max_age
        else:
            dup = DEFAULT_DUPLICATE_WINDOW
        changes["duplicate_window"] = dup
    if dup < 0:
        raise _invalid("duplicates window can not be negative")
    if cfg.max_age and dup > cfg.max_age:
        raise _invalid("duplicates window can not be larger then max age")
    if 0 < dup < MIN_DURATION:
        raise _invalid("duplicates window needs to be >= 100ms")

    if cfg.deny_purge and cfg.allow_rollup_hdrs:
        raise _invalid("roll-ups require the purge permission")

    max_per = -1 if "max_msgs_per_subject" in changes else cfg.max_msgs_per_subject
    _check_discard_new_per(cfg.discard_new_per_subject, cfg.discard, max_per)

    _check_marker_ttl(cfg, changes, pedantic)

    seen: list[str] = []  # the subjects of the origins in sight (for delivery prefixes)
    if cfg.mirror is not None:
        _check_mirror(cfg)
        if origins is not None and cfg.mirror.external is None:
            direct = mirror_origin(cfg, origins, seen, pedantic)
            if direct != cfg.mirror_direct:
                changes["mirror_direct"] = direct
    elif cfg.mirror_direct:  # nats-server 2.11+
        raise _invalid("stream has no mirror but does have mirror direct")
    _check_sources(cfg, origins, seen)
    _check_external_prefixes(cfg, seen)
    if origins is not None:
        check_cycles(cfg, origins)

    subjects = list(cfg.subjects)
    if not subjects:
        if cfg.mirror is None and not cfg.sources:
            subjects = [cfg.name]
            changes["subjects"] = subjects
    else:
        if cfg.mirror is not None:
            raise _fail(E.MIRROR_WITH_SUBJECTS)
        _check_stream_subjects(subjects, cfg)

    if cfg.subject_transform is not None:
        tr = cfg.subject_transform
        if tr.src and not is_valid_subject(tr.src):
            raise _fail(E.STREAM_TRANSFORM_INVALID_SOURCE, err=f"invalid subject {tr.src}")
        if (err := mapping_error(tr.src, tr.dest)) is not None:
            raise _fail(E.STREAM_TRANSFORM_INVALID_DESTINATION, err=err)

    if cfg.republish is not None:
        changes["republish"] = _check_republish(cfg, subjects, pedantic)

    if cfg.placement is not None and not cfg.placement.cluster and not cfg.placement.tags:
        changes["placement"] = None  # an empty placement object means none

    if replicas > max_replicas:  # after the rest: a single server 10074, a cluster 10023
        raise _fail(E.STREAM_REPLICAS_NOT_SUPPORTED if max_replicas == 1 else E.INSUFFICIENT_RESOURCES)
    return replace(cfg, **changes) if changes else cfg


def check_stream_create(
    cfg: StreamConfig, *, pedantic: bool = False, origins: Lookup | None = None, max_replicas: int = 1
) -> StreamConfig:
    """``STREAM.CREATE``'s rules: :func:`check_stream_config` plus "not sealed at birth"."""
    if cfg.sealed:
        raise _invalid("stream configuration for create can not be sealed")
    return check_stream_config(cfg, pedantic=pedantic, origins=origins, max_replicas=max_replicas)


def _check_stream_name(name: str) -> None:
    if not _PATH_SEPARATORS.isdisjoint(name):
        # the API answers this before config validation (the name is a directory on disk)
        raise _fail(E.STREAM_NAME_CONTAINS_PATH_SEPARATORS)
    if not is_valid_name(name):
        raise _invalid("stream name is required and can not contain '.', '*', '>'")
    if len(name) > JS_MAX_NAME_LEN:
        raise _invalid(f"stream name is too long, maximum allowed is {JS_MAX_NAME_LEN}")


def _check_discard_new_per(enabled: bool, discard: str, max_per: int) -> None:
    if not enabled:
        return
    if discard != "new":
        raise _invalid("discard new per subject requires discard new policy to be set")
    if max_per <= 0:
        raise _invalid("discard new per subject requires max msgs per subject > 0")


def _check_marker_ttl(cfg: StreamConfig, changes: dict[str, object], pedantic: bool) -> None:
    ttl = cfg.subject_delete_marker_ttl
    if ttl < 0:
        raise _invalid("subject delete marker TTL must not be negative")
    if ttl == 0:
        return
    if ttl < MIN_MARKER_TTL:
        raise _invalid("subject delete marker TTL must be at least 1 second")
    if not cfg.allow_msg_ttl:
        if pedantic:
            raise _invalid("subject delete marker cannot be set if message TTLs are disabled")
        changes["allow_msg_ttl"] = True  # markers are TTL'd messages
    if not cfg.allow_rollup_hdrs:
        if pedantic:
            raise _invalid("subject delete marker cannot be set if roll-ups are disabled")
        changes["allow_rollup_hdrs"] = True
        changes["deny_purge"] = False


def _check_mirror(cfg: StreamConfig) -> None:
    mirror = cfg.mirror
    assert mirror is not None
    if cfg.first_seq > 0:
        raise _fail(E.MIRROR_WITH_FIRST_SEQ)
    if cfg.subjects:
        raise _fail(E.MIRROR_WITH_SUBJECTS)
    if cfg.sources:
        raise _fail(E.MIRROR_WITH_SOURCES)
    if mirror.filter_subject and mirror.subject_transforms:
        raise _fail(E.MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED)
    if cfg.subject_delete_marker_ttl > 0:
        # markers would take sequence numbers the origin never had
        raise _invalid("subject delete markers forbidden on mirrors")
    transforms = mirror.subject_transforms
    overlapping = overlapping_others([tr.src or ">" for tr in transforms])
    for i, tr in enumerate(transforms):
        if tr.src and not is_valid_subject(tr.src):
            raise _fail(E.MIRROR_INVALID_SUBJECT_FILTER, err=f"invalid subject {tr.src}")
        if (err := mapping_error(tr.src, tr.dest)) is not None:
            raise _fail(E.MIRROR_INVALID_TRANSFORM_DESTINATION, err=err)
        if i in overlapping:
            raise _fail(E.MIRROR_OVERLAPPING_SUBJECT_FILTERS)
    if mirror.external is None and not is_valid_name(mirror.name):
        raise _fail(E.MIRROR_INVALID_STREAM_NAME)


def _source_key(src: StreamSource) -> tuple[str, str, str]:
    """What makes two sources the same (nats-server's ``composeIName``)."""
    name = src.name
    if src.external is not None:
        name += ":" + src.external.api
    if not src.subject_transforms:
        return name, src.filter_subject or ">", ">"
    srcs = "\f".join(tr.src or ">" for tr in src.subject_transforms)
    dests = "\f".join(tr.dest or ">" for tr in src.subject_transforms)
    return name, srcs, dests


def _check_sources(cfg: StreamConfig, origins: Lookup | None, subjects: list[str]) -> None:
    seen: set[tuple[str, str, str]] = set()
    for src in cfg.sources:
        if not is_valid_name(src.name):
            raise _fail(E.SOURCE_INVALID_STREAM_NAME)
        key = _source_key(src)
        if key in seen:
            raise _fail(E.SOURCE_DUPLICATE_DETECTED)
        seen.add(key)
        if origins is not None and src.external is None:
            source_origin(cfg, src, origins, subjects)
        if src.filter_subject and src.subject_transforms:
            raise _fail(E.SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED)
        for tr in src.subject_transforms:
            if tr.src and not is_valid_subject(tr.src):
                raise _fail(E.SOURCE_INVALID_SUBJECT_FILTER, err=f"invalid subject {tr.src}")
            if (err := mapping_error(tr.src, tr.dest)) is not None:
                raise _fail(E.SOURCE_INVALID_TRANSFORM_DESTINATION, err=err)
        if any_nested([tr.src or ">" for tr in src.subject_transforms]):
            raise _fail(E.SOURCE_OVERLAPPING_SUBJECT_FILTERS)


def _check_external_prefixes(cfg: StreamConfig, subjects: list[str]) -> None:
    externals = [s.external for s in ([cfg.mirror] if cfg.mirror else []) + list(cfg.sources)]
    for ext in externals:
        if ext is None:
            continue
        if ext.deliver and not is_valid_subject(ext.deliver, allow_wildcards=False):
            raise _fail(E.STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ, prefix=ext.deliver)
        check_delivery_prefix(ext.deliver, subjects)
    for ext in externals:
        if ext is None or not ext.api:
            continue
        if not is_valid_subject(ext.api, allow_wildcards=False):
            raise _invalid(
                f'stream external api prefix "{ext.api}" must be a valid subject without wildcards'
            )
        if _collide(ext.api, "$JS.API"):
            raise _fail(E.STREAM_EXTERNAL_API_OVERLAP, prefix=ext.api, subject="$JS.API")


def _check_stream_subjects(subjects: list[str], cfg: StreamConfig) -> None:
    seen: set[str] = set()
    for subj in subjects:
        if subj in seen:
            raise _invalid("duplicate subjects detected")
        if subject_is_subset(subj, _JS_API_ALL):
            raise _invalid("subjects overlap with jetstream api")
        if not is_valid_subject(subj):
            raise _invalid("invalid subject")
        if subj == ">" and not cfg.no_ack:
            # a stream on ">" would also capture its own acks and every API reply
            raise _invalid("capturing all subjects requires no-ack to be true")
        seen.add(subj)
    pair = first_overlapping_pair(subjects)
    if pair is not None:
        raise _invalid(f'subject "{subjects[pair[0]]}" overlaps with "{subjects[pair[1]]}"')


def _check_republish(cfg: StreamConfig, subjects: list[str], pedantic: bool) -> RePublish:
    rp = cfg.republish
    assert rp is not None
    src = rp.src
    if not src:
        if pedantic:
            raise _pedantic("republish source can not be empty")
        src = ">"
    # nats-server 2.15 no longer asks the source to overlap the stream's subjects (2.9-2.10 did):
    # with an input subject transform, stored subjects need not match them
    if any(_collide(rp.dest, subj) for subj in subjects):
        raise _invalid("stream configuration for republish destination forms a cycle")
    if transform_error(src, rp.dest) is not None:
        raise _invalid("stream configuration for republish not valid")
    return replace(rp, src=src) if src != rp.src else rp


def check_stream_update(
    old: StreamConfig,
    new: StreamConfig,
    *,
    pedantic: bool = False,
    origins: Lookup | None = None,
    max_replicas: int = 1,
) -> StreamConfig:
    """nats-server's ``configUpdateCheck``: the normalized new config, or ``ApiError``.

    ``old`` is the stream's current (normalized) config; ``new`` may be raw or normalized.
    """
    cfg = check_stream_config(new, pedantic=pedantic, origins=origins, max_replicas=max_replicas)
    if cfg.name != old.name:
        raise _invalid("stream configuration name must match original")
    if cfg.storage != old.storage:
        raise _invalid("stream configuration update can not change storage type")
    if cfg.retention != old.retention and "workqueue" in (cfg.retention, old.retention):
        raise _invalid("stream configuration update can not change retention policy to/from workqueue")
    if old.sealed and not cfg.sealed:
        raise _invalid("stream configuration update can not unseal a sealed stream")
    if old.deny_delete and not cfg.deny_delete:
        raise _invalid("stream configuration update can not cancel deny message deletes")
    if old.deny_purge and not cfg.deny_purge:
        raise _invalid("stream configuration update can not cancel deny purge")
    if cfg.mirror is not None and cfg.mirror != old.mirror:
        # removing the mirror is allowed: it promotes the mirror to a normal stream
        raise _fail(E.STREAM_MIRROR_NOT_UPDATABLE)
    if old.allow_msg_ttl and not cfg.allow_msg_ttl:
        raise _invalid("message TTL status can not be disabled")
    if cfg.sealed:
        # a sealed stream never changes again: nothing may expire, be added, deleted or rolled up
        cfg = replace(
            cfg, max_age=0, discard="new", deny_delete=True, deny_purge=True, allow_rollup_hdrs=False
        )
    return cfg


# ================================================================================================
# Consumers
# ================================================================================================

# (field, nats-server's pedantic text, floor): negative values are clamped to the floor.
_CONSUMER_CLAMPS: Final = (
    ("max_waiting", "max_waiting must not be negative", 0),
    ("max_ack_pending", "max_ack_pending must be set to -1", -1),
    ("max_batch", "max_batch must not be negative", 0),
    ("max_expires", "max_expires must not be negative", 0),
    ("max_bytes", "max_bytes must not be negative", 0),
    ("idle_heartbeat", "idle_heartbeat must not be negative", 0),
    ("inactive_threshold", "inactive_threshold must not be negative", 0),
    ("priority_timeout", "priority_timeout must not be negative", 0),
)

# deliver_policy -> (words nats-server uses in its message, needs start seq, needs start time)
_DELIVER_POLICIES: Final[dict[str, tuple[str, bool, bool]]] = {
    "all": ("all", False, False),
    "last": ("last", False, False),
    "new": ("new", False, False),
    "last_per_subject": ("last per subject", False, False),
    "by_start_sequence": ("by start sequence", True, False),
    "by_start_time": ("by start time", False, True),
}


def _consumer_defaults(
    stream: StreamConfig, cfg: ConsumerConfig, pedantic: bool, account_max_ack_pending: int = -1
) -> ConsumerConfig:
    """nats-server's ``setConsumerConfigDefaults`` (plus the ephemeral inactivity default)."""
    ch: dict[str, object] = {}
    if cfg.max_deliver == 0 or cfg.max_deliver < -1:
        if pedantic and cfg.max_deliver < -1:
            raise _pedantic("max_deliver must be set to -1")
        ch["max_deliver"] = -1
    for field, text, floor in _CONSUMER_CLAMPS:
        if getattr(cfg, field) < floor:
            if pedantic:
                raise _pedantic(text)
            ch[field] = floor
    cfg = replace(cfg, **ch) if ch else cfg
    ch = {}

    if not cfg.deliver_subject and cfg.max_waiting == 0:
        ch["max_waiting"] = MAX_WAITING_DEFAULT
    ack_wait = cfg.ack_wait
    if ack_wait == 0 and cfg.ack_policy in ("explicit", "all"):
        ack_wait = ACK_WAIT_DEFAULT
    if cfg.backoff:
        # the first backoff step is the first ack wait
        if pedantic and ack_wait != cfg.backoff[0]:
            raise _pedantic("first backoff value has to equal batch AckWait")
        ack_wait = cfg.backoff[0]
    if ack_wait != cfg.ack_wait:
        ch["ack_wait"] = ack_wait

    limits = stream.consumer_limits
    max_ack_pending = cfg.max_ack_pending
    if max_ack_pending == 0:
        if pedantic and limits.max_ack_pending > 0:
            raise _pedantic("max_ack_pending must be set if it's configured in stream limits")
        max_ack_pending = limits.max_ack_pending
    if max_ack_pending == 0 and cfg.ack_policy != "none":
        max_ack_pending = MAX_ACK_PENDING_DEFAULT
        if 0 < account_max_ack_pending < max_ack_pending:  # the account's limit, when lower
            max_ack_pending = account_max_ack_pending
    if max_ack_pending != cfg.max_ack_pending:
        ch["max_ack_pending"] = max_ack_pending

    inactive = cfg.inactive_threshold
    if inactive == 0:
        if pedantic and limits.inactive_threshold > 0:
            raise _pedantic("inactive_threshold must be set if it's configured in stream limits")
        inactive = limits.inactive_threshold
    if inactive == 0 and not cfg.durable_name:
        inactive = EPHEMERAL_INACTIVE_THRESHOLD  # ephemerals always expire
    if inactive != cfg.inactive_threshold:
        ch["inactive_threshold"] = inactive

    if cfg.priority_policy == "pinned_client" and cfg.priority_timeout == 0:
        ch["priority_timeout"] = PINNED_TTL_DEFAULT
    return replace(cfg, **ch) if ch else cfg


def check_consumer_config(
    stream: StreamConfig,
    cfg: ConsumerConfig,
    *,
    pedantic: bool = False,
    others: Iterable[ConsumerConfig] = (),
    account_max_ack_pending: int = -1,
    clustered: bool = False,
) -> ConsumerConfig:
    """nats-server's consumer defaults + ``checkConsumerCfg`` + the work-queue rules.

    ``account_max_ack_pending`` is the account's limit (-1: none): the default when it is lower
    than nats-server's, and refused above it (10121).
    ``stream`` is the parent stream's (normalized) config. ``others`` are the stream's other
    consumers (not this one, not internal ``direct`` ones): a work-queue stream needs them to
    check that filters partition the stream (10099/10100). Name-vs-request-subject checks
    (10016-10020, 10131, 10137) and "already exists" are the API's.
    """
    if cfg.pause_until is not None:  # a time Go's decoder reads, or invalid JSON
        try:
            parse_time(cfg.pause_until)
        except ValueError as exc:
            raise ApiError.of(E.INVALID_JSON, err=str(exc)) from None
    _check_consumer_names(cfg)
    if cfg.num_replicas > 1 and not clustered:
        # single server: refused up front, as nats-server does without a cluster
        raise _fail(E.STREAM_REPLICAS_NOT_SUPPORTED)
    cfg = _consumer_defaults(stream, cfg, pedantic, account_max_ack_pending)

    if cfg.num_replicas > 0 and cfg.num_replicas > stream.num_replicas:
        raise _fail(E.CONSUMER_REPLICAS_EXCEEDS_STREAM)
    if cfg.num_replicas < 0:
        raise _fail(E.REPLICAS_COUNT_CANNOT_BE_NEGATIVE)
    if stream.retention in ("interest", "workqueue") and cfg.num_replicas not in (0, stream.num_replicas):
        raise _fail(E.CONSUMER_REPLICAS_SHOULD_MATCH_STREAM)
    if any(b < 0 for b in cfg.backoff):
        raise _fail(E.CONSUMER_BACKOFF_NEGATIVE)
    if cfg.ack_wait < 0:
        raise _fail(E.CONSUMER_ACK_WAIT_NEGATIVE)
    if cfg.backoff and cfg.max_deliver != -1 and len(cfg.backoff) > cfg.max_deliver:
        raise _fail(E.CONSUMER_MAX_DELIVER_BACKOFF)
    if len(cfg.description) > JS_MAX_DESCRIPTION_LEN:
        raise _fail(E.CONSUMER_DESCRIPTION_TOO_LONG, max=JS_MAX_DESCRIPTION_LEN)

    if cfg.deliver_subject:
        _check_push(stream, cfg)
    else:
        _check_pull(stream, cfg)

    limits = stream.consumer_limits
    if limits.max_ack_pending > 0 and cfg.max_ack_pending > limits.max_ack_pending:
        raise _fail(E.CONSUMER_MAX_PENDING_ACK_EXCESS, limit=limits.max_ack_pending)
    if account_max_ack_pending > 0 and cfg.max_ack_pending > account_max_ack_pending:
        raise _fail(E.CONSUMER_MAX_PENDING_ACK_EXCESS, limit=account_max_ack_pending)
    if limits.inactive_threshold > 0 and cfg.inactive_threshold > limits.inactive_threshold:
        raise _fail(E.CONSUMER_INACTIVE_THRESHOLD_EXCESS, limit=limits.inactive_threshold)

    if cfg.direct:
        if not cfg.deliver_subject:
            raise _fail(E.CONSUMER_DIRECT_REQUIRES_PUSH)
        if cfg.durable_name:
            raise _fail(E.CONSUMER_DIRECT_REQUIRES_EPHEMERAL)

    _check_filters(stream, cfg)
    _check_deliver_policy(cfg)

    if cfg.sample_freq:
        _check_sample_freq(cfg.sample_freq)
    if cfg.flow_control and cfg.idle_heartbeat == 0:
        raise _fail(E.CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS)
    if cfg.durable_name and cfg.name and cfg.durable_name != cfg.name:
        raise _fail(E.CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH)
    if _metadata_len(cfg.metadata) > JS_MAX_METADATA_LEN:
        raise _fail(E.CONSUMER_METADATA_LENGTH, limit=f"{JS_MAX_METADATA_LEN // 1024}KB")
    _check_priority(cfg)

    if stream.retention == "workqueue" and not cfg.direct:
        _check_work_queue(cfg, [o for o in others if not o.direct])
    if max(len(cfg.durable_name), len(cfg.name)) > JS_MAX_NAME_LEN:
        raise _fail(E.CONSUMER_NAME_TOO_LONG, max=JS_MAX_NAME_LEN)
    return cfg


def _check_consumer_names(cfg: ConsumerConfig) -> None:
    for name in (cfg.name, cfg.durable_name):
        if not name:
            continue
        if not _PATH_SEPARATORS.isdisjoint(name):
            raise _fail(E.CONSUMER_NAME_CONTAINS_PATH_SEPARATORS)
        if not is_valid_name(name):
            raise _fail(E.CONSUMER_BAD_DURABLE_NAME)


def _check_push(stream: StreamConfig, cfg: ConsumerConfig) -> None:
    ds = cfg.deliver_subject
    if not is_literal(ds):
        raise _fail(E.CONSUMER_DELIVER_TO_WILDCARDS)
    if not is_valid_subject(ds):
        raise _fail(E.CONSUMER_INVALID_DELIVER_SUBJECT)
    if any(subject_is_subset(ds, subj) for subj in stream.subjects):
        # the stream would store its own deliveries
        raise _fail(E.CONSUMER_DELIVER_CYCLE)
    if cfg.max_waiting != 0:
        raise _fail(E.CONSUMER_PUSH_MAX_WAITING)
    if cfg.max_ack_pending > 0 and cfg.ack_policy == "none":
        raise _fail(E.CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED)
    if 0 < cfg.idle_heartbeat < MIN_HEARTBEAT:
        raise _fail(E.CONSUMER_SMALL_HEARTBEAT)


def _check_pull(stream: StreamConfig, cfg: ConsumerConfig) -> None:
    if cfg.ack_policy == "none" and stream.retention == "workqueue":
        raise _fail(E.CONSUMER_PULL_REQUIRES_ACK)
    if cfg.rate_limit_bps > 0:
        raise _fail(E.CONSUMER_PULL_WITH_RATE_LIMIT)
    if cfg.max_waiting < 0:
        raise _fail(E.CONSUMER_MAX_WAITING_NEGATIVE)
    if cfg.idle_heartbeat > 0:
        raise _fail(E.CONSUMER_HB_REQUIRES_PUSH)
    if cfg.flow_control:
        raise _fail(E.CONSUMER_FC_REQUIRES_PUSH)
    if cfg.max_batch < 0:
        raise _fail(E.CONSUMER_MAX_REQUEST_BATCH_NEGATIVE)
    if cfg.max_expires != 0 and cfg.max_expires < MIN_MAX_EXPIRES:
        raise _fail(E.CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL)


def _check_filters(stream: StreamConfig, cfg: ConsumerConfig) -> None:
    if cfg.filter_subject and cfg.filter_subjects:
        raise _fail(E.CONSUMER_DUPLICATE_FILTER_SUBJECTS)
    if cfg.filter_subject and not is_valid_subject(cfg.filter_subject):
        raise _invalid("invalid subject")
    if any(not f for f in cfg.filter_subjects):
        raise _fail(E.CONSUMER_EMPTY_FILTER)
    filters = cfg.filters
    overlapping = overlapping_others(filters)
    for i, f in enumerate(filters):
        if not is_valid_subject(f):
            raise _invalid("invalid subject")
        if i in overlapping:
            raise _fail(E.CONSUMER_OVERLAPPING_SUBJECT_FILTERS)
    # A filter must be able to match something the stream stores. Sourced and mirrored streams
    # store subjects we cannot see from here, so only a stream's own subjects are checked.
    own = stream.mirror is None and not stream.sources and stream.subjects
    if own and not all_overlap(filters, stream.subjects):
        raise _fail(E.CONSUMER_FILTER_NOT_SUBSET)


def _check_deliver_policy(cfg: ConsumerConfig) -> None:
    words, needs_seq, needs_time = _DELIVER_POLICIES[cfg.deliver_policy]
    has_seq = cfg.opt_start_seq > 0
    has_time = cfg.opt_start_time is not None
    if needs_seq:
        if not has_seq:
            raise _policy(
                f"consumer delivery policy is deliver {words}, but optional start sequence is not set"
            )
        if has_time:
            raise _policy(f"consumer delivery policy is deliver {words}, but optional start time is also set")
    elif needs_time:
        if not has_time:
            raise _policy(f"consumer delivery policy is deliver {words}, but optional start time is not set")
        if cfg.opt_start_seq != 0:
            raise _policy(
                f"consumer delivery policy is deliver {words}, but optional start start sequence is also set"
            )
    else:
        if has_seq:
            raise _policy(
                f"consumer delivery policy is deliver {words}, but optional start sequence is also set"
            )
        if has_time:
            raise _policy(f"consumer delivery policy is deliver {words}, but optional start time is also set")
        if cfg.deliver_policy == "last_per_subject" and not cfg.filters:
            raise _policy(
                f"consumer delivery policy is deliver {words}, but optional filter subject is not set"
            )
    if has_time:
        try:
            parse_time(cfg.opt_start_time or "")
        except ValueError as exc:
            raise ApiError.of(E.INVALID_JSON, err=str(exc)) from None


def _policy(err: str) -> ApiError:
    return ApiError.of(E.CONSUMER_INVALID_POLICY, err=err)


def _check_sample_freq(freq: str) -> None:
    text = freq.removesuffix("%")
    try:
        value = int(text, 10)
    except ValueError:
        raise _fail(
            E.CONSUMER_INVALID_SAMPLING, err=f'strconv.Atoi: parsing "{text}": invalid syntax'
        ) from None
    if value < 0:
        raise _fail(E.CONSUMER_INVALID_SAMPLING, err="sampling frequency can not be negative")


def _check_priority(cfg: ConsumerConfig) -> None:
    if cfg.priority_policy == "none":
        if cfg.priority_groups:
            raise _fail(E.CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE)
        if cfg.priority_timeout > 0:
            raise _fail(E.CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY)
        return
    if cfg.deliver_subject:
        raise _fail(E.CONSUMER_PUSH_WITH_PRIORITY_GROUP)
    if not cfg.priority_groups:
        raise _fail(E.CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP)
    for group in cfg.priority_groups:
        if not group:
            raise _fail(E.CONSUMER_EMPTY_GROUP_NAME)
        if not _PRIORITY_GROUP.match(group):
            raise _fail(E.CONSUMER_INVALID_GROUP_NAME)


def _check_work_queue(cfg: ConsumerConfig, others: list[ConsumerConfig]) -> None:
    """A work-queue stream hands each message to exactly one consumer."""
    if cfg.ack_policy != "explicit":
        raise _fail(E.CONSUMER_WQ_REQUIRES_EXPLICIT_ACK)
    if cfg.deliver_policy != "all":
        raise _fail(E.CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL)
    if not others:
        return
    filters = cfg.filters
    if not filters:
        raise _fail(E.CONSUMER_WQ_MULTIPLE_UNFILTERED)
    if any(not other.filters for other in others):
        raise _fail(E.CONSUMER_WQ_CONSUMER_NOT_UNIQUE)
    theirs = PatternSet((g, True) for other in others for g in other.filters)
    if any(any(theirs.within(f)) or any(theirs.covering(f)) for f in filters):
        raise _fail(E.CONSUMER_WQ_CONSUMER_NOT_UNIQUE)


# (field, what nats-server says when an update changes it), in nats-server's order
_IMMUTABLE_CONSUMER_FIELDS: Final = (
    ("deliver_policy", "deliver policy can not be updated"),
    ("mem_storage", "storage type can not be updated"),
    ("direct", "direct can not be updated"),
    ("opt_start_seq", "start sequence can not be updated"),
)
_IMMUTABLE_CONSUMER_FIELDS_2: Final = (
    ("ack_policy", "ack policy can not be updated"),
    ("replay_policy", "replay policy can not be updated"),
    ("idle_heartbeat", "heart beats can not be updated"),
    ("flow_control", "flow control can not be updated"),
)


def check_consumer_update(
    old: ConsumerConfig, new: ConsumerConfig, *, deliver_subject_bound: bool = False
) -> ConsumerConfig:
    """nats-server's ``checkNewConsumerConfig``: ``new`` if the update is allowed.

    Both configs are normalized (run ``new`` through :func:`check_consumer_config` first).
    ``deliver_subject_bound`` says whether someone still listens on ``old.deliver_subject``:
    a bound push consumer may not move (10013). Other refusals are 10012 with nats-server's text.
    """
    if old == new:
        return new
    for field, text in _IMMUTABLE_CONSUMER_FIELDS:
        if getattr(old, field) != getattr(new, field):
            raise ApiError.of(E.CONSUMER_CREATE, err=text)
    if _start_time(old) != _start_time(new):
        raise ApiError.of(E.CONSUMER_CREATE, err="start time can not be updated")
    for field, text in _IMMUTABLE_CONSUMER_FIELDS_2:
        if getattr(old, field) != getattr(new, field):
            raise ApiError.of(E.CONSUMER_CREATE, err=text)
    # max_waiting first, as nats-server: a pull consumer (512) turned push (0) reads as this
    if old.max_waiting != new.max_waiting:
        raise ApiError.of(E.CONSUMER_CREATE, err="max waiting can not be updated")
    if old.deliver_subject != new.deliver_subject:
        if not old.deliver_subject:
            raise ApiError.of(E.CONSUMER_CREATE, err="can not update pull consumer to push based")
        if not new.deliver_subject:
            raise ApiError.of(E.CONSUMER_CREATE, err="can not update push consumer to pull based")
        if deliver_subject_bound:
            raise _fail(E.CONSUMER_NAME_EXIST)
    if new.backoff and new.max_deliver != -1 and len(new.backoff) > new.max_deliver:
        raise _fail(E.CONSUMER_MAX_DELIVER_BACKOFF)
    return new


def _start_time(cfg: ConsumerConfig) -> int | None:
    # compared as instants: the same time may be written with different offsets
    return None if cfg.opt_start_time is None else parse_time(cfg.opt_start_time)
