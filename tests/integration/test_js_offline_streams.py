"""A stream whose files cannot be read back is offline, not gone: every request about it answers
500 10194 with the file and the reason, its name and subjects stay taken, its files are kept as
they are, and an explicit STREAM.DELETE removes it. The rest of the server runs. On main a
``meta.dat`` failing its checksum made the whole server exit with a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client

from conftest import JETPY_SERVER, Proc, start_process


def jetpy(store: Path, log: Path) -> Proc:
    return start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], log)


async def api(nc: Client, subject: str, body: Any = b"") -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return json.loads((await nc.request("$JS.API." + subject, raw, timeout=5)).data)


async def test_an_offline_stream_answers_for_itself_and_can_be_deleted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    p = jetpy(store, tmp_path / "a.log")
    try:
        nc = await nats.connect(p.url)
        js = nc.jetstream()
        await js.add_stream(name="BAD", subjects=["bad.>"])
        await js.add_stream(name="GOOD", subjects=["good.>"])
        for i in range(5):
            await js.publish("bad.x", b"%d" % i)
            await js.publish("good.x", b"%d" % i)
        await js.add_consumer("BAD", durable_name="C")
        await nc.close()
    finally:
        p.stop()
    sdir = store / "jetstream" / "$G" / "streams" / "BAD"
    (sdir / "tail.dat").write_bytes(bytes(128))  # unreadable: the stream's end cannot be checked
    files = {q: q.read_bytes() for q in sdir.rglob("*") if q.is_file() and q.name != "LOCK"}

    q = jetpy(store, tmp_path / "b.log")
    try:
        nc = await nats.connect(q.url)
        why = "store is corrupt: tail.dat at offset 0: no valid slot (both fail their checksum)"
        offline = {"code": 500, "err_code": 10194, "description": f"stream is offline: {why}"}
        for subject, body in [
            ("STREAM.INFO.BAD", b""),
            ("STREAM.UPDATE.BAD", {"name": "BAD", "subjects": ["bad.>"]}),
            ("STREAM.CREATE.BAD", {"name": "BAD", "subjects": ["other.>"]}),
            ("STREAM.PURGE.BAD", b""),
            ("STREAM.MSG.GET.BAD", {"seq": 1}),
            ("STREAM.MSG.DELETE.BAD", {"seq": 1}),
            ("JETPY.BULK.BAD", {"seq": 1}),
            ("CONSUMER.INFO.BAD.C", b""),
            ("CONSUMER.NAMES.BAD", b""),
            ("CONSUMER.CREATE.BAD", {"stream_name": "BAD", "config": {"ack_policy": "none"}}),
        ]:
            assert (await api(nc, subject, body))["error"] == offline, subject
        assert (await api(nc, "STREAM.NAMES"))["streams"] == ["BAD", "GOOD"]
        listed = await api(nc, "STREAM.LIST")
        assert [s["config"]["name"] for s in listed["streams"]] == ["GOOD"]
        assert listed["offline"] == {"BAD": why} and listed["missing"] == ["BAD"]
        # its subjects stay claimed, and a publish to them is refused saying why
        clash = await api(nc, "STREAM.CREATE.OTHER", {"name": "OTHER", "subjects": ["bad.y"]})
        assert clash["error"]["err_code"] == 10065
        ack = json.loads((await nc.request("bad.x", b"lost?", timeout=5)).data)
        assert ack["error"] == offline and ack["stream"] == "BAD"
        # the rest of the server runs
        js = nc.jetstream()
        assert (await js.publish("good.x", b"more")).seq == 6
        assert {f: b for f, b in files.items()} == {q: q.read_bytes() for q in files}, "untouched"
        # an explicit delete removes it, and frees its name and subjects
        assert await api(nc, "STREAM.DELETE.BAD") == {
            "type": "io.nats.jetstream.api.v1.stream_delete_response",
            "success": True,
        }
        assert not sdir.exists()
        assert (await api(nc, "STREAM.INFO.BAD"))["error"]["err_code"] == 10059
        assert "error" not in await api(nc, "STREAM.CREATE.BAD", {"name": "BAD", "subjects": ["bad.>"]})
        assert (await js.publish("bad.x", b"new")).seq == 1
        await nc.close()
    finally:
        q.stop()
    assert "stream 'BAD' is offline: " + why in q.log()
