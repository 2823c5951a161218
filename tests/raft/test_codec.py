"""The message codec: every message round-trips, the layout is the documented one, and any
malformed frame raises CodecError and nothing else."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.raft import (
    AppendRequest,
    AppendResponse,
    CodecError,
    Entry,
    EntryKind,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Membership,
    Message,
    Snapshot,
    SnapshotMeta,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
    decode,
    decode_conf,
    decode_membership,
    encode,
    encode_conf,
    encode_membership,
)

MEMBERS = Membership(frozenset({"n1", "n2", "nödé-3"}), frozenset({"learner"}))
SAMPLES: list[Message] = [
    VoteRequest("a", "b", 7, 100, 6, pre=True, transfer=False),
    VoteRequest("a", "b", 7, 100, 6, pre=False, transfer=True),
    VoteResponse("b", "a", 7, granted=True, pre=True),
    VoteResponse("b", "a", 8, granted=False, pre=False),
    AppendRequest("a", "b", 3, 10, 2, [], 9),
    AppendRequest(
        "a",
        "b",
        3,
        10,
        2,
        [
            Entry(11, 3, EntryKind.NOOP, b""),
            Entry(12, 3, EntryKind.NORMAL, b"x" * 1000),
            Entry(13, 3, EntryKind.CONF, encode_conf(MEMBERS)),
        ],
        12,
    ),
    AppendResponse("b", "a", 3, 13),
    AppendResponse("b", "a", 3, 10, reject=True, hint_index=7, hint_term=2),
    Heartbeat("a", "b", 3, 12),
    HeartbeatResponse("b", "a", 3),
    HeartbeatResponse("b", "a", 3, lost=True),
    InstallSnapshot("a", "b", 4, Snapshot(SnapshotMeta(500, 3, MEMBERS), b"\x00state" * 100)),
    TimeoutNow("a", "b", 9),
]


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(msg: Message) -> None:
    assert decode(encode(msg)) == msg
    assert decode(memoryview(bytearray(encode(msg)))) == msg


def test_the_frame_layout_is_the_documented_one() -> None:
    frame = encode(Heartbeat("ab", "c", 0x0102030405060708, 42))
    body = b"\x02ab\x01c" + struct.pack("<Q", 42)
    head = struct.pack("<BBHIQ", 1, 5, 0, 8 + len(body), 0x0102030405060708)
    assert frame == head + body + struct.pack("<I", zlib.crc32(head + body))
    # the term sits at a fixed offset for a transport that routes without decoding
    assert struct.unpack_from("<Q", frame, 8)[0] == 0x0102030405060708


def test_membership_encodings() -> None:
    assert decode_membership(encode_membership(MEMBERS)) == MEMBERS
    assert decode_conf(encode_conf(MEMBERS)) == MEMBERS
    assert encode_conf(MEMBERS)[0] == 1
    with pytest.raises(CodecError):
        decode_conf(b"\x02" + encode_membership(MEMBERS))
    with pytest.raises(CodecError):
        decode_conf(b"")
    with pytest.raises(CodecError):  # the same id twice
        decode_membership(b"\x02\x00\x01a\x01a\x00\x00")
    with pytest.raises(CodecError):  # a voter that is also a learner
        decode_membership(b"\x01\x00\x01a\x01\x00\x01a")


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_truncation_and_bit_flip_is_refused(msg: Message) -> None:
    frame = encode(msg)
    for cut in range(len(frame)):
        with pytest.raises(CodecError):
            decode(frame[:cut])
    with pytest.raises(CodecError):
        decode(frame + b"\x00")
    for pos in range(0, len(frame), max(1, len(frame) // 64)):
        bad = bytearray(frame)
        bad[pos] ^= 0x10
        with pytest.raises(CodecError):
            decode(bytes(bad))


def _refit(frame: bytearray) -> bytes:
    """Recompute length and CRC so a corrupt body reaches the field checks."""
    struct.pack_into("<I", frame, 4, len(frame) - 4 - 8)
    return bytes(frame[:-4]) + struct.pack("<I", zlib.crc32(frame[:-4]))


def test_well_framed_nonsense_is_refused() -> None:
    for msg in SAMPLES:
        frame = bytearray(encode(msg))
        frame[1] = 99  # unknown type
        with pytest.raises(CodecError):
            decode(_refit(frame))
        frame = bytearray(encode(msg))
        frame[0] = 2  # unknown version
        with pytest.raises(CodecError):
            decode(_refit(frame))
    entries = bytearray(encode(SAMPLES[5]))
    entries[16 + 4 + 28 + 8] = 7  # first entry's kind
    with pytest.raises(CodecError, match="kind"):
        decode(_refit(entries))
    count = bytearray(encode(SAMPLES[5]))
    struct.pack_into("<I", count, 16 + 4 + 24, 1 << 31)  # more entries than bytes
    with pytest.raises(CodecError):
        decode(_refit(count))
    ident = bytearray(encode(TimeoutNow("a", "b", 1)))
    ident[17] = 0xFF  # not UTF-8
    with pytest.raises(CodecError):
        decode(_refit(ident))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_codec_error(data: bytes) -> None:
    try:
        decode(data)
    except CodecError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_corrupt_bodies_with_a_valid_crc_raise_only_codec_error(msg: Message, data: st.DataObject) -> None:
    frame = bytearray(encode(msg))
    n = data.draw(st.integers(1, 8))
    for _ in range(n):
        pos = data.draw(st.integers(16, len(frame) - 5))
        frame[pos] = data.draw(st.integers(0, 255))
    try:
        decode(_refit(frame))
    except CodecError:
        pass


def test_node_ids_longer_than_255_bytes_are_refused_when_encoding() -> None:
    with pytest.raises(ValueError):
        encode(TimeoutNow("x" * 256, "b", 1))
