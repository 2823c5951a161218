"""The JetStream API's wire model: msgspec Structs with nats-server's exact JSON names.

Owns the documents the ``$JS.API.>`` path is made of and PubAcks: configs, infos, states, the
account's usage, stored messages, the enum spellings, RFC3339Nano time formatting, and the shared
encoder/decoder. The request and response envelopes are ``api/messages.py``'s, /jsz's document
``jsz_models.py``'s. Knows nothing of validation rules (``validate.py``), stores, streams as
running things, sockets or asyncio.

Wire conventions (nats-server 2.10/2.11, Go ``encoding/json``):

* Durations are ``int`` nanoseconds; times are RFC3339Nano UTC strings (:func:`format_time`).
* Which fields appear on the wire mirrors Go's tags. A field Go tags ``omitempty`` gets a plain
  default here and is omitted when it equals it (``omit_defaults``); a field Go always writes is
  declared with :func:`_always`, a ``default_factory`` (msgspec never omits those), so e.g.
  ``"sealed":false`` and ``"max_age":0`` are always present, as nats-server writes them.
* Decoders ignore unknown fields (newer clients send newer fields).
* Integer fields carry their Go type (``Int64``, ``Uint64``, ``Int32``, ``Duration``...): a
  request whose number does not fit is refused as nats-server refuses it
  (:func:`go_int_violation`); reading back what jetpy itself stored never is.
* Structs are frozen: values crossing layers are immutable; use :func:`msgspec.structs.replace`.
* The API's responses (``api/messages.py``) and the /jsz document (``jsz_models.py``) are built
  from these Structs and encoded by msgspec; nothing on the API path writes JSON by hand. PubAcks
  are the exception: nats-server writes them by hand with its own spacing, so ``stream.py`` keeps
  their byte template, and a test decodes every form it sends with :class:`PubAck` /
  :class:`PubAckError`.
"""

from __future__ import annotations

import calendar
import re
import time
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Final, Literal, TypeAlias, TypeVar

import msgspec

from jetpy.jetstream.errors import ApiError

__all__ = [
    "API_PREFIX",
    "JS_MAX_DESCRIPTION_LEN",
    "JS_MAX_METADATA_LEN",
    "JS_MAX_NAME_LEN",
    "LIST_LIMIT",
    "NAMES_LIMIT",
    "ZERO_TIME",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "ApiErrorBody",
    "ClusterInfo",
    "Compression",
    "ConsumerAction",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "Duration",
    "ExternalStream",
    "GoInt",
    "Int",
    "Int32",
    "Int64",
    "JetStreamApiStats",
    "LostStreamData",
    "PeerInfo",
    "Placement",
    "PriorityGroupState",
    "PriorityPolicy",
    "PubAck",
    "PubAckError",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StorageType",
    "StorageUsage",
    "StoredMessage",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamInfo",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransform",
    "Uint64",
    "decode",
    "encode",
    "format_time",
    "go_int_violation",
    "parse_time",
]

T = TypeVar("T")

# -- limits nats-server applies to names and free-form fields (jetstream_api.go) -----------------
JS_MAX_NAME_LEN: Final = 255  # stream/consumer names become directory names: keep under NAME_MAX
JS_MAX_DESCRIPTION_LEN: Final = 4 * 1024
JS_MAX_METADATA_LEN: Final = 128 * 1024  # sum of len(key) + len(value) over the map
NAMES_LIMIT: Final = 1024  # page size of STREAM.NAMES / CONSUMER.NAMES
LIST_LIMIT: Final = 256  # page size of STREAM.LIST / CONSUMER.LIST
API_PREFIX: Final = "$JS.API"

# -- enums, with the exact wire spelling --------------------------------------------------------
RetentionPolicy = Literal["limits", "interest", "workqueue"]
DiscardPolicy = Literal["old", "new"]
StorageType = Literal["file", "memory"]
Compression = Literal["none", "s2"]
DeliverPolicy = Literal["all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"]
AckPolicy = Literal["none", "all", "explicit"]
ReplayPolicy = Literal["instant", "original"]
PriorityPolicy = Literal["none", "overflow", "pinned_client", "prioritized"]
ConsumerAction = Literal["", "create", "update"]

