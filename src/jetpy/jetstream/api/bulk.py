"""``$JS.API.JETPY.BULK.<stream>``: the bulk read, jetpy's API for reading a stream fast.

Owns the request's checks, the replies (the format is ``protocol/bulk.py``'s, written here from
the store's ``read_records``) and their pacing: a request is served one message of at most
``CHUNK_BYTES`` of records per turn of the event loop, requests taking turns, so a reader of a
large stream never holds other clients up for more than one chunk's work. The store hands out
its records as they are (the file store: straight from its block files), so this costs the
server a few tens of nanoseconds per message, not the microseconds of building a reply per
message as direct gets do.

Where records are checked: not here. Each record carries the CRC-32 the store computed when
the message was written, and the reader checks every one (the Spark source does, and so does
``protocol.bulk.decode_chunk``): that covers the disk, this server's memory and the network
with one check at the far end, which is a stronger guarantee than a check here. A damaged
record therefore fails the read that meets it, naming its sequence; it is never skipped.

Any stream can be read, whatever its ``allow_direct`` (like ``STREAM.MSG.GET``). A caller with
permissions must be allowed to read everything the request reads, as for a consumer: its
filters, else every subject the stream stores (``jetstream.access``). Failures are API error
replies (JSON, ``BulkReadResponse``): 10059 for a stream that does not exist or is deleted
while being read, 10194 for an offline one (its files could not be read back), 10003/10025 for
a bad request, 10403 for subjects the caller may not read, 10051 for a store that cannot read.
Must not know: stores' internals, the network (replies go through the bus).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import msgspec

from jetpy import subjects
from jetpy.jetstream import errors as E
from jetpy.jetstream.access import check_read, stored
from jetpy.jetstream.api.messages import ApiResponse
from jetpy.jetstream.api.requests import as_request, decode_body
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import Int, Uint64, _always, encode
from jetpy.jetstream.ports import Caller, MessageBus
from jetpy.jetstream.stream import Stream
from jetpy.protocol.bulk import (
    BULK_API,
    DEFAULT_MAX_BYTES,
    FLAG_LAST,
    MAX_BYTES,
    RESPONSE_TYPE,
    encode_header,
    offsets_bytes,
)
from jetpy.store.base import StoreError

__all__ = [
    "BULK_SUBJECTS",
    "CHUNK_BYTES",
    "DOMAIN_BULK_SUBJECTS",
    "BulkRead",
    "BulkReadRequest",
    "BulkReadResponse",
]

log = logging.getLogger("jetpy.jetstream")

BULK_SUBJECTS: Final = f"$JS.API.{BULK_API}.>"
DOMAIN_BULK_SUBJECTS: Final = "$JS.{}.API." + BULK_API + ".>"  # .format(domain)

CHUNK_BYTES: Final = 1024 * 1024
"""Records per reply message, and so the work one turn of the loop does for a reader: the
default ``max_payload``, ~7,000 messages of 100 bytes, well under a millisecond."""


class BulkReadRequest(msgspec.Struct, frozen=True):
    """The request body (``protocol/bulk.py``); Go's decoding rules, unknown fields ignored."""

    seq: Uint64 = 0
    up_to_seq: Uint64 = 0
    filter_subjects: list[str] = msgspec.field(default_factory=list)
    max_bytes: Int = 0


class BulkReadResponse(ApiResponse, frozen=True):
    """What a failed bulk read is answered with (a success is the data messages)."""

    type: str = _always(RESPONSE_TYPE)


@dataclass(slots=True)
class _Job:
    stream: Stream
    reply: str
    seq: int
    up_to: int
    filters: list[str]
    budget: int
    done: bool = False


