"""Per-message TTL and subject delete markers: the store contract (memory and file), clock injected.

Times are plain integers (nanoseconds); ``ttl`` is what the stream derives from ``Nats-TTL``
(the header must be there too: the file store reads it back on recovery).
"""

from __future__ import annotations

import pytest

from jetpy.gotime import go_duration, parse_go_duration
from jetpy.protocol.headers import get_header
from jetpy.store import StoreLimits, StreamStore
from jetpy.store.ttl import (
    TTL_NEVER,
    is_marker,
    marker_headers,
    msg_ttl,
    parse_ttl,
)

from .conftest import MakeStore, Reopen

S = 1_000_000_000
T0 = 1_000 * S


def ttl_hdr(value: str) -> bytes:
    return f"NATS/1.0\r\nNats-TTL: {value}\r\n\r\n".encode()


def put(store: StreamStore, subject: str, ts: int, ttl: str | None = None, data: bytes = b"x") -> int:
    hdr = ttl_hdr(ttl) if ttl is not None else b""
    seq, _ = store.store_msg(subject, hdr, data, ts, msg_ttl(hdr))
    return seq


def live(store: StreamStore) -> list[int]:
    st = store.state()
    return [s for s in range(st.first_seq, st.last_seq + 1) if store.load_msg(s) is not None]


# ------------------------------------------------------------------------------ the header grammar


@pytest.mark.parametrize(
    ("raw", "ns"),
    [
        ("1s", S),
        ("1.9s", S),
        ("2", 2 * S),
        ("1m", 60 * S),
        ("1h30m", 5400 * S),
        ("never", TTL_NEVER),
        ("NEVER", TTL_NEVER),
        ("00", 0),
        ("90000ms", 90 * S),
    ],
)
def test_parse_ttl_accepts_what_nats_server_accepts(raw: str, ns: int) -> None:
    assert parse_ttl(raw.encode()) == ns


@pytest.mark.parametrize("raw", ["0", "500ms", "abc", "1x", "-5", "+5", "-1s", "", "1.5", "s"])
def test_parse_ttl_refuses_what_nats_server_refuses(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_ttl(raw.encode())


def test_go_durations_both_ways() -> None:
    assert parse_go_duration("1h2m3.5s") == 3723 * S + S // 2
    assert parse_go_duration("-1.5m") == -90 * S
    assert parse_go_duration("0") == 0
    assert [go_duration(n * S) for n in (1, 59, 60, 61, 3600, 3661)] == [
        "1s",
        "59s",
        "1m0s",
        "1m1s",
        "1h0m0s",
        "1h1m1s",
    ]
    for bad in ("", "1", "1d", ".s", "1s2"):
        with pytest.raises(ValueError):
            parse_go_duration(bad)


def test_marker_headers_and_what_counts_as_a_marker() -> None:
    hdr = marker_headers(5 * S)
    assert hdr == b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 5s\r\n\r\n"
    assert is_marker(hdr) and msg_ttl(hdr) == 5 * S
    assert is_marker(b"NATS/1.0\r\nKV-Operation: PURGE\r\nNats-TTL: 1\r\n\r\n")
    assert is_marker(b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n")
    assert not is_marker(b"NATS/1.0\r\nKV-Operation: PUT\r\n\r\n") and not is_marker(b"")


# ------------------------------------------------------------------------------ expiry


def test_ttl_expires_a_message_on_its_own(store: StreamStore) -> None:
    put(store, "a", T0)
    short = put(store, "b", T0, "2s")
    put(store, "c", T0, "1m")
    assert store.next_expiry() == T0 + 2 * S
    assert store.expire(T0 + 2 * S - 1) == 0
    assert store.expire(T0 + 2 * S) == 1
    assert store.load_msg(short) is None and live(store) == [1, 3]
    assert store.next_expiry() == T0 + 60 * S
    assert store.expire(T0 + 3600 * S) == 1
    assert live(store) == [1] and store.next_expiry() is None  # no max_age: the plain one stays


def test_ttl_and_max_age_whichever_comes_first(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_age=10 * S))
    put(store, "a", T0)  # max_age: T0 + 10s
    put(store, "b", T0 + S, "2s")  # its TTL: T0 + 3s
    put(store, "c", T0 + S, "1h")  # a TTL longer than max_age: max_age wins (T0 + 11s)
    assert store.next_expiry() == T0 + 3 * S
    assert store.expire(T0 + 3 * S) == 1 and live(store) == [1, 3]
    assert store.next_expiry() == T0 + 10 * S
    assert store.expire(T0 + 11 * S) == 2 and live(store) == []


def test_never_is_exempt_from_max_age(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_age=10 * S))
    keep = put(store, "schema", T0, "never")
    put(store, "a", T0 + S)
    put(store, "b", T0 + 2 * S)
    assert store.next_expiry() == T0 + 11 * S  # the first message max_age can remove
    assert store.expire(T0 + 11 * S) == 1
    assert live(store) == [keep, 3]
    assert store.expire(T0 + 100 * S) == 1
    assert live(store) == [keep] and store.next_expiry() is None
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (1, keep, 3)


