"""Reading stored messages for clients: the lookup rules shared by ``STREAM.MSG.GET`` and
``DIRECT.GET``, and the direct-get reply, which is the raw message with headers rather than JSON.

Owns: request-body decoding for the API (``decode_body``), which message a get request names
(``lookup``), the direct-get status replies (404/408/413) with nats-server's status lines, and
the batched forms of nats-server 2.11 (ADR-31): ``batch`` (with ``seq``/``start_time``,
``next_by_subj``, ``max_bytes``, ``up_to_seq``) and ``multi_last`` (with ``up_to_seq`` /
``up_to_time``), which answer with many raw messages and a final ``204 EOB`` status message.
Must not know: stores' internals (only ``Stream.store``'s interface) or the network (replies go
through the engine's bus).

Batched replies, as nats-server 2.11 sends them:

* every message carries ``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``,
  ``Nats-Time-Stamp``, then ``Nats-Num-Pending`` (matching messages still in the stream *after*
  this one) and ``Nats-Last-Sequence`` (the sequence of the previous message of this reply, 0 for
  the first);
* then ``NATS/1.0 204 EOB`` with ``Nats-Num-Pending`` (matching messages after the last one sent)
  and ``Nats-Last-Sequence`` (the last one sent), plus ``Nats-UpTo-Sequence`` for ``multi_last``;
* a batch stops at ``batch`` messages, at the end of the stream, past ``up_to_seq``, or once
  ``max_bytes`` (subject + headers + payload, counted as nats-server does) has been reached.

Bodies Go's decoder refuses (not JSON, nested too deep, a field of the wrong type, a number its
Go integer type cannot hold) get ``408 Malformed Request``, bodies naming no message ``408 Empty
Request`` and conflicting fields ``408 Bad Request``, as nats-server answers them.

Two deliberate differences from nats-server 2.11: a batch starting at a deleted sequence starts
at the next stored message (2.11 answers 404 when ``seq`` itself is gone and no ``next_by_subj``
is set), and ``up_to_seq`` also bounds a plain batch (2.11 reads it only with ``multi_last``;
clients that need a bound must still check sequences themselves against such servers).
Every message of a reply is handed to the bus in the same call, so the connection writes the
whole batch in one go.

A caller with permissions gets ``403`` with the reason (``permissions violation for subscribe to
"secret.x"``) instead of a message on a subject it may not read (jetstream.access); a batch stops
there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from jetpy import subjects
from jetpy.jetstream import errors as E
from jetpy.jetstream.access import check_read
from jetpy.jetstream.api.requests import as_request, decode_body
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import Int, Uint64, format_time, parse_time
from jetpy.jetstream.ports import Caller, MessageBus
from jetpy.jetstream.seek import seq_at_time
from jetpy.jetstream.stream import Stream
from jetpy.protocol.headers import encode_headers
from jetpy.store.base import StoredMsg, StreamStore

__all__ = [
    "DIRECT_SUBJECTS",
    "DOMAIN_DIRECT_SUBJECTS",
    "BadTime",
    "DirectGet",
    "DirectGetRequest",
    "check_get",
    "lookup",
    "request_time",
    "seq_from_time",
]

DIRECT_SUBJECTS = "$JS.API.DIRECT.GET.>"
DOMAIN_DIRECT_SUBJECTS = "$JS.{}.API.DIRECT.GET.>"  # .format(domain)

DEFAULT_BATCH_MAX_BYTES = 64 * 1024 * 1024
"""``max_bytes`` of a batch that names none: nats-server uses the server's ``max_pending``
(64 MB by default), so one reply never makes its reader a slow consumer on its own."""

MAX_MULTI_RESULTS = 1024
"""``multi_last`` matching more subjects than this is refused with ``413 Too Many Results``
(nats-server's fixed limit: "use a consumer" beyond it)."""

_EOB = "NATS/1.0 204 EOB\r\nNats-Num-Pending: {}\r\nNats-Last-Sequence: {}\r\n\r\n"
_EOB_MULTI = (
    "NATS/1.0 204 EOB\r\nNats-Num-Pending: {}\r\nNats-Last-Sequence: {}\r\nNats-UpTo-Sequence: {}\r\n\r\n"
)


class BadTime(ValueError):
    """A request's ``start_time`` Go would not parse (``message`` is Go's error text)."""


def request_time(value: object) -> int | None:
    """A request's ``start_time``: None when absent; raises BadTime as Go's decoder refuses it."""
    if value is None:
        return None
    if not isinstance(value, str):
        kind = {bool: "bool", dict: "object", list: "array"}.get(type(value), "number")
        raise BadTime(
            f"json: cannot unmarshal {kind} into Go struct field JSApiMsgGetRequest.start_time of type time.Time"
        )
    try:
        return parse_time(value)
    except ValueError:
        raise BadTime(
            f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "{value}" as "2006"'
        ) from None


def check_get(seq: int, last_by: str, next_by: str, start_ns: int | None) -> None:
    """A get request names exactly one message: ``last_by_subj``, ``next_by_subj`` (from ``seq``
    or ``start_time``), ``start_time`` or ``seq``; anything else is BAD_REQUEST."""
    if (
        (seq and last_by)
        or (last_by and next_by)
        or (start_ns is not None and (seq or last_by))
        or not (seq or last_by or next_by or start_ns is not None)
    ):
        raise ApiError.of(E.BAD_REQUEST)


def lookup(s: Stream, seq: int, last_by: str, next_by: str, start_ns: int | None) -> StoredMsg | None:
    """The message a get request (checked by :func:`check_get`) names."""
    store = s.store
    if last_by:
        return store.load_last_msg(last_by)
    if start_ns is not None:
        start = seq_from_time(store, start_ns)
        return store.load_next_msg(next_by or ">", start)
    if next_by:
        return store.load_next_msg(next_by, seq)
    return store.load_msg(seq)


def seq_from_time(store: StreamStore, ts_ns: int) -> int:
    """The first sequence stored at or after ``ts_ns`` (``last_seq + 1`` if none).

    The stored message at or after the point :func:`~jetpy.jetstream.seek.seq_at_time` finds."""
    st = store.state()
    lo = seq_at_time(store, ts_ns, st.first_seq, st.last_seq)
    m = store.load_next_msg("", lo)
    return m.seq if m is not None else st.last_seq + 1


Answerer = Callable[[str], "Stream | None"]
"""Which stream answers a direct get for a stream name (None: nobody, as nats-server has no
subscriber then): the stream itself if it allows direct gets, or a mirror of it with
``mirror_direct``."""


class DirectGet:
    """The bus handler on ``$JS.API.DIRECT.GET.>`` (direct gets are answered by the stream, not
    the API dispatcher: they are not in the api counters, as nats-server)."""

    def __init__(
        self, streams: Mapping[str, Stream], bus: MessageBus, answerer: Answerer | None = None
    ) -> None:
        self.streams = streams
        self.bus = bus
        self.answerer = answerer or self._own

    def _own(self, name: str) -> Stream | None:
        s = self.streams.get(name)
        return s if s is not None and s.config.allow_direct else None

    def handle(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        toks = subject.decode().split(".")[4:]  # drop "$JS", "API", "DIRECT", "GET"
        direct_get(self.answerer, self.bus, toks, reply, data[hdr_len:], self.bus.caller())

    def handle_domain(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """The same on ``$JS.<domain>.API.DIRECT.GET.>``."""
        toks = subject.decode().split(".")[5:]
        direct_get(self.answerer, self.bus, toks, reply, data[hdr_len:], self.bus.caller())


def _refused(bus: MessageBus, rep: str, caller: Caller | None, subject: str) -> bool:
    """Answer 403 and return True if ``caller`` may not read ``subject``."""
    if caller is None:
        return False
    try:
        check_read(caller, [subject])
    except ApiError as e:
        _status(bus, rep, e.code, e.description)
        return True
    return False


def direct_get(
    answerer: Answerer,
    bus: MessageBus,
    args: list[str],
    reply: bytes | None,
    body: bytes,
    caller: Caller | None = None,
) -> None:
    """``$JS.API.DIRECT.GET.<stream>`` (body names the message) or ``...<stream>.<subject>``
    (last message on the subject, the KV read path). Replies with the stored message itself."""
    if reply is None or not args:
        return
    s = answerer(args[0])
    if s is None:
        return  # nats-server does not subscribe DIRECT.GET for such streams: no responders
    rep = reply.decode()
    no_hdr = False
    try:
        if len(args) > 1:
            if body.strip():
                raise ApiError.of(E.BAD_REQUEST)
            if _refused(bus, rep, caller, ".".join(args[1:])):
                return
            msg = s.store.load_last_msg(".".join(args[1:]))
        else:
            if not body.strip():
                bus.publish(rep, None, b"", encode_headers([], 408, "Empty Request"))
                return
            try:  # Go's decoder: not JSON, a wrong type or a number out of range is malformed
                req = as_request(decode_body(body), DirectGetRequest)
            except ApiError:
                bus.publish(rep, None, b"", encode_headers([], 408, "Malformed Request"))
                return
            named = req.seq or req.last_by_subj or req.next_by_subj or req.multi_last
            if not named and req.start_time is None:  # any time string names one
                bus.publish(rep, None, b"", encode_headers([], 408, "Empty Request"))
                return
            if req.batch or req.multi_last:
                _batch_get(bus, s, rep, req, caller)
                return
            try:
                start_ns = request_time(req.start_time)
            except BadTime:
                bus.publish(rep, None, b"", encode_headers([], 408, "Malformed Request"))
                return
            check_get(req.seq, req.last_by_subj, req.next_by_subj, start_ns)
            msg = lookup(s, req.seq, req.last_by_subj, req.next_by_subj, start_ns)
            no_hdr = req.no_hdr
    except ApiError:
        bus.publish(rep, None, b"", encode_headers([], 408, "Bad Request"))
        return
    if msg is None:
        bus.publish(rep, None, b"", encode_headers([], 404, "Message Not Found"))
        return
    if _refused(bus, rep, caller, msg.subject):
        return
    bus.publish(rep, None, msg.data, b"" if no_hdr else direct_headers(s.name, msg))


def direct_headers(stream: str, msg: StoredMsg) -> bytes:
    """The message's own headers first, then the direct-get ones (as nats-server)."""
    original = msg.hdr[:-2] if msg.hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n"
    extra = (
        f"Nats-Stream: {stream}\r\nNats-Subject: {msg.subject}\r\n"
        f"Nats-Sequence: {msg.seq}\r\nNats-Time-Stamp: {format_time(msg.ts)}\r\n\r\n"
    )
    return original + extra.encode()


# ----------------------------------------------------------------------------- batched gets


class DirectGetRequest(msgspec.Struct, frozen=True):
    """nats-server's ``JSApiMsgGetRequest`` as a direct get reads it (unknown fields ignored)."""

    seq: Uint64 = 0
    last_by_subj: str = ""
    next_by_subj: str = ""
    batch: Int = 0
    max_bytes: Int = 0
    start_time: str | None = None
    multi_last: list[str] = msgspec.field(default_factory=list)
    up_to_seq: Uint64 = 0
    up_to_time: str | None = None
    no_hdr: bool = False  # the data alone, no headers at all (not for multi_last, as nats-server)


def _status(bus: MessageBus, rep: str, code: int, text: str) -> None:
    bus.publish(rep, None, b"", encode_headers([], code, text))


def _batch_get(bus: MessageBus, s: Stream, rep: str, req: DirectGetRequest, caller: Caller | None) -> None:
    try:
        if req.batch < 0 or req.max_bytes < 0:
            raise ValueError("negative")
        start_ns = parse_time(req.start_time) if req.start_time is not None else None
        up_to_ns = parse_time(req.up_to_time) if req.up_to_time is not None else None
        for f in (req.next_by_subj, *req.multi_last):
            if f and not subjects.is_valid_subject(f):
                raise ValueError("filter")
    except ValueError:
        _status(bus, rep, 408, "Bad Request")
        return
    # nats-server's checks, in its order: nothing named, then conflicting fields.
    if not (req.seq or req.last_by_subj or req.next_by_subj or req.multi_last or start_ns is not None):
        _status(bus, rep, 408, "Empty Request")
        return
    if (
        (req.seq and req.last_by_subj)
        or (req.seq and start_ns is not None)
        or (start_ns is not None and req.last_by_subj)
        or (req.last_by_subj and req.next_by_subj)
        or (req.last_by_subj and req.batch)
        or (req.last_by_subj and req.multi_last)
        or (req.next_by_subj and req.multi_last)
        or (req.up_to_seq and up_to_ns is not None)
    ):
        _status(bus, rep, 408, "Bad Request")
        return
    max_bytes = req.max_bytes or DEFAULT_BATCH_MAX_BYTES
    if req.multi_last:
        _multi_last(bus, s, rep, req, up_to_ns, max_bytes, caller)
        return
    store = s.store
    seq = seq_from_time(store, start_ns) if start_ns is not None else req.seq
    flt = req.next_by_subj or ">"
    up_to = req.up_to_seq
    pending = store.num_pending(seq, flt, False)
    if up_to:
        pending -= store.num_pending(up_to + 1, flt, False)
    publish = bus.publish
    prefix = b"Nats-Stream: %s\r\nNats-Subject: " % s.name.encode()
    every = flt == ">"
    load, load_next = store.load_msg, store.load_next_msg
    last = 0
    sent = sent_bytes = 0
    limit = req.batch or 1
    while sent < limit:
        # unfiltered reads mostly hit consecutive sequences: one index lookup, no scan
        m = (load(seq) if every and seq else None) or load_next(flt, seq)
        if m is None or (up_to and m.seq > up_to):
            break
        if caller is not None and _refused(bus, rep, caller, m.subject):
            return
        pending -= 1
        hdr = m.hdr
        publish(
            rep,
            None,
            m.data,
            b""
            if req.no_hdr
            else (hdr[:-2] if hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n")
            + prefix
            + b"%s\r\nNats-Sequence: %d\r\nNats-Time-Stamp: %s\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n"
            % (m.subject.encode(), m.seq, format_time(m.ts).encode(), max(pending, 0), last),
        )
        last = m.seq
        seq = m.seq + 1
        sent += 1
        sent_bytes += len(m.subject) + len(hdr) + len(m.data)
        if sent_bytes >= max_bytes:
            break
    if not sent:
        _status(bus, rep, 404, "Message Not Found")
        return
    rest = store.num_pending(seq, flt, False)
    if up_to:
        rest -= store.num_pending(up_to + 1, flt, False)
    publish(rep, None, b"", _EOB.format(max(rest, 0), last).encode())


def _batch_headers(stream: str, m: StoredMsg, pending: int, last: int) -> bytes:
    original = m.hdr[:-2] if m.hdr.endswith(b"\r\n\r\n") else b"NATS/1.0\r\n"
    return (
        original
        + (
            f"Nats-Stream: {stream}\r\nNats-Subject: {m.subject}\r\nNats-Sequence: {m.seq}\r\n"
            f"Nats-Time-Stamp: {format_time(m.ts)}\r\nNats-Num-Pending: {pending}\r\n"
            f"Nats-Last-Sequence: {last}\r\n\r\n"
        ).encode()
    )


def _multi_last(
    bus: MessageBus,
    s: Stream,
    rep: str,
    req: DirectGetRequest,
    up_to_ns: int | None,
    max_bytes: int,
    caller: Caller | None,
) -> None:
    """The newest message of every subject matching ``multi_last``, as of ``up_to_seq``/``up_to_time``."""
    store = s.store
    st = store.state()
    up_to = req.up_to_seq
    if up_to_ns is not None:
        up_to = seq_from_time(store, up_to_ns)
        if up_to <= st.first_seq:
            _status(bus, rep, 404, "No Results")
            return
        up_to -= 1
    if not up_to:
        up_to = st.last_seq
    names: set[str] = set()
    for f in req.multi_last:
        names.update(store.subjects_state(f))
        if len(names) > MAX_MULTI_RESULTS:
            _status(bus, rep, 413, "Too Many Results")
            return
    seqs = sorted(q for q in (_last_at_or_before(store, n, up_to) for n in names) if q)
    if not seqs:
        _status(bus, rep, 404, "No Results")
        return
    pending, last, sent, sent_bytes = len(seqs) - 1, 0, 0, 0
    for q in seqs:
        if q < req.seq:
            pending = max(pending - 1, 0)
            continue
        m = store.load_msg(q)
        if m is None:
            _status(bus, rep, 404, "Message Not Found")
            return
        if _refused(bus, rep, caller, m.subject):
            return
        bus.publish(rep, None, m.data, _batch_headers(s.name, m, pending, last))
        pending = max(pending - 1, 0)
        last = m.seq
        sent_bytes += len(m.subject) + len(m.hdr) + len(m.data)
        if sent_bytes >= max_bytes:
            break
        sent += 1
        if req.batch and sent >= req.batch:
            break
    bus.publish(rep, None, b"", _EOB_MULTI.format(pending, last, up_to).encode())


def _last_at_or_before(store: StreamStore, subject: str, up_to: int) -> int:
    """The sequence of ``subject``'s newest message at or before ``up_to`` (0 if none)."""
    m = store.load_last_msg(subject)
    if m is None:
        return 0
    if m.seq <= up_to:
        return m.seq
    best, seq = 0, 0
    while True:
        m = store.load_next_msg(subject, seq)
        if m is None or m.seq > up_to:
            return best
        best, seq = m.seq, m.seq + 1