# ------------------------------------------------------------------------------------------------
# Time: Go's time.RFC3339Nano, as time.Time marshals to JSON
# ------------------------------------------------------------------------------------------------

ZERO_TIME: Final = "0001-01-01T00:00:00Z"
"""Go's zero ``time.Time`` on the wire (e.g. ``first_ts`` of an empty stream)."""

_NS: Final = 1_000_000_000
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


def format_time(ns: int) -> str:
    """Unix nanoseconds -> RFC3339Nano UTC exactly as Go prints it.

    Trailing zeros of the fraction are trimmed and a whole second has no fraction. ``0`` is Go's
    zero time (``"0001-01-01T00:00:00Z"``): jetpy uses 0 for "never", as nats-server uses
    ``time.Time{}``, and the real epoch instant never occurs in a stream.
    """
    if ns == 0:
        return ZERO_TIME
    secs, frac = divmod(ns, _NS)
    head = _format_seconds(secs)
    if frac == 0:
        return head + "Z"
    return f"{head}.{frac:09d}".rstrip("0") + "Z"


@lru_cache(maxsize=1024)
def _format_seconds(secs: int) -> str:
    # Many timestamps share a second (a burst of messages, an info response); cache the slow part.
    t = time.gmtime(secs)
    # not strftime: "%Y" does not zero-pad years below 1000 on every libc, Go always does
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"


def parse_time(s: str) -> int:
    """RFC3339 (any offset, 0-9+ fraction digits) -> Unix nanoseconds; Go's zero time -> 0.

    Raises ``ValueError`` for anything Go's ``time.Parse(time.RFC3339Nano, s)`` would reject.
    Digits past nanoseconds are truncated.
    """
    m = _RFC3339.match(s)
    if m is None:
        raise ValueError(f"invalid RFC3339 time: {s!r}")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 59):
        raise ValueError(f"invalid RFC3339 time: {s!r}")
    if day > calendar.monthrange(year, month)[1]:
        raise ValueError(f"invalid RFC3339 time: {s!r}")
    secs = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if m.group(9) is not None:
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        secs -= offset if m.group(9) == "+" else -offset
    frac_digits = m.group(7) or ""
    frac = int(frac_digits[:9].ljust(9, "0")) if frac_digits else 0
    if (year, month, day, hour, minute, second, frac) == (1, 1, 1, 0, 0, 0, 0) and m.group(9) is None:
        return 0
    return secs * _NS + frac


# ------------------------------------------------------------------------------------------------
# Struct plumbing
# ------------------------------------------------------------------------------------------------


def _always(value: T) -> T:
    """A default Go writes even when empty: msgspec never omits ``default_factory`` fields
    (except the bare ``list``/``dict`` factories). ``value`` must be immutable (it is shared)."""
    return msgspec.field(default_factory=lambda: value)  # type: ignore[no-any-return]


def _always_list() -> Any:
    """An always-written list (``[]`` when empty), a fresh one per instance."""
    return msgspec.field(default_factory=lambda: [])  # noqa: PIE807 -- bare `list` would be omitted when empty


