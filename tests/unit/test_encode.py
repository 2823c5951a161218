"""MSG/HMSG framing (protocol.encode): every way of building a frame spells the same bytes, the
bytes read back as the protocol defines them, and the tail reads back through our own Parser as
the PUB/HPUB it echoes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parser_support import flat

from jetpy.protocol import Parser
from jetpy.protocol import encode as enc
from jetpy.protocol.headers import encode_headers
from jetpy.protocol.ops import CONNECT, PUB
from jetpy.server.connection import NO_RESPONDERS

Frame = tuple[bytes, bytes, bytes | None, int, bytes]  # subject, sid, reply, hdr_len, data

token = st.text("abcxyz0189-_", min_size=1, max_size=6).map(str.encode)
subjects = st.lists(token, min_size=1, max_size=4).map(b".".join)
sids = st.integers(1, 10**6).map(lambda n: b"%d" % n)
replies = st.one_of(st.none(), subjects.map(lambda s: b"_INBOX." + s))
payloads = st.binary(max_size=64) | st.sampled_from([b"", b"\r\n", b"MSG x 1 2\r\nhi\r\n"])
header_blocks = st.one_of(
    st.just(b""),
    st.lists(st.tuples(st.sampled_from(["K", "Nats-Msg-Id"]), st.text("abc 12", max_size=5)), max_size=3).map(
        encode_headers
    ),
    st.sampled_from([encode_headers([], 503), encode_headers([], 408, "Request Timeout")]),
)


def read_frames(buf: bytes) -> list[Frame]:
    """MSG/HMSG frames as the protocol defines them, read without any of protocol's code."""
    frames: list[Frame] = []
    while buf:
        line, _, rest = buf.partition(b"\r\n")
        op, *args = line.split()
        if op == b"MSG":
            hdr_len, total = 0, int(args.pop())
        else:
            assert op == b"HMSG"
            total = int(args.pop())
            hdr_len = int(args.pop())
        subject, sid, *reply = args
        assert rest[total : total + 2] == b"\r\n"
        frames.append((subject, sid, reply[0] if reply else None, hdr_len, rest[:total]))
        buf = rest[total + 2 :]
    return frames


def as_published(frame: bytes, prefix: bytes, subject: bytes) -> tuple[object, ...]:
    """The tail of ``frame`` behind ``PUB <subject> `` (HPUB for HMSG), read by our Parser."""
    assert frame.startswith(prefix)
    verb = b"HPUB " if prefix.startswith(b"HMSG") else b"PUB "
    ops = Parser().feed(b'CONNECT {"headers":true}\r\n' + verb + subject + b" " + frame[len(prefix) :])
    assert ops[0][0] == CONNECT
    (op,) = flat(ops[1:])
    return op


