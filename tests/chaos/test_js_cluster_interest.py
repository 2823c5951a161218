"""Interest retention on a cluster, on three jetpy server processes: an R3 interest stream's
messages leave every replica only once each consumer whose filter matches them acknowledged them
(two durables with overlapping filters; the stream's leader decides, through the stream's log),
while a consumer's leader is killed -9 and restarted and the stream's leader steps down, and
after the whole cluster restarted; the replicas end identical. The stream's
state after the same operations is a 3-node nats-server 2.15.1 cluster's, for an R3 stream and
an R1 one (held locally by its server, its removals made at once)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from .jscluster import ACCOUNTS, JsCluster, JsNode, reference_cluster

pytestmark = pytest.mark.timeout(240)


async def _retry(call: Any, tries: int = 300) -> Any:
    """``call()`` until it is answered (a leader is being elected meanwhile)."""
    last: Exception | None = None
    for _ in range(tries):
        try:
            return await call()
        except Exception as exc:  # timeouts, no responders, 10008: an election
            last = exc
            await asyncio.sleep(0.1)
    raise AssertionError(f"never answered: {last!r}")


async def _states(c: JsCluster, stream: str) -> dict[str, tuple[int, int, int]]:
    """Each replica's (messages, first seq, last seq) in its own store."""
    out = {}
    for node in c.nodes.values():
        st = node.stream_state(stream) or {}
        out[node.name] = (st.get("messages", -1), st.get("first_seq", -1), st.get("last_seq", -1))
    return out


async def _every_replica(
    c: JsCluster, stream: str, want: tuple[int, int, int], within: float = 30, replicas: int = 3
) -> None:
    """Until the stream's ``replicas`` replicas (those servers' own stores) are each at ``want``
    (messages, first seq, last seq)."""

    def at(n: JsNode) -> bool:
        st = n.stream_state(stream) or {}
        return (st.get("messages"), st.get("first_seq"), st.get("last_seq")) == want

    try:
        await c.wait_for(
            f"{replicas} replicas of {stream} at {want}",
            lambda: sum(at(n) for n in c.nodes.values()) == replicas,
            within,
        )
    except AssertionError as e:
        raise AssertionError(f"{e}: {await _states(c, stream)}") from None


async def _consume(js: JetStreamContext, name: str, count: int, halfway: Any = None) -> list[tuple[int, str]]:
    """Fetch and AckSync ``count`` messages of durable ``name`` (``halfway()`` once half are
    acknowledged); their (stream seq, subject)s, each once."""
    sub = await _retry(lambda: js.pull_subscribe_bind(name, "I"))
    acked: dict[int, str] = {}
    called = False
    while len(acked) < count:
        try:
            msgs = await sub.fetch(min(10, count - len(acked)), timeout=2)
        except Exception:  # a new leader being elected: asked again
            await asyncio.sleep(0.1)
            continue
        for m in msgs:
            try:
                await m.ack_sync(timeout=2)
            except Exception:  # not confirmed: delivered again after its ack wait
                continue
            acked[m.metadata.sequence.stream] = m.subject
            if halfway is not None and not called and len(acked) >= count // 2:
                called = True
                await halfway()
    return sorted(acked.items())