class _Wire(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """Base of every wire Struct (config is inherited by subclasses)."""


# ------------------------------------------------------------------------------------------------
# Go's integer types: what nats-server's JSON decoder refuses out of range (10025, invalid JSON)
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GoInt:
    """The Go integer type a field decodes into. msgspec ignores it; :func:`go_int_violation`
    reads it, so a request is refused as nats-server refuses it while what jetpy wrote to disk
    itself is always read back."""

    go_type: str
    lo: int
    hi: int


Int64: TypeAlias = Annotated[int, GoInt("int64", -(2**63), 2**63 - 1)]
Int: TypeAlias = Annotated[int, GoInt("int", -(2**63), 2**63 - 1)]  # a 64-bit server's int
Int32: TypeAlias = Annotated[int, GoInt("int32", -(2**31), 2**31 - 1)]
Uint64: TypeAlias = Annotated[int, GoInt("uint64", 0, 2**64 - 1)]
Duration: TypeAlias = Annotated[int, GoInt("time.Duration", -(2**63), 2**63 - 1)]  # nanoseconds

# What an integer field without a Go type may hold: some Go integer can (int64 .. uint64)
_ANY_GO_INT: Final = GoInt("int", -(2**63), 2**64 - 1)

# per Struct type: (attribute, wire name, what to check) for each field that can hold an integer
_Check = tuple[str, Any]  # ("int", GoInt) | ("struct", type) | ("list", _Check)
_CHECKS: dict[type, tuple[tuple[str, str, _Check], ...]] = {}


def go_int_violation(value: msgspec.Struct) -> str | None:
    """Go's decoder error for the first integer of ``value`` (nested Structs and lists
    included) that its field's Go type cannot hold, or None if every one fits."""
    return _violation(value, ("struct", type(value)), "")


def _violation(value: Any, check: _Check, path: str) -> str | None:
    kind, arg = check
    if kind == "int":
        if type(value) is int and not arg.lo <= value <= arg.hi:
            return f"json: cannot unmarshal number {value} into Go struct field .{path} of type {arg.go_type}"
        return None
    if kind == "list":
        if isinstance(value, list):
            for i, item in enumerate(value):
                if (err := _violation(item, arg, f"{path}.{i}")) is not None:
                    return err
        return None
    if not isinstance(value, msgspec.Struct):
        return None
    for attr, wire, field_check in _struct_checks(type(value)):
        err = _violation(getattr(value, attr), field_check, f"{path}.{wire}" if path else wire)
        if err is not None:
            return err
    return None


def _struct_checks(cls: type) -> tuple[tuple[str, str, _Check], ...]:
    checks = _CHECKS.get(cls)
    if checks is None:
        found = []
        for f in msgspec.structs.fields(cls):
            c = _check_of(f.type)
            if c is not None:
                found.append((f.name, f.encode_name, c))
        checks = _CHECKS[cls] = tuple(found)
    return checks


def _check_of(tp: Any) -> _Check | None:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        go = next((m for m in meta if isinstance(m, GoInt)), None)
        return ("int", go) if go is not None else _check_of(base)
    if origin in (types.UnionType, typing.Union):
        checks = [c for a in typing.get_args(tp) if (c := _check_of(a)) is not None]
        return checks[0] if len(checks) == 1 else None
    if origin is list:
        inner = _check_of(typing.get_args(tp)[0])
        return ("list", inner) if inner is not None else None
    if tp is int:
        return ("int", _ANY_GO_INT)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return ("struct", tp) if _struct_checks(tp) else None
    return None


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------


class ApiErrorBody(_Wire, frozen=True):
    """The ``"error"`` object of a response (Go ``ApiError``)."""

    code: int = _always(0)
    err_code: int = 0
    description: str = ""

    @classmethod
    def of(cls, err: ApiError) -> ApiErrorBody:
        return cls(code=err.code, err_code=err.err_code, description=err.description)

    def to_error(self) -> ApiError:
        return ApiError(self.code, self.err_code, self.description)


# ------------------------------------------------------------------------------------------------
# Stream configuration
# ------------------------------------------------------------------------------------------------


class Placement(_Wire, frozen=True):
    cluster: str = ""
    tags: list[str] = msgspec.field(default_factory=list)


class SubjectTransform(_Wire, frozen=True):
    src: str = _always("")
    dest: str = _always("")


class ExternalStream(_Wire, frozen=True):
    api: str = _always("")
    deliver: str = _always("")


class StreamConsumerSource(_Wire, frozen=True):
    """A durable consumer the user created on the origin for a mirror or source to use
    (nats-server 2.14, ADR-60: for work-queue and interest origins). Refused until built."""

    name: str = _always("")
    deliver_subject: str = _always("")


class StreamSource(_Wire, frozen=True):
    name: str = _always("")
    opt_start_seq: Uint64 = 0
    opt_start_time: str | None = None
    filter_subject: str = ""
    subject_transforms: list[SubjectTransform] = msgspec.field(default_factory=list)
    external: ExternalStream | None = None
    consumer: StreamConsumerSource | None = None


class RePublish(_Wire, frozen=True):
    src: str = ""
    dest: str = _always("")
    headers_only: bool = False


class StreamConsumerLimits(_Wire, frozen=True):
    inactive_threshold: Duration = 0
    max_ack_pending: Int = 0


class StreamConfig(_Wire, frozen=True):
    """nats-server 2.10's ``StreamConfig`` plus 2.11's TTL fields, in Go's field order.

    Defaults are Go's zero values (what a request that omits the field means), not the
    normalized values; ``validate.check_stream_config`` fills those in.
    """

    name: str = _always("")
    description: str = ""
    subjects: list[str] = msgspec.field(default_factory=list)
    retention: RetentionPolicy = _always("limits")
    max_consumers: Int = _always(0)
    max_msgs: Int64 = _always(0)
    max_bytes: Int64 = _always(0)
    max_age: Duration = _always(0)
    max_msgs_per_subject: Int64 = _always(0)
    max_msg_size: Int32 = 0
    discard: DiscardPolicy = _always("old")
    storage: StorageType = _always("file")
    num_replicas: Int = _always(0)
    no_ack: bool = False
    template_owner: str = ""
    duplicate_window: Duration = 0
    placement: Placement | None = None
    mirror: StreamSource | None = None
    sources: list[StreamSource] = msgspec.field(default_factory=list)
    compression: Compression = _always("none")
    first_seq: Uint64 = 0
    subject_transform: SubjectTransform | None = None
    republish: RePublish | None = None
    allow_direct: bool = _always(False)
    mirror_direct: bool = _always(False)
    discard_new_per_subject: bool = False
    sealed: bool = _always(False)
    deny_delete: bool = _always(False)
    deny_purge: bool = _always(False)
    allow_rollup_hdrs: bool = _always(False)
    consumer_limits: StreamConsumerLimits = _always(StreamConsumerLimits())
    allow_msg_ttl: bool = _always(False)
    subject_delete_marker_ttl: Duration = 0
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


# ------------------------------------------------------------------------------------------------
# Stream state and info
# ------------------------------------------------------------------------------------------------


class LostStreamData(_Wire, frozen=True):
    msgs: list[int] | None = _always(None)
    bytes: int = _always(0)


class StreamState(_Wire, frozen=True):
    messages: int = _always(0)
    bytes: int = _always(0)
    first_seq: int = _always(0)
    first_ts: str = _always(ZERO_TIME)
    last_seq: int = _always(0)
    last_ts: str = _always(ZERO_TIME)
    num_subjects: int = 0
    subjects: dict[str, int] = msgspec.field(default_factory=dict)
    num_deleted: int = 0
    deleted: list[int] = msgspec.field(default_factory=list)
    lost: LostStreamData | None = None
    consumer_count: int = _always(0)


class PeerInfo(_Wire, frozen=True):
    """One replica of a stream other than its leader, as the leader sees it (Go ``PeerInfo``):
    ``active`` is the time since it was last heard from (ns), ``lag`` the entries it is behind."""

    name: str = _always("")
    current: bool = _always(False)
    offline: bool = False
    active: int = _always(0)
    lag: int = 0
    peer: str = ""  # its Raft member id


class ClusterInfo(_Wire, frozen=True):
    """Where a stream lives. A single server omits it from API infos, as nats-server 2.9 does;
    /jsz's stream detail reports ``{"leader": <server name>}``; a stream of a cluster names its
    cluster and its leader, and a replicated one (R3) its Raft group, since when its leader
    leads, the account its group's traffic crosses (the system account) and its other
    replicas, in nats-server's order."""

    name: str = ""
    raft_group: str = ""
    leader: str = ""
    leader_since: str = ""
    system_account: bool = False
    traffic_account: str = ""
    replicas: list[PeerInfo] = msgspec.field(default_factory=list)


class StreamSourceInfo(_Wire, frozen=True):
    """How a mirror or one source is doing (Go ``StreamSourceInfo``, nats-server 2.15's fields
    and order): ``lag`` is what the origin still holds for it, ``seq`` (sources only) the last
    origin sequence copied, ``active`` nanoseconds since the origin was last heard from (-1:
    never), ``error`` why its consumer on the origin could not be set up."""

    name: str = _always("")
    external: ExternalStream | None = None
    lag: int = _always(0)
    seq: int = 0
    active: int = _always(-1)
    error: ApiErrorBody | None = None
    filter_subject: str = ""
    subject_transforms: list[SubjectTransform] = msgspec.field(default_factory=list)


class StreamInfo(_Wire, frozen=True):
    """A stream's info as STREAM.CREATE/UPDATE/INFO/LIST answer it (``info.stream_info``). A
    single server writes no ``cluster``; like nats-server 2.9, no ``ts``."""

    config: StreamConfig = _always(StreamConfig())
    created: str = _always(ZERO_TIME)
    state: StreamState = _always(StreamState())
    domain: str = ""  # the server's JetStream domain, when it has one
    cluster: ClusterInfo | None = None  # a replicated stream's (a single server writes none)
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] = msgspec.field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# Consumers
# ------------------------------------------------------------------------------------------------


