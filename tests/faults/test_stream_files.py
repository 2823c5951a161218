"""Damaged and deleted stream files on a stopped server: one server holds a stream per fault,
every stream is damaged its own way while the server is down, and after one restart each says
exactly what happened to it, while the others (and core messaging) run on.

Served with what was lost named exactly: a deleted, emptied or cut-short newest block, a
deleted middle block, a deleted ``msgs/``, a flipped bit or zeroed range in a record, a
damaged header slot or tail record slot (the other slot serves), a missing tail record. The
next publish gets a sequence above every one acknowledged, and a durable consumer that had
acknowledged everything receives the new messages (on main it skipped them: their sequences
were reused below its ack floor).

Offline, files untouched, 10194 naming the file: damaged, deleted or truncated stream metadata,
a sealed block without a valid header, a header claiming an impossible high-water mark (10^9,
with a valid checksum), an unreadable tail record. On main a damaged ``meta.dat`` stopped the
whole server with a traceback, and the forged header made it jump to sequence 10^9.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig

from conftest import Proc

from .stream_faults import (
    BLOCK_HEADER,
    MAX_BYTES,
    api,
    blocks,
    fetch_all,
    fill,
    flip,
    jetpy,
    payload,
    records,
    snapshot,
    stream_dir,
    zero,
)

MSGS = 1000  # four 32,000-byte blocks per stream


@dataclass
class Fault:
    """How to damage a stopped stream's directory, and what the restarted server must say."""

    damage: Callable[[Path], list[int]]  # returns the sequences it destroyed
    offline: str = ""  # the file an offline stream's reason must name ("" = served)
    quarantined: bool = False  # moved aside whole: it never became a stream (no metadata)
    lost: list[int] = field(default_factory=list)  # filled in by the damage
    note: str = ""  # what the recovery log line must say besides the ranges


def _msg_seqs(block: Path) -> list[int]:
    return [r.seq for r in records(block) if r.flags == 0]


def newest_deleted(sdir: Path) -> list[int]:
    newest = blocks(sdir)[-1]
    gone = _msg_seqs(newest)
    newest.unlink()
    return gone


def newest_cut(size: int) -> Callable[[Path], list[int]]:
    def damage(sdir: Path) -> list[int]:
        newest = blocks(sdir)[-1]
        gone = [r.seq for r in records(newest) if r.offset + r.length > size]
        with open(newest, "r+b") as f:
            f.truncate(size)
        return gone

    return damage


