"""``$JS.API.STREAM.SNAPSHOT`` and ``STREAM.RESTORE``: stream backup and restore.

Answers every request as nats-server checks it (an empty body is 10003, an unknown stream 10059,
a body that does not decode 10025, a snapshot without a valid deliver subject 10015). Taking and
restoring the snapshot itself is not built yet: a valid request is refused with nats-server's
snapshot/restore error saying so, never left unanswered and never half done.
Must not know: dispatch and the envelope (the router's).
"""

from __future__ import annotations

from typing import Any

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import StreamRestoreResponse, StreamSnapshotRequest, StreamSnapshotResponse
from jetpy.jetstream.api.requests import decode_request, is_empty_request
from jetpy.jetstream.api.router import Route
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.registry import StreamRegistry
from jetpy.subjects import is_valid_literal_subject

__all__ = ["SnapshotApi"]

NOT_BUILT = "not supported by this server yet"


class SnapshotApi:
    def __init__(self, registry: StreamRegistry) -> None:
        self.registry = registry

    def routes(self) -> dict[str, Route[Any]]:
        return {
            "STREAM.SNAPSHOT": Route(StreamSnapshotResponse, self.snapshot, 1),
            "STREAM.RESTORE": Route(StreamRestoreResponse, self.restore, 1),
        }

    def snapshot(self, args: list[str], hdr: bytes, body: bytes) -> StreamSnapshotResponse:
        if is_empty_request(body):
            raise ApiError.of(E.BAD_REQUEST)
        self.registry.require(args[0])
        req = decode_request(body, StreamSnapshotRequest)
        if not is_valid_literal_subject(req.deliver_subject):
            raise ApiError.of(E.SNAPSHOT_DELIVER_SUBJECT_INVALID)
        raise ApiError.of(E.STREAM_SNAPSHOT, err=NOT_BUILT)

    def restore(self, args: list[str], hdr: bytes, body: bytes) -> StreamRestoreResponse:
        if is_empty_request(body):
            raise ApiError.of(E.BAD_REQUEST)
        raise ApiError.of(E.STREAM_RESTORE, err=NOT_BUILT)
