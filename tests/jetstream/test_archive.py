"""The backup archive's writer and reader (sans-IO): every archive read back fed whole, byte by
byte and in random pieces; any change to its bytes is refused with ``ArchiveError`` and nothing
else, or reads back the same; truncation and foreign bytes are named."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.jetstream.archive import (
    ArchiveConsumer,
    ArchiveEnd,
    ArchiveError,
    ArchiveMeta,
    ArchiveReader,
    ArchiveState,
    ArchiveWriter,
    is_foreign,
)
from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.store.base import ConsumerState, StoredMsg

MSGS = [
    StoredMsg(
        f"orders.{i % 3}",
        seq,
        1_700_000_000_000_000_000 + seq,
        b"NATS/1.0\r\nA: b\r\n\r\n" if i % 2 else b"",
        b"x" * (i * 37 % 300),
    )
    for i, seq in enumerate([5, 6, 7, 9, 10, 40, 41, 42, 43, 44])
]
META = ArchiveMeta(
    config=StreamConfig(name="ORDERS", subjects=["orders.>"]),
    created=1_600_000_000_000_000_000,
    state=ArchiveState(
        msgs=len(MSGS), bytes=12345, first_seq=5, last_seq=45, last_ts=1_700_000_000_000_000_045
    ),
    taken=1,
    server="test",
)
CONSUMER = ArchiveConsumer(
    "WORK",
    ConsumerConfig(durable_name="WORK", ack_policy="explicit"),
    1_650_000_000_000_000_000,
    ConsumerState(7, 10, 3, 7, {9: (4, 123), 10: (5, 456)}, {9: 2}),
)


def archive(msgs: list[StoredMsg] = MSGS) -> bytes:
    w = ArchiveWriter()
    return w.header(META) + w.messages(msgs[:4]) + w.messages(msgs[4:]) + w.consumer(CONSUMER) + w.end()


def read(
    pieces: list[bytes],
) -> tuple[ArchiveMeta | None, list[StoredMsg], list[ArchiveConsumer], ArchiveEnd]:
    r = ArchiveReader()
    msgs: list[StoredMsg] = []
    consumers: list[ArchiveConsumer] = []
    for piece in pieces:
        for item in r.feed(piece):
            if isinstance(item, list):
                msgs.extend(item)
            elif isinstance(item, ArchiveConsumer):
                consumers.append(item)
    return r.meta, msgs, consumers, r.finish()


def test_round_trip_whole_byte_by_byte_and_in_pieces() -> None:
    data = archive()
    want = (META, MSGS, [CONSUMER], ArchiveEnd(len(MSGS), 1, 4))
    assert read([data]) == want
    assert read([data[i : i + 1] for i in range(len(data))]) == want
    assert read([data[:7], data[7:100], data[100:]]) == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=30))
def test_any_split_reads_the_same(cuts: list[int]) -> None:
    data = archive()
    pieces, pos = [], 0
    for c in cuts:
        pieces.append(data[pos : pos + c])
        pos += c
    pieces.append(data[pos:])
    assert read(pieces)[1] == MSGS


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0), st.integers(min_value=1, max_value=255))
def test_a_changed_byte_is_refused_or_harmless(where: int, xor: int) -> None:
    data = bytearray(archive())
    i = where % len(data)
    data[i] ^= xor
    try:
        got = read([bytes(data)])
    except ArchiveError:
        return
    # accepted only when what it says is unchanged: the header's reserved bytes, or bits of a
    # deflate stream that decode to the same bytes (every frame's CRC covers what it decodes to)
    assert got == read([archive()])


@pytest.mark.parametrize("cut", [0, 5, 16, 40, -1, -10])
def test_truncated_archives_are_refused(cut: int) -> None:
    data = archive()
    with pytest.raises(ArchiveError, match=r"truncated|no backup data"):
        read([data[:cut]])


def test_foreign_and_unknown_bytes() -> None:
    s2 = b"\xff\x06\x00\x00S2sTwO" + b"\x00" * 100
    assert is_foreign(s2) == "nats-server"
    with pytest.raises(ArchiveError, match="nats-server snapshot"):
        ArchiveReader().feed(s2)
    with pytest.raises(ArchiveError, match="not a jetpy backup"):
        ArchiveReader().feed(b"PK\x03\x04 a zip file")
    with pytest.raises(ArchiveError, match="version 2"):
        ArchiveReader().feed(b"JPBACKUP\x02\x00" + bytes(6))


def test_data_after_the_end_and_wrong_counts_are_refused() -> None:
    with pytest.raises(ArchiveError, match="after the end"):
        read([archive() + archive()[16:40]])
    w = ArchiveWriter()
    body = w.header(META) + w.messages(MSGS)
    w.msgs += 1  # an END that counts a message that is not there
    with pytest.raises(ArchiveError, match="incomplete"):
        read([body + w.end()])


def test_records_out_of_order_or_past_the_state_are_refused() -> None:
    backwards = [MSGS[1], MSGS[0]]
    with pytest.raises(ArchiveError, match="damaged message record"):
        read([archive(backwards)])
    past = [*MSGS, StoredMsg("orders.x", 46, 1, b"", b"")]
    with pytest.raises(ArchiveError, match="damaged message record"):
        read([archive(past)])


def test_messages_compress_with_zlib() -> None:
    w = ArchiveWriter()
    frames = w.messages([StoredMsg("s", 1, 1, b"", b"a" * 100_000)])
    assert len(frames) < 2000
    assert zlib.decompress(frames[16:])[26 + 1 :] == b"a" * 100_000
