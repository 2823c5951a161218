"""The JetStream API error table and the layer's root exception.

Owns every ``(code, err_code, description)`` triple that nats-server 2.10/2.11 answer with for
streams, consumers, publishing, messages, account/JetStream enablement and config validation,
in nats-server's exact text (``server/errors.json``), plus :class:`ApiError`, the one exception
the JetStream layer raises for client-visible failures.

Knows nothing of subjects, stores, sockets or JSON encoding: the API layer turns an
:class:`ApiError` into a response with :meth:`ApiError.to_wire`.

Descriptions keep nats-server's ``{placeholder}`` markers (``"wrong last sequence: {seq}"``);
:meth:`ErrorCode.format` fills them. ``code`` is the HTTP-ish status, ``err_code`` the stable
JetStream code clients switch on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACCOUNT_RESOURCES_EXCEEDED",
    "BAD_BULK_REQUEST",
    "BAD_REQUEST",
    "BY_ERR_CODE",
    "CLUSTER_INCOMPLETE",
    "CLUSTER_NOT_ACTIVE",
    "CLUSTER_NOT_ASSIGNED",
    "CLUSTER_NOT_AVAIL",
    "CLUSTER_NOT_LEADER",
    "CLUSTER_NO_PEERS",
    "CLUSTER_PEER_NOT_MEMBER",
    "CLUSTER_REQUIRED",
    "CLUSTER_SERVER_NOT_MEMBER",
    "CLUSTER_TAGS",
    "CLUSTER_UNSUPPORTED_FEATURE",
    "CONSUMER_ACK_POLICY_INVALID",
    "CONSUMER_ACK_WAIT_NEGATIVE",
    "CONSUMER_ALREADY_EXISTS",
    "CONSUMER_BACKOFF_NEGATIVE",
    "CONSUMER_BAD_DURABLE_NAME",
    "CONSUMER_CONFIG_REQUIRED",
    "CONSUMER_CREATE",
    "CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH",
    "CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH",
    "CONSUMER_DELIVER_CYCLE",
    "CONSUMER_DELIVER_TO_WILDCARDS",
    "CONSUMER_DESCRIPTION_TOO_LONG",
    "CONSUMER_DIRECT_REQUIRES_EPHEMERAL",
    "CONSUMER_DIRECT_REQUIRES_PUSH",
    "CONSUMER_DOES_NOT_EXIST",
    "CONSUMER_DUPLICATE_FILTER_SUBJECTS",
    "CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT",
    "CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT",
    "CONSUMER_DURABLE_NAME_NOT_SET",
    "CONSUMER_EMPTY_FILTER",
    "CONSUMER_EMPTY_GROUP_NAME",
    "CONSUMER_EPHEMERAL_WITH_DURABLE_IN_SUBJECT",
    "CONSUMER_EPHEMERAL_WITH_DURABLE_NAME",
    "CONSUMER_EXISTING_ACTIVE",
    "CONSUMER_FC_REQUIRES_PUSH",
    "CONSUMER_FILTER_NOT_SUBSET",
    "CONSUMER_HB_REQUIRES_PUSH",
    "CONSUMER_INACTIVE_THRESHOLD_EXCESS",
    "CONSUMER_INVALID_DELIVER_SUBJECT",
    "CONSUMER_INVALID_GROUP_NAME",
    "CONSUMER_INVALID_POLICY",
    "CONSUMER_INVALID_PRIORITY_GROUP",
    "CONSUMER_INVALID_SAMPLING",
    "CONSUMER_MAX_DELIVER_BACKOFF",
    "CONSUMER_MAX_PENDING_ACK_EXCESS",
    "CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED",
    "CONSUMER_MAX_REQUEST_BATCH_EXCEEDED",
    "CONSUMER_MAX_REQUEST_BATCH_NEGATIVE",
    "CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL",
    "CONSUMER_MAX_WAITING_NEGATIVE",
    "CONSUMER_METADATA_LENGTH",
    "CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED",
    "CONSUMER_NAME_CONTAINS_PATH_SEPARATORS",
    "CONSUMER_NAME_EXIST",
    "CONSUMER_NAME_TOO_LONG",
    "CONSUMER_NOT_FOUND",
    "CONSUMER_OFFLINE",
    "CONSUMER_OFFLINE_REASON",
    "CONSUMER_ON_MAPPED",
    "CONSUMER_OVERLAPPING_SUBJECT_FILTERS",
    "CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY",
    "CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE",
    "CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP",
    "CONSUMER_PULL_NOT_DURABLE",
    "CONSUMER_PULL_REQUIRES_ACK",
    "CONSUMER_PULL_WITH_RATE_LIMIT",
    "CONSUMER_PUSH_MAX_WAITING",
    "CONSUMER_PUSH_WITH_PRIORITY_GROUP",
    "CONSUMER_REPLACEMENT_WITH_DIFFERENT_NAME",
    "CONSUMER_REPLAY_POLICY_INVALID",
    "CONSUMER_REPLICAS_EXCEEDS_STREAM",
    "CONSUMER_REPLICAS_SHOULD_MATCH_STREAM",
    "CONSUMER_SMALL_HEARTBEAT",
    "CONSUMER_STORE_FAILED",
    "CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS",
    "CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL",
    "CONSUMER_WQ_CONSUMER_NOT_UNIQUE",
    "CONSUMER_WQ_MULTIPLE_UNFILTERED",
    "CONSUMER_WQ_REQUIRES_EXPLICIT_ACK",
    "INSUFFICIENT_RESOURCES",
    "INTERNAL",
    "INVALID_JSON",
    "MAXIMUM_CONSUMERS_LIMIT",
    "MAXIMUM_STREAMS_LIMIT",
    "MEMORY_RESOURCES_EXCEEDED",
    "MESSAGE_TTL_DISABLED",
    "MESSAGE_TTL_INVALID",
    "MIRROR_CONSUMER_SETUP_FAILED",
    "MIRROR_INVALID_STREAM_NAME",
    "MIRROR_INVALID_SUBJECT_FILTER",
    "MIRROR_INVALID_TRANSFORM_DESTINATION",
    "MIRROR_MAX_MESSAGE_SIZE_TOO_BIG",
    "MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED",
    "MIRROR_OVERLAPPING_SUBJECT_FILTERS",
    "MIRROR_WITH_FIRST_SEQ",
    "MIRROR_WITH_SOURCES",
    "MIRROR_WITH_START_SEQ_AND_TIME",
    "MIRROR_WITH_SUBJECTS",
    "MIRROR_WITH_SUBJECT_FILTERS",
    "NAMES",
    "NOT_EMPTY_REQUEST",
    "NOT_ENABLED",
    "NOT_ENABLED_FOR_ACCOUNT",
    "NO_ACCOUNT",
    "NO_LIMITS",
    "NO_MESSAGE_FOUND",
    "PEDANTIC",
    "PEER_REMAP",
    "PERMISSIONS_VIOLATION",
    "RAFT_GENERAL",
    "REPLICAS_COUNT_CANNOT_BE_NEGATIVE",
    "REQUIRED_API_LEVEL",
    "RESTORE_SUBSCRIBE_FAILED",
    "SEQUENCE_NOT_FOUND",
    "SNAPSHOT_DELIVER_SUBJECT_INVALID",
    "SOURCE_CONSUMER_SETUP_FAILED",
    "SOURCE_DUPLICATE_DETECTED",
    "SOURCE_INVALID_STREAM_NAME",
    "SOURCE_INVALID_SUBJECT_FILTER",
    "SOURCE_INVALID_TRANSFORM_DESTINATION",
    "SOURCE_MAX_MESSAGE_SIZE_TOO_BIG",
    "SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED",
    "SOURCE_OVERLAPPING_SUBJECT_FILTERS",
    "STORAGE_RESOURCES_EXCEEDED",
    "STREAM_ASSIGNMENT",
    "STREAM_CREATE",
    "STREAM_DELETE",
    "STREAM_DUPLICATE_MESSAGE_CONFLICT",
    "STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID",
    "STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_NOT_READY",
    "STREAM_EXTERNAL_API_OVERLAP",
    "STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS",
    "STREAM_GENERAL",
    "STREAM_HEADER_EXCEEDS_MAXIMUM",
    "STREAM_INFO_MAX_SUBJECTS",
    "STREAM_INVALID",
    "STREAM_INVALID_CONFIG",
    "STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ",
    "STREAM_LIMITS",
    "STREAM_MAX_BYTES_REQUIRED",
    "STREAM_MAX_STREAM_BYTES_EXCEEDED",
    "STREAM_MESSAGE_EXCEEDS_MAXIMUM",
    "STREAM_MIRROR_NOT_UPDATABLE",
    "STREAM_MISMATCH",
    "STREAM_MOVE_AND_SCALE",
    "STREAM_MOVE_IN_PROGRESS",
    "STREAM_MSG_DELETE_FAILED",
    "STREAM_NAME_CONTAINS_PATH_SEPARATORS",
    "STREAM_NAME_EXIST",
    "STREAM_NAME_EXIST_RESTORE_FAILED",
    "STREAM_NOT_FOUND",
    "STREAM_NOT_MATCH",
    "STREAM_OFFLINE",
    "STREAM_OFFLINE_REASON",
    "STREAM_PURGE_FAILED",
    "STREAM_RECONFIGURE_NOT_IN_PROGRESS",
    "STREAM_REPLICAS_NOT_SUPPORTED",
    "STREAM_REPLICAS_NOT_UPDATABLE",
    "STREAM_RESTORE",
    "STREAM_ROLLUP_FAILED",
    "STREAM_SEALED",
    "STREAM_SEQUENCE_NOT_MATCH",
    "STREAM_SNAPSHOT",
    "STREAM_STORE_FAILED",
    "STREAM_SUBJECT_OVERLAP",
    "STREAM_TEMPLATE_CREATE",
    "STREAM_TEMPLATE_DELETE",
    "STREAM_TEMPLATE_NOT_FOUND",
    "STREAM_TOO_MANY_REQUESTS",
    "STREAM_TRANSFORM_INVALID_DESTINATION",
    "STREAM_TRANSFORM_INVALID_SOURCE",
    "STREAM_UPDATE",
    "STREAM_WRONG_LAST_MSG_ID",
    "STREAM_WRONG_LAST_SEQUENCE",
    "STREAM_WRONG_LAST_SEQUENCE_CONSTANT",
    "TEMPLATE_NAME_NOT_MATCH_SUBJECT",
    "TEMP_STORAGE_FAILED",
    "ApiError",
    "ErrorCode",
]

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One row of the error table."""

    code: int
    err_code: int
    description: str

    def format(self, **kw: object) -> str:
        """The description with ``{name}`` placeholders filled from ``kw``.

        Placeholders not given are dropped (with a trailing ``": "``), so ``INVALID_JSON.format()``
        is ``"invalid JSON"``; a placeholder given as ``""`` keeps the separator, as Go does.
        A regex instead of ``str.format`` because descriptions are nats-server's text, not Python
        format strings, and a stray brace must never raise.
        """
        if not kw and "{" not in self.description:
            return self.description

        missing = False

        def fill(m: re.Match[str]) -> str:
            nonlocal missing
            key = m.group(1)
            if key in kw:
                return str(kw[key])
            missing = True
            return ""

        text = _PLACEHOLDER.sub(fill, self.description)
        # An unfilled trailing detail ("invalid JSON: {err}" without err) reads as "invalid JSON";
        # one given as empty stays, as Go prints it ("wrong last msg ID: ").
        return text.rstrip(": ") if missing else text

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(_PLACEHOLDER.findall(self.description))


