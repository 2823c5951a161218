"""The StreamStore contract: every backend must pass every test here (memory is the oracle)."""

from __future__ import annotations

import time
from typing import Literal

import pytest

from jetpy.store import (
    MAX_PAYLOAD,
    ConsumerState,
    ErrInvalidName,
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    ErrStoreClosed,
    SimpleState,
    StoredMsg,
    StoreLimits,
    StreamStore,
    msg_size,
)
from jetpy.store.filestore import FileStore
from jetpy.store.record import check_record, split_record
from jetpy.subjects import subject_matches

from .conftest import MakeStore, Reopen


def fill(store: StreamStore, subjects: list[str], n: int, payload: bytes = b"data") -> list[int]:
    """Store ``n`` messages round-robin over ``subjects`` with ts = seq (deterministic)."""
    seqs = []
    for i in range(n):
        seq, _ = store.store_msg(subjects[i % len(subjects)], b"", payload + str(i).encode(), ts=1000 + i)
        seqs.append(seq)
    return seqs


# ----------------------------------------------------------------------------- basics


def test_implements_protocol(store: StreamStore) -> None:
    assert isinstance(store, StreamStore)


def test_empty_state(store: StreamStore) -> None:
    st = store.state()
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq, st.first_ts, st.last_ts) == (0, 0, 0, 0, 0, 0)
    assert st.num_subjects == 0 and st.num_deleted == 0 and st.lost is None
    assert store.load_msg(1) is None
    assert store.load_next_msg("", 0) is None
    assert store.load_last_msg(">") is None
    assert store.filtered_state(0, "") == SimpleState()
    assert store.subjects_state(">") == {}
    assert store.num_pending(0, "", False) == 0
    assert store.next_expiry() is None


def test_first_seq_config(make_store: MakeStore) -> None:
    store = make_store(first_seq=100)
    st = store.state()
    assert (st.first_seq, st.last_seq) == (100, 99)
    assert store.store_msg("a", b"", b"x")[0] == 100
    assert store.state().first_seq == 100


def test_store_and_load_round_trip(store: StreamStore) -> None:
    before = time.time_ns()
    seq, ts = store.store_msg("orders.new", b"NATS/1.0\r\nK: v\r\n\r\n", b"\x00\xffpayload")
    assert seq == 1 and before <= ts <= time.time_ns()
    m = store.load_msg(1)
    assert m is not None
    assert (m.subject, m.seq, m.ts, m.hdr, m.data) == (
        "orders.new",
        1,
        ts,
        b"NATS/1.0\r\nK: v\r\n\r\n",
        b"\x00\xffpayload",
    )
    seq2, ts2 = store.store_msg("ünïcode.subj", b"", b"", ts=42)
    assert (seq2, ts2) == (2, 42)
    m2 = store.load_msg(2)
    assert m2 is not None and (m2.subject, m2.ts, m2.hdr, m2.data) == ("ünïcode.subj", 42, b"", b"")
    assert store.load_msg(0) is None and store.load_msg(3) is None and store.load_msg(-1) is None


def test_state_counts_bytes_and_timestamps(store: StreamStore) -> None:
    fill(store, ["a", "b.c", "d"], 30)
    st = store.state()
    kind = store.config.storage
    expected = sum(msg_size(kind, m.subject, m.hdr, m.data) for s in range(1, 31) if (m := store.load_msg(s)))
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq) == (30, expected, 1, 30)
    assert (st.first_ts, st.last_ts, st.num_subjects, st.num_deleted) == (1000, 1029, 3, 0)


def test_large_message_spans_block(store: StreamStore) -> None:
    big = bytes(range(256)) * 64  # larger than the file store's test block size
    fill(store, ["x"], 3)
    seq, _ = store.store_msg("big", b"h", big)
    fill(store, ["y"], 3)
    m = store.load_msg(seq)
    assert m is not None and m.data == big and m.hdr == b"h"
    assert store.state().msgs == 7


# ----------------------------------------------------------------------------- removal


