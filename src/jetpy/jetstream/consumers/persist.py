"""StateWriter: when a durable consumer's state is written, and when an AckSync may be confirmed.

Durable consumer state is written by one background task. Plain acks (no reply) only mark the
consumer dirty, and dirty states are written paced: at most every ``STATE_WRITE_INTERVAL`` and
with at most ``STATE_WRITE_SHARE`` of the CPU, so a consumer with tens of thousands of pending
acks is written less often (lagging state only means more redelivery after a crash).

An ack with a reply (nats-py's ``ack_sync``, the double ack) is confirmed only once the state
that covers it is on disk: the confirmation is parked, the next write of that consumer starts at
once (no pacing), and every confirmation parked before the state was taken is sent after its
fsync: group commit, as the committer does for messages, so many acks cost one write. A crash
can then never bring back an acknowledgement that was confirmed.

Every state written is clamped to what the stream has made durable (``Durability.durable_upto``):
a delivered sequence that a crash could take from the stream would be handed out again to a new
message, which the consumer would then skip. An AckSync of a message the stream has not synced
yet therefore also waits for the stream's next commit (asked for at once), and is confirmed by
the state write after it. A write that fails drops the confirmations it carried (the client's
AckSync times out: not confirmed), and the failure is logged.

Consumers without a state store (memory storage, ephemeral consumers) are not tracked here:
their confirmation goes out when the ack is applied, and means just that.

Must not know: how a consumer applies acks (it asks for :meth:`Consumer.snapshot`), the API, or
the file format (``ConsumerStore``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from jetpy.jetstream.consumers.delivery import Send
from jetpy.jetstream.stream import Stream
from jetpy.store.base import ConsumerState, ConsumerStore, StreamStore

if TYPE_CHECKING:
    from jetpy.jetstream.consumers.consumer import Consumer

__all__ = ["STATE_WRITE_INTERVAL", "STATE_WRITE_SHARE", "Durability", "StateWriter", "clamp_state"]

log = logging.getLogger("jetpy.jetstream")

# Paced writes (no confirmation waiting) happen at most this often, and take at most this share
# of the CPU (each is a msgpack encode of every pending ack plus an atomic file replace with
# fsyncs).
STATE_WRITE_INTERVAL = 0.05
STATE_WRITE_SHARE = 0.02

# A parked confirmation: (reply subject, stream sequence of the acked message).
_Confirm = tuple[str, int]


class Durability(Protocol):
    """What the host needs to know and say about the stream's durability (the committer)."""

    def durable_upto(self, store: StreamStore) -> int | None:
        """The highest sequence of ``store`` known to be on disk (None: nothing committed yet)."""

    def mark_dirty(self, stream: Stream) -> None:
        """Ask for a commit of the stream (removals by retention; messages an AckSync waits on)."""


def clamp_state(st: ConsumerState, upto: int) -> ConsumerState:
    """``st`` limited to stream sequences up to ``upto``: what is above it counts as never
    delivered (and is delivered again)."""
    if st.delivered_stream_seq <= upto:
        return st
    pending = {s: v for s, v in st.pending.items() if s <= upto}
    return ConsumerState(
        delivered_consumer_seq=st.delivered_consumer_seq,
        delivered_stream_seq=upto,
        ack_floor_consumer_seq=min(st.ack_floor_consumer_seq, st.delivered_consumer_seq),
        ack_floor_stream_seq=min(st.ack_floor_stream_seq, upto),
        pending=pending,
        redelivered={s: v for s, v in st.redelivered.items() if s in pending},
    )


