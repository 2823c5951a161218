"""OriginLink: the consumer a mirror or a source keeps on the stream it copies, as nats-server has it.

Owns one internal consumer on an origin stream, set up through the JetStream API like any
client's (``<api prefix>.CONSUMER.CREATE.<origin>``, answered on ``$JSC.R.<id>``), so that
``external.api`` is just another API prefix: a push consumer with ``direct`` set, ack none, one
delivery, flow control, a 1 s idle heartbeat and a 10 s inactivity threshold, delivering to
``$JS.M.<id>`` (mirrors) or ``$JS.S.<id>`` (sources), or under ``external.deliver``. Then: what
arrives on the deliver subject (messages with their ack-reply metadata, flow-control requests
answered on the next loop turn, heartbeats that reveal a missed delivery or a stalled consumer),
the health check (nothing heard for 10 s: a new consumer), retries with nats-server's back-off
(2 s between setups, 10 s more per failure up to 2 min), the error the last setup met, and the
``lag``/``active`` its owner reports. Which position to ask for and what to do with a message
are the owner's (``Mirror``, ``Sources``), through :class:`LinkOwner`.

Every setup gets a new deliver subject, and a consumer that is given up is deleted on the
origin, so deliveries of an old consumer can never be taken for the current one's. A setup that
nothing answers (no subscriber on the API subject: an ``external`` prefix this server does not
serve) is an error at once, shown in the stream's info, never silence.

Must not know: what the owner stores, stores, consumers' internals. Talks to the origin only
through the bus and the API's wire types.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import string
import time
from typing import Final, Literal, Protocol

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import ConsumerCreateRequest, ConsumerCreateResponse
from jetpy.jetstream.consumers.acks import AckReply, parse_ack_subject
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import (
    ApiErrorBody,
    ConsumerConfig,
    DeliverPolicy,
    ExternalStream,
    StreamSource,
    StreamSourceInfo,
    SubjectTransform,
    decode,
    encode,
)
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.transform import SubjectTransform as Transform
from jetpy.protocol.headers import get_header
from jetpy.subjects import subject_matches

__all__ = [
    "HEALTH_CHECK",
    "HEARTBEAT",
    "RETRY_THRESHOLD",
    "LinkOwner",
    "OriginLink",
    "TransformChain",
    "link_config",
    "retry_backoff",
    "strip_expected",
]

log = logging.getLogger("jetpy.jetstream")

_S: Final = 1_000_000_000
HEARTBEAT: Final = 1 * _S  # the origin consumer's idle heartbeat
HEALTH_CHECK: Final = 10 * _S  # nothing heard for this long: a new consumer (also its inactivity limit)
RETRY_THRESHOLD: Final = 2.0  # seconds between two setups of the same link, at least
RETRY_BASE: Final = 5.0  # back-off: this times twice the failures so far...
RETRY_MAX: Final = 120.0  # ...up to this
RESPONSE_WAIT: Final = 30.0  # seconds a consumer create may take before the link tries again
EARLY_DELIVERIES: Final = (
    10_000  # deliveries kept while the create answer is awaited (more: a gap, a new start)
)
ACK_WAIT: Final = 22 * 3600 * _S  # what nats-server sets; ack none makes it moot

API_PREFIX: Final = "$JS.API"
IDENTITY_HEADER: Final = b"Nats-Stream-Identity"
_LAST_CONSUMER: Final = b"Nats-Last-Consumer"
_STALLED: Final = b"Nats-Consumer-Stalled"
_CONTROL: Final = b"NATS/1.0 100"
_ID_ALPHABET: Final = string.ascii_letters + string.digits

Kind = Literal["mirror", "source"]


def _token() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def retry_backoff(fails: int) -> float:
    """nats-server's ``calculateRetryBackoff``: seconds added after ``fails`` failed setups."""
    return min(RETRY_BASE * fails * 2, RETRY_MAX)


def link_config(
    *,
    start_seq: int = 0,
    start_time: str | None = None,
    filter_subject: str = "",
    filter_subjects: list[str] | None = None,
) -> ConsumerConfig:
    """The config of a mirror's or source's consumer: from ``start_seq``, else from
    ``start_time``, else from the first message, with the filters given."""
    if start_seq:
        policy: DeliverPolicy = "by_start_sequence"
    elif start_time is not None:
        policy = "by_start_time"
    else:
        policy = "all"
    return ConsumerConfig(
        deliver_policy=policy,
        opt_start_seq=start_seq,
        opt_start_time=start_time if not start_seq else None,
        ack_policy="none",
        ack_wait=ACK_WAIT,
        max_deliver=1,
        filter_subject=filter_subject,
        filter_subjects=filter_subjects or [],
        idle_heartbeat=HEARTBEAT,
        flow_control=True,
        direct=True,
        inactive_threshold=HEALTH_CHECK,
    )


