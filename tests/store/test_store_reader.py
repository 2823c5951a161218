"""BlockReader on its own: records found in a file, the read-ahead cache or the write buffer,
verified on the way out; the bulk read across reads and into the write buffer."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jetpy.store import ErrCorrupt, ErrStoreIO
from jetpy.store import reader as reader_mod
from jetpy.store.index import StoreIndex
from jetpy.store.reader import BlockReader
from jetpy.store.record import BLOCK_HEADER_SIZE, RECORD_OVERHEAD, append_record
from jetpy.store.recovery import Recovered
from jetpy.store.segment import NO_SID, Block, SubjectInfo


class Fixture:
    """One block file of ``on_disk`` messages plus ``buffered`` ones still in the write buffer."""

    def __init__(self, path: Path, on_disk: int, buffered: int) -> None:
        self.blk = Block(path, 1)
        self.info = SubjectInfo("orders", b"orders", 0, 1)
        self.wbuf = bytearray()
        disk = bytearray(BLOCK_HEADER_SIZE)
        for seq in range(1, on_disk + buffered + 1):
            target = disk if seq <= on_disk else self.wbuf
            off = len(disk) + len(self.wbuf)
            data = self.payload(seq)
            acct = append_record(
                target, seq, seq * 10, b"orders", b"", data, 6, 0, RECORD_OVERHEAD + 6 + len(data)
            )
            self.blk.offs.append(off)
            self.blk.lens.append(acct)
            self.blk.sids.append(0)
            self.blk.live += 1
            self.info.count += 1
            self.info.last = seq
        path.write_bytes(bytes(disk))
        self.blk.size = len(disk) + len(self.wbuf)
        self.blk.flushed = len(disk)
        n = on_disk + buffered
        self.ix = StoreIndex(
            Recovered(
                blocks=[self.blk],
                subjects={"orders": self.info},
                by_sid=[self.info],
                last_seq=n,
                last_ts=n * 10,
                floor=1,
                first_seq=1,
                msgs=n,
                bytes=sum(self.blk.lens),
            )
        )
        self.opened = 0
        self.reader = BlockReader(self.ix, self.wbuf, self.fd_of)

    @staticmethod
    def payload(seq: int) -> bytes:
        return b"payload-%06d" % seq

    def fd_of(self, blk: Block) -> int:
        if blk.fd < 0:
            self.opened += 1
            blk.open()
        return blk.fd

    def flip(self, seq: int) -> None:
        """Rot one payload byte of ``seq``'s record on disk."""
        off = self.blk.offs[seq - 1] + self.blk.lens[seq - 1] - 6  # its payload's last bytes precede the CRC
        with open(self.blk.path, "r+b") as f:
            f.seek(off)
            b = f.read(1)[0]
            f.seek(off)
            f.write(bytes([b ^ 0x20]))


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    f = Fixture(tmp_path / "1.blk", on_disk=3000, buffered=20)
    yield f
    if f.blk.fd >= 0:
        os.close(f.blk.fd)


def test_single_reads_from_the_file_the_cache_and_the_write_buffer(fx: Fixture) -> None:
    for seq in (1, 2, 1500, 3000, 3001, 3020):
        m = fx.reader.msg_at(fx.blk, seq - 1)
        assert (m.seq, m.ts, m.subject, m.hdr, m.data) == (seq, seq * 10, "orders", b"", fx.payload(seq))
    assert isinstance(fx.reader.msg_at(fx.blk, 0).data, bytes)  # not a view of a reused buffer
    assert fx.reader.header_at(fx.blk, 3010)[3] == 30110
    assert fx.reader.first_ts() == 10 and fx.reader.ts_of(3020) == 30200


def test_rot_is_reported_for_that_record_only(fx: Fixture) -> None:
    fx.flip(7)
    fx.reader.forget()
    with pytest.raises(ErrCorrupt) as exc:
        fx.reader.msg_at(fx.blk, 6)
    assert exc.value.seqs == [7]
    assert fx.reader.msg_at(fx.blk, 7).seq == 8


def test_forget_drops_cached_bytes(fx: Fixture) -> None:
    assert fx.reader.msg_at(fx.blk, 9).seq == 10  # now cached
    fx.flip(10)
    assert fx.reader.msg_at(fx.blk, 9).seq == 10, "served from the cache"
    fx.reader.forget(Block(fx.blk.path, 99))  # another block's: the cache stays
    assert fx.reader.msg_at(fx.blk, 9).seq == 10
    fx.reader.forget(fx.blk)
    with pytest.raises(ErrCorrupt):
        fx.reader.msg_at(fx.blk, 9)


def test_bulk_read_runs_across_reads_deleted_entries_and_the_write_buffer(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader_mod, "BATCH_READ", 4096)  # many reads, records cut at their ends
    for seq in (5, 6, 2999):
        fx.ix.remove(fx.blk, seq - 1, seq)
    got: list[int] = []
    start = 1
    while batch := fx.reader.next_batch(start, 333):
        assert len(batch) == 333 or batch[-1].seq == 3020
        assert all(m.data == fx.payload(m.seq) for m in batch)
        got += [m.seq for m in batch]
        start = batch[-1].seq + 1
    assert got == [s for s in range(1, 3021) if s not in (5, 6, 2999)]
    assert fx.opened == 1


def test_bulk_read_stops_before_rot_then_reports_it(fx: Fixture) -> None:
    fx.flip(50)
    assert [m.seq for m in fx.reader.next_batch(1, 100)] == list(range(1, 50))
    with pytest.raises(ErrCorrupt):
        fx.reader.next_batch(50, 100)
    assert fx.reader.next_batch(51, 2)[0].seq == 51


def test_read_errors_become_store_io_errors(fx: Fixture) -> None:
    def broken(_blk: Block) -> int:
        raise OSError(errno.EIO, "I/O error")

    r = BlockReader(fx.ix, fx.wbuf, broken)
    with pytest.raises(ErrStoreIO) as exc:
        r.msg_at(fx.blk, 0)
    assert exc.value.errno == errno.EIO
    with pytest.raises(ErrStoreIO):
        r.read_block(fx.blk)
    assert r.msg_at(fx.blk, 3005).seq == 3006, "the write buffer needs no file"
    assert fx.blk.sids[0] != NO_SID