class ApiError(Exception):
    """A JetStream API failure with nats-server's machine-readable fields."""

    __slots__ = ("code", "description", "err_code")

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    @classmethod
    def of(cls, error: ErrorCode, **kw: object) -> ApiError:
        """Build from a table row, filling its placeholders from ``kw``."""
        return cls(error.code, error.err_code, error.format(**kw))

    def is_(self, error: ErrorCode) -> bool:
        """Is this error an instance of the table row ``error`` (compared by ``err_code``)?"""
        return self.err_code == error.err_code

    def to_wire(self) -> dict[str, Any]:
        """The ``"error"`` object of an API response."""
        return {"code": self.code, "err_code": self.err_code, "description": self.description}

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.err_code}, {self.description!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApiError):
            return NotImplemented
        return (self.code, self.err_code, self.description) == (
            other.code,
            other.err_code,
            other.description,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.err_code, self.description))


def _e(code: int, err_code: int, description: str) -> ErrorCode:
    return ErrorCode(code, err_code, description)


# -- jetpy's own (nats-server has no such check): a request that would read, capture or write
# subjects its caller may not subscribe or publish to (jetstream.access). 403 and 10403 are
# outside nats-server's codes, so clients cannot mistake it for one of them.
PERMISSIONS_VIOLATION = _e(403, 10403, "permissions violation for {action} to {subject}")
# -- jetpy's own: a bulk publish (``$JS.API.JETPY.PUBLISH``) whose body or records are malformed,
# refused as a whole; the description names the record (10400: 400's counterpart, as 10403).
BAD_BULK_REQUEST = _e(400, 10400, "bad bulk request: {err}")


