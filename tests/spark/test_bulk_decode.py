"""The Spark task's bulk decoder (``spark/bulk.to_batch``) against the reference decoder
(``protocol/bulk.decode_chunk``): the same rows for every length of subject and payload (Arrow
keeps up to 12 bytes inline), headers, filters; and every kind of damage reported, never
skipped. No Spark session: chunks are made from a store's records as the server makes them."""

from __future__ import annotations

import struct

import pytest

from jetpy.protocol import bulk
from jetpy.spark.bulk import BulkChunk, to_batch
from jetpy.spark.options import COLUMNS
from jetpy.spark.schema import arrow_schema
from jetpy.store import MemoryStore, StoreConfig


def _chunk(store: MemoryStore, first: int, last: int, filters: list[str] | None = None) -> bytes:
    r = store.read_records(first, last, filters or [], 1 << 24)
    head = bulk.encode_header(bulk.FLAG_LAST, len(r.offsets), r.base, r.next_seq, 1, last)
    return head + bulk.offsets_bytes(r.offsets) + b"".join(r.parts)


def _decode(payload: bytes, columns: tuple[str, ...] = COLUMNS, **kw: object) -> list[dict[str, object]]:
    view = memoryview(bytearray(payload))
    args: dict[str, object] = {"lo": 1, "hi": 10**9, "after": 0, "with_headers": True, "keep": None}
    args.update(kw)
    batch, _, _ = to_batch(
        BulkChunk(bulk.decode_header(view), view, 1, 10**9),
        "S",
        int(args["lo"]),  # type: ignore[call-overload]
        int(args["hi"]),  # type: ignore[call-overload]
        int(args["after"]),  # type: ignore[call-overload]
        arrow_schema(columns),
        bool(args["with_headers"]),
        args["keep"],  # type: ignore[arg-type]
    )
    assert batch.schema.names == list(columns)
    rows: list[dict[str, object]] = batch.to_pylist()
    return rows


