"""Expiry and subject delete markers on an R3 stream, with three server processes on loopback:
messages expire by their ``Nats-TTL`` and by ``max_age`` while publishes go on and while a
follower is down; every replica ends with the same sequences and the same messages (markers
included, each at one sequence on every replica), and decides a check on an expired subject
as the others did. The markers a consumer sees are compared with three nats-server 2.15.1
given the same publishes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from jetpy.store.base import StoreConfig
from jetpy.store.filestore import FileStore

from .jsapi import create_stream as _create
from .jsapi import publish_until_acked as _publish_until_acked
from .jscluster import ACCOUNTS, JsCluster, reference_cluster

pytestmark = pytest.mark.timeout(180)

MARKER = "Nats-Marker-Reason"


def _summary(state: dict[str, Any] | None) -> tuple[object, ...]:
    s = state or {}
    return (s.get("messages"), s.get("first_seq"), s.get("last_seq"), s.get("num_deleted"))


def _contents(node_store: Path, name: str) -> list[tuple[int, str, bytes, bytes]]:
    """Every message a replica's files hold: (seq, subject, headers, payload)."""
    store = FileStore(node_store / "jetstream" / "$G" / "streams" / name, StoreConfig(name=name))
    try:
        st = store.state()
        out = []
        for seq in range(st.first_seq, st.last_seq + 1):
            m = store.load_msg(seq)
            if m is not None:
                out.append((m.seq, m.subject, m.hdr, m.data))
        return out
    finally:
        store.stop()


async def _leader(js: JetStreamContext, stream: str) -> str:
    for _ in range(100):
        si = await js.stream_info(stream)
        if si.cluster is not None and si.cluster.leader:
            return str(si.cluster.leader)
        await asyncio.sleep(0.1)
    raise AssertionError("no leader")


