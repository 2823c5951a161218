"""The record codec: on-disk record and header formats byte by byte, the well-formedness check and
its reasons, the index-driven message decode, and the subject filter helper."""

from __future__ import annotations

import struct
import zlib
from array import array

import pytest

from jetpy.store import StoredMsg
from jetpy.store.record import (
    FLAG_ERASED,
    FLAG_RANGE,
    FLAG_TOMBSTONE,
    RECORD_HEADER,
    BlockHeader,
    accounted_size,
    append_record,
    check_record,
    decode_block_header,
    decode_msgs,
    encode_block_header,
    encode_erased,
    encode_range_tombstone,
    encode_record,
    encode_tombstone,
    find_next_record,
    longest_record,
    peek_header,
    range_end,
    split_record,
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


# ----------------------------------------------------------------------------- the one codec


def test_append_record_is_encode_record_and_returns_the_accounted_size() -> None:
    buf = bytearray(b"prefix")
    assert append_record(buf, 7, 123456789, b"a.b", b"HD", b"body", 3, 2, MSG_OVERHEAD + 3 + 2 + 4) == 43
    assert bytes(buf) == b"prefix" + encode_record(7, 123456789, b"a.b", b"HD", b"body")
    # without headers the record keeps its 4-byte header-length field, which is not accounted
    assert (
        append_record(bytearray(), 1, 0, b"s", b"", b"xy", 1, 0, MSG_OVERHEAD + 1 + 2) == MSG_OVERHEAD + 3 - 4
    )
    assert accounted_size(MSG_OVERHEAD + 3, 0) == MSG_OVERHEAD - 1 and longest_record(33) == 37


def test_check_record_says_why() -> None:
    rec = encode_record(7, 1, b"a.b", b"", b"body")

    def why(data: bytes | bytearray) -> object:
        return check_record(bytes(data), 0, len(data), explain=True)

    assert why(rec) == validate_record(rec, 0, len(rec)) == (len(rec), 0, 7, 1, 3, 0)
    assert str(why(rec[:20])).startswith("truncated: 20 bytes")
    assert str(why(rec[:-1])).startswith("truncated: record length 41")
    assert str(why(b"\x00" + rec[1:])).startswith("not a record: magic/version 0x00/1")
    flipped = bytearray(rec)
    flipped[35] ^= 0xFF
    assert str(why(flipped)).startswith("checksum mismatch: stored ")
    bad_flags = bytearray(rec)
    bad_flags[2] = 0x80
    assert str(why(bad_flags)).startswith("bad header: flags 0x80")
    # a tombstone that carries a subject fails on its shape even with a correct CRC
    odd = RECORD_HEADER.pack(0xE5, 1, FLAG_TOMBSTONE, 0, MSG_OVERHEAD + 1, 3, 0, 1, 0) + b"x"
    odd += struct.pack("<I", zlib.crc32(odd))
    assert why(odd) == "inconsistent record (tombstone shape)"
    assert validate_record(odd, 0, len(odd)) is None and check_record(odd, 0, len(odd)) is None


def test_split_and_peek() -> None:
    rec = encode_record(9, 55, b"sub.j", b"H: v", b"payload")
    fields = validate_record(rec, 0, len(rec))
    assert fields is not None
    assert split_record(rec, 0, fields) == (b"sub.j", b"H: v", b"payload")
    assert peek_header(rec, 0) == fields
    assert peek_header(rec[:29], 0) is None and peek_header(rec, -1) is None


class _Subj:
    def __init__(self, name: str) -> None:
        self.name = name


def _run(*msgs: tuple[int, bytes, bytes]) -> tuple[bytes, array[int], array[int], array[int]]:
    """A block's bytes from offset 0 and its index columns, one entry per (sid, hdr, data)."""
    buf = bytearray()
    offs, lens, sids = array("I"), array("I"), array("I")
    for seq, (sid, hdr, data) in enumerate(msgs, start=100):
        subject = b"s%d" % sid
        offs.append(len(buf))
        lens.append(
            append_record(
                buf,
                seq,
                seq,
                subject,
                hdr,
                data,
                len(subject),
                len(hdr),
                MSG_OVERHEAD + len(subject) + len(hdr) + len(data),
            )
        )
        sids.append(sid)
    return bytes(buf), offs, lens, sids


SUBJECTS = [_Subj("s0"), _Subj("s1"), None]
DELETED = 0xFFFFFFFF


def test_decode_msgs_a_run_skipping_deleted_entries() -> None:
    buf, offs, lens, sids = _run((0, b"", b"a"), (1, b"h", b"b"), (0, b"", b"c"), (1, b"", b"d"))
    sids[1] = DELETED
    out: list[StoredMsg] = []
    assert decode_msgs(buf, 0, offs, lens, sids, SUBJECTS, 100, 0, 10, out, DELETED) == 4
    assert [(m.seq, m.subject, m.data) for m in out] == [
        (100, "s0", b"a"),
        (102, "s0", b"c"),
        (103, "s1", b"d"),
    ]
    out.clear()  # ``want`` counts messages, not entries: the deleted one does not use it up
    assert decode_msgs(buf, 0, offs, lens, sids, SUBJECTS, 100, 0, 2, out, DELETED) == 3
    assert [m.seq for m in out] == [100, 102]
    out.clear()  # a run of one is the single read
    assert (
        decode_msgs(buf, 0, offs, lens, sids, SUBJECTS, 100, 3, 1, out, DELETED) == 4 and out[0].data == b"d"
    )


def test_decode_msgs_stops_where_the_buffer_or_the_record_is_not_what_the_entry_expects() -> None:
    buf, offs, lens, sids = _run((0, b"", b"a"), (1, b"", b"b"), (0, b"", b"c"))
    out: list[StoredMsg] = []
    part = buf[offs[1] : offs[2] - 1]  # entry 1's record, cut short; the buffer starts at its offset
    assert decode_msgs(part, offs[1], offs, lens, sids, SUBJECTS, 100, 1, 5, out, DELETED) == 1 and not out
    assert decode_msgs(buf[offs[1] :], offs[1], offs, lens, sids, SUBJECTS, 100, 0, 5, out, DELETED) == 0
    other_size = lens[:1] + array("I", [lens[1] + 1]) + lens[2:]
    assert decode_msgs(buf, 0, offs, other_size, sids, SUBJECTS, 100, 0, 5, out, DELETED) == 1
    out.clear()
    assert decode_msgs(buf, 0, offs, lens, sids, SUBJECTS, 101, 0, 5, out, DELETED) == 0  # another seq
    gone = array("I", [0, 2, 0])  # the subject table has no entry for sid 2
    assert decode_msgs(buf, 0, offs, lens, gone, SUBJECTS, 100, 0, 5, out, DELETED) == 1
    out.clear()
    erased = bytearray(buf)
    erased[offs[2] : offs[2] + lens[2] + 4] = encode_erased(102, 102, lens[2] + 4, 2, 0)
    assert decode_msgs(bytes(erased), 0, offs, lens, sids, SUBJECTS, 100, 0, 5, out, DELETED) == 2


@pytest.mark.parametrize("byte", range(39))
def test_decode_msgs_and_check_record_agree_on_every_flip(byte: int) -> None:
    buf, offs, lens, sids = _run((0, b"", b"payload!"))
    bad = bytearray(buf)
    bad[byte] ^= 0x01
    out: list[StoredMsg] = []
    decode_msgs(bytes(bad), 0, offs, lens, sids, SUBJECTS, 100, 0, 1, out, DELETED)
    assert not out and validate_record(bytes(bad), 0, len(bad)) is None