# ---------------------------------------------------------------------------------------------
# The table. Names follow nats-server's constants without the ``JS`` prefix and ``Err``/``ErrF``
# suffix (JSStreamNotFoundErr -> STREAM_NOT_FOUND). Grouped by concern; err_code is the key.
# ---------------------------------------------------------------------------------------------

# -- account, enablement, resources, request shape ---------------------------------------------
ACCOUNT_RESOURCES_EXCEEDED = _e(400, 10002, "resource limits exceeded for account")
BAD_REQUEST = _e(400, 10003, "bad request")
INSUFFICIENT_RESOURCES = _e(503, 10023, "insufficient resources")
INVALID_JSON = _e(400, 10025, "invalid JSON: {err}")
MAXIMUM_CONSUMERS_LIMIT = _e(400, 10026, "maximum consumers limit reached")
MAXIMUM_STREAMS_LIMIT = _e(400, 10027, "maximum number of streams reached")
MEMORY_RESOURCES_EXCEEDED = _e(500, 10028, "insufficient memory resources available")
NO_ACCOUNT = _e(503, 10035, "account not found")
NOT_EMPTY_REQUEST = _e(400, 10038, "expected an empty request payload")
NOT_ENABLED_FOR_ACCOUNT = _e(503, 10039, "JetStream not enabled for account")
STORAGE_RESOURCES_EXCEEDED = _e(500, 10047, "insufficient storage resources available")
NOT_ENABLED = _e(503, 10076, "JetStream not enabled")
STREAM_MAX_BYTES_REQUIRED = _e(400, 10113, "account requires a stream config to have max bytes set")
NO_LIMITS = _e(400, 10120, "no JetStream default or applicable tiered limit present")
STREAM_MAX_STREAM_BYTES_EXCEEDED = _e(400, 10122, "stream max bytes exceeds account limit max stream bytes")
REPLICAS_COUNT_CANNOT_BE_NEGATIVE = _e(400, 10133, "replicas count cannot be negative")
PEDANTIC = _e(400, 10157, "pedantic mode: {err}")
REQUIRED_API_LEVEL = _e(412, 10185, "JetStream minimum api level required")

