"""Interest retention on a cluster: an interest stream's message goes once every consumer that
wants it has acknowledged it, decided by the stream's leader and removed through the stream's
log (a ``DeleteOp`` per message: every replica removes the same messages at the same point of
its log), never by each replica on its own (a server runs the engines only of the consumers it
leads, so no two would agree).

Owns: the rule as the stream's leader applies it, from what its own server holds: each of the
stream's consumers as the meta group names them, by its replica here and its replicated state
(:meth:`.consumers.ConsumerReplica.wants`, an R1 one's :meth:`.local_consumer.LocalConsumer.wants`: on its subjects, neither at or below its ack floor
nor delivered and no longer pending); a mirror's or a source's consumer of this stream (run by
the stream's leader outside the meta group) does not count, as with nats-server. A message
nobody wants is removed as well: one published while the stream has no consumer, or none whose
filter matches it (nats-server keeps neither). While one of the stream's consumers has no
replica here yet (its assignment not applied here), the stream keeps everything. An R1 stream
held locally follows the same rule, its removals made at once (``LocalStream.remove_acked``).

The leader looks at each message stored while it leads (the consumers' host tells it instead of
removing anything itself: ``ConsumerManager.interest_decided``), at what a consumer
acknowledged (each state change its replica here applies: the sequences it left pending, those
its ack floor passed) and, every :data:`SWEEP_EVERY` seconds, at a slice of each stream it leads
in turn (a removal lost in an election, a consumer deleted, a leader new to the stream). Must
not know: Raft, the wire, the API.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Final

from jetpy.jetstream.stream import Stream
from jetpy.server.jscluster.local import Replica
from jetpy.server.jscluster.local_consumer import HeldConsumer

__all__ = ["InterestRetention"]

log = logging.getLogger("jetpy.jetstream")

SWEEP_EVERY: Final = 1.0  # seconds between the leader's looks through its interest streams
SWEEP_SLICE: Final = 4096  # messages of one stream one look reads (the next look goes on)
STEP: Final = 256  # messages per bulk read


class InterestRetention:
    """One account's interest streams on this server (see the module doc)."""

    def __init__(
        self,
        streams: Mapping[str, Replica],
        consumers_of: Callable[[str], Collection[str]],
        consumer: Callable[[str, str], HeldConsumer | None],
    ) -> None:
        self._streams = streams  # this server's replicas, by stream name
        self._consumers_of = consumers_of  # the stream's consumers' names, as the meta group holds them
        self._consumer = consumer  # this server's replica of a consumer
        self._candidates: dict[str, list[tuple[int, int]]] = {}  # stream -> ranges to look at
        self._scheduled = False
        self._removing: dict[str, set[int]] = {}  # proposed, not yet settled
        self._cursor: dict[str, int] = {}  # where the next sweep of a stream goes on
        self._sweeper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="interest-sweep")

    def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
        for task in self._tasks:
            task.cancel()
        self._candidates.clear()

    # -- what happened (every replica is told; the stream's leader acts) --------------------------

    def stored(self, stream: Stream, seq: int) -> None:
        """A message applied to this server's replica of an interest stream."""
        self._look(stream.name, seq, seq)

    def acknowledged(self, stream: str, old_floor: int, new_floor: int, gone: list[int]) -> None:
        """A consumer's replica here applied a state change: what it may have acknowledged."""
        if new_floor > old_floor:
            self._look(stream, old_floor + 1, new_floor)
        for seq in gone:
            self._look(stream, seq, seq)

    def _look(self, name: str, lo: int, hi: int) -> None:
        rep = self._leading(name)
        if rep is None:
            return
        self._candidates.setdefault(name, []).append((lo, hi))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _leading(self, name: str) -> Replica | None:
        """This server's replica of the interest stream ``name`` when it decides for it."""
        rep = self._streams.get(name)
        if rep is None or rep.stream.config.retention != "interest":
            return None
        return rep if rep.is_leader and rep.serving else None

    def _flush(self) -> None:
        self._scheduled = False
        candidates, self._candidates = self._candidates, {}
        for name, ranges in candidates.items():
            rep = self._leading(name)
            if rep is None:
                continue
            ranges.sort()
            merged: list[list[int]] = []
            for lo, hi in ranges:
                if merged and lo <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], hi)
                else:
                    merged.append([lo, hi])
            for lo, hi in merged:
                try:
                    rest = self._check(rep, lo, hi, SWEEP_SLICE)
                except Exception:  # (its store closed by a delete meanwhile)
                    log.exception("stream '%s': interest check failed", name)
                    break
                if rest:  # a long range (an ack floor's jump): the rest in a later turn
                    self._look(name, rest, hi)

    # -- the rule ---------------------------------------------------------------------------------

    def _check(self, rep: Replica, lo: int, hi: int, most: int) -> int:
        """Remove what nobody wants among up to ``most`` stored messages from ``lo`` through
        ``hi``; the sequence after the last one read (0: none left up to ``hi``)."""
        stream = rep.stream
        consumers = self._consumers(stream)
        if consumers is None:
            return 0  # a consumer unknown here yet: everything is kept
        replicas = consumers
        store = stream.store
        removing = self._removing.get(stream.name) or set()
        found: list[int] = []
        seq, read, done = max(lo, store.state().first_seq, 1), 0, False
        while not done and seq <= hi and read < most:
            batch = store.load_next_batch("", seq, min(STEP, most - read))
            done = not batch
            for m in batch:
                if m.seq > hi:
                    done = True
                    break
                seq = m.seq + 1
                read += 1
                if m.seq in removing:
                    continue
                subject = m.subject
                if any(r.wants(m.seq, subject) for r in replicas):
                    continue
                found.append(m.seq)
        if found:
            self._removing.setdefault(stream.name, set()).update(found)
            task = asyncio.get_running_loop().create_task(self._remove(rep, found))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return 0 if done or seq > hi else seq

    def _consumers(self, stream: Stream) -> list[HeldConsumer] | None:
        replicas = []
        for name in self._consumers_of(stream.name):
            rep = self._consumer(stream.name, name)
            if rep is None:
                return None
            replicas.append(rep)
        return replicas

    async def _remove(self, rep: Replica, seqs: list[int]) -> None:
        try:
            await rep.remove_acked(seqs)
        finally:
            removing = self._removing.get(rep.stream.name)
            if removing is not None:
                removing.difference_update(seqs)
                if not removing:
                    del self._removing[rep.stream.name]

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY)
            for name in list(self._streams):
                rep = self._leading(name)
                if rep is None:
                    self._cursor.pop(name, None)
                    continue
                try:
                    last = rep.stream.store.state().last_seq
                    self._cursor[name] = self._check(rep, self._cursor.get(name, 0), last, SWEEP_SLICE)
                except Exception:  # (its store closed by a delete meanwhile): the next look goes on
                    log.exception("stream '%s': interest sweep failed", name)
                    self._cursor.pop(name, None)
