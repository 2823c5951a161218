"""A Raft group member's membership changes and leadership transfers (part of
:class:`~jetpy.server.nrg.group.RaftGroup`, as the class it derives from): members added (a
learner first, made a voter once caught up), removed, a new member's request to join, changes
asked of another member and forwarded to the leader, the leader's notice that this member was
removed, and handing leadership to another voter.

Owns: those requests and their answers. Must not know: the loop around the node, the log's
store, applying entries (the group's).
"""

from __future__ import annotations

import asyncio
import logging
import time

from jetpy.raft import ConfChange, ConfChangeOp, NotLeader, ProposalDropped, RaftError, RaftNode, Role
from jetpy.server.nrg.config import GroupConfig
from jetpy.server.nrg.machine import (
    NoLeader,
    ProposalBusy,
    ProposalError,
    ProposalRefused,
    ProposalUnknown,
)
from jetpy.server.nrg.proposals import Forwarded, Pending, Unit, status_for
from jetpy.server.nrg.transport import Transport
from jetpy.server.nrg.wire import (
    ChangeOp,
    Status,
    WireError,
    decode_change,
    decode_join,
    encode_answer,
    encode_change,
)
from jetpy.store.raftlog import RaftLogStore

__all__ = ["GroupChanges"]

log = logging.getLogger("jetpy.server")

_LEADER = Role.LEADER
_CHANGE_OPS = {
    ChangeOp.ADD_VOTER: ConfChangeOp.ADD_VOTER,
    ChangeOp.ADD_LEARNER: ConfChangeOp.ADD_LEARNER,
    ChangeOp.REMOVE: ConfChangeOp.REMOVE,
}


