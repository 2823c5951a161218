"""A replica's catch-up with another's store (``jscluster.catchup``): the batch read from a store
whose last messages were removed, written into a store behind it, leaves the same sequences and
the same last time stamp (that of the removed last message), durably, so the replay rule takes
the entries that published them for decided; an answer or a snapshot from an older server
(without it) reads as before."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from jetpy.server.jscluster.catchup import (
    CATCHUP_ALL,
    CatchupBatch,
    CatchupRequest,
    StreamSnapshot,
    decode_batch,
    decode_snapshot,
    encode,
    last_ts_of,
    read_batch,
    write_batch,
)
from jetpy.store import FileStore, MemoryStore, StoreConfig, StreamStore


def _store(kind: str, path: Path) -> StreamStore:
    if kind == "memory":
        return MemoryStore(StoreConfig("S", "memory"))
    return FileStore(path, StoreConfig("S"))


def _copy(src: StreamStore, dst: StreamStore) -> None:
    nxt = dst.state().last_seq + 1
    while True:
        batch = decode_batch(encode(read_batch(src, CatchupRequest(nxt, CATCHUP_ALL))))
        nxt = write_batch(dst, batch, CATCHUP_ALL)
        if not batch.more:
            return


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_catch_up_through_removed_last_messages_takes_their_time_stamp(kind: str, tmp_path: Path) -> None:
    src, dst = _store(kind, tmp_path / "src"), _store(kind, tmp_path / "dst")
    try:
        for i in range(10):
            src.store_msg("q", b"", b"%d" % i, ts=1000 + i)
        dst.store_msg("q", b"", b"0", ts=1000)
        for seq in (2, 8, 9, 10):  # a work queue's acknowledged ones, the last three among them
            assert src.remove_msg(seq)
        _copy(src, dst)
        want, got = src.state(), dst.state(deleted_details=True)
        assert (got.msgs, got.first_seq, got.last_seq, got.deleted) == (6, 1, 10, [2, 8, 9, 10])
        assert (got.last_ts, want.last_ts) == (1009, 1009)  # not its own last message's, 1007
        if isinstance(dst, FileStore):
            dst.flush()
            dst.sync()
            dst.stop()
            dst = FileStore(tmp_path / "dst", StoreConfig("S"))
            assert (dst.state().last_seq, dst.state().last_ts) == (10, 1009)
    finally:
        src.stop()
        dst.stop()


def test_an_older_servers_answer_and_snapshot_read_as_before() -> None:
    """Without the new trailing fields: no time stamp given (the store keeps its own), and a
    snapshot's last sequence is taken at its last applied time stamp."""

    class OldBatch(msgspec.Struct, array_like=True):
        msgs: list[object]
        last_seq: int
        more: bool

    batch = decode_batch(encode(OldBatch([], 5, False)))
    assert batch == CatchupBatch([], 5, False, 0)
    dst = MemoryStore(StoreConfig("S", "memory"))
    dst.store_msg("q", b"", b"x", ts=1000)
    assert write_batch(dst, batch, CATCHUP_ALL) == 6
    assert (dst.state().last_seq, dst.state().last_ts) == (5, 1000)

    old = decode_snapshot(encode([1, 0, 7000, [], b"{}", [], 0]))
    assert old.last_ts == 0 and last_ts_of(old) == 7000
    new = decode_snapshot(encode(StreamSnapshot(1, 0, 7000, [], b"{}", last_ts=6000)))
    assert last_ts_of(new) == 6000