def test_remove_msg(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)
    assert store.remove_msg(5) is True
    assert store.remove_msg(5) is False
    assert store.remove_msg(99) is False
    assert store.load_msg(5) is None
    st = store.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted, st.deleted) == (9, 1, 10, 1, [5])
    assert store.remove_msg(1)
    st = store.state(deleted_details=True)
    assert (st.first_seq, st.first_ts, st.deleted) == (2, 1001, [5])
    assert store.remove_msg(10)
    st = store.state(deleted_details=True)
    assert (st.last_seq, st.last_ts, st.deleted, st.msgs) == (10, 1009, [5, 10], 7)
    assert store.store_msg("a", b"", b"z")[0] == 11


def test_remove_everything_keeps_last_seq(store: StreamStore) -> None:
    fill(store, ["a"], 5)
    for s in range(1, 6):
        assert store.remove_msg(s)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted, st.bytes) == (0, 6, 5, 0, 0)
    assert store.store_msg("a", b"", b"again")[0] == 6


def test_erase_msg(store: StreamStore) -> None:
    fill(store, ["a"], 4)
    assert store.erase_msg(2) is True
    assert store.erase_msg(2) is False
    assert store.load_msg(2) is None
    assert store.state().msgs == 3


def test_subject_bookkeeping_after_removals(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)  # a: 1,3,5,7,9  b: 2,4,6,8,10
    store.remove_msg(9)
    last_a = store.load_last_msg("a")
    assert last_a is not None and last_a.seq == 7
    store.remove_msg(1)
    next_a = store.load_next_msg("a", 0)
    assert next_a is not None and next_a.seq == 3
    assert store.subjects_state(">") == {"a": 3, "b": 5}
    for s in (3, 5, 7):
        store.remove_msg(s)
    assert store.subjects_state(">") == {"b": 5}
    assert store.state().num_subjects == 1
    assert store.load_last_msg("a") is None


# ----------------------------------------------------------------------------- lookups


def test_load_next_msg_filters(store: StreamStore) -> None:
    fill(store, ["foo.a", "foo.b", "bar.a", "foo.c.d"], 20)

    def nxt(f: str, start: int) -> int | None:
        m = store.load_next_msg(f, start)
        return m.seq if m else None

    assert nxt("", 0) == 1 and nxt(">", 7) == 7
    assert nxt("foo.b", 0) == 2 and nxt("foo.b", 3) == 6 and nxt("foo.b", 19) is None
    assert nxt("foo.*", 3) == 5 and nxt("foo.*", 4) == 5
    assert nxt("foo.>", 3) == 4 and nxt("*.a", 2) == 3
    assert nxt("nope", 0) is None and nxt("foo.*.*", 0) == 4
    store.remove_msg(6)
    assert nxt("foo.b", 3) == 10
    assert nxt("", 21) is None


def test_load_next_msg_many_subjects(store: StreamStore) -> None:
    subjects = [f"s.{i}" for i in range(40)]
    fill(store, subjects, 200)
    m = store.load_next_msg("s.*", 150)
    assert m is not None and m.seq == 150
    for s in range(150, 160):
        store.remove_msg(s)
    m = store.load_next_msg("s.*", 150)
    assert m is not None and m.seq == 160


def _one_by_one(store: StreamStore, f: str, start: int, n: int) -> list[StoredMsg]:
    out: list[StoredMsg] = []
    while len(out) < n:
        m = store.load_next_msg(f, start)
        if m is None:
            break
        out.append(m)
        start = m.seq + 1
    return out


@pytest.mark.parametrize("flush", [False, True])
def test_load_next_batch_matches_load_next_msg(store: StreamStore, flush: bool) -> None:
    """The bulk read returns exactly what reading one by one would: across blocks, around
    deleted and erased messages, with headers, from the write buffer and from disk."""
    for i in range(120):
        hdr = b"NATS/1.0\r\nK: %d\r\n\r\n" % i if i % 7 == 0 else b""
        store.store_msg(["a.x", "b.y", "a.z"][i % 3], hdr, b"payload-%d" % i * (1 + i % 5), ts=1000 + i)
    for seq in (1, 2, 17, 40, 41, 42, 43, 99):
        store.remove_msg(seq)
    store.erase_msg(60)
    if flush:
        store.flush()
    for f in ("", ">", "a.*", "b.y", "a.x", "nope"):
        for start in (0, 1, 3, 17, 44, 59, 60, 118, 120, 121):
            for n in (1, 5, 64, 500):
                assert store.load_next_batch(f, start, n) == _one_by_one(store, f, start, n), (f, start, n)
    assert store.load_next_batch("", 1, 0) == []