async def test_markers_and_expiry_agree_on_every_replica(cluster: JsCluster) -> None:
    """Messages with a 1s TTL and plain ones under a 2s max_age expire on subjects that are
    published again and again, leaving markers; a follower is killed meanwhile and comes back.
    Once everything that expires is gone, every replica holds the same sequences, and its files
    the same messages (the ``never`` ones) at the same sequences. A second stream's markers
    outlive the run (no max_age, a long marker TTL): one per subject once each subject stops
    being published, the same marker at the same sequence in every replica's files."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(
            js,
            name="MK",
            subjects=["mk.>"],
            num_replicas=3,
            max_age=2.0,
            allow_msg_ttl=True,
            allow_rollup_hdrs=True,
            subject_delete_marker_ttl=1.0,
        )
        await _create(
            js,
            name="ML",
            subjects=["ml.>"],
            num_replicas=3,
            allow_msg_ttl=True,
            allow_rollup_hdrs=True,
            subject_delete_marker_ttl=300.0,
        )
        kept: dict[int, str] = {}
        seen_markers: set[int] = set()

        async def round_(r: int) -> None:
            ttl = await _publish_until_acked(js, f"mk.t.{r % 4}", b"t", f"t-{r}", {"Nats-TTL": "1s"})
            await _publish_until_acked(js, f"mk.age.{r % 3}", b"a", f"a-{r}")
            if r % 5 == 0:
                subject = f"mk.keep.{r}"
                kept[await _publish_until_acked(js, subject, b"k", f"k-{r}", {"Nats-TTL": "never"})] = subject
            assert ttl > 0
            await _publish_until_acked(js, f"ml.t.{r // 10}", b"l", f"l-{r}", {"Nats-TTL": "1s"})
            await asyncio.sleep(0.05)

        for r in range(30):
            await round_(r)
        leader = await _leader(js, "MK")
        follower = next(n for n in sorted(cluster.nodes) if n != leader)
        cluster.kill(follower)
        for r in range(30, 70):
            await round_(r)
        await asyncio.sleep(2.5)  # all that was published expires while the follower is down
        for r in range(70, 80):
            await round_(r)
        cluster.start(follower)
        for r in range(80, 120):
            await round_(r)

        # markers are left once the last TTLs end (a consumer sees them as new messages)
        for _ in range(50):
            info = await js.stream_info("MK")
            for seq in range(max(1, info.state.last_seq - 20), info.state.last_seq + 1):
                try:
                    m = await js.get_msg("MK", seq)
                except NotFoundError:
                    continue
                if m.headers and MARKER in m.headers:
                    seen_markers.add(seq)
            if seen_markers:
                break
            await asyncio.sleep(0.1)
        assert seen_markers, "no delete marker seen"

        def settled() -> bool:
            states = [_summary(n.stream_state("MK")) for n in cluster.nodes.values()]
            return states[0][0] == len(kept) and all(s == states[0] for s in states)

        try:
            await cluster.wait_for("every replica down to the kept messages, at one sequence", settled, 30)
        except AssertionError:
            raise AssertionError(
                "replicas differ: "
                + repr({n.name: _summary(n.stream_state("MK")) for n in cluster.nodes.values()})
            ) from None

        def markers_settled() -> bool:  # one marker per subject (12), nothing else
            states = [_summary(n.stream_state("ML")) for n in cluster.nodes.values()]
            return states[0][0] == 12 and all(s == states[0] for s in states)

        await cluster.wait_for("every replica down to one marker per subject", markers_settled, 30)
    cluster.stop()
    contents = {n.name: _contents(n.store, "MK") for n in cluster.nodes.values()}
    want = sorted(kept.items())
    for name, got in contents.items():
        assert [(seq, subject) for seq, subject, _, _ in got] == want, name
    markers = {n.name: _contents(n.store, "ML") for n in cluster.nodes.values()}
    first = markers["n1"]
    assert sorted(subject for _, subject, _, _ in first) == sorted(f"ml.t.{i}" for i in range(12))
    assert all(b"Nats-Marker-Reason: MaxAge" in hdr and data == b"" for _, _, hdr, data in first)
    assert markers["n2"] == first and markers["n3"] == first


async def test_expiry_without_markers_agrees_on_every_replica(cluster: JsCluster) -> None:
    """TTL and max_age expiry alone (no markers) on an R3 stream, a follower down through it:
    every replica ends at one sequence with the same messages."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="EX", subjects=["ex.>"], num_replicas=3, max_age=2.0, allow_msg_ttl=True)
        kept: dict[int, str] = {}
        for r in range(20):
            await _publish_until_acked(js, f"ex.t.{r % 4}", b"t", f"t-{r}", {"Nats-TTL": "1s"})
            await _publish_until_acked(js, f"ex.age.{r % 3}", b"a", f"a-{r}")
        leader = await _leader(js, "EX")
        follower = next(n for n in sorted(cluster.nodes) if n != leader)
        cluster.kill(follower)
        for r in range(20, 40):
            await _publish_until_acked(js, f"ex.t.{r % 4}", b"t", f"t-{r}", {"Nats-TTL": "1s"})
            if r % 5 == 0:
                kept[
                    await _publish_until_acked(js, f"ex.keep.{r}", b"k", f"k-{r}", {"Nats-TTL": "never"})
                ] = f"ex.keep.{r}"
        await asyncio.sleep(2.5)
        cluster.start(follower)
        for r in range(40, 60):
            await _publish_until_acked(js, f"ex.age.{r % 3}", b"a", f"a-{r}")

        def settled() -> bool:
            states = [_summary(n.stream_state("EX")) for n in cluster.nodes.values()]
            return states[0][0] == len(kept) and all(s == states[0] for s in states)

        await cluster.wait_for("every replica down to the kept messages, at one sequence", settled, 30)
    cluster.stop()
    for n in cluster.nodes.values():
        assert [(seq, subject) for seq, subject, _, _ in _contents(n.store, "EX")] == sorted(kept.items())


