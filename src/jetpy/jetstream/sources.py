"""Sources: a stream that aggregates other streams, each copied message numbered anew.

Owns what a stream with ``sources`` does with what each source's
:class:`~jetpy.jetstream.origin.OriginLink` brings: the copy keeps the origin's subject (mapped
by the source's ``subject_transforms``, then the stream's own input transform), headers (less
``Nats-Expected-*`` and a ``Nats-Stream-Source`` it came with) and payload, gets this stream's
next sequence and a new timestamp, and carries where it came from in ``Nats-Stream-Source``,
written as nats-server 2.15 writes it::

    <origin>[:<api hash>] <origin seq> <filter> <destination> <original subject> <origin identity>

(``<filter>``/``<destination>`` are ``>`` without transforms, else the transforms' sources and
destinations joined by form feeds; the api hash names an ``external`` origin, as nats-server's
``getHash``). That header is the only record of a source's position: at start, and for a
source added by an update, the stream is read backwards until each source's newest copy is
found, and copying goes on right after it, so a restart copies nothing twice and skips nothing
(nats-server recovers the same way). A source whose origin was deleted and created again (a new
``Nats-Stream-Identity``) starts over from its beginning, as nats-server's does.

Also: the ``sources`` blocks of the stream's info, and ``sources`` updates (a source added
starts, one removed stops). Must not know: how origin consumers are set up (the link's), stores'
internals, the API.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Final

import msgspec

from jetpy.jetstream.api.messages import ConsumerCreateResponse
from jetpy.jetstream.consumers.acks import AckReply
from jetpy.jetstream.models import (
    ApiErrorBody,
    ConsumerConfig,
    PubAckError,
    StreamSource,
    StreamSourceInfo,
    format_time,
    parse_time,
)
from jetpy.jetstream.origin import OriginLink, TransformChain, link_config, strip_expected
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.stream import PublishResult, Stream
from jetpy.protocol.headers import get_header

__all__ = [
    "SOURCE_HEADER",
    "Source",
    "Sources",
    "api_hash",
    "index_name",
    "parse_source_header",
    "source_header",
    "with_source_header",
]

log = logging.getLogger("jetpy.jetstream")

SOURCE_HEADER: Final = "Nats-Stream-Source"
_SOURCE_KEY: Final = SOURCE_HEADER.encode()
_HASH_DIGITS: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_LIMIT_ERRORS: Final = ("maximum messages exceeded", "maximum bytes exceeded")


def api_hash(api: str) -> str:
    """nats-server's ``getHash``: 8 characters of SHA-256, each byte mod 62 as a digit or letter."""
    digest = hashlib.sha256(api.encode()).digest()
    return "".join(_HASH_DIGITS[b % 62] for b in digest[:8])


def index_name(src: StreamSource) -> str:
    """nats-server's ``composeIName``: what tells one source from another (origin, filter,
    destination) and prefixes its ``Nats-Stream-Source`` value."""
    name = src.name
    if src.external is not None:
        name += ":" + api_hash(src.external.api)
    if not src.subject_transforms:
        return f"{name} {src.filter_subject or '>'} >"
    srcs = "\f".join(tr.src or ">" for tr in src.subject_transforms)
    dests = "\f".join(tr.dest or ">" for tr in src.subject_transforms)
    return f"{name} {srcs} {dests}"


def source_header(iname: str, seq: int, subject: str, identity: str) -> str:
    """The ``Nats-Stream-Source`` value of the copy of origin message ``seq`` on ``subject``."""
    name, filt, dest = iname.split(" ", 2)
    value = f"{name} {seq} {filt} {dest} {subject}"
    return f"{value} {identity}" if identity else value


