"""The on-disk record and header formats, byte by byte, and the subject filter helper."""

from __future__ import annotations

import struct
import zlib

import pytest

from jetpy.store.record import (
    FLAG_ERASED,
    FLAG_RANGE,
    FLAG_TOMBSTONE,
    BlockHeader,
    decode_block_header,
    encode_block_header,
    encode_erased,
    encode_range_tombstone,
    encode_record,
    encode_tombstone,
    find_next_record,
    range_end,
    validate_record,
)
from jetpy.store.record import RECORD_OVERHEAD as MSG_OVERHEAD
from jetpy.subjects import is_literal, subject_matches
from jetpy.subjects import matches_all as is_all


def test_record_layout_is_exactly_as_documented() -> None:
    rec = encode_record(7, 123456789, b"a.b", b"HD", b"body")
    assert len(rec) == MSG_OVERHEAD + 3 + 2 + 4 == 43
    magic, version, flags, reserved, rec_len, seq, ts, sl, hl = struct.unpack_from("<BBBBIQqHI", rec)
    assert (magic, version, flags, reserved) == (0xE5, 1, 0, 0)
    assert (rec_len, seq, ts, sl, hl) == (43, 7, 123456789, 3, 2)
    assert rec[30:33] == b"a.b" and rec[33:35] == b"HD" and rec[35:39] == b"body"
    assert int.from_bytes(rec[39:], "little") == zlib.crc32(rec[:39])
    assert validate_record(rec, 0, len(rec)) == (43, 0, 7, 123456789, 3, 2)


def test_tombstones_and_erased_records() -> None:
    t = encode_tombstone(99)
    assert len(t) == MSG_OVERHEAD and validate_record(t, 0, len(t)) == (34, FLAG_TOMBSTONE, 99, 0, 0, 0)
    r = encode_range_tombstone(10, 20)
    v = validate_record(r, 0, len(r))
    assert v is not None and v[1] == FLAG_TOMBSTONE | FLAG_RANGE and range_end(r, 0) == 20
    original = encode_record(5, 1, b"secret", b"h", b"payload")
    erased = encode_erased(5, 1, len(original), 6, 1)
    assert len(erased) == len(original) and b"secret" not in erased and b"payload" not in erased
    ev = validate_record(erased, 0, len(erased))
    assert ev is not None and ev[1] == FLAG_ERASED


@pytest.mark.parametrize("byte", range(43))
def test_every_single_byte_flip_is_detected(byte: int) -> None:
    rec = bytearray(encode_record(7, 123456789, b"a.b", b"HD", b"body"))
    rec[byte] ^= 0x01
    assert validate_record(bytes(rec), 0, len(rec)) is None


def test_resynchronises_after_garbage() -> None:
    good1 = encode_record(1, 1, b"s", b"", b"one")
    good2 = encode_record(2, 2, b"s", b"", b"two")
    junk = b"\xe5\x01" + b"\x00" * 40  # looks like a record start, is not one
    buf = good1 + junk + good2
    assert find_next_record(buf, len(good1), len(buf)) == len(good1) + len(junk)
    assert find_next_record(buf, len(good1) + len(junk), len(buf)) is None


def test_block_header_slots() -> None:
    buf = bytearray(128)
    for gen in (1, 2, 3):
        off, slot = encode_block_header(BlockHeader(100, 99 + gen, 100, 5 * gen, gen))
        assert off == (gen % 2) * 64 and len(slot) == 64
        buf[off : off + 64] = slot
    hdr = decode_block_header(bytes(buf), 100)
    assert hdr is not None and (hdr.gen, hdr.hwm, hdr.last_ts) == (3, 102, 15)
    buf[64 + 20] ^= 0xFF  # tear the newest slot (gen 3 lives at offset 64)
    hdr = decode_block_header(bytes(buf), 100)
    assert hdr is not None and hdr.gen == 2
    assert decode_block_header(bytes(buf), 101) is None, "base must match the file name"


@pytest.mark.parametrize(
    ("flt", "subject", "expected"),
    [
        ("", "a.b", True),
        (">", "a", True),
        ("a.b", "a.b", True),
        ("a.b", "a.c", False),
        ("a.*", "a.b", True),
        ("a.*", "a.b.c", False),
        ("a.>", "a.b.c", True),
        ("a.>", "a", False),
        ("*.b.*", "x.b.y", True),
        ("*", "a.b", False),
        ("a.*.>", "a.b", False),
        ("a.*.>", "a.b.c", True),
        ("a*", "a*", True),
    ],
)
def test_subject_matches(flt: str, subject: str, expected: bool) -> None:
    assert subject_matches(flt, subject) is expected


def test_filter_kinds() -> None:
    assert is_all("") and is_all(">") and not is_all("a.>")
    assert is_literal("a.b") and not is_literal("a.*") and not is_literal(">") and is_literal("a*b")
