"""Random damage to a stopped stream's files, round after round: a bit flipped, a range zeroed
or a file cut at a random place in a random block, the metadata or the tail record. An oracle
written from the documented byte layouts (not from the store's code) says what must follow, and
the restarted server must say exactly that:

* a record whose bytes changed, or that was cut, is lost: the stream reports exactly those
  sequences in ``lost`` and serves every other message intact;
* a header or tail record slot whose bytes changed is not used; if the other slot is valid
  nothing is lost; if no slot of a block header (of a block the tail record vouches for) or of
  the tail record is valid, the stream is offline (10194), its files untouched;
* a metadata file whose bytes changed, or that was cut, leaves the stream offline.

``make faults`` runs more rounds (``JETPY_FAULT_RUNS``); a failure prints its seed."""

from __future__ import annotations

import random
import shutil
import struct
import zlib
from pathlib import Path

import nats

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
    records,
    snapshot,
    stream_dir,
)

MSGS = 1000
SLOT = 64


def _slot_valid(data: bytes, off: int, covered: int) -> bool:
    """A 64-byte header or tail slot at ``off`` whose first ``covered`` bytes are checked by
    the CRC-32 that follows them."""
    if len(data) < off + covered + 4:
        return False
    stored: int = struct.unpack_from("<I", data, off + covered)[0]
    return zlib.crc32(data[off : off + covered]) == stored


def expected(sdir: Path, path: Path, before: bytes, after: bytes) -> tuple[str, set[int]]:
    """``("offline", why)``-style outcome: ("offline", {}) or ("served", lost sequences)."""
    changed = {i for i in range(max(len(before), len(after))) if before[i : i + 1] != after[i : i + 1]}
    if not changed:
        return "served", set()
    if path.name == "meta.dat":
        return "offline", set()
    if path.name == "tail.dat":
        valid = len(after) == 128 and any(_slot_valid(after, off, 56) for off in (0, SLOT))
        return ("served" if valid else "offline"), set()
    # a block: which message records lost bytes, and whether a header slot still stands
    msgs = [r for r in records(path, before) if r.flags == 0]
    if len(after) < 128:
        return "served", {r.seq for r in msgs}
    if any(i < 128 for i in changed) and not any(_slot_valid(after, off, 48) for off in (0, SLOT)):
        return "offline", set()
    return "served", {r.seq for r in msgs if any(r.offset <= i < r.offset + r.length for i in changed)}


def damage(rng: random.Random, sdir: Path) -> tuple[Path, bytes, str]:
    """Damage one of the stream's files at random; returns it, its bytes before, and how."""
    files = [*blocks(sdir), sdir / "meta.dat", sdir / "tail.dat"]
    path = rng.choice(files)
    before = path.read_bytes()
    data = bytearray(before)
    how = rng.choice(["flip", "zero", "cut"])
    at = rng.randrange(len(data))
    if how == "flip":
        data[at] ^= 1 << rng.randrange(8)
    elif how == "zero":
        n = rng.randint(1, 512)
        data[at : at + n] = bytes(len(data[at : at + n]))
    else:
        del data[at:]
    path.write_bytes(bytes(data))
    return path, before, f"{how} at {at} of {path.name}"


async def test_random_damage_is_served_exactly_or_offline(tmp_path: Path, procs: list[Proc]) -> None:
    pristine = tmp_path / "pristine"
    p = jetpy(pristine, tmp_path / "fill.log")
    procs.append(p)
    nc = await nats.connect(p.url)
    await fill(nc, "RND", MSGS, max_bytes=MAX_BYTES)
    await nc.close()
    p.stop()
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for run in range(fault_runs(4)):
        store = tmp_path / f"run{run}"
        shutil.copytree(pristine, store)
        sdir = stream_dir(store, "RND")
        path, before, how = damage(rng, sdir)
        outcome, lost = expected(sdir, path, before, path.read_bytes())
        what = f"seed {seed} run {run}: {how}"
        files = snapshot(sdir)
        q = jetpy(store, tmp_path / f"run{run}.log")
        procs.append(q)
        nc = await nats.connect(q.url)
        info = await api(nc, "$JS.API.STREAM.INFO.RND")
        if outcome == "offline":
            assert info.get("error", {}).get("err_code") == 10194, (what, info)
            assert snapshot(sdir) == files, f"{what}: an offline stream's files are untouched"
        else:
            assert "error" not in info, (what, info)
            st = info["state"]
            assert sorted(lost) == ((st.get("lost") or {}).get("msgs") or []), (what, st.get("lost"))
            assert st["last_seq"] == MSGS, what
            served = await fetch_all(nc, "RND")
            assert served == {q: payload("RND", q) for q in range(1, MSGS + 1) if q not in lost}, what
        await nc.close()
        q.stop()
        shutil.rmtree(store)