def _records(store: StreamStore, start: int, end: int, filters: list[str], max_bytes: int) -> list[StoredMsg]:
    """Every message ``read_records`` hands out from ``start`` to ``end``, call after call, each
    record checked by the codec (magic, flags, CRC) and each call held to its bounds."""
    out: list[StoredMsg] = []
    largest = 0
    while True:
        r = store.read_records(start, end, filters, max_bytes)
        area = b"".join(r.parts)
        assert r.size == len(area)
        for off in r.offsets:
            pos = off - r.base
            fields = check_record(area, pos, len(area))
            assert fields is not None and fields[1] == 0, (start, off)  # a whole message record
            subject, hdr, data = split_record(area, pos, fields)
            out.append(StoredMsg(subject.decode(), fields[2], fields[3], hdr, data))
            largest = max(largest, fields[0] + 4)
        assert r.size < max_bytes + largest or len(r.offsets) <= 1
        last = min(end, store.state().last_seq)
        assert r.next_seq > start or start > last  # progress, unless there is nothing to read
        if r.next_seq > last:
            return out
        start = r.next_seq


@pytest.mark.parametrize("flush", [False, True])
def test_read_records_matches_load_next_msg(store: StreamStore, flush: bool) -> None:
    """The bulk read hands out exactly the live messages one-by-one reads return, as records:
    across blocks, around deleted and erased messages, with headers, filtered, bounded."""
    for i in range(120):
        hdr = b"NATS/1.0\r\nK: %d\r\n\r\n" % i if i % 7 == 0 else b""
        store.store_msg(["a.x", "b.y", "a.z"][i % 3], hdr, b"payload-%d" % i * (1 + i % 5), ts=1000 + i)
    for seq in (1, 2, 17, 40, 41, 42, 43, 99):
        store.remove_msg(seq)
    store.erase_msg(60)
    if flush:
        store.flush()
    for filters in ([], [">"], ["a.*"], ["b.y"], ["a.x", "b.y"], ["nope"], ["a.x", "a.*"]):
        for start, end in ((0, 200), (1, 120), (3, 59), (44, 44), (60, 60), (118, 500), (121, 130)):
            want = [
                m
                for m in _one_by_one(store, ">", start, 1000)
                if m.seq <= end and (not filters or any(subject_matches(f, m.subject) for f in filters))
            ]
            for max_bytes in (1, 200, 1 << 20):
                got = _records(store, start, end, filters, max_bytes)
                assert got == want, (filters, start, end, max_bytes)


def test_read_records_bounds(store: StreamStore) -> None:
    fill(store, ["a", "b"], 50)
    r = store.read_records(10, 20, [], 1 << 20)
    assert r.offsets[0] - r.base == 0 and len(r.offsets) == 11 and r.next_seq == 21
    r = store.read_records(45, 1000, [], 1 << 20)  # past the end: up to the last message
    assert len(r.offsets) == 6 and r.next_seq == 51
    assert store.read_records(60, 70, [], 1 << 20).next_seq == 60  # nothing there yet
    r = store.read_records(1, 50, [], 1)  # one record at least, then stop
    assert len(r.offsets) == 1 and r.next_seq == 2
    r = store.read_records(1, 50, ["c"], 1 << 20)  # no subject matches
    assert not r.offsets and r.size == 0 and r.next_seq == 51
    store.purge()
    assert store.read_records(1, 50, [], 1 << 20).offsets.tolist() == []


def test_load_last_msg(store: StreamStore) -> None:
    fill(store, ["a.1", "a.2", "b"], 9)
    last = store.load_last_msg("")
    assert last is not None and last.seq == 9
    m = store.load_last_msg("a.*")
    assert m is not None and m.seq == 8
    m = store.load_last_msg("a.1")
    assert m is not None and m.seq == 7 and m.subject == "a.1"
    store.remove_msg(9)
    last = store.load_last_msg(">")
    assert last is not None and last.seq == 8


