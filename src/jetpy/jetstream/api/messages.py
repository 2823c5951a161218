"""Request and response documents of the ``$JS.API`` endpoints, on top of ``models``.

Owns the body of every ``$JS.API.STREAM.*`` / ``CONSUMER.*`` / ``INFO`` request and response,
with nats-server's field names and ``type`` strings. Knows nothing of routing, handlers, stores or
validation rules.

A Go response embeds its body by pointer (``ApiResponse`` + ``*StreamInfo``), so an error response
carries only ``type`` and ``error`` (plus fields Go always writes, like paging). The Structs here are
flat to match: body fields default to ``None``/empty and are omitted then. Build success responses
with ``XxxResponse.of(info)`` and failures with ``XxxResponse.failure(api_error)``.
"""

from __future__ import annotations

from typing import Any, Final, Self

import msgspec

from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import (
    AccountInfo,
    AccountLimits,
    AccountTier,
    ApiErrorBody,
    ApiStats,
    ClusterInfo,
    ConsumerAction,
    ConsumerConfig,
    ConsumerInfo,
    PriorityGroupState,
    SequenceInfo,
    StoredMessage,
    StreamAlternate,
    StreamConfig,
    StreamInfo,
    StreamSourceInfo,
    StreamState,
    _always,
    _always_list,
    _Wire,
)

__all__ = [
    "TYPE_PREFIX",
    "AccountInfoResponse",
    "ConsumerCreateRequest",
    "ConsumerCreateResponse",
    "ConsumerDeleteResponse",
    "ConsumerInfoResponse",
    "ConsumerListRequest",
    "ConsumerListResponse",
    "ConsumerNamesRequest",
    "ConsumerNamesResponse",
    "StreamConfigRequest",
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
    "StreamNamesRequest",
    "StreamNamesResponse",
    "StreamPurgeRequest",
    "StreamPurgeResponse",
    "StreamUpdateResponse",
]

# ------------------------------------------------------------------------------------------------
# Requests
# ------------------------------------------------------------------------------------------------


class StreamConfigRequest(StreamConfig, frozen=True):
    """``STREAM.CREATE`` / ``STREAM.UPDATE`` body: the config plus the request-scoped flag."""

    pedantic: bool = False

    def config(self) -> StreamConfig:
        fields = msgspec.structs.asdict(self)
        del fields["pedantic"]
        return StreamConfig(**fields)


class StreamInfoRequest(_Wire, frozen=True):
    deleted_details: bool = False
    subjects_filter: str = ""
    offset: int = 0


class StreamNamesRequest(_Wire, frozen=True):
    offset: int = 0
    subject: str = ""


class StreamListRequest(_Wire, frozen=True):
    offset: int = 0
    subject: str = ""


class StreamPurgeRequest(_Wire, frozen=True):
    filter: str = ""
    seq: int = 0  # purge everything below seq (exclusive with keep)
    keep: int = 0


class StreamMsgGetRequest(_Wire, frozen=True):
    seq: int = 0
    last_by_subj: str = ""
    next_by_subj: str = ""


class StreamMsgDeleteRequest(_Wire, frozen=True):
    seq: int = _always(0)
    no_erase: bool = False


class ConsumerCreateRequest(_Wire, frozen=True):
    stream_name: str = _always("")
    config: ConsumerConfig = _always(ConsumerConfig())
    action: ConsumerAction = _always("")
    pedantic: bool = False


class ConsumerNamesRequest(_Wire, frozen=True):
    offset: int = 0


class ConsumerListRequest(_Wire, frozen=True):
    offset: int = 0


# ------------------------------------------------------------------------------------------------
# Responses. Flat, like Go's embedded structs; body fields are None in an error response.
# ------------------------------------------------------------------------------------------------

TYPE_PREFIX: Final = "io.nats.jetstream.api.v1."


class _Response(_Wire, frozen=True):
    type: str = _always("")
    error: ApiErrorBody | None = None

    @classmethod
    def failure(cls, err: ApiError) -> Self:
        """The response carrying only ``type`` and ``error`` (and any always-present fields)."""
        return cls(error=ApiErrorBody.of(err))


