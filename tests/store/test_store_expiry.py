"""The expiry policy on its own, over a toy store's primitives: what is due at ``now``, in which
order, which removals leave a subject delete marker, and when the next expiry is."""

from __future__ import annotations

import pytest

from jetpy.store import ErrMaxMsgs, StoreLimits
from jetpy.store.expiry import Expiry
from jetpy.store.ttl import marker_headers

MARKER = marker_headers(5)


class Toy:
    """Messages as {seq: (subject, ts, hdr)}; what a store hands the policy."""

    def __init__(self) -> None:
        self.msgs: dict[int, tuple[str, int, bytes]] = {}
        self.last = 0
        self.removed: list[int] = []
        self.markers: list[tuple[str, int, int]] = []
        self.refuse_markers = False
        self.expiry = Expiry(
            live=self.msgs.__contains__,
            head=self.head,
            ts_of=lambda s: self.msgs[s][1],
            subject_of=self.subject_of,
            hdr_of=lambda s: self.msgs[s][2],
            remove=self.remove,
            store_msg=self.store_msg,
        )

    def add(self, subject: str, ts: int, ttl: int = 0, hdr: bytes = b"") -> int:
        self.last += 1
        self.msgs[self.last] = (subject, ts, hdr)
        if ttl:
            self.expiry.add(self.last, ts, ttl)
        return self.last

    def head(self) -> tuple[int, int]:
        return (min(self.msgs) if self.msgs else self.last + 1), self.last

    def subject_of(self, seq: int) -> tuple[str, int]:
        subject = self.msgs[seq][0]
        return subject, sum(1 for s, _t, _h in self.msgs.values() if s == subject)

    def remove(self, seq: int) -> bool:
        del self.msgs[seq]
        self.expiry.never.discard(seq)
        self.removed.append(seq)
        return True

    def store_msg(self, subject: str, hdr: bytes, data: bytes, ts: int, ttl: int) -> tuple[int, int]:
        if self.refuse_markers:
            raise ErrMaxMsgs()
        assert hdr == marker_headers(ttl) and data == b""
        self.markers.append((subject, ts, ttl))
        return self.add(subject, ts, ttl, hdr), ts


def test_ttl_deadlines_first_then_age_from_the_head() -> None:
    t = Toy()
    t.add("a", 10)  # 1: aged out
    t.add("b", 20, ttl=100)  # 2: its TTL is later than now, its age is not
    t.add("c", 30, ttl=5)  # 3: TTL passed
    t.add("d", 90)  # 4: too young
    assert t.expiry.expire(StoreLimits(max_age=50), 75) == 3
    assert t.removed == [3, 1, 2] and list(t.msgs) == [4]


def test_age_steps_over_never_messages_and_stops_at_the_first_young_one() -> None:
    t = Toy()
    t.add("a", 10, ttl=-1)  # never
    t.add("b", 11)
    t.add("c", 12, ttl=-1)
    t.add("d", 100)
    t.add("e", 13)  # old, but behind a young one: age looks only at the head
    assert t.expiry.next_at(50) == 61
    assert t.expiry.expire(StoreLimits(max_age=50), 70) == 1
    assert t.removed == [2] and sorted(t.msgs) == [1, 3, 4, 5]
    assert t.expiry.next_at(50) == 150 and t.expiry.next_at(0) is None


def test_markers_when_expiry_empties_a_subject_unless_the_last_was_a_marker() -> None:
    t = Toy()
    t.add("a", 1)
    t.add("a", 2)
    t.add("b", 3)
    t.add("k", 4, hdr=MARKER)  # already a marker: expiring it leaves none
    lim = StoreLimits(max_age=10, subject_delete_marker_ttl=5)
    assert t.expiry.expire(lim, 100) == 4
    assert t.markers == [("a", 100, 5), ("b", 100, 5)]
    assert t.expiry.next_at(10) == 105, "the markers expire by their own TTL"
    assert t.expiry.expire(lim, 105) == 2 and not t.msgs and len(t.markers) == 2


def test_a_full_stream_has_no_room_for_a_marker() -> None:
    t = Toy()
    t.add("a", 1)
    t.refuse_markers = True
    assert t.expiry.expire(StoreLimits(max_age=10, subject_delete_marker_ttl=5), 100) == 1 and not t.markers


def test_stale_deadlines_are_skipped_and_forgotten() -> None:
    t = Toy()
    gone = t.add("a", 1, ttl=10)
    t.add("b", 1, ttl=20)
    t.remove(gone)
    assert t.expiry.next_at(0) == 21
    never = t.add("c", 1, ttl=-1)
    t.expiry.forget_below(never + 1)
    assert not t.expiry.never
    t.expiry.clear()
    assert t.expiry.next_at(0) is None


@pytest.mark.parametrize("max_age", [0, 50])
def test_nothing_is_due_in_an_empty_store(max_age: int) -> None:
    t = Toy()
    assert t.expiry.expire(StoreLimits(max_age=max_age), 1_000) == 0 and t.expiry.next_at(max_age) is None