# -- cluster (single-server jetpy answers a few of these) --------------------------------------
CLUSTER_INCOMPLETE = _e(503, 10004, "incomplete results")
CLUSTER_NO_PEERS = _e(400, 10005, "{err}")
CLUSTER_NOT_ACTIVE = _e(500, 10006, "JetStream not in clustered mode")
CLUSTER_NOT_ASSIGNED = _e(500, 10007, "JetStream cluster not assigned to this server")
CLUSTER_NOT_AVAIL = _e(503, 10008, "JetStream system temporarily unavailable")
CLUSTER_NOT_LEADER = _e(500, 10009, "JetStream cluster can not handle request")
CLUSTER_REQUIRED = _e(503, 10010, "JetStream clustering support required")
CLUSTER_TAGS = _e(400, 10011, "tags placement not supported for operation")
CLUSTER_UNSUPPORTED_FEATURE = _e(503, 10036, "not currently supported in clustered mode")
CLUSTER_PEER_NOT_MEMBER = _e(400, 10040, "peer not a member")
RAFT_GENERAL = _e(500, 10041, "{err}")
CLUSTER_SERVER_NOT_MEMBER = _e(400, 10044, "server is not a member of the cluster")
PEER_REMAP = _e(503, 10075, "peer remap failed")

# -- streams: lifecycle and generic failures ---------------------------------------------------
STREAM_ASSIGNMENT = _e(500, 10048, "{err}")
STREAM_CREATE = _e(500, 10049, "{err}")
STREAM_DELETE = _e(500, 10050, "{err}")
STREAM_GENERAL = _e(500, 10051, "{err}")
STREAM_INVALID_CONFIG = _e(500, 10052, "{err}")
STREAM_LIMITS = _e(500, 10053, "{err}")
STREAM_MISMATCH = _e(400, 10056, "stream name in subject does not match request")
STREAM_MSG_DELETE_FAILED = _e(500, 10057, "{err}")
STREAM_NAME_EXIST = _e(400, 10058, "stream name already in use with a different configuration")
STREAM_NOT_FOUND = _e(404, 10059, "stream not found")
STREAM_REPLICAS_NOT_UPDATABLE = _e(400, 10061, "Replicas configuration can not be updated")
STREAM_RESTORE = _e(500, 10062, "restore failed: {err}")
STREAM_SNAPSHOT = _e(500, 10064, "snapshot failed: {err}")
STREAM_SUBJECT_OVERLAP = _e(400, 10065, "subjects overlap with an existing stream")
STREAM_UPDATE = _e(500, 10069, "{err}")
STREAM_REPLICAS_NOT_SUPPORTED = _e(500, 10074, "replicas > 1 not supported in non-clustered mode")
STREAM_INVALID = _e(500, 10096, "stream not valid")
STREAM_SEALED = _e(400, 10109, "invalid operation on sealed stream")
STREAM_PURGE_FAILED = _e(500, 10110, "{err}")
STREAM_ROLLUP_FAILED = _e(500, 10111, "{err}")
STREAM_INFO_MAX_SUBJECTS = _e(500, 10117, "subject details would exceed maximum allowed")
STREAM_OFFLINE = _e(500, 10118, "stream is offline")
STREAM_OFFLINE_REASON = _e(500, 10194, "stream is offline: {err}")
STREAM_MOVE_AND_SCALE = _e(400, 10123, "can not move and scale a stream in a single update")
STREAM_MOVE_IN_PROGRESS = _e(400, 10124, "stream move already in progress")
STREAM_NAME_CONTAINS_PATH_SEPARATORS = _e(400, 10128, "Stream name can not contain path separators")
STREAM_RECONFIGURE_NOT_IN_PROGRESS = _e(400, 10129, "stream reconfiguration not in progress")
STREAM_NAME_EXIST_RESTORE_FAILED = _e(400, 10130, "stream name already in use, cannot restore")
STREAM_TRANSFORM_INVALID_SOURCE = _e(400, 10155, "stream transform source: {err}")
STREAM_TRANSFORM_INVALID_DESTINATION = _e(400, 10156, "stream transform: {err}")
TEMP_STORAGE_FAILED = _e(500, 10072, "JetStream unable to open temp storage for restore")
RESTORE_SUBSCRIBE_FAILED = _e(
    500, 10042, "JetStream unable to subscribe to restore snapshot {subject}: {err}"
)
SNAPSHOT_DELIVER_SUBJECT_INVALID = _e(400, 10015, "deliver subject not valid")

