"""Compressed and encrypted block files (frames.py, crypto.py, sealing.py): what is on disk, what
survives a restart, a change of setting, a wrong key, a flipped bit, a key rotation, an erase."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jetpy.store import ErrCorrupt, FileStore, StoreConfig
from jetpy.store.base import Compression, ConsumerState, ErrEncryptionKey
from jetpy.store.crypto import KEY_HEADER_SIZE, StoreKeys
from jetpy.store.frames import DATA_START, FRAME_HEADER_SIZE, FRAME_MAGIC
from jetpy.store.scan import check_stream

KEY = StoreKeys("the-server-key-0123456789abcdef")
OTHER = StoreKeys("another-key-0123456789abcdef")
PAYLOAD = b"PAYLOAD-MARKER %05d " * 6


def cfg(compression: Compression = "none") -> StoreConfig:
    return StoreConfig("ORDERS", block_size=16 * 1024, compression=compression)


def fill(store: FileStore, n: int = 600) -> None:
    for i in range(n):
        store.store_msg(
            f"orders.secret.{i % 4}", b"NATS/1.0\r\nX-Card: HDRMARKER\r\n\r\n", PAYLOAD % ((i,) * 6)
        )


def files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.name != "LOCK"]


def grep(root: Path, needle: bytes) -> list[str]:
    return [p.name for p in files(root) if needle in p.read_bytes()]


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in files(root)}


def blocks(d: Path) -> list[Path]:
    return sorted((d / "msgs").glob("*.blk"))


def test_sealed_blocks_are_compressed_and_read_back_after_a_restart(tmp_path: Path) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg("s2"))
    fill(s)
    s.settle()
    want = [s.load_msg(q) for q in range(1, 601)]
    sealed = blocks(d)[:-1]
    assert len(sealed) >= 4
    assert all(p.read_bytes()[:4] == b"JPBF" for p in sealed)  # framed: compressed copies
    assert blocks(d)[-1].read_bytes()[:4] != b"JPBF"  # the active block stays plain
    size = sum(p.stat().st_size for p in sealed)
    assert size < len(sealed) * 16 * 1024 // 3
    s.stop()
    s = FileStore(d, cfg("s2"))
    assert [s.load_msg(q) for q in range(1, 601)] == want
    assert s.load_next_batch("", 1, 1000) == want
    assert s.recovery_notes() == []
    s.stop()
    rep = check_stream("ORDERS", d)
    assert {b.form for b in rep.blocks} == {"s2", "plain"}
    assert rep.problems == ["meta.dat is missing"] and len(rep.live) == 600


def test_a_store_holds_plain_and_compressed_blocks_across_setting_changes(tmp_path: Path) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg())
    fill(s, 300)
    s.settle()
    plain = blocks(d)[:-1]
    assert plain and all(p.read_bytes()[:4] != b"JPBF" for p in plain)
    s.set_compression("s2")  # the blocks sealed already are compressed too
    fill(s, 300)
    s.settle()
    assert all(p.read_bytes()[:4] == b"JPBF" for p in blocks(d)[:-1])
    s.set_compression("none")  # from now on sealed blocks stay plain; the compressed stay readable
    fill(s, 300)
    s.settle()
    forms = [p.read_bytes()[:4] == b"JPBF" for p in blocks(d)[:-1]]
    assert True in forms and False in forms
    want = [s.load_msg(q) for q in range(1, 901)]
    s.stop()
    s = FileStore(d, cfg())
    assert [s.load_msg(q) for q in range(1, 901)] == want
    s.stop()


@pytest.mark.parametrize("compression", ["none", "s2"])
def test_an_encrypted_store_shows_no_plaintext_and_survives_a_restart(
    tmp_path: Path, compression: Compression
) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg(compression), KEY)
    fill(s)
    s.write_meta(b'{"config": {"name": "ORDERS", "subjects": ["orders.secret.>"]}}')
    c = s.consumer_store("DURABLE")
    c.write_meta(b'{"config": {"durable_name": "DURABLE", "filter_subject": "orders.secret.>"}}')
    c.update(ConsumerState(delivered_consumer_seq=5, delivered_stream_seq=5, pending={5: (5, 1)}))
    s.settle()
    want = [s.load_msg(q) for q in range(1, 601)]
    s.stop()
    assert {p.name for p in files(d)} >= {"meta.dat", "tail.dat", "o.dat"}
    for needle in (b"PAYLOAD-MARKER", b"HDRMARKER", b"orders.secret", b"ORDERS", b"DURABLE"):
        assert grep(d, needle) == [], needle
    s = FileStore(d, cfg(compression), KEY)
    assert [s.load_msg(q) for q in range(1, 601)] == want
    assert s.read_meta() is not None and b"orders.secret" in s.read_meta()  # type: ignore[operator]
    assert s.consumer_store("DURABLE").load() == ConsumerState(5, 5, 0, 0, {5: (5, 1)})
    s.stop()
    rep = check_stream("ORDERS", d, KEY)
    assert rep.problems == [] and len(rep.live) == 600
    assert {b.form for b in rep.blocks} <= {"encrypted", "s2+encrypted"}


@pytest.mark.parametrize("keys", [OTHER, None], ids=["wrong-key", "no-key"])
def test_the_wrong_key_refuses_to_open_and_changes_nothing(tmp_path: Path, keys: StoreKeys | None) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg("s2"), KEY)
    fill(s)
    s.consumer_store("C").update(ConsumerState(delivered_consumer_seq=1, delivered_stream_seq=1))
    s.settle()
    s.stop()
    before = snapshot(d)
    with pytest.raises(ErrEncryptionKey, match=r"written with another encryption key|has no encryption key"):
        FileStore(d, cfg("s2"), keys)
    assert snapshot(d) == before
    s = FileStore(d, cfg("s2"), KEY)  # the right key still opens all of it
    assert s.state().msgs == 600
    s.stop()


def test_key_rotation_rewrites_every_file_with_the_new_key(tmp_path: Path) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg("s2"), KEY)
    fill(s)
    s.write_meta(b"{}")
    s.consumer_store("C").update(ConsumerState(delivered_consumer_seq=2, delivered_stream_seq=2))
    s.settle()
    want = [s.load_msg(q) for q in range(1, 601)]
    s.stop()
    rotated = StoreKeys("the-new-key-0123456789abcdef", "aes", prev="the-server-key-0123456789abcdef")
    s = FileStore(d, cfg("s2"), rotated)
    assert [s.load_msg(q) for q in range(1, 601)] == want
    s.stop()
    new_only = StoreKeys("the-new-key-0123456789abcdef", "aes")
    s = FileStore(d, cfg("s2"), new_only)  # nothing is left under the old key
    assert [s.load_msg(q) for q in range(1, 601)] == want
    assert s.consumer_store("C").load() == ConsumerState(2, 2)
    s.stop()
    with pytest.raises(ErrEncryptionKey):
        FileStore(d, cfg("s2"), KEY)


def test_a_plaintext_store_opened_with_a_key_is_encrypted(tmp_path: Path) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg())
    fill(s)
    s.write_meta(b'{"orders.secret": 1}')
    s.consumer_store("C").update(ConsumerState(delivered_consumer_seq=3, delivered_stream_seq=3))
    want = [s.load_msg(q) for q in range(1, 601)]
    s.stop()
    assert grep(d, b"PAYLOAD-MARKER")
    s = FileStore(d, cfg(), KEY)
    assert [s.load_msg(q) for q in range(1, 601)] == want
    fill(s, 10)  # appends go on in the re-encrypted active block
    s.stop()
    for needle in (b"PAYLOAD-MARKER", b"orders.secret"):
        assert grep(d, needle) == [], needle
    s = FileStore(d, cfg(), KEY)
    assert s.state().msgs == 610 and s.consumer_store("C").load() == ConsumerState(3, 3)
    s.stop()


def _flip_in_first_data_frame(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    assert raw[DATA_START : DATA_START + 4] == FRAME_MAGIC
    raw[DATA_START + FRAME_HEADER_SIZE + 100] ^= 0x10  # inside the first data frame's body
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("compression", ["none", "s2"])
def test_a_flipped_bit_in_an_encrypted_block_loses_its_frame_only(
    tmp_path: Path, compression: Compression
) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg(compression), KEY)
    fill(s)
    s.settle()
    want = {q: s.load_msg(q) for q in range(1, 601)}
    s.stop()
    _flip_in_first_data_frame(blocks(d)[0])
    rep = check_stream("ORDERS", d, KEY)
    assert any("failed authentication" in p for p in rep.problems), rep.problems
    s = FileStore(d, cfg(compression), KEY)
    st = s.state()
    assert st.lost is not None and st.lost.msgs and min(st.lost.msgs) == 1
    lost = set(st.lost.msgs)
    assert len(lost) < 200  # one frame's records, not the block's, not the stream's
    for q in range(1, 601):
        assert s.load_msg(q) == (None if q in lost else want[q])
    assert any("failed authentication" in n for n in s.recovery_notes())
    s.stop()


def test_a_damaged_key_header_copy_costs_nothing_both_refuse(tmp_path: Path) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg(), KEY)
    fill(s, 50)
    s.stop()
    blk = blocks(d)[0]
    raw = bytearray(blk.read_bytes())
    raw[20] ^= 1  # the first copy's salt
    blk.write_bytes(bytes(raw))
    s = FileStore(d, cfg(), KEY)
    assert s.state().msgs == 50 and any("key header copy is damaged" in n for n in s.recovery_notes())
    s.stop()
    raw = bytearray(blk.read_bytes())
    raw[0] ^= 1
    raw[KEY_HEADER_SIZE + 20] ^= 1
    blk.write_bytes(bytes(raw))
    with pytest.raises(ErrCorrupt, match="no valid key header"):
        FileStore(d, cfg(), KEY)


@pytest.mark.parametrize(
    ("compression", "keys"),
    [("none", None), ("s2", None), ("none", KEY), ("s2", KEY)],
    ids=["plain", "s2", "enc", "s2-enc"],
)
def test_erase_and_purge_destroy_the_bytes_in_every_form(
    tmp_path: Path, compression: Compression, keys: StoreKeys | None
) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg(compression), keys)
    for i in range(600):
        s.store_msg("orders.a" if i % 2 else "orders.b", b"", b"SECRET-%04d-" % i * 8)
    s.settle()
    s.erase_msg(101)  # in a sealed (compressed) block
    s.erase_msg(599)  # in the active block
    s.purge("orders.a", keep=0)
    s.settle()
    s.stop()
    if keys is None and compression == "none":  # the plain needles are findable: prove it with one kept
        assert grep(d, b"SECRET-0098-")
    for gone in (100, 598, 1, 3, 201, 499, 597):  # erased, and purged ("orders.a" is odd i)
        assert grep(d, b"SECRET-%04d-" % gone) == [], gone
    s = FileStore(d, cfg(compression), keys)
    assert s.state().msgs == 298 and s.load_msg(101) is None and s.load_msg(599) is None
    assert s.load_msg(99) is not None and s.load_msg(99).data.startswith(b"SECRET-0098-")  # type: ignore[union-attr]
    assert s.recovery_notes() == []
    s.stop()
    rep = check_stream("ORDERS", d, keys)
    assert rep.problems == ["meta.dat is missing"], rep.problems


def test_an_erase_a_crash_interrupted_is_finished_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rewritten frame was durable, the old one not destroyed yet: the newer copy wins and
    the old one is destroyed when the store opens."""
    from jetpy.store.frames import FrameTable

    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg(), KEY)
    for i in range(100):
        s.store_msg("orders.a", b"", b"SECRET-%04d-" % i * 8)
    s.flush()
    s.sync()
    raw_before = blocks(d)[0].read_bytes()
    monkeypatch.setattr(FrameTable, "destroy", staticmethod(lambda fd, pos, size: None))
    s.erase_msg(50)
    s.abandon()  # the crash
    monkeypatch.undo()
    grown = blocks(d)[0].read_bytes()
    assert grown.startswith(raw_before[:DATA_START]) and len(grown) > len(raw_before)
    old_frame = raw_before[DATA_START:]
    assert old_frame in grown  # the old frame (holding 50) is still there
    s = FileStore(d, cfg(), KEY)
    assert s.load_msg(50) is None and s.state().msgs == 99 and s.load_msg(51) is not None
    s.stop()
    assert old_frame not in blocks(d)[0].read_bytes()


def test_an_export_reads_compressed_and_encrypted_blocks(tmp_path: Path) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg("s2"), KEY)
    fill(s)
    s.settle()
    exp = s.export()
    fill(s, 300)  # more blocks sealed while the export is open: not put in place meanwhile
    s.settle()
    out = []
    while got := exp.read(64 * 1024):
        out.extend(got)
    exp.close()
    assert [m.seq for m in out] == list(range(1, 601))
    s.settle()  # now the copies go in place
    assert all(p.read_bytes()[:4] == b"JPBF" for p in blocks(d)[:-1])
    s.stop()


def test_no_leftover_copy_survives_an_open(tmp_path: Path) -> None:
    d = tmp_path / "ORDERS"
    s = FileStore(d, cfg())
    fill(s, 200)
    s.stop()
    stray = blocks(d)[0].with_name(blocks(d)[0].name + ".new")
    stray.write_bytes(b"half a copy")
    s = FileStore(d, cfg())
    assert not stray.exists() and s.state().msgs == 200
    s.stop()
    assert os.listdir(d / "msgs")