class BulkRead:
    """The bus handler on ``$JS.API.JETPY.BULK.>`` and the queue of reads being served."""

    def __init__(
        self, streams: Mapping[str, Stream], bus: MessageBus, require: Callable[[str], Stream] | None = None
    ) -> None:
        """``require(name)``: the stream, else ApiError (10059, or 10194 for an offline one)."""
        self.streams = streams
        self.bus = bus
        self.require = require or self._own
        self._jobs: deque[_Job] = deque()
        self._turn: asyncio.Handle | None = None

    def handle(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The bus handler on ``$JS.API.JETPY.BULK.>``."""
        self._take(subject, 5, reply, hdr_len, data)

    def handle_domain(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The same on ``$JS.<domain>.API.JETPY.BULK.>``."""
        self._take(subject, 6, reply, hdr_len, data)

    def _take(self, subject: bytes, tokens: int, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        toks = subject.decode().split(".")
        if reply is None or len(toks) != tokens:
            return  # no one to answer, or not an API subject of this form
        rep = reply.decode()
        try:
            job = self._job(toks[-1], rep, data[hdr_len:], self.bus.caller())
        except ApiError as e:
            self._fail(rep, e)
            return
        self._jobs.append(job)
        if self._turn is None:
            self._turn = asyncio.get_running_loop().call_soon(self._step)

    def _own(self, name: str) -> Stream:
        s = self.streams.get(name)
        if s is None:
            raise ApiError.of(E.STREAM_NOT_FOUND)
        return s

    def _job(self, name: str, rep: str, body: bytes, caller: Caller | None) -> _Job:
        s = self.require(name)
        req = as_request(decode_body(body), BulkReadRequest)
        if req.max_bytes < 0 or (req.up_to_seq and req.up_to_seq < req.seq):
            raise ApiError.of(E.BAD_REQUEST)
        for f in req.filter_subjects:
            if not subjects.is_valid_subject(f):
                raise ApiError.of(E.BAD_REQUEST)
        if caller is not None:  # it reads its filters, else all the stream stores (as a consumer)
            check_read(caller, list(req.filter_subjects) or stored(s.config))
        up_to = req.up_to_seq or s.store.state().last_seq
        budget = min(req.max_bytes or DEFAULT_MAX_BYTES, MAX_BYTES)
        return _Job(s, rep, req.seq, up_to, list(req.filter_subjects), budget)

    def _fail(self, rep: str, err: ApiError) -> None:
        self.bus.publish(rep, None, encode(BulkReadResponse.failure(err)))

    def _step(self) -> None:
        """One message of the oldest read waiting; then the next read's turn."""
        self._turn = None
        if not self._jobs:
            return
        job = self._jobs.popleft()
        try:
            self._serve(job)
        except ApiError as e:
            job.done = True
            self._fail(job.reply, e)
        except StoreError as e:
            job.done = True
            log.warning("bulk read of stream %s failed: %s", job.stream.name, e)
            self._fail(job.reply, ApiError.of(E.STREAM_GENERAL, err=str(e)))
        if not job.done:
            self._jobs.append(job)
        if self._jobs:
            self._turn = asyncio.get_running_loop().call_soon(self._step)

    def _serve(self, job: _Job) -> None:
        s = job.stream
        if self.streams.get(s.name) is not s:
            raise ApiError.of(E.STREAM_NOT_FOUND)  # deleted (or deleted and made again) meanwhile
        store = s.store
        r = store.read_records(job.seq, job.up_to, job.filters, min(CHUNK_BYTES, job.budget))
        st = store.state()
        job.seq = r.next_seq
        job.budget -= r.size
        job.done = job.budget <= 0 or r.next_seq > min(job.up_to, st.last_seq)
        if not r.offsets and not job.done:
            return  # nothing matched in the slice looked at: go on at the next turn
        header = encode_header(
            FLAG_LAST if job.done else 0,
            len(r.offsets),
            r.base,
            r.next_seq if job.done else 0,
            st.first_seq,
            st.last_seq,
        )
        self.bus.publish(job.reply, None, b"".join([header, offsets_bytes(r.offsets), *r.parts]))

    def stop(self) -> None:
        """Forget the reads being served (the server is going)."""
        self._jobs.clear()
        if self._turn is not None:
            self._turn.cancel()
            self._turn = None
