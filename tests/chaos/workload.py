"""The harness's clients and what they record: every operation's invocation, completion and
outcome, so the checks can say exactly what was lost or duplicated.

Two workloads run at once against the replicated test service, each client on whichever server
is up (chosen at random per operation, as a client of a cluster fails over):

* **registers**: reads, writes and compare-and-sets on a few keys (the history the
  linearizability checker reads);
* **appends**: unique values appended to one list, several in flight per client, every
  acknowledgement (with the position the service gave) recorded: the "async publish with unique
  ids recording every ack" workload, in the service's terms.

Outcomes: ``ok`` (a result), ``fail`` (the service says it did not apply), ``info`` (no answer
in time, or the service does not know: it may have applied).

The JetStream run's clients (``jsworkload``) keep the same records: a publish with a
``Nats-Msg-Id`` and its PubAck's sequence as the position, a KV bucket's compare-and-set
(``update`` with the revision).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from nats.errors import NoRespondersError

from .cluster import ChaosCluster
from .linearizable import Op

Outcome = Literal["ok", "fail", "info"]
REGISTER_KEYS = ("r0", "r1", "r2")
APPEND_KEY = "log"


@dataclass
class Append:
    process: int
    value: str
    invoke: float
    complete: float | None = None
    outcome: Outcome = "info"
    position: int = 0  # the service's answer, for an ok one


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)  # error text kinds, counted

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.ops if o.outcome == outcome) + sum(
            1 for a in self.appends if a.outcome == outcome
        )


def _error_kind(text: str) -> str:
    return text.split(":", 1)[0]


class Workload:
    def __init__(
        self,
        cluster: ChaosCluster,
        rng: random.Random,
        registers: int = 4,
        appenders: int = 2,
        in_flight: int = 4,
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.registers = registers
        self.appenders = appenders
        self.in_flight = in_flight
        self.history = History()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._next_value = 0
        self.timeout = cluster.s.timeout + 1.0  # a client waits a little longer than the service

    def start(self) -> None:
        for p in range(self.registers):
            self._tasks.append(asyncio.ensure_future(self._register_client(p)))
        for p in range(self.appenders):
            for lane in range(self.in_flight):
                self._tasks.append(asyncio.ensure_future(self._append_client(100 + p, lane)))

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _server(self) -> str | None:
        up = [n for n, node in self.cluster.nodes.items() if node.alive and node.nc is not None]
        return self.rng.choice(up) if up else None

    async def _call(self, body: dict[str, Any]) -> tuple[Outcome, dict[str, Any] | None]:
        """(outcome, answer) of one request."""
        name = self._server()
        if name is None:
            await asyncio.sleep(0.1)
            return "fail", None  # nothing sent
        try:
            doc = await self.cluster.request(name, body, self.timeout)
        except Exception as exc:  # a timeout, a dead server's connection: unknown
            kind = type(exc).__name__
            self.history.errors[kind] = self.history.errors.get(kind, 0) + 1
            if isinstance(exc, NoRespondersError):
                return "fail", None  # the server had no service to take it: never sent on
            return "info", None
        if "error" in doc:
            kind = _error_kind(str(doc["error"]))
            self.history.errors[kind] = self.history.errors.get(kind, 0) + 1
            return ("fail" if doc.get("definite") else "info"), doc
        return "ok", doc

    async def _register_client(self, p: int) -> None:
        rng = self.rng
        while not self._stop.is_set():
            key = rng.choice(REGISTER_KEYS)
            f = rng.choice(("read", "read", "write", "cas", "cas"))
            self._next_value += 1
            v = self._next_value
            if f == "read":
                body: dict[str, Any] = {"op": "get", "k": key}
            elif f == "write":
                body = {"op": "put", "k": key, "v": v}
            else:
                body = {"op": "cas", "k": key, "from": rng.choice((None, *range(max(1, v - 12), v))), "to": v}
            t0 = time.monotonic()
            outcome, doc = await self._call(body)
            t1 = time.monotonic()
            if outcome == "fail" and doc is None:
                continue  # never sent
            if f == "read":
                value: Any = doc.get("v") if outcome == "ok" and doc is not None else None
                self.history.ops.append(
                    Op(p, "read", key, value, t0, t1 if outcome == "ok" else None, outcome)
                )
            elif f == "write":
                self.history.ops.append(Op(p, "write", key, v, t0, t1 if outcome == "ok" else None, outcome))
            else:
                ok = bool(doc.get("ok")) if outcome == "ok" and doc is not None else True
                self.history.ops.append(
                    Op(p, "cas", key, (body["from"], v), t0, t1 if outcome == "ok" else None, outcome, ok)
                )
            await asyncio.sleep(rng.random() * 0.01)

    async def _append_client(self, p: int, lane: int) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            value = f"{p}-{lane}-{n}"
            rec = Append(p, value, time.monotonic())
            outcome, doc = await self._call({"op": "append", "k": APPEND_KEY, "v": value})
            if outcome == "fail" and doc is None:
                continue
            rec.outcome = outcome
            if outcome == "ok" and doc is not None:
                rec.complete = time.monotonic()
                rec.position = int(doc["pos"])
            self.history.appends.append(rec)
