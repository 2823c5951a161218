"""Copies from other streams on a replicated stream: the entries a mirror's or sources' copying
puts in the stream's log, and what every replica does with them.

nats-server's way: the stream's leader alone runs the mirror's or the sources' consumers on the
origins (:mod:`.copiers`), and every message it copies goes through the stream's Raft group like
a publish, so every replica stores the same copies at the same point of its log, and what was
copied (a mirror's last origin sequence, each source's newest ``Nats-Stream-Source``) is part
of the replicated state: a new leader goes on from there, with no gap and no duplicate.

Two entries (tags after :mod:`.streams`'s):

* :class:`CopyEpoch` opens a leader's copying: a number that leader draws. Every later
  :class:`CopyBatch` names the epoch it was copied in and applies only while that epoch is the
  open one, so what a deposed leader still sent (a proposal forwarded to the new leader, or
  one in flight) is ignored rather than copied twice. The new leader starts copying once its
  epoch applied on its own replica: everything before it is in its store, so the positions it
  reads there are the group's.
* :class:`CopyBatch` holds the messages copied in one turn of the leader's loop. A mirror's
  carry the origin's sequence and time stamp: applied, a sequence the stream holds already is
  ignored, one after a gap uses up the sequences in between (the origin no longer had them), so
  that a mirror's sequences are its origin's on every replica; an item without a subject only
  uses sequences up (the origin starts later). A source's are numbered anew and time-stamped
  as a publish is (the leader's stamp: replaying the log after a restart skips those the store
  holds, as for publishes: see the package doc); their ``Nats-Stream-Source`` header is the
  source's position. Each is decided on every replica as the single server decides a copy
  (``Stream.decide_copy``, the stream's limits). One refused (a full stream with discard new,
  the account's limit) closes the epoch: the later copies of it are ignored (none is stored
  after a gap), and the leader, told by the result, opens another and copies on from what the
  stream holds.

Replaying a mirror's log after a restart: a mirror's time stamps are its origin's, so which
entries its store holds already is told by sequence, not time stamp (:attr:`CopyMachine.replaying`).

A mirror promoted by an update (``mirror`` removed) keeps its copies: the publishes after
them are stamped by its leader as any, and replayed by the time-stamp rule.

Must not know: the origin consumers (:mod:`.copiers`), Raft, the API.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

import msgspec

from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.stream import PublishResult, SkipEntry, Stream

__all__ = ["STALE", "CopyBatch", "CopyEpoch", "CopyMachine", "Copying"]

log = logging.getLogger("jetpy.jetstream")

STALE: Final = b"-"  # a batch of an epoch that is not (or no longer) the open one: ignored


class Replica(Protocol):
    """What the copies need of the replica applying them (``streams.StreamReplica``)."""

    @property
    def stream(self) -> Stream: ...

    @property
    def registry(self) -> StreamRegistry: ...

    def next_stamp(self, ts: int) -> int | None:
        """The time stamp the next message of an entry stamped ``ts`` applies at; None when
        the store holds it already (decided before a restart)."""
        ...


class Copying(Protocol):
    """The leader's side of a replica's copying (:class:`~.copiers.Copier`), as the replica
    and its server drive it."""

    def lead(self, leading: bool) -> None:
        """This replica became the stream's leader (copying starts) or stopped being it (stops)."""

    def config_changed(self) -> None:
        """The stream's ``mirror`` or ``sources`` changed (applied here)."""

    def stop(self) -> None:
        """The replica stops or goes."""


class CopyEpoch(msgspec.Struct, array_like=True, frozen=True, tag=5):
    """A leader starts copying (``epoch``: a number it drew, never 0)."""

    epoch: int


class CopyBatch(msgspec.Struct, array_like=True, frozen=True, gc=False, tag=6):
    """Messages copied in one turn of the leader's loop, in the copying epoch ``epoch``.

    A mirror's: ``seqs[i]`` the origin's sequence of message ``i`` (an empty ``subjects[i]``:
    no message, sequences through ``seqs[i]`` used up), ``tss[i]`` its origin time stamp.
    Sources': ``seqs`` and ``tss`` empty, ``ts`` the leader's stamp for the first (as a
    ``PubBatch``'s). ``hdrs[i]`` is the header block as stored (``b""``: none)."""

    epoch: int
    subjects: list[str]
    hdrs: list[bytes]
    datas: list[bytes]
    seqs: list[int]
    tss: list[int]
    ts: int