class ConsumerConfig(_Wire, frozen=True):
    """nats-server 2.11's ``ConsumerConfig`` (``sourcing`` and 2.12+ fields left out)."""

    durable_name: str = ""
    name: str = ""
    description: str = ""
    deliver_policy: DeliverPolicy = _always("all")
    opt_start_seq: Uint64 = 0
    opt_start_time: str | None = None
    ack_policy: AckPolicy = _always("none")  # Go's zero value: a request without it means none
    ack_wait: Duration = 0
    max_deliver: Int = 0
    backoff: list[Duration] = msgspec.field(default_factory=list)
    filter_subject: str = ""
    filter_subjects: list[str] = msgspec.field(default_factory=list)
    replay_policy: ReplayPolicy = _always("instant")
    rate_limit_bps: Uint64 = 0
    sample_freq: str = ""
    max_waiting: Int = 0
    max_ack_pending: Int = 0
    idle_heartbeat: Duration = 0
    flow_control: bool = False
    headers_only: bool = False
    max_batch: Int = 0
    max_expires: Duration = 0
    max_bytes: Int = 0
    deliver_subject: str = ""
    deliver_group: str = ""
    inactive_threshold: Duration = 0
    num_replicas: Int = _always(0)
    mem_storage: bool = False
    direct: bool = False  # internal: mirror/source consumers
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    pause_until: str | None = None
    priority_groups: list[str] = msgspec.field(default_factory=list)
    priority_policy: PriorityPolicy = "none"
    priority_timeout: Duration = 0

    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    @property
    def is_durable(self) -> bool:
        return bool(self.durable_name)

    @property
    def filters(self) -> list[str]:
        """``filter_subject`` and ``filter_subjects`` as one list (nats-server's gatherSubjectFilters)."""
        if self.filter_subject:
            return [self.filter_subject, *self.filter_subjects]
        return list(self.filter_subjects)


