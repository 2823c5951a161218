"""Stream.process, the publish pipeline into one stream: the PubAck text nats-server sends, the
header-free path and the header checks answering the same way as before the fast path."""

from __future__ import annotations

from typing import Any

import msgspec

from jetpy.jetstream.models import StreamConfig
from jetpy.jetstream.stream import Stream, limits_of, pub_ack
from jetpy.jetstream.validate import check_stream_config
from jetpy.store.base import StoreConfig, StoredMsg
from jetpy.store.memory import MemoryStore

NS = 1_700_000_000_000_000_000


def stream(name: str = "S", **cfg: Any) -> Stream:
    config = check_stream_config(StreamConfig(name=name, subjects=["s.>"], storage="memory", **cfg))
    store = MemoryStore(StoreConfig(name=name, storage="memory", limits=limits_of(config)))
    return Stream(config, store, NS)


def error_code(ack: bytes) -> int:
    err: dict[str, int] = msgspec.json.decode(ack)["error"]
    return err["err_code"]


def test_pub_acks_are_nats_server_s_text() -> None:
    assert pub_ack("S", 7) == b'{"stream":"S", "seq":7}'
    assert pub_ack("S", 7, duplicate=True) == b'{"stream":"S", "seq":7,"duplicate": true}'
    # a name is written as is, even one that looks like a format directive
    assert pub_ack("a%db%%", 3) == b'{"stream":"a%db%%", "seq":3}'
    s = stream("a%d")
    assert s.process(b"s.x", b"", b"hi", NS).ack == b'{"stream":"a%d", "seq":1}'


def test_a_message_without_headers_is_stored_and_acked() -> None:
    s = stream()
    res = s.process(b"s.a", b"", b"one", NS)
    assert res.ack == b'{"stream":"S", "seq":1}'
    assert res.durable_seq == 0  # a memory stream acks at once
    assert res.stored == StoredMsg("s.a", 1, NS, b"", b"one")
    assert res.expires == 0
    assert s.process(b"s.a", b"", b"two", NS + 1).stored == StoredMsg("s.a", 2, NS + 1, b"", b"two")
    assert s.store.load_msg(2) == StoredMsg("s.a", 2, NS + 1, b"", b"two")


def test_headers_are_checked_and_stored_apart_from_the_payload() -> None:
    s = stream(duplicate_window=60_000_000_000)
    hdr = b"NATS/1.0\r\nNats-Msg-Id: m1\r\n\r\n"
    res = s.process(b"s.a", hdr, hdr + b"body", NS)
    assert res.ack == b'{"stream":"S", "seq":1}'
    assert res.stored == StoredMsg("s.a", 1, NS, hdr, b"body")
    dup = s.process(b"s.a", hdr, hdr + b"again", NS + 1)
    assert dup.ack == b'{"stream":"S", "seq":1,"duplicate": true}'
    assert dup.stored is None
    wrong = b"NATS/1.0\r\nNats-Expected-Stream: T\r\n\r\n"
    res = s.process(b"s.a", wrong, wrong + b"x", NS)
    assert res.stored is None and error_code(res.ack) == 10060  # stream name mismatch


def test_limits_answer_with_errors() -> None:
    s = stream(max_msg_size=3)
    assert error_code(s.process(b"s.a", b"", b"four", NS).ack) == 10054  # message size exceeds maximum
    assert s.process(b"s.a", b"", b"abc", NS).ack == b'{"stream":"S", "seq":1}'
    s = stream(max_msgs=1, discard="new")
    assert s.process(b"s.a", b"", b"a", NS).stored is not None
    res = s.process(b"s.a", b"", b"b", NS)
    assert res.stored is None and error_code(res.ack) == 10077  # store failed: maximum messages exceeded