class GroupChanges:
    """The membership changes of a :class:`~jetpy.server.nrg.group.RaftGroup` (which sets
    every attribute below in its constructor)."""

    name: str
    member: str
    cfg: GroupConfig
    node: RaftNode
    store: RaftLogStore
    transport: Transport
    pending: Pending
    forwarded: Forwarded
    names: dict[str, str]
    snapshot_before_join: bool
    _changes: dict[int, asyncio.Future[list[bytes]]]
    _promote: set[str]
    _applied_gone: set[str]
    _told_removed: bool
    _seed_wanted: bool
    _stopping: bool
    _ticker: asyncio.TimerHandle | None
    _wake: asyncio.Event

    def _fail_waiting(self, exc: ProposalError) -> None:
        raise NotImplementedError  # the group's

    async def add_member(self, member: str, voter: bool = True, within: float | None = None) -> None:
        """Add ``member`` (a learner first: it catches up without counting towards a quorum)."""
        if voter and member not in self.node.membership.learners:
            await self._change(ChangeOp.ADD_LEARNER, member, within)
            self._promote.add(member)
            return
        await self._change(ChangeOp.ADD_VOTER if voter else ChangeOp.ADD_LEARNER, member, within)

    async def remove_member(self, member: str, within: float | None = None) -> None:
        await self._change(ChangeOp.REMOVE, member, within)

    async def transfer_leadership(self, target: str = "", within: float | None = None) -> str:
        """Hand leadership to ``target`` (or the most caught-up voter); returns the new leader."""
        old = self.node.leader
        await self._change(ChangeOp.TRANSFER, target, within)
        deadline = time.monotonic() + (within or self.cfg.timeout)
        while time.monotonic() < deadline:
            leader = self.node.leader
            if leader and leader != old and (not target or leader == target):
                return leader
            await asyncio.sleep(self.cfg.tick / 4)
        raise ProposalUnknown("leadership did not move in time")

    async def _change(self, op: ChangeOp, peer: str, within: float | None) -> None:
        limit = within if within is not None else self.cfg.timeout
        deadline = time.monotonic() + limit
        while True:
            node = self.node
            try:
                if node.role is _LEADER:
                    fut = self._change_here(op, peer)
                elif node.leader:
                    fut = self._forward_change(op, peer, node.leader)
                else:
                    raise NotLeader("")
                await asyncio.wait_for(fut, max(0.0, deadline - time.monotonic()))
                return
            except (NotLeader, ProposalBusy) as exc:
                if time.monotonic() >= deadline:
                    if isinstance(exc, ProposalBusy):
                        raise
                    raise NoLeader(f"no leader of raft group {self.name} took the change") from None
                await asyncio.sleep(self.cfg.tick)
            except TimeoutError:
                raise ProposalUnknown(f"no answer within {limit:g}s") from None

    def _change_here(self, op: ChangeOp, peer: str) -> asyncio.Future[list[bytes]]:
        """Make a change as the leader; the future is done once it applied (or refused)."""
        fut: asyncio.Future[list[bytes]] = asyncio.get_running_loop().create_future()
        node = self.node
        try:
            if op is ChangeOp.TRANSFER:
                node.transfer_leadership(peer or None)
                fut.set_result([])
            else:
                index, term = node.propose_conf_change(ConfChange(_CHANGE_OPS[op], peer))
                self.pending.proposed(index, term, [Unit([], fut)])
        except NotLeader:
            raise
        except ProposalDropped as exc:  # a change still pending, a transfer under way
            fut.set_exception(ProposalBusy(str(exc)))
        except RaftError as exc:
            fut.set_exception(ProposalRefused(str(exc)))
        self._wake.set()
        return fut

    def _forward_change(self, op: ChangeOp, peer: str, leader: str) -> asyncio.Future[list[bytes]]:
        fut: asyncio.Future[list[bytes]] = asyncio.get_running_loop().create_future()
        rid = self.forwarded.next_id()
        self._changes[rid] = fut
        s = self.transport.subjects
        self.transport.request(s.control(leader), s.reply(self.member, rid), encode_change(op, peer))
        return fut

    def _on_change(self, subject: bytes, reply: bytes | None, data: bytes) -> None:
        """A change another member asked of this one, as the leader."""
        if self._stopping:
            return
        answer = self.transport.answer
        try:
            op, peer = decode_change(data)
        except WireError as exc:
            if reply:
                answer(reply, encode_answer(Status.REFUSED, f"malformed change: {exc}"))
            return
        if not reply:  # the leader's notice that this member was removed
            if op is ChangeOp.REMOVE and peer == self.member:  # ids are never reused: it is final
                self._removed_notice()
            return
        if self.node.role is not _LEADER:
            answer(reply, encode_answer(Status.NOT_LEADER, self.node.leader))
            return
        fut = self._change_here(op, peer)

        def done(f: asyncio.Future[list[bytes]]) -> None:
            exc = f.exception()
            if exc is None:
                answer(reply, encode_answer(Status.OK))
            elif isinstance(exc, NotLeader):
                answer(reply, encode_answer(Status.NOT_LEADER, exc.leader))
            elif isinstance(exc, ProposalError):
                if exc.definite:
                    answer(reply, encode_answer(status_for(exc), str(exc)))
            else:
                answer(reply, encode_answer(Status.REFUSED, str(exc)))

        fut.add_done_callback(done)

    def _removed_notice(self) -> None:
        if self._told_removed:
            return
        self._told_removed = True
        log.info("raft %s: this member (%s) was removed from the group: it stops", self.name, self.member)
        self._stopping = True
        if self._ticker is not None:
            self._ticker.cancel()
        self.transport.close()
        self._fail_waiting(ProposalUnknown(f"this member of raft group {self.name} was removed"))
        self._wake.set()

    def _on_join(self, subject: bytes, reply: bytes | None, data: bytes) -> None:
        """A new member asks to join: the leader adds it as a learner, and makes it a voter
        once it has caught up (``_maybe_promote``)."""
        try:
            member, server_name = decode_join(data)
        except WireError:
            return
        if member == self.member:
            return
        self.names.setdefault(member, server_name)
        node = self.node
        if node.role is not _LEADER or member in node.membership.voters:
            return
        self._promote.add(member)  # taken in by a later tick if not now
        if member not in node.membership.learners:
            self._admit(member)

    def _admit(self, member: str) -> bool:
        """Propose adding a member that asked to join as a learner; whether it was proposed
        (one membership change at a time; not before the log was compacted once, for a group
        that hands joiners a snapshot: ``snapshot_before_join``)."""
        if self.snapshot_before_join and not self.store.snapshot_meta().index:
            self._seed_wanted = True  # taken by the loop
            self._wake.set()
            return False
        try:
            index, _ = self.node.propose_conf_change(ConfChange(ConfChangeOp.ADD_LEARNER, member))
        except RaftError as exc:
            log.debug("raft %s: %s asks to join, not now: %s", self.name, member, exc)
            return False
        name = self.names.get(member, member)
        log.info("raft %s: adding %s (%s) as a learner (entry %d)", self.name, member, name, index)
        self._wake.set()
        return True

    def _maybe_promote(self) -> None:
        node = self.node
        membership = node.membership
        status = node.status()
        for member in list(self._promote):
            if member in membership.voters:
                self._promote.discard(member)
                continue
            if member not in membership.members():  # asked while another change was going on
                if member in self._applied_gone:
                    self._promote.discard(member)
                elif self._admit(member):
                    return
                continue
            peer = status.peers.get(member)
            if peer is None or peer.match < status.commit:
                continue
            try:
                index, _ = node.propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, member))
            except RaftError:
                return  # one change at a time: the next tick tries again
            log.info("raft %s: %s caught up, made a voter (entry %d)", self.name, member, index)
            self._wake.set()
            return
