"""`jetpy store check` / `jetpy store dump` on a stopped jetpy server's file store: every record's
checksum validated, damage reported with its offset (never repaired), and the directory left
byte for byte as it was."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import nats

from cli.conftest import api, js_publish, run_cli, run_many
from conftest import JETPY_SERVER, start_process


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


async def make_store(tmp_path: Path) -> Path:
    """A stopped server's store: stream EVENTS (messages, a deleted one, a consumer) and KV_CFG."""
    store = tmp_path / "store"
    proc = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], tmp_path / "s.log"
    )
    try:
        url = proc.url
        await api(url, "STREAM.CREATE.EVENTS", {"name": "EVENTS", "subjects": ["events.*"]})
        await js_publish(url, *[(f"events.{k}", f"payload-{i}".encode()) for i, k in enumerate("abcab", 1)])
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.publish("events.h", b"with headers", headers={"X-Kind": "test"})
        await nc.close()
        await api(url, "STREAM.MSG.DELETE.EVENTS", {"seq": 3, "no_erase": True})
        await api(
            url,
            "CONSUMER.CREATE.EVENTS.READER",
            {
                "stream_name": "EVENTS",
                "config": {"name": "READER", "durable_name": "READER", "ack_policy": "explicit"},
            },
        )
        await api(url, "STREAM.CREATE.KV_CFG", {"name": "KV_CFG", "subjects": ["$KV.CFG.>"]})
        await js_publish(url, ("$KV.CFG.a", b"1"))
        running = run_cli(None, "store", "check", str(store))
        assert "locked by a running server" in running.err, running
    finally:
        assert proc.stop(signal.SIGTERM) == 0
    return store


async def test_check_and_dump_a_clean_store_read_only(tmp_path: Path) -> None:
    store = await make_store(tmp_path)
    before = snapshot(store)
    check, check_json, dump, dump_json = run_many(
        None,
        ["store", "check", str(store)],
        ["store", "check", str(store), "--json"],
        ["store", "dump", str(store), "EVENTS", "--payload"],
        ["store", "dump", str(store / "jetstream" / "$G" / "streams" / "EVENTS"), "EVENTS", "--json"],
    )
    assert check.code == 0, check
    row = next(x for x in check.out.splitlines() if "│ EVENTS " in x)
    assert "OK" in row and "│       6 │        5 │" in row  # 6 records, 1 deleted by a tombstone
    report = json.loads(check_json.out)
    assert report["ok"] is True
    ev = next(s for s in report["streams"] if s["stream"] == "EVENTS")
    assert (ev["msgs"], ev["tombstones"], ev["first_seq"], ev["last_seq"], ev["bad_records"]) == (
        5,
        1,
        1,
        6,
        0,
    )
    assert ev["config"]["subjects"] == ["events.*"]
    assert [c["name"] for c in ev["consumers"]] == ["READER"] and ev["consumers"][0]["meta"] == "ok"
    assert {s["stream"] for s in report["streams"]} == {"EVENTS", "KV_CFG"}

    assert dump.code == 0, dump
    assert "subject events.a hdr 0 payload 9 crc ok" in dump.out and "payload: payload-1" in dump.out
    assert "headers: NATS/1.0..X-Kind: test" in dump.out
    assert "Consumer READER: metadata ok" in dump.out
    records = [json.loads(x) for x in dump_json.out.splitlines()]
    msgs = [r for r in records if r.get("kind") == "msg"]
    assert [(m["seq"], m["subject"]) for m in msgs] == [
        (1, "events.a"),
        (2, "events.b"),
        (3, "events.c"),
        (4, "events.a"),
        (5, "events.b"),
        (6, "events.h"),
    ]
    assert [r["seq"] for r in records if r.get("kind") == "tombstone"] == [3]
    assert snapshot(store) == before  # nothing written, truncated or touched


async def test_damage_is_reported_not_repaired(tmp_path: Path) -> None:
    store = await make_store(tmp_path)
    sdir = store / "jetstream" / "$G" / "streams" / "EVENTS"
    block = next((sdir / "msgs").glob("*.blk"))
    records = [
        json.loads(x) for x in run_cli(None, "store", "dump", str(store), "EVENTS", "--json").out.splitlines()
    ]
    second = next(r for r in records if r.get("seq") == 2 and r.get("kind") == "msg")
    data = bytearray(block.read_bytes())
    data[second["offset"] + second["length"] - 6] ^= 0xFF  # a flipped bit in seq 2's payload
    data += b"\xe5\x01torn"  # and a torn write at the end
    block.write_bytes(bytes(data))
    (sdir / "obs" / "READER" / "meta.dat").write_bytes(b"JPMT garbage")
    before = snapshot(store)

    check, dump = run_many(None, ["store", "check", str(store)], ["store", "dump", str(store), "EVENTS"])
    assert check.code == 1, check
    assert "DAMAGED" in next(x for x in check.out.splitlines() if "│ EVENTS " in x)
    assert (
        f"damaged region at offset {second['offset']} ({second['length']} bytes): checksum mismatch"
        in check.out
    )
    assert f"torn tail at offset {len(data) - 6} (6 bytes)" in check.out
    assert "consumer READER: obs/READER/meta.dat at offset 12: truncated header" in check.out
    assert (
        check.err.strip().splitlines()[-1].startswith("jetpy: error: damage found in 1 of 2 streams: EVENTS")
    )
    assert dump.code == 1
    assert f"offset {second['offset']:>10} CORRUPT length {second['length']}: checksum mismatch" in dump.out
    assert "seq 4 " in dump.out and "seq 6 " in dump.out  # the scan re-synchronised past the damage
    assert "TORN TAIL length 6" in dump.out
    assert snapshot(store) == before


def test_not_a_store_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    missing, empty, no_stream = run_many(
        None,
        ["store", "check", str(tmp_path / "nope")],
        ["store", "check", str(tmp_path / "empty")],
        ["store", "dump", str(tmp_path / "empty"), "X"],
    )
    assert missing.code == 2 and "does not exist" in missing.err
    assert empty.code == 2 and "no jetpy file store found" in empty.err
    assert no_stream.code == 2


async def test_every_accounts_streams_are_checked(tmp_path: Path) -> None:
    """A store with accounts: the global account's streams by their names, an account's as
    ``<account>/<name>``, each checkable alone."""
    store = tmp_path / "store"
    conf = tmp_path / "accounts.conf"
    conf.write_text(
        "authorization { users: [{user: g, password: g}] }\n"
        "accounts { A: { users: [{user: a, password: a}], jetstream: enabled } }\n"
    )
    proc = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store), "-c", str(conf)],
        tmp_path / "s.log",
    )
    try:
        url = proc.url.replace("//", "//a:a@")
        await api(url, "STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.*"]})
        await js_publish(url, ("orders.a", b"in account A"))
    finally:
        assert proc.stop(signal.SIGTERM) == 0
    check, one, dump = run_many(
        None,
        ["store", "check", str(store), "--json"],
        ["store", "check", str(store), "--stream", "A/ORDERS", "--json"],
        ["store", "dump", str(store), "A/ORDERS"],
    )
    assert check.code == 0, check
    assert [s["stream"] for s in json.loads(check.out)["streams"]] == ["A/ORDERS"]
    assert one.code == 0 and json.loads(one.out)["streams"][0]["msgs"] == 1, one
    assert dump.code == 0 and "subject orders.a" in dump.out and "payload 12" in dump.out, dump
