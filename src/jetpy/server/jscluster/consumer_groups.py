"""This server's replicas of the cluster's consumers (see :mod:`.consumers` for one replica,
:mod:`.local_consumer` for an R1 consumer, which has no group).

Owns: reacting to consumer assignments (in the meta log's order, through the service's queue of
actions: a consumer placed here gets its replica and its member of the consumer's group, an R1
one placed here alone runs here without a group, a removed one loses both and its group's
directory), an R1 consumer scaled up or moved founding its group alone from its state (the
group hands that state to the servers newly placed in its first snapshot, taken before anyone
joins) and a group scaled down to this server alone settling back to an R1 consumer (its
state written to its file before the group's files go), following a consumer's placement as it
changes (:mod:`.consumer_placement`: a server newly named starts a member that joins the group
and catches up from it, snapshot or log; the consumer's leader removes from the group, one at a
time, the members whose servers are no longer named; a server left out hands over leadership
if it has it, waits until the group removed it, so that the group never loses its quorum, then
drops its replica and its files, as a stream's replicas do: :mod:`.membership`), the internal requests between servers about
consumers (the meta leader asking a consumer's leader to answer a create, and to give its info
for ``CONSUMER.LIST``; each account's in subjects of its own), what a replica needs of its server (:class:`ReplicaContext`)
and its interest streams' retention (:mod:`.interest`, told of what the replicas here applied). Must
not know: the API's checks, Raft's rules, the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import shutil
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any

import msgspec

from jetpy.jetstream.api.messages import ConsumerCreateResponse, ConsumerDeleteResponse
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.models import ConsumerInfo, encode
from jetpy.jetstream.service import JetStream
from jetpy.jetstream.stream import Stream
from jetpy.server.broker import Broker, Subscription
from jetpy.server.jscluster.consumers import ConsumerReplica, Informed
from jetpy.server.jscluster.interest import InterestRetention
from jetpy.server.jscluster.local import Replica
from jetpy.server.jscluster.local_consumer import HeldConsumer, LocalConsumer, write_state
from jetpy.server.jscluster.membership import leave, reconcile
from jetpy.server.jscluster.meta import GLOBAL_ACCOUNT, ConsumerAssignment, RemoveConsumer, encode_op
from jetpy.server.nrg import GroupConfig, RaftGroup, RaftHost, member_id
from jetpy.store.base import ConsumerState, StoreError

__all__ = ["ConsumerGroups"]

log = logging.getLogger("jetpy.jetstream")

CREATED_SUBJECT = "$JSC.CC.{}.{}.{}"
"""In the system account: the meta leader asks a consumer's leader to answer a create of it
(account, stream, consumer; payload: the requester's reply subject)."""
INFO_SUBJECT = "$JSC.CI.{}.{}.{}"
"""In the system account: a consumer's leader answers with its info (ConsumerInfo JSON)."""
STATE_SUBJECT = "$JSC.CST.{}.{}.{}"
"""In the system account: a consumer's leader answers with its replicated state (a backup of
its stream taken on another server: :class:`StateReply` as msgpack)."""
SETTLE_POLL = 0.05  # seconds between looks whether a group scaled down to R1 here runs yet
GATHER_WAIT = 2.0  # seconds the meta leader waits for consumers' leaders to give their info

Key = tuple[str, str]  # (stream, consumer)


class StateReply(msgspec.Struct, frozen=True, array_like=True):
    name: str
    state: ConsumerState


class ConsumerGroups:
    def __init__(
        self,
        server_name: str,
        cluster_name: Callable[[], str],
        host: RaftHost,
        system: Broker,
        config: GroupConfig,
        stream_replica: Callable[[str], Replica | None],
        propose_meta: Callable[[bytes], Awaitable[bytes]],
        act: Callable[[Callable[[], Awaitable[None]]], None],
        traffic_account: str = "",
        account: str = GLOBAL_ACCOUNT,
        *,
        streams: Mapping[str, Replica],
        consumers_of: Callable[[str], Collection[str]],
    ) -> None:
        self.server_name = server_name
        self._cluster_name = cluster_name
        self.host = host
        self.system = system
        self.config = config
        self._stream_replica = stream_replica
        self._propose_meta = propose_meta
        self._act = act  # queued after the meta group's other changes, in order
        self._traffic_account = traffic_account
        self.account = account  # the account whose consumers these are
        self.js: JetStream | None = None
        self.replicas: dict[Key, HeldConsumer] = {}
        self._subs: list[Subscription] = []
        self._inboxes = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        # interest streams' retention, decided by their leaders here (``streams``: this
        # server's replicas; ``consumers_of``: a stream's consumers as the meta group holds them)
        self.interest = InterestRetention(streams, consumers_of, self.replica)

    def start(self, js: JetStream) -> None:
        self.js = js
        js.consumers.interest_decided = self.interest.stored  # no replica removes on its own
        self.interest.start()
        self._subs = [
            self.system.subscribe_internal(CREATED_SUBJECT.format(self.account, "*", "*"), self._on_created),
            self.system.subscribe_internal(INFO_SUBJECT.format(self.account, "*", "*"), self._on_info),
            self.system.subscribe_internal(STATE_SUBJECT.format(self.account, "*", "*"), self._on_state),
        ]

    def stop(self) -> None:
        self.interest.stop()
        for sub in self._subs:
            self.system.unsubscribe_internal(sub)
        self._subs = []
        for task in self._tasks:
            task.cancel()
        for rep in self.replicas.values():
            rep.close()  # the groups are stopped with the Raft host

    # -- assignments (in the meta log's order) -----------------------------------------------------

    async def add(self, ca: ConsumerAssignment) -> None:
        key = (ca.stream, ca.name)
        if key in self.replicas:  # held already (a restored meta state): its placement may differ
            await self.update(ca, "")
            return
        if self.server_name not in ca.peers:
            return
        has_group = self.host.root is not None and (self.host.root / ca.group).is_dir()
        has_file = not has_group and self._has_file(ca)
        if (
            ca.peers == [self.server_name]
            and not has_group
            and (has_file or self.server_name not in ca.joined)
        ):
            self._hold_local(ca)  # (placed here by a move, without its file yet: it joins the group)
            return
        if has_file:  # scaled up from R1 here, the group not founded yet when this server stopped
            await self._to_group(LocalConsumer(ca, self), ca)
            return
        rep = ConsumerReplica(ca, self)
        self.replicas[key] = rep
        # a server placed after the consumer's creation joins its group as a new member
        founders = () if self.server_name in ca.joined else ca.peers
        await self._start_group(rep, founders)
        log.info(
            "JetStream cluster: consumer '%s > %s' replica started (group %s)", ca.stream, ca.name, ca.group
        )

    def _hold_local(self, ca: ConsumerAssignment, state: ConsumerState | None = None) -> LocalConsumer:
        """The consumer runs here as an R1 one (its state: ``state``, else its file's)."""
        rep = LocalConsumer(ca, self, state)
        self.replicas[(ca.stream, ca.name)] = rep
        rep.start()
        log.info("JetStream cluster: consumer '%s > %s' held here (R1, no group)", ca.stream, ca.name)
        return rep

    def _has_file(self, ca: ConsumerAssignment) -> bool:
        """Whether the stream's store here holds the consumer's file (an R1 consumer's)."""
        stream = self._stream(ca.stream)
        return stream is not None and ca.name in stream.store.consumer_names()

    def _stream(self, name: str) -> Stream | None:
        """The stream's store here (opened when the server starts, before its replica runs)."""
        return self.js.registry.get(name) if self.js is not None else None

    async def _start_group(self, rep: ConsumerReplica, founders: Sequence[str]) -> None:
        ca = rep.ca
        if self._has_file(ca):  # founded from it (a group not snapshotted yet: its base state)
            with contextlib.suppress(StoreError):
                stream = self._stream(ca.stream)
                got = stream.store.consumer_store(ca.name).load() if stream is not None else None
                if got is not None:
                    rep.found_from(got)
        group = await self.host.start_group(ca.group, rep, founders, self.config)
        group.snapshot_before_join = True  # a joiner is handed the state (one founded from it)
        rep.group = group
        group.on_leader = lambda leading: self._leader_changed(rep, leading)
        if group.is_leader:
            self._leader_changed(rep, True)

    async def _to_group(self, local: LocalConsumer, ca: ConsumerAssignment) -> ConsumerReplica:
        """An R1 consumer scaled up (or moved): this server founds its group alone from its
        state, and leads it; the servers newly placed join (handed the state in the group's
        first snapshot)."""
        local.close()  # its state written to its file
        rep = ConsumerReplica(ca, self)
        rep.found_from(local.state())
        rep.answered_create = True
        self.replicas[(ca.stream, ca.name)] = rep
        await self._start_group(rep, [self.server_name])
        g = rep.group
        if g is not None:  # the founding state in the group's files at once: a restart knows it
            g.snapshot_soon()
        waited = 0.0
        while rep.consumer is None and waited < self.config.timeout and not rep.closed:
            await asyncio.sleep(SETTLE_POLL)  # elected alone, at once: it runs the consumer (and
            waited += SETTLE_POLL  # answers the change that scaled it up)
        log.info(
            "JetStream cluster: consumer '%s > %s' scaled up: group %s founded here",
            ca.stream,
            ca.name,
            ca.group,
        )
        return rep

    def _leader_changed(self, rep: ConsumerReplica, leading: bool) -> None:
        rep.leader_changed(leading)
        g = rep.group
        if leading and g is not None and any(p.name not in rep.ca.peers for p in g.status().peers):
            self._spawn(self._reconcile(rep, g))  # a removal the last leader left undone
        elif leading and rep.ca.peers == [self.server_name]:
            self._spawn(self._settle(rep))

    async def _reconcile(self, rep: ConsumerReplica, group: RaftGroup) -> None:
        """The leader removes the members no longer placed, then maybe settles as R1."""
        await reconcile(group, lambda: rep.ca.peers)
        await self._settle(rep)

    async def _settle(self, rep: ConsumerReplica) -> None:
        """A consumer scaled down to R1 on this server: once its group is this member alone and
        runs here, the group goes (its state written to the consumer's file first) and the
        consumer runs here without one."""
        g, me = rep.group, self.server_name
        key = (rep.ca.stream, rep.ca.name)
        c = rep.consumer
        while c is None and g is not None and g.is_leader and self.replicas.get(key) is rep:
            await asyncio.sleep(SETTLE_POLL)  # its engine not running yet (just elected)
            c = rep.consumer
        if (
            g is None
            or not g.is_leader
            or c is None
            or rep.ca.peers != [me]
            or self.replicas.get(key) is not rep
        ):
            return
        if any(p.name != me for p in g.status().peers):
            return
        stream = c.stream
        rep.close()
        await self.host.stop_group(g.name)  # what it committed is applied (stop waits for it)
        ca, state = rep.ca, rep.state()
        try:
            await asyncio.to_thread(write_state, stream, ca.name, rep.config, ca.created, state)
        except StoreError as exc:  # kept as a group: its log has the state
            log.error("consumer '%s > %s': not settled as R1: %s", ca.stream, ca.name, exc)
            if self.replicas.get(key) is rep:
                self.replicas.pop(key)
                await self.add(ca)
            return
        root = self.host.root
        if root is not None:
            await asyncio.to_thread(shutil.rmtree, root / g.name, True)
        now = self.replicas.get(key)
        if now is None:  # deleted meanwhile: the file just written goes too
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(stream.store.consumer_store(ca.name).delete)
            return
        if now is not rep:
            return
        if rep.ca.peers != [me]:  # placed elsewhere again meanwhile: a group founded from it
            held = LocalConsumer(msgspec.structs.replace(rep.ca, reply=""), self, state)
            self.replicas[key] = held
            await self.update(held.ca, "")
            return
        log.info(
            "JetStream cluster: consumer '%s > %s' scaled down to R1: group %s dropped",
            ca.stream,
            ca.name,
            g.name,
        )
        local = self._hold_local(msgspec.structs.replace(rep.ca, reply=""), state)
        local.answered_create = True

    async def remove(self, ca: ConsumerAssignment, reply: str = "", deleted: bool = True) -> None:
        """Remove this server's replica; its leader answers a delete at ``reply`` once it no
        longer runs it (as nats-server's former leader does: no info from it after the answer).
        Not ``deleted``: the consumer goes on elsewhere (this server was left out of it)."""
        rep = self.replicas.pop((ca.stream, ca.name), None)
        if rep is None:
            return
        leader = rep.consumer is not None
        if rep.consumer is not None and deleted:  # its leader says it is gone, as a single server does
            self.manager.action_advisory(rep.consumer, "delete")
        rep.close(deleted=deleted)
        if leader and reply:
            self.publish(reply, encode(ConsumerDeleteResponse(success=True)))
        if rep.group is not None:
            await self.host.stop_group(rep.group.name)
            root = self.host.root
            if root is not None:
                await asyncio.to_thread(shutil.rmtree, root / rep.group.name, True)
        if self._has_file(ca):  # (an R1 one not running yet, or one a group was founded from)
            stream = self._stream(ca.stream)  # not read back by a later one of that name
            if stream is not None:
                with contextlib.suppress(StoreError):
                    await asyncio.to_thread(stream.store.consumer_store(ca.name).delete)
        log.info(
            "JetStream cluster: consumer '%s > %s' replica %s",
            ca.stream,
            ca.name,
            "deleted" if deleted else "removed from this server",
        )

    async def update(self, ca: ConsumerAssignment, reply: str) -> None:
        """A new config or placement: every replica keeps it (a later leader runs with it); the
        leader changes its consumer now, removes the members no longer named and answers; a
        server newly named starts its replica, one left out leaves the group."""
        rep = self.replicas.get((ca.stream, ca.name))
        if rep is None:
            if self.server_name in ca.peers:  # placed here by a change of the placement
                await self.add(ca)
                rep = self.replicas.get((ca.stream, ca.name))
                if rep is not None and reply:
                    rep.reconfigure(ca, reply)  # answered here if it leads already
            return
        if isinstance(rep, LocalConsumer):
            if ca.peers == [self.server_name]:
                rep.reconfigure(ca, reply)
                return
            rep = await self._to_group(rep, ca)  # scaled up, or moved: the new servers join
        rep.reconfigure(ca, reply)
        g = rep.group
        if g is None:
            return
        if self.server_name not in ca.peers:  # taken off this server
            self._spawn(self._leave(rep, g))
        elif g.is_leader:
            self._spawn(self._reconcile(rep, g))

    async def _leave(self, rep: ConsumerReplica, group: RaftGroup) -> None:
        """Once the consumer's group has removed this server's member, its replica goes (in
        the meta group's order). Placed here again meanwhile: a member still in the group
        stays, one already removed is replaced by a new one that joins."""
        await leave(group, rep.ca.peers, self.config.tick, lambda: self.server_name in rep.ca.peers)
        key = (rep.ca.stream, rep.ca.name)

        async def drop() -> None:
            if self.replicas.get(key) is not rep:
                return
            if self.server_name not in rep.ca.peers:
                await self.remove(rep.ca, deleted=False)
            elif group.removed:
                await self.remove(rep.ca, deleted=False)
                await self.add(rep.ca)

        self._act(drop)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def gone_after_restore(self, consumers: list[ConsumerAssignment]) -> list[ConsumerAssignment]:
        """The replicas a restored meta state no longer has."""
        keep = {(ca.stream, ca.name, ca.group) for ca in consumers}
        return [
            rep.ca for rep in self.replicas.values() if (rep.ca.stream, rep.ca.name, rep.ca.group) not in keep
        ]

    def replica(self, stream: str, name: str) -> HeldConsumer | None:
        return self.replicas.get((stream, name))

    # -- ReplicaContext ---------------------------------------------------------------------------

    @property
    def manager(self) -> ConsumerManager:
        assert self.js is not None
        return self.js.consumers

    @property
    def cluster_name(self) -> str:
        return self._cluster_name()

    @property
    def traffic_account(self) -> str:
        return self._traffic_account

    def stream_holding(self, stream: str, seq: int) -> Stream | None:
        rep = self._stream_replica(stream)
        if rep is None or not rep.serving:
            return None
        if rep.stream.store.state().last_seq < seq:
            return None
        return rep.stream

    def publish(self, reply: str, data: bytes) -> None:
        assert self.js is not None
        self.js.bus.publish(reply, None, data)

    def remove_consumer(self, ca: ConsumerAssignment) -> None:
        async def remove() -> None:
            with contextlib.suppress(Exception):  # the meta group's refusal is logged there
                await self._propose_meta(encode_op(RemoveConsumer(ca.stream, ca.name, account=ca.account)))

        task = asyncio.get_running_loop().create_task(remove())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def remove_messages(self, stream: str, seqs: list[int]) -> None:
        """The messages a work-queue consumer acknowledged (those of one loop turn), removed by
        this server's replica of the stream (``remove_acked``: through its log, or at once for
        an R1 stream); one lost on the way is swept again by the consumer's leader
        (``ConsumerReplica._sweep``)."""
        rep = self._stream_replica(stream)
        if rep is None:
            return
        task = asyncio.get_running_loop().create_task(rep.remove_acked(seqs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def acknowledged(self, stream: str, old_floor: int, new_floor: int, gone: list[int]) -> None:
        self.interest.acknowledged(stream, old_floor, new_floor, gone)

    def answer_create(self, replica: Informed, reply: str) -> None:
        info = replica.info()
        if info is not None:
            self.publish(reply, encode(ConsumerCreateResponse.of(info)))

    # -- between servers -----------------------------------------------------------------------------

    def ask_leader_to_answer(self, stream: str, name: str, reply: bytes) -> None:
        self.system.publish_internal(CREATED_SUBJECT.format(self.account, stream, name), None, reply)

    def _key(self, subject: bytes) -> Key:
        parts = subject.decode().split(".")
        return parts[-2], parts[-1]

    def _on_created(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        rep = self.replicas.get(self._key(subject))
        if rep is not None and rep.consumer is not None:
            self.answer_create(rep, data[hdr_len:].decode())

    def _on_info(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        rep = self.replicas.get(self._key(subject))
        info = rep.info() if rep is not None else None
        if reply is not None and info is not None:
            self.system.publish_internal(reply.decode(), None, encode(info))

    def _on_state(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        rep = self.replicas.get(self._key(subject))
        if reply is not None and rep is not None and rep.is_leader:
            self.system.publish_internal(
                reply.decode(), None, msgspec.msgpack.encode(StateReply(rep.ca.name, rep.state()))
            )

    async def states(self, stream: str, names: list[str]) -> dict[str, ConsumerState]:
        """The named consumers' replicated states from their leaders (those that answer within
        :data:`GATHER_WAIT`)."""
        got: dict[str, ConsumerState] = {}
        if not names:
            return got
        done = asyncio.Event()
        inbox = f"$JSC.RCS.{member_id(self.server_name)}.{next(self._inboxes)}"

        def on_reply(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            try:
                r = msgspec.msgpack.decode(data[hdr_len:], type=StateReply)
            except (msgspec.DecodeError, ValueError):
                return
            got[r.name] = r.state
            if len(got) >= len(names):
                done.set()

        sub = self.system.subscribe_internal(inbox, on_reply)
        try:
            for name in names:
                self.system.publish_internal(STATE_SUBJECT.format(self.account, stream, name), inbox, b"")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), GATHER_WAIT)
        finally:
            self.system.unsubscribe_internal(sub)
        return got

    async def infos(self, stream: str, names: list[str]) -> dict[str, ConsumerInfo]:
        """The named consumers' infos from their leaders (those that answer within
        :data:`GATHER_WAIT`)."""
        got: dict[str, ConsumerInfo] = {}
        if not names:
            return got
        done = asyncio.Event()
        inbox = f"$JSC.RCI.{member_id(self.server_name)}.{next(self._inboxes)}"

        def on_reply(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            try:
                info = msgspec.json.decode(data[hdr_len:], type=ConsumerInfo)
            except (msgspec.DecodeError, ValueError):
                return
            got[info.name] = info
            if len(got) >= len(names):
                done.set()

        sub = self.system.subscribe_internal(inbox, on_reply)
        try:
            for name in names:
                self.system.publish_internal(INFO_SUBJECT.format(self.account, stream, name), inbox, b"")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), GATHER_WAIT)
        finally:
            self.system.unsubscribe_internal(sub)
        return got