def test_filtered_state(store: StreamStore) -> None:
    fill(store, ["a", "b", "c.x"], 12)  # a: 1,4,7,10  b: 2,5,8,11  c.x: 3,6,9,12
    assert store.filtered_state(0, "") == SimpleState(12, 1, 12)
    assert store.filtered_state(5, ">") == SimpleState(8, 5, 12)
    assert store.filtered_state(0, "a") == SimpleState(4, 1, 10)
    assert store.filtered_state(5, "a") == SimpleState(2, 7, 10)
    assert store.filtered_state(11, "a") == SimpleState()
    assert store.filtered_state(0, "c.*") == SimpleState(4, 3, 12)
    assert store.filtered_state(0, "*") == SimpleState(8, 1, 11)
    store.remove_msg(7)
    assert store.filtered_state(5, "a") == SimpleState(1, 10, 10)
    assert store.filtered_state(13, "") == SimpleState()


def test_subjects_state(store: StreamStore) -> None:
    fill(store, ["a.1", "a.2", "b.1"], 7)
    assert store.subjects_state("") == {"a.1": 3, "a.2": 2, "b.1": 2}
    assert store.subjects_state("a.*") == {"a.1": 3, "a.2": 2}
    assert store.subjects_state("*.1") == {"a.1": 3, "b.1": 2}
    assert store.subjects_state("b.1") == {"b.1": 2}
    assert store.subjects_state("zzz") == {}


def test_num_pending(store: StreamStore) -> None:
    fill(store, ["a", "b", "c"], 9)  # a: 1,4,7  b: 2,5,8  c: 3,6,9
    assert store.num_pending(0, "", False) == 9
    assert store.num_pending(4, "", False) == 6
    assert store.num_pending(4, "a", False) == 2
    assert store.num_pending(4, "*", False) == 6
    assert store.num_pending(8, "a", False) == 0
    assert store.num_pending(0, "", True) == 3
    assert store.num_pending(8, "", True) == 2
    assert store.num_pending(8, "a", True) == 0
    assert store.num_pending(10, "", False) == 0
    store.remove_msg(5)
    assert store.num_pending(3, "b", False) == 1


# ----------------------------------------------------------------------------- purge / compact


def test_purge_all(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)
    assert store.purge() == 10
    st = store.state()
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq, st.num_subjects, st.last_ts) == (
        0,
        0,
        11,
        10,
        0,
        1009,
    )
    assert store.purge() == 0
    assert store.store_msg("a", b"", b"x")[0] == 11
    assert store.state().first_seq == 11


def test_purge_subject(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)
    assert store.purge("a") == 5
    assert store.subjects_state(">") == {"b": 5}
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (5, 2, 10)


def test_purge_wildcard_with_keep(store: StreamStore) -> None:
    fill(store, ["x.a", "x.b", "y"], 12)
    assert store.purge("x.*", keep=3) == 5  # 8 x.* msgs, keep the 3 newest
    assert [m.seq for s in range(1, 13) if (m := store.load_msg(s)) and m.subject != "y"] == [8, 10, 11]
    assert store.purge("x.*", keep=5) == 0


def test_purge_subject_up_to_seq(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)  # a: 1,3,5,7,9
    assert store.purge("a", seq=6) == 3  # removes 1, 3, 5 (strictly below 6)
    assert store.subjects_state("a") == {"a": 2}
    assert store.purge("a", seq=100, keep=1) == 1
    remaining = store.load_last_msg("a")
    assert remaining is not None and remaining.seq == 9 and store.subjects_state("a") == {"a": 1}
    assert store.purge("a", seq=1) == 1  # seq 1 means no bound, as 0 (nats-server PurgeEx)
    assert store.subjects_state("a") == {} and store.subjects_state("b") == {"b": 5}


def test_purge_all_with_seq_is_compact(store: StreamStore) -> None:
    fill(store, ["a"], 10)
    assert store.purge("", seq=4) == 3
    assert store.state().first_seq == 4
    assert store.purge(">", seq=1) == 7  # seq 1 is no bound: everything goes (nats-server)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 11, 10)


def test_purge_all_with_keep(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)
    store.remove_msg(9)
    assert store.purge(keep=3) == 6  # newest three live: 7, 8, 10
    st = store.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.deleted) == (3, 7, [9])
    assert store.purge(keep=10) == 0


