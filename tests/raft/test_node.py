"""Targeted tests of RaftNode, one corner each, driven by hand through ``harness.Group``."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from jetpy.raft import (
    AppendRequest,
    AppendResponse,
    ConfChange,
    ConfChangeOp,
    Config,
    EntryKind,
    HardState,
    Heartbeat,
    Membership,
    MemoryLog,
    Message,
    NotLeader,
    ProposalDropped,
    RaftError,
    RaftNode,
    Role,
    Snapshot,
    SnapshotMeta,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
    persist_ready,
)

from .harness import Group, between, isolate

ABC = ["a", "b", "c"]


def test_a_leader_is_elected_and_entries_commit_everywhere() -> None:
    g = Group(ABC)
    g.elect("a")
    for i in range(5):
        g.propose("a", b"x%d" % i)
    g.heartbeat("a")
    for nid in ABC:
        assert g.data(nid) == [b"x%d" % i for i in range(5)]
    assert g.leaders() == ["a"]
    assert g.node("b").leader == "a" and g.node("b").term == 1


def test_election_timeout_elects_someone_without_help() -> None:
    g = Group(ABC, seed=7)
    for _ in range(40):
        for nid in ABC:
            g.tick(nid)
        g.deliver()
    assert len(g.leaders()) == 1


def test_randomized_timeouts_come_from_the_injected_rng() -> None:
    def first_campaign(seed: int) -> int:
        store = MemoryLog(Snapshot(SnapshotMeta(0, 0, Membership(frozenset(ABC)))))
        node = RaftNode(Config("a", election_ticks=10), store, random.Random(seed))
        for tick in range(1, 100):
            node.tick()
            if node.role is not Role.FOLLOWER:
                return tick
        raise AssertionError("never campaigned")

    ticks = {first_campaign(s) for s in range(30)}
    assert ticks <= set(range(10, 20)) and len(ticks) > 3  # spread over [T, 2T)
    assert first_campaign(5) == first_campaign(5)


# ---------------------------------------------------------------------------- pre-vote
@pytest.mark.parametrize("pre_vote", [True, False])
def test_a_partitioned_node_rejoining_does_not_depose_a_healthy_leader(pre_vote: bool) -> None:
    g = Group(ABC, pre_vote=pre_vote, check_quorum=False)
    g.elect("a")
    cut = isolate("c")
    for _ in range(50):  # c times out again and again on its own
        g.tick("c")
        g.heartbeat("a", cut)
    g.deliver()  # heal: c's requests (or pre-votes) reach a and b
    for _ in range(3):
        g.heartbeat("a")
    if pre_vote:
        assert g.node("c").term == 1, "pre-vote: c never bumped its term"
        assert g.leaders() == ["a"] and g.node("a").term == 1
    else:
        # Without pre-vote, c's inflated term forces a's step-down: the disruption pre-vote prevents.
        assert g.node("a").term > 1


def test_followers_in_a_leader_lease_ignore_vote_requests() -> None:
    g = Group(ABC)
    g.elect("a")
    b = g.node("b")
    b.step(VoteRequest("c", "b", 5, 100, 5))  # a real (not pre-) vote with a huge term and log
    g.process("b")
    assert b.term == 1 and b.vote == "a"
    assert not [m for m in g.outbox if isinstance(m, VoteResponse)]


# ---------------------------------------------------------------------------- durability
def test_a_vote_is_sent_only_after_it_is_persisted() -> None:
    store = MemoryLog(Snapshot(SnapshotMeta(0, 0, Membership(frozenset(ABC)))))
    node = RaftNode(Config("b"), store, random.Random(1))
    node.step(VoteRequest("a", "b", 1, 0, 0))
    rd = node.ready()
    assert rd.hard_state is not None and rd.hard_state.vote == "a" and rd.must_sync
    assert not rd.messages
    assert [type(m) for m in rd.persisted_messages] == [VoteResponse]
    # The host crashes before syncing: nothing was sent, the vote is gone, and voting again
    # for someone else in term 1 is harmless: "a" never heard of the first vote.
    node = RaftNode(Config("b"), store, random.Random(1))
    node.step(VoteRequest("c", "b", 1, 0, 0))
    rd = node.ready()
    assert rd.persisted_messages == [VoteResponse("b", "c", 1, True, False)]


def test_a_new_term_holds_back_every_message_until_synced() -> None:
    store = MemoryLog(Snapshot(SnapshotMeta(0, 0, Membership(frozenset(["a"]), frozenset(["l"])))))
    node = RaftNode(Config("a"), store, random.Random(1))
    node.campaign()  # a group of one voter: leader at once, term 1 and its vote not yet synced
    rd = node.ready()
    assert node.role is Role.LEADER
    assert not rd.messages  # the append to the learner carries term 1: it waits for the sync
    assert any(isinstance(m, AppendRequest) for m in rd.persisted_messages)


def test_a_leader_counts_itself_only_once_its_log_is_synced() -> None:
    store = MemoryLog(Snapshot(SnapshotMeta(0, 0, Membership(frozenset(["a"])))))
    node = RaftNode(Config("a"), store, random.Random(1))
    node.campaign()
    rd = node.ready()
    persist_ready(store, rd)
    node.advance(rd)  # the no-op is synced: it commits
    index, _ = node.propose(b"data")
    rd = node.ready()
    assert [e.index for e in rd.entries] == [index]
    assert node.log.committed == index - 1  # written, not yet synced: not counted
    assert index not in [e.index for e in rd.committed]
    persist_ready(store, rd)
    node.advance(rd)
    assert node.log.committed == index
    rd = node.ready()
    assert [e.data for e in rd.committed] == [b"data"]


def test_a_follower_ack_alone_does_not_commit_while_the_leader_has_not_synced() -> None:
    g = Group(ABC)
    g.elect("a")
    a = g.node("a")
    index, _ = a.propose(b"x")
    rd = a.ready()  # the leader's host writes this Ready but its fsync is slow...
    g.outbox.extend(rd.messages)  # ...while the appends, which may go early, reach b and c
    g.deliver(lambda m: m.dst != "a" or (isinstance(m, AppendResponse) and m.src == "b"))
    assert a.log.committed < index  # b's ack plus an unsynced leader is not a durable quorum
    persist_ready(g.members["a"].store, rd)
    a.advance(rd)
    assert a.log.committed == index


def test_a_vote_goes_only_to_a_candidate_at_least_as_up_to_date() -> None:
    g = Group(ABC, check_quorum=False)
    g.elect("a")
    g.propose("a", b"x", isolate("c"))  # c misses the entry
    c = g.restart("c")
    g.restart("a")
    c.campaign()
    g.deliver(lambda m: "a" not in (m.src, m.dst))
    assert c.role is not Role.LEADER  # b refused: c's log lacks a committed entry
    assert g.node("b").vote == "a"


def test_followers_acknowledge_entries_only_after_the_sync() -> None:
    g = Group(ABC)
    g.elect("a")
    g.node("a").propose(b"x")
    appends = g.take(lambda m: isinstance(m, AppendRequest) and m.dst == "b")
    g.node("b").step(appends[0])
    rd = g.node("b").ready()
    assert not any(isinstance(m, AppendResponse) for m in rd.messages)
    assert any(isinstance(m, AppendResponse) and not m.reject for m in rd.persisted_messages)


def test_a_node_applies_only_what_is_on_its_own_disk() -> None:
    g = Group(ABC)
    g.elect("a")
    g.node("a").propose(b"x")
    [app] = g.take(lambda m: isinstance(m, AppendRequest) and m.dst == "b")
    assert isinstance(app, AppendRequest)
    b = g.node("b")
    # The entry arrives with a commit index that already covers it.
    b.step(
        AppendRequest(
            app.src, "b", app.term, app.prev_index, app.prev_term, app.entries, app.entries[-1].index
        )
    )
    rd = b.ready()
    assert rd.entries and not rd.committed  # committed, but not yet synced here: not applied
    persist_ready(g.members["b"].store, rd)
    b.advance(rd)
    assert [e.data for e in b.ready().committed] == [b"x"]


def test_a_restarted_node_keeps_its_term_and_vote() -> None:
    g = Group(ABC)
    g.elect("a")
    g.propose("a", b"x")
    node = g.restart("b")
    assert (node.term, node.vote) == (1, "a")
    node.step(VoteRequest("c", "b", 1, 99, 1))  # same term, another candidate: refused
    assert not node.ready().persisted_messages


# ---------------------------------------------------------------------------- Figure 8
def test_figure_8_an_old_term_entry_is_not_committed_by_counting_replicas() -> None:
    """Raft paper, Figure 8 (with this library's no-op on election): s1, leader again in term 3,
    gets its term-1 entry onto a majority, but that alone must not commit it, because s5 (whose
    term-2 entry sits at the same index) can still win and overwrite it."""
    ids = ["s1", "s2", "s3", "s4", "s5"]
    g = Group(ids, max_append_bytes=1, check_quorum=False, pre_vote=False)  # one entry per append
    s1, s5 = g.node("s1"), g.node("s5")

    def among(*nids: str) -> Callable[[Message], bool]:
        return lambda m: m.src in nids and m.dst in nids

    g.elect("s1")  # term 1, its no-op at index 1 everywhere
    s1.propose(b"X")  # index 2, term 1: only s2 gets it
    g.deliver(among("s1", "s2"))
    assert g.node("s2").log.term(2) == 1 and g.node("s3").log.last_index() == 1
    # s1 crashes; s5 wins term 2 with s3 and s4, appends its no-op at index 2, crashes at once.
    s1 = g.restart("s1")
    g.campaign("s5", lambda m: among("s3", "s4", "s5")(m) and not isinstance(m, AppendRequest))
    assert s5.role is Role.LEADER and s5.term == 2 and s5.log.term(2) == 2
    g.outbox.clear()
    s5 = g.restart("s5")
    # s1 comes back and wins term 3 with s2 and s3 (its first try, term 2, meets their votes for s5).
    for _ in range(3):
        if s1.role is Role.LEADER:
            break
        g.campaign("s1", lambda m: among("s1", "s2", "s3")(m) and not isinstance(m, AppendRequest))
    assert s1.term == 3 and s1.log.term(3) == 3  # its own no-op
    # s1 brings s2 and s3 up to date; every part of an append carrying the term-3 no-op is lost.
    g.tick("s1", s1.cfg.heartbeat_ticks)
    for _ in range(10):
        for m in g.take(lambda m: True):
            if among("s1", "s2", "s3")(m):
                if isinstance(m, AppendRequest):
                    kept = [e for e in m.entries if e.term != 3]
                    m = AppendRequest(m.src, m.dst, m.term, m.prev_index, m.prev_term, kept, m.commit)
                g.step([m])
    assert g.node("s3").log.term(2) == 1  # X is on s1, s2 and s3: a majority...
    assert s1.log.committed == 1  # ...and must not be committed
    # s1 crashes again; s5 wins term 4 (its last term 2 beats the others' 1) and overwrites X.
    g.outbox.clear()
    g.restart("s1")
    for _ in range(3):
        if s5.role is Role.LEADER:
            break
        g.campaign("s5", lambda m: "s1" not in (m.src, m.dst))
    g.heartbeat("s5")
    g.deliver()
    for nid in ids:
        assert g.node(nid).log.term(2) == 2, nid
        assert b"X" not in g.data(nid)


# ---------------------------------------------------------------------------- leadership
def test_an_isolated_leader_steps_down_within_two_election_timeouts() -> None:
    g = Group(ABC, election_ticks=10)
    g.elect("a")
    cut = isolate("a")
    for _ in range(10):
        g.tick("a")
        g.deliver(cut)
    # The first check still counts the answers from before the cut; the second steps down.
    assert g.node("a").role is Role.LEADER
    for _ in range(10):
        g.tick("a")
        g.deliver(cut)
    assert g.node("a").role is Role.FOLLOWER and g.node("a").leader == ""


def test_a_leader_with_a_quorum_stays() -> None:
    g = Group(ABC, election_ticks=10)
    g.elect("a")
    cut = isolate("c")
    for _ in range(30):
        g.tick("a")
        g.deliver(cut)
    assert g.node("a").role is Role.LEADER


def test_leadership_transfer_to_an_up_to_date_follower() -> None:
    g = Group(ABC)
    g.elect("a")
    g.propose("a", b"x")
    assert g.node("a").transfer_leadership("c") == "c"
    g.deliver()
    assert g.leaders() == ["c"] and g.node("c").term == 2
    g.propose("c", b"y")
    g.heartbeat("c")
    assert g.data("a") == [b"x", b"y"]


def test_leadership_transfer_catches_a_lagging_target_up_first_and_refuses_proposals() -> None:
    g = Group(ABC)
    g.elect("a")
    for i in range(5):
        g.propose("a", b"x%d" % i, isolate("c"))
    g.node("a").transfer_leadership("c")
    with pytest.raises(ProposalDropped):
        g.node("a").propose(b"refused")
    g.deliver()
    assert g.leaders() == ["c"]
    assert g.node("c").log.last_index() >= 6


def test_leadership_transfer_gives_up_after_an_election_timeout() -> None:
    g = Group(ABC, election_ticks=10)
    g.elect("a")
    g.node("a").transfer_leadership("c")
    cut = isolate("c")
    for _ in range(10):
        g.tick("a")
        g.deliver(lambda m: cut(m) or isinstance(m, AppendResponse | Heartbeat))
    g.propose("a", b"accepted again")
    assert g.node("a").role is Role.LEADER


def test_stepdown_without_a_target_picks_the_most_caught_up_voter() -> None:
    g = Group(ABC)
    g.elect("a")
    g.propose("a", b"x", isolate("b"))
    assert g.node("a").transfer_leadership() == "c"


def test_only_a_leader_takes_proposals() -> None:
    g = Group(ABC)
    g.elect("a")
    with pytest.raises(NotLeader) as info:
        g.node("b").propose(b"x")
    assert info.value.leader == "a"


def test_uncommitted_data_is_bounded() -> None:
    g = Group(ABC, max_uncommitted_bytes=100)
    g.elect("a")
    a = g.node("a")
    a.propose(b"x" * 60)
    with pytest.raises(ProposalDropped):
        a.propose(b"y" * 60)
    g.deliver()
    a.propose(b"y" * 60)  # committed meanwhile: room again


# ---------------------------------------------------------------------------- log repair
def test_fast_backoff_skips_a_whole_divergent_term_per_round_trip() -> None:
    g = Group(ABC, check_quorum=False)
    g.elect("a")
    g.propose("a", b"base")
    # a writes 50 entries in term 1 that only it has, then loses leadership to b.
    for i in range(50):
        g.node("a").propose(b"lost-%d" % i)
    g.take(lambda m: True)
    g.campaign("b", isolate("a"))
    for i in range(3):
        g.propose("b", b"new-%d" % i, isolate("a"))
    rejects = 0

    def count(m: Message) -> bool:
        nonlocal rejects
        rejects += isinstance(m, AppendResponse) and m.reject
        return True

    g.heartbeat("b", count)
    g.deliver(count)
    assert g.data("a") == [b"base", b"new-0", b"new-1", b"new-2"]
    assert rejects <= 2  # not one round trip per divergent entry


def test_a_follower_far_behind_gets_a_snapshot() -> None:
    g = Group(ABC, snapshot_entries=5)
    g.elect("a")
    for i in range(20):
        g.propose("a", b"x%d" % i, isolate("c"))
    assert g.members["a"].store.first_index() > 2  # compacted
    g.heartbeat("a")
    assert g.members["c"].snapshots, "c needed a snapshot"
    g.propose("a", b"after")
    assert g.node("c").log.last_index() == g.node("a").log.last_index()
    assert g.members["c"].applied[-1].data == b"after"


def test_snapshot_install_racing_with_appends() -> None:
    """Appends held up in the network arrive after the snapshot that replaced them, while the
    snapshot is still on its way to the follower's disk: the follower ends identical."""
    g = Group(ABC, snapshot_entries=5)
    g.elect("a")
    held: list[Message] = []

    def hold(m: Message) -> bool:  # everything for c is held up in the network
        if m.dst == "c":
            held.append(m)
        return m.dst != "c"

    for i in range(20):
        g.propose("a", b"x%d" % i, hold)
    assert g.members["a"].store.first_index() > 2  # compacted: c now needs a snapshot
    g.tick("a")  # heartbeat: c answers, a probes it and finds it needs the snapshot
    c, c_store = g.node("c"), g.members["c"].store
    rd_snapshot = None
    for _ in range(10):
        for m in g.take(lambda m: m.dst == "c"):
            c.step(m)
        rd = c.ready()
        if rd.snapshot is not None:
            rd_snapshot = rd
            break
        persist_ready(c_store, rd)
        g.outbox.extend(rd.messages + rd.persisted_messages)
        c.advance(rd)
        g.step(g.take(lambda m: m.dst != "c"))
    assert rd_snapshot is not None  # taken in, but not yet persisted when the old appends land:
    for m in held:
        c.step(m)
    rd_more = c.ready()
    for rd in (rd_snapshot, rd_more):
        persist_ready(c_store, rd)
        g.outbox.extend(rd.messages + rd.persisted_messages)
        c.advance(rd)
    g.deliver()
    g.propose("a", b"after")
    a_log, c_log = g.members["a"].store, c_store
    assert c_log.last_index() == a_log.last_index()
    lo = max(a_log.first_index(), c_log.first_index())
    assert c_log.entries(lo, c_log.last_index() + 1, 1 << 30) == a_log.entries(
        lo, a_log.last_index() + 1, 1 << 30
    )
    assert c.log.committed == g.node("a").log.committed


def test_a_damaged_log_neither_votes_nor_campaigns_until_repaired() -> None:
    g = Group(ABC)
    g.elect("a")
    for i in range(10):
        g.propose("a", b"x%d" % i)
    # c restarts with its log cut back to index 3 (recovery found a bad record after it).
    store = g.members["c"].store
    damaged = MemoryLog(store.snapshot(), HardState(1, "a", 3, repair_through=store.last_index()))
    damaged.append(store.entries(1, 4, 1 << 30))
    g.members["c"].store = damaged
    c = g.restart("c")
    assert c.repair_through == 11
    for _ in range(100):
        c.tick()
    assert c.role is Role.FOLLOWER  # never campaigns
    c.step(VoteRequest("b", "c", 2, 11, 1, pre=True))
    assert all(not m.granted for m in c.ready().messages if isinstance(m, VoteResponse))
    # The leader notices the lost entries (its stale match for c is reset) and repairs c.
    g.heartbeat("a")
    g.deliver()
    assert c.repair_through == 0 and c.log.last_index() == 11
    assert g.members["c"].store.initial_state().repair_through == 0  # persisted


# ---------------------------------------------------------------------------- membership
def test_a_learner_replicates_but_never_votes_then_is_promoted() -> None:
    g = Group(ABC)
    g.elect("a")
    g.add_empty("d")
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.ADD_LEARNER, "d"))
    g.deliver()
    g.propose("a", b"x")
    assert g.data("d") == [b"x"]
    assert g.node("a").membership.learners == {"d"}
    for _ in range(100):
        g.tick("d")
    assert g.node("d").role is Role.FOLLOWER
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, "d"))
    g.deliver()
    assert g.node("d").membership.voters == {"a", "b", "c", "d"}