class TransformChain:
    """A mirror's or source's ``subject_transforms``: the first whose ``src`` matches maps the
    subject (an empty ``dest`` keeps it), none matching keeps it too (nats-server's rule)."""

    __slots__ = ("_steps",)

    def __init__(self, transforms: list[SubjectTransform]) -> None:
        self._steps = [(tr.src or ">", Transform(tr.src, tr.dest) if tr.dest else None) for tr in transforms]

    def __bool__(self) -> bool:
        return bool(self._steps)

    def map(self, subject: str) -> str:
        for src, tr in self._steps:
            if tr is None:
                if subject_matches(src, subject):
                    return subject
                continue
            mapped = tr.apply(subject)
            if mapped is not None:
                return mapped
        return subject


def strip_expected(hdr: bytes) -> bytes:
    """A header block without its ``Nats-Expected-*`` lines (checked where they were published;
    a copy must not check them again), and without the block when nothing else is left."""
    if b"Nats-Expected-" not in hdr:
        return hdr
    lines = hdr.split(b"\r\n")
    kept = [ln for ln in lines[1:] if ln and not ln.startswith(b"Nats-Expected-")]
    if not kept and lines[0] == b"NATS/1.0":
        return b""
    return b"\r\n".join([lines[0], *kept]) + b"\r\n\r\n"


class LinkOwner(Protocol):
    """What a link asks of the mirror or source it serves."""

    def request(self) -> ConsumerConfig:
        """The consumer to create now (start position and filters; see :func:`link_config`)."""

    def created(self, info: ConsumerCreateResponse, identity: str) -> bool:
        """A consumer exists, on the origin incarnation ``identity`` ("" if the origin does not
        say); False: do not use it (the owner changed its mind about the start: set up again)."""

    def message(self, subject: str, hdr: bytes, data: bytes, meta: AckReply) -> bool:
        """A message from the origin (its ``Nats-Expected-*`` headers still in); False: the
        link must start over (a gap it cannot bridge, a message it could not store)."""


