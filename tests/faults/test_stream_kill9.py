"""kill -9 under publish: every acknowledged message is served intact after the restart, nothing
is reported lost, sequences go on above every acknowledged one, and a durable consumer that had
delivered up to the crash is given what is published after it. Run on a stream without limits
(one growing block) and on one whose max_bytes makes it roll and drop 32,000-byte blocks under
the publishes; ``make faults`` repeats each (``JETPY_FAULT_RUNS``)."""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from conftest import Proc

from .stream_faults import MAX_BYTES, fault_runs, fetch_all, jetpy, payload


async def publish_until_killed(p: Proc, config: dict[str, Any], after: float) -> dict[int, bytes]:
    """Publish to stream K in windows of 64 until the server is killed (``after`` seconds in);
    returns every acknowledged sequence and its payload."""
    nc = await nats.connect(p.url, allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name="K", subjects=["k.>"], **config)
    await js.add_consumer("K", ConsumerConfig(durable_name="D", ack_policy=AckPolicy.NONE))
    acked: dict[int, bytes] = {}

    async def publisher() -> None:
        i = 0
        while True:
            futs = [(await js.publish_async("k.x", payload("K", i + k)), i + k) for k in range(64)]
            for f, k in futs:
                acked[(await f).seq] = payload("K", k)
            i += 64

    task = asyncio.create_task(publisher())
    await asyncio.sleep(after)
    p.stop(signal.SIGKILL)  # mid-stream: some publishes are in flight, unacknowledged
    task.cancel()
    try:
        await task
    except BaseException:  # the connection died under it: expected
        pass
    try:
        await nc.close()
    except Exception:
        pass
    return acked


@pytest.mark.parametrize("limits", ["unlimited", "max_bytes"])
async def test_kill9_under_publish_loses_no_acknowledged_message(
    tmp_path: Path, procs: list[Proc], limits: str
) -> None:
    config: dict[str, Any] = {"max_bytes": MAX_BYTES} if limits == "max_bytes" else {}
    rng = random.Random(limits)
    for run in range(fault_runs(1)):
        store = tmp_path / f"run{run}"
        p = jetpy(store, tmp_path / f"a{run}.log")
        procs.append(p)
        acked = await publish_until_killed(p, config, rng.uniform(0.5, 2.0))
        assert len(acked) > 500, "the kill came under publish"
        q = jetpy(store, tmp_path / f"b{run}.log")
        procs.append(q)
        nc = await nats.connect(q.url)
        js = nc.jetstream()
        info = await js.stream_info("K")
        st = info.state
        assert st.lost is None, f"run {run}: lost {st.lost}"
        assert st.last_seq >= max(acked)
        served = await fetch_all(nc, "K")
        missing = sorted(q for q in acked if q >= st.first_seq and served.get(q) != acked[q])
        assert not missing, f"run {run}: acknowledged and not served: {missing[:20]}"
        if limits == "unlimited":
            assert st.first_seq == 1 and set(acked) <= set(served)
        # on from above every acknowledged sequence; the durable consumer is given it
        sub = await js.pull_subscribe_bind("D", "K")
        while True:  # what it had not been given before the crash
            try:
                old = await sub.fetch(1000, timeout=1)
            except TimeoutError:  # nats-py's own, or asyncio's when its deadline is spent
                break
            assert all(m.metadata.sequence.stream <= st.last_seq for m in old)
        ack = await js.publish("k.x", b"after")
        assert ack.seq == st.last_seq + 1 > max(acked)
        (m,) = await sub.fetch(1, timeout=5)
        assert (m.metadata.sequence.stream, m.data) == (ack.seq, b"after")
        await nc.close()
        q.stop(signal.SIGKILL)
        assert " lost " not in q.log()
