"""The JetStream run's clients, recording what ``workload`` records for the test service, through
nats-py, each operation on a server chosen at random among those up (a client of a cluster
failing over):

* **publishers**: unique ids published to the stream with ``Nats-Msg-Id`` (several in flight
  per client: async publishes), each retried, on any server, until a PubAck, whose sequence is
  recorded as the id's position; an id never acknowledged within ``RETRY_FOR`` (well inside the
  stream's two-minute de-duplication window) is of unknown outcome;
* **registers**: a KV bucket's keys as registers: ``get`` (a read: the value, or none for a key
  never written), ``put`` (a write of a value nobody else writes) and compare-and-set as a KV
  client does it: a ``get`` for the value and its revision, then ``update`` with that revision
  as the expected last one. Values being unique, "the key's last revision is r" is "its value is
  the one written at r", so the update is the register's cas(that value -> the new one), and its
  refusal (10071, wrong last sequence) a cas that found another value.

* **a worker**: the stream's durable pull consumer fetched through a server chosen at random
  per fetch, each message acknowledged with ``ack_sync``; every delivery and every confirmed
  ack recorded with its delivery count. A delivery with a higher count than the one whose ack
  was confirmed is a violation (it came after); one with the same or a lower count is the same
  or an earlier delivery, which a pull subscription on another connection received after its
  fetch was given up on and hands out at its next fetch.

Outcomes as in ``workload``: ``ok``; ``fail`` only when nothing can have been applied (no
server had the subject: no responders); ``info`` for everything else (a timeout, a server's
error, which a leader deposed after proposing may send for an entry that still commits).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from .jschaos import BUCKET, CONSUMER, ID_SUBJECT, KV_STREAM, STREAM, JsChaosCluster
from .linearizable import Op
from .workload import REGISTER_KEYS, Append, History, Outcome

RETRY_FOR = 30.0  # seconds a publish is retried with its id before its outcome stays unknown
WRONG_LAST_SEQUENCE = 10071


class JsWorkload:
    def __init__(
        self,
        cluster: JsChaosCluster,
        rng: random.Random,
        registers: int = 4,
        publishers: int = 2,
        in_flight: int = 4,
        direct: bool = False,
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.registers = registers
        self.publishers = publishers
        self.in_flight = in_flight
        self.direct = direct  # KV gets as direct gets (any replica answers) rather than the leader's
        self.history = History()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._next_value = 0
        self._kv: dict[int, KeyValue] = {}  # per client connection
        self.delivered: dict[int, int] = {}  # stream sequence -> deliveries seen
        # its ack_sync returned: the delivery count of the delivery acknowledged
        self.confirmed: dict[int, int] = {}
        self.again: list[int] = []  # delivered after a confirmed ack
        # each refused update: (key, process, invoked at, the revision it expected, the refusal)
        self.refusals: list[tuple[str, int, float, int, str]] = []
        self.timeout = cluster.s.timeout + 1.0  # a little longer than a proposal's own wait

    def start(self) -> None:
        for p in range(self.registers):
            self._tasks.append(asyncio.ensure_future(self._register_client(p)))
        self._tasks.append(asyncio.ensure_future(self._worker(self._stop.is_set)))
        for p in range(self.publishers):
            for lane in range(self.in_flight):
                self._tasks.append(asyncio.ensure_future(self._publisher(100 + p, lane)))

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _client(self) -> Client | None:
        up = [node.nc for node in self.cluster.nodes.values() if node.alive and node.nc is not None]
        return self.rng.choice(up) if up else None

    def _error(self, kind: str) -> None:
        self.history.errors[kind] = self.history.errors.get(kind, 0) + 1

    # -- publishes --------------------------------------------------------------------------------

    async def _publisher(self, p: int, lane: int) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            mid = f"{p}-{lane}-{n}"
            rec = Append(p, mid, time.monotonic())
            sent = False
            give_up = rec.invoke + RETRY_FOR
            while not self._stop.is_set() and time.monotonic() < give_up:
                nc = self._client()
                if nc is None:
                    await asyncio.sleep(0.1)
                    continue
                try:
                    msg = await nc.request(
                        f"{ID_SUBJECT}.{p}", mid.encode(), timeout=self.timeout, headers={"Nats-Msg-Id": mid}
                    )
                except NoRespondersError:
                    self._error("NoRespondersError")  # no server had the subject: not sent on
                    await asyncio.sleep(0.05)
                    continue
                except Exception as exc:  # a timeout, a dead server's connection: unknown
                    sent = True
                    self._error(type(exc).__name__)
                    continue
                sent = True
                doc: dict[str, Any] = json.loads(msg.data) if msg.data.startswith(b"{") else {}
                if "seq" not in doc or "error" in doc:
                    err = doc.get("error", {})
                    self._error(f"{err.get('err_code', '?')} {err.get('description', msg.data[:60])}")
                    await asyncio.sleep(0.05)
                    continue
                rec.outcome = "ok"
                rec.complete = time.monotonic()
                rec.position = int(doc["seq"])
                break
            if rec.outcome != "ok":
                rec.outcome = "info" if sent else "fail"
            self.history.appends.append(rec)

    # -- the consumer -----------------------------------------------------------------------------

    async def _worker(self, done: Callable[[], bool]) -> None:
        while not done():
            nc = self._client()
            if nc is None:
                await asyncio.sleep(0.1)
                continue
            # a pull subscription (its own inbox) per fetch: what a server sends for a fetch given
            # up on never reaches a later one, so every message a fetch returns was delivered
            # after the acks confirmed before it (a delivery can be dated by its fetch)
            sub = None
            try:
                sub = await nc.jetstream(timeout=self.timeout).pull_subscribe_bind(CONSUMER, STREAM)
                msgs = await sub.fetch(50, timeout=1)
            except Exception as exc:  # no messages, an election, a dead server's connection
                self._error(f"fetch {type(exc).__name__}")
                continue
            finally:
                if sub is not None:
                    with contextlib.suppress(Exception):
                        await sub.unsubscribe()
            for m in msgs:
                seq, count = m.metadata.sequence.stream, m.metadata.num_delivered
                # a later delivery after the confirmed ack: not one that reached another
                # connection's pull subscription before it (a fetch given up on: fetched late)
                if count > self.confirmed.get(seq, count):
                    self.again.append(seq)
                self.delivered[seq] = self.delivered.get(seq, 0) + 1
                try:
                    await m.ack_sync(timeout=self.timeout)
                except Exception as exc:  # not confirmed: it may come again
                    self._error(f"ack {type(exc).__name__}")
                    continue
                self.confirmed[seq] = max(count, self.confirmed.get(seq, 0))

    async def drain(self, last: int, within: float) -> bool:
        """Every server up, the workload stopped: fetch and acknowledge what is left (redeliveries
        after ``ack_wait`` included) until the consumer's ack floor reaches ``last`` with
        nothing pending. Whether it did within ``within`` seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            nc = self._client()
            if nc is not None:
                try:
                    ci = await nc.jetstream(timeout=2).consumer_info(STREAM, CONSUMER)
                    if (
                        ci.num_pending == 0
                        and ci.num_ack_pending == 0
                        and (ci.ack_floor.stream_seq or 0) >= last
                    ):
                        return True
                except Exception as exc:
                    self._error(f"consumer info {type(exc).__name__}")
            await self._worker(_after(3.0))
        return False

    # -- registers ---------------------------------------------------------------------------------

    def _bucket(self, nc: Client) -> KeyValue:
        kv = self._kv.get(id(nc))
        if kv is None:
            js = nc.jetstream(timeout=self.timeout)
            kv = KeyValue(name=BUCKET, stream=KV_STREAM, pre=f"$KV.{BUCKET}.", js=js, direct=self.direct)
            self._kv[id(nc)] = kv
        return kv

    async def _get(self, p: int, key: str) -> tuple[Any, int] | None:
        """A read, recorded: (value, revision), or None if its result is unknown."""
        nc = self._client()
        if nc is None:
            await asyncio.sleep(0.1)
            return None
        t0 = time.monotonic()
        try:
            entry = await self._bucket(nc).get(key)
            value: Any = int(entry.value) if entry.value is not None else None
            rev = entry.revision or 0
        except KeyNotFoundError:
            value, rev = None, 0
        except Exception as exc:
            self._error(_kind(exc))
            return None  # a read of unknown result changes nothing: left out
        self.history.ops.append(Op(p, "read", key, value, t0, time.monotonic(), "ok"))
        return value, rev

    async def _write(self, p: int, key: str, body: Any, last: int | None) -> None:
        """A put (``last`` None) or an update expecting revision ``last``, recorded."""
        nc = self._client()
        if nc is None:
            await asyncio.sleep(0.1)
            return
        self._next_value += 1
        v = self._next_value
        t0 = time.monotonic()
        outcome: Outcome = "ok"
        applied = True
        kv = self._bucket(nc)
        try:
            if last is None:
                await kv.put(key, str(v).encode())
            else:
                await kv.update(key, str(v).encode(), last=last)
        except NoRespondersError:
            self._error("NoRespondersError")
            return  # nothing was sent on
        except APIError as e:
            self._error(_kind(e))
            wrong_last = isinstance(e, KeyWrongLastSequenceError) or e.err_code == WRONG_LAST_SEQUENCE
            if wrong_last and last is not None:
                applied = False  # a cas that found another value
                self.refusals.append((key, p, t0, last, str(e.description)))
            else:
                outcome = "info"
        except Exception as exc:
            self._error(_kind(exc))
            outcome = "info"
        t1 = time.monotonic() if outcome == "ok" else None
        if last is None:
            self.history.ops.append(Op(p, "write", key, v, t0, t1, outcome))
        else:
            self.history.ops.append(Op(p, "cas", key, (body, v), t0, t1, outcome, applied))

    async def _register_client(self, p: int) -> None:
        rng = self.rng
        while not self._stop.is_set():
            key = rng.choice(REGISTER_KEYS)
            f = rng.choice(("read", "write", "cas", "cas"))
            if f == "write":
                await self._write(p, key, None, None)
            else:
                got = await self._get(p, key)
                if f == "cas" and got is not None:
                    await self._write(p, key, got[0], got[1])
            await asyncio.sleep(rng.random() * 0.01)


def _after(seconds: float) -> Callable[[], bool]:
    """Whether ``seconds`` have passed since this call."""
    until = time.monotonic() + seconds
    return lambda: time.monotonic() > until


def _kind(exc: Exception) -> str:
    if isinstance(exc, KeyWrongLastSequenceError):
        return "wrong last sequence"
    if isinstance(exc, APIError):
        return f"{type(exc).__name__} {exc.err_code} {exc.description}"
    return type(exc).__name__
