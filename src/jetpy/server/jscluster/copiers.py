"""A replicated stream's mirror or sources, run by its leader (nats-server's way).

Owns the leader's side of copying (:mod:`.copying` has the entries and what every replica does
with them): when this replica becomes the stream's leader it opens a copying epoch (a
:class:`~.copying.CopyEpoch` through the stream's group) and, once that applied here (so its
store holds everything the group copied before), starts the single server's mirror or sources
(their origin consumers, their start positions read from the store, their reports) with one
difference: what they copy is not stored here but gathered per turn of the loop into a
:class:`~.copying.CopyBatch` and proposed, and every replica stores it when it applies. A
flow-control request of an origin consumer is answered once what came before it applied (the
Raft group, not this server's store, is what keeps up). A deposed leader stops copying; a
refused copy (the result of the batch) or a batch that did not make it (the group lost this
leader's quorum, say) opens a new epoch, after nats-server's back-off, and copying goes on from
what the stream holds. A change of ``sources`` by an update starts them over the same way.

Must not know: Raft's rules, the API, how the origin consumer is set up (``OriginLink``'s).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

import msgspec

from jetpy.jetstream.api.direct import DirectGet
from jetpy.jetstream.consumers.acks import AckReply
from jetpy.jetstream.mirror import Mirror
from jetpy.jetstream.models import ApiErrorBody, PubAckError, StreamSource
from jetpy.jetstream.origin import OriginLink, retry_backoff, strip_expected
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.sources import Source, Sources, source_header, with_source_header
from jetpy.server.jscluster.copying import STALE, CopyBatch, CopyEpoch
from jetpy.server.jscluster.streams import BATCH_BYTES, BATCH_MSGS, DIRECT_QUEUE, StreamReplica
from jetpy.server.nrg import ProposalError

__all__ = ["Copier"]

log = logging.getLogger("jetpy.jetstream")

EPOCH_RETRY = 0.5  # seconds before a new leader tries to open its epoch again
_encode = msgspec.msgpack.Encoder().encode

Gate = Callable[[Callable[[], None]], None]  # run this once what was copied so far applied


class ClusterLink(OriginLink):
    """An origin consumer whose flow control waits for the copies to apply in the group."""

    gate: Gate | None = None

    def _answer(self, subject: str) -> None:
        gate = self.gate
        if gate is None:
            super()._answer(subject)
        else:
            gate(lambda: OriginLink._answer(self, subject))


class ClusterMirror(Mirror):
    """The single server's mirror, its copies proposed (:meth:`Copier.add`); with
    ``mirror_direct``, the leader answers its origin's direct gets once caught up."""

    def __init__(self, copier: Copier) -> None:
        rep = copier.rep
        super().__init__(rep.stream, rep.registry, rep.bus, copier.mirror_direct)
        cfg = self.config
        self.link = ClusterLink(rep.bus, self, "mirror", rep.stream.name, cfg.name, cfg.external)
        self.link.gate = copier.gate
        self._copier = copier

    def message(self, subject: str, hdr: bytes, data: bytes, meta: AckReply) -> bool:
        sseq = meta.stream_seq
        if self._verify:
            verify, self._verify = self._verify, 0
            if sseq == verify:
                return self._verified(subject, hdr, data, meta)
        last = self._last
        if sseq <= last:
            return True  # had it already
        if sseq != last + 1 and meta.consumer_seq != self.link.dseq + 1:
            return False  # a delivery went missing: start over from what the mirror holds
        if self._transforms:
            subject = self._transforms.map(subject)
        if hdr:
            hdr = strip_expected(hdr)
        self._copier.add(subject, hdr, data, sseq, meta.ts)  # a gap is used up where applied
        self._last = sseq
        self._lag_report(meta.pending)
        return True

    def _skip(self, first: int, last: int, why: str) -> None:
        if last >= first:
            self._copier.add("", b"", b"", last, 0)
            self._last = last


class ClusterSource(Source):
    """The single server's source, its copies proposed (:meth:`Copier.add`)."""

    def __init__(self, owner: ClusterSources, cfg: StreamSource, iname: str, bus: MessageBus) -> None:
        super().__init__(owner, cfg, iname, bus)
        copier = owner.copier
        self.link = ClusterLink(bus, self, "source", owner.stream.name, cfg.name, cfg.external)
        self.link.gate = copier.gate
        self._copier = copier

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
        self.sseq = meta.stream_seq
        self._copier.add(subject, with_source_header(hdr, value), data, 0, 0, self)
        return True


