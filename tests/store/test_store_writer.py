"""GroupCommit on its own: the write buffer reaching the file and the disk, block headers,
tombstones, rolling and retiring blocks, rollback after a failed write or sync, descriptors."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetpy.store import ErrStoreIO
from jetpy.store import writer as writer_mod
from jetpy.store.index import StoreIndex
from jetpy.store.record import (
    BLOCK_HEADER_SIZE,
    FLAG_RANGE,
    FLAG_TOMBSTONE,
    RECORD_OVERHEAD,
    BlockHeader,
    append_record,
    decode_block_header,
    validate_record,
)
from jetpy.store.recovery import Recovered
from jetpy.store.segment import Block, SubjectInfo
from jetpy.store.writer import GroupCommit


class Fixture:
    def __init__(self, msgdir: Path) -> None:
        msgdir.mkdir()
        self.msgdir = msgdir
        first = Block.create(msgdir, BlockHeader(1, 0, 1, 0, 1))
        self.info = SubjectInfo("s", b"s", 0, 1)
        self.ix = StoreIndex(
            Recovered(
                blocks=[first],
                subjects={"s": self.info},
                by_sid=[self.info],
                last_seq=0,
                last_ts=0,
                floor=1,
                first_seq=1,
                msgs=0,
                bytes=0,
            )
        )
        self.forgotten: list[Block | None] = []
        self.w = GroupCommit(self.ix, msgdir, self.forgotten.append)

    def append(self, n: int = 1) -> None:
        """What ``FileStore.store_msg`` does for a message, minus limits."""
        ix = self.ix
        for _ in range(n):
            seq = ix.last_seq + 1
            blk = ix.active
            acct = append_record(self.w.wbuf, seq, seq, b"s", b"", b"data", 1, 0, RECORD_OVERHEAD + 1 + 4)
            blk.offs.append(blk.size)
            blk.lens.append(acct)
            blk.sids.append(0)
            blk.size += RECORD_OVERHEAD + 5
            blk.live += 1
            self.info.count += 1
            self.info.last = seq
            ix.msgs += 1
            ix.bytes += acct
            ix.last_seq = ix.last_ts = seq

    def records(self, blk: Block) -> list[tuple[int, int]]:
        """(flags, seq) of every record in the block's file."""
        data = blk.path.read_bytes()
        out = []
        pos = BLOCK_HEADER_SIZE
        while pos < len(data):
            v = validate_record(data, pos, len(data))
            assert v is not None
            out.append((v[1], v[2]))
            pos += v[0]
        return out


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    f = Fixture(tmp_path / "msgs")
    yield f
    f.w.close()


def test_flush_writes_records_and_the_header_then_sync_makes_them_durable(fx: Fixture) -> None:
    fx.append(5)
    blk = fx.ix.active
    assert blk.flushed == BLOCK_HEADER_SIZE and len(fx.w.wbuf) == blk.size - BLOCK_HEADER_SIZE
    assert fx.w.flush() == 5 and not fx.w.wbuf and blk.flushed == blk.size
    assert [seq for _f, seq in fx.records(blk)] == [1, 2, 3, 4, 5]
    hdr = decode_block_header(blk.path.read_bytes()[:BLOCK_HEADER_SIZE], 1)
    assert hdr is not None and (hdr.hwm, hdr.floor, hdr.last_ts, hdr.gen) == (5, 1, 5, 2)
    assert blk.durable < blk.size
    fx.w.sync()
    assert blk.durable == blk.size and fx.w.durable_seq == 5
    fx.w.flush()  # nothing changed: no new header generation
    assert blk.hdr_gen == 2


def test_tombstones_go_through_the_buffer(fx: Fixture) -> None:
    fx.append(3)
    fx.w.tombstone(2)
    fx.w.range_tombstone(10, 20)
    fx.w.flush()
    assert fx.records(fx.ix.active)[3:] == [(FLAG_TOMBSTONE, 2), (FLAG_TOMBSTONE | FLAG_RANGE, 10)]
    assert fx.ix.active.tombs == 2