def parse_source_header(value: str) -> tuple[str, str, int, str] | None:
    """(origin, index name, origin seq, origin identity) of a ``Nats-Stream-Source`` value, in
    every form nats-server has written (the ack reply of 2.2-2.9, ``<name> <seq>``, and the
    2.10+ form :func:`source_header` writes); index name and identity are "" when the form has
    none. None when it is none of them."""
    if value.startswith("$JS.ACK."):
        toks = value.split(".")
        if len(toks) != 9 or not toks[5].isdigit():
            return None
        return toks[2], "", int(toks[5]), ""
    fields = value.split(" ")
    n = len(fields)
    if (n != 2 and n <= 3) or not fields[1].isdigit():
        return None
    if n == 2:
        return fields[0], "", int(fields[1]), ""
    identity = fields[5] if n >= 6 else ""
    return fields[0], f"{fields[0]} {fields[2]} {fields[3]}", int(fields[1]), identity


def with_source_header(hdr: bytes, value: str) -> bytes:
    """``hdr`` less ``Nats-Expected-*`` and any ``Nats-Stream-Source`` (a copy of a copy names
    only its own origin), with ``Nats-Stream-Source: value`` last."""
    lines: list[bytes] = []
    if hdr:
        hdr = strip_expected(hdr)
    if hdr:
        lines = [ln for ln in hdr.split(b"\r\n")[1:] if ln and not ln.startswith(_SOURCE_KEY + b":")]
    first = hdr.split(b"\r\n", 1)[0] if hdr else b"NATS/1.0"
    return b"\r\n".join([first, *lines, _SOURCE_KEY + b": " + value.encode()]) + b"\r\n\r\n"


class Source:
    """One source of a stream: its position, its link, its info."""

    def __init__(self, owner: Sources, cfg: StreamSource, iname: str, bus: MessageBus) -> None:
        self.owner = owner
        self.config = cfg
        self.iname = iname
        self.sseq = 0  # the last origin sequence copied
        self.identity = ""  # the origin incarnation copied from ("" until known)
        self._transforms = TransformChain(cfg.subject_transforms)
        self.link = OriginLink(bus, self, "source", owner.stream.name, cfg.name, cfg.external)

    # -- the link's owner -----------------------------------------------------------------------

    def request(self) -> ConsumerConfig:
        cfg = self.config
        filters = [tr.src or ">" for tr in cfg.subject_transforms]
        one = cfg.filter_subject or (filters[0] if len(filters) == 1 else "")
        many = filters if len(filters) > 1 else None
        if self.sseq:
            return link_config(start_seq=self.sseq + 1, filter_subject=one, filter_subjects=many)
        if cfg.opt_start_seq > 0:
            return link_config(start_seq=cfg.opt_start_seq, filter_subject=one, filter_subjects=many)
        # nothing of this source in the stream: nats-server's rules for where to begin
        st = self.owner.stream.store.state()
        start_time: str | None = None
        if cfg.opt_start_time is not None:
            start_time = cfg.opt_start_time
            if st.last_ts and _before(cfg.opt_start_time, st.last_ts):
                start_time = format_time(st.last_ts)
        elif st.first_seq > 1 and st.last_ts:
            start_time = format_time(st.last_ts)  # copies of it may have been purged: not before
        return link_config(start_time=start_time, filter_subject=one, filter_subjects=many)

    def created(self, info: ConsumerCreateResponse, identity: str) -> bool:
        if identity and self.identity and identity != self.identity:
            log.warning(
                "JetStream source stream \"%s\" for stream '$G > %s' was recreated, resetting source state",
                self.config.name,
                self.owner.stream.name,
            )
            self.identity = identity
            self.sseq = 0
            return False
        if identity:
            self.identity = identity
        return True

    def message(self, subject: str, hdr: bytes, data: bytes, meta: AckReply) -> bool:
        dseq = meta.consumer_seq
        expected = self.link.dseq + 1
        if dseq > expected:
            return False  # a delivery went missing: start over after the last copied
        if dseq < expected:
            return True  # seen already
        value = source_header(self.iname, meta.stream_seq, subject, self.identity)
        if self._transforms:
            subject = self._transforms.map(subject)
        stream = self.owner.stream
        decided = stream.decide_copy(subject, with_source_header(hdr, value), data, time.time_ns())
        res = (
            decided if isinstance(decided, PublishResult) else self.owner.registry.apply_copy(stream, decided)
        )
        if res.stored is None:
            return self._refused(res, meta.stream_seq)
        self.sseq = meta.stream_seq
        return True

    def _refused(self, res: PublishResult, sseq: int) -> bool:
        """The stream would not take the copy: shown in the source's info, tried again later
        (from this message on: nothing is skipped)."""
        try:
            err = msgspec.json.decode(res.ack, type=PubAckError).error
        except msgspec.DecodeError:
            err = ApiErrorBody(code=500, description=res.ack.decode(errors="replace"))
        if err.description not in _LIMIT_ERRORS:  # a full stream with discard new clears up by itself
            log.warning(
                "Error processing inbound source %r for '$G' > '%s': %s",
                self.iname,
                self.owner.stream.name,
                err.description,
            )
        self.link.err = err
        return False

    def info(self, now: int) -> StreamSourceInfo:
        return self.link.info(self.config, now, self.sseq)