async def test_messages_go_once_every_interested_consumer_acked(tmp_path: Path) -> None:
    c = JsCluster(tmp_path)
    c.start()
    nc = await nats.connect(servers=c.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    try:
        js = nc.jetstream(timeout=2)
        await _retry(lambda: js.add_stream(name="I", subjects=["i.>"], num_replicas=3, retention="interest"))
        # A wants i.a.*, B i.*.b: i.a.b is wanted by both, i.c.c by nobody
        for name, subject in (("A", "i.a.*"), ("B", "i.*.b")):
            cfg = ConsumerConfig(
                durable_name=name, filter_subject=subject, ack_policy=AckPolicy.EXPLICIT, ack_wait=2
            )
            await _retry(lambda cfg=cfg: js.add_consumer("I", cfg))
        n = 45
        subjects = ["i.a.x", "i.x.b", "i.a.b"]
        for i in range(n):  # every fifth followed by an i.c.c
            await _retry(lambda i=i: js.publish(subjects[i % 3], b"%d" % i))
            if i % 5 == 0:
                await _retry(lambda: js.publish("i.c.c", b"x"))
        last = n + n // 5
        # nobody wants i.c.c: gone from every replica; the others wait for their consumers
        await _every_replica(c, "I", (n, 1, last))

        async def kill_a_leader() -> None:
            info = await _retry(lambda: js.consumer_info("I", "A"))
            leader = info.cluster.leader
            c.kill(leader)
            await asyncio.sleep(1)
            c.start(leader)

        acked_a = await _consume(js, "A", 2 * n // 3, kill_a_leader)
        assert sorted(s for _, s in acked_a) == ["i.a.b"] * (n // 3) + ["i.a.x"] * (n // 3)
        # what A alone wanted is gone everywhere; what B wants too is all still there
        await c.wait_for(
            "the restarted server back in the stream",
            lambda: all(
                (node.stream_state("I") or {}).get("messages") == 2 * n // 3 for node in c.nodes.values()
            ),
            30,
        )
        states = await _states(c, "I")
        assert len(set(states.values())) == 1, states
        assert states["n1"][1:] == (3, last)  # i.a.x and i.c.c went, the first i.x.b is there

        async def step_down() -> None:
            await _retry(lambda: nc.request("$JS.API.STREAM.LEADER.STEPDOWN.I", b"", timeout=2))

        acked_b = await _consume(js, "B", 2 * n // 3, step_down)
        assert sorted(s for _, s in acked_b) == ["i.a.b"] * (n // 3) + ["i.x.b"] * (n // 3)
        both = {seq for seq, s in acked_a if s == "i.a.b"}
        assert both == {seq for seq, s in acked_b if s == "i.a.b"}
        await _every_replica(c, "I", (0, last + 1, last))
        info = await _retry(lambda: js.stream_info("I"))
        assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (0, last + 1, last)

        # the whole cluster restarted (every log replayed over its store): what was removed
        # stays removed, what is left is still waited for, and the rule goes on
        for i in range(10):
            await _retry(lambda i=i: js.publish(subjects[i % 2], b"%d" % i))
        await _every_replica(c, "I", (10, last + 1, last + 10))
        await _consume(js, "A", 5)
        await _every_replica(c, "I", (5, last + 2, last + 10))
        c.stop()
        c.start()
        await _every_replica(c, "I", (5, last + 2, last + 10))
        await _consume(js, "B", 5)
        await _every_replica(c, "I", (0, last + 11, last + 10))
    finally:
        await nc.close()
        c.stop()


async def _steps(url: str, replicas: int) -> list[Any]:
    """The same operations on a cluster: the stream's state after each step (from its info)."""
    nc: Client = await nats.connect(url)
    js = nc.jetstream(timeout=3)
    out: list[Any] = []

    async def state(label: str) -> None:
        """Once it settled (the same for a second: removals go through the stream's log)."""
        seen: list[Any] = []
        while len(seen) < 3 or seen[-3:].count(seen[-1]) < 3:
            if len(seen) > 60:
                raise AssertionError(f"{label}: never settled: {seen}")
            s = (await _retry(lambda: js.stream_info("I"))).state
            seen.append([label, s.messages, s.first_seq, s.last_seq, s.num_deleted or 0, s.consumer_count])
            await asyncio.sleep(0.5)
        out.append(seen[-1])

    try:
        await _retry(
            lambda: js.add_stream(name="I", subjects=["i.>"], num_replicas=replicas, retention="interest")
        )
        for s in ("i.a", "i.b", "i.c"):
            await _retry(lambda s=s: js.publish(s, b"x"))
        await state("no consumer")
        for name, f in (("A", "i.a"), ("B", "i.b")):
            cfg = ConsumerConfig(durable_name=name, filter_subject=f, ack_policy=AckPolicy.EXPLICIT)
            await _retry(lambda cfg=cfg: js.add_consumer("I", cfg))
        for s in ("i.a", "i.a", "i.b", "i.b", "i.c", "i.x", "i.a"):
            await _retry(lambda s=s: js.publish(s, b"x"))
        await state("published")
        for name in ("A", "B"):
            sub = await js.pull_subscribe_bind(name, "I")
            msgs = await sub.fetch(2, timeout=3)
            for m in msgs:
                await m.ack_sync()
            await state(f"{name} acked {len(msgs)}")
        await js.delete_consumer("I", "A")  # its last message is wanted by nobody now
        await asyncio.sleep(1.5)
        await state("A deleted")
    finally:
        await nc.close()
    return out


@pytest.mark.parametrize("replicas", [3, 1])
async def test_interest_stream_state_as_nats_server_gives_it(tmp_path: Path, replicas: int) -> None:
    """R3: the stream's leader decides through its log; R1: the stream is held locally by its
    server (no group), its consumers' states still replicated through theirs."""
    conf = tmp_path / "accounts.conf"
    conf.write_text(ACCOUNTS)
    with reference_cluster(tmp_path, "-c", str(conf)) as members:
        want = await _steps(members[0].url.replace("nats://", "nats://app:app@"), replicas)
    c = JsCluster(tmp_path / "jetpy", extra=("-c", str(conf)))
    try:
        c.start()
        got = await _steps(c.nodes["n1"].url.replace("nats://", "nats://app:app@"), replicas)
    finally:
        c.stop()
    assert got == want


@pytest.mark.parametrize("replicas", [3, 1])
async def test_a_last_per_subject_consumer_restarted_wants_what_it_has_yet_to_deliver(
    tmp_path: Path, replicas: int
) -> None:
    """A consumer delivering the last message per subject (R3: its replicated state; R1, of an
    R1 stream as interest retention wants: the single server's consumer, its state read back
    after the restart) is done, as any consumer is by its state, with what it delivered once
    acknowledged (above its ack floor too) and with what it passed over; after the whole
    cluster restarted it still wants only what it has yet to deliver or has pending."""
    c = JsCluster(tmp_path)
    c.start()
    nc = await nats.connect(servers=c.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    try:
        js = nc.jetstream(timeout=2)
        await _retry(
            lambda: js.add_stream(name="I", subjects=["l.*"], num_replicas=replicas, retention="interest")
        )
        hold = ConsumerConfig(
            durable_name="HOLD", ack_policy=AckPolicy.EXPLICIT, ack_wait=60, num_replicas=replicas
        )
        await _retry(lambda: js.add_consumer("I", hold))
        for s in ("l.a", "l.a", "l.b", "l.b"):  # seqs 1-4: the last of l.a is 2, of l.b 4
            await _retry(lambda s=s: js.publish(s, b"x"))
        last = ConsumerConfig(
            durable_name="LAST",
            filter_subject="l.*",
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=60,
            num_replicas=replicas,
        )
        await _retry(lambda: js.add_consumer("I", last))
        await _consume(js, "HOLD", 4)
        sub = await _retry(lambda: js.pull_subscribe_bind("LAST", "I"))
        msgs = await _retry(lambda: sub.fetch(2, timeout=2))
        assert [m.metadata.sequence.stream for m in msgs] == [2, 4]
        await msgs[1].ack_sync()  # 4 acknowledged, 2 still pending: the ack floor stays at 1
        # 1 below its first start, 3 passed over, 4 acknowledged: 2 is left, still pending
        await _every_replica(c, "I", (1, 2, 4), replicas=replicas)
        c.stop()
        c.start()
        await _every_replica(c, "I", (1, 2, 4), replicas=replicas)
        await _retry(lambda: js.publish("l.b", b"x"))  # 5: LAST has yet to deliver it
        assert [seq for seq, _ in await _consume(js, "HOLD", 1)] == [5]
        await _every_replica(c, "I", (2, 2, 5), replicas=replicas)
        assert [seq for seq, _ in await _consume(js, "LAST", 1)] == [5]
        await _every_replica(c, "I", (1, 2, 5), replicas=replicas)
        info = await _retry(lambda: js.consumer_info("I", "LAST"))
        assert (info.delivered.stream_seq, info.ack_floor.stream_seq, info.num_ack_pending) == (5, 1, 1)
    finally:
        await nc.close()
        c.stop()