class OriginLink:
    def __init__(
        self,
        bus: MessageBus,
        owner: LinkOwner,
        kind: Kind,
        stream: str,
        origin: str,
        external: ExternalStream | None,
    ) -> None:
        self.bus = bus
        self.owner = owner
        self.kind = kind
        self.stream = stream  # the stream that copies (for logs)
        self.origin = origin
        self.external = external
        api = external.api if external is not None and external.api else API_PREFIX
        self.api = api.rstrip(".")
        self._deliver_prefix = (
            external.deliver.rstrip(".") if external is not None and external.deliver else ""
        )
        # what the owner reports
        self.cname = ""  # the current consumer on the origin ("" while there is none)
        self.dseq = 0  # its last delivery
        self.lag = 0
        self.last = 0  # ns: when the origin was last heard from (0: never)
        self.err: ApiErrorBody | None = None
        self.identity = ""  # the origin incarnation of the current consumer
        # setup state
        self.fails = 0
        self._lreq = 0.0  # monotonic seconds of the last setup
        self._sip = False  # a create request is waiting for its answer
        self._reply_sub: object | None = None
        self._deliver_sub: object | None = None
        self._deliver = ""
        self._early: list[tuple[bytes, bytes | None, int, bytes]] = []  # deliveries before the answer
        self._timeout: asyncio.TimerHandle | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._health: asyncio.TimerHandle | None = None
        self._stopped = False
        self._diverged = False  # the owner gave up for good (``fail``): no more setups

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Set the consumer up (after nats-server's short delay for a fresh link)."""
        self._schedule(0.1 + random.random() * 0.1)
        self._arm_health()

    def stop(self) -> None:
        """Stop for good: no more setups, the consumer on the origin deleted."""
        self._stopped = True
        self._cancel(delete=True)
        for h in (self._retry, self._health):
            if h is not None:
                h.cancel()
        self._retry = self._health = None

    def leave(self) -> None:
        """Stop for good, the consumer on the origin left to its inactivity threshold rather
        than deleted (a deposed leader's copying: nats-server's sends no delete then)."""
        self.cname = ""
        self.stop()

    def retry(self) -> None:
        """Give the current consumer up and set up a new one (throttled and backed off)."""
        if self._stopped or self._diverged:
            return
        self._cancel()
        self._schedule(self._delay())

    def nudge(self, gone: bool = False) -> None:
        """The origin appeared on this server (a link waiting to retry tries again soon) or went
        (``gone``: its consumer went with it, so the link starts over at once rather than at
        its next health check)."""
        if self._stopped or self._sip:
            return
        if self._diverged:
            if gone:
                return
            self._diverged = False  # an origin created again: worth another look
        if self.cname:
            if gone:
                self.retry()
            return
        self.fails = 0
        self._schedule(self._delay())

    def fail(self, err: ApiError) -> None:
        """The owner cannot go on with this origin (it diverged): show why, stop copying."""
        self.err = ApiErrorBody.of(err)
        self._diverged = True
        self._cancel(delete=True)

    # -- setup ----------------------------------------------------------------------------------

    def _delay(self) -> float:
        since = time.monotonic() - self._lreq
        wait = max(0.0, RETRY_THRESHOLD - since) + retry_backoff(self.fails)
        return wait + 0.1 + random.random() * 0.1

    def _schedule(self, delay: float) -> None:
        if self._retry is not None:
            self._retry.cancel()
        self._retry = asyncio.get_running_loop().call_later(delay, self._setup)

    def _setup(self) -> None:
        self._retry = None
        if self._stopped or self._diverged or self._sip:
            return
        self._cancel()
        self._lreq = time.monotonic()
        cfg = self.owner.request()
        self._deliver = self._deliver_subject()
        cfg = msgspec.structs.replace(
            cfg,
            name=f"{'JS_MIRROR' if self.kind == 'mirror' else 'JS_SRC'}_{_token()}",
            deliver_subject=self._deliver,
        )
        subject = f"{self.api}.CONSUMER.CREATE.{self.origin}"
        if not self.bus.has_interest(subject):
            self._failed(self._setup_error(f'no responders for "{subject}"'))
            return
        reply = f"$JSC.R.{_token()}"
        # listening before asking, as nats-server's link does: the consumer may deliver before its
        # answer arrives, and anyone else listening on the subject must not take the first copies
        self._deliver_sub = self.bus.subscribe(self._deliver, self._on_delivery)
        self._reply_sub = self.bus.subscribe(reply, self._on_response)
        self._sip = True
        self._timeout = asyncio.get_running_loop().call_later(RESPONSE_WAIT, self._no_response)
        body = encode(ConsumerCreateRequest(stream_name=self.origin, config=cfg))
        self.bus.publish(subject, reply, body)  # may be answered before this returns

    def _deliver_subject(self) -> str:
        tag = "M" if self.kind == "mirror" else "S"
        if self._deliver_prefix:
            return f"{self._deliver_prefix}.{tag}.{_token()}"
        return f"$JS.{tag}.{_token()}"

    def _setup_error(self, text: str) -> ApiError:
        code = E.MIRROR_CONSUMER_SETUP_FAILED if self.kind == "mirror" else E.SOURCE_CONSUMER_SETUP_FAILED
        return ApiError.of(code, err=text)

    def _failed(self, err: ApiError | ApiErrorBody) -> None:
        self.err = err if isinstance(err, ApiErrorBody) else ApiErrorBody.of(err)
        self.fails += 1
        self._schedule(self._delay())

    def _no_response(self) -> None:
        self._timeout = None
        self._end_request()
        self._drop_deliveries()
        log.warning(
            "JetStream %s consumer for '%s' on '%s' not created: no answer in %ds",
            self.kind,
            self.stream,
            self.origin,
            RESPONSE_WAIT,
        )
        self._failed(self._setup_error(f"no answer from {self.api} in {int(RESPONSE_WAIT)}s"))

    def _end_request(self) -> None:
        self._sip = False
        self._early = []
        if self._reply_sub is not None:
            self.bus.unsubscribe(self._reply_sub)
            self._reply_sub = None
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout = None

    def _on_response(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if not self._sip:
            return
        early = self._early
        self._end_request()
        if self._stopped:
            return
        try:
            resp = decode(data[hdr_len:], ConsumerCreateResponse)
        except msgspec.DecodeError:
            log.warning("JetStream bad %s consumer create response: %r", self.kind, data[hdr_len:][:200])
            self._drop_deliveries()
            self._failed(ApiError.of(E.INVALID_JSON, err="consumer create response"))
            return
        if resp.error is not None or not resp.name:
            log.warning(
                "JetStream error response for stream %s create %s consumer %s: %s",
                self.stream,
                self.kind,
                self.origin,
                resp.error.description if resp.error else "no consumer",
            )
            self._drop_deliveries()
            self._failed(resp.error or self._setup_error("no consumer in the response"))
            return
        if early:
            resp = _before_early(resp, early)
        hdr = data[:hdr_len]
        identity = get_header(hdr, IDENTITY_HEADER) if hdr else None
        self.err = None
        self.fails = 0
        self.cname = resp.name or ""
        self.dseq = 0
        self.last = time.time_ns()
        self.identity = identity.decode(errors="replace") if identity else ""
        if not self.owner.created(resp, self.identity):
            self._schedule(self._delay())  # the owner wants another start: the consumer goes
            self._cancel()
            return
        for delivery in early:  # what came before the answer, in order
            self._on_delivery(*delivery)

    def _drop_deliveries(self) -> None:
        if self._deliver_sub is not None:
            self.bus.unsubscribe(self._deliver_sub)
            self._deliver_sub = None

    def _cancel(self, delete: bool = False) -> None:
        """Drop the current consumer: unsubscribe; ask the origin to ``delete`` it when copying
        stops for good, as nats-server 2.15.1 does (its retries send no delete). Either way it
        goes by its inactivity threshold: the API does not delete a mirror's or source's own."""
        self._end_request()
        self._drop_deliveries()
        if self.cname:
            if delete:  # fire and forget (the reply goes nowhere)
                self.bus.publish(
                    f"{self.api}.CONSUMER.DELETE.{self.origin}.{self.cname}", f"$JSC.R.{_token()}", b""
                )
            self.cname = ""

    # -- deliveries -----------------------------------------------------------------------------

    def _on_delivery(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if self._stopped:
            return
        if not self.cname:
            if self._sip and len(self._early) < EARLY_DELIVERIES:
                self._early.append((subject, reply, hdr_len, bytes(data)))
            return
        self.last = time.time_ns()
        if len(data) == hdr_len and data.startswith(_CONTROL):
            self._control(reply, data[:hdr_len])
            return
        meta = parse_ack_subject(reply.decode()) if reply else None
        if meta is None or meta.consumer != self.cname:
            return  # not the current consumer's
        if meta.deliveries > 1:
            return
        self.lag = meta.pending - 1 if meta.pending else 0
        hdr = data[:hdr_len]
        if self.owner.message(subject.decode(), hdr, data[hdr_len:], meta):
            if meta.consumer_seq > self.dseq:
                self.dseq = meta.consumer_seq
        else:
            self.retry()

    def _control(self, reply: bytes | None, hdr: bytes) -> None:
        if reply:  # flow control: answered once what came before it is stored (next loop turn)
            asyncio.get_running_loop().call_soon(self._answer, reply.decode())
            return
        last = get_header(hdr, _LAST_CONSUMER)
        if last is not None and last.isdigit() and int(last) > 0 and int(last) != self.dseq:
            log.debug(
                "JetStream %s of '%s' missed deliveries from '%s': starting over",
                self.kind,
                self.stream,
                self.origin,
            )
            self.retry()
            return
        stalled = get_header(hdr, _STALLED)
        if stalled:  # the origin thinks its flow control went unanswered
            asyncio.get_running_loop().call_soon(self._answer, stalled.decode())

    def _answer(self, subject: str) -> None:
        if not self._stopped:
            self.bus.publish(subject, None, b"")

    # -- health ---------------------------------------------------------------------------------

    def _arm_health(self) -> None:
        self._health = asyncio.get_running_loop().call_later(HEALTH_CHECK / _S, self._check_health)

    def _check_health(self) -> None:
        self._health = None
        if self._stopped:
            return
        self._arm_health()
        if self.cname and time.time_ns() - self.last > HEALTH_CHECK:
            log.debug(
                "JetStream %s of '%s' stalled on '%s': starting over", self.kind, self.stream, self.origin
            )
            self.retry()

    # -- report ---------------------------------------------------------------------------------

    def active(self, now: int) -> int:
        """Nanoseconds since the origin was last heard from, -1 if never (nats-server's ``active``)."""
        return now - self.last if self.last else -1

    def info(self, cfg: StreamSource, now: int, seq: int = 0) -> StreamSourceInfo:
        """The mirror's or the source's report in stream info (``seq``: a source's last copied)."""
        return StreamSourceInfo(
            name=cfg.name,
            external=cfg.external,
            lag=self.lag,
            seq=seq,
            active=self.active(now),
            error=self.err,
            filter_subject=cfg.filter_subject,
            subject_transforms=list(cfg.subject_transforms),
        )


def _before_early(
    resp: ConsumerCreateResponse, early: list[tuple[bytes, bytes | None, int, bytes]]
) -> ConsumerCreateResponse:
    """The create answer as of before the deliveries that overtook it: its ``delivered`` counts
    them, and the owner takes ``delivered`` as where the origin starts for it."""
    delivered = resp.delivered
    if delivered is None:
        return resp
    for _subject, reply, _hdr_len, _data in early:
        meta = parse_ack_subject(reply.decode()) if reply else None
        if meta is not None and meta.consumer == resp.name:
            if delivered.stream_seq >= meta.stream_seq:
                before = msgspec.structs.replace(delivered, stream_seq=meta.stream_seq - 1, consumer_seq=0)
                return msgspec.structs.replace(resp, delivered=before)
            return resp
    return resp