class SequenceInfo(_Wire, frozen=True):
    consumer_seq: int = _always(0)
    stream_seq: int = _always(0)
    last_active: str | None = None


class PriorityGroupState(_Wire, frozen=True):
    """A priority group's state in ConsumerInfo: the pinned client's id (``pinned_client`` only)
    and since when; Go writes ``pinned_ts`` always (its zero time when nothing is pinned)."""

    group: str = _always("")
    pinned_client_id: str = ""
    pinned_ts: str = _always(ZERO_TIME)


class ConsumerInfo(_Wire, frozen=True):
    """A consumer's info (``Consumer.info``) as CONSUMER.CREATE/INFO/LIST answer it, and /jsz's
    consumer detail, which nats-server 2.9 writes without ``ts`` (None here) and ``config``
    unless asked for."""

    stream_name: str = _always("")
    name: str = _always("")
    created: str = _always(ZERO_TIME)
    config: ConsumerConfig | None = None
    delivered: SequenceInfo = _always(SequenceInfo())
    ack_floor: SequenceInfo = _always(SequenceInfo())
    num_ack_pending: int = _always(0)
    num_redelivered: int = _always(0)
    num_waiting: int = _always(0)
    num_pending: int = _always(0)
    cluster: ClusterInfo | None = None
    push_bound: bool = False
    paused: bool = False
    pause_remaining: int = 0
    ts: str | None = None  # when the info was gathered: always in API answers (2.10+)
    priority_groups: list[PriorityGroupState] = msgspec.field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# Publishing and messages
