"""``$JS.API.STREAM.SNAPSHOT`` and ``STREAM.RESTORE``: stream backup and restore.

Checks each request as nats-server does, in its order, and starts the work that goes on after
the answer: a snapshot is taken at once and sent by a ``SnapshotSender`` (``snapshots.py``), a
restore listens on its deliver subject through a ``RestoreSession`` (``restores.py``). Neither
holds the API: other requests are answered while a backup or a restore runs.

Snapshot: an empty body is 10003, an unknown stream 10059, a body that does not decode 10025, a
deliver subject that is not a valid subject 10015; ``chunk_size`` and ``window_size`` are clamped
as nats-server clamps them; ``jsck`` (check the messages first) is always done, as every record
is verified when it is read. Restore: an empty body is 10003, one that does not decode 10025, a
config without a name takes the subject's, another name is 10056, a stream (or a restore) of
that name already there is 10130; the config is then checked as a stream's config is (a sealed
stream may be restored) and its ``max_bytes`` must fit the server's limits (10028/10047).
Must not know: dispatch and the envelope (the router's), the archive's bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import (
    StreamCreateResponse,
    StreamRestoreRequest,
    StreamRestoreResponse,
    StreamSnapshotRequest,
    StreamSnapshotResponse,
)
from jetpy.jetstream.api.requests import decode_request, is_empty_request
from jetpy.jetstream.api.router import Route
from jetpy.jetstream.api.streams import StreamWatcher
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.info import stream_info, stream_state
from jetpy.jetstream.models import StreamConfig, encode
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.restores import RestoreSession
from jetpy.jetstream.snapshots import SnapshotSender, Taken, take
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.unbuilt import check_stream_built
from jetpy.jetstream.validate import check_stream_config
from jetpy.subjects import is_valid_literal_subject

__all__ = ["SnapshotApi", "snapshot_request"]


def snapshot_request(body: bytes) -> StreamSnapshotRequest:
    """A snapshot request's body, decoded and checked (10025, 10015), once its stream is known."""
    req = decode_request(body, StreamSnapshotRequest)
    if not is_valid_literal_subject(req.deliver_subject):
        raise ApiError.of(E.SNAPSHOT_DELIVER_SUBJECT_INVALID)
    return req


class SnapshotApi:
    def __init__(
        self,
        registry: StreamRegistry,
        consumers: ConsumerManager,
        bus: MessageBus,
        watcher: StreamWatcher | None = None,
    ) -> None:
        self.registry = registry
        self.consumers = consumers
        self.bus = bus
        self.watcher = watcher
        self._senders: set[asyncio.Task[None]] = set()
        self._restores: dict[str, RestoreSession] = {}

    def routes(self) -> dict[str, Route[Any]]:
        return {
            "STREAM.SNAPSHOT": Route(StreamSnapshotResponse, self.snapshot, 1),
            "STREAM.RESTORE": Route(StreamRestoreResponse, self.restore, 1),
        }

    def snapshot(self, args: list[str], hdr: bytes, body: bytes) -> StreamSnapshotResponse:
        if is_empty_request(body):
            raise ApiError.of(E.BAD_REQUEST)
        stream = self.registry.require(args[0])
        req = snapshot_request(body)
        return self.send(stream, req, lambda: take(stream, None if req.no_consumers else self.consumers))

    def send(
        self, stream: Stream, req: StreamSnapshotRequest, taking: Callable[[], Taken]
    ) -> StreamSnapshotResponse:
        """Take the snapshot (``taking``) now and send it to the request's deliver subject in
        the background; the answer to the request."""
        try:
            taken = taking()
        except ApiError:
            raise
        except Exception as e:  # an export the store cannot take (an I/O error)
            raise ApiError.of(E.STREAM_SNAPSHOT, err=str(e)) from e
        sender = SnapshotSender(
            self.bus, stream.name, taken, req.deliver_subject, req.chunk_size, req.window_size
        )
        task = asyncio.get_running_loop().create_task(sender.run(), name=f"snapshot-{stream.name}")
        self._senders.add(task)
        task.add_done_callback(self._senders.discard)
        # the state the snapshot holds, as STREAM.INFO words it (the stream may have moved on)
        return StreamSnapshotResponse(config=stream.config, state=stream_state(stream))

    def restore(self, args: list[str], hdr: bytes, body: bytes) -> StreamRestoreResponse:
        if is_empty_request(body):
            raise ApiError.of(E.BAD_REQUEST)
        req = decode_request(body, StreamRestoreRequest)
        name = args[0]
        cfg0 = req.config if req.config.name else msgspec.structs.replace(req.config, name=name)
        if cfg0.name != name:
            raise ApiError.of(E.STREAM_MISMATCH)
        self.registry.refuse_offline(name)
        if self.registry.get(name) is not None or name in self._restores:
            raise ApiError.of(E.STREAM_NAME_EXIST_RESTORE_FAILED)
        cfg = check_stream_config(cfg0)
        check_stream_built(cfg)
        self.registry.resources.check_create(cfg)
        session = self.start_restore(cfg, self._restored, self.consumers)
        return StreamRestoreResponse(deliver_subject=session.deliver)

    def restoring(self, name: str) -> bool:
        return name in self._restores

    def start_restore(
        self,
        cfg: StreamConfig,
        answer: Callable[[str, Stream | ApiError], None],
        consumers: ConsumerManager | None,
    ) -> RestoreSession:
        """A restore into ``cfg`` listening on its deliver subject (abandoned if the server
        stops); ``answer`` gives the final reply (see ``RestoreSession``)."""
        session = RestoreSession(self.bus, self.registry, consumers, cfg, answer, self._restore_done)
        self._restores[cfg.name] = session
        session.start()
        return session

    def _restored(self, reply: str, result: Stream | ApiError) -> None:
        """A restore's final reply: what STREAM.CREATE answers, or the error."""
        if isinstance(result, ApiError):
            resp = StreamCreateResponse.failure(result)
        else:
            if self.watcher is not None:  # a restored mirror or source copies on from its state
                self.watcher.started(result)
            resp = StreamCreateResponse.of(stream_info(result), did_create=False)
        self.bus.publish(reply, None, encode(resp))

    def _restore_done(self, session: RestoreSession) -> None:
        if self._restores.get(session.name) is session:
            del self._restores[session.name]

    async def stop(self) -> None:
        """The server is going: snapshots stop, restores are abandoned (nothing half created)."""
        for task in list(self._senders):
            task.cancel()
        for session in list(self._restores.values()):
            await session.stop()
        if self._senders:
            await asyncio.gather(*self._senders, return_exceptions=True)
