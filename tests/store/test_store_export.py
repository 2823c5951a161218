"""``StreamStore.export``: every message live at one instant, read later while the store goes on,
on both backends (the backup's consistent read)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from jetpy.store import ErrStoreIO, FileStore, StoreConfig, StoredMsg, StreamStore
from jetpy.store import export as export_module

from .conftest import CONTRACT_BLOCK_SIZE, MakeStore


def read_all(store: StreamStore, max_bytes: int = 300) -> list[StoredMsg]:
    exp = store.export()
    out: list[StoredMsg] = []
    while True:
        got = exp.read(max_bytes)
        if not got:
            break
        out.extend(got)
    exp.close()
    return out


def test_export_returns_every_live_message_in_order(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(200):
        store.store_msg(
            f"s.{i % 7}", b"NATS/1.0\r\nA: b\r\n\r\n" if i % 3 == 0 else b"", b"x" * (i % 50), ts=1000 + i
        )
    for seq in (1, 2, 50, 51, 120, 200):
        store.remove_msg(seq)
    want = [store.load_msg(s) for s in range(1, 201)]
    got = read_all(store)
    assert got == [m for m in want if m is not None]
    assert len(got) == 194


def test_export_is_the_instant_it_was_taken(make_store: MakeStore, kind: str) -> None:
    """Removals, purges and new messages after the export do not change what it reads; a message
    erased since (by MSG.DELETE's erase, or by a purge, which erases what it removes) is gone
    from a file store's export (its bytes were overwritten), not from a memory store's (erasing
    there drops the store's reference only)."""
    store = make_store()
    for i in range(300):
        store.store_msg("a" if i % 2 else "b", b"", b"payload-%d" % i, ts=1000 + i)
    before = [store.load_msg(s) for s in range(1, 301)]
    exp = store.export()
    store.remove_msg(10)
    store.erase_msg(11)  # rewritten in place in a file store: skipped by the export
    store.purge(subject="a", keep=5)
    store.compact(250)  # whole blocks of a file store go
    for _ in range(50):
        store.store_msg("c", b"", b"new")
    out: list[StoredMsg] = []
    while got := exp.read(1000):
        out.extend(got)
    exp.close()
    kept_a = [m.seq for m in before if m is not None and m.subject == "a"][-5:]
    purged = {m.seq for m in before if m is not None and m.subject == "a" and m.seq not in kept_a}
    erased = {11} | (purged - {10})  # 10 was removed (not erased) before the purge
    if kind == "memory":
        erased = set()
    assert out == [m for m in before if m is not None and m.seq not in erased]
    assert exp.read(1000) == []


def test_export_read_from_another_thread_while_storing(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(500):
        store.store_msg("s", b"", b"%d" % i)
    exp = store.export()
    out: list[StoredMsg] = []

    def reader() -> None:
        while got := exp.read(512):
            out.extend(got)

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(500):
        store.store_msg("s", b"", b"more")
    store.purge()
    t.join()
    exp.close()
    assert [m.seq for m in out] == list(range(1, 501))
    assert [m.data for m in out] == [b"%d" % i for i in range(500)]


def test_export_of_an_empty_store(make_store: MakeStore) -> None:
    store = make_store(first_seq=5)
    assert read_all(store) == []


def test_a_file_export_opens_newer_blocks_when_it_reaches_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``EXPORT_FDS`` blocks, an export opens blocks by name: the messages are the same, and
    a block removed before the export reached it is an error, never a silent hole."""
    monkeypatch.setattr(export_module, "EXPORT_FDS", 1)
    store = FileStore(tmp_path / "s", StoreConfig("s", block_size=CONTRACT_BLOCK_SIZE))
    try:
        for i in range(300):
            store.store_msg("s", b"", b"%d" % i * 20)
        assert read_all(store) == [store.load_msg(s) for s in range(1, 301)]
        exp = store.export()
        first = exp.read(100)
        store.compact(290)  # drops the blocks the export has not reached yet
        store.flush()
        store.sync()  # their files go once what covers them is durable
        with pytest.raises(ErrStoreIO, match="removed while it was being exported"):
            while exp.read(100):
                pass
        exp.close()
        assert first and first[0].seq == 1
    finally:
        store.stop()
