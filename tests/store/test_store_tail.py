"""The tail record: a deleted, emptied or cut-short newest block, or a deleted ``msgs/``, is
found on open and reported exactly; sequences never go backwards; impossible headers and an
unreadable tail record refuse to open (the stream is then taken out of service, not guessed at)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from jetpy.store import ErrCorrupt, ErrStoreIO, FileStore, StoreConfig, StoreLimits
from jetpy.store.record import BLOCK_HEADER_SIZE, BlockHeader, decode_block_header, encode_block_header
from jetpy.store.tail import TAIL_SIZE, Tail, decode_tail, read_tail

BLOCK = 1024


def cfg() -> StoreConfig:
    return StoreConfig("tail", "file", StoreLimits(), 1, BLOCK)


def build(path: Path, n: int) -> FileStore:
    s = FileStore(path, cfg())
    for i in range(1, n + 1):
        assert s.store_msg(f"t.{i % 3}", b"", f"m{i}".encode(), ts=i)[0] == i
    s.flush()
    s.sync()
    return s


def blocks(path: Path) -> list[Path]:
    return sorted((path / "msgs").glob("*.blk"))


def first_seq_of(block: Path) -> int:
    return int(block.name.split(".")[0])


def tail_of(path: Path) -> Tail:
    t = read_tail(path)
    assert isinstance(t, Tail), t
    return t


def rewrite_header(block: Path, **change: int) -> None:
    """Rewrite the block's winning header slot with new values and a valid checksum."""
    data = bytearray(block.read_bytes())
    base = first_seq_of(block)
    hdr = decode_block_header(bytes(data[:BLOCK_HEADER_SIZE]), base)
    assert hdr is not None
    new = BlockHeader(base, change.get("hwm", hdr.hwm), change.get("floor", hdr.floor), hdr.last_ts, hdr.gen)
    off, slot = encode_block_header(new)
    data[off : off + len(slot)] = slot
    block.write_bytes(bytes(data))


# ----------------------------------------------------------------------------- what it says


def test_the_record_follows_every_sync_and_only_syncs(tmp_path: Path) -> None:
    s = build(tmp_path / "s", 50)
    t = tail_of(tmp_path / "s")
    newest = blocks(tmp_path / "s")[-1]
    assert (t.hwm, t.floor, t.block, t.size) == (50, 1, first_seq_of(newest), newest.stat().st_size)
    s.remove_msg(1)
    s.store_msg("t.x", b"", b"unsynced")
    s.flush()  # in the page cache, not synced: the record does not claim it
    assert tail_of(tmp_path / "s").hwm == 50
    s.sync()
    t = tail_of(tmp_path / "s")
    assert (t.hwm, t.floor) == (51, 2)
    s.stop()
    assert (tmp_path / "s" / "tail.dat").stat().st_size == TAIL_SIZE


def test_a_torn_rewrite_leaves_the_previous_record(tmp_path: Path) -> None:
    build(tmp_path / "s", 30).stop()
    path = tmp_path / "s" / "tail.dat"
    raw = bytearray(path.read_bytes())
    newest = tail_of(tmp_path / "s")
    slot = (newest.gen % 2) * 64
    raw[slot + 10] ^= 0xFF  # the newest slot is damaged: the older one is used
    older = decode_tail(bytes(raw))
    assert isinstance(older, Tail) and older.gen == newest.gen - 1 and older.hwm <= newest.hwm
    path.write_bytes(bytes(raw))
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert (st.msgs, st.last_seq, st.lost) == (30, 30, None)
    s.stop()


# ----------------------------------------------------------------------------- a missing or short tail


@pytest.mark.parametrize("how", ["deleted", "emptied", "below_header", "to_header"])
def test_a_lost_newest_block_is_reported_and_never_reused(tmp_path: Path, how: str) -> None:
    s = build(tmp_path / "s", 300)
    while s.state().last_seq - first_seq_of(blocks(tmp_path / "s")[-1]) < 5:
        s.store_msg("t.more", b"", b"more")
    last = s.state().last_seq
    s.stop()
    newest = blocks(tmp_path / "s")[-1]
    gone = list(range(first_seq_of(newest), last + 1))
    if how == "deleted":
        newest.unlink()
    else:
        os.truncate(newest, {"emptied": 0, "below_header": 40, "to_header": BLOCK_HEADER_SIZE}[how])
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.lost is not None and st.lost.msgs == gone
    assert (st.first_seq, st.last_seq, st.msgs) == (1, last, last - len(gone))
    notes = s.recovery_notes()
    assert any(newest.name in n for n in notes), notes
    assert s.store_msg("t.new", b"", b"after")[0] == last + 1, "an acknowledged sequence is never reused"
    s.flush()
    s.sync()
    s.stop()
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.last_seq == last + 1 and (m := s.load_msg(last + 1)) is not None and m.data == b"after"
    assert st.lost is not None and st.lost.msgs == gone, "reported again, not forgotten"
    s.stop()


def test_a_deleted_msgs_directory_is_reported_and_never_reused(tmp_path: Path) -> None:
    s = build(tmp_path / "s", 120)
    s.remove_msg(1)
    s.remove_msg(2)
    s.stop()
    shutil.rmtree(tmp_path / "s" / "msgs")
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.lost is not None and st.lost.msgs == list(range(3, 121))
    assert (st.msgs, st.last_seq) == (0, 120)
    assert any("msgs/ holds no block files" in n for n in s.recovery_notes())
    assert s.store_msg("t.new", b"", b"after")[0] == 121
    s.stop()


