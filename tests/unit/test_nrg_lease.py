"""A Raft leader's lease (``nrg/lease.py``): a quorum of answers within half an election
timeout, nothing credited or trusted by a stalled loop, nothing carried into a new term."""

from __future__ import annotations

from jetpy.server.nrg.lease import Lease

VOTERS = ("a", "b", "c")


def test_a_quorum_of_recent_answers_holds_it_and_it_runs_out() -> None:
    lease = Lease(tick=0.05, election_timeout=1.0, now=0.0)  # span 0.5 s
    assert not lease.holds(0.0, "a", VOTERS, 2)  # only itself
    lease.answered("b", 0.1)
    assert lease.holds(0.2, "a", VOTERS, 2)
    lease.ticked(0.5)
    assert not lease.holds(0.61, "a", VOTERS, 2)  # b's answer is older than half a timeout
    assert lease.holds(0.2, "a", ("a",), 1)  # a group of one leads alone


def test_a_stalled_loop_credits_and_trusts_nothing() -> None:
    lease = Lease(tick=0.05, election_timeout=1.0, now=0.0)
    lease.answered("b", 0.1)
    assert lease.holds(0.3, "a", VOTERS, 2)
    # paused for 5 s: what arrives is read before the next tick, sent long before
    lease.answered("c", 5.0)
    assert not lease.holds(5.0, "a", VOTERS, 2)
    lease.ticked(5.01)
    assert not lease.holds(5.02, "a", VOTERS, 2)  # c's answer, read while stalled, was not credited
    lease.answered("c", 5.05)
    assert lease.holds(5.06, "a", VOTERS, 2)


def test_a_new_term_starts_with_nobodys_answer() -> None:
    lease = Lease(tick=0.05, election_timeout=1.0, now=0.0)
    lease.answered("b", 0.1)
    lease.reset()
    assert not lease.holds(0.2, "a", VOTERS, 2)