# -- streams: mirrors, sources, external -------------------------------------------------------
STREAM_EXTERNAL_API_OVERLAP = _e(
    400, 10021, "stream external api prefix {prefix} must not overlap with {subject}"
)
STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS = _e(
    400, 10022, "stream external delivery prefix {prefix} overlaps with stream subject {subject}"
)
STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ = _e(
    400, 10024, "stream external delivery prefix {prefix} must not contain wildcards"
)
MIRROR_CONSUMER_SETUP_FAILED = _e(500, 10029, "{err}")
MIRROR_MAX_MESSAGE_SIZE_TOO_BIG = _e(400, 10030, "stream mirror must have max message size >= source")
MIRROR_WITH_SOURCES = _e(400, 10031, "stream mirrors can not also contain other sources")
MIRROR_WITH_START_SEQ_AND_TIME = _e(
    400, 10032, "stream mirrors can not have both start seq and start time configured"
)
MIRROR_WITH_SUBJECT_FILTERS = _e(400, 10033, "stream mirrors can not contain filtered subjects")
MIRROR_WITH_SUBJECTS = _e(400, 10034, "stream mirrors can not contain subjects")
SOURCE_CONSUMER_SETUP_FAILED = _e(500, 10045, "{err}")
SOURCE_MAX_MESSAGE_SIZE_TOO_BIG = _e(400, 10046, "stream source must have max message size >= target")
STREAM_MIRROR_NOT_UPDATABLE = _e(400, 10055, "stream mirror configuration can not be updated")
SOURCE_DUPLICATE_DETECTED = _e(400, 10140, "duplicate source configuration detected")
SOURCE_INVALID_STREAM_NAME = _e(400, 10141, "sourced stream name is invalid")
MIRROR_INVALID_STREAM_NAME = _e(400, 10142, "mirrored stream name is invalid")
MIRROR_WITH_FIRST_SEQ = _e(400, 10143, "stream mirrors can not have first sequence configured")
SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED = _e(
    400, 10144, "source with multiple subject transforms cannot also have a single subject filter"
)
SOURCE_INVALID_SUBJECT_FILTER = _e(400, 10145, "source transform source: {err}")
SOURCE_INVALID_TRANSFORM_DESTINATION = _e(400, 10146, "source transform: {err}")
SOURCE_OVERLAPPING_SUBJECT_FILTERS = _e(400, 10147, "source filters can not overlap")
MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED = _e(
    400, 10150, "mirror with multiple subject transforms cannot also have a single subject filter"
)
MIRROR_INVALID_SUBJECT_FILTER = _e(400, 10151, "mirror transform source: {err}")
MIRROR_OVERLAPPING_SUBJECT_FILTERS = _e(400, 10152, "mirror subject filters can not overlap")
MIRROR_INVALID_TRANSFORM_DESTINATION = _e(400, 10154, "mirror transform: {err}")