def test_a_cut_short_sealed_block_loses_only_its_cut(tmp_path: Path) -> None:
    s = build(tmp_path / "s", 200)
    s.stop()
    sealed = blocks(tmp_path / "s")[3]
    nxt = first_seq_of(blocks(tmp_path / "s")[4])
    os.truncate(sealed, BLOCK_HEADER_SIZE + 100)  # keeps its first records
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.lost is not None and st.lost.msgs and st.lost.msgs[-1] == nxt - 1
    assert all(s.load_msg(q) is not None for q in range(1, 201) if q not in st.lost.msgs)
    assert st.last_seq == 200
    s.stop()


def test_a_missing_record_is_rebuilt_from_the_blocks_and_said(tmp_path: Path) -> None:
    build(tmp_path / "s", 40).stop()
    (tmp_path / "s" / "tail.dat").unlink()
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert (st.msgs, st.last_seq, st.lost) == (40, 40, None)
    assert any("tail.dat is missing" in n for n in s.recovery_notes())
    s.stop()
    assert tail_of(tmp_path / "s").hwm == 40
    s = FileStore(tmp_path / "s", cfg())
    assert s.recovery_notes() == []
    s.stop()


@pytest.mark.parametrize("damage", ["zeroed", "short", "garbage"])
def test_an_unreadable_record_refuses_to_open(tmp_path: Path, damage: str) -> None:
    build(tmp_path / "s", 10).stop()
    path = tmp_path / "s" / "tail.dat"
    before = {p.name: p.read_bytes() for p in blocks(tmp_path / "s")}
    path.write_bytes({"zeroed": bytes(TAIL_SIZE), "short": b"JPTL", "garbage": os.urandom(TAIL_SIZE)}[damage])
    with pytest.raises(ErrCorrupt, match=r"tail\.dat"):
        FileStore(tmp_path / "s", cfg())
    assert {p.name: p.read_bytes() for p in blocks(tmp_path / "s")} == before, "nothing is touched"
    s = FileStore(tmp_path / "t", cfg())  # the lock was released: other stores are unaffected
    s.stop()


# ----------------------------------------------------------------------------- impossible headers


@pytest.mark.parametrize("which", ["newest", "sealed"])
def test_a_header_claiming_a_billion_sequences_refuses_to_open(tmp_path: Path, which: str) -> None:
    build(tmp_path / "s", 100).stop()
    victim = blocks(tmp_path / "s")[-1 if which == "newest" else 2]
    rewrite_header(victim, hwm=10**9)
    before = victim.read_bytes()
    with pytest.raises(
        ErrCorrupt, match=re.escape(victim.name) + r" at offset (0|64): impossible header: hwm 1000000000"
    ) as exc:
        FileStore(tmp_path / "s", cfg())
    assert len(str(exc.value)) < 300
    assert victim.read_bytes() == before


def test_a_header_floor_above_the_stream_refuses_to_open(tmp_path: Path) -> None:
    build(tmp_path / "s", 100).stop()
    newest = blocks(tmp_path / "s")[-1]
    rewrite_header(newest, floor=5000)
    with pytest.raises(ErrCorrupt, match="impossible header"):
        FileStore(tmp_path / "s", cfg())


def test_a_sealed_block_without_a_valid_header_refuses_to_open(tmp_path: Path) -> None:
    build(tmp_path / "s", 100).stop()
    sealed = blocks(tmp_path / "s")[1]
    data = bytearray(sealed.read_bytes())
    data[:BLOCK_HEADER_SIZE] = bytes(BLOCK_HEADER_SIZE)
    sealed.write_bytes(bytes(data))
    with pytest.raises(ErrCorrupt, match=re.escape(f"{sealed.name} at offset 0: no valid header slot")):
        FileStore(tmp_path / "s", cfg())


def test_a_header_ahead_of_its_records_after_a_cut_short_commit_is_believed(tmp_path: Path) -> None:
    """A crash can leave the newest block's header on disk without the records it describes
    (they were never acknowledged): their sequences are reported lost and not reused."""
    s = build(tmp_path / "s", 20)
    for i in range(21, 26):
        s.store_msg("t.x", b"", b"unsynced", ts=i)
    s.flush()
    s.abandon()
    newest = blocks(tmp_path / "s")[-1]
    hdr = decode_block_header(newest.read_bytes()[:BLOCK_HEADER_SIZE], first_seq_of(newest))
    assert hdr is not None and hdr.hwm == 25
    cut = newest.stat().st_size - 3 * 38  # the last records did not reach the disk
    os.truncate(newest, cut)
    s = FileStore(tmp_path / "s", cfg())
    st = s.state()
    assert st.last_seq == 25 and st.lost is not None and st.lost.msgs == [23, 24, 25]
    assert s.store_msg("t.x", b"", b"next")[0] == 26
    s.stop()


# ----------------------------------------------------------------------------- failed writes


def test_a_failed_write_is_not_reported_lost_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = build(tmp_path / "s", 10)
    for _ in range(3):
        s.store_msg("t.x", b"", b"refused")
    with monkeypatch.context() as m:

        def nospace(*_a: object) -> int:
            raise OSError(28, "No space left on device")

        m.setattr(os, "pwrite", nospace)
        with pytest.raises(ErrStoreIO) as exc:
            s.flush()
    assert list(exc.value.lost) == [11, 12, 13]
    assert s.store_msg("t.x", b"", b"ok")[0] == 14
    s.flush()
    s.sync()
    s.abandon()
    s = FileStore(tmp_path / "s", cfg())
    st = s.state(deleted_details=True)
    assert (st.msgs, st.last_seq, st.lost, st.deleted) == (11, 14, None, [11, 12, 13])
    s.stop()
