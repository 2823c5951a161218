"""`jetpy store check` finds every fault of a stream's own files, each with its file, offset (or
the sequences it holds) and reason, and exits 1; nothing is written. On main it said OK on a
missing middle or newest block, a block cut short, and a header rewritten with a valid checksum
claiming hwm = 10^9."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import zlib
from pathlib import Path

import nats

from cli.conftest import run_many
from conftest import JETPY_SERVER, start_process

STREAMS = ("OK", "MID", "NEW", "CUT", "HWM", "FLOOR", "TAIL", "META", "NOTAIL", "NOMSGS")


def blocks(sdir: Path) -> list[Path]:
    return sorted((sdir / "msgs").glob("*.blk"))


def forge(block: Path, field: int, value: int) -> int:
    """Rewrite a field of the block's winning header slot, checksum valid; returns its offset."""
    data = bytearray(block.read_bytes())
    valid = [
        off
        for off in (0, 64)
        if zlib.crc32(data[off : off + 48]) == struct.unpack_from("<I", data, off + 48)[0]
    ]
    off = max(valid, key=lambda o: struct.unpack_from("<Q", data, o + 40)[0])
    struct.pack_into("<Q", data, off + field, value)
    struct.pack_into("<I", data, off + 48, zlib.crc32(data[off : off + 48]))
    block.write_bytes(bytes(data))
    return off


async def test_check_names_every_stream_file_fault(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], tmp_path / "s.log"
    )
    try:
        nc = await nats.connect(proc.url)
        js = nc.jetstream()
        for name in STREAMS:  # 32,000-byte blocks (nats-server's size for max_bytes this small)
            await js.add_stream(name=name, subjects=[f"{name}.>"], max_bytes=120_000)
            futs = [await js.publish_async(f"{name}.x", bytes(80)) for _ in range(1000)]
            for f in futs:
                await f
        await nc.close()
    finally:
        assert proc.stop(signal.SIGTERM) == 0
    sd = store / "jetstream" / "$G" / "streams"
    mid = blocks(sd / "MID")[1]
    mid_first = int(mid.stem)
    mid_last = int(blocks(sd / "MID")[2].stem) - 1
    mid.unlink()
    new = blocks(sd / "NEW")[-1]
    new.unlink()
    cut = blocks(sd / "CUT")[-1]
    cut_size = cut.stat().st_size
    os.truncate(cut, cut_size - 1000)
    hwm_block = blocks(sd / "HWM")[-1]
    hwm_at = forge(hwm_block, 16, 10**9)
    floor_block = blocks(sd / "FLOOR")[1]
    floor_at = forge(floor_block, 24, 10**6)
    (sd / "TAIL" / "tail.dat").write_bytes(bytes(128))
    meta = sd / "META" / "meta.dat"
    meta.write_bytes(meta.read_bytes()[:-3] + b"xyz")
    (sd / "NOTAIL" / "tail.dat").unlink()
    shutil.rmtree(sd / "NOMSGS" / "msgs")
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}

    text, js_out = run_many(None, ["store", "check", str(store)], ["store", "check", str(store), "--json"])
    assert text.code == 1 and js_out.code == 1, text
    report = {s["stream"]: s for s in json.loads(js_out.out)["streams"]}
    problems = {n: "\n".join(s["problems"]) for n, s in report.items()}
    assert report["OK"]["ok"] and report["OK"]["lost"] == []
    assert f"no block file holds sequences {mid_first}-{mid_last}" in problems["MID"]
    assert report["MID"]["lost"] == list(range(mid_first, mid_last + 1))
    assert f"{new.name} is missing; the tail record says it held" in problems["NEW"]
    assert report["NEW"]["last_seq"] == 1000 and report["NEW"]["lost"][-1] == 1000
    valid = re.search(
        rf"{cut.name} holds (\d+) valid bytes, (\d+) fewer than the tail record says", problems["CUT"]
    )
    assert valid and int(valid[2]) >= 1000 and int(valid[1]) + int(valid[2]) == cut_size, problems["CUT"]
    assert report["CUT"]["lost"] and report["CUT"]["lost"][-1] == 1000
    assert f"{hwm_block.name} at offset {hwm_at}: impossible header: hwm 1000000000" in problems["HWM"]
    assert report["HWM"]["last_seq"] == 1000, "a forged header does not move the stream's end"
    assert f"{floor_block.name} at offset {floor_at}: impossible header: floor 1000000" in problems["FLOOR"]
    assert "tail.dat at offset 0: no valid slot" in problems["TAIL"]
    assert "meta.dat" in problems["META"] and "checksum" in problems["META"]
    assert "tail.dat is missing" in problems["NOTAIL"]
    assert "msgs/ holds no block files" in problems["NOMSGS"] and report["NOMSGS"]["lost"] == list(
        range(1, 1001)
    )
    for name in STREAMS[1:]:
        assert not report[name]["ok"], name
        assert f"{name}: " in text.out + text.err, f"{name}'s problems are printed"
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before, (
        "the checker writes nothing"
    )