class ClusterSources(Sources):
    """The single server's sources of a stream, each a :class:`ClusterSource`."""

    def __init__(self, copier: Copier) -> None:
        rep = copier.rep
        self.copier = copier
        super().__init__(rep.stream, rep.registry, rep.bus)
        self.sources = {
            iname: ClusterSource(self, src.config, iname, rep.bus) for iname, src in self.sources.items()
        }

    def start(self) -> None:
        """Each source from its newest copy in the stream, or from the newest this leader saw
        stored (the stream may have been purged since: a full stream made room)."""
        self._recover(list(self.sources.values()))
        stored = self.copier.stored
        for src in self.sources.values():
            got = stored.get(src.iname)
            if got is not None and got[0] > src.sseq:
                src.sseq, src.identity = got
            src.link.start()


class Copier:
    """The leader's copying for one replica (see the module doc)."""

    def __init__(self, rep: StreamReplica) -> None:
        self.rep = rep
        self.epoch = 0  # this leader's open epoch (0: not copying)
        self._leading = False
        self._owner: ClusterMirror | ClusterSources | None = None
        self._task: asyncio.Task[None] | None = None
        self._fails = 0  # batches refused or lost in a row (nats-server's back-off)
        self._err: ApiErrorBody | None = None  # the last refusal, shown until copying works again
        self._inflight: asyncio.Future[list[bytes]] | None = None  # the newest batch proposed
        self._direct_subs: list[object] = []  # the origin's direct-get subjects (mirror_direct)
        # each source's newest copy known stored while leading (index name -> seq, identity)
        self.stored: dict[str, tuple[int, str]] = {}
        # the batch being gathered in this turn of the loop (sources: each copy's position)
        self._positions: list[tuple[str, int, str]] = []
        self._subjects: list[str] = []
        self._hdrs: list[bytes] = []
        self._datas: list[bytes] = []
        self._seqs: list[int] = []
        self._tss: list[int] = []
        self._bytes = 0

    # -- driven by the replica and its server -------------------------------------------------------

    def lead(self, leading: bool) -> None:
        self._leading = leading
        self.stored = {}
        if leading:
            self._restart(0.0)
        else:
            self._halt(deposed=True)

    def config_changed(self) -> None:
        if self._leading:
            self._restart(0.0)

    def stop(self) -> None:
        self._leading = False
        self._halt()

    # -- epochs ----------------------------------------------------------------------------------------

    def _halt(self, deposed: bool = False) -> None:
        """Stop copying (the owner's consumers deleted, or left to their inactivity threshold
        by a ``deposed`` leader, as nats-server's: its report stays until replaced)."""
        self.epoch = 0
        if self._task is not None:
            self._task.cancel()
            self._task = None
        owner = self._owner
        if owner is not None:
            if deposed:
                for link in _links(owner):
                    link.leave()
            owner.stop()
        self.mirror_direct(None, False)
        self._drop_batch()
        self._inflight = None
        if not self._leading and owner is not None:
            self._owner = None
            if self.rep.stream.origins is owner:
                self.rep.stream.origins = None

    def _restart(self, delay: float) -> None:
        self._halt()
        cfg = self.rep.stream.config
        if cfg.mirror is None and not cfg.sources:
            self._owner = None
            self.rep.stream.origins = None
            return
        # reported from now on (the create's answer and infos show the mirror or sources at
        # once, as nats-server's), started once the epoch is open
        owner: ClusterMirror | ClusterSources = (
            ClusterMirror(self) if cfg.mirror is not None else ClusterSources(self)
        )
        if self._err is not None:
            for link in _links(owner):
                link.err = self._err  # until its consumer is set up again
        self._owner = owner
        self.rep.stream.origins = owner
        self._task = asyncio.get_running_loop().create_task(self._open(owner, delay))

    async def _open(self, owner: ClusterMirror | ClusterSources, delay: float) -> None:
        """Open this leader's epoch, then start copying from what the store holds."""
        rep = self.rep
        if delay:
            await asyncio.sleep(delay)
        while True:
            group = rep.group
            if group is None or not group.is_leader or not self._leading:
                return
            epoch = random.randrange(1, 1 << 62)
            try:
                await group.propose(_encode(CopyEpoch(epoch)))
            except ProposalError as exc:
                log.debug("stream '%s': copying not started yet: %s", rep.stream.name, exc)
                await asyncio.sleep(EPOCH_RETRY)
                continue
            if rep.copies.epoch == epoch and group.is_leader:
                break
            await asyncio.sleep(EPOCH_RETRY)  # held (the replica still catching up): again later
        self._task = None
        self.epoch = epoch
        owner.start()

    # -- copies ----------------------------------------------------------------------------------------

    def add(
        self, subject: str, hdr: bytes, data: bytes, seq: int, ts: int, source: Source | None = None
    ) -> None:
        """A copy (a mirror's: ``seq``, ``ts`` its origin's; a source's: 0, 0, and the source at
        its position), proposed at the end of this turn of the loop with the others of it."""
        if not self.epoch:
            return
        if not self._subjects:
            asyncio.get_running_loop().call_soon(self._propose)
        if source is not None:
            self._positions.append((source.iname, source.sseq, source.identity))
        self._subjects.append(subject)
        self._hdrs.append(hdr)
        self._datas.append(data)
        if seq:
            self._seqs.append(seq)
            self._tss.append(ts)
        self._bytes += len(hdr) + len(data)
        if len(self._subjects) >= BATCH_MSGS or self._bytes >= BATCH_BYTES:
            self._propose()

    def _drop_batch(self) -> None:
        self._subjects, self._hdrs, self._datas, self._seqs, self._tss = [], [], [], [], []
        self._positions = []
        self._bytes = 0

    def _propose(self) -> None:
        if not self._subjects or not self.epoch:
            return
        rep, group = self.rep, self.rep.group
        n = len(self._subjects)
        ts = 0 if self._seqs else rep.stamp(n)
        item = _encode(
            CopyBatch(self.epoch, self._subjects, self._hdrs, self._datas, self._seqs, self._tss, ts)
        )
        positions = self._positions
        self._drop_batch()
        epoch = self.epoch
        try:
            if group is None or not group.is_leader:
                raise ProposalError("not the stream's leader")
            fut = group.propose_nowait(item)
        except ProposalError as exc:
            self._lost(epoch, str(exc))
            return
        self._inflight = fut
        fut.add_done_callback(lambda f: self._applied(f, epoch, positions))

    def _applied(
        self, fut: asyncio.Future[list[bytes]], epoch: int, positions: list[tuple[str, int, str]]
    ) -> None:
        if epoch != self.epoch:
            return  # copying started over meanwhile
        if fut.cancelled() or fut.exception() is not None:
            self._lost(epoch, "cancelled" if fut.cancelled() else str(fut.exception()))
            return
        result = fut.result()[0]
        if not result:
            self._note(positions)
            if self._fails or self._err is not None:
                self._fails, self._err = 0, None
            return
        if result == STALE:
            self._lost(epoch, "its copying epoch was closed")
            return
        count, _, result = result.partition(b"\n")
        self._note(positions[: int(count)] if count.isdigit() else [])
        try:
            self._err = msgspec.json.decode(result, type=PubAckError).error
        except (msgspec.DecodeError, ValueError):
            self._err = ApiErrorBody(code=500, description=result.decode(errors="replace"))
        if self._owner is not None:
            for link in _links(self._owner):
                link.err = self._err
        self._lost(epoch, self._err.description)

    def _note(self, positions: list[tuple[str, int, str]]) -> None:
        for iname, seq, identity in positions:
            self.stored[iname] = (seq, identity)

    def _lost(self, epoch: int, why: str) -> None:
        """Copies of ``epoch`` were refused or may not have been stored: start over (a new
        epoch, from what the stream holds), after a back-off."""
        if epoch != self.epoch or not self._leading:
            return
        log.info("stream '%s': copying starts over: %s", self.rep.stream.name, why)
        self._fails += 1
        self._restart(min(2.0 + retry_backoff(self._fails - 1), 30.0))

    def mirror_direct(self, mirror: Mirror | None, on: bool) -> None:
        """Answer direct gets for the origin's name (``on``), in the queue group of its
        replicas' (nats-server's ``mirror_direct``: the mirror's leader, while it is fewer than
        ``DIRECT_CAUGHT_UP`` messages behind), or stop."""
        subs = self._direct_subs
        if not on:
            self._direct_subs = []
            for sub in subs:
                self.rep.bus.unsubscribe(sub)
            return
        cfg = self.rep.stream.config.mirror
        if subs or cfg is None:
            return
        origin, stream, bus = cfg.name, self.rep.stream, self.rep.bus
        direct = DirectGet({}, bus, lambda name: stream if name == origin else None)
        subjects = [(f"$JS.API.DIRECT.GET.{origin}", direct.handle)]
        if self.rep.domain:
            subjects.append((f"$JS.{self.rep.domain}.API.DIRECT.GET.{origin}", direct.handle_domain))
        for subject, handle in subjects:
            subs += [
                bus.subscribe(subject, handle, DIRECT_QUEUE),
                bus.subscribe(f"{subject}.>", handle, DIRECT_QUEUE),
            ]

    def gate(self, then: Callable[[], None]) -> None:
        """Run ``then`` once the copies gathered so far applied here (a flow-control answer)."""
        if self._subjects:
            self._propose()
        fut = self._inflight
        if fut is None or fut.done():
            then()
        else:
            fut.add_done_callback(lambda _f: then())


def _links(owner: ClusterMirror | ClusterSources) -> list[OriginLink]:
    if isinstance(owner, ClusterMirror):
        return [owner.link]
    return [src.link for src in owner.sources.values()]