def _before(rfc3339: str, ns: int) -> bool:
    return parse_time(rfc3339) < ns


class Sources:
    """The sources of one stream."""

    def __init__(self, stream: Stream, registry: StreamRegistry, bus: MessageBus) -> None:
        self.stream = stream
        self.registry = registry
        self.bus = bus
        self.sources: dict[str, Source] = {}  # by index name, in config order
        for cfg in stream.config.sources:
            iname = index_name(cfg)
            self.sources[iname] = Source(self, cfg, iname, bus)

    def start(self) -> None:
        self._recover(list(self.sources.values()))
        for src in self.sources.values():
            src.link.start()

    def stop(self) -> None:
        for src in self.sources.values():
            src.link.stop()

    def nudge(self, origin: str, gone: bool = False) -> None:
        """A stream named ``origin`` appeared or went (``gone``) on this server."""
        for src in self.sources.values():
            if src.config.name == origin and src.config.external is None:
                src.link.nudge(gone)

    def update(self) -> None:
        """The stream's ``sources`` changed: start the new ones, stop those gone."""
        wanted = {index_name(cfg): cfg for cfg in self.stream.config.sources}
        for iname in [i for i in self.sources if i not in wanted]:
            self.sources.pop(iname).link.stop()
        added = [
            Source(self, cfg, iname, self.bus) for iname, cfg in wanted.items() if iname not in self.sources
        ]
        kept = self.sources
        self.sources = {
            iname: kept.get(iname) or next(s for s in added if s.iname == iname) for iname in wanted
        }
        self._recover(added)
        for src in added:
            src.link.start()

    def _recover(self, sources: list[Source]) -> None:
        """Each source's position: its newest copy in the stream (read backwards)."""
        if not sources:
            return
        store = self.stream.store
        st = store.state()
        if not st.msgs:
            return
        by_iname = {s.iname: s for s in sources}
        seq = st.last_seq
        while by_iname and seq >= st.first_seq:
            m = store.load_msg(seq)
            seq -= 1
            if m is None or not m.hdr:
                continue
            raw = get_header(m.hdr, _SOURCE_KEY)
            parsed = parse_source_header(raw.decode(errors="replace")) if raw else None
            if parsed is None:
                continue
            origin, iname, sseq, identity = parsed
            if iname:
                found = [by_iname[iname]] if iname in by_iname else []
            else:  # an older form names only the stream: good for every source of it
                found = [s for s in by_iname.values() if _named(s, origin)]
            for src in found:
                src.sseq = sseq
                src.identity = identity
                del by_iname[src.iname]

    # -- report ---------------------------------------------------------------------------------

    def mirror_info(self, now: int) -> StreamSourceInfo | None:
        return None

    def sources_info(self, now: int) -> list[StreamSourceInfo]:
        return [src.info(now) for src in self.sources.values()]


def _named(src: Source, origin: str) -> bool:
    cfg = src.config
    if cfg.external is not None:
        return origin == f"{cfg.name}:{api_hash(cfg.external.api)}"
    return origin == cfg.name
