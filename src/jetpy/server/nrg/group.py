"""RaftGroup: one member of one Raft group on this server, driven on the event loop.

Owns the host's loop around a :class:`~jetpy.raft.RaftNode` (see ``jetpy.raft.ready``): a
ticker (``GroupConfig.tick`` seconds per Raft tick), messages in from the transport and out to
it, the durable log with every fsync in a worker thread (one sync job per ``Ready``; proposals
that arrive meanwhile go into the next one: group commit), applying committed entries to the
:class:`~jetpy.server.nrg.machine.StateMachine` and answering their proposers, snapshots (the
machine's state, written off the loop, the log compacted behind it; a leader's snapshot
installed off the loop), proposals forwarded to the leader, membership changes, joining as a new
member and leadership transfer. A store error stops the group (fail-stop): it never answers a
proposal it could not make durable.

Threads: the store belongs to the loop. A disk job (``StoreJob``) runs in the host's executor
while the loop goes on stepping messages into the node, which reads the store (never writes it).
Installing a leader's snapshot runs wholly in a worker thread: while one is pending the node
reads nothing of the store (its log answers from the snapshot and the unstable tail).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Final

from jetpy.raft import (
    AppendResponse,
    Config,
    EntryKind,
    HeartbeatResponse,
    Message,
    NotLeader,
    ProposalDropped,
    RaftError,
    RaftNode,
    Ready,
    Role,
    VoteRequest,
    persist_ready,
)
from jetpy.server.broker import Broker
from jetpy.server.nrg.changes import GroupChanges
from jetpy.server.nrg.config import GroupConfig
from jetpy.server.nrg.lease import Lease
from jetpy.server.nrg.machine import (
    GroupStopped,
    NoLeader,
    ProposalBusy,
    ProposalError,
    ProposalRefused,
    ProposalUnknown,
    StateMachine,
)
from jetpy.server.nrg.proposals import Forwarded, Pending, Remote, Unit, error_for, fail
from jetpy.server.nrg.status import GroupStatus, peer_states
from jetpy.server.nrg.transport import Handlers, Transport
from jetpy.server.nrg.wire import (
    ChangeOp,
    Status,
    WireError,
    decode_answer,
    decode_batch,
    encode_batch,
    encode_change,
    encode_join,
)
from jetpy.store.raftlog import RaftLogStore, StoreJob

__all__ = ["MAX_PROPOSAL_BYTES", "RaftGroup"]

log = logging.getLogger("jetpy.server")

MAX_PROPOSAL_BYTES: Final = 8 << 20
"""The largest unit proposed at once (it travels to the leader in one message, and goes into
one entry however large)."""

_LEADER, _FOLLOWER = Role.LEADER, Role.FOLLOWER
_NORMAL = EntryKind.NORMAL
_STATE_NAMES = {
    Role.LEADER: "LEADER",
    Role.FOLLOWER: "FOLLOWER",
    Role.PRE_CANDIDATE: "CANDIDATE",
    Role.CANDIDATE: "CANDIDATE",
}


class RaftGroup(GroupChanges):
    def __init__(
        self,
        name: str,
        member: str,
        store: RaftLogStore,
        machine: StateMachine,
        broker: Broker,
        executor: Executor,
        config: GroupConfig,
        server_name: str,
        names: dict[str, str],
        joining: bool = False,
    ) -> None:
        self.name = name
        self.member = member
        self.store = store
        self.machine = machine
        self.cfg = config
        self.server_name = server_name
        self.names = names  # member id -> server name (the host's, shared by its groups)
        names.setdefault(member, server_name)  # a joining member's id is not derived from the name
        self._executor = executor
        self.node = RaftNode(
            Config(
                member,
                election_ticks=config.election_ticks,
                heartbeat_ticks=config.heartbeat_ticks,
                max_append_bytes=config.max_append_bytes,
                max_uncommitted_bytes=config.max_uncommitted_bytes,
                snapshot_entries=config.snapshot_entries,
                snapshot_bytes=config.snapshot_bytes,
            ),
            store,
            random.Random(),
        )
        self.transport = Transport(broker, name, member)
        self.applied = store.snapshot_meta().index
        self.pending = Pending(config.max_entry_items, config.max_entry_bytes)
        self.forwarded = Forwarded()
        self._forward: list[Unit] = []  # to forward to the leader at the end of this loop turn
        self._parked: list[tuple[Unit, float]] = []  # waiting for a leader to be known
        self._changes: dict[int, asyncio.Future[list[bytes]]] = {}  # forwarded changes by id
        self._promote: set[str] = set()  # joined learners to make voters once caught up
        self.last_seen: dict[str, float] = {}
        self.leader_since: float | None = None
        self.last_append: float | None = None
        self.last_snapshot: tuple[float, float] | None = None  # (epoch seconds, seconds it took)
        self.ever_had_leader = False
        self.error = ""
        self._was_member = member in self.node.membership.members()
        self._applied_members = self.node.membership.members()
        self._applied_gone: set[str] = set()  # members removed (ids are never reused)
        self._told_removed = False
        # a new member asks to join until it is a voter (also after a restart before that)
        self.joining = joining or member not in self.node.membership.voters
        self._last_join = float("-inf")
        self._eager_until = 0.0  # campaign every tick until a leader is known, until then
        # A group whose state machine held state before its log began (a stream's group founded
        # over what its store holds) hands a joining member a snapshot, never its log from the
        # start, which lacks that state: a join waits until the log was compacted once (a
        # snapshot taken as soon as the leader applied an entry; the joiner asks again).
        self.snapshot_before_join = False
        self._seed_wanted = False
        self.lease = Lease(config.tick, config.election_timeout, time.monotonic())
        self._wake = asyncio.Event()
        self._stopping = False  # no longer taking part
        self._closed = False  # stopped, the store closed
        self._task: asyncio.Task[None] | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        # told True when this member becomes the leader, False when it stops being it
        self.on_leader: Callable[[bool], None] | None = None

    # ================================================================== lifecycle
    def start(self) -> None:
        snap = self.store.snapshot()
        if snap.meta.index or snap.data:
            self.machine.restore(snap.data)
        self.transport.bind(
            Handlers(self._on_message, self._on_proposal, self._on_change, self._on_answer, self._on_join)
        )
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"raft-{self.name}")
        self._ticker = loop.call_later(self.cfg.tick, self._on_tick)
        self._wake.set()

    def snapshot_soon(self) -> None:
        """Snapshot (and compact the log) once an entry is applied, if the log never was: the
        state machine's state at founding is then in the group's files, not only in the
        machine's (see ``snapshot_before_join``)."""
        self._seed_wanted = True
        self._wake.set()

    def campaign_soon(self, within: float) -> None:
        """Campaign at every tick until the group has a leader, for ``within`` seconds: a new
        group's first founder does not wait for an election timeout (seconds with nats-server's
        timers, past a client's patience for the create), and the other founders' members may
        not be listening yet when it first asks (pre-votes: no term is spent on that)."""
        self._eager_until = time.monotonic() + within

    async def stop(self) -> None:
        """Stop taking part: the current disk job finishes, the store is closed (synced). Also
        after a failure or a removal, which stopped taking part already."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        if self._ticker is not None:
            self._ticker.cancel()
        self.transport.close()
        self._wake.set()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=30.0)
        stopped = GroupStopped(f"raft group {self.name} stopped")
        self._fail_waiting(stopped)
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self.store.close)
        except Exception as exc:  # already failed (fail-stop): the directory is released anyway
            log.debug("raft %s: closing its store: %s", self.name, exc)

    def _fail_waiting(self, exc: ProposalError) -> None:
        self.pending.fail_all(exc)
        for u in self._forward:
            fail(u.waiter, exc)
        self._forward.clear()
        for u, _ in self._parked:
            fail(u.waiter, exc)
        self._parked.clear()
        for rid in list(self.forwarded.requests):
            for u in self.forwarded.pop(rid) or ():
                fail(u.waiter, exc)
        for fut in self._changes.values():
            if not fut.done():
                fut.set_exception(exc)
        self._changes.clear()

    def _fatal(self, why: str) -> None:
        """Fail-stop: stop taking part, keep the directory as it is for inspection."""
        if not self.error:
            self.error = why
            log.error("raft %s: stopped: %s", self.name, why)
        self._stopping = True
        if self._ticker is not None:
            self._ticker.cancel()
        self.transport.close()
        self._fail_waiting(ProposalUnknown(f"raft group {self.name} failed: {why}"))

    # ================================================================== the loop
    async def _run(self) -> None:
        node = self.node
        try:
            while not self._stopping:
                await self._wake.wait()
                self._wake.clear()
                while not self._stopping:
                    if self.pending.queue:
                        self._pack()
                    if self._seed_wanted and self.applied:
                        self._seed_wanted = False
                        if not self.store.snapshot_meta().index:
                            await self._snapshot()
                    if not node.has_ready():
                        break
                    await self._process(node.ready())
        except Exception as exc:
            log.exception("raft %s: the group's loop failed", self.name)
            self._fatal(f"{type(exc).__name__}: {exc}")

    async def _process(self, rd: Ready) -> None:
        send = self.transport.send
        for m in rd.messages:
            send(m)
        store = self.store
        loop = asyncio.get_running_loop()
        if rd.snapshot is not None:
            await loop.run_in_executor(self._executor, self._install, rd)
        else:
            if rd.entries:
                job = store.begin_truncate(rd.entries[0].index)
                if job is not None:
                    await self._run_job(job)
            persist_ready(store, rd)
            if rd.entries:
                self.last_append = time.time()
            if rd.must_sync:
                await self._run_job(store.begin_sync())
        for m in rd.persisted_messages:
            send(m)
        self._apply(rd)
        if rd.soft_state is not None:
            self._role_changed(rd.soft_state.role, rd.soft_state.leader)
        self.node.advance(rd)
        if rd.want_snapshot and not self._stopping:
            await self._snapshot()

    def _install(self, rd: Ready) -> None:
        """A leader's snapshot and what follows it, made durable (on a worker thread)."""
        persist_ready(self.store, rd)
        self.store.sync()

    async def _run_job(self, job: StoreJob) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, job.run)
        except OSError:
            pass  # finish raises it as the store's error
        self.store.finish(job)

    def _apply(self, rd: Ready) -> None:
        machine, pending = self.machine, self.pending
        if rd.snapshot is not None:
            machine.restore(rd.snapshot.data)
            self.applied = rd.snapshot.meta.index
            pending.covered_by_snapshot(self.applied)
            self._membership_applied()
        for e in rd.committed:
            if e.kind is _NORMAL:
                items = decode_batch(e.data)  # a WireError here is a bug or damage: fail-stop
                results = list(machine.apply(e.index, items))
                if len(results) != len(items):
                    raise RuntimeError(f"apply returned {len(results)} results for {len(items)} proposals")
                pending.applied(e.index, e.term, results)
            else:
                pending.applied(e.index, e.term, None)
                if e.kind is EntryKind.CONF:
                    self._membership_applied()
            self.applied = e.index

    def _membership_applied(self) -> None:
        members = self.node.membership.members()
        if self.member in members:
            self._was_member = True
        gone = self._applied_members - members
        self._applied_members = members
        self._applied_gone |= gone
        if self.node.role is _LEADER:
            # A removed member never hears of its removal through Raft (the leader stops sending
            # to it as soon as the change is in its log): tell it, so it stops taking part.
            for peer in gone:
                self.transport.request(
                    self.transport.subjects.control(peer), b"", encode_change(ChangeOp.REMOVE, peer)
                )

    @property
    def removed(self) -> bool:
        """This member was in the group and was removed (told so by the leader, or in the newest
        membership it knows of)."""
        return self._told_removed or (self._was_member and self.member not in self.node.membership.members())

    async def _snapshot(self) -> None:
        node, store = self.node, self.store
        if node.log.snapshot is not None:
            return  # a leader's snapshot is being installed: it replaces the log anyway
        started = time.time()
        data = self.machine.snapshot()
        snap = node.snapshot_at(self.applied, data)
        job = store.begin_compact(snap)
        if job is not None:
            await self._run_job(job)
        self.last_snapshot = (started, time.time() - started)

    def _role_changed(self, role: Role, leader: str) -> None:
        self.lease.reset()
        if leader:
            self.ever_had_leader = True
        was_leader = self.leader_since is not None
        if role is _LEADER:
            if not was_leader:
                self.leader_since = time.time()
                log.info("raft %s: %s is the leader in term %d", self.name, self.member, self.node.term)
        else:
            self.leader_since = None
            if was_leader:
                # Not yet packed into an entry: nobody has these; send them where they belong now.
                for u in self.pending.take_all():
                    self._resubmit(u)
        if (role is _LEADER) != was_leader and self.on_leader is not None:
            self.on_leader(role is _LEADER)
        if leader:
            parked, self._parked = self._parked, []
            for u, _ in parked:
                self._submit(u)

    def _wakeup(self) -> None:
        self._wake.set()

    # ================================================================== ticks
    def _on_tick(self) -> None:
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(self.cfg.tick, self._on_tick)
        node = self.node
        node.tick()
        now = time.monotonic()
        self.lease.ticked(now)
        if node.role is _LEADER and self._promote:
            self._maybe_promote()
        if self._eager_until:
            if node.leader or now >= self._eager_until:
                self._eager_until = 0.0
            elif node.role is not _LEADER:
                node.campaign()
                self._wake.set()
        # a joiner asks once per heartbeat interval: a group founded just after it started (an
        # R1 stream scaled up founds its group as the new replicas start) takes it in at once
        if self.joining and now - self._last_join >= self.cfg.tick * self.cfg.heartbeat_ticks:
            if self.member in node.membership.voters or self.removed:
                self.joining = False
            else:
                self._last_join = now
                self.transport.announce_join(encode_join(self.member, self.server_name))
        for u in self.forwarded.expire(now):
            fail(u.waiter, ProposalUnknown("no answer from the leader"))
        if self._parked:
            keep = []
            for u, since in self._parked:
                if now - since > self.cfg.timeout:
                    fail(
                        u.waiter,
                        NoLeader(f"no leader of raft group {self.name} within {self.cfg.timeout:g}s"),
                    )
                else:
                    keep.append((u, since))
            self._parked = keep
        if node.has_ready():
            self._wake.set()

    # ================================================================== messages in
    def _on_message(self, m: Message) -> None:
        if self._stopping:
            return
        now = self.last_seen[m.src] = time.monotonic()
        node = self.node
        if node.role is _LEADER and isinstance(m, HeartbeatResponse | AppendResponse) and m.term == node.term:
            self.lease.answered(m.src, now)
        if node.role is _LEADER and isinstance(m, VoteRequest) and m.src in self._applied_gone:
            # a member removed while it was away (restarted from a log that predates its removal)
            self.transport.request(
                self.transport.subjects.control(m.src), b"", encode_change(ChangeOp.REMOVE, m.src)
            )
        try:
            self.node.step(m)
        except RaftError as exc:
            log.warning("raft %s: message from %s refused: %s", self.name, m.src, exc)
            return
        self._wake.set()

    # ================================================================== proposals
    async def propose(self, item: bytes, within: float | None = None) -> bytes:
        """Replicate ``item``; its result from the state machine once a quorum has it on disk and
        it applied. Raises a :class:`~jetpy.server.nrg.machine.ProposalError`."""
        return (await self.propose_many([item], within))[0]

    async def propose_many(self, items: Sequence[bytes], within: float | None = None) -> list[bytes]:
        """Replicate ``items`` in one entry, together (all apply or none)."""
        fut = self._propose(list(items))
        try:
            return await asyncio.wait_for(fut, within if within is not None else self.cfg.timeout)
        except TimeoutError:
            raise ProposalUnknown(f"no result within {within or self.cfg.timeout:g}s") from None

    @property
    def is_leader(self) -> bool:
        return self.node.role is _LEADER and not self._stopping

    @property
    def in_lease(self) -> bool:
        """Leading, and sure no other leader exists now (:mod:`.lease`): what it applied is
        current for a read or a delivery."""
        m = self.node.membership
        return self.is_leader and self.lease.holds(time.monotonic(), self.member, m.voters, m.quorum)

    async def wait_lease(self, within: float) -> bool:
        """:attr:`in_lease` within ``within`` seconds, while leading (a leader just elected, or
        on a loop that stalled, has not heard a quorum in its term yet); False once it is not."""
        deadline = time.monotonic() + within
        while not self.in_lease:
            if not self.is_leader or time.monotonic() >= deadline:
                return False
            await asyncio.sleep(self.cfg.tick / 2)
        return True

    def propose_nowait(self, item: bytes) -> asyncio.Future[list[bytes]]:
        """:meth:`propose` without waiting (the publish path: no task per message): its result's
        future (no time limit: a forward expires, a wait for a leader times out)."""
        return self._propose([item])

    def _propose(self, items: list[bytes]) -> asyncio.Future[list[bytes]]:
        if self._stopping:
            raise GroupStopped(f"raft group {self.name} is stopped")
        unit = Unit(items, asyncio.get_running_loop().create_future())
        if unit.size > MAX_PROPOSAL_BYTES:
            raise ProposalRefused(
                f"a proposal of {unit.size} bytes is over the limit of {MAX_PROPOSAL_BYTES}"
            )
        fut = unit.waiter
        assert not isinstance(fut, Remote)
        self._submit(unit)
        return fut

    def _submit(self, unit: Unit) -> None:
        node = self.node
        if node.role is _LEADER:
            self.pending.add(unit)
            self._wake.set()
        elif node.leader:
            self._forward.append(unit)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush_forward)
        else:
            self._parked.append((unit, time.monotonic()))

    def _resubmit(self, unit: Unit) -> None:
        """A unit that was not proposed (a definite refusal): a local one tries again, a forwarded
        one is told who leads now."""
        if isinstance(unit.waiter, Remote):
            unit.waiter.fail(Status.NOT_LEADER, self.node.leader)
        elif not unit.waiter.done():
            self._submit(unit)

    def _pack(self) -> None:
        """The queued units into entries (leader only)."""
        node, pending = self.node, self.pending
        while pending.queue:
            units = pending.next_entry()
            items = [it for u in units for it in u.items]
            try:
                index, term = node.propose(encode_batch(items))
            except NotLeader:
                for u in units:
                    self._resubmit(u)
                continue
            except ProposalDropped as exc:
                busy = ProposalBusy(str(exc))
                for u in units:
                    fail(u.waiter, busy)
                continue
            pending.proposed(index, term, units)

    def _flush_forward(self) -> None:
        self._flush_scheduled = False
        units, self._forward = self._forward, []
        live = [u for u in units if isinstance(u.waiter, Remote) or not u.waiter.done()]
        if not live:
            return
        leader = self.node.leader
        if not leader or self.node.role is _LEADER:
            for u in live:
                self._submit(u)
            return
        limit = self.cfg.max_entry_bytes
        start = size = 0
        for i, u in enumerate(live):  # requests of whole units, each at most an entry's worth
            if i > start and size + u.size > limit:
                self._send_forward(live[start:i], leader)
                start, size = i, 0
            size += u.size
        self._send_forward(live[start:], leader)

    def _send_forward(self, units: list[Unit], leader: str) -> None:
        rid = self.forwarded.add(units, leader)
        s = self.transport.subjects
        items = [it for u in units for it in u.items]
        self.transport.request(s.proposals(leader), s.reply(self.member, rid), encode_batch(items))

    def _on_proposal(self, subject: bytes, reply: bytes | None, data: bytes) -> None:
        """Proposals another member forwarded here, as to the leader."""
        if self._stopping or reply is None:
            return
        remote = Remote(reply, self.transport.answer)
        if self.node.role is not _LEADER:
            remote.fail(Status.NOT_LEADER, self.node.leader)
            return
        try:
            items = decode_batch(data)
        except WireError as exc:
            remote.fail(Status.REFUSED, f"malformed proposal: {exc}")
            return
        self.pending.add(Unit(items, remote))
        self._wake.set()

    def _on_answer(self, subject: bytes, reply: bytes | None, data: bytes) -> None:
        """The leader's answer to a request this member forwarded."""
        try:
            rid = int(subject.rsplit(b".", 1)[1])
            status, detail, results = decode_answer(data)
        except (ValueError, IndexError, WireError) as exc:
            log.warning(
                "raft %s: malformed answer on %s: %s", self.name, subject.decode(errors="replace"), exc
            )
            return
        change = self._changes.pop(rid, None)
        if change is not None:
            if change.done():
                return
            if status is Status.OK:
                change.set_result([])
            elif status is Status.NOT_LEADER:
                change.set_exception(NotLeader(detail))
            else:
                change.set_exception(error_for(status, detail))
            return
        units = self.forwarded.pop(rid)
        if units is None:
            return
        if status is Status.OK and results is not None:
            pos = 0
            for u in units:
                n = len(u.items)
                if not isinstance(u.waiter, Remote) and not u.waiter.done():
                    u.waiter.set_result(results[pos : pos + n])
                pos += n
        elif status is Status.NOT_LEADER:
            for u in units:
                self._resubmit(u)  # definitely not proposed: try the leader we know now
        else:
            err = error_for(status, detail)
            for u in units:
                fail(u.waiter, err)

    # ================================================================== state
    def status(self) -> GroupStatus:
        node = self.node
        st = node.status()
        now = time.monotonic()
        timeout = self.cfg.election_timeout
        membership = st.membership
        peers = peer_states(
            membership, self.member, st.peers, st.commit, self.last_seen, self.names, now, timeout
        )
        log_ = node.log
        state = "CLOSED" if self._stopping else _STATE_NAMES[st.role]
        catching_up = bool(st.repair_through) or log_.snapshot is not None or self.applied < st.commit
        queued = len(self.pending.queue) + len(self._forward) + len(self._parked)
        return GroupStatus(
            group=self.name,
            id=self.member,
            state=state,
            leader=st.leader,
            leader_since=self.leader_since if st.role is _LEADER else None,
            ever_had_leader=self.ever_had_leader,
            term=st.term,
            vote=node.vote,
            committed=st.commit,
            applied=self.applied,
            first_index=log_.first_index(),
            last_index=st.last_index,
            last_term=log_.last_term(),
            voters=len(membership.voters),
            quorum=membership.quorum,
            observer=self.member not in membership.voters,
            current=bool(st.leader) and not catching_up and not self._stopping,
            catching_up=catching_up,
            repair_through=st.repair_through,
            peers=peers,
            error=self.error,
            proposals_queued=queued,
            proposals_pending=queued + len(self.pending.waiting) + len(self.forwarded.requests),
            log_bytes=self.store.size_bytes(),
            last_append=self.last_append,
            last_snapshot=self.last_snapshot,
        )
