"""Mirror: a stream that follows another one, message for message, with the origin's numbers.

Owns what a mirror does with what its :class:`~jetpy.jetstream.origin.OriginLink` brings:
every message is stored under the origin's sequence, subject (after the mirror's own
``subject_transforms``), headers (less ``Nats-Expected-*``) and timestamp; a message the mirror
already has is ignored; sequences the origin no longer had when they were due (expired, deleted,
purged before they were copied) are skipped as nats-server skips them, so they read as deleted in
the mirror's state, and the skip is logged. Where to start: the mirror's ``opt_start_seq`` /
``opt_start_time`` / ``filter_subject`` the first time, later right after what it holds.

Unlike nats-server (which starts after its last message and never looks back) a mirror that
holds messages starts *at* its last one and checks that the origin still has that very message
(sequence, subject, timestamp, headers, payload): an origin deleted and created again with other
contents, or restored from an older backup, is then reported in the mirror's info (``error``)
and copying stops, rather than two histories being mixed under one numbering. An origin restored
with the same history, or re-created past the mirror's last sequence, is simply followed.

Also: ``mirror_direct``, which makes the mirror answer direct gets for its origin's name once it
has nearly caught up (fewer than 10 messages behind, as nats-server), and the ``mirror`` block of
the stream's info. Must not know: how the origin consumer is set up (the link's), stores'
internals, the API.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import ConsumerCreateResponse
from jetpy.jetstream.consumers.acks import AckReply
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, StreamSourceInfo
from jetpy.jetstream.origin import OriginLink, TransformChain, link_config, strip_expected
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.stream import PublishResult, SkipEntry, Stream

__all__ = ["DIRECT_CAUGHT_UP", "Mirror"]

log = logging.getLogger("jetpy.jetstream")

DIRECT_CAUGHT_UP: Final = 10
"""A mirror with ``mirror_direct`` answers direct gets once fewer than this many messages of its
origin are still to be copied (nats-server's ``dgetCaughtUpThresh``)."""

DirectHook = Callable[["Mirror", bool], None]  # (mirror, answers direct gets now)


class Mirror:
    def __init__(self, stream: Stream, registry: StreamRegistry, bus: MessageBus, direct: DirectHook) -> None:
        cfg = stream.config.mirror
        assert cfg is not None
        self.stream = stream
        self.registry = registry
        self.config = cfg
        self.origin = cfg.name
        self._direct = direct
        self.direct = False  # answering direct gets for the origin's name
        self._transforms = TransformChain(cfg.subject_transforms)
        self._last = 0  # the mirror's last sequence (what the next message must follow)
        self._verify = 0  # a sequence the origin must still have as the mirror has it (0: none)
        self.link = OriginLink(bus, self, "mirror", stream.name, cfg.name, cfg.external)

    def start(self) -> None:
        self.link.start()

    def stop(self) -> None:
        self.link.stop()
        self._answer_direct(False)

    def nudge(self, origin: str, gone: bool = False) -> None:
        """A stream named ``origin`` appeared or went (``gone``) on this server."""
        if origin == self.origin and self.config.external is None:
            self.link.nudge(gone)

    def stop_direct(self) -> None:
        self._answer_direct(False)

    # -- the link's owner -----------------------------------------------------------------------

    def request(self) -> ConsumerConfig:
        cfg = self.config
        self._answer_direct(False)  # until caught up again with the new consumer
        st = self.stream.store.state()
        self._last = st.last_seq
        self._verify = 0
        filters = [tr.src or ">" for tr in cfg.subject_transforms]
        one = cfg.filter_subject or (filters[0] if len(filters) == 1 else "")
        many = filters if len(filters) > 1 else None
        if st.msgs == 0 and st.first_seq == 0:  # never held anything: the configured start
            return link_config(
                start_seq=cfg.opt_start_seq,
                start_time=cfg.opt_start_time,
                filter_subject=one,
                filter_subjects=many,
            )
        start = st.last_seq + 1
        if st.msgs and self.stream.store.load_msg(st.last_seq) is not None:
            start = self._verify = st.last_seq  # see the module doc
        return link_config(start_seq=start, filter_subject=one, filter_subjects=many)

    def created(self, info: ConsumerCreateResponse, identity: str) -> bool:
        delivered = info.delivered.stream_seq if info.delivered is not None else 0
        if self._verify and delivered >= self._verify:
            self._verify = 0  # the origin no longer has the mirror's last message: nothing to check
        if delivered > self._last:
            # the origin has nothing at or below ``delivered`` for us: take its numbering there
            self._skip(self._last + 1, delivered, "the origin starts after them")
        self._lag_report(info.num_pending or 0)
        return True

    def message(self, subject: str, hdr: bytes, data: bytes, meta: AckReply) -> bool:
        sseq = meta.stream_seq
        if self._verify:
            verify, self._verify = self._verify, 0
            if sseq == verify:
                return self._verified(subject, hdr, data, meta)
        last = self._last
        if sseq <= last:
            return True  # had it already
        if sseq != last + 1:
            # deliveries in a row with a jump in the origin's sequences: it no longer has those
            if meta.consumer_seq != self.link.dseq + 1:
                return False  # a delivery went missing: start over from what the mirror holds
            self._skip(last + 1, sseq - 1, "the origin no longer has them")
        if self._transforms:
            subject = self._transforms.map(subject)
        if hdr:
            hdr = strip_expected(hdr)
        stream = self.stream
        decided = stream.decide_copy(subject, hdr, data, meta.ts)
        if isinstance(decided, PublishResult):
            return self._refused(decided, sseq)
        res = self.registry.apply_copy(stream, decided)
        if res.stored is None:
            return self._refused(res, sseq)
        self._last = res.stored.seq
        if res.stored.seq != sseq:  # the store disagrees with the origin's numbering: start over
            log.error(
                "JetStream mirror '%s' stored %d for %d of '%s'",
                stream.name,
                res.stored.seq,
                sseq,
                self.origin,
            )
            return False
        self._lag_report(meta.pending)
        return True

    # -- helpers --------------------------------------------------------------------------------

    def _verified(self, subject: str, hdr: bytes, data: bytes, meta: AckReply) -> bool:
        mine = self.stream.store.load_msg(meta.stream_seq)
        if self._transforms:
            subject = self._transforms.map(subject)
        if hdr:
            hdr = strip_expected(hdr)
        copy = self.stream.decide_copy(subject, hdr, data, meta.ts)  # what storing it would store
        if (
            mine is None
            or isinstance(copy, PublishResult)
            or (mine.subject, mine.ts, mine.hdr, mine.data) == (copy.subject, copy.ts, copy.hdr, copy.payload)
        ):
            self._lag_report(meta.pending)
            return True
        log.warning(
            "JetStream mirror '%s': origin '%s' no longer has the history the mirror copied (message %d "
            "differs); copying stopped",
            self.stream.name,
            self.origin,
            meta.stream_seq,
        )
        self.link.fail(
            ApiError.of(
                E.MIRROR_CONSUMER_SETUP_FAILED,
                err=f"origin stream {self.origin!r} diverged from this mirror at sequence {meta.stream_seq} "
                "(deleted and created again?): copying stopped",
            )
        )
        self._answer_direct(False)
        return True

    def _skip(self, first: int, last: int, why: str) -> None:
        if last < first:
            return
        stream = self.stream
        self.registry.skip(stream, SkipEntry(first, last - first + 1))
        self._last = last
        if stream.store.state().msgs:  # an empty mirror just starts later: nothing to report
            log.warning(
                "JetStream mirror '%s' skipped sequences %d-%d of '%s': %s",
                stream.name,
                first,
                last,
                self.origin,
                why,
            )

    def _refused(self, res: PublishResult, sseq: int) -> bool:
        log.warning(
            "JetStream mirror '%s' could not store message %d of '%s': %s",
            self.stream.name,
            sseq,
            self.origin,
            res.ack.decode(errors="replace"),
        )
        return False

    def _lag_report(self, pending: int) -> None:
        if self.stream.config.mirror_direct and not self.direct and pending < DIRECT_CAUGHT_UP:
            self._answer_direct(True)

    def _answer_direct(self, on: bool) -> None:
        if on != self.direct:
            self.direct = on
            self._direct(self, on)

    # -- report ---------------------------------------------------------------------------------

    def info(self, now: int) -> StreamSourceInfo:
        return self.link.info(self.config, now)

    def mirror_info(self, now: int) -> StreamSourceInfo | None:
        return self.info(now)

    def sources_info(self, now: int) -> list[StreamSourceInfo]:
        return []
