"""Request and response documents of the ``$JS.API`` endpoints, on top of ``models``.

Owns the body of every ``$JS.API.STREAM.*`` / ``CONSUMER.*`` / ``INFO`` request and response,
with nats-server's field names, field order and ``type`` strings: these are what the handlers
return and the router encodes. Knows nothing of routing, handlers, stores or validation rules.

A Go response embeds its parts (``ApiResponse`` = ``type`` + ``error``, then ``ApiPaged`` for the
paged ones, then a pointer to its body such as ``*StreamInfo``), so an error response carries
only ``type`` and ``error`` plus the fields Go always writes (paging, ``purged``, the names and
lists). The Structs here are flat to match: body fields default to ``None``/empty and are omitted
then. Build answers with ``XxxResponse.of(...)`` or the fields, failures with
``XxxResponse.failure(api_error)``.

Requests are decoded with nats-server's Go-decoder rules (``api/requests.decode_request``):
unsigned integers refuse negative numbers, strings and booleans refuse other JSON types, and
``null`` means the field's zero value.
"""

from __future__ import annotations

from typing import Any, Final, Self

import msgspec

from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import (
    ZERO_TIME,
    AccountInfo,
    AccountLimits,
    ApiErrorBody,
    ClusterInfo,
    ConsumerConfig,
    ConsumerInfo,
    Int,
    JetStreamApiStats,
    PriorityGroupState,
    SequenceInfo,
    StoredMessage,
    StreamConfig,
    StreamInfo,
    StreamSourceInfo,
    StreamState,
    Uint64,
    _always,
    _always_list,
    _Wire,
)

__all__ = [
    "TYPE_PREFIX",
    "AccountInfoResponse",
    "ApiResponse",
    "ConsumerCreateRequest",
    "ConsumerCreateResponse",
    "ConsumerDeleteResponse",
    "ConsumerInfoResponse",
    "ConsumerListResponse",
    "ConsumerNamesResponse",
    "ConsumerPauseRequest",
    "ConsumerPauseResponse",
    "ConsumerUnpinRequest",
    "ConsumerUnpinResponse",
    "LeaderStepdownRequest",
    "MetaLeaderStepdownResponse",
    "MetaServerRemoveRequest",
    "MetaServerRemoveResponse",
    "PagedRequest",
    "StepdownPlacement",
    "StreamCreateResponse",
    "StreamDeleteResponse",
    "StreamInfoRequest",
    "StreamInfoResponse",
    "StreamListRequest",
    "StreamListResponse",
    "StreamMsgDeleteRequest",
    "StreamMsgDeleteResponse",
    "StreamMsgGetRequest",
    "StreamMsgGetResponse",
    "StreamNamesResponse",
    "StreamPurgeRequest",
    "StreamPurgeResponse",
    "StreamRemovePeerRequest",
    "StreamRestoreRequest",
    "StreamRestoreResponse",
    "StreamSnapshotRequest",
    "StreamSnapshotResponse",
    "StreamUpdateResponse",
]

# ------------------------------------------------------------------------------------------------
# Requests (STREAM.CREATE/UPDATE bodies are a StreamConfig: ``requests.as_stream_config``)
# ------------------------------------------------------------------------------------------------

UInt = Uint64
"""A field Go decodes into a ``uint64``: a negative number, or one past 2**64 - 1, is invalid JSON."""


class PagedRequest(_Wire, frozen=True):
    """Go's ``ApiPagedRequest`` (CONSUMER.NAMES/LIST). ``offset`` is a Go ``int``: negative
    offsets decode, and the handlers read them as 0 (nats-server 2.9 panics on them)."""

    offset: Int = 0


class StreamInfoRequest(PagedRequest, frozen=True):
    """STREAM.INFO; ``offset`` pages ``state.subjects``."""

    deleted_details: bool = False
    subjects_filter: str = ""


class StreamListRequest(PagedRequest, frozen=True):
    """STREAM.NAMES and STREAM.LIST: streams with a subject overlapping ``subject``."""

    subject: str = ""


class StreamPurgeRequest(_Wire, frozen=True):
    filter: str = ""
    seq: UInt = 0  # purge everything below seq (exclusive with keep)
    keep: UInt = 0


class StreamMsgGetRequest(_Wire, frozen=True):
    """STREAM.MSG.GET (nats-server's ``JSApiMsgGetRequest``): ``batch`` and ``max_bytes`` are
    the direct get's, refused here (10003) as nats-server refuses them; ``no_hdr`` leaves the
    message's headers out."""

    seq: UInt = 0
    last_by_subj: str = ""
    next_by_subj: str = ""
    batch: Int = 0
    max_bytes: Int = 0
    no_hdr: bool = False


