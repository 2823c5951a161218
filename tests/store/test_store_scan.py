"""The offline scanner (``store.scan``) and the directory layout it reads: it counts live messages
as the store does, reports damage with the codec's reason, and never writes anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from jetpy.store import ConsumerState, ErrStoreLocked, FileStore, StoreConfig
from jetpy.store.layout import lock_directory
from jetpy.store.scan import (
    BadRegion,
    Record,
    check_stream,
    find_streams,
    read_block,
    read_consumers,
    scan_block,
)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def build(path: Path) -> FileStore:
    s = FileStore(path, StoreConfig("scan", block_size=1024))
    s.write_meta(b'{"config": {}}')
    for i in range(1, 101):
        s.store_msg(
            "keep" if i <= 10 or i > 60 else "gone", b"H: 1\r\n" if i % 7 == 0 else b"", b"x" * i, ts=i
        )
    s.remove_msg(1)  # the floor moves
    s.remove_msg(80)  # a tombstone
    s.erase_msg(90)
    s.purge("gone")  # whole middle blocks go: range tombstones
    s.consumer_store("C").update(
        ConsumerState(delivered_consumer_seq=1, delivered_stream_seq=7, pending={5: (1, 1)})
    )
    s.consumer_store("C").write_meta(b'{"config": {}}')
    return s


def test_a_stopped_store_is_counted_as_the_store_counts_it(tmp_path: Path) -> None:
    s = build(tmp_path / "s")
    st = s.state()
    s.stop()
    before = snapshot(tmp_path)
    rep = check_stream("scan", tmp_path / "s")
    assert rep.problems == [] and not rep.locked and rep.meta == b'{"config": {}}'
    assert (len(rep.live), min(rep.live)) == (st.msgs, st.first_seq)
    # sizes are record lengths: 4 bytes over the accounted size for a message without headers
    no_hdr = sum(1 for q in rep.live if q % 7)
    assert sum(rep.live.values()) == st.bytes + 4 * no_hdr
    assert rep.last_seq == st.last_seq == 100 and rep.floor == 2
    # 90 erased, and the purge erased the "gone" records of the blocks it left (the others went)
    assert rep.total("erased") > 1 and rep.total("tombstones") >= 2
    assert rep.total("msgs") == len(rep.live) + 2  # 1 (below the floor) and 80 (tombstoned) stay
    assert [(c.name, c.state, c.delivered_stream_seq, c.pending) for c in rep.consumers] == [
        ("C", "ok", 7, 1)
    ]
    assert snapshot(tmp_path) == before


def test_damage_is_reported_with_the_codecs_reason(tmp_path: Path) -> None:
    build(tmp_path / "s").stop()
    path = sorted((tmp_path / "s" / "msgs").glob("*.blk"))[-1]
    data, hdr = read_block(path, int(path.stem))
    assert hdr is not None and hdr.hwm == 100
    victim = next(r for r in scan_block(data) if isinstance(r, Record) and r.kind == "msg")
    bad = bytearray(data)
    bad[victim.offset + victim.length - 6] ^= 0xFF
    bad += b"\xe5\x01torn"
    path.write_bytes(bytes(bad))
    items = list(scan_block(bytes(bad)))
    regions = [r for r in items if isinstance(r, BadRegion)]
    assert [(r.offset, r.tail) for r in regions] == [(victim.offset, False), (len(bad) - 6, True)]
    assert regions[0].reason.startswith("checksum mismatch") and regions[1].reason.startswith("truncated")
    assert any(isinstance(r, Record) and r.offset > victim.offset for r in items), "re-synchronised"
    rep = check_stream("scan", tmp_path / "s")
    assert len(rep.problems) == 3 and "damaged region" in rep.problems[0] and "torn tail" in rep.problems[1]
    assert rep.problems[2] == f"lost sequences: {victim.seq}" and rep.lost == [victim.seq]


def test_consumer_files_that_fail_their_checks(tmp_path: Path) -> None:
    build(tmp_path / "s").stop()
    state = tmp_path / "s" / "obs" / "C" / "o.dat"
    state.write_bytes(state.read_bytes()[:-1])
    (c,) = read_consumers(tmp_path / "s")
    assert c.meta == "ok" and "o.dat" in c.problems[0] and c.state != "ok"


def test_the_lock_is_seen_not_taken(tmp_path: Path) -> None:
    s = build(tmp_path / "s")
    assert check_stream("scan", tmp_path / "s").locked
    with pytest.raises(ErrStoreLocked):
        lock_directory(tmp_path / "s")
    s.stop()
    assert not check_stream("scan", tmp_path / "s").locked


def test_finding_streams(tmp_path: Path) -> None:
    streams = tmp_path / "sd" / "jetstream" / "$G" / "streams"
    for name in ("A", "B"):
        FileStore(streams / name, StoreConfig(name)).stop()
    assert list(find_streams(tmp_path / "sd")) == ["A", "B"]
    assert list(find_streams(tmp_path / "sd" / "jetstream")) == ["A", "B"]
    assert find_streams(streams / "A") == {"A": streams / "A"}
    assert find_streams(tmp_path) == {}
