"""A leader's side of replication, for one term: what each follower has and what to send it.

Owns: the per-peer ``Progress`` map, sending appends, snapshots and heartbeats, the answers to
them (fast back-off by term, the in-flight window, snapshot retries), commit by a quorum of
durable logs, check-quorum's count, the leadership-transfer target, the pending membership
change and the back-pressure on uncommitted proposals. Must not know: elections, the follower
side or ``Ready``. ``RaftNode`` creates one ``Replicator`` when it wins an election and drops it
when it steps down; everything here lives exactly as long as that leadership.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .config import Config
from .log import RaftLog
from .messages import (
    AppendRequest,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    TimeoutNow,
)
from .progress import Progress, ProgressState, quorum_index
from .ready import PeerStatus
from .storage import Unavailable
from .types import NO_NODE, Entry, Membership, RaftError

__all__ = ["Replicator"]

_PROBE, _REPLICATE, _SNAPSHOT = ProgressState.PROBE, ProgressState.REPLICATE, ProgressState.SNAPSHOT


class Replicator:
    __slots__ = (
        "_bcast",
        "_bcast_commit",
        "_cfg",
        "_id",
        "_log",
        "_send",
        "_snapshot_patience",
        "_term",
        "_uncommitted",
        "pending_conf_index",
        "progress",
        "transferee",
        "uncommitted_bytes",
    )

    def __init__(
        self, cfg: Config, term: int, log: RaftLog, members: tuple[str, ...], send: Callable[[Message], None]
    ) -> None:
        self._cfg = cfg
        self._id = cfg.id
        self._term = term
        self._log = log
        self._send = send
        self.progress: dict[str, Progress] = {}
        self.transferee = NO_NODE
        self.pending_conf_index = 0  # no new membership change until this index commits
        self._uncommitted: deque[tuple[int, int]] = deque()  # (last index, bytes) per proposal
        self.uncommitted_bytes = 0
        self._bcast = False  # new entries to stream at the next flush
        self._bcast_commit = False  # the commit moved: tell every follower at the next flush
        # Heartbeat answers to wait for a snapshot's acknowledgement before sending it again.
        self._snapshot_patience = 2 * cfg.election_ticks // cfg.heartbeat_ticks
        self.set_members(members)

    # ------------------------------------------------------------------ membership
    def set_members(self, members: tuple[str, ...]) -> None:
        last = self._log.last_index()
        for p in members:
            if p != self._id and p not in self.progress:
                self.progress[p] = Progress(last + 1, self._cfg.max_inflight)
        for p in list(self.progress):
            if p not in members:
                del self.progress[p]
        if self.transferee and self.transferee not in members:
            self.transferee = NO_NODE

    # ------------------------------------------------------------------ proposals
    def appended(self, last: int, size: int) -> None:
        """The leader appended entries through ``last`` holding ``size`` bytes of data."""
        if size:
            self._uncommitted.append((last, size))
            self.uncommitted_bytes += size
        self._bcast = True

    # ------------------------------------------------------------------ sending
    def send_append(self, to: str, send_if_empty: bool) -> bool:
        """Send ``to`` what it is missing (or a snapshot); False if nothing could be sent."""
        pr = self.progress[to]
        if pr.is_paused():
            return False
        log = self._log
        prev = pr.next - 1
        prev_term = log.term(prev)
        entries: list[Entry] | None = None
        if prev_term is not None:
            try:
                entries = log.entries(pr.next, log.last_index() + 1, self._cfg.max_append_bytes)
            except Unavailable:
                entries = None
        if prev_term is None or entries is None:
            snap = log.snapshot if log.snapshot is not None else log.storage.snapshot()
            self._send(InstallSnapshot(self._id, to, self._term, snap))
            pr.become_snapshot(snap.meta.index)
            return True
        if not entries and not send_if_empty:
            return False
        self._send(AppendRequest(self._id, to, self._term, prev, prev_term, entries, log.committed))
        pr.sent(entries[-1].index if entries else prev)
        return bool(entries)

    def flush(self) -> None:
        """Send what proposals and commits since the last flush call for: one batch per peer."""
        if self._bcast or self._bcast_commit:
            commit = self._bcast_commit
            self._bcast = self._bcast_commit = False
            for p in self.progress:
                self.send_append(p, commit)

    def pending(self) -> bool:
        return self._bcast or self._bcast_commit

    def heartbeat(self) -> None:
        commit = self._log.committed
        for p, pr in self.progress.items():
            self._send(Heartbeat(self._id, p, self._term, min(pr.match, commit)))

    # ------------------------------------------------------------------ commit and quorum
    def maybe_commit(self, membership: Membership) -> bool:
        """Advance the commit to what a quorum of voters has *durably*: the leader itself counts
        only through ``log.persisted``. Only an entry of this term commits by counting (Raft
        §5.4.2, the Figure 8 rule); earlier ones commit with it."""
        me, log, progress = self._id, self._log, self.progress
        matches = []
        for v in membership.voters:
            if v == me:
                matches.append(log.persisted)
            else:
                pr = progress.get(v)
                matches.append(pr.match if pr is not None else 0)
        index = quorum_index(matches, membership.quorum)
        if index <= log.committed or log.term(index) != self._term:
            return False
        log.commit_to(index)
        self._bcast_commit = True
        unc = self._uncommitted
        while unc and unc[0][0] <= index:
            self.uncommitted_bytes -= unc.popleft()[1]
        return True

    def quorum_active(self, membership: Membership) -> bool:
        """Check-quorum: did a quorum of voters answer since the last check? Starts a new period."""
        active = 0
        for v in membership.voters:
            if v == self._id:
                active += 1
            else:
                pr = self.progress.get(v)
                if pr is not None and pr.recent_active:
                    active += 1
        for pr in self.progress.values():
            pr.recent_active = False
        return active >= membership.quorum

    def best_successor(self, voters: tuple[str, ...]) -> str:
        best, best_match = NO_NODE, -1
        for v in voters:
            pr = self.progress.get(v)
            if v != self._id and pr is not None and pr.match > best_match:
                best, best_match = v, pr.match
        if not best:
            raise RaftError("no other voter to hand leadership to")
        return best

    def transfer(self, target: str) -> None:
        if self.transferee == target:
            return
        self.transferee = target
        if self.progress[target].match == self._log.last_index():
            self._send(TimeoutNow(self._id, target, self._term))
        else:
            self.send_append(target, True)

    # ------------------------------------------------------------------ answers
    def on_append_response(self, m: AppendResponse, membership: Membership) -> bool:
        """Returns True if the commit index moved."""
        pr = self.progress.get(m.src)
        if pr is None:
            return False
        pr.recent_active = True
        log = self._log
        if m.reject:
            hint = m.hint_index
            if m.hint_term > 0:
                hint, _ = log.find_conflict_by_term(m.hint_index, m.hint_term)
            if pr.maybe_decrease(m.index, hint):
                if pr.state is _REPLICATE:
                    pr.become_probe()
                self.send_append(m.src, True)
            return False
        was_paused = pr.is_paused()
        if not pr.maybe_update(m.index):
            return False
        if pr.state is _PROBE:
            pr.become_replicate()
        elif pr.state is _SNAPSHOT:
            if pr.match >= pr.pending_snapshot:
                pr.become_replicate()
        else:
            pr.free_to(m.index)
        committed = self.maybe_commit(membership)
        if not committed and was_paused:
            self.send_append(m.src, True)
        while self.send_append(m.src, False):
            pass
        if m.src == self.transferee and pr.match == log.last_index():
            self._send(TimeoutNow(self._id, m.src, self._term))
        return committed

    def on_heartbeat_response(self, m: HeartbeatResponse) -> None:
        pr = self.progress.get(m.src)
        if pr is None:
            return
        pr.recent_active = True
        if m.lost:
            # The follower lost entries it had acknowledged: forget them and probe from our end
            # (the fast back-off finds where its log really stops).
            pr.match = 0
            pr.become_probe()
            pr.next = self._log.last_index() + 1
        elif pr.state is _SNAPSHOT:
            # Alive but silent about the snapshot: after a while assume it was lost and probe
            # again (which sends a fresh one if the follower still needs it).
            pr.snapshot_wait += 1
            if pr.snapshot_wait < self._snapshot_patience:
                return
            pr.become_probe()
        pr.paused = False
        if pr.state is _REPLICATE and pr.is_paused():
            pr.inflight.popleft()  # the window is full and maybe lost: let one more through
        if pr.match < self._log.last_index():
            self.send_append(m.src, True)

    def status(self) -> dict[str, PeerStatus]:
        return {
            p: PeerStatus(pr.match, pr.next, pr.state.name.lower(), pr.recent_active)
            for p, pr in self.progress.items()
        }