def test_roll_and_retire(fx: Fixture) -> None:
    fx.append(2)
    old = fx.w.roll(3, 2)
    new = fx.ix.active
    assert old is not new and new.base == 3 and fx.ix.bases == [1, 3] and not fx.w.roll_pending
    assert [seq for _f, seq in fx.records(old)] == [1, 2], "the buffer went to the sealed block"
    fx.ix.forget_block(0)
    fx.w.retire(old)
    assert old.fd == -1 and fx.forgotten == [old]
    fx.w.flush()
    assert old.path.exists(), "unlinked only once a sync covers what replaced it"
    fx.w.sync()
    assert not old.path.exists()


def test_overwrite_in_the_buffer_and_in_the_file(fx: Fixture) -> None:
    fx.append(2)
    blk = fx.ix.active
    fx.w.overwrite(blk, blk.offs[1], b"X")
    assert fx.w.wbuf[blk.offs[1] - BLOCK_HEADER_SIZE] == ord("X") and fx.forgotten == []
    fx.w.flush()
    fx.w.overwrite(blk, blk.offs[0], b"Y")
    assert blk.path.read_bytes()[blk.offs[0]] == ord("Y") and fx.forgotten == [None]


def failing(code: int) -> Any:
    def _fail(*_a: Any, **_k: Any) -> Any:
        raise OSError(code, os.strerror(code))

    return _fail


def test_a_failed_write_rolls_back_to_what_is_durable(fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    fx.append(4)
    fx.w.flush()
    fx.w.sync()
    fx.append(3)
    fx.w.tombstone(2)  # a delete that must survive the rollback
    with monkeypatch.context() as m:
        m.setattr(os, "pwrite", failing(errno.ENOSPC))
        with pytest.raises(ErrStoreIO) as exc:
            fx.w.flush()
    assert exc.value.errno == errno.ENOSPC and list(exc.value.lost) == [5, 6, 7]
    assert fx.ix.lost == [] and fx.ix.msgs == 4 and fx.ix.last_seq == 7
    assert fx.w.roll_pending and fx.w.guard, "the rolled-back sequences are never reused"
    assert fx.forgotten == [None]
    fx.w.flush()
    # the delete is written again, and a range tombstone says 5-7 were never stored
    assert fx.records(fx.ix.active) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 4),
        (FLAG_TOMBSTONE, 2),
        (FLAG_TOMBSTONE | FLAG_RANGE, 5),
    ]


def test_a_failed_sync_is_applied_by_the_owning_thread(fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    fx.append(2)
    fx.w.flush()
    with monkeypatch.context() as m:
        m.setattr(os, "fdatasync", failing(errno.EIO))
        with pytest.raises(ErrStoreIO):
            fx.w.sync()
    assert fx.w.fail is not None and fx.w.guard
    with pytest.raises(ErrStoreIO, match="an earlier sync failed"):
        fx.w.sync()
    err = fx.w.rollback(fx.w.fail)
    assert list(err.lost) == [1, 2] and fx.w.fail is None


def test_sealed_descriptors_are_pooled(fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_mod, "MAX_OPEN_SEALED", 2)
    sealed = []
    for _ in range(5):
        fx.append()
        sealed.append(fx.w.roll(fx.ix.last_seq + 1, fx.ix.last_seq))
    assert all(b.fd >= 0 for b in sealed), "unsynced blocks keep their descriptors"
    fx.w.flush()
    fx.w.sync()  # now clean: the next descriptor opened evicts the least recently used
    fx.append()
    sealed.append(fx.w.roll(fx.ix.last_seq + 1, fx.ix.last_seq))
    assert sum(b.fd >= 0 for b in sealed) == 2
    for blk in sealed:
        assert fx.w.fd(blk) >= 0 and sum(b.fd >= 0 for b in sealed) <= 2


def test_close_closes_everything_and_sync_becomes_a_no_op(fx: Fixture) -> None:
    fx.append()
    fx.w.flush()
    blk = fx.ix.active
    fx.w.close()
    assert fx.w.closed and fx.w.guard and blk.fd == -1
    fx.w.sync()