def test_compact(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)
    assert store.compact(1) == 0
    assert store.compact(5) == 4
    st = store.state()
    assert (st.msgs, st.first_seq, st.first_ts) == (6, 5, 1004)
    assert store.compact(3) == 0
    assert store.subjects_state(">") == {"a": 3, "b": 3}
    assert store.compact(11) == 6
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 11, 10)


def test_compact_beyond_end(store: StreamStore) -> None:
    fill(store, ["a"], 5)
    assert store.compact(100) == 5
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 100, 99)
    assert store.store_msg("a", b"", b"x")[0] == 100
    assert store.state().first_seq == 100


# ----------------------------------------------------------------------------- limits


def _storage(kind: str) -> Literal["file", "memory"]:
    return "memory" if kind == "memory" else "file"


def test_max_msgs_discard_old(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_msgs=5))
    fill(store, ["a"], 12)
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (5, 8, 12)


def test_max_bytes_discard_old(make_store: MakeStore, kind: str) -> None:
    one = msg_size(_storage(kind), "a", b"", b"data0")
    store = make_store(StoreLimits(max_bytes=one * 3))
    fill(store, ["a"], 8)
    st = store.state()
    assert (st.msgs, st.bytes, st.first_seq) == (3, one * 3, 6)


def test_max_msgs_per_subject_discard_old(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_msgs_per_subject=2))
    fill(store, ["a", "b", "c"], 12)
    assert store.subjects_state(">") == {"a": 2, "b": 2, "c": 2}
    st = store.state(deleted_details=True)
    assert (st.msgs, st.first_seq) == (6, 7)
    store.store_msg("a", b"", b"new")
    assert store.subjects_state("a") == {"a": 2}
    st = store.state(deleted_details=True)
    assert (st.first_seq, st.deleted) == (8, [])
    store.store_msg("b", b"", b"new")
    st = store.state(deleted_details=True)
    assert (st.first_seq, st.deleted) == (9, [])  # b's oldest (8) was the stream's first
    store.store_msg("a", b"", b"newer")
    st = store.state(deleted_details=True)
    assert (st.first_seq, st.deleted, st.msgs) == (9, [10], 6)  # a's oldest (10) was interior


def test_kv_style_latest_per_subject(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_msgs_per_subject=1))
    for rnd in range(30):
        for k in range(5):
            store.store_msg(f"kv.{k}", b"", f"{k}:{rnd}".encode(), ts=rnd)
    assert store.state().msgs == 5
    for k in range(5):
        m = store.load_last_msg(f"kv.{k}")
        assert m is not None and m.data == f"{k}:29".encode()


def test_discard_new_max_msgs(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_msgs=3, discard="new"))
    fill(store, ["a"], 3)
    with pytest.raises(ErrMaxMsgs) as exc:
        store.store_msg("a", b"", b"x")
    assert str(exc.value) == "maximum messages exceeded"
    st = store.state()
    assert (st.msgs, st.last_seq) == (3, 3)


def test_discard_new_max_bytes(make_store: MakeStore, kind: str) -> None:
    one = msg_size(_storage(kind), "a", b"", b"data0")
    store = make_store(StoreLimits(max_bytes=one * 2, discard="new"))
    fill(store, ["a"], 2)  # the payload check passes; the total is then exactly max_bytes
    with pytest.raises(ErrMaxBytes) as exc:
        store.store_msg("a", b"", b"data2")
    assert str(exc.value) == "maximum bytes exceeded"
    assert store.state().msgs == 2


def test_discard_new_refuses_when_payload_reaches_max_bytes(make_store: MakeStore, kind: str) -> None:
    # nats-server 2.9: refused when bytes + payload would *reach* max_bytes (>=)
    one = msg_size(_storage(kind), "a", b"", b"data0")
    store = make_store(StoreLimits(max_bytes=one + 5, discard="new"))
    store.store_msg("a", b"", b"data0")
    with pytest.raises(ErrMaxBytes):
        store.store_msg("a", b"", b"data1")
    assert store.state().msgs == 1


