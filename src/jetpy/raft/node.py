"""One Raft node as a pure state machine: messages, ticks and proposals in; a ``Ready`` out.

Owns: roles and terms, elections (pre-vote, randomized timeouts from the injected RNG, leader
lease), replication (per-follower progress, fast back-off by term, snapshots for followers
behind the compacted log), commit by a quorum of *durably persisted* logs, check-quorum,
leadership transfer, one-at-a-time membership changes and the damaged-log repair rule.
Must not know: sockets, files, clocks or threads (``pyproject.toml`` forbids importing them
here). The host calls ``tick`` on a timer, ``step`` for every received message, ``propose*``
for new data, and drains ``ready``/``advance`` (see ``ready.py`` for the loop).

Durability rules this module keeps (the reasons a PubAck can mean "a quorum has it on disk"):

* A leader counts its own log towards a commit only up to ``RaftLog.persisted``, which moves
  when the host's ``advance`` says the entries are synced; followers acknowledge entries in
  ``persisted_messages``, which the host sends only after its sync.
* Votes and anything sent while a new term or vote is not yet synced go in
  ``persisted_messages`` too, so a restarted node can never vote twice in one term.
* Committed entries are handed out for applying only once they are on this node's own disk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .codec import CodecError, decode_conf, encode_conf
from .config import Config, Rng
from .log import RaftLog
from .messages import (
    AppendRequest,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from .ready import Ready, SoftState, Status
from .replication import Replicator
from .storage import LogReader
from .types import (
    NO_NODE,
    ConfChange,
    Entry,
    EntryKind,
    HardState,
    Membership,
    NotLeader,
    ProposalDropped,
    RaftError,
    Role,
    Snapshot,
    SnapshotMeta,
)

__all__ = ["RaftNode"]

_NORMAL, _NOOP, _CONF = EntryKind.NORMAL, EntryKind.NOOP, EntryKind.CONF
_LEADER, _FOLLOWER = Role.LEADER, Role.FOLLOWER


class RaftNode:
    def __init__(self, config: Config, storage: LogReader, rng: Rng) -> None:
        self.cfg = config
        self.id = config.id
        self._rng = rng
        hs = storage.initial_state()
        self.log = RaftLog(storage, hs.commit)
        self.term = hs.term
        self.vote = hs.vote
        self.repair_through = hs.repair_through
        meta = storage.snapshot_meta()
        # (index, membership) of every membership in force since the snapshot, oldest first.
        self._confs: list[tuple[int, Membership]] = [(meta.index, meta.membership)]
        for e in storage.conf_entries():
            self._confs.append((e.index, decode_conf(e.data)))
        self._members: tuple[str, ...] = ()
        self._voters: tuple[str, ...] = ()
        self._prev_hs = hs
        self._synced_vote = (hs.term, hs.vote)  # the term and vote the host has on disk
        self.role = _FOLLOWER
        self.leader = NO_NODE
        self._prev_soft = SoftState(_FOLLOWER, NO_NODE)
        self._msgs: list[Message] = []  # may go out before this node syncs
        self._msgs_after: list[Message] = []  # only after the sync
        self._repl: Replicator | None = None  # while leader
        self._votes: dict[str, bool] = {}
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = config.election_ticks
        self._snapshot_requested = 0  # first index of the log when the host was last asked
        self._applied_bytes = 0  # applied data since the last snapshot (Config.snapshot_bytes)
        self._membership_changed()
        self._become_follower(self.term, NO_NODE)

    # ================================================================== public API
    @property
    def membership(self) -> Membership:
        return self._confs[-1][1]

    def tick(self) -> None:
        """One unit of the host's clock."""
        if self.role is _LEADER:
            self._tick_leader()
        else:
            self._election_elapsed += 1
            if self._election_elapsed >= self._timeout and self._promotable():
                self._election_elapsed = 0
                self._hup(transfer=False)

    def campaign(self) -> None:
        """Start an election now (as if the election timeout had passed)."""
        if self.role is not _LEADER and self._promotable():
            self._hup(transfer=False)

    def propose(self, data: bytes) -> tuple[int, int]:
        """Append ``data`` as one entry; returns its (index, term). The entry is committed when
        a ``Ready`` hands it back in ``committed`` with that same term."""
        return self.propose_batch((data,))

    def propose_batch(self, items: Sequence[bytes]) -> tuple[int, int]:
        """Append one entry per item; returns (index of the first, term)."""
        size = 0
        if self.cfg.max_uncommitted_bytes:
            for d in items:
                size += len(d)
        repl = self._check_propose(size)
        log = self.log
        first = log.last_index() + 1
        term = self.term
        new = tuple.__new__  # Entry is a NamedTuple: skip its Python-level __new__
        log.append([new(Entry, (first + i, term, _NORMAL, d)) for i, d in enumerate(items)])
        repl.appended(first + len(items) - 1, size)
        return first, term

    def propose_conf_change(self, change: ConfChange) -> tuple[int, int]:
        """Add or remove one server (one change at a time: the previous one must be committed)."""
        repl = self._check_propose(0)
        if repl.pending_conf_index > self.log.committed:
            raise ProposalDropped("a membership change is still pending")
        try:
            new = self.membership.apply(change)
        except ValueError as exc:
            raise RaftError(f"membership change refused: {exc}") from exc
        index = self.log.last_index() + 1
        self.log.append([Entry(index, self.term, _CONF, encode_conf(new))])
        self._confs.append((index, new))
        repl.pending_conf_index = index
        repl.appended(index, 0)
        self._membership_changed()
        self._maybe_commit()
        return index, self.term

    def transfer_leadership(self, target: str | None = None) -> str:
        """Hand leadership to ``target`` (or the most caught-up voter): proposals are refused
        until it takes over or an election timeout passes. Returns the chosen peer."""
        repl = self._repl
        if repl is None:
            raise NotLeader(self.leader)
        if target is None:
            target = repl.best_successor(self._voters)
        if target == self.id:
            return target
        if target not in self.membership.voters:
            raise RaftError(f"cannot transfer leadership to {target}: not a voter")
        if repl.transferee != target:
            self._election_elapsed = 0  # the transfer must finish within one election timeout
            repl.transfer(target)
        return target

    def snapshot_at(self, index: int, data: bytes) -> Snapshot:
        """A snapshot of the host's state machine, applied through ``index``, with the log
        position and membership it replaces; the host then calls ``store.compact`` with it."""
        if index > self.log.applied:
            raise RaftError(f"cannot snapshot at {index}: applied only through {self.log.applied}")
        if self.log.snapshot is not None:
            raise RaftError("cannot snapshot while a leader's snapshot is being installed")
        term = self.log.term(index)
        if term is None:
            raise RaftError(f"cannot snapshot at {index}: not in the log")
        membership = self._membership_at(index)
        while len(self._confs) > 1 and self._confs[1][0] <= index:
            del self._confs[0]
        self._snapshot_requested = 0
        self._applied_bytes = 0
        return Snapshot(SnapshotMeta(index, term, membership), data)

    def step(self, m: Message) -> None:
        """Feed one message received from a peer."""
        if m.dst != self.id or m.src == self.id:
            return
        if m.term > self.term:
            if isinstance(m, VoteRequest):
                if not m.transfer and self._in_lease():
                    return  # we hear from a live leader: this candidate would only disrupt
                if not m.pre:
                    self._become_follower(m.term, NO_NODE)
            elif isinstance(m, VoteResponse) and m.pre and m.granted:
                pass  # a pre-vote granted for the term we would campaign in
            else:
                lead = m.src if isinstance(m, AppendRequest | Heartbeat | InstallSnapshot) else NO_NODE
                self._become_follower(m.term, lead)
        elif m.term < self.term:
            if isinstance(m, AppendRequest | Heartbeat):
                # A leader from an older term: our term makes it step down.
                self._send(HeartbeatResponse(self.id, m.src, self.term))
            elif isinstance(m, VoteRequest) and m.pre:
                self._send(VoteResponse(self.id, m.src, self.term, False, True))
            return
        _HANDLERS[type(m)](self, m)

    def has_ready(self) -> bool:
        log = self.log
        return bool(
            self._msgs
            or self._msgs_after
            or (self._repl is not None and self._repl.pending())
            or log.unhanded()
            or (log.snapshot is not None and not log.handed_snapshot)
            or self._hard_state() != self._prev_hs
            or log.has_next_committed()
            or SoftState(self.role, self.leader) != self._prev_soft
            or self._want_snapshot()
        )

    def ready(self) -> Ready:
        """Everything to persist, send and apply since the previous ``Ready``."""
        if self._repl is not None:
            self._repl.flush()
        log = self.log
        rd = Ready()
        if log.snapshot is not None and not log.handed_snapshot:
            rd.snapshot = log.snapshot
            log.handed_snapshot = True
        entries = log.unhanded()
        if entries:
            rd.entries = entries
            log.handed = entries[-1].index
        hs = self._hard_state()
        if hs != self._prev_hs:
            rd.hard_state = hs
            rd.must_sync = (hs.term, hs.vote, hs.repair_through) != (
                self._prev_hs.term,
                self._prev_hs.vote,
                self._prev_hs.repair_through,
            )
            self._prev_hs = hs
        committed = log.next_committed(self.cfg.max_apply_bytes)
        if committed:
            rd.committed = committed
            log.applying = committed[-1].index
            if self.cfg.snapshot_bytes:
                self._applied_bytes += sum(len(e.data) for e in committed)
        if (hs.term, hs.vote) != self._synced_vote:
            # Nothing may carry a term or vote this node has not synced yet.
            rd.persisted_messages = self._msgs + self._msgs_after
        else:
            rd.messages = self._msgs
            rd.persisted_messages = self._msgs_after
        self._msgs = []
        self._msgs_after = []
        rd.must_sync = rd.must_sync or bool(rd.entries) or rd.snapshot is not None
        soft = SoftState(self.role, self.leader)
        if soft != self._prev_soft:
            rd.soft_state = soft
            self._prev_soft = soft
        if self._want_snapshot():
            rd.want_snapshot = True
            self._snapshot_requested = log.first_index()
        return rd

    def advance(self, rd: Ready) -> None:
        """The host persisted and synced ``rd``, sent its messages and applied its entries."""
        log = self.log
        if rd.hard_state is not None:
            self._synced_vote = (rd.hard_state.term, rd.hard_state.vote)
        if rd.snapshot is not None:
            log.stable_snapshot(rd.snapshot)
            log.applied_to(rd.snapshot.meta.index)
        if rd.entries:
            last = rd.entries[-1]
            log.stable_to(last.index, last.term)
        if rd.committed:
            log.applied_to(rd.committed[-1].index)
        if self.role is _LEADER:
            self._maybe_commit()
        if self.repair_through and log.persisted >= self.repair_through:
            self.repair_through = 0  # caught up through a leader: this node may vote again

    def status(self) -> Status:
        peers = self._repl.status() if self._repl is not None else {}
        log = self.log
        return Status(
            self.id,
            self.role,
            self.leader,
            self.term,
            log.committed,
            log.applied,
            log.last_index(),
            self.membership,
            self.repair_through,
            peers,
        )

    # ================================================================== roles
    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = NO_NODE
        self.leader = NO_NODE
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        ticks = self.cfg.election_ticks
        self._timeout = ticks + self._rng.randrange(ticks)
        self._votes = {}
        self._repl = None

    def _become_follower(self, term: int, leader: str) -> None:
        self._reset(term)
        self.role = _FOLLOWER
        self.leader = leader

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.role = _LEADER
        self.leader = self.id
        log = self.log
        repl = self._repl = Replicator(self.cfg, self.term, log, self._members, self._send)
        last = log.last_index()
        # Raft §5.4.2: entries of earlier terms commit only through an entry of this term.
        log.append([Entry(last + 1, self.term, _NOOP, b"")])
        repl.pending_conf_index = last + 1  # no membership change before that commits
        repl.appended(last + 1, 0)
        self._maybe_commit()

    def _promotable(self) -> bool:
        log = self.log
        return (
            self.id in self.membership.voters
            and not self.repair_through
            and log.snapshot is None  # an incoming snapshot not yet on disk
        )

    def _in_lease(self) -> bool:
        return (
            self.cfg.check_quorum
            and self.leader != NO_NODE
            and self._election_elapsed < self.cfg.election_ticks
        )

    def _hup(self, transfer: bool) -> None:
        if self.cfg.pre_vote and not transfer:
            self._campaign(pre=True, transfer=False)
        else:
            self._campaign(pre=False, transfer=transfer)

    def _campaign(self, pre: bool, transfer: bool) -> None:
        if pre:
            # Pre-vote: ask whether we could win term + 1 without touching our term or vote.
            self.role = Role.PRE_CANDIDATE
            self.leader = NO_NODE
            vote_term = self.term + 1
        else:
            self._reset(self.term + 1)
            self.role = Role.CANDIDATE
            self.vote = self.id
            vote_term = self.term
        self._votes = {self.id: True}
        if self._tally(pre):
            return
        log = self.log
        last_index, last_term = log.last_index(), log.last_term()
        for v in self._voters:
            if v != self.id:
                req = VoteRequest(self.id, v, vote_term, last_index, last_term, pre, transfer)
                # A real vote request carries our own new vote: it waits for the sync.
                (self._msgs if pre else self._msgs_after).append(req)

    def _tally(self, pre: bool) -> bool:
        """Count the votes; True if the election is decided (won or lost)."""
        voters = self.membership.voters
        granted = rejected = 0
        for v, ok in self._votes.items():
            if v in voters:
                if ok:
                    granted += 1
                else:
                    rejected += 1
        quorum = self.membership.quorum
        if granted >= quorum:
            if pre:
                self._campaign(pre=False, transfer=False)
            else:
                self._become_leader()
            return True
        if len(voters) - rejected < quorum:
            self._become_follower(self.term, NO_NODE)
            return True
        return False

    def _tick_leader(self) -> None:
        repl = self._repl
        assert repl is not None
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        if self._election_elapsed >= self.cfg.election_ticks:
            self._election_elapsed = 0
            if self.cfg.check_quorum and not repl.quorum_active(self.membership):
                self._become_follower(self.term, NO_NODE)  # cannot reach a quorum: step down
                return
            repl.transferee = NO_NODE  # a transfer that did not finish in time is abandoned
        if self._heartbeat_elapsed >= self.cfg.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            repl.heartbeat()

    # ================================================================== membership
    def _membership_changed(self) -> None:
        m = self.membership
        self._members = tuple(sorted(m.members()))
        self._voters = tuple(sorted(m.voters))
        if self._repl is not None:
            self._repl.set_members(self._members)
            if self._repl.transferee not in m.voters:
                self._repl.transferee = NO_NODE

    def _membership_at(self, index: int) -> Membership:
        found = self._confs[0][1]
        for i, m in self._confs:
            if i > index:
                break
            found = m
        return found

    def _truncate_confs(self, after: int) -> bool:
        """Forget memberships from entries at or after ``after`` (a replaced suffix)."""
        changed = False
        while len(self._confs) > 1 and self._confs[-1][0] >= after:
            self._confs.pop()
            changed = True
        return changed

    # ================================================================== leader: replication
    def _check_propose(self, size: int) -> Replicator:
        repl = self._repl
        if repl is None:
            raise NotLeader(self.leader)
        if repl.transferee:
            raise ProposalDropped(f"leadership is being transferred to {repl.transferee}")
        limit = self.cfg.max_uncommitted_bytes
        if limit and repl.uncommitted_bytes and repl.uncommitted_bytes + size > limit:
            raise ProposalDropped(f"more than {limit} bytes are waiting for a quorum")
        return repl

    def _send(self, m: Message) -> None:
        self._msgs.append(m)

    def _maybe_commit(self) -> None:
        if self._repl is not None and self._repl.maybe_commit(self.membership):
            self._committed_as_leader()

    def _committed_as_leader(self) -> None:
        repl = self._repl
        assert repl is not None
        if self.id not in self.membership.voters and self._confs[-1][0] <= self.log.committed:
            # Our own removal is committed: tell everyone, hand over to the most caught-up
            # voter and go.
            repl.flush()
            try:
                self._send(TimeoutNow(self.id, repl.best_successor(self._voters), self.term))
            except RaftError:
                pass
            self._become_follower(self.term, NO_NODE)

    def _want_snapshot(self) -> bool:
        cfg = self.cfg
        if not (cfg.snapshot_entries or cfg.snapshot_bytes):
            return False
        log = self.log
        if log.snapshot is not None or self._snapshot_requested == log.first_index():
            return False
        since = log.applied - (log.first_index() - 1)
        return bool(
            (cfg.snapshot_entries and since >= cfg.snapshot_entries)
            or (cfg.snapshot_bytes and self._applied_bytes >= cfg.snapshot_bytes)
        )

    def _hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.committed, self.repair_through)

    # ================================================================== message handlers
    def _on_vote_request(self, m: VoteRequest) -> None:
        can_vote = (
            self.vote == m.src
            or (self.vote == NO_NODE and self.leader == NO_NODE)
            or (m.pre and m.term > self.term)
        )
        if can_vote and not self.repair_through and self.log.is_up_to_date(m.last_index, m.last_term):
            if m.pre:
                self._send(VoteResponse(self.id, m.src, m.term, True, True))
            else:
                self._election_elapsed = 0
                self.vote = m.src
                self._msgs_after.append(VoteResponse(self.id, m.src, m.term, True, False))
        else:
            self._send(VoteResponse(self.id, m.src, self.term, False, m.pre))

    def _on_vote_response(self, m: VoteResponse) -> None:
        if m.pre:
            if self.role is not Role.PRE_CANDIDATE or m.term > self.term + 1:
                return
        elif self.role is not Role.CANDIDATE or m.term != self.term:
            return
        self._votes.setdefault(m.src, m.granted)
        self._tally(m.pre)

    def _follow(self, m: AppendRequest | Heartbeat | InstallSnapshot) -> bool:
        """A message from this term's leader: follow it. False if we are leader ourselves (two
        leaders in one term cannot happen; such a message is dropped)."""
        if self.role is _LEADER:
            return False
        if self.role is not _FOLLOWER:
            self._become_follower(m.term, m.src)
        self.leader = m.src
        self._election_elapsed = 0
        return True

    def _on_append(self, m: AppendRequest) -> None:
        if not self._follow(m):
            return
        log = self.log
        prev_index, prev_term, entries = m.prev_index, m.prev_term, m.entries
        committed = log.committed
        if prev_index < committed:
            # Partly old news (a duplicate or a reordered append): keep what follows our commit.
            skip = committed - prev_index
            if len(entries) <= skip or entries[skip - 1].term != log.term(committed):
                self._msgs_after.append(AppendResponse(self.id, m.src, self.term, committed))
                return
            prev_index, prev_term, entries = committed, entries[skip - 1].term, entries[skip:]
        elif not log.match_term(prev_index, prev_term):
            hint_index, hint_term = log.find_conflict_by_term(min(prev_index, log.last_index()), prev_term)
            self._send(AppendResponse(self.id, m.src, self.term, prev_index, True, hint_index, hint_term))
            return
        conflict = log.find_conflict(entries) if entries else 0
        if conflict:
            new = entries[conflict - prev_index - 1 :]
            try:
                confs = [(e.index, decode_conf(e.data)) for e in new if e.kind == _CONF]
            except CodecError:
                return  # a malformed membership entry: drop the whole message
            log.truncate_and_append(new)
            changed = self._truncate_confs(conflict)
            if confs:
                self._confs.extend(confs)
            if changed or confs:
                self._membership_changed()
        last_new = prev_index + len(entries)
        log.commit_to(min(m.commit, last_new))
        self._msgs_after.append(AppendResponse(self.id, m.src, self.term, last_new))

    def _on_heartbeat(self, m: Heartbeat) -> None:
        if not self._follow(m):
            return
        log = self.log
        last = log.last_index()
        log.commit_to(min(m.commit, last))
        # The commit a leader sends is at most what we acknowledged: ending below it means
        # recovery cut our log back (damage), and the leader must stop counting on those entries.
        self._send(HeartbeatResponse(self.id, m.src, self.term, m.commit > last))

    def _on_snapshot(self, m: InstallSnapshot) -> None:
        if not self._follow(m):
            return
        log = self.log
        meta = m.snapshot.meta
        if meta.index <= log.committed:
            self._msgs_after.append(AppendResponse(self.id, m.src, self.term, log.committed))
            return
        if log.match_term(meta.index, meta.term):
            log.commit_to(meta.index)  # we hold that entry: nothing to install
            self._msgs_after.append(AppendResponse(self.id, m.src, self.term, log.committed))
            return
        log.restore(m.snapshot)
        self._confs = [(meta.index, meta.membership)]
        self._membership_changed()
        self._msgs_after.append(AppendResponse(self.id, m.src, self.term, meta.index))

    def _on_append_response(self, m: AppendResponse) -> None:
        if self._repl is not None and self._repl.on_append_response(m, self.membership):
            self._committed_as_leader()

    def _on_heartbeat_response(self, m: HeartbeatResponse) -> None:
        if self._repl is not None:
            self._repl.on_heartbeat_response(m)

    def _on_timeout_now(self, m: TimeoutNow) -> None:
        if self.role is not _LEADER and self._promotable():
            self._hup(transfer=True)


_HANDLERS: dict[type, Callable[[RaftNode, Any], None]] = {
    VoteRequest: RaftNode._on_vote_request,
    VoteResponse: RaftNode._on_vote_response,
    AppendRequest: RaftNode._on_append,
    AppendResponse: RaftNode._on_append_response,
    Heartbeat: RaftNode._on_heartbeat,
    HeartbeatResponse: RaftNode._on_heartbeat_response,
    InstallSnapshot: RaftNode._on_snapshot,
    TimeoutNow: RaftNode._on_timeout_now,
}