class StreamMsgDeleteRequest(_Wire, frozen=True):
    seq: UInt = 0
    no_erase: bool = False


class StepdownPlacement(_Wire, frozen=True):
    """Where a stepping-down leader's successor must be (Go's ``Placement`` as a stepdown
    request reads it): a server by name, or any in a cluster or carrying every tag."""

    cluster: str = ""
    tags: list[str] = msgspec.field(default_factory=list)
    preferred: str = ""


class LeaderStepdownRequest(_Wire, frozen=True):
    """``STREAM.LEADER.STEPDOWN``, ``CONSUMER.LEADER.STEPDOWN`` and ``META.LEADER.STEPDOWN``."""

    placement: StepdownPlacement | None = None


class StreamRemovePeerRequest(_Wire, frozen=True):
    """``STREAM.PEER.REMOVE``: the server (by name, or its Raft member id) to take the stream off."""

    peer: str = ""


class MetaServerRemoveRequest(_Wire, frozen=True):
    """``SERVER.REMOVE``: the server to take out of the cluster's JetStream, by name (``peer``)
    or by its meta group member id (``peer_id``)."""

    peer: str = ""
    peer_id: str = ""


class ConsumerCreateRequest(_Wire, frozen=True):
    """CONSUMER.CREATE / DURABLE.CREATE. ``action`` and ``pedantic`` are 2.10+ fields that 2.9
    ignores whatever their JSON type, so any value decodes: ``action`` means something only as
    ``"create"`` or ``"update"``, ``pedantic`` when truthy."""

    stream_name: str = ""
    config: ConsumerConfig = _always(ConsumerConfig())
    action: Any = ""
    pedantic: Any = False


# ------------------------------------------------------------------------------------------------
# Responses. Flat, like Go's embedded structs; body fields are None in an error response.
# ------------------------------------------------------------------------------------------------

TYPE_PREFIX: Final = "io.nats.jetstream.api.v1."


class ApiResponse(_Wire, frozen=True):
    """Go's ``ApiResponse``, first in every response: its ``type`` and, on failure, ``error``."""

    type: str = _always("")
    error: ApiErrorBody | None = None

    @classmethod
    def failure(cls, err: ApiError) -> Self:
        """The response carrying only ``type`` and ``error`` (and any always-present fields)."""
        return cls(error=ApiErrorBody.of(err))


class _Paged(ApiResponse, frozen=True):
    """Go's ``ApiPaged``, written even in an error response."""

    total: int = _always(0)
    offset: int = _always(0)
    limit: int = _always(0)


class StreamCreateResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_create_response")
    config: StreamConfig | None = None
    created: str | None = None
    state: StreamState | None = None
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] = msgspec.field(default_factory=list)
    did_create: bool = False

    @classmethod
    def of(cls, info: StreamInfo, *, did_create: bool) -> StreamCreateResponse:
        return cls(
            config=info.config,
            created=info.created,
            state=info.state,
            cluster=info.cluster,
            mirror=info.mirror,
            sources=info.sources,
            did_create=did_create,
        )


class StreamUpdateResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_update_response")
    config: StreamConfig | None = None
    created: str | None = None
    state: StreamState | None = None
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] = msgspec.field(default_factory=list)

    @classmethod
    def of(cls, info: StreamInfo) -> StreamUpdateResponse:
        return cls(
            config=info.config,
            created=info.created,
            state=info.state,
            cluster=info.cluster,
            mirror=info.mirror,
            sources=info.sources,
        )


class StreamInfoResponse(_Paged, frozen=True):
    """Paged because ``state.subjects`` may be (``total/offset/limit`` describe that map)."""

    type: str = _always(TYPE_PREFIX + "stream_info_response")
    config: StreamConfig | None = None
    created: str | None = None
    state: StreamState | None = None
    domain: str = ""  # the server's JetStream domain (STREAM.INFO names it; create and update do not)
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] = msgspec.field(default_factory=list)

    @classmethod
    def of(cls, info: StreamInfo, *, total: int = 0, offset: int = 0, limit: int = 0) -> StreamInfoResponse:
        return cls(
            total=total,
            offset=offset,
            limit=limit,
            config=info.config,
            created=info.created,
            state=info.state,
            domain=info.domain,
            cluster=info.cluster,
            mirror=info.mirror,
            sources=info.sources,
        )