def test_discard_new_accepted_message_can_push_out_the_oldest(make_store: MakeStore, kind: str) -> None:
    # the payload fits under max_bytes, the accounted size does not: nats-server stores it and
    # then enforces max_bytes by removing the oldest message, discard policy notwithstanding
    one = msg_size(_storage(kind), "a", b"", b"data0")
    store = make_store(StoreLimits(max_bytes=one + 6, discard="new"))
    store.store_msg("a", b"", b"data0")
    seq, _ = store.store_msg("a", b"", b"data1")
    st = store.state()
    assert (seq, st.msgs, st.first_seq, st.bytes) == (2, 1, 2, one)


def test_discard_new_replaces_at_subject_limit(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_msgs=4, max_msgs_per_subject=2, discard="new"))
    fill(store, ["a", "b"], 4)
    seq, _ = store.store_msg("a", b"", b"replace")  # at max_msgs, but it replaces a's oldest
    assert seq == 5 and store.state().msgs == 4
    with pytest.raises(ErrMaxMsgs):
        store.store_msg("c", b"", b"x")


def test_discard_new_per_subject(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_msgs_per_subject=2, discard="new", discard_new_per_subject=True))
    fill(store, ["a"], 2)
    with pytest.raises(ErrMaxMsgsPerSubject) as exc:
        store.store_msg("a", b"", b"x")
    assert str(exc.value) == "maximum messages per subject exceeded"
    assert store.store_msg("b", b"", b"x")[0] == 3


def test_max_msg_size(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_msg_size=10))
    store.store_msg("a", b"12345", b"67890")
    with pytest.raises(ErrMsgTooLarge):
        store.store_msg("a", b"12345", b"678901")
    with pytest.raises(ErrMsgTooLarge):
        store.store_msg("a" * 70000, b"", b"")
    assert store.state().msgs == 1 and store.state().last_seq == 1


def test_hard_payload_cap(store: StreamStore) -> None:
    with pytest.raises(ErrMsgTooLarge):
        store.store_msg("a", b"", bytes(MAX_PAYLOAD + 1))


def test_update_limits(store: StreamStore) -> None:
    fill(store, ["a", "b"], 10)
    store.update_limits(StoreLimits(max_msgs_per_subject=3))
    assert store.subjects_state(">") == {"a": 3, "b": 3}
    store.update_limits(StoreLimits(max_msgs=2))
    st = store.state()
    assert (st.msgs, st.first_seq) == (2, 9)
    assert store.config.limits.max_msgs == 2
    # lowered limits apply at once whatever the discard policy (nats-server's UpdateConfig)
    store.update_limits(StoreLimits(max_msgs=1, discard="new"))
    st = store.state()
    assert (st.msgs, st.first_seq) == (1, 10)
    with pytest.raises(ErrMaxMsgs):
        store.store_msg("a", b"", b"data", ts=2000)
    one = msg_size(store.config.storage, "b", b"", b"data9")
    store.update_limits(StoreLimits(max_bytes=one))  # exactly at the limit: kept
    assert store.state().msgs == 1
    store.update_limits(StoreLimits(max_bytes=one - 1))
    st = store.state()
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq) == (0, 0, 11, 10)


def test_expire(make_store: MakeStore) -> None:
    store = make_store(StoreLimits(max_age=100))
    for i in range(10):
        store.store_msg("a", b"", b"x", ts=1000 + 10 * i)  # ts 1000..1090
    assert store.next_expiry() == 1100
    assert store.expire(1099) == 0
    assert store.expire(1100) == 1
    assert store.next_expiry() == 1110
    assert store.expire(1150) == 5
    assert store.state().first_seq == 7
    assert store.expire(10_000) == 4
    assert store.next_expiry() is None
    st = store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 11, 10)


def test_expire_without_max_age(store: StreamStore) -> None:
    fill(store, ["a"], 3)
    assert store.expire(10**30) == 0 and store.next_expiry() is None


# ----------------------------------------------------------------------------- lifecycle


def test_flush_and_sync(store: StreamStore) -> None:
    fill(store, ["a"], 5)
    assert store.flush() == 5
    store.sync()
    fill(store, ["a"], 2)
    assert store.flush() == 7
    store.sync()
    store.sync()


def test_closed_store_refuses(store: StreamStore) -> None:
    fill(store, ["a"], 2)
    store.stop()
    store.stop()  # idempotent
    with pytest.raises(ErrStoreClosed) as exc:
        store.store_msg("a", b"", b"x")
    assert str(exc.value) == "store is closed"
    with pytest.raises(ErrStoreClosed):
        store.load_msg(1)
    with pytest.raises(ErrStoreClosed):
        store.state()


