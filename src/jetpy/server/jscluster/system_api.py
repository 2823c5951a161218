"""The ``$JS.API`` requests of the system account that act on the cluster's JetStream as a whole:
``$JS.API.META.LEADER.STEPDOWN``, answered by the meta leader (the others stay silent).

Owns: subscribing them in the system account, answering each in its own task (a stepdown waits
until the new leader is elected, and nothing else waits on it), and their replies. Only the
system account's users reach them: a client of another account asking the same subject gets no
answer, as from nats-server. Must not know: Raft's rules, a stream's rules, the wire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from jetpy.jetstream.api.messages import MetaLeaderStepdownResponse
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import encode
from jetpy.server.broker import Broker, Subscription
from jetpy.server.jscluster.stepdown import read_request, step_down, successor
from jetpy.server.nrg import RaftGroup

__all__ = ["META_STEPDOWN", "SystemApi"]

log = logging.getLogger("jetpy.jetstream")

META_STEPDOWN = "$JS.API.META.LEADER.STEPDOWN"


class MetaState(Protocol):
    @property
    def meta_group(self) -> RaftGroup | None: ...


class SystemApi:
    def __init__(self, state: MetaState, system: Broker, cluster_name: Callable[[], str]) -> None:
        self.state = state
        self.system = system
        self._cluster_name = cluster_name
        self._subs: list[Subscription] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._subs = [self.system.subscribe_internal(META_STEPDOWN, self._on_meta_stepdown)]

    def stop(self) -> None:
        for sub in self._subs:
            self.system.unsubscribe_internal(sub)
        self._subs = []
        for t in self._tasks:
            t.cancel()

    def _on_meta_stepdown(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        g = self.state.meta_group
        if reply is None or g is None or not g.is_leader:
            return
        task = asyncio.get_running_loop().create_task(self._meta_stepdown(g, reply.decode(), data[hdr_len:]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _meta_stepdown(self, g: RaftGroup, reply: str, body: bytes) -> None:
        try:
            await step_down(g, successor(g, read_request(body), self._cluster_name()))
            resp = MetaLeaderStepdownResponse(success=True)
        except ApiError as e:
            resp = MetaLeaderStepdownResponse.failure(e)
        self.system.publish_internal(reply, None, encode(resp))
