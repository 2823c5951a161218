"""The replicated test service: a small KV store and lists as a Raft group on every server of a
cluster, reachable by request on each server, answering only once a quorum has the change on
disk and it applied. It proves the Raft host (``jetpy.server.nrg``) before JetStream uses it.

Requests (JSON) to ``kv.<server name>`` on the client port; every operation, reads included,
goes through the log, so each answer is linearizable:

    {"op": "get", "k": key}                        -> {"ok": true, "v": value | null, "rev": n}
    {"op": "put", "k": key, "v": value}            -> {"ok": true, "rev": n}
    {"op": "cas", "k": key, "from": a, "to": b}    -> {"ok": true|false, "v": current, "rev": n}
    {"op": "append", "k": key, "v": value}         -> {"ok": true, "pos": n}   (1-based)
    {"op": "read", "k": key}                       -> {"ok": true, "vs": [...]}
    {"op": "status"}                               -> this member's Raft state (not replicated)
    {"op": "local"}                                -> this member's own state: applied index and
                                                      a digest of its state machine (not replicated)
    {"op": "transfer", "to": member | ""}          -> {"ok": true, "leader": member}
    {"op": "remove", "member": id}                 -> {"ok": true}

An error is ``{"error": text, "definite": bool}``: ``definite`` means the operation is known not
to have applied (a client may retry it); otherwise its fate is unknown.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from jetpy.server.broker import Broker
from jetpy.server.nrg import ProposalError, RaftGroup


class KVMachine:
    """The replicated state: key -> (value, revision) and key -> list; deterministic."""

    def __init__(self) -> None:
        self.kv: dict[str, tuple[Any, int]] = {}
        self.lists: dict[str, list[Any]] = {}

    def apply(self, index: int, items: Sequence[bytes]) -> Sequence[bytes]:
        return [json.dumps(self._one(item)).encode() for item in items]

    def _one(self, item: bytes) -> dict[str, Any]:
        try:
            req = json.loads(item)
            op, key = req["op"], str(req["k"])
        except (ValueError, KeyError, TypeError):
            return {"ok": False, "error": "malformed"}
        value, rev = self.kv.get(key, (None, 0))
        if op == "get":
            return {"ok": True, "v": value, "rev": rev}
        if op == "put":
            self.kv[key] = (req.get("v"), rev + 1)
            return {"ok": True, "rev": rev + 1}
        if op == "cas":
            if value != req.get("from"):
                return {"ok": False, "v": value, "rev": rev}
            self.kv[key] = (req.get("to"), rev + 1)
            return {"ok": True, "v": req.get("to"), "rev": rev + 1}
        if op == "append":
            lst = self.lists.setdefault(key, [])
            lst.append(req.get("v"))
            return {"ok": True, "pos": len(lst)}
        if op == "read":
            return {"ok": True, "vs": list(self.lists.get(key, []))}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def snapshot(self) -> bytes:
        return json.dumps({"kv": {k: list(v) for k, v in self.kv.items()}, "lists": self.lists}).encode()

    def restore(self, data: bytes) -> None:
        doc = json.loads(data) if data else {"kv": {}, "lists": {}}
        self.kv = {k: (v[0], v[1]) for k, v in doc["kv"].items()}
        self.lists = doc["lists"]


class KVService:
    """Answers ``kv.<server name>`` requests on one server through its member of the group."""

    def __init__(
        self, group: RaftGroup, machine: KVMachine, broker: Broker, server_name: str, within: float
    ) -> None:
        self.group = group
        self.machine = machine
        self.broker = broker
        self.within = within
        self.subject = f"kv.{server_name}"
        self._tasks: set[asyncio.Task[None]] = set()
        self._sub = broker.subscribe_internal(self.subject, self._on_request)

    def close(self) -> None:
        self.broker.unsubscribe_internal(self._sub)
        for t in self._tasks:
            t.cancel()

    def _on_request(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if reply is None:
            return
        task = asyncio.get_running_loop().create_task(self._serve(reply, data[hdr_len:]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reply: bytes, body: bytes) -> None:
        try:
            answer = await self._answer(body)
        except ProposalError as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}", "definite": exc.definite}
        except (ValueError, KeyError, TypeError) as exc:
            answer = {"error": f"bad request: {exc}", "definite": True}
        self.broker.publish_internal(reply.decode(), None, json.dumps(answer).encode())

    async def _answer(self, body: bytes) -> dict[str, Any]:
        req = json.loads(body)
        op = req.get("op")
        g = self.group
        if op == "status":
            st = g.status()
            doc = asdict(st)
            doc["removed"] = g.removed
            return doc
        if op == "local":
            machine = self.machine
            return {
                "ok": True,
                "applied": g.applied,
                "digest": hashlib.sha256(machine.snapshot()).hexdigest(),
            }
        if op == "transfer":
            return {"ok": True, "leader": await g.transfer_leadership(str(req.get("to", "")), self.within)}
        if op == "remove":
            await g.remove_member(str(req["member"]), self.within)
            return {"ok": True}
        result = await g.propose(body, self.within)
        answer: dict[str, Any] = json.loads(result)
        return answer