def test_membership_changes_go_one_at_a_time() -> None:
    g = Group(ABC)
    g.elect("a")
    g.add_empty("d")
    g.add_empty("e")
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, "d"))
    with pytest.raises(ProposalDropped):
        g.node("a").propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, "e"))
    g.deliver()
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, "e"))
    with pytest.raises(RaftError):
        g.node("a").propose_conf_change(ConfChange(ConfChangeOp.REMOVE, "nobody"))


def test_removing_the_leader_hands_over_once_committed() -> None:
    g = Group(ABC)
    g.elect("a")
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.REMOVE, "a"))
    g.deliver()
    assert g.node("a").role is Role.FOLLOWER
    assert len(g.leaders()) == 1 and g.leaders()[0] in ("b", "c")
    new = g.leaders()[0]
    g.propose(new, b"without a")
    assert b"without a" in g.data("b") and b"without a" in g.data("c")


def test_membership_change_during_a_partition() -> None:
    ids = ["a", "b", "c", "d", "e"]
    g = Group(ids)
    g.elect("a")
    minority = between([{"a", "b"}, {"c", "d", "e"}])
    # The old leader, cut off with one follower, proposes removing e: it can never commit.
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.REMOVE, "e"))
    g.deliver(minority)
    assert g.node("a").log.committed < g.node("a").log.last_index()
    # The majority side elects c and removes b instead, which commits.
    for _ in range(30):
        for nid in ("c", "d", "e"):
            g.tick(nid)
        g.deliver(minority)
        if (
            g.node("c").role is Role.LEADER
            or g.node("d").role is Role.LEADER
            or g.node("e").role is Role.LEADER
        ):
            break
    [leader] = [n for n in ("c", "d", "e") if g.node(n).role is Role.LEADER]
    g.node(leader).propose_conf_change(ConfChange(ConfChangeOp.REMOVE, "b"))
    g.deliver(minority)
    g.propose(leader, b"majority side")
    # Heal: a learns the new leader, its uncommitted change is replaced, everyone agrees.
    g.heartbeat(leader)
    g.deliver()
    g.heartbeat(leader)
    g.deliver()
    for nid in ("a", "c", "d", "e"):
        assert g.node(nid).membership.voters == {"a", "c", "d", "e"}, nid
        assert b"majority side" in g.data(nid)


def test_a_new_server_learns_everything_from_the_leader() -> None:
    g = Group(ABC, snapshot_entries=4)
    g.elect("a")
    for i in range(10):
        g.propose("a", b"x%d" % i)
    g.add_empty("d")
    assert g.node("d").membership == Membership()
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, "d"))
    g.deliver()
    g.heartbeat("a")
    assert g.node("d").membership.voters == {"a", "b", "c", "d"}
    assert g.node("d").log.committed == g.node("a").log.committed


def test_noop_and_conf_entries_reach_the_state_machine_with_their_kind() -> None:
    g = Group(ABC)
    g.elect("a")
    g.add_empty("d")
    g.node("a").propose_conf_change(ConfChange(ConfChangeOp.ADD_LEARNER, "d"))
    g.deliver()
    g.heartbeat("a")
    kinds = [e.kind for e in g.members["b"].applied]
    assert kinds == [EntryKind.NOOP, EntryKind.CONF]


def test_messages_for_someone_else_or_from_ourselves_are_ignored() -> None:
    g = Group(ABC)
    g.elect("a")
    before = g.node("b").status()
    g.node("b").step(TimeoutNow("a", "c", 1))
    g.node("b").step(TimeoutNow("b", "b", 1))
    assert g.node("b").status() == before