# -- publishing and messages -------------------------------------------------------------------
SEQUENCE_NOT_FOUND = _e(400, 10043, "sequence {seq} not found")
NO_MESSAGE_FOUND = _e(404, 10037, "no message found")
STREAM_MESSAGE_EXCEEDS_MAXIMUM = _e(400, 10054, "message size exceeds maximum allowed")
STREAM_NOT_MATCH = _e(400, 10060, "expected stream does not match")
STREAM_SEQUENCE_NOT_MATCH = _e(503, 10063, "expected stream sequence does not match")
STREAM_WRONG_LAST_MSG_ID = _e(400, 10070, "wrong last msg ID: {id}")
STREAM_WRONG_LAST_SEQUENCE = _e(400, 10071, "wrong last sequence: {seq}")
STREAM_STORE_FAILED = _e(503, 10077, "{err}")
STREAM_HEADER_EXCEEDS_MAXIMUM = _e(400, 10097, "header size exceeds maximum allowed of 64k")
STREAM_DUPLICATE_MESSAGE_CONFLICT = _e(409, 10158, "duplicate message id is in process")
STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_NOT_READY = _e(
    503, 10163, "expected last sequence per subject temporarily unavailable"
)
STREAM_WRONG_LAST_SEQUENCE_CONSTANT = _e(400, 10164, "wrong last sequence")
STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID = _e(
    400, 10193, "missing sequence for expected last sequence per subject"
)
MESSAGE_TTL_INVALID = _e(400, 10165, "invalid per-message TTL")
MESSAGE_TTL_DISABLED = _e(400, 10166, "per-message TTL is disabled")
STREAM_TOO_MANY_REQUESTS = _e(429, 10167, "too many requests")

# -- consumers: lifecycle ----------------------------------------------------------------------
CONSUMER_CREATE = _e(500, 10012, "{err}")
CONSUMER_NAME_EXIST = _e(400, 10013, "consumer name already in use")
CONSUMER_NOT_FOUND = _e(404, 10014, "consumer not found")
CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT = _e(
    400, 10016, "consumer expected to be durable but no durable name set in subject"
)
CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT = _e(
    400, 10017, "consumer name in subject does not match durable name in request"
)
CONSUMER_DURABLE_NAME_NOT_SET = _e(
    400, 10018, "consumer expected to be durable but a durable name was not set"
)
CONSUMER_EPHEMERAL_WITH_DURABLE_IN_SUBJECT = _e(
    400, 10019, "consumer expected to be ephemeral but detected a durable name set in subject"
)
CONSUMER_EPHEMERAL_WITH_DURABLE_NAME = _e(
    400, 10020, "consumer expected to be ephemeral but a durable name was set in request"
)
CONSUMER_CONFIG_REQUIRED = _e(400, 10078, "consumer config required")
CONSUMER_STORE_FAILED = _e(500, 10104, "error creating store for consumer: {err}")
CONSUMER_EXISTING_ACTIVE = _e(400, 10105, "consumer already exists and is still active")
CONSUMER_REPLACEMENT_WITH_DIFFERENT_NAME = _e(400, 10106, "consumer replacement durable config not the same")
CONSUMER_OFFLINE = _e(500, 10119, "consumer is offline")
CONSUMER_OFFLINE_REASON = _e(500, 10195, "consumer is offline: {err}")
CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH = _e(
    400, 10131, "Consumer create request did not match filtered subject from create subject"
)
CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH = _e(
    400, 10132, "Consumer Durable and Name have to be equal if both are provided"
)
CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED = _e(
    400, 10137, "consumer with multiple subject filters cannot use subject based API"
)
CONSUMER_ALREADY_EXISTS = _e(400, 10148, "consumer already exists")
CONSUMER_DOES_NOT_EXIST = _e(400, 10149, "consumer does not exist")

