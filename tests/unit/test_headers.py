"""NATS header blocks (ADR-4): parsing (lenient), building (strict), the fast single-key lookup,
and the server-side frames of jetpy.protocol.encode."""

from __future__ import annotations

from jetpy.protocol.headers import Headers, encode_headers, get_header, parse_headers


def test_parse_keys_values_and_repeats() -> None:
    h = parse_headers(b"NATS/1.0\r\nFoo: bar\r\nfoo: baz\r\nX-Multi: 1\r\nX-Multi: 2\r\n\r\n")
    assert h.status == 0 and h.description == ""
    assert h.items == [("Foo", "bar"), ("foo", "baz"), ("X-Multi", "1"), ("X-Multi", "2")]
    assert h.get("Foo") == "bar"
    assert h.get("foo") == "baz"  # the exact case first
    assert h.get("FOO") == "bar"  # then case-insensitively, the first
    assert h.get("missing") is None
    assert h.get_all("X-Multi") == ["1", "2"]


def test_parse_status_lines() -> None:
    assert parse_headers(b"NATS/1.0 503\r\n\r\n") == Headers(503, "", [])
    h = parse_headers(b"NATS/1.0 404 No Messages\r\n\r\n")
    assert (h.status, h.description) == (404, "No Messages")
    h = parse_headers(b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n")
    assert (h.status, h.description, h.get("Nats-Last-Consumer")) == (100, "Idle Heartbeat", "3")
    assert parse_headers(b"NATS/1.0 abc\r\n\r\n").status == 0


def test_parse_is_lenient() -> None:
    h = parse_headers(b"NATS/1.0\r\nno colon here\r\n: empty key\r\nGood:  spaced  \r\n\r\n")
    assert h.items == [("Good", "spaced")]
    assert parse_headers(b"").items == []
    assert parse_headers(b"garbage\xff").items == []


def test_values_may_hold_colons() -> None:
    assert parse_headers(b"NATS/1.0\r\nUrl: http://x:1/y\r\n\r\n").get("Url") == "http://x:1/y"


def test_encode_round_trips() -> None:
    items = [("A", "1"), ("a", "2"), ("Multi", "x"), ("Multi", "y")]
    block = encode_headers(items)
    assert block == b"NATS/1.0\r\nA: 1\r\na: 2\r\nMulti: x\r\nMulti: y\r\n\r\n"
    assert parse_headers(block).items == items
    assert encode_headers({"K": "v"}) == b"NATS/1.0\r\nK: v\r\n\r\n"
    assert encode_headers([], 503) == b"NATS/1.0 503\r\n\r\n"
    status = encode_headers([("Nats-Subject", "x")], 408, "Request Timeout")
    assert parse_headers(status) == Headers(408, "Request Timeout", [("Nats-Subject", "x")])


def test_without_drops_keys() -> None:
    h = Headers(0, "", [("A", "1"), ("B", "2"), ("A", "3")])
    assert h.without("A").items == [("B", "2")]
    assert h.items == [("A", "1"), ("B", "2"), ("A", "3")]


def test_get_header_fast_path() -> None:
    block = b"NATS/1.0\r\nNats-Msg-Id: abc\r\nNats-Expected-Stream: S \r\n\r\n"
    assert get_header(block, b"Nats-Msg-Id") == b"abc"
    assert get_header(block, b"Nats-Expected-Stream") == b"S"
    assert get_header(block, b"nats-msg-id") is None  # exact case only
    assert get_header(block, b"Missing") is None
    assert get_header(b"NATS/1.0\r\nK: v", b"K") == b"v"  # no trailing CRLF


def test_status_only_blocks() -> None:
    assert encode_headers([], 503) == b"NATS/1.0 503\r\n\r\n"
    assert encode_headers({"K": "v"}, 404, "No Messages") == b"NATS/1.0 404 No Messages\r\nK: v\r\n\r\n"
