"""Priority groups, driven directly with an invented clock: the checks a pull request passes on
arrival (per policy), ``pinned_client`` (the pin handed to the first request without one and
sent as ``Nats-Pin-Id``, others waiting, a stale pin answered 423, the pin's time-to-live renewed
by requests carrying it, expiry and ``CONSUMER.UNPIN``, each announced), ``overflow`` (the
minimums checked per message) and ``prioritized`` (lower priority first, FIFO within one)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.validate import check_consumer_config, check_stream_config
from jetpy.protocol.headers import parse_headers
from jetpy.store import MemoryStore, StoreConfig

from .delivery_fakes import RecordingHost, Sent

S = 1_000_000_000
T0 = 1_800_000_000 * S
LONG = b', "expires": 60000000000'


def setup(policy: str, n: int = 6, **cfg: Any) -> tuple[Consumer, RecordingHost, MemoryStore]:
    scfg = check_stream_config(StreamConfig(name="S", subjects=["s"], storage="memory"))
    store = MemoryStore(StoreConfig("S", "memory"))
    for i in range(n):
        store.store_msg("s", b"", str(i).encode(), T0)
    groups = ["g"] if policy != "none" else []
    fields = {"priority_policy": policy, "priority_groups": groups, **cfg}
    config = msgspec.convert({"durable_name": "D", "ack_policy": "explicit", **fields}, ConsumerConfig)
    config = check_consumer_config(scfg, config)
    host = RecordingHost()
    return Consumer(Stream(scfg, store, T0), "D", config, T0, host, T0), host, store


def pull(c: Consumer, reply: str, fields: bytes, now: int = T0) -> None:
    c.request(reply, b'{"batch": ' + fields + b"}", now)


def data(sent: list[Sent]) -> list[bytes]:
    return [s.payload for s in sent if not s.status]


def pin_of(s: Sent) -> str | None:
    return parse_headers(s.headers).get("Nats-Pin-Id")


@pytest.mark.parametrize(
    ("policy", "fields", "status"),
    [
        ("none", b'1, "min_pending": 1', "400 Bad Request - Not a Overflow Priority consumer"),
        ("none", b'1, "id": "x"', "400 Bad Request - Not a Pinned Client Priority consumer"),
        ("none", b'1, "priority": 10', "400 Bad Request - Priority must be between 0 and 9"),
        ("overflow", b"1", "400 Bad Request - Priority Group missing"),
        ("overflow", b'1, "group": "h"', "400 Bad Request - Invalid Priority Group"),
        ("overflow", b'1, "group": "g", "id": "x"', "400 Bad Request - Not a Pinned Client Priority consumer"),
        ("pinned_client", b'1, "group": "g", "min_ack_pending": 2', "400 Bad Request - Not a Overflow Priority consumer"),
        ("prioritized", b'1, "group": "g", "priority": -1', "400 Bad Request - Priority must be between 0 and 9"),
    ],
)  # fmt: skip
def test_requests_are_checked_on_arrival(policy: str, fields: bytes, status: str) -> None:
    c, host, _ = setup(policy)
    pull(c, "r", fields)
    assert [s.status for s in host.to("r")] == [status]


def test_a_bare_batch_or_a_group_of_a_consumer_without_policy_is_served() -> None:
    c, host, _ = setup("none")
    pull(c, "r", b'1, "group": "anything", "priority": 3')
    c.request("n", b"1", T0)
    assert data(host.to("r")) == [b"0"] and data(host.to("n")) == [b"1"]


def test_pinned_client_pins_the_first_request_and_others_wait() -> None:
    c, host, _ = setup("pinned_client", priority_timeout=10 * S)
    pull(c, "a", b'1, "group": "g"' + LONG)
    (first,) = host.to("a")
    pin = pin_of(first)
    assert pin is not None and len(pin) == 22 and first.payload == b"0"
    ((event, body),) = host.events()
    assert event == "PINNED" and list(body) == [
        "type", "timestamp", "account", "stream", "consumer", "group", "pinned_id"
    ] and body["pinned_id"] == pin  # fmt: skip
    state = c.info(T0).priority_groups[0]
    assert (state.group, state.pinned_client_id) == ("g", pin)
    pull(c, "b", b'2, "group": "g"' + LONG)  # not pinned: waits
    assert host.to("b") == []
    pull(c, "a", b'2, "group": "g", "id": "' + pin.encode() + b'"' + LONG)
    assert data(host.to("a")) == [b"1", b"2"] and host.to("b") == []
    pull(c, "x", b'1, "group": "g", "id": "stale"')
    assert [s.status for s in host.to("x")] == ["423 Nats-Pin-Id mismatch"]


def test_a_pin_lives_as_long_as_requests_renew_it() -> None:
    c, host, _ = setup("pinned_client", priority_timeout=10 * S)
    pull(c, "a", b'1, "group": "g"')
    pin = pin_of(host.to("a")[0])
    assert pin is not None
    pull(c, "b", b'1, "group": "g"' + LONG)
    assert c.next_deadline() == T0 + 10 * S
    pull(c, "a", b'1, "group": "g", "id": "' + pin.encode() + b'"', T0 + 8 * S)  # renewed
    assert data(host.to("a")) == [b"1"] and c.next_deadline() == T0 + 18 * S
    host.events()
    c.tick(T0 + 18 * S)  # expired: announced, and the waiting request is pinned anew
    (unpinned, pinned) = host.events()
    assert unpinned[0] == "UNPINNED" and unpinned[1]["reason"] == "timeout"
    (got,) = host.to("b")
    assert pinned[0] == "PINNED" and pin_of(got) == pinned[1]["pinned_id"] != pin


def test_unpin_hands_the_pin_to_the_next_request_and_a_stale_one_is_told() -> None:
    c, host, store = setup("pinned_client", n=2)
    pull(c, "a", b'1, "group": "g"')
    pin = pin_of(host.to("a")[0])
    assert pin is not None
    with_pin = b'1, "group": "g", "id": "' + pin.encode() + b'"' + LONG
    pull(c, "old", with_pin)
    assert data(host.to("old")) == [b"1"]
    pull(c, "old", with_pin)  # nothing left: it waits
    host.events()
    c.unpin("g", T0 + S)
    assert [(e, b.get("reason")) for e, b in host.events()] == [("UNPINNED", "admin")]
    assert c.info(T0 + S).priority_groups[0].pinned_client_id == ""
    seq, _ = store.store_msg("s", b"", b"2", T0 + S)
    c.on_stored(seq, "s")
    c.pump(T0 + S)
    # the waiting request names a pin that is gone: told so; the message waits for the next one
    (stale,) = host.to("old")
    assert stale.status == "423 Nats-Wrong-Pin-Id" and b"Nats-Pending-Messages: 1\r\n" in stale.headers
    pull(c, "new", b'1, "group": "g"', T0 + S)
    (got,) = host.to("new")
    assert got.payload == b"2" and pin_of(got) not in (None, pin)


def test_a_request_that_cannot_take_the_message_gives_its_new_pin_back() -> None:
    c, host, _ = setup("pinned_client")
    pull(c, "small", b'1, "group": "g", "max_bytes": 3' + LONG)
    assert [s.status for s in host.to("small")] == ["409 Message Size Exceeds MaxBytes"]
    assert c.info(T0).priority_groups[0].pinned_client_id == ""
    assert [e for e, _ in host.events()] == ["PINNED"]  # handed out, then taken back


def test_overflow_serves_a_request_only_while_its_minimum_is_met() -> None:
    c, host, _ = setup("overflow", n=4)
    pull(c, "big", b'5, "group": "g", "min_pending": 10' + LONG)
    assert host.to("big") == [] and c.info(T0).num_pending == 4  # the message it could not take too
    pull(c, "two", b'5, "group": "g", "min_pending": 3' + LONG)
    assert data(host.to("two")) == [b"0", b"1"]  # 4 and 3 left when they went, then 2: below 3
    pull(c, "acks", b'5, "group": "g", "min_ack_pending": 2' + LONG)
    assert data(host.to("acks")) == [b"2", b"3"]  # 2 then 3 acks outstanding
    pull(c, "plain", b'1, "group": "g"' + LONG)
    assert host.to("plain") == [] and c.info(T0).num_pending == 0


def test_prioritized_serves_lower_priorities_first_in_arrival_order() -> None:
    c, host, store = setup("prioritized", n=0)
    for reply, prio in (("p5", 5), ("p1a", 1), ("p1b", 1), ("p0", 0)):
        pull(c, reply, b'2, "group": "g", "priority": %d' % prio + LONG)
    c.request("bare", b"1", T0)  # no group fields: after every priority
    for i in range(9):
        seq, _ = store.store_msg("s", b"", str(i).encode(), T0)
        c.on_stored(seq, "s")
        c.pump(T0)
    order = [s.route for s in host.sends if not s.status]
    assert order == ["p0", "p0", "p1a", "p1b", "p1a", "p1b", "p5", "p5", "bare"]


def test_a_message_too_big_for_a_request_still_counts_as_pending() -> None:
    c, host, _ = setup("none", n=2)
    pull(c, "small", b'1, "max_bytes": 3')
    assert [s.status for s in host.to("small")] == ["409 Message Size Exceeds MaxBytes"]
    assert c.num_pending() == 2 and c.info(T0).num_pending == 2
    pull(c, "r", b"2")
    sent = host.to("r")
    assert [s.payload for s in sent] == [b"0", b"1"]
    assert [s.reply.rsplit(".", 1)[1] for s in sent if s.reply] == ["1", "0"]  # pending after each