@pytest.fixture
def store() -> MemoryStore:
    s = MemoryStore(StoreConfig("S", "memory"))
    for i in range(60):
        subject = "a" * (1 + i % 20) + ".é"  # 4 to 23 bytes: inline and not
        hdr = b"NATS/1.0\r\nK: v%d\r\nK: w\r\n\r\n" % i if i % 9 == 0 else b""
        s.store_msg(subject, hdr, bytes(range(i % 30)) * (1 + i // 30), ts=1_700_000_000_123_456_789 + i)
    s.remove_msg(5)
    return s


def test_same_rows_as_the_reference_decoder(store: MemoryStore) -> None:
    payload = _chunk(store, 1, 60)
    _, want = bulk.decode_chunk(payload)
    rows = _decode(payload)
    assert [r["seq"] for r in rows] == [w.seq for w in want]
    for r, w in zip(rows, want, strict=True):
        assert r["stream"] == "S" and r["subject"] == w.subject and r["data"] == w.data
        assert r["ts"].timestamp() * 1e9 // 1000 == w.ts // 1000  # type: ignore[attr-defined]
        assert r["headers"] == ([("K", [f"v{w.seq - 1}", "w"])] if w.hdr else None)
    assert all(r["headers"] is None for r in _decode(payload, with_headers=False))


@pytest.mark.parametrize("columns", [("seq", "data"), ("headers", "ts", "subject"), ("stream",)])
def test_some_columns_in_any_order(store: MemoryStore, columns: tuple[str, ...]) -> None:
    payload = _chunk(store, 1, 60)
    full = _decode(payload)
    assert _decode(payload, columns) == [{c: r[c] for c in columns} for r in full]


@pytest.mark.parametrize("columns", [COLUMNS, ("seq",), ("stream",)])
def test_every_damage_is_reported(store: MemoryStore, columns: tuple[str, ...]) -> None:
    """Whatever columns are made, every record is checked."""
    payload = _chunk(store, 1, 60)
    h = bulk.decode_header(payload)
    area = h.area_start

    def broken(at: int, xor: int) -> bytes:
        b = bytearray(payload)
        b[at] ^= xor
        return bytes(b)

    with pytest.raises(bulk.BulkFormatError, match="checksum"):
        _decode(broken(len(payload) - 7, 0x10), columns)  # a payload bit
    with pytest.raises(bulk.BulkFormatError, match="not a message record"):
        _decode(broken(area + 2, 0x02), columns)  # the first record's flags: erased
    with pytest.raises(bulk.BulkFormatError, match="damaged length"):
        _decode(broken(area + 7, 0x40), columns)  # the first record's length
    with pytest.raises(bulk.BulkFormatError, match="outside its records"):
        _decode(broken(bulk.CHUNK_HEADER.size + 3, 0x01), columns)  # an offset past the area
    with pytest.raises(bulk.BulkFormatError, match=r"out of order or outside the range 1\.\.30"):
        _decode(payload, columns, hi=30)
    with pytest.raises(bulk.BulkFormatError, match="out of order"):
        _decode(payload, columns, after=10)  # sequences already read


def test_filters_are_checked(store: MemoryStore) -> None:
    payload = _chunk(store, 1, 60, ["a.é"])
    assert [r["seq"] for r in _decode(payload, keep=lambda s: s == "a.é")] == [1, 21, 41]
    with pytest.raises(bulk.BulkFormatError, match="which the filter does not match"):
        _decode(_chunk(store, 1, 60), keep=lambda s: s == "a.é")
    with pytest.raises(bulk.BulkFormatError, match="which the filter does not match"):
        _decode(_chunk(store, 1, 60), ("seq",), keep=lambda s: s == "a.é")  # subjects not asked for


def _with_gaps(payload: bytes, every: int) -> bytes:
    """The chunk with junk bytes (not records) before every ``every``-th record: the area as a
    file store's blocks may hand it out, tombstones between records."""
    h = bulk.decode_header(payload)
    offsets = struct.unpack_from(f"<{h.count}I", payload, bulk.CHUNK_HEADER.size)
    area = payload[h.area_start :]
    pos = [o - h.base for o in offsets] + [len(area)]
    out, new = bytearray(), []
    for k in range(h.count):
        if k % every == 0:
            out += b"\xe5junk"[: 1 + k % 5]
        new.append(len(out))
        out += area[pos[k] : pos[k + 1]]
    head = bulk.encode_header(bulk.FLAG_LAST, h.count, 0, h.next_seq, h.first_seq, h.last_seq)
    return head + struct.pack(f"<{h.count}I", *new) + bytes(out)


@pytest.mark.parametrize("every", [1, 7, 30, 10**6])
def test_each_damaged_record_is_named_runs_or_not(store: MemoryStore, every: int) -> None:
    """Records are checked a run of adjacent ones at a time (or one by one where the runs are
    short): any one damaged record fails the read, named by the sequence before it."""
    payload = _with_gaps(_chunk(store, 1, 60), every)
    assert _decode(payload) == _decode(_chunk(store, 1, 60))
    h = bulk.decode_header(payload)
    offsets = struct.unpack_from(f"<{h.count}I", payload, bulk.CHUNK_HEADER.size)
    seqs = [r["seq"] for r in _decode(payload)]
    for k in (0, 1, 17, len(offsets) - 1):
        b = bytearray(payload)
        b[h.area_start + offsets[k] - h.base + 31] ^= 0x04  # a byte of its subject
        where = f"sequence {seqs[k - 1]}" if k else "the start of the message"
        with pytest.raises(bulk.BulkFormatError, match=f"record after {where} fails its checksum"):
            _decode(bytes(b), ("seq",))
    # junk between records is not checked (it is not a message)
    k = every if every < len(offsets) else 0
    b = bytearray(payload)
    b[h.area_start + offsets[k] - h.base - 1] ^= 0xFF
    assert _decode(bytes(b)) == _decode(payload)
