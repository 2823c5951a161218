"""The replicated test service on 3 and 5 jetpy servers as processes on loopback (every process
killed by its PID at the end): leader election, writes and reads through every server, kill -9
of the leader (a new one within two election timeouts) and of followers, a restarted server
catching up from its log or from the leader's snapshot, a new server joining and a founder
removed."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import cpu_wait
from jetpy.server.nrg import member_id

from .cluster import ChaosCluster, Settings

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[ChaosCluster]:
    settings: Settings = getattr(request, "param", Settings(size=3, proxied=False))
    c = ChaosCluster(tmp_path, settings)
    try:
        await c.start()
        yield c
    finally:
        await c.stop()


async def converged(c: ChaosCluster, names: list[str], within: float = 30.0) -> dict[str, Any]:
    """Every server's own state once all have applied the same (see chaos.run)."""
    deadline = time.monotonic() + within
    while True:
        states = {n: await c.request(n, {"op": "local"}) for n in names}
        if len({(d["applied"], d["digest"]) for d in states.values()}) == 1:
            return states
        if time.monotonic() > deadline:
            raise AssertionError(f"replicas differ: {states}")
        await asyncio.sleep(0.1)


async def write(c: ChaosCluster, name: str, key: str, value: Any, within: float = 10.0) -> dict[str, Any]:
    """A write through ``name``, retried while the group has no leader (definite refusals only)."""
    deadline = time.monotonic() + within
    while True:
        doc = await c.request(name, {"op": "put", "k": key, "v": value})
        if doc.get("ok") or not doc.get("definite") or time.monotonic() > deadline:
            return doc
        await asyncio.sleep(0.05)


async def test_one_leader_and_writes_through_every_server(cluster: ChaosCluster) -> None:
    leader, term = await cluster.leader()
    for i, name in enumerate(cluster.founders):
        assert (await write(cluster, name, "k", i))["rev"] == i + 1
    for name in cluster.founders:  # reads go through the log: each sees the last write
        assert await cluster.request(name, {"op": "get", "k": "k"}) == {"ok": True, "v": 2, "rev": 3}
    got = await cluster.request(leader, {"op": "cas", "k": "k", "from": 1, "to": 9})
    assert got == {"ok": False, "v": 2, "rev": 3}
    await converged(cluster, cluster.founders)
    assert cluster.leaders_seen == {f"KV term {term}": {member_id(leader)}}


async def test_kill_9_of_the_leader_a_new_one_within_two_election_timeouts(cluster: ChaosCluster) -> None:
    timeout = cluster.s.election_timeout
    times = []
    for round_ in range(3):
        leader, _ = await cluster.leader()
        await write(cluster, leader, "k", round_)
        # the time to a new leader, less the longest any survivor (or this test, which polls
        # for it) waited for a CPU taken by other processes meanwhile (tests run side by side)
        pids = [
            os.getpid(),
            *(n.popen.pid for n in cluster.nodes.values() if n.popen and n.alive and n.name != leader),
        ]
        waited = [cpu_wait(pid) for pid in pids]
        t0 = time.monotonic()
        cluster.kill(leader)
        new, _ = await cluster.leader(exclude=leader)
        elapsed = time.monotonic() - t0
        times.append(elapsed - max(cpu_wait(pid) - w for pid, w in zip(pids, waited, strict=True)))
        assert (await write(cluster, new, "k", f"after {round_}"))["ok"]
        await cluster.launch(leader)
        await converged(cluster, cluster.founders)
    print(
        f"new leader after kill -9 of the leader: {[round(t, 3) for t in times]} s (election timeout {timeout} s)"
    )
    assert max(times) < 2 * timeout, times


async def test_followers_restarted_catch_up_from_their_log_and_from_a_snapshot(tmp_path: Path) -> None:
    c = ChaosCluster(tmp_path, Settings(size=3, proxied=False, snapshot_entries=50))
    try:
        await c.start()
        leader, _ = await c.leader()
        a, b = [n for n in c.founders if n != leader]
        # from its own log: down for a few writes, the leader still holds them all
        c.kill(a)
        for i in range(5):
            await write(c, leader, "k", i)
        await c.launch(a)
        await converged(c, c.founders)
        # from a snapshot: down while the leader compacts its log past everything it had
        c.kill(b)
        for i in range(120):
            await c.request(leader, {"op": "append", "k": "log", "v": i})
        assert (await c.raftz(leader) or {})["wal"]["first_seq"] > 60
        await c.launch(b)
        states = await converged(c, c.founders)
        assert (await c.request(b, {"op": "read", "k": "log"}))["vs"] == list(range(120))
        assert len(states) == 3
    finally:
        await c.stop()


async def test_a_new_server_joins_and_a_founder_is_removed(tmp_path: Path) -> None:
    c = ChaosCluster(tmp_path, Settings(size=3, proxied=False, extra_names=["n4"]))
    try:
        await c.start()
        leader, _ = await c.leader()
        for i in range(20):
            await write(c, leader, "k", i)
        await c.launch("n4")  # no founder: it joins, catches up as a learner, becomes a voter
        deadline = time.monotonic() + 20
        while (await c.raftz(leader) or {}).get("size") != 4:
            assert time.monotonic() < deadline, await c.raftz(leader)
            await asyncio.sleep(0.1)
        await converged(c, [*c.founders, "n4"])
        gone = next(n for n in c.founders if n != leader)
        assert await c.request("n4", {"op": "remove", "member": member_id(gone)}) == {"ok": True}
        assert (await c.raftz(leader) or {})["size"] == 3
        c.kill(gone)
        other = next(n for n in c.founders if n not in (leader, gone))
        c.kill(other)  # the leader and the new server are two of three voters: still a quorum
        assert (await write(c, "n4", "k", "with n4"))["ok"]
    finally:
        await c.stop()


async def test_five_servers_ride_out_two_killed_and_bring_them_back(tmp_path: Path) -> None:
    c = ChaosCluster(tmp_path, Settings(size=5, proxied=False))
    try:
        await c.start()
        leader, _ = await c.leader()
        follower = next(n for n in c.founders if n != leader)
        c.kill(leader)
        c.kill(follower)
        survivor = next(n for n in c.founders if n not in (leader, follower))
        await c.leader(exclude=leader)
        for i in range(10):
            assert (await write(c, survivor, "k", i))["ok"]
        await c.launch(leader)
        await c.launch(follower)
        await converged(c, c.founders)
    finally:
        await c.stop()