async def test_a_check_on_an_expired_subject_agrees_on_every_replica(cluster: JsCluster) -> None:
    """A KV-style create (``Nats-Expected-Last-Subject-Sequence: 0``) refused while the
    subject's message is live, then that message expiring while a follower is down: back, the
    follower replays the refused create after its own expiry of the message; it must refuse it
    too (decided against what the store held at that point of the log, not later)."""
    async with await nats.connect(
        servers=cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        await _create(js, name="KC", subjects=["kc.>"], num_replicas=3, allow_msg_ttl=True)
        # a TTL long enough for the refused create below to be answered first on a loaded machine
        assert await _publish_until_acked(js, "kc.k", b"v", "v1", {"Nats-TTL": "5s"}) == 1
        live_until = asyncio.get_running_loop().time() + 5
        assert await _publish_until_acked(js, "kc.other", b"o", "o1") == 2
        leader = await _leader(js, "KC")
        follower = next(n for n in sorted(cluster.nodes) if n != leader)
        for node in cluster.nodes.values():
            await cluster.wait_for(
                f"{node.name} has both", lambda n=node: _summary(n.stream_state("KC"))[2] == 2
            )
        cluster.kill(follower)
        with pytest.raises(nats.js.errors.APIError) as refused:
            for _ in range(3):  # an answer lost to the kill (the client's server) is asked again
                try:
                    await js.publish(
                        "kc.k", b"again", timeout=1, headers={"Nats-Expected-Last-Subject-Sequence": "0"}
                    )
                except (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    continue
        assert refused.value.err_code == 10071
        assert asyncio.get_running_loop().time() < live_until, "refused only after message 1 expired"
        assert await _publish_until_acked(js, "kc.other", b"o", "o2") == 3
        # message 1 expires on the two servers up
        await asyncio.sleep(max(0.0, live_until - asyncio.get_running_loop().time()) + 0.5)
        cluster.start(follower)
        assert await _publish_until_acked(js, "kc.other", b"o", "o3") == 4

        def settled() -> bool:
            states = [_summary(n.stream_state("KC")) for n in cluster.nodes.values()]
            return states[0][2] == 4 and all(s == states[0] for s in states)

        try:
            await cluster.wait_for("every replica at sequence 4", settled, 20)
        except AssertionError:
            raise AssertionError(
                "replicas differ: "
                + repr({n.name: _summary(n.stream_state("KC")) for n in cluster.nodes.values()})
            ) from None


# -- what a consumer sees, against nats-server 2.15.1 ------------------------------------------------


async def _marker_story(urls: list[str]) -> tuple[tuple[int, str, dict[str, str]], list[tuple[int, str]]]:
    """The same publishes to a cluster: an R3 stream whose TTL'd messages expire, one subject
    emptied (a marker), one not (a later message on it), then the emptied one published again.
    The marker as MSG.GET answers it (sequence, subject, reason and TTL), and what the stream
    holds once the marker expired too (sequence, subject)."""
    async with await nats.connect(servers=urls, max_reconnect_attempts=-1, user="app", password="app") as nc:
        js = nc.jetstream(timeout=3)
        await _create(
            js,
            name="MKR",
            subjects=["r.>"],
            num_replicas=3,
            allow_msg_ttl=True,
            allow_rollup_hdrs=True,
            subject_delete_marker_ttl=1.0,
        )
        await _publish_until_acked(js, "r.a", b"1", "1", {"Nats-TTL": "1s"})
        await _publish_until_acked(js, "r.b", b"2", "2")
        await _publish_until_acked(js, "r.c", b"3", "3", {"Nats-TTL": "1s"})
        await _publish_until_acked(js, "r.c", b"4", "4")
        for _ in range(100):  # the marker for r.a, once message 1 expired
            m = await js.get_last_msg("MKR", "r.a")
            if m.seq != 1:
                break
            await asyncio.sleep(0.05)
        hdrs = m.headers or {}
        marker = (int(m.seq or 0), str(m.subject), {k: hdrs.get(k, "") for k in (MARKER, "Nats-TTL")})
        await _publish_until_acked(js, "r.a", b"6", "6")
        await asyncio.sleep(1.5)  # the marker expires (its own TTL), leaving no marker
        out = []
        last = (await js.stream_info("MKR")).state.last_seq
        for seq in range(1, last + 1):
            try:
                got = await js.get_msg("MKR", seq)
            except NotFoundError:
                continue
            out.append((int(got.seq or 0), str(got.subject)))
        return marker, out


async def test_markers_seen_as_nats_server_places_them(cluster: JsCluster, tmp_path: Path) -> None:
    """The marker's sequence, subject and headers, and what the stream holds after, as three
    nats-server 2.15.1 (which also put ``Nats-Rollup: sub`` on their markers; not compared)."""
    root = tmp_path / "ref"
    root.mkdir()
    conf = root / "accounts.conf"
    conf.write_text(ACCOUNTS)
    with reference_cluster(root, "-c", str(conf), prefix="r") as members:
        want = await _marker_story([m.url for m in members])
    got = await _marker_story(cluster.urls)
    assert got == want
    assert got == ((5, "r.a", {MARKER: "MaxAge", "Nats-TTL": "1s"}), [(2, "r.b"), (4, "r.c"), (6, "r.a")])