def test_removed_and_purged_ttl_messages_leave_no_stale_expiry(store: StreamStore) -> None:
    a = put(store, "a", T0, "5s")
    put(store, "b", T0, "9s")
    store.remove_msg(a)
    assert store.next_expiry() == T0 + 9 * S
    store.purge()
    assert store.next_expiry() is None and store.expire(T0 + 100 * S) == 0
    put(store, "n", T0, "never")
    store.compact(store.state().last_seq + 1)
    assert store.state().msgs == 0 and store.next_expiry() is None


def test_ttl_survives_restart(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store(StoreLimits(max_age=60 * S))
    put(store, "never", T0, "never")
    put(store, "short", T0, "3s")
    gone = put(store, "gone", T0, "4s")
    put(store, "plain", T0 + S)
    store.remove_msg(gone)
    store = reopen(store)
    assert store.next_expiry() == T0 + 3 * S
    assert store.expire(T0 + 3 * S) == 1
    assert store.next_expiry() == T0 + 61 * S  # "never" at the head is still exempt
    assert store.expire(T0 + 1000 * S) == 1
    assert [m.subject for s in live(store) if (m := store.load_msg(s))] == ["never"]


# ------------------------------------------------------------------------------ subject delete markers


def test_expiry_leaves_a_marker_on_an_emptied_subject(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store(StoreLimits(max_msgs_per_subject=5, subject_delete_marker_ttl=2 * S))
    put(store, "k.eph", T0, "1s")
    put(store, "k.two", T0, "1s")
    put(store, "k.two", T0)  # not the last of its subject: no marker
    assert store.expire(T0 + S) == 2
    st = store.state()
    assert (st.msgs, st.last_seq) == (2, 4)
    marker = store.load_msg(4)
    assert marker is not None and (marker.subject, marker.data, marker.ts) == ("k.eph", b"", T0 + S)
    assert get_header(marker.hdr, b"Nats-Marker-Reason") == b"MaxAge"
    assert get_header(marker.hdr, b"Nats-TTL") == b"2s"
    store = reopen(store)
    # the marker expires by its own TTL, and leaves no marker of its own
    assert store.next_expiry() == T0 + 3 * S
    assert store.expire(T0 + 3 * S) == 1
    st = store.state()
    assert (st.msgs, st.last_seq) == (1, 4) and store.load_msg(3) is not None


def test_max_age_expiry_leaves_markers_too(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_age=5 * S, subject_delete_marker_ttl=60 * S))
    put(store, "a", T0)
    put(store, "b", T0)
    put(store, "b", T0 + 10 * S)
    assert store.expire(T0 + 5 * S) == 2
    assert store.subjects_state(">") == {"a": 1, "b": 1}
    m = store.load_last_msg("a")
    assert m is not None and m.seq == 4 and is_marker(m.hdr)
    # a KV purge (itself a "gone" marker) expiring leaves nothing behind
    put(store, "p", T0 + 10 * S, "1s")
    store.store_msg(
        "q",
        b"NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\nNats-TTL: 1\r\n\r\n",
        b"",
        T0 + 10 * S,
        S,
    )
    assert store.expire(T0 + 11 * S) == 2
    assert store.load_last_msg("q") is None
    last_p = store.load_last_msg("p")
    assert last_p is not None and is_marker(last_p.hdr)


def test_no_markers_without_a_marker_ttl(store: StreamStore) -> None:
    put(store, "a", T0, "1s")
    assert store.expire(T0 + S) == 1
    st = store.state()
    assert (st.msgs, st.last_seq) == (0, 1)
