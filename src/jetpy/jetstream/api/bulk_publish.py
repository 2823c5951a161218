"""``$JS.API.JETPY.PUBLISH.<stream>``: the bulk publish, jetpy's API for writing a stream fast.

Owns the request's checks, the storing of its records and the one reply. The format is
``protocol/bulk_publish.py``'s; each record is taken as a single publish of it to this server
would be (``registry.bulk_acceptor``: the storage limits, then the stream's rules:
``Nats-Msg-Id`` de-duplication within ``duplicate_window``, ``Nats-Expected-*``, ``Nats-TTL``,
rollups, ``max_msg_size``, the store's limits), in order, each record's outcome its own, as a
run of single publishes would have them. What costs a single publish microseconds is paid once
per request or per run of records here: no protocol line, routing or PubAck per message, one
durability wait, and for the records that need no rule beyond their size and message id, one
decision pass, one store call and one notification of the consumers per run
(``Stream.process_many``).

Refused as a whole, before anything is stored (an API error reply): a stream that does not
exist (10059) or is offline (10194), a replicated one (10036: its messages go through its Raft
group), a body that does not follow the format, a record whose subject is not a literal
subject this stream takes (10400, naming the record), a subject the caller may not publish to
(10403, as a publish of it would be refused), a request arriving while 64 MiB of requests
wait to be stored (10167: send it again later). Account subject mappings do not apply: the
request names its stream (the stream's own ``subject_transform`` does).

The reply (``BulkPublishResponse``) says what happened to every record, by runs of records:
``stored`` ``{index, count, seq}`` (records ``index..index+count-1`` stored as sequences
``seq..seq+count-1``), ``duplicates`` (the same, with the sequences the stream already holds
them as), ``errors`` ``{index, count, error}`` (refused by the stream's rules, with the error a
single publish would have got). It leaves once every record stored is on disk (the group
commit's fsync, as a PubAck), so a record reported stored is durable; a reply that is an error
as a whole (e.g. the fsync failed) means none of it may be taken as stored. Records are taken
``SLICE`` at a time, one slice per turn of the event loop, requests in arrival order, so other
clients are served while a large request is stored (their publishes may land between slices).

Must not know: stores' internals, the network (replies go through the bus and the committer).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Final, cast

import msgspec

from jetpy import subjects
from jetpy.jetstream import errors as E
from jetpy.jetstream.access import violation
from jetpy.jetstream.api.messages import ApiResponse
from jetpy.jetstream.commit import Committer
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ApiErrorBody, _always, _always_list, encode
from jetpy.jetstream.ports import Caller, MessageBus
from jetpy.jetstream.registry import AcceptMany, StreamRegistry
from jetpy.jetstream.stream import PublishResult, Stream
from jetpy.protocol.bulk_publish import (
    PUBLISH_API,
    RESPONSE_TYPE,
    BulkPublishFormatError,
    BulkRecords,
    decode_request,
)
from jetpy.store.base import StoredMsg

__all__ = [
    "DOMAIN_PUBLISH_SUBJECTS",
    "MAX_QUEUED_BYTES",
    "PUBLISH_SUBJECTS",
    "SLICE",
    "BulkPublish",
    "BulkPublishError",
    "BulkPublishResponse",
    "BulkPublishRun",
]

PUBLISH_SUBJECTS: Final = f"$JS.API.{PUBLISH_API}.>"
DOMAIN_PUBLISH_SUBJECTS: Final = "$JS.{}.API." + PUBLISH_API + ".>"  # .format(domain)

SLICE: Final = 1024
"""Records stored per turn of the event loop: a few milliseconds."""
MAX_QUEUED_BYTES: Final = 64 * 1024 * 1024
"""Request bytes waiting to be stored, at most (nats-server's default ``max_pending``): past it
a request is refused (10167, too many requests) rather than queued, so that clients sending
faster than the stream stores cannot grow the server's memory without bound."""


class BulkPublishRun(msgspec.Struct, frozen=True):
    """Records ``index .. index+count-1``, as sequences ``seq .. seq+count-1``."""

    index: int
    count: int
    seq: int


class BulkPublishError(msgspec.Struct, frozen=True):
    """Records ``index .. index+count-1``, each refused with ``error``."""

    index: int
    count: int
    error: ApiErrorBody


class BulkPublishResponse(ApiResponse, frozen=True):
    type: str = _always(RESPONSE_TYPE)
    stream: str | None = None
    count: int | None = None
    stored: list[BulkPublishRun] = _always_list()
    duplicates: list[BulkPublishRun] = _always_list()
    errors: list[BulkPublishError] = _always_list()


@dataclass(slots=True)
class _Job:
    stream: Stream
    accept: AcceptMany
    reply: bytes
    recs: BulkRecords
    size: int  # the request's bytes
    next: int = 0
    top: int = 0  # the highest sequence that must be on disk before the reply
    stored: list[list[int]] = field(default_factory=list)  # runs [index, count, seq]
    dups: list[list[int]] = field(default_factory=list)
    errors: list[tuple[int, int, bytes]] = field(default_factory=list)  # (index, count, error ack)


class BulkPublish:
    """The bus handler on ``$JS.API.JETPY.PUBLISH.>`` and the queue of requests being stored."""

    def __init__(self, registry: StreamRegistry, committer: Committer, bus: MessageBus) -> None:
        self.registry = registry
        self.committer = committer
        self.bus = bus
        self._jobs: deque[_Job] = deque()
        self._turn: asyncio.Handle | None = None
        self._queued = 0  # bytes of the requests in _jobs

    def handle(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The bus handler on ``$JS.API.JETPY.PUBLISH.>``."""
        self._take(subject, 5, reply, hdr_len, data)

    def handle_domain(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The same on ``$JS.<domain>.API.JETPY.PUBLISH.>``."""
        self._take(subject, 6, reply, hdr_len, data)

    def _take(self, subject: bytes, tokens: int, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        toks = subject.split(b".")
        if reply is None or len(toks) != tokens:
            return  # no one to answer, or not an API subject of this form
        try:
            if self._jobs and self._queued + len(data) > MAX_QUEUED_BYTES:
                raise ApiError.of(E.STREAM_TOO_MANY_REQUESTS)
            job = self._job(toks[-1].decode(errors="replace"), reply, data[hdr_len:], self.bus.caller())
        except ApiError as e:
            self.bus.publish_reply(reply, encode(BulkPublishResponse.failure(e)))
            return
        self._jobs.append(job)
        self._queued += job.size
        if self._turn is None:
            self._turn = asyncio.get_running_loop().call_soon(self._step)

    def _job(self, name: str, reply: bytes, body: bytes, caller: Caller | None) -> _Job:
        s = self.registry.require(name)
        accept = self.registry.bulk_acceptor(s)
        if accept is None:
            raise ApiError.of(E.CLUSTER_UNSUPPORTED_FEATURE)
        try:
            recs = decode_request(body)
        except BulkPublishFormatError as e:
            raise ApiError.of(E.BAD_BULK_REQUEST, err=str(e)) from None
        checked: set[bytes] = set()
        for i, subj in enumerate(recs.subjects):
            if subj not in checked:
                _check_subject(s, caller, i, subj)
                checked.add(subj)
        return _Job(s, accept, reply, recs, len(body))

    def _step(self) -> None:
        """One slice of the oldest request; its reply once it is all stored."""
        self._turn = None
        if not self._jobs:
            return
        job = self._jobs[0]
        if self.registry.streams.get(job.stream.name) is not job.stream:
            self._jobs.popleft()  # deleted (or deleted and made again) meanwhile
            self._queued -= job.size
            self.bus.publish_reply(
                job.reply, encode(BulkPublishResponse.failure(ApiError.of(E.STREAM_NOT_FOUND)))
            )
        elif _store_slice(job):
            self._jobs.popleft()
            self._queued -= job.size
            self._answer(job)
        if self._jobs:
            self._turn = asyncio.get_running_loop().call_soon(self._step)

    def _answer(self, job: _Job) -> None:
        s = job.stream
        resp = encode(
            BulkPublishResponse(
                stream=s.name,
                count=len(job.recs),
                stored=[BulkPublishRun(*r) for r in job.stored],
                duplicates=[BulkPublishRun(*r) for r in job.dups],
                errors=[
                    BulkPublishError(i, n, msgspec.json.decode(ack, type=_ErrorAck).error)
                    for i, n, ack in job.errors
                ],
            )
        )
        if job.top:
            self.committer.park(s, job.top, job.reply, resp)
        else:
            self.bus.publish_reply(job.reply, resp)

    def stop(self) -> None:
        """Forget the requests being stored (the server is going; their replies never leave)."""
        self._jobs.clear()
        self._queued = 0
        if self._turn is not None:
            self._turn.cancel()
            self._turn = None


class _ErrorAck(msgspec.Struct):
    """A refused publish's answer (``stream.pub_error``), for its error."""

    error: ApiErrorBody


def _check_subject(s: Stream, caller: Caller | None, i: int, raw: bytes) -> None:
    try:
        subj = raw.decode()
    except UnicodeDecodeError:
        raise ApiError.of(E.BAD_BULK_REQUEST, err=f"record {i}: its subject is not UTF-8") from None
    if not subjects.is_valid_subject(subj, allow_wildcards=False):
        raise ApiError.of(E.BAD_BULK_REQUEST, err=f"record {i}: {subj!r} is not a valid publish subject")
    if not s.matches(subj):
        raise ApiError.of(
            E.BAD_BULK_REQUEST, err=f"record {i}: stream {s.name!r} does not take subject {subj!r}"
        )
    if caller is not None and not caller.may_publish_all(subj):
        raise violation("publish", subj)


def _store_slice(job: _Job) -> bool:
    """Store the job's next ``SLICE`` records; whether that was the last of them."""
    recs = job.recs
    n = len(recs)
    start = job.next
    stop = min(n, start + SLICE)
    outcomes = job.accept(recs.subjects, recs.hdrs, recs.payloads, start, stop)
    stored = job.stored
    run = stored[-1] if stored else None
    durable = job.stream.durable
    top = job.top
    i = start
    first = outcomes[0] if outcomes else None
    if (
        type(first) is StoredMsg
        and list(map(type, outcomes)).count(StoredMsg) == len(outcomes)
        and cast(StoredMsg, outcomes[-1]).seq - first.seq == len(outcomes) - 1
    ):  # all stored, in consecutive sequences (the common case, checked in C)
        seq = first.seq
        if run is not None and run[0] + run[1] == i and run[2] + run[1] == seq:
            run[1] += len(outcomes)
        else:
            stored.append([i, len(outcomes), seq])
        if durable:
            top = seq + len(outcomes) - 1
        outcomes = []
    for res in outcomes:
        if type(res) is StoredMsg:
            seq = res.seq
            if durable:
                top = seq
        else:
            assert isinstance(res, PublishResult)
            if res.durable_seq > top:
                top = res.durable_seq
            st = res.stored
            if st is None:
                if res.duplicate:
                    _add_run(job.dups, i, res.duplicate)
                else:
                    _add_error(job.errors, i, res.ack)
                i += 1
                continue
            seq = st.seq
        if run is not None and run[0] + run[1] == i and run[2] + run[1] == seq:
            run[1] += 1
        else:
            run = [i, 1, seq]
            stored.append(run)
        i += 1
    job.top = top
    job.next = stop
    return stop == n


def _add_run(runs: list[list[int]], i: int, seq: int) -> None:
    if runs:
        r = runs[-1]
        if r[0] + r[1] == i and r[2] + r[1] == seq:
            r[1] += 1
            return
    runs.append([i, 1, seq])


def _add_error(errors: list[tuple[int, int, bytes]], i: int, ack: bytes) -> None:
    if errors:
        j, n, last = errors[-1]
        if j + n == i and last == ack:
            errors[-1] = (j, n + 1, ack)
            return
    errors.append((i, 1, ack))
