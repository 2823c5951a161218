"""A full disk (a 2 MiB tmpfs, root only): publishes that cannot be made durable are refused with
an error and never acknowledged, the server and core messaging keep running, nothing is
reported lost (not then, not after a restart: the refused writes are not losses), every
acknowledged message is served after the restart, and once space is freed publishing resumes
above every sequence handed out. On main the refused writes were reported in ``lost``."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import nats

from conftest import JETPY_SERVER, Proc, start_process

from .stream_faults import fetch_all


def server(store: Path, conf: Path, log: Path) -> Proc:
    # no JetStream limit of its own: the disk is what runs out
    conf.write_text(f'jetstream {{ store_dir: "{store}", max_file_store: 1GB }}\n')
    return start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)], log)


async def test_a_full_disk_refuses_without_losing_or_reporting_loss(
    tmp_path: Path, tiny_fs: Path, procs: list[Proc]
) -> None:
    store = tiny_fs / "js"
    p = server(store, tmp_path / "js.conf", tmp_path / "a.log")
    procs.append(p)
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    await js.add_stream(name="FULL", subjects=["full.>"])
    acked: dict[int, bytes] = {}
    refused = 0
    for i in range(2000):  # 2 KB each: the disk is full well before the end
        data = b"%06d" % i + bytes(2000)
        ack = json.loads((await nc.request(f"full.{i}", data, timeout=10)).data)
        if "error" in ack:
            assert ack["error"]["err_code"] == 10077, ack  # nats-server's "stream store failed"
            refused += 1
            if refused >= 20:
                break
        else:
            acked[ack["seq"]] = data
    assert acked and refused >= 20, "the disk filled up"
    # the server runs: core messaging, the API, reads of what was acknowledged
    sub = await nc.subscribe("core.echo")
    await nc.publish("core.echo", b"still here")
    assert (await sub.next_msg(timeout=5)).data == b"still here"
    info = await js.stream_info("FULL")
    assert info.state.lost is None, "a refused write is not a loss"
    assert info.state.messages == len(acked)
    await nc.close()
    assert p.stop(signal.SIGTERM) == 0

    q = server(store, tmp_path / "js.conf", tmp_path / "b.log")
    procs.append(q)
    nc = await nats.connect(q.url)
    js = nc.jetstream()
    info = await js.stream_info("FULL")
    assert info.state.lost is None and info.state.messages == len(acked)
    assert await fetch_all(nc, "FULL") == acked
    # space freed: publishing resumes above every sequence handed out
    await js.purge_stream("FULL")
    ack = await js.publish("full.after", b"after")
    assert ack.seq > info.state.last_seq >= max(acked)
    await nc.close()
    assert " lost " not in q.log()


async def test_a_refused_publish_retried_with_its_msg_id_is_stored_not_called_a_duplicate(
    tmp_path: Path, tiny_fs: Path, procs: list[Proc]
) -> None:
    # a write that could not be made durable was rolled back: its Nats-Msg-Id was never stored,
    # so the client's retry (same id, once there is space) must be stored and acknowledged as new,
    # not answered as a duplicate of a message that is not there (an acknowledged loss)
    p = server(tiny_fs / "js", tmp_path / "js.conf", tmp_path / "a.log")
    procs.append(p)
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    await js.add_stream(name="FULL", subjects=["full.>"], duplicate_window=120.0)
    refused: dict[str, bytes] = {}
    for i in range(2000):
        data = b"%06d" % i + bytes(2000)
        msg = await nc.request(f"full.{i}", data, timeout=10, headers={"Nats-Msg-Id": f"id-{i}"})
        ack = json.loads(msg.data)
        if "error" in ack:
            assert ack["error"]["err_code"] == 10077, ack
            refused[f"id-{i}"] = data
            if len(refused) >= 20:
                break
    assert len(refused) >= 20, "the disk filled up"
    await js.purge_stream("FULL", subject="full.0")  # frees the first block's space
    await js.purge_stream("FULL")
    for mid, data in list(refused.items())[:5]:
        ack = json.loads(
            (await nc.request("full.retry", data, timeout=10, headers={"Nats-Msg-Id": mid})).data
        )
        assert "error" not in ack and not ack.get("duplicate"), (mid, ack)
        got = await js.get_msg("FULL", ack["seq"])
        assert got.data == data
    await nc.close()
