"""The framed block format and the key header, byte by byte as documented in store/frames.py and
store/crypto.py, and the parser's invariant: whatever the bytes, ``parse_framed`` returns or
raises ErrCorrupt / ErrEncryptionKey, nothing else."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.store.base import ErrCorrupt, ErrEncryptionKey
from jetpy.store.crypto import KEY_HEADER_SIZE, SEAL_OVERHEAD, StoreKeys, decode_key_header, encode_key_header
from jetpy.store.frames import (
    BLOCK_KEY_MAGIC,
    DATA_START,
    FLAG_S2,
    FLAG_SEALED,
    FRAME_HEADER_SIZE,
    chunk_bounds,
    encode_frame,
    framed_prefix,
    parse_framed,
)
from jetpy.store.record import encode_record

KEYS = StoreKeys("unit-test-key-0123456789abcdef")


def test_an_unsealed_frame_is_laid_out_as_documented() -> None:
    data = b"x" * 100
    frame = encode_frame(128, data, 3, None, compress=False)
    magic, flags, r1, r2, r3, lpos, llen, slen, gen, crc = struct.unpack_from("<4sBBBBIIIII", frame)
    assert (magic, flags, (r1, r2, r3), lpos, llen, slen, gen) == (b"JPFR", 0, (0, 0, 0), 128, 100, 100, 3)
    assert crc == zlib.crc32(frame[FRAME_HEADER_SIZE:], zlib.crc32(frame[:24]))
    assert frame[FRAME_HEADER_SIZE:] == data and FRAME_HEADER_SIZE == 28


def test_a_compressed_frame_holds_a_snappy_block_and_an_incompressible_one_stays_plain() -> None:
    import cramjam

    data = b"abcabcabc" * 500
    frame = encode_frame(128, data, 0, None, compress=True)
    assert frame[4] == FLAG_S2
    assert bytes(cramjam.snappy.decompress_raw(frame[FRAME_HEADER_SIZE:])) == data
    noise = bytes(range(256))  # nothing repeats: no shorter as a Snappy block
    assert encode_frame(128, noise, 0, None, compress=True)[4] == 0


def test_a_sealed_frame_is_nonce_ciphertext_tag_with_the_header_as_associated_data() -> None:
    fc, _header = KEYS.new_file(BLOCK_KEY_MAGIC, 7, "S/msgs")
    frame = encode_frame(128, b"secret payload", 0, fc, compress=False)
    assert frame[4] == FLAG_SEALED
    (slen,) = struct.unpack_from("<I", frame, 16)
    assert slen == len(b"secret payload") + SEAL_OVERHEAD == len(frame) - FRAME_HEADER_SIZE
    assert zlib.crc32(frame[:24]) == struct.unpack_from("<I", frame, 24)[0]  # the header only
    assert fc.open(frame[FRAME_HEADER_SIZE:], frame[:24]) == b"secret payload"
    moved = bytearray(frame)
    moved[8] = 0  # another logical offset: the associated data no longer matches
    assert fc.open(bytes(moved[FRAME_HEADER_SIZE:]), bytes(moved[:24])) is None
    assert b"secret" not in frame


def test_the_key_header_is_laid_out_as_documented_and_checked() -> None:
    fc, header = KEYS.new_file(b"JPBF", 42, "S/msgs", flags=1)
    assert len(header) == KEY_HEADER_SIZE
    magic, version, cipher, flags, _r, value = struct.unpack_from("<4sBBBBQ", header)
    assert (magic, version, cipher, flags, value) == (b"JPBF", 2, 1, 1, 42)
    assert header[16:32] == fc.salt and header[32:48] == fc.check
    assert struct.unpack_from("<I", header, 48)[0] == zlib.crc32(header[:48])
    hdr = decode_key_header(header, 0, b"JPBF")
    assert not isinstance(hdr, str)
    assert KEYS.open_file(hdr, "S/msgs", "x").check == fc.check
    with pytest.raises(ErrEncryptionKey):
        KEYS.open_file(hdr, "OTHER/msgs", "x")  # the context is part of the key
    with pytest.raises(ErrEncryptionKey):
        StoreKeys("not-the-key").open_file(hdr, "S/msgs", "x")
    assert StoreKeys("new", prev="unit-test-key-0123456789abcdef").open_file(hdr, "S/msgs", "x").stale
    plain = encode_key_header(b"JPBF", 42, None)
    assert plain[5] == 0 and plain[16:48] == bytes(32)


def test_a_framed_file_round_trips_its_logical_bytes() -> None:
    fc, header = KEYS.new_file(BLOCK_KEY_MAGIC, 1, "S/msgs")
    records = b"".join(encode_record(s, s, b"a.b", b"", b"p" * (s % 300)) for s in range(1, 2000))
    slot_b = bytes(range(64))
    prefix, table = framed_prefix(fc, header, slot_b)
    assert len(prefix) == DATA_START and prefix[:64] == prefix[64:128] == header
    offs = []
    at = 128
    for s in range(1, 2000):
        offs.append(at)
        at += 34 + 3 + s % 300
    bounds = chunk_bounds(128, 128 + len(records), offs)
    assert all(b in offs for b in bounds[:-1]) and bounds[-1] == 128 + len(records)
    pieces, a = [], 128
    for b in bounds:
        pieces.append((a, records[a - 128 : b - 128]))
        a = b
    raw = prefix + table.encode(pieces)
    parsed = parse_framed(raw, 1, KEYS, "S/msgs", "b")
    assert bytes(parsed.data[128:]) == records and bytes(parsed.data[64:128]) == slot_b
    assert parsed.bad == [] and parsed.cut is None and len(parsed.table.starts) == len(bounds)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 2999), st.integers(0, 255))
def test_parsing_never_raises_anything_else(noise: bytes, at: int, byte: int) -> None:
    fc, header = KEYS.new_file(BLOCK_KEY_MAGIC, 1, "S/msgs")
    prefix, table = framed_prefix(fc, header, bytes(64))
    good = prefix + table.encode([(128, encode_record(1, 1, b"s", b"", b"x" * 40))])
    for raw in (noise, good + noise, bytearray(good)):
        if isinstance(raw, bytearray) and at < len(raw):
            raw[at] = byte
        try:
            parse_framed(bytes(raw), 1, KEYS, "S/msgs", "b")
        except (ErrCorrupt, ErrEncryptionKey):
            pass
