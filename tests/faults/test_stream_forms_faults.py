"""Damage to compressed and encrypted stream files on a stopped server (frames.py, crypto.py).

The oracle reads only what the formats leave in plaintext, from their documentation: a framed
block's key headers at 0 and 64, its slot frames at 128 and 256 and its data frames from 384,
each frame's header (magic ``JPFR``, flags, logical offset and length, body length) at its
start. Which sequence a frame holds follows from the records' documented sizes (34 bytes plus
subject and payload, back to back from logical offset 128) and the messages the test wrote.

What the server must do: a data frame whose bytes changed (a flipped bit, a zeroed range) loses
exactly the messages whose records overlap its logical range, reported in ``lost``, every other
message served intact; a cut inside the newest block loses the frames past the cut; one damaged
key header copy costs nothing, two leave the stream offline with its files untouched, as a
damaged encrypted tail record (both slots), metadata or a file under another key does.
``make faults`` runs more rounds of the random cases (``JETPY_FAULT_RUNS``).
"""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import nats
import pytest

from conftest import Proc

from .stream_faults import (
    MAX_BYTES,
    api,
    blocks,
    fault_runs,
    fetch_all,
    fill,
    jetpy,
    payload,
    snapshot,
    stream_dir,
)

MSGS = 1000
KEY = "fault-suite-key-0123456789abcdef"
_FRAME = struct.Struct("<4sBxxxIIII")  # magic, flags, lpos, llen, slen, gen; then a CRC-32
FRAME_HEADER = 32 - 4
DATA_START = 384


def conf(tmp: Path, encrypted: bool) -> list[str]:
    if not encrypted:
        return []
    path = tmp / "key.conf"
    path.write_text(f'jetstream {{ key: "{KEY}" }}\n')
    return ["-c", str(path)]


def frames(raw: bytes) -> list[tuple[int, int, int, int]]:
    """``(file offset, size, logical offset, logical length)`` of every data frame."""
    out = []
    pos = DATA_START
    while pos + FRAME_HEADER <= len(raw):
        magic, _flags, lpos, llen, slen, _gen = _FRAME.unpack_from(raw, pos)
        assert magic == b"JPFR", pos
        out.append((pos, FRAME_HEADER + slen, lpos, llen))
        pos += FRAME_HEADER + slen
    return out


def record_spans(name: str, base: int, end: int) -> dict[int, tuple[int, int]]:
    """seq -> (logical offset, length) of the records of seqs ``base..end-1`` in their block."""
    out = {}
    at = 128
    for seq in range(base, end):
        n = 34 + len(f"{name}.m") + len(payload(name, seq))
        out[seq] = (at, n)
        at += n
    return out


def held(name: str, path: Path, nxt: int, changed_frames: list[tuple[int, int, int, int]]) -> set[int]:
    """The sequences whose records overlap the logical ranges of ``changed_frames`` in block
    ``path`` (holding ``int(path.stem)`` .. ``nxt - 1``)."""
    spans = record_spans(name, int(path.stem), nxt)
    return {
        seq
        for seq, (a, n) in spans.items()
        for _pos, _size, lpos, llen in changed_frames
        if a < lpos + llen and lpos < a + n
    }


async def make_store(tmp: Path, procs: list[Proc], encrypted: bool, compressed: bool) -> Path:
    """A stopped store holding stream FR: ``MSGS`` acknowledged messages in 32 KB blocks, sealed
    ones compressed (``compressed``), every file encrypted (``encrypted``)."""
    store = tmp / "pristine"
    p = jetpy(store, tmp / "fill.log", *conf(tmp, encrypted))
    procs.append(p)
    nc = await nats.connect(p.url)
    cfg = {"compression": "s2"} if compressed else {}
    await fill(nc, "FR", MSGS, max_bytes=MAX_BYTES, **cfg)
    await nc.close()
    p.stop()  # a stop puts the compressed copies being made in place
    p = jetpy(store, tmp / "settle.log", *conf(tmp, encrypted))  # and the next open the rest
    procs.append(p)
    p.stop()
    sdir = stream_dir(store, "FR")
    for b in blocks(sdir)[:-1] if compressed else blocks(sdir):
        if compressed or encrypted:
            assert b.read_bytes()[:4] == b"JPBF", b
    return store


async def served_exactly(q: Proc, lost: set[int], what: str) -> None:
    nc = await nats.connect(q.url)
    info = await api(nc, "$JS.API.STREAM.INFO.FR")
    assert "error" not in info, (what, info)
    st = info["state"]
    assert sorted(lost) == ((st.get("lost") or {}).get("msgs") or []), (what, st.get("lost"))
    assert st["last_seq"] == MSGS, what
    served = await fetch_all(nc, "FR")
    assert served == {s: payload("FR", s) for s in range(1, MSGS + 1) if s not in lost}, what
    await nc.close()


async def offline_untouched(q: Proc, sdir: Path, files: dict[str, str], what: str) -> None:
    nc = await nats.connect(q.url)
    info = await api(nc, "$JS.API.STREAM.INFO.FR")
    assert info.get("error", {}).get("err_code") == 10194, (what, info)
    await nc.close()
    assert snapshot(sdir) == files, f"{what}: an offline stream's files are untouched"