# -- consumers: config validation --------------------------------------------------------------
CONSUMER_DELIVER_TO_WILDCARDS = _e(400, 10079, "consumer deliver subject has wildcards")
CONSUMER_PUSH_MAX_WAITING = _e(400, 10080, "consumer in push mode can not set max waiting")
CONSUMER_DELIVER_CYCLE = _e(400, 10081, "consumer deliver subject forms a cycle")
CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED = _e(400, 10082, "consumer requires ack policy for max ack pending")
CONSUMER_SMALL_HEARTBEAT = _e(400, 10083, "consumer idle heartbeat needs to be >= 100ms")
CONSUMER_PULL_REQUIRES_ACK = _e(
    400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream"
)
CONSUMER_PULL_NOT_DURABLE = _e(400, 10085, "consumer in pull mode requires a durable name")
CONSUMER_PULL_WITH_RATE_LIMIT = _e(400, 10086, "consumer in pull mode can not have rate limit set")
CONSUMER_MAX_WAITING_NEGATIVE = _e(400, 10087, "consumer max waiting needs to be positive")
CONSUMER_HB_REQUIRES_PUSH = _e(400, 10088, "consumer idle heartbeat requires a push based consumer")
CONSUMER_FC_REQUIRES_PUSH = _e(400, 10089, "consumer flow control requires a push based consumer")
CONSUMER_DIRECT_REQUIRES_PUSH = _e(400, 10090, "consumer direct requires a push based consumer")
CONSUMER_DIRECT_REQUIRES_EPHEMERAL = _e(400, 10091, "consumer direct requires an ephemeral consumer")
CONSUMER_ON_MAPPED = _e(400, 10092, "consumer direct on a mapped consumer")
CONSUMER_FILTER_NOT_SUBSET = _e(
    400, 10093, "consumer filter subject is not a valid subset of the interest subjects"
)
CONSUMER_INVALID_POLICY = _e(400, 10094, "{err}")
CONSUMER_INVALID_SAMPLING = _e(400, 10095, "failed to parse consumer sampling configuration: {err}")
CONSUMER_WQ_REQUIRES_EXPLICIT_ACK = _e(400, 10098, "workqueue stream requires explicit ack")
CONSUMER_WQ_MULTIPLE_UNFILTERED = _e(
    400, 10099, "multiple non-filtered consumers not allowed on workqueue stream"
)
CONSUMER_WQ_CONSUMER_NOT_UNIQUE = _e(400, 10100, "filtered consumer not unique on workqueue stream")
CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL = _e(400, 10101, "consumer must be deliver all on workqueue stream")
CONSUMER_NAME_TOO_LONG = _e(400, 10102, "consumer name is too long, maximum allowed is {max}")
CONSUMER_BAD_DURABLE_NAME = _e(400, 10103, "durable name can not contain '.', '*', '>'")
CONSUMER_DESCRIPTION_TOO_LONG = _e(400, 10107, "consumer description is too long, maximum allowed is {max}")
CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS = _e(
    400, 10108, "consumer with flow control also needs heartbeats"
)
CONSUMER_INVALID_DELIVER_SUBJECT = _e(400, 10112, "invalid push consumer deliver subject")
CONSUMER_MAX_REQUEST_BATCH_NEGATIVE = _e(400, 10114, "consumer max request batch needs to be > 0")
CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL = _e(400, 10115, "consumer max request expires needs to be >= 1ms")
CONSUMER_MAX_DELIVER_BACKOFF = _e(400, 10116, "max deliver is required to be > length of backoff values")
CONSUMER_MAX_PENDING_ACK_EXCESS = _e(400, 10121, "consumer max ack pending exceeds system limit of {limit}")
CONSUMER_MAX_REQUEST_BATCH_EXCEEDED = _e(
    400, 10125, "consumer max request batch exceeds server limit of {limit}"
)
CONSUMER_REPLICAS_EXCEEDS_STREAM = _e(400, 10126, "consumer config replica count exceeds parent stream")
CONSUMER_NAME_CONTAINS_PATH_SEPARATORS = _e(400, 10127, "Consumer name can not contain path separators")
CONSUMER_REPLICAS_SHOULD_MATCH_STREAM = _e(
    400, 10134, "consumer config replicas must match interest retention stream's replicas"
)
CONSUMER_METADATA_LENGTH = _e(400, 10135, "consumer metadata exceeds maximum size of {limit}")
CONSUMER_DUPLICATE_FILTER_SUBJECTS = _e(
    400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified"
)
CONSUMER_OVERLAPPING_SUBJECT_FILTERS = _e(400, 10138, "consumer subject filters cannot overlap")
CONSUMER_EMPTY_FILTER = _e(400, 10139, "consumer filter in FilterSubjects cannot be empty")
CONSUMER_INACTIVE_THRESHOLD_EXCESS = _e(
    400, 10153, "consumer inactive threshold exceeds system limit of {limit}"
)
CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP = _e(
    400, 10159, "Setting PriorityPolicy requires at least one PriorityGroup to be set"
)
CONSUMER_INVALID_PRIORITY_GROUP = _e(400, 10160, "Provided priority group does not exist for this consumer")
CONSUMER_EMPTY_GROUP_NAME = _e(400, 10161, "Group name cannot be an empty string")
CONSUMER_INVALID_GROUP_NAME = _e(
    400,
    10162,
    "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters",
)
CONSUMER_PUSH_WITH_PRIORITY_GROUP = _e(400, 10178, "priority groups can not be used with push consumers")
CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE = _e(
    400, 10196, "consumer can not have priority groups when policy is none"
)
CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY = _e(
    400, 10197, "PinnedTTL cannot be set when PriorityPolicy is none"
)
# 2.12 split these out of 10094; jetpy answers with them because they name the rule exactly.
CONSUMER_ACK_POLICY_INVALID = _e(400, 10181, "consumer ack policy invalid")
CONSUMER_REPLAY_POLICY_INVALID = _e(400, 10182, "consumer replay policy invalid")
CONSUMER_ACK_WAIT_NEGATIVE = _e(400, 10183, "consumer ack wait needs to be positive")
CONSUMER_BACKOFF_NEGATIVE = _e(400, 10184, "consumer backoff needs to be positive")

