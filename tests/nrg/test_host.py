"""The Raft host end to end inside one process: three (or four) jetpy servers on loopback,
routed as a cluster, each running its member of a group over the routes in the system account,
with its log on disk. Elections, proposals from every server (forwarded to the leader), many
proposals per entry, leadership transfer, a member restarted from its log or caught up from a
snapshot sent in fragments, a new member joining and a founder removed."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from cluster_support import embedded_cluster
from jetpy.server.app import Server
from jetpy.server.nrg import GroupConfig, ProposalUnknown, RaftGroup, member_id
from jetpy.server.options import AccountOptions, ServerOptions, User

from .machines import AppendLog

FAST = GroupConfig(tick=0.05, election_ticks=10, heartbeat_ticks=2, timeout=5.0)
NAMES = ["E0", "E1", "E2"]


class Members:
    def __init__(self, servers: list[Server]) -> None:
        self.servers = servers
        self.groups: dict[str, RaftGroup] = {}
        self.machines: dict[str, AppendLog] = {}

    async def start(self, srv: Server, config: GroupConfig = FAST, founders: list[str] = NAMES) -> RaftGroup:
        assert srv.raft is not None
        machine = AppendLog()
        group = await srv.raft.start_group("T", machine, founders, config)
        self.groups[srv.server_name] = group
        self.machines[srv.server_name] = machine
        return group

    async def stop(self, name: str) -> None:
        srv = next(s for s in self.servers if s.server_name == name)
        assert srv.raft is not None
        await srv.raft.stop_group("T")
        del self.groups[name]

    async def leader(self, within: float = 10.0) -> RaftGroup:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            leaders = [g for g in self.groups.values() if g.status().state == "LEADER"]
            if len(leaders) == 1 and all(
                g.node.leader == leaders[0].member
                for g in self.groups.values()
                if g.member in g.node.membership.voters
            ):
                return leaders[0]
            await asyncio.sleep(0.02)
        raise AssertionError(f"no single leader: {[g.status() for g in self.groups.values()]}")

    def follower(self, leader: RaftGroup) -> RaftGroup:
        return next(g for g in self.groups.values() if g is not leader)


async def settle(check: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Members]:
    async with embedded_cluster(3, store_root=tmp_path) as servers:
        members = Members(servers)
        for srv in servers:
            await members.start(srv)
        yield members


async def test_one_leader_and_proposals_from_every_server_apply_everywhere(cluster: Members) -> None:
    leader = await cluster.leader()
    assert {g.member for g in cluster.groups.values()} == {member_id(n) for n in NAMES}
    results = []
    for i in range(30):
        group = cluster.groups[NAMES[i % 3]]  # the leader's own, and forwarded by the others
        results.append(await group.propose(b"p%d" % i))
    assert results == [b"%d" % i for i in range(1, 31)]  # each answered once applied, in order
    await settle(lambda: all(len(m.items) == 30 for m in cluster.machines.values()))
    expected = [b"p%d" % i for i in range(30)]
    assert all(m.items == expected for m in cluster.machines.values())
    st = leader.status()
    assert st.state == "LEADER" and st.voters == 3 and st.quorum == 2 and st.applied == st.committed
    # the leader learns that the last follower has everything from its next answer
    await settle(lambda: {p.health for p in leader.status().peers} == {"current"})
    assert {p.name for p in st.peers} == set(NAMES) - {leader.server_name}


async def test_many_proposals_share_an_entry(cluster: Members) -> None:
    await cluster.leader()
    follower = cluster.groups["E1"]
    got = await asyncio.gather(*(follower.propose(b"x%d" % i) for i in range(2000)))
    assert sorted(int(r) for r in got) == list(range(1, 2001))
    await settle(lambda: all(len(m.items) == 2000 for m in cluster.machines.values()))
    m = cluster.machines["E1"]
    assert m.entries < 100, m.entries  # 2,000 proposals in a few dozen entries at most


async def test_messages_cross_routes_in_the_system_account_only(cluster: Members) -> None:
    await cluster.leader()
    srv = cluster.servers[0]
    nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
    seen: list[str] = []

    async def cb(msg: Msg) -> None:
        seen.append(msg.subject)

    await nc.subscribe("$NRG.>", cb=cb)
    await nc.flush()
    await cluster.groups["E2"].propose(b"hello")
    await asyncio.sleep(0.3)  # heartbeats too
    await nc.close()
    assert seen == []  # a client's account never sees the Raft traffic


async def test_leadership_transfer(cluster: Members) -> None:
    leader = await cluster.leader()
    target = cluster.follower(leader)
    new = await cluster.groups["E0"].transfer_leadership(target.member)  # asked of any member
    assert new == target.member
    assert (await cluster.leader()) is target
    assert await target.propose(b"after") == b"1"


async def test_a_member_restarted_catches_up_from_its_log_and_the_leaders(cluster: Members) -> None:
    leader = await cluster.leader()
    follower = cluster.follower(leader)
    name = follower.server_name
    for i in range(10):
        await leader.propose(b"a%d" % i)
    await settle(lambda: len(cluster.machines[name].items) == 10)
    await cluster.stop(name)
    for i in range(10):
        await leader.propose(b"b%d" % i)  # a quorum of two still commits
    srv = next(s for s in cluster.servers if s.server_name == name)
    group = await cluster.start(srv)
    assert group.member == follower.member  # its identity kept in its directory
    await settle(lambda: len(cluster.machines[name].items) == 20)
    assert cluster.machines[name].items == cluster.machines[leader.server_name].items


async def test_a_lagging_member_is_sent_a_snapshot_in_fragments(tmp_path: Path) -> None:
    cfg = GroupConfig(tick=0.05, election_ticks=10, heartbeat_ticks=2, timeout=10.0, snapshot_entries=20)
    async with embedded_cluster(3, store_root=tmp_path) as servers:
        members = Members(servers)
        for srv in servers:
            await members.start(srv, cfg)
        leader = await members.leader()
        follower = members.follower(leader)
        name = follower.server_name
        await members.stop(name)
        big = b"z" * 60_000
        for i in range(60):  # ~3.6 MB of state: its snapshot travels in several fragments
            await leader.propose(big + b"%d" % i)
        assert leader.store.first_index() > 20  # compacted past what the follower has
        srv = next(s for s in servers if s.server_name == name)
        group = await members.start(srv, cfg)
        machine = members.machines[name]
        await settle(lambda: len(machine.items) == 60, within=20)
        assert machine.restores >= 1 and machine.items == members.machines[leader.server_name].items
        assert group.status().current


async def test_a_new_member_joins_and_a_founder_is_removed(tmp_path: Path) -> None:
    async with embedded_cluster(4, store_root=tmp_path) as servers:
        members = Members(servers)
        for srv in servers[:3]:
            await members.start(srv)
        leader = await members.leader()
        for i in range(15):
            await leader.propose(b"old%d" % i)
        new = await members.start(servers[3])  # E3 is no founder: it asks to join
        assert new.member != member_id("E3")  # a new member gets a new id
        await settle(lambda: new.member in leader.node.membership.voters, within=15)
        await settle(lambda: len(members.machines["E3"].items) == 15)
        gone = next(n for n in NAMES if members.groups[n] is not leader)
        removed = members.groups[gone]
        await members.groups["E3"].remove_member(removed.member)  # asked of the new member
        assert removed.member not in leader.node.membership.members()
        await settle(lambda: removed.removed)
        assert leader.status().voters == 3
        await members.stop(gone)
        other = next(g for n, g in members.groups.items() if g is not leader and n != "E3")
        await members.stop(other.server_name)
        assert await leader.propose(b"with E3") == b"16"  # the new member makes the quorum
        await members.stop("E3")
        with pytest.raises(ProposalUnknown):  # one of three left: nothing commits
            await leader.propose(b"stalls", within=1.0)


async def test_a_group_founded_over_existing_state_hands_a_joiner_a_snapshot(tmp_path: Path) -> None:
    """``snapshot_before_join``: a group founded by one server over state its machine held
    before the log began (an R1 stream scaled up) takes a snapshot before taking anyone in, so
    the joiner starts from that state, never from a log that lacks it."""
    async with embedded_cluster(2, store_root=tmp_path) as servers:
        members = Members(servers)
        founder = await members.start(servers[0], founders=["E0"])
        founder.snapshot_before_join = True
        members.machines["E0"].items = [b"held-before"]  # what the store held at the founding
        await members.leader()
        await founder.propose(b"first")
        joiner = await members.start(servers[1], founders=["E0"])  # no founder: it asks to join
        await settle(lambda: joiner.member in founder.node.membership.voters, within=15)
        assert founder.store.snapshot_meta().index >= 1  # compacted before the joiner came in
        machine = members.machines["E1"]
        assert machine.restores == 1
        assert machine.items == [b"held-before", b"first"]
        await founder.propose(b"second")
        await settle(lambda: machine.items == [b"held-before", b"first", b"second"])


async def test_several_groups_per_server_each_in_its_own_directory(cluster: Members, tmp_path: Path) -> None:
    other: dict[str, RaftGroup] = {}
    logs: dict[str, AppendLog] = {}
    for srv in cluster.servers:
        assert srv.raft is not None
        logs[srv.server_name] = AppendLog()
        other[srv.server_name] = await srv.raft.start_group("U", logs[srv.server_name], NAMES, FAST)
    await cluster.leader()
    for i in range(10):
        await cluster.groups[NAMES[i % 3]].propose(b"t%d" % i)
        await other[NAMES[(i + 1) % 3]].propose(b"u%d" % i)
    await settle(lambda: all(len(m.items) == 10 for m in [*cluster.machines.values(), *logs.values()]))
    assert all(m.items == [b"t%d" % i for i in range(10)] for m in cluster.machines.values())
    assert all(m.items == [b"u%d" % i for i in range(10)] for m in logs.values())
    root = tmp_path / "E0" / "jetstream" / "$SYS" / "_js_"
    assert sorted(p.name for p in root.iterdir()) == ["T", "U"]
    srv = cluster.servers[0]
    assert srv.raft is not None
    assert [st.group for st in srv.raft.status()] == ["T", "U"]


async def test_a_removed_member_is_stopped_and_its_directory_released(tmp_path: Path) -> None:
    async with embedded_cluster(3, store_root=tmp_path) as servers:
        members = Members(servers)
        for srv in servers:
            await members.start(srv)
        leader = await members.leader()
        gone = members.follower(leader)
        await leader.remove_member(gone.member)
        await settle(lambda: gone.status().state == "CLOSED")
        await members.stop(gone.server_name)  # closes its store: the directory can be opened again
        srv = next(s for s in servers if s.server_name == gone.server_name)
        assert srv.raft is not None
        again = await srv.raft.start_group("T", AppendLog(), NAMES, FAST)
        assert again.member == gone.member  # its own log predates its removal: it campaigns,
        await settle(lambda: again.removed and again.status().state == "CLOSED")  # and is told again


def read(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        body: bytes = r.read()
        return body


async def test_groups_live_in_the_configured_system_account(tmp_path: Path) -> None:
    """With ``system_account: SYS`` the groups' $NRG traffic crosses the routes in SYS, their
    logs are under ``jetstream/SYS/_js_`` and /raftz names SYS, as nats-server keeps them; the
    system account's users may ask for them, other accounts see nothing of the traffic."""
    base = ServerOptions(
        users=[User("app", "app"), User("sys", "sys", account="SYS")],
        accounts=[AccountOptions("SYS")],
        system_account="SYS",
    )
    async with embedded_cluster(3, monitor=True, base=base, store_root=tmp_path) as servers:
        app = await nats.connect(servers[0].client_url, user="app", password="app")
        seen: list[Msg] = []

        async def note(msg: Msg) -> None:
            seen.append(msg)

        await app.subscribe("$NRG.>", cb=note)
        members = Members(servers)
        for srv in servers:
            await members.start(srv)
        leader = await members.leader()
        assert await leader.propose(b"x") == b"1"
        for srv in servers:
            assert (tmp_path / srv.server_name / "jetstream" / "SYS" / "_js_" / "T").is_dir()
            assert not (tmp_path / srv.server_name / "jetstream" / "$SYS").exists()
        doc = json.loads(await asyncio.to_thread(read, f"{servers[0].monitor_url}/raftz"))
        assert list(doc) == ["SYS"] and doc["SYS"]["T"]["traffic_account"] == "SYS"
        sys_client = await nats.connect(servers[0].client_url, user="sys", password="sys")
        answer = json.loads((await sys_client.request("$SYS.REQ.SERVER.PING.RAFTZ", b"", timeout=5)).data)
        assert list(answer["data"]["SYS"]) == ["T"]
        await app.flush()
        assert seen == []  # the global account sees none of the groups' traffic
        await sys_client.close()
        await app.close()


async def test_a_new_groups_first_founder_campaigns_at_once(tmp_path: Path) -> None:
    """With nats-server's timers (first elections after 5-10 s of silence) a new group has its
    leader within a few ticks: its first founder campaigns at once, again at every tick while
    the others' members are not listening yet, and stops once there is a leader."""
    slow = GroupConfig(tick=0.5, election_ticks=10, heartbeat_ticks=2, timeout=10.0)
    async with embedded_cluster(3, store_root=tmp_path) as servers:
        members = Members(servers)
        t0 = time.monotonic()
        first = await members.start(servers[0], slow)  # alone for a while: nobody answers it yet
        await asyncio.sleep(1.2)
        assert first.status().state != "LEADER"
        for srv in servers[1:]:
            await members.start(srv, slow)
        leader = await members.leader(within=4.0)
        assert time.monotonic() - t0 < 4.0
        assert leader is first and first.status().term <= 2
        term = first.status().term
        await asyncio.sleep(1.5)  # it stopped campaigning: the same leader in the same term
        assert first.status().term == term and first.status().state == "LEADER"