class CopyMachine:
    """What one replica applies of its stream's copying entries."""

    def __init__(self, rep: Replica) -> None:
        self.rep = rep
        self.epoch = 0  # the open copying epoch (0: none)
        # a mirror's store, when the replica started, held sequences through this one; the
        # log's copies are replayed until one past it applies
        st = rep.stream.store.state()
        self._store_last = st.last_seq
        self._applied_seq = 0  # the newest origin sequence an applied mirror copy named

    @property
    def is_mirror(self) -> bool:
        return self.rep.stream.config.mirror is not None

    @property
    def replaying(self) -> bool:
        """A mirror's store holds sequences of later entries than the last one applied."""
        return self._applied_seq < self._store_last

    def restored(self, epoch: int, last_seq: int) -> None:
        """A snapshot was restored: the epoch it was taken in, what the store then held."""
        self.epoch = epoch
        self._applied_seq = max(self._applied_seq, last_seq)

    def apply(self, e: CopyEpoch | CopyBatch) -> bytes:
        """Apply one entry: b"" when every copy was stored (or held already), :data:`STALE`
        when the batch's epoch is not the open one, else ``<n>\n<refusal>``: the first ``n``
        copies were stored, the next one refused (the refusal a PubAck error)."""
        if isinstance(e, CopyEpoch):
            self.epoch = e.epoch
            return b""
        if e.epoch != self.epoch or not e.epoch:
            if not e.seqs:  # sources: the stamps go on as if applied (the same on every replica)
                for _ in e.subjects:
                    self.rep.next_stamp(e.ts)
            return STALE
        refused = self._mirror(e) if e.seqs else self._sources(e)
        if refused:
            self.epoch = 0  # the later copies of this epoch are ignored: no gap
        return refused

    def _mirror(self, b: CopyBatch) -> bytes:
        rep = self.rep
        stream, registry = rep.stream, rep.registry
        for i, (seq, subject, hdr, data, ts) in enumerate(
            zip(b.seqs, b.subjects, b.hdrs, b.datas, b.tss, strict=True)
        ):
            if seq > self._applied_seq:
                self._applied_seq = seq
            last = stream.store.state().last_seq
            if seq <= last:
                continue  # held already (copied before, or replayed after a restart)
            if not subject:
                registry.skip(stream, SkipEntry(last + 1, seq - last))
                continue
            if seq > last + 1:
                registry.skip(stream, SkipEntry(last + 1, seq - last - 1))
                if stream.store.state().msgs > 1 or last:
                    log.warning(
                        "JetStream mirror '%s' skipped sequences %d-%d of '%s': the origin no longer has them",
                        stream.name,
                        last + 1,
                        seq - 1,
                        stream.config.mirror.name if stream.config.mirror else "",
                    )
            decided = stream.decide_copy(subject, hdr, data, ts)
            res = decided if isinstance(decided, PublishResult) else registry.apply_copy(stream, decided)
            if res.stored is None:
                log.warning(
                    "JetStream mirror '%s' could not store message %d: %s",
                    stream.name,
                    seq,
                    res.ack.decode(errors="replace"),
                )
                return b"%d\n" % i + (res.ack or b"refused")
            if res.stored.seq != seq:  # cannot be while sequences are used up as above
                log.error("JetStream mirror '%s' stored %d for %d", stream.name, res.stored.seq, seq)
                return b"%d\nstored out of sequence" % i
        return b""

    def _sources(self, b: CopyBatch) -> bytes:
        rep = self.rep
        stream, registry = rep.stream, rep.registry
        refused = b""
        for i, (subject, hdr, data) in enumerate(zip(b.subjects, b.hdrs, b.datas, strict=True)):
            ts = rep.next_stamp(b.ts)
            if ts is None or refused:
                continue  # decided before the restart; or after a refusal: ignored
            decided = stream.decide_copy(subject, hdr, data, ts)
            res = decided if isinstance(decided, PublishResult) else registry.apply_copy(stream, decided)
            if res.stored is None:
                refused = b"%d\n" % i + (res.ack or b"refused")
        return refused