# -- stream templates (removed in 2.14; kept so old clients get the old answers) ----------------
TEMPLATE_NAME_NOT_MATCH_SUBJECT = _e(400, 10073, "template name in subject does not match request")
STREAM_TEMPLATE_CREATE = _e(500, 10066, "{err}")
STREAM_TEMPLATE_DELETE = _e(500, 10067, "{err}")
STREAM_TEMPLATE_NOT_FOUND = _e(404, 10068, "template not found")


# jetpy's name for a failure inside the server that no specific row describes; nats-server answers
# those with its generic stream error (10051, "{err}").
INTERNAL = STREAM_GENERAL


def _collect() -> tuple[dict[int, ErrorCode], dict[int, str]]:
    table: dict[int, ErrorCode] = {}
    names: dict[int, str] = {}
    for name, value in globals().items():
        if not (isinstance(value, ErrorCode) and name.isupper()):
            continue
        if value.err_code in table:
            # an alias (INTERNAL) may share a row; two different rows may not share a code
            assert table[value.err_code] is value, f"duplicate err_code {value.err_code} ({name})"
            continue
        table[value.err_code] = value
        names[value.err_code] = name
    return table, names


BY_ERR_CODE, NAMES = _collect()
"""Every table row keyed by ``err_code``, and the constant name of each (for logs and tests)."""