FORMS = [(True, False), (False, True), (True, True)]
IDS = ["encrypted", "compressed", "both"]


@pytest.mark.parametrize(("encrypted", "compressed"), FORMS, ids=IDS)
async def test_damaged_frames_lose_exactly_their_messages(
    tmp_path: Path, procs: list[Proc], encrypted: bool, compressed: bool
) -> None:
    pristine = await make_store(tmp_path, procs, encrypted, compressed)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for run in range(fault_runs(3)):
        store = tmp_path / f"run{run}"
        shutil.copytree(pristine, store)
        sdir = stream_dir(store, "FR")
        bl = blocks(sdir)
        k = rng.randrange(len(bl) - 1 if compressed else len(bl))  # a framed block
        path = bl[k]
        nxt = int(bl[k + 1].stem) if k + 1 < len(bl) else MSGS + 1
        raw = bytearray(path.read_bytes())
        fr = frames(bytes(raw))
        target = rng.choice(fr)
        at = rng.randrange(target[0], target[0] + target[1])
        how = rng.choice(["flip", "zero"])
        if how == "flip":
            raw[at] ^= 1 << rng.randrange(8)
        else:
            n = rng.randint(1, 64)
            raw[at : at + n] = bytes(len(raw[at : at + n]))
        path.write_bytes(bytes(raw))
        hit = [f for f in fr if f[0] < at + (1 if how == "flip" else n) and at < f[0] + f[1]]
        what = f"seed {seed} run {run}: {how} at {at} of {path.name}"
        q = jetpy(store, tmp_path / f"run{run}.log", *conf(tmp_path, encrypted))
        procs.append(q)
        await served_exactly(q, held("FR", path, nxt, hit), what)
        q.stop()
        shutil.rmtree(store)


@pytest.mark.parametrize(("encrypted", "compressed"), FORMS, ids=IDS)
async def test_targeted_faults_in_framed_files(
    tmp_path: Path, procs: list[Proc], encrypted: bool, compressed: bool
) -> None:
    pristine = await make_store(tmp_path, procs, encrypted, compressed)
    framed = 0 if compressed else -1  # a compressed sealed block, or the encrypted newest one

    def case(name: str) -> tuple[Path, Path, list[Path]]:
        store = tmp_path / name
        shutil.copytree(pristine, store)
        sdir = stream_dir(store, "FR")
        return store, sdir, blocks(sdir)

    # one key header copy damaged: nothing lost
    store, sdir, bl = case("one_copy")
    raw = bytearray(bl[framed].read_bytes())
    raw[40] ^= 0xFF
    bl[framed].write_bytes(bytes(raw))
    q = jetpy(store, tmp_path / "one_copy.log", *conf(tmp_path, encrypted))
    procs.append(q)
    await served_exactly(q, set(), "one key header copy")
    q.stop()

    # both copies damaged: offline, untouched
    store, sdir, bl = case("both_copies")
    raw = bytearray(bl[framed].read_bytes())
    raw[40] ^= 0xFF
    raw[64 + 40] ^= 0xFF
    bl[framed].write_bytes(bytes(raw))
    files = snapshot(sdir)
    q = jetpy(store, tmp_path / "both_copies.log", *conf(tmp_path, encrypted))
    procs.append(q)
    await offline_untouched(q, sdir, files, "both key header copies")
    q.stop()

    if encrypted:
        # the newest block cut inside its frames: the frames past the cut are lost
        store, sdir, bl = case("cut")
        newest = bl[-1].read_bytes()
        fr = frames(newest)
        cut_at = fr[len(fr) // 2][0] + 10
        bl[-1].write_bytes(newest[:cut_at])
        gone = [f for f in fr if f[0] + f[1] > cut_at]
        q = jetpy(store, tmp_path / "cut.log", *conf(tmp_path, encrypted))
        procs.append(q)
        await served_exactly(q, held("FR", bl[-1], MSGS + 1, gone), "cut newest block")
        q.stop()

        # both slots of the encrypted tail record damaged, or the metadata: offline, untouched
        for name, where in (("tail", [128 + 30, 256 + 30]), ("meta", [100])):
            store, sdir, bl = case(name)
            target = sdir / ("tail.dat" if name == "tail" else "meta.dat")
            raw = bytearray(target.read_bytes())
            for at in where:
                raw[at] ^= 0x01
            target.write_bytes(bytes(raw))
            files = snapshot(sdir)
            q = jetpy(store, tmp_path / f"{name}.log", *conf(tmp_path, encrypted))
            procs.append(q)
            await offline_untouched(q, sdir, files, name)
            q.stop()

        # one slot of the tail record damaged: the other serves
        store, sdir, bl = case("tail_one")
        raw = bytearray((sdir / "tail.dat").read_bytes())
        raw[128 + 30] ^= 0x01
        (sdir / "tail.dat").write_bytes(bytes(raw))
        q = jetpy(store, tmp_path / "tail_one.log", *conf(tmp_path, encrypted))
        procs.append(q)
        await served_exactly(q, set(), "one tail slot")
        q.stop()