class _StreamInfoBody(_Response, frozen=True):
    config: StreamConfig | None = None
    created: str | None = None
    state: StreamState | None = None
    domain: str = ""
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] = msgspec.field(default_factory=list)
    alternates: list[StreamAlternate] = msgspec.field(default_factory=list)
    ts: str | None = None

    @classmethod
    def of(cls, info: StreamInfo, **extra: Any) -> Self:
        return cls(**msgspec.structs.asdict(info), **extra)

    def info(self) -> StreamInfo:
        """The embedded StreamInfo (for clients and tests)."""
        if self.error is not None:
            raise self.error.to_error()
        fields = {f: getattr(self, f) for f in StreamInfo.__struct_fields__}
        return StreamInfo(**{k: v for k, v in fields.items() if v is not None})


class StreamCreateResponse(_StreamInfoBody, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_create_response")
    did_create: bool = False


class StreamUpdateResponse(_StreamInfoBody, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_update_response")


class StreamInfoResponse(_StreamInfoBody, frozen=True):
    """Paged because ``state.subjects`` may be (``total/offset/limit`` describe that map)."""

    type: str = _always(TYPE_PREFIX + "stream_info_response")
    total: int = _always(0)
    offset: int = _always(0)
    limit: int = _always(0)


class StreamNamesResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_names_response")
    total: int = _always(0)
    offset: int = _always(0)
    limit: int = _always(0)
    streams: list[str] | None = _always(None)  # nats-server writes null when there are none


class StreamListResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_list_response")
    total: int = _always(0)
    offset: int = _always(0)
    limit: int = _always(0)
    streams: list[StreamInfo] = _always_list()
    missing: list[str] = msgspec.field(default_factory=list)


class StreamDeleteResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_delete_response")
    success: bool = False


class StreamPurgeResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_purge_response")
    success: bool = False
    purged: int = _always(0)


class StreamMsgGetResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_msg_get_response")
    message: StoredMessage | None = None


class StreamMsgDeleteResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "stream_msg_delete_response")
    success: bool = False


class _ConsumerInfoBody(_Response, frozen=True):
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
    def of(cls, info: ConsumerInfo, **extra: Any) -> Self:
        return cls(**msgspec.structs.asdict(info), **extra)

    def info(self) -> ConsumerInfo:
        if self.error is not None:
            raise self.error.to_error()
        fields = {f: getattr(self, f) for f in ConsumerInfo.__struct_fields__}
        return ConsumerInfo(**{k: v for k, v in fields.items() if v is not None})


class ConsumerCreateResponse(_ConsumerInfoBody, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_create_response")


class ConsumerInfoResponse(_ConsumerInfoBody, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_info_response")


class ConsumerNamesResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_names_response")
    total: int = _always(0)
    offset: int = _always(0)
    limit: int = _always(0)
    consumers: list[str] = _always_list()


class ConsumerListResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_list_response")
    total: int = _always(0)
    offset: int = _always(0)
    limit: int = _always(0)
    consumers: list[ConsumerInfo] = _always_list()
    missing: list[str] = msgspec.field(default_factory=list)


class ConsumerDeleteResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "consumer_delete_response")
    success: bool = False


class AccountInfoResponse(_Response, frozen=True):
    type: str = _always(TYPE_PREFIX + "account_info_response")
    memory: int | None = None
    storage: int | None = None
    reserved_memory: int | None = None
    reserved_storage: int | None = None
    streams: int | None = None
    consumers: int | None = None
    limits: AccountLimits | None = None
    domain: str = ""
    api: ApiStats | None = None
    tiers: dict[str, AccountTier] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, info: AccountInfo) -> AccountInfoResponse:
        return cls(**msgspec.structs.asdict(info))

    def info(self) -> AccountInfo:
        if self.error is not None:
            raise self.error.to_error()
        fields = {f: getattr(self, f) for f in AccountInfo.__struct_fields__}
        return AccountInfo(**{k: v for k, v in fields.items() if v is not None})