def test_server_frames() -> None:
    assert enc.info({"a": 1, "b": "x"}) == b'INFO {"a":1,"b":"x"} \r\n'
    assert enc.err("Unknown Protocol Operation") == b"-ERR 'Unknown Protocol Operation'\r\n"
    assert enc.msg(b"foo", b"1", None, 0, b"hi") == b"MSG foo 1 2\r\nhi\r\n"
    assert enc.msg(b"foo", b"1", b"r", 0, b"hi") == b"MSG foo 1 r 2\r\nhi\r\n"
    assert (
        enc.msg(b"foo", b"1", b"r", 12, b"NATS/1.0\r\n\r\nhi")
        == b"HMSG foo 1 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    )
    assert (enc.PING, enc.PONG, enc.OK) == (b"PING\r\n", b"PONG\r\n", b"+OK\r\n")


def test_frames_are_spelled_as_nats_server_writes_them() -> None:
    assert (
        enc.msg(b"foo", b"1", None, 12, b"NATS/1.0\r\n\r\nhi")
        == b"HMSG foo 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    )
    assert enc.msg_prefix(b"a.b", b"7") == b"MSG a.b 7 "
    assert enc.msg_prefix(b"a.b", b"7", headers=True) == b"HMSG a.b 7 "
    # the publisher's own spelling of the sizes is echoed, as nats-server does
    assert enc.msg_tail(None, 0, b"hello", b"05") == b"05\r\nhello\r\n"
    assert enc.msg_tail(b"r", 12, b"NATS/1.0\r\n\r\nhi", b"12  14") == b"r 12  14\r\nNATS/1.0\r\n\r\nhi\r\n"


def test_the_no_responders_frame() -> None:
    assert NO_RESPONDERS == b"NATS/1.0 503\r\n\r\n"
    tail = enc.msg_tail(None, len(NO_RESPONDERS), NO_RESPONDERS)
    assert (
        enc.msg_prefix(b"_INBOX.a", b"1", headers=True) + tail
        == b"HMSG _INBOX.a 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
    )


@given(subjects, sids, replies, header_blocks, payloads)
def test_a_frame_is_its_prefix_then_its_tail_and_reads_back(
    subject: bytes, sid: bytes, reply: bytes | None, hdr: bytes, payload: bytes
) -> None:
    data = hdr + payload
    hdr_len = len(hdr)
    frame = enc.msg(subject, sid, reply, hdr_len, data)
    prefix = enc.msg_prefix(subject, sid, headers=hdr_len > 0)
    tail = enc.msg_tail(reply, hdr_len, data)
    assert frame == prefix + tail
    sizes = b"%d %d" % (hdr_len, len(data)) if hdr_len else b"%d" % len(data)
    assert enc.msg_tail(reply, hdr_len, data, sizes) == tail  # given sizes or spelled here: the same
    assert read_frames(frame) == [(subject, sid, reply, hdr_len, data)]
    assert as_published(frame, prefix, subject) == (PUB, subject, reply, hdr_len, data, sizes)


@given(st.lists(payloads, min_size=1, max_size=6), subjects, sids, st.booleans())
def test_a_run_frames_as_each_message_would(
    datas: list[bytes], subject: bytes, sid: bytes, exact: bool
) -> None:
    sizes = [b"%d" % len(d) for d in datas]
    tails = enc.msg_tails(sizes, datas)
    assert tails == [enc.msg_tail(None, 0, d, s) for d, s in zip(datas, sizes, strict=True)]
    shown = subject if exact else subject + b".x"  # a wildcard subscription sees other subjects
    out = bytearray(b"before")
    enc.append_run(out, enc.msg_prefix(shown, sid), tails)
    assert bytes(out) == b"before" + b"".join(enc.msg(shown, sid, None, 0, d) for d in datas)
    assert read_frames(bytes(out[6:])) == [(shown, sid, None, 0, d) for d in datas]


@given(
    st.lists(
        st.tuples(subjects, subjects.map(lambda s: b"$JS.ACK." + s), header_blocks, payloads), max_size=6
    ),
    sids,
    st.booleans(),
)
def test_a_batch_frames_as_each_message_would(
    msgs: list[tuple[bytes, bytes, bytes, bytes]], sid: bytes, headers: bool
) -> None:
    subjects_, replies_, hdrs, datas = (
        (list(col) for col in zip(*msgs, strict=True)) if msgs else ([], [], [], [])
    )
    for given_replies in (replies_, None):  # None: no message has a reply
        framed = enc.msg_batch(subjects_, sid, given_replies, hdrs, datas, headers)
        if headers:  # each with its header block
            expected = [(s, sid, r if given_replies else None, len(h), h + d) for s, r, h, d in msgs]
        else:  # header blocks stripped for a client that cannot take them
            expected = [(s, sid, r if given_replies else None, 0, d) for s, r, _h, d in msgs]
        assert framed == b"".join(enc.msg(*f) for f in expected)
        assert read_frames(framed) == expected


@pytest.mark.parametrize("headers", [True, False])
def test_a_batch_without_header_blocks_is_plain_msgs(headers: bool) -> None:
    framed = enc.msg_batch([b"a", b"b"], b"9", [b"r1", b"r2"], [b"", b""], [b"x", b"yz"], headers)
    assert framed == b"MSG a 9 r1 1\r\nx\r\nMSG b 9 r2 2\r\nyz\r\n"