# ------------------------------------------------------------------------------------------------


class PubAck(_Wire, frozen=True):
    """A successful publish acknowledgement (no ``type`` field, unlike API responses)."""

    stream: str = _always("")
    seq: int = _always(0)
    domain: str = ""
    duplicate: bool = False


class PubAckError(_Wire, frozen=True):
    """A refused publish, as a stream answers it: the error, then the (empty) PubAck of the
    stream (Go's ``JSPubAckResponse`` with both parts set): ``{"error":{...},"stream":"S","seq":0}``."""

    error: ApiErrorBody = _always(ApiErrorBody())
    stream: str = _always("")
    seq: int = _always(0)


class StoredMessage(_Wire, frozen=True):
    """``STREAM.MSG.GET``'s ``message``: ``hdrs``/``data`` are raw bytes, base64 on the wire."""

    subject: str = _always("")
    seq: int = _always(0)
    hdrs: bytes = b""
    data: bytes = b""
    time: str = _always(ZERO_TIME)


# ------------------------------------------------------------------------------------------------
# Account ($JS.API.INFO)
# ------------------------------------------------------------------------------------------------


class AccountLimits(_Wire, frozen=True):
    max_memory: int = _always(-1)
    max_storage: int = _always(-1)
    max_streams: int = _always(-1)
    max_consumers: int = _always(-1)
    max_ack_pending: int = _always(-1)
    memory_max_stream_bytes: int = _always(-1)
    storage_max_stream_bytes: int = _always(-1)
    max_bytes_required: bool = _always(False)


class JetStreamApiStats(_Wire, frozen=True):
    """The ``api`` counters of ``$JS.API.INFO`` and /jsz. ``level`` (the API level, 2.11 = 1) is
    reported by ``$JS.API.INFO`` only; /jsz leaves it out, as nats-server 2.9 does."""

    level: int = 0
    total: int = _always(0)
    errors: int = _always(0)


class StorageUsage(_Wire, frozen=True):
    """What the streams hold and reserve, in bytes: the fields Go's ``JetStreamTier`` (the
    account info) and ``JetStreamStats`` (/jsz) both start with."""

    memory: int = _always(0)
    storage: int = _always(0)
    reserved_memory: int = _always(0)
    reserved_storage: int = _always(0)


class AccountInfo(StorageUsage, frozen=True):
    """``$JS.API.INFO``'s body: usage, counts, the limits and the api counters."""

    streams: int = _always(0)
    consumers: int = _always(0)
    limits: AccountLimits = _always(AccountLimits())
    domain: str = ""
    api: JetStreamApiStats = _always(JetStreamApiStats())


# ------------------------------------------------------------------------------------------------
# Encoding and decoding
# ------------------------------------------------------------------------------------------------

_ENCODER: Final = msgspec.json.Encoder()


def encode(obj: Any) -> bytes:
    """JSON bytes for a wire Struct (or any msgspec-encodable value)."""
    return _ENCODER.encode(obj)


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}  # one compiled decoder per target type


def decode(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into ``type_`` (unknown fields ignored). Raises msgspec errors."""
    dec = _DECODERS.get(type_)
    if dec is None:
        dec = _DECODERS[type_] = msgspec.json.Decoder(type_)
    result: T = dec.decode(data)
    return result