def newest_torn(sdir: Path) -> list[int]:
    newest = blocks(sdir)[-1]
    last = records(newest)[-1]
    with open(newest, "r+b") as f:
        f.truncate(last.offset + last.length // 2)
    return [last.seq]


def middle_deleted(sdir: Path) -> list[int]:
    middle = blocks(sdir)[2]
    gone = _msg_seqs(middle)
    middle.unlink()
    return gone


def msgs_deleted(sdir: Path) -> list[int]:
    gone = [q for b in blocks(sdir) for q in _msg_seqs(b)]
    shutil.rmtree(sdir / "msgs")
    return gone


def record_flipped(sdir: Path) -> list[int]:
    rec = records(blocks(sdir)[1])[40]
    flip(rec.block, rec.offset + rec.length - 12)  # in its payload
    return [rec.seq]


def records_zeroed(sdir: Path) -> list[int]:
    recs = records(blocks(sdir)[1])
    start = recs[10].offset + 7
    end = start + 300
    zero(recs[10].block, start, end - start)
    return [r.seq for r in recs if r.offset < end and r.offset + r.length > start]


def header_slot_flipped(sdir: Path) -> list[int]:
    flip(blocks(sdir)[1], 20)  # slot A's hwm field: slot B serves
    return []


def header_zeroed(sdir: Path) -> list[int]:
    zero(blocks(sdir)[1], 0, BLOCK_HEADER)
    return []


def header_forged(sdir: Path) -> list[int]:
    """The newest block's winning header slot rewritten to claim hwm 10^9, checksum valid."""
    newest = blocks(sdir)[-1]
    data = bytearray(newest.read_bytes())
    slots = [(struct.unpack_from("<Q", data, off + 40)[0], off) for off in (0, 64)]
    _gen, off = max(
        s for s in slots if zlib.crc32(data[s[1] : s[1] + 48]) == struct.unpack_from("<I", data, s[1] + 48)[0]
    )
    struct.pack_into("<Q", data, off + 16, 10**9)
    struct.pack_into("<I", data, off + 48, zlib.crc32(data[off : off + 48]))
    newest.write_bytes(bytes(data))
    return []


def meta(how: str) -> Callable[[Path], list[int]]:
    def damage(sdir: Path) -> list[int]:
        path = sdir / "meta.dat"
        if how == "flipped":
            flip(path, path.stat().st_size - 5)
        elif how == "zeroed":
            zero(path, 0, 64)
        elif how == "truncated":
            with open(path, "r+b") as f:
                f.truncate(10)
        else:
            path.unlink()
        return []

    return damage


def tail_slot_flipped(sdir: Path) -> list[int]:
    flip(sdir / "tail.dat", 64 + 10)
    return []


def tail_zeroed(sdir: Path) -> list[int]:
    zero(sdir / "tail.dat", 0, 128)
    return []


def tail_deleted(sdir: Path) -> list[int]:
    (sdir / "tail.dat").unlink()
    return []


def intact(sdir: Path) -> list[int]:
    return []


FAULTS: dict[str, Fault] = {
    "INTACT": Fault(intact),
    "NEW_DEL": Fault(newest_deleted, note="is missing"),
    "NEW_EMPTY": Fault(newest_cut(0), note="fewer than the tail record says"),
    "NEW_SHORT": Fault(newest_cut(40), note="shorter than its 128-byte header"),
    "NEW_TORN": Fault(newest_torn),
    "MID_DEL": Fault(middle_deleted, note="no block file holds"),
    "MSGS_DEL": Fault(msgs_deleted, note="msgs/ holds no block files"),
    "REC_FLIP": Fault(record_flipped, note="damaged"),
    "REC_ZERO": Fault(records_zeroed, note="damaged"),
    "HDR_FLIP": Fault(header_slot_flipped),
    "TAIL_FLIP": Fault(tail_slot_flipped),
    "TAIL_DEL": Fault(tail_deleted, note="tail.dat is missing"),
    "HDR_ZERO": Fault(header_zeroed, offline="no valid header slot"),
    "HDR_FORGED": Fault(header_forged, offline="impossible header: hwm 1000000000"),
    "META_FLIP": Fault(meta("flipped"), offline="meta.dat"),
    "META_ZERO": Fault(meta("zeroed"), offline="meta.dat"),
    "META_TRUNC": Fault(meta("truncated"), offline="meta.dat"),
    "META_DEL": Fault(meta("deleted"), quarantined=True),
    "TAIL_ZERO": Fault(tail_zeroed, offline="tail.dat at offset 0: no valid slot"),
}


async def test_every_stream_file_fault_is_served_or_offline_exactly(
    tmp_path: Path, procs: list[Proc]
) -> None:
    store = tmp_path / "store"
    p = jetpy(store, tmp_path / "a.log")
    procs.append(p)
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    for name in FAULTS:
        await fill(nc, name, MSGS, max_bytes=MAX_BYTES)
        # a durable consumer that has acknowledged everything: it must see what comes next
        await js.add_consumer(name, ConsumerConfig(durable_name="D", ack_policy=AckPolicy.ALL))
        sub = await js.pull_subscribe_bind("D", name)
        while msgs := await sub.fetch(1000, timeout=2):
            await msgs[-1].ack_sync()
            if msgs[-1].metadata.sequence.stream == MSGS:
                break
        await sub.unsubscribe()
    await nc.close()
    p.stop()  # a clean stop: everything synced

    for name, fault in FAULTS.items():
        sdir = stream_dir(store, name)
        assert len(blocks(sdir)) >= 4, "the stream spans several blocks"
        fault.lost = sorted(fault.damage(sdir))
    before = {
        name: snapshot(stream_dir(store, name)) for name, f in FAULTS.items() if f.offline or f.quarantined
    }

    q = jetpy(store, tmp_path / "b.log")
    procs.append(q)
    nc = await nats.connect(q.url)
    js = nc.jetstream()
    names = await api(nc, "$JS.API.STREAM.NAMES")
    gone = {n for n, f in FAULTS.items() if f.quarantined}
    assert sorted(names["streams"]) == sorted(set(FAULTS) - gone), (
        "every stream's name is known, offline or not"
    )
    listed = await api(nc, "$JS.API.STREAM.LIST")
    offline = {n for n, f in FAULTS.items() if f.offline}
    assert set(listed["offline"]) == offline and set(listed["missing"]) == offline
    assert {s["config"]["name"] for s in listed["streams"]} == set(FAULTS) - offline - gone
    log = q.log()

    for name, fault in FAULTS.items():
        info = await api(nc, f"$JS.API.STREAM.INFO.{name}")
        if fault.quarantined:  # moved aside whole, nothing deleted, and said so
            assert info["error"]["err_code"] == 10059, (name, info)
            (moved,) = (store / "jetstream" / "$G" / "quarantine").glob(f"{name}.*")
            assert snapshot(moved) == before.pop(name), f"{name}: quarantined as it was"
            assert re.search(rf"stream '{name}' stream metadata missing .*quarantined at ", log), name
            continue
        if fault.offline:
            err = info["error"]
            assert (err["code"], err["err_code"]) == (500, 10194), (name, err)
            assert (
                err["description"].startswith("stream is offline: ") and fault.offline in err["description"]
            )
            assert listed["offline"][name] == err["description"].removeprefix("stream is offline: ")
            assert re.search(rf"stream '{name}' is offline: .*{re.escape(fault.offline)}", log), name
            reply = await nc.request(f"{name}.m", b"x", timeout=2) if not name.startswith("META") else None
            if reply is not None:  # its subjects are known: a publish is refused, saying why
                assert json.loads(reply.data)["error"]["err_code"] == 10194
            continue
        st = info["state"]
        assert st["last_seq"] == MSGS, name
        assert ((st.get("lost") or {}).get("msgs") or []) == fault.lost, (name, st.get("lost"))
        if fault.lost:
            line = next(
                li for li in log.splitlines() if f"stream '{name}' lost {len(fault.lost)} messages" in li
            )
            assert fault.note in line and len(line) < 2000, line
        elif fault.note:
            assert re.search(rf"stream '{name}' .*{re.escape(fault.note)}", log), name
        served = await fetch_all(nc, name)
        first = st["first_seq"]
        expected = {q: payload(name, q) for q in range(first, MSGS + 1) if q not in fault.lost}
        assert served == expected, name
        # sequences go on from above every acknowledged one, and the durable consumer sees them
        ack = await js.publish(f"{name}.m", b"after")
        assert ack.seq == MSGS + 1, name
        sub = await js.pull_subscribe_bind("D", name)
        got = await sub.fetch(1, timeout=5)
        assert [m.metadata.sequence.stream for m in got] == [MSGS + 1] and got[0].data == b"after", name
        await sub.unsubscribe()

    for name, files in before.items():
        assert snapshot(stream_dir(store, name)) == files, f"{name}: an offline stream's files are untouched"
    # core messaging and a new stream work beside them
    assert (await nc.request("$JS.API.INFO", b"", timeout=5)).data
    await fill(nc, "NEW", 10)
    await nc.close()
