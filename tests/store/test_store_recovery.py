"""FileStore recovery: restart, torn tails, bit rot, missing blocks, stray files, erase on disk."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from jetpy.store import ConsumerState, ErrCorrupt, ErrStoreLocked, FileStore, StoreConfig, StoreLimits
from jetpy.store.filestore import block_size_for
from jetpy.store.record import BLOCK_HEADER_SIZE, FLAG_TOMBSTONE, validate_record

SMALL_BLOCKS = 1024


def cfg(block_size: int = SMALL_BLOCKS, limits: StoreLimits | None = None) -> StoreConfig:
    return StoreConfig("rec", "file", limits or StoreLimits(), 1, block_size)


def payload(seq: int) -> bytes:
    return f"payload-{seq:05d}".encode()


def build(path: Path, n: int, block_size: int = SMALL_BLOCKS, subjects: int = 3) -> None:
    s = FileStore(path, cfg(block_size))
    for i in range(1, n + 1):
        assert s.store_msg(f"sub.{i % subjects}", b"hdr", payload(i), ts=i)[0] == i
    s.flush()
    s.sync()
    s.stop()


def blocks(path: Path) -> list[Path]:
    return sorted((path / "msgs").glob("*.blk"))


def records(block: Path) -> list[tuple[int, int, int, int]]:
    """(offset, rec_len, flags, seq) of every valid record in a block file."""
    data = block.read_bytes()
    out = []
    pos = BLOCK_HEADER_SIZE
    while pos < len(data):
        v = validate_record(data, pos, len(data))
        assert v is not None, f"unexpected corruption at {pos}"
        out.append((pos, v[0], v[1], v[2]))
        pos += v[0]
    return out


def check_readable(s: FileStore, seqs: range | list[int], lost: set[int]) -> None:
    for seq in seqs:
        m = s.load_msg(seq)
        if seq in lost:
            assert m is None, seq
        else:
            assert m is not None and m.data == payload(seq) and m.ts == seq, seq


# ----------------------------------------------------------------------------- restart


def test_restart_preserves_state_deletes_and_last_seq(tmp_path: Path) -> None:
    build(tmp_path / "s", 80)
    s = FileStore(tmp_path / "s", cfg())
    for seq in (1, 2, 10, 11, 40, 80):
        s.remove_msg(seq)
    s.purge("sub.1", seq=30)
    before = s.state(deleted_details=True)
    s.stop()
    s = FileStore(tmp_path / "s", cfg())
    assert s.state(deleted_details=True) == before
    assert s.state().last_seq == 80 and s.state().last_ts == 80
    assert s.store_msg("x", b"", b"next")[0] == 81
    s.stop()


@pytest.mark.parametrize("how", ["purge", "compact_past_end", "remove_all"])
def test_empty_store_never_reuses_sequences(tmp_path: Path, how: str) -> None:
    build(tmp_path / "s", 50)
    s = FileStore(tmp_path / "s", cfg())
    if how == "purge":
        s.purge()
        expect_next = 51
    elif how == "compact_past_end":
        s.compact(1000)
        expect_next = 1000
    else:
        for seq in range(50, 0, -1):
            s.remove_msg(seq)
        expect_next = 51
    s.stop()
    assert len(blocks(tmp_path / "s")) == 1, "dead blocks are unlinked after sync"
    for _ in range(3):
        s = FileStore(tmp_path / "s", cfg())
        st = s.state()
        assert (st.msgs, st.first_seq, st.last_seq, st.lost) == (0, expect_next, expect_next - 1, None)
        s.stop()
    s = FileStore(tmp_path / "s", cfg())
    assert s.store_msg("x", b"", b"y")[0] == expect_next
    s.stop()


def test_middle_block_removal_survives_restart(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "s", cfg())
    for i in range(1, 101):
        s.store_msg("keep" if i <= 20 or i > 80 else "gone", b"", payload(i), ts=i)
    s.flush()
    doomed = [b for b in blocks(tmp_path / "s") if all(21 <= r[3] <= 80 for r in records(b)) and records(b)]
    assert doomed
    s.purge("gone")
    s.flush()
    s.sync()
    assert not any(b.exists() for b in doomed), "blocks holding only purged messages are deleted"
    before = s.state(deleted_details=True)
    s.stop()
    s = FileStore(tmp_path / "s", cfg())
    assert s.state(deleted_details=True) == before and before.lost is None
    assert before.deleted == list(range(21, 81))
    s.stop()


def test_tombstones_carried_when_their_block_is_deleted(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "s", cfg())
    for i in range(1, 21):  # block A: "keep" first, then "x"
        s.store_msg("keep" if i == 1 else "x", b"", payload(i), ts=i)
    for i in range(21, 41):  # the tombstones for the x's land in these blocks
        s.store_msg("y", b"", payload(i), ts=i)
    s.purge("x")
    for i in range(41, 81):
        s.store_msg("z", b"", payload(i), ts=i)
    s.purge("y")  # the blocks holding x's tombstones die and are unlinked
    s.flush()
    s.sync()
    before = s.state(deleted_details=True)
    s.stop()
    s = FileStore(tmp_path / "s", cfg())
    after = s.state(deleted_details=True)
    assert after == before and after.lost is None
    assert s.subjects_state(">") == {"keep": 1, "z": 40}
    s.stop()


def test_limits_applied_on_open(tmp_path: Path) -> None:
    build(tmp_path / "s", 30)
    s = FileStore(tmp_path / "s", cfg(limits=StoreLimits(max_msgs=10)))
    assert s.state().msgs == 10 and s.state().first_seq == 21
    s.stop()


def test_stray_files_are_ignored(tmp_path: Path) -> None:
    build(tmp_path / "s", 30)
    (tmp_path / "s" / "msgs" / "10.blk.random").write_bytes(b"junk")
    (tmp_path / "s" / "msgs" / "00000000000000000005.blk.tmp").write_bytes(b"junk")
    (tmp_path / "s" / "msgs" / "notes.txt").write_bytes(b"junk")
    s = FileStore(tmp_path / "s", cfg())
    assert s.state().msgs == 30 and s.state().lost is None
    s.stop()
    assert (tmp_path / "s" / "msgs" / "10.blk.random").exists(), "never delete what we do not own"


# ----------------------------------------------------------------------------- torn tails


def test_truncate_last_record_at_every_offset(tmp_path: Path) -> None:
    src = tmp_path / "src"
    build(src, 40)
    last_block = blocks(src)[-1]
    off, rec_len, _flags, seq = records(last_block)[-1]
    assert seq == 40
    for cut in range(off, off + rec_len):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(src, d)
        os.truncate(d / "msgs" / last_block.name, cut)
        s = FileStore(d, cfg())
        st = s.state()
        assert (st.msgs, st.first_seq, st.last_seq) == (39, 1, 40), cut
        assert st.lost is not None and st.lost.msgs == [40], cut
        check_readable(s, range(1, 40), set())
        assert s.load_msg(40) is None
        assert s.store_msg("after", b"", b"x")[0] == 41, "an acknowledged sequence is never reused"
        s.stop()
        s = FileStore(d, cfg())
        assert s.state().last_seq == 41 and s.load_msg(41) is not None
        s.stop()
        shutil.rmtree(d)


def test_torn_tail_of_unsynced_records(tmp_path: Path) -> None:
    """A crash after flush but before sync: whatever reached the file is kept, the rest is gone."""
    s = FileStore(tmp_path / "s", cfg())
    for i in range(1, 11):
        s.store_msg("a", b"", payload(i), ts=i)
    s.flush()
    s.sync()
    for i in range(11, 16):
        s.store_msg("a", b"", payload(i), ts=i)
    s.flush()
    s.abandon()
    last_block = blocks(tmp_path / "s")[-1]
    off, _rec_len, _f, seq = records(last_block)[-1]
    assert seq == 15
    os.truncate(last_block, off + 5)
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.msgs == 14 and st.last_seq == 15 and st.lost is not None and st.lost.msgs == [15]
    s.stop()


def test_garbage_tail(tmp_path: Path) -> None:
    build(tmp_path / "s", 40)
    last_block = blocks(tmp_path / "s")[-1]
    recs = records(last_block)
    size = last_block.stat().st_size
    rng = random.Random(7)
    with open(last_block, "r+b") as f:
        f.seek(size - 100)
        f.write(bytes(rng.randrange(256) for _ in range(100)))
    damaged = {seq for off, rl, _fl, seq in recs if off + rl > size - 100}
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.lost is not None and set(st.lost.msgs) == damaged
    check_readable(s, range(1, 41), damaged)
    assert s.store_msg("a", b"", b"x")[0] == 41
    s.stop()


def test_short_last_block_header(tmp_path: Path) -> None:
    build(tmp_path / "s", 20)
    s = FileStore(tmp_path / "s", cfg())
    s.compact(100)  # rolls to a fresh block 100
    s.stop()
    last_block = blocks(tmp_path / "s")[-1]
    assert last_block.name == f"{100:020d}.blk"
    os.truncate(last_block, 40)  # torn block header
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.lost) == (0, 100, 99, None)
    assert s.store_msg("a", b"", b"x")[0] == 100
    s.stop()
    s = FileStore(tmp_path / "s", cfg())  # the append went after a rewritten header, not over it
    st = s.state()
    assert (st.msgs, st.last_seq, st.lost) == (1, 100, None)
    assert (m := s.load_msg(100)) is not None and m.data == b"x"
    s.stop()


# ----------------------------------------------------------------------------- bit rot


@pytest.mark.parametrize("field", ["magic", "rec_len", "seq", "ts", "subject", "payload", "crc"])
def test_bit_flip_in_sealed_block(tmp_path: Path, field: str) -> None:
    build(tmp_path / "s", 60)
    sealed = blocks(tmp_path / "s")[1]
    msgs = [r for r in records(sealed) if not r[2] & FLAG_TOMBSTONE]
    off, rec_len, _flags, victim = msgs[len(msgs) // 2]
    where = {
        "magic": 0,
        "rec_len": 5,
        "seq": 8,
        "ts": 17,
        "subject": 31,
        "payload": rec_len - 8,
        "crc": rec_len - 2,
    }[field]
    with open(sealed, "r+b") as f:
        f.seek(off + where)
        b = f.read(1)[0]
        f.seek(off + where)
        f.write(bytes([b ^ 0x10]))
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.lost is not None and st.lost.msgs == [victim] and st.lost.bytes >= rec_len
    assert st.msgs == 59 and (st.first_seq, st.last_seq) == (1, 60)
    check_readable(s, range(1, 61), {victim})
    s.stop()
    s = FileStore(tmp_path / "s", cfg())  # reported again, not silently forgotten
    lost = s.state().lost
    assert lost is not None and lost.msgs == [victim]
    s.stop()


def test_several_flips_across_blocks(tmp_path: Path) -> None:
    build(tmp_path / "s", 120)
    rng = random.Random(3)
    victims = set()
    for block in blocks(tmp_path / "s")[:-1]:
        recs = [r for r in records(block) if not r[2] & FLAG_TOMBSTONE]
        off, rec_len, _f, seq = rng.choice(recs)
        data = bytearray(block.read_bytes())
        data[off + rng.randrange(rec_len)] ^= 1 << rng.randrange(8)
        block.write_bytes(bytes(data))
        victims.add(seq)
    s = FileStore(tmp_path / "s", cfg())
    lost = s.state().lost
    assert lost is not None and set(lost.msgs) == victims
    check_readable(s, range(1, 121), victims)
    s.stop()


def test_corruption_after_open_is_detected_on_read(tmp_path: Path) -> None:
    build(tmp_path / "s", 30)
    s = FileStore(tmp_path / "s", cfg())
    block = blocks(tmp_path / "s")[0]
    off, rec_len, _f, seq = records(block)[2]
    data = bytearray(block.read_bytes())
    data[off + rec_len - 6] ^= 0xFF
    block.write_bytes(bytes(data))
    with pytest.raises(ErrCorrupt) as exc:
        s.load_msg(seq)
    assert exc.value.seqs == [seq]
    s.stop()


def test_header_slot_corruption_uses_the_other_slot(tmp_path: Path) -> None:
    build(tmp_path / "s", 10, block_size=1 << 20)
    s = FileStore(tmp_path / "s", cfg(1 << 20))
    s.remove_msg(1)
    s.remove_msg(2)
    s.stop()
    block = blocks(tmp_path / "s")[0]
    data = bytearray(block.read_bytes())
    data[10] ^= 0xFF  # slot A
    block.write_bytes(bytes(data))
    s = FileStore(tmp_path / "s", cfg(1 << 20))
    st = s.state()
    assert st.last_seq == 10 and st.lost is None and st.msgs in (8, 10)
    s.stop()


# ----------------------------------------------------------------------------- missing blocks


def test_missing_middle_block(tmp_path: Path) -> None:
    build(tmp_path / "s", 90)
    victim = blocks(tmp_path / "s")[2]
    seqs = [r[3] for r in records(victim) if not r[2] & FLAG_TOMBSTONE]
    victim.unlink()
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.lost is not None and st.lost.msgs == seqs
    assert (st.first_seq, st.last_seq, st.msgs) == (1, 90, 90 - len(seqs))
    check_readable(s, range(1, 91), set(seqs))
    assert s.store_msg("a", b"", b"x")[0] == 91
    s.stop()


def test_missing_first_block_is_reported(tmp_path: Path) -> None:
    build(tmp_path / "s", 90)
    victim = blocks(tmp_path / "s")[0]
    seqs = [r[3] for r in records(victim) if not r[2] & FLAG_TOMBSTONE]
    victim.unlink()
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.lost is not None and st.lost.msgs == seqs
    assert st.first_seq == seqs[-1] + 1 and st.last_seq == 90
    s.stop()


# ----------------------------------------------------------------------------- secure erase


def test_erase_overwrites_bytes_on_disk(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "s", cfg(1 << 20))
    s.store_msg("a", b"", b"public", ts=1)
    s.store_msg("secret.subject", b"H: TOP-SECRET-HDR", b"TOP-SECRET-PAYLOAD", ts=2)
    s.store_msg("a", b"", b"public", ts=3)
    s.flush()
    s.sync()
    s.store_msg("secret.subject", b"", b"UNFLUSHED-SECRET", ts=4)
    assert s.erase_msg(2) and s.erase_msg(4)
    s.stop()
    raw = b"".join(b.read_bytes() for b in blocks(tmp_path / "s"))
    for needle in (b"TOP-SECRET", b"UNFLUSHED-SECRET", b"secret.subject"):
        assert needle not in raw
    s = FileStore(tmp_path / "s", cfg(1 << 20))
    st = s.state(deleted_details=True)
    assert (st.msgs, st.deleted, st.lost) == (2, [2, 4], None)
    s.stop()


# ----------------------------------------------------------------------------- small files


def test_directory_is_locked_while_open(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "s", cfg())
    with pytest.raises(ErrStoreLocked):
        FileStore(tmp_path / "s", cfg())
    s.stop()
    s = FileStore(tmp_path / "s", cfg())
    s.store_msg("a", b"", b"x")
    s.flush()
    s.abandon()  # a crash releases the lock too
    s = FileStore(tmp_path / "s", cfg())
    assert s.state().msgs == 1
    s.stop()


def test_corrupt_meta_and_consumer_state_are_detected_not_deleted(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "s", cfg())
    s.write_meta(b'{"name":"s"}')
    cs = s.consumer_store("c1")
    cs.update(ConsumerState(delivered_stream_seq=5))
    s.stop()
    meta = tmp_path / "s" / "meta.dat"
    odat = tmp_path / "s" / "obs" / "c1" / "o.dat"
    for path in (meta, odat):
        data = bytearray(path.read_bytes())
        data[-1] ^= 0x01
        path.write_bytes(bytes(data))
    s = FileStore(tmp_path / "s", cfg())
    with pytest.raises(ErrCorrupt):
        s.read_meta()
    with pytest.raises(ErrCorrupt):
        s.consumer_store("c1").load()
    assert meta.exists() and odat.exists()
    os.truncate(meta, 7)
    with pytest.raises(ErrCorrupt):
        s.read_meta()
    s.stop()


def test_leftover_tmp_files_do_not_matter(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "s", cfg())
    s.write_meta(b"v1")
    s.stop()
    (tmp_path / "s" / "meta.dat.tmp").write_bytes(b"half-written")
    s = FileStore(tmp_path / "s", cfg())
    assert s.read_meta() == b"v1"
    s.write_meta(b"v2")
    assert s.read_meta() == b"v2"
    s.stop()


def test_many_blocks_use_a_bounded_number_of_descriptors(tmp_path: Path) -> None:
    build(tmp_path / "s", 3000)  # ~180 blocks of 1 KiB
    assert len(blocks(tmp_path / "s")) > 150
    s = FileStore(tmp_path / "s", cfg())
    before = len(os.listdir("/proc/self/fd"))
    check_readable(s, range(1, 3001), set())
    check_readable(s, range(3000, 0, -7), set())
    opened = len(os.listdir("/proc/self/fd")) - before
    assert opened <= 70, opened
    s.stop()


def test_first_seq_survives_reopen_of_empty_store(tmp_path: Path) -> None:
    c = StoreConfig("rec", "file", StoreLimits(), 500, SMALL_BLOCKS)
    FileStore(tmp_path / "s", c).stop()
    s = FileStore(tmp_path / "s", StoreConfig("rec", "file", StoreLimits(), 1, SMALL_BLOCKS))
    st = s.state()
    assert (st.first_seq, st.last_seq, st.lost) == (500, 499, None)
    assert s.store_msg("a", b"", b"x")[0] == 500
    s.stop()


def test_bulk_read_stops_at_rot_found_after_open(tmp_path: Path) -> None:
    """A record that rots while the store is open: the consumers' bulk read returns the good
    records before it, and reading from it reports the corruption instead of returning it."""
    build(tmp_path / "s", 60)
    s = FileStore(tmp_path / "s", cfg())
    sealed = blocks(tmp_path / "s")[1]
    msgs = [r for r in records(sealed) if not r[2] & FLAG_TOMBSTONE]
    off, rec_len, _flags, victim = msgs[len(msgs) // 2]
    with open(sealed, "r+b") as f:
        f.seek(off + rec_len - 8)  # a payload byte
        b = f.read(1)[0]
        f.seek(off + rec_len - 8)
        f.write(bytes([b ^ 0x10]))
    got: list[int] = []
    start = 1
    while True:
        batch = s.load_next_batch("", start, 1000)
        if not batch or batch[-1].seq >= victim - 1:
            got += [m.seq for m in batch]
            break
        got += [m.seq for m in batch]
        start = batch[-1].seq + 1
    assert got == list(range(1, victim)) and all(
        m.data == payload(m.seq) for m in s.load_next_batch("", 1, 5)
    )
    with pytest.raises(ErrCorrupt):
        s.load_next_batch("", victim, 10)
    after = s.load_next_batch("", victim + 1, 1000)
    assert [m.seq for m in after] == list(range(victim + 1, 61))
    s.stop()


# ----------------------------------------------------------------------------- block size


def test_block_size_follows_max_bytes_as_in_nats_server(tmp_path: Path) -> None:
    assert [block_size_for(n) for n in (-1, 0, 100_000, 127_000, 1_000_000, 64 << 20)] == [
        8 << 20,
        8 << 20,
        32_000,
        32_000,
        4 << 20,
        8 << 20,
    ]
    s = FileStore(tmp_path / "s", StoreConfig("b", "file", StoreLimits(max_bytes=100_000)))
    for i in range(900):
        s.store_msg("b", b"", bytes(70), ts=i)
    s.stop()
    sizes = [p.stat().st_size for p in blocks(tmp_path / "s")]
    assert len(sizes) >= 3 and max(sizes) <= 32_000 + 200