class StateWriter:
    def __init__(self, send: Send, durability: Durability) -> None:
        self._send = send
        self.durability = durability
        self._stores: dict[Consumer, ConsumerStore] = {}
        self._dirty: set[Consumer] = set()
        self._confirms: dict[Consumer, list[_Confirm]] = {}  # to release after the next write
        self._held: dict[Consumer, list[_Confirm]] = {}  # waiting for the stream's commit
        self._wanted = asyncio.Event()  # something is dirty
        self._urgent = asyncio.Event()  # a confirmation is parked: write now
        self._next_paced = 0.0  # loop time before which paced writes wait
        self._task: asyncio.Task[None] | None = None

    # -- who is written -------------------------------------------------------------------------

    def track(self, c: Consumer, cs: ConsumerStore) -> None:
        self._stores[c] = cs
        self.changed(c)

    def store_of(self, c: Consumer) -> ConsumerStore | None:
        return self._stores.get(c)

    def untrack(self, c: Consumer) -> ConsumerStore | None:
        """Stop writing ``c`` (deleted): confirmations still parked are sent, as nothing of a
        deleted consumer can be delivered again. Returns its store."""
        self._dirty.discard(c)
        for reply, _ in self._confirms.pop(c, []) + self._held.pop(c, []):
            self._reply(reply)
        return self._stores.pop(c, None)

    def changed(self, c: Consumer) -> None:
        """``c``'s state changed: write it at the next paced write."""
        if c in self._stores:
            self._dirty.add(c)
            self._wanted.set()

    def confirm(self, c: Consumer, reply: str, seq: int) -> None:
        """An ack of stream sequence ``seq`` asked for a confirmation on ``reply``: sent once the
        state covering it is on disk, at once for a consumer without a state store."""
        if c not in self._stores:
            self._reply(reply)
            return
        # an ack past what was delivered changed nothing: any state covers it (and a forged ack
        # subject cannot make it wait for a sequence the stream will never have)
        seq = min(seq, c.delivered_stream_seq)
        upto = self.durability.durable_upto(c.stream.store) or 0
        if seq > upto:  # the stream must sync the message first, or the state cannot cover it
            self._held.setdefault(c, []).append((reply, seq))
            self.durability.mark_dirty(c.stream)
            return
        self._confirms.setdefault(c, []).append((reply, seq))
        self._dirty.add(c)
        self._wanted.set()
        self._urgent.set()

    def committed(self) -> None:
        """The committer made more of some stream durable: confirmations waiting on it are
        written now (the others keep waiting)."""
        moved = False
        for c, confirms in list(self._held.items()):
            upto = self.durability.durable_upto(c.stream.store) or 0
            ready = [x for x in confirms if x[1] <= upto]
            if not ready:
                continue
            moved = True
            left = [x for x in confirms if x[1] > upto]
            if left:
                self._held[c] = left
            else:
                del self._held[c]
            self._confirms.setdefault(c, []).extend(ready)
            self._dirty.add(c)
        if moved:
            self._wanted.set()
            self._urgent.set()

    def _reply(self, reply: str) -> None:
        self._send(reply, reply, None, b"", b"")

    # -- the write task -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="jetstream-consumer-state")

    async def stop(self) -> None:
        """Cancel the task and write everything once more (the committer's final commit came
        first, so confirmations waiting on a stream are covered now)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.committed()
        await self._write_once(paced=True)
        self._held.clear()  # still not covered (a failed stream commit): not confirmed

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wanted.wait()
            delay = self._next_paced - loop.time()
            if delay > 0 and not self._urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), delay)
            self._wanted.clear()
            self._urgent.clear()
            paced = loop.time() >= self._next_paced
            cpu = await self._write_once(paced)
            if paced:
                self._next_paced = loop.time() + max(STATE_WRITE_INTERVAL, cpu / STATE_WRITE_SHARE)
            elif self._dirty:
                self._wanted.set()  # the paced ones are still due

    async def _write_once(self, paced: bool) -> float:
        """Write the consumers with confirmations waiting (and, ``paced``, every dirty one), then
        send the confirmations they cover; returns the CPU seconds it took (both threads)."""
        t0 = time.thread_time()
        if paced:
            dirty, self._dirty = self._dirty, set()
        else:
            dirty = {c for c in self._confirms if c in self._dirty}
            self._dirty -= dirty
        jobs: list[tuple[Consumer, ConsumerStore, Callable[[], ConsumerState], int]] = []
        confirms: dict[Consumer, list[_Confirm]] = {}
        for c in dirty:
            cs = self._stores.get(c)
            if cs is None or c.closed:
                continue
            upto = self.durability.durable_upto(c.stream.store) or 0
            jobs.append((c, cs, c.snapshot_later(), upto))
            waiting = self._confirms.pop(c, None)
            if waiting:
                confirms[c] = waiting
        if not jobs:
            return 0.0
        cpu = time.thread_time() - t0

        def write(cs: ConsumerStore, state: Callable[[], ConsumerState], upto: int) -> float:
            w0 = time.thread_time()
            cs.update(clamp_state(state(), upto))
            return time.thread_time() - w0

        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(loop.run_in_executor(None, write, cs, st, upto) for _, cs, st, upto in jobs),
            return_exceptions=True,
        )
        for (c, _, _, upto), res in zip(jobs, results, strict=True):
            waiting = confirms.get(c)
            if isinstance(res, BaseException):
                if not isinstance(res, Exception):
                    raise res
                log.error(
                    "consumer '%s > %s' state write failed: %s%s",
                    c.stream.name,
                    c.name,
                    res,
                    f" ({len(waiting)} AckSync confirmations not sent)" if waiting else "",
                )
                continue
            cpu += res
            for reply, seq in waiting or ():
                if seq <= upto:
                    self._reply(reply)
                else:  # not covered yet (cannot happen: upto only grows): after the next commit
                    self._held.setdefault(c, []).append((reply, seq))
        return cpu
