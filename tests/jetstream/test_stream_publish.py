"""Stream.process, the publish pipeline into one stream: the PubAck text nats-server sends, the
header-free path and the header checks answering the same way as before the fast path."""

from __future__ import annotations

from typing import Any

import msgspec

from jetpy.jetstream.models import PubAck, PubAckError, StreamConfig, decode, encode
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


def _same_document(ack: bytes, model: type[PubAck] | type[PubAckError]) -> None:
    """``ack`` decodes into ``model`` and re-encodes to the same fields, values and order: the
    model describes exactly what the byte template writes."""
    sent = msgspec.json.decode(ack)
    again = msgspec.json.decode(encode(decode(ack, model)))
    assert list(again.items()) == list(sent.items()), (ack, model)


def test_every_pub_ack_form_decodes_with_the_models() -> None:
    """The PubAcks are written from byte templates (nats-server's spacing); each form a stream
    sends is read back by ``PubAck`` / ``PubAckError``, so the models cannot drift from them."""
    s = stream(duplicate_window=60_000_000_000, max_msg_size=64)
    hdr = b"NATS/1.0\r\nNats-Msg-Id: m1\r\n\r\n"
    oks = [
        s.process(b"s.a", b"", b"one", NS).ack,  # the header-free path
        s.process(b"s.a", hdr, hdr + b"two", NS).ack,  # the checked path
        stream("a%d").process(b"s.x", b"", b"hi", NS).ack,
    ]
    dup = s.process(b"s.a", hdr, hdr + b"again", NS + 1).ack
    wrong = b"NATS/1.0\r\nNats-Expected-Stream: T\r\n\r\n"
    last = b"NATS/1.0\r\nNats-Expected-Last-Sequence: 9\r\n\r\n"
    full = stream(max_msgs=1, discard="new")
    full.process(b"s.a", b"", b"a", NS)
    errors = [
        s.process(b"s.a", wrong, wrong + b"x", NS).ack,  # decided: expected stream
        s.process(b"s.a", last, last + b"x", NS).ack,  # decided: wrong last sequence
        s.process(b"s.a", b"", b"x" * 65, NS).ack,  # decided: size
        full.process(b"s.a", b"", b"b", NS).ack,  # applied: the store refused it
    ]
    for ack in oks:
        _same_document(ack, PubAck)
        assert decode(ack, PubAck).duplicate is False
    _same_document(dup, PubAck)
    assert decode(dup, PubAck) == PubAck(stream="S", seq=2, duplicate=True)
    for ack in errors:
        _same_document(ack, PubAckError)
        err = decode(ack, PubAckError)
        assert (err.stream, err.seq) == ("S", 0)
    assert [decode(a, PubAckError).error.err_code for a in errors] == [10060, 10071, 10054, 10077]
