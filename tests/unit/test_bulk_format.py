"""The bulk read's wire format (``protocol/bulk.py``): its record layout is the file store's, a
chunk made from a store's records decodes back to the messages, and damage is reported."""

from __future__ import annotations

import pytest

from jetpy.protocol import bulk
from jetpy.store import MemoryStore, StoreConfig
from jetpy.store import record as rec


def test_record_layout_is_the_file_stores() -> None:
    assert bulk.RECORD_HEADER.format == rec.RECORD_HEADER.format
    assert (bulk.RECORD_MAGIC, bulk.RECORD_VERSION) == (rec.MAGIC, rec.VERSION)
    assert bulk.RECORD_OVERHEAD == rec.RECORD_OVERHEAD
    assert bulk.CRC_RESIDUE == rec._CRC_RESIDUE


def _chunk(store: MemoryStore, first: int, last: int) -> bytes:
    r = store.read_records(first, last, [], 1 << 20)
    head = bulk.encode_header(bulk.FLAG_LAST, len(r.offsets), r.base, r.next_seq, 1, last)
    return head + bulk.offsets_bytes(r.offsets) + b"".join(r.parts)


def test_chunk_round_trip_and_damage() -> None:
    store = MemoryStore(StoreConfig("S", "memory"))
    for i in range(20):
        store.store_msg(f"s.{i % 2}", b"NATS/1.0\r\nK: v\r\n\r\n" if i == 3 else b"", b"m%d" % i, ts=1000 + i)
    store.remove_msg(7)
    payload = _chunk(store, 1, 20)
    h, recs = bulk.decode_chunk(payload)
    assert h.last and h.next_seq == 21 and h.count == 19
    assert [r.seq for r in recs] == [s for s in range(1, 21) if s != 7]
    assert (recs[3].subject, recs[3].ts, recs[3].hdr, recs[3].data) == (
        "s.1",
        1003,
        b"NATS/1.0\r\nK: v\r\n\r\n",
        b"m3",
    )
    with pytest.raises(bulk.BulkFormatError, match="outside"):
        bulk.decode_chunk(payload, 1, 10)  # a sequence past the range asked for
    bad = bytearray(payload)
    bad[-6] ^= 0x40
    with pytest.raises(bulk.BulkFormatError, match="checksum"):
        bulk.decode_chunk(bytes(bad))
    with pytest.raises(bulk.BulkFormatError, match="not a bulk reply"):
        bulk.decode_chunk(b"XXXX" + payload[4:])
    with pytest.raises(bulk.BulkFormatError, match="shorter"):
        bulk.decode_chunk(payload[:20])


def test_the_run_mark_is_the_residue_shifted_back_four_bytes() -> None:
    """``CRC_RUN_MARK`` advanced over four zero bytes (zlib's register, linear in its start)
    is the residue; and so a zero buffer with the mark where each record ends has the raw CRC
    that a run of whole records of those lengths has."""
    import zlib

    def shift(v: int, n: int) -> int:
        return zlib.crc32(bytes(n), v) ^ zlib.crc32(bytes(n), 0)

    assert shift(bulk.CRC_RUN_MARK, 4) == bulk.CRC_RESIDUE
    records = []
    for n in (30, 31, 77, 140, 4000):
        body = bytes((i * 7 + n) % 251 for i in range(n - 4))
        records.append(body + zlib.crc32(body).to_bytes(4, "little"))
    run = b"".join(records)
    marks = bytearray(len(run))
    at = 0
    for r in records:
        at += len(r)
        marks[at - 4 : at] = bulk.CRC_RUN_MARK.to_bytes(4, "little")
    assert zlib.crc32(run) == zlib.crc32(bytes(marks), 0xFFFFFFFF) ^ 0xFFFFFFFF