class StreamNamesResponse(_Paged, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_names_response")
    streams: list[str] | None = _always(None)  # nats-server writes null when there are none


class StreamListResponse(_Paged, frozen=True):
    """``offline``: streams that cannot be served (their files could not be read back), name ->
    why, also named in ``missing`` for older tools (nats-server 2.12's fields for offline assets)."""

    type: str = _always(TYPE_PREFIX + "stream_list_response")
    streams: list[StreamInfo] = _always_list()
    missing: list[str] | None = None
    offline: dict[str, str] | None = None


class StreamDeleteResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_delete_response")
    success: bool = False


class StreamPurgeResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_purge_response")
    success: bool = False
    purged: int = _always(0)


class StreamMsgGetResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_msg_get_response")
    message: StoredMessage | None = None


class StreamMsgDeleteResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_msg_delete_response")
    success: bool = False


class _ConsumerInfoBody(ApiResponse, frozen=True):
    """``ConsumerInfo``'s fields, in its order, each absent in an error response."""

    stream_name: str | None = None
    name: str | None = None
    created: str | None = None
    config: ConsumerConfig | None = None
    delivered: SequenceInfo | None = None
    ack_floor: SequenceInfo | None = None
    num_ack_pending: int | None = None
    num_redelivered: int | None = None
    num_waiting: int | None = None
    num_pending: int | None = None
    cluster: ClusterInfo | None = None
    push_bound: bool = False
    paused: bool = False
    pause_remaining: int = 0
    ts: str | None = None
    priority_groups: list[PriorityGroupState] = msgspec.field(default_factory=list)

    @classmethod
    def of(cls, info: ConsumerInfo) -> Self:
        return cls(**msgspec.structs.asdict(info))


class ConsumerCreateResponse(_ConsumerInfoBody, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_create_response")


class ConsumerInfoResponse(_ConsumerInfoBody, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_info_response")


class ConsumerNamesResponse(_Paged, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_names_response")
    consumers: list[str] = _always_list()


class ConsumerListResponse(_Paged, frozen=True):
    """``offline``: consumers that cannot be served (their files are damaged), name -> why, also
    named in ``missing`` for older tools (nats-server 2.12's fields for offline assets)."""

    type: str = _always(TYPE_PREFIX + "consumer_list_response")
    consumers: list[ConsumerInfo] = _always_list()
    missing: list[str] | None = None
    offline: dict[str, str] | None = None


class ConsumerDeleteResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_delete_response")
    success: bool = False


class ConsumerPauseRequest(_Wire, frozen=True):
    """``CONSUMER.PAUSE``: pause until ``pause_until`` (absent, ``null`` or Go's zero time:
    resume). nats-server decodes it strictly: an unknown field is invalid JSON."""

    pause_until: str | None = None


class ConsumerPauseResponse(ApiResponse, frozen=True):
    """The pause as it is now: ``paused`` and ``pause_until`` are written even in an error
    response (``false`` and Go's zero time), ``pause_remaining`` (ns) only while paused."""

    type: str = _always(TYPE_PREFIX + "consumer_pause_response")
    paused: bool = _always(False)
    pause_until: str = _always(ZERO_TIME)
    pause_remaining: int = 0


class ConsumerUnpinRequest(_Wire, frozen=True):
    """``CONSUMER.UNPIN``: the priority group whose pin is released."""

    group: str = ""


class ConsumerUnpinResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_unpin_response")


class AccountInfoResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "account_info_response")
    memory: int | None = None
    storage: int | None = None
    reserved_memory: int | None = None
    reserved_storage: int | None = None
    streams: int | None = None
    consumers: int | None = None
    limits: AccountLimits | None = None
    domain: str = ""
    api: JetStreamApiStats | None = None

    @classmethod
    def of(cls, info: AccountInfo) -> AccountInfoResponse:
        return cls(**msgspec.structs.asdict(info))


class StreamLeaderStepdownResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_leader_stepdown_response")
    success: bool = False


class StreamRemovePeerResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_remove_peer_response")
    success: bool = False


class MetaLeaderStepdownResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "meta_leader_stepdown_response")
    success: bool = False


class MetaServerRemoveResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "meta_server_remove_response")
    success: bool = False


class ConsumerLeaderStepdownResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_leader_stepdown_response")
    success: bool = False


class StreamSnapshotResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_snapshot_response")
    config: StreamConfig | None = None
    state: StreamState | None = None


class StreamRestoreResponse(ApiResponse, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_restore_response")
    deliver_subject: str = _always("")  # written even in an error response


class StreamRestoreRequest(_Wire, frozen=True):
    """``STREAM.RESTORE``: the stream's config and the state the backup holds (``backup.json``)."""

    config: StreamConfig = StreamConfig()
    state: StreamState = StreamState()


class StreamSnapshotRequest(_Wire, frozen=True):
    deliver_subject: str = ""
    no_consumers: bool = False
    chunk_size: Int = 0
    window_size: Int = 0  # nats-server 2.14
    jsck: bool = False