def test_survives_reopen(store: StreamStore, reopen: Reopen) -> None:
    fill(store, ["a", "b.x", "b.y"], 40)
    store.remove_msg(7)
    store.erase_msg(8)
    store.purge("b.y", keep=2)
    before = store.state(deleted_details=True)
    msgs = [store.load_msg(s) for s in range(1, 41)]
    store.flush()
    store.sync()
    store = reopen(store)
    assert store.state(deleted_details=True) == before
    assert [store.load_msg(s) for s in range(1, 41)] == msgs
    assert store.subjects_state(">") == {"a": 13, "b.x": 12, "b.y": 2}


# ----------------------------------------------------------------------------- consumers and metadata


def test_consumer_state_round_trip(store: StreamStore, reopen: Reopen) -> None:
    cs = store.consumer_store("dur1")
    assert cs.load() is None  # nothing stored yet
    st = ConsumerState(10, 20, 5, 15, {16: (6, 123), 18: (8, 456)}, {16: 2})
    cs.update(st)
    cs.write_meta(b'{"durable_name":"dur1"}')
    assert cs.load() == st
    assert store.consumer_names() == ["dur1"]
    store = reopen(store)
    cs = store.consumer_store("dur1")
    assert cs.load() == st
    assert cs.read_meta() == b'{"durable_name":"dur1"}'
    cs.delete()
    assert store.consumer_names() == []


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a\\b", "x\x00", "\n"])
def test_consumer_names_validated(store: StreamStore, bad: str) -> None:
    with pytest.raises(ErrInvalidName):
        store.consumer_store(bad)


def test_stream_meta(store: StreamStore, reopen: Reopen) -> None:
    assert store.read_meta() is None
    store.write_meta(b'{"name":"S"}')
    store.write_meta(b'{"name":"S","max_msgs":5}')
    store = reopen(store)
    assert store.read_meta() == b'{"name":"S","max_msgs":5}'


# ----------------------------------------------------------------------------- runs of messages


def _store_run(
    store: StreamStore, subjects: list[str], hdrs: list[bytes], payloads: list[bytes], ts: int
) -> int:
    """Store them all as the stream does: the store's runs in one call, the rest one by one.
    Returns how many the runs took."""
    k = ran = 0
    while k < len(subjects):
        got = store.store_many(subjects, hdrs, payloads, k, ts)
        if got:
            ran += got
            k += got
        else:
            store.store_msg(subjects[k], hdrs[k], payloads[k], ts)
            k += 1
    return ran


@pytest.mark.parametrize(
    "limits", [StoreLimits(), StoreLimits(max_msgs=50), StoreLimits(max_msgs_per_subject=7)]
)
def test_store_many_stores_what_store_msg_stores(
    make_store: MakeStore, reopen: Reopen, limits: StoreLimits
) -> None:
    """A run stored with ``store_many`` (and ``store_msg`` where it leaves a message) is the
    same stream, byte for byte as read back and after a reopen, as the messages stored one by
    one: across block rolls, new subjects, headers or none, a message larger than a block."""
    n = 300
    subjects = [f"run.{i % 6}" if i % 50 else f"new.{i}" for i in range(n)]
    hdrs = [b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % i if i % 3 else b"" for i in range(n)]
    payloads = [b"p" * (i % 40) if i != 123 else b"L" * 5000 for i in range(n)]
    one, run = make_store(limits), make_store(limits)
    for s, h, p in zip(subjects, hdrs, payloads, strict=True):
        one.store_msg(s, h, p, 777)
    ran = _store_run(run, subjects, hdrs, payloads, 777)
    assert ran > (n // 2 if limits == StoreLimits() and isinstance(run, FileStore) else -1)
    _same_stream(one, run)
    _same_stream(reopen(one), reopen(run))


def _same_stream(a: StreamStore, b: StreamStore) -> None:
    assert a.state() == b.state()
    st = a.state()
    seqs = range(st.first_seq, st.last_seq + 1)
    assert [a.load_msg(q) for q in seqs] == [b.load_msg(q) for q in seqs]
    assert a.subjects_state(">") == b.subjects_state(">")
