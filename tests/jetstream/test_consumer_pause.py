"""A paused consumer, driven directly with an invented clock: nothing is delivered until the
deadline (pull or push), while heartbeats, request expiries, ack-wait expiries and max-deliveries
go on; the deadline is a timer deadline (``next_deadline``), resumption is announced once and
delivers what waited (redeliveries first); ``CONSUMER.PAUSE``'s changes are announced only when
they change something; a consumer rebuilt from its config and state (a restart) is still paused.
"""

from __future__ import annotations

from typing import Any

from jetpy.jetstream.consumers.acks import parse_ack_subject
from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.pause import utc
from jetpy.jetstream.models import ConsumerConfig, StreamConfig, format_time
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.validate import check_consumer_config, check_stream_config
from jetpy.store import MemoryStore, StoreConfig

from .delivery_fakes import RecordingHost

S = 1_000_000_000
T0 = 1_800_000_000 * S
UNTIL = T0 + 10 * S


def setup(n: int = 3, **cfg: Any) -> tuple[Consumer, RecordingHost, Stream]:
    scfg = check_stream_config(StreamConfig(name="S", subjects=["s"], storage="memory"))
    store = MemoryStore(StoreConfig("S", "memory"))
    for i in range(n):
        store.store_msg("s", b"", str(i).encode(), T0)
    stream = Stream(scfg, store, T0)
    config = check_consumer_config(scfg, ConsumerConfig(durable_name="D", **cfg))
    host = RecordingHost()
    return Consumer(stream, "D", config, T0, host, T0), host, stream


def statuses(host: RecordingHost, route: str) -> list[str]:
    return [s.status for s in host.to(route) if s.status]


def test_a_paused_pull_consumer_delivers_nothing_until_the_deadline() -> None:
    c, host, _ = setup(ack_policy="explicit", pause_until=format_time(UNTIL))
    c.request("nw", b'{"batch": 3, "no_wait": true}', T0)
    assert host.sends[0].route == "nw" and statuses(host, "nw") == ["404 No Messages"]
    body = b'{"batch": 3, "expires": 20000000000, "idle_heartbeat": 4000000000}'
    c.request("wait", body, T0)
    c.request("nwx", b'{"batch": 5, "no_wait": true, "expires": 2000000000}', T0)
    assert host.sends == [] and c.info(T0).num_waiting == 2
    assert c.next_deadline() == T0 + 2 * S
    c.tick(T0 + 2 * S)
    assert statuses(host, "nwx") == ["408 Request Timeout"]  # expiries go on
    c.tick(T0 + 4 * S)
    assert statuses(host, "wait") == ["100 Idle Heartbeat"]  # and heartbeats
    info = c.info(T0 + 4 * S)
    assert info.paused and info.pause_remaining == 6 * S
    assert c.next_deadline() == T0 + 8 * S  # the next heartbeat, then the deadline
    c.tick(T0 + 8 * S)
    host.sends.clear()
    assert c.next_deadline() == UNTIL
    c.tick(UNTIL)
    assert [s.payload for s in host.to("wait")] == [b"0", b"1", b"2"]
    assert host.events() == [
        ("PAUSE", {"type": "io.nats.jetstream.advisory.v1.consumer_pause", "timestamp": format_time(UNTIL),
                   "stream": "S", "consumer": "D", "paused": False, "pause_until": format_time(UNTIL)}),
    ]  # fmt: skip
    info = c.info(UNTIL)
    assert not info.paused and info.pause_remaining == 0
    c.tick(UNTIL + S)
    assert host.events() == []  # resumption is announced once


def test_a_paused_push_consumer_sends_heartbeats_and_no_messages() -> None:
    c, host, _ = setup(
        deliver_subject="d", idle_heartbeat=S, flow_control=True, pause_until=format_time(UNTIL)
    )
    c.set_active(True, T0)
    c.pump(T0)
    for t in range(1, 10):
        c.tick(T0 + t * S)
    sent = host.to("d")
    assert [s.status for s in sent] == ["100 Idle Heartbeat"] * 9
    assert all(b"Nats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\n" in s.headers for s in sent)
    c.tick(UNTIL)
    assert [s.payload for s in host.to("d") if not s.status] == [b"0", b"1", b"2"]


def test_redeliveries_wait_for_the_end_of_a_pause() -> None:
    c, host, _ = setup(ack_policy="explicit", ack_wait=S)
    c.request("r", b'{"batch": 2}', T0)
    assert [s.payload for s in host.to("r")] == [b"0", b"1"]
    c.set_pause(format_time(UNTIL), T0)
    assert host.events()[0][1]["paused"] is True
    c.request("again", b'{"batch": 5, "expires": 30000000000}', T0)
    c.tick(T0 + S)  # ack waits run out while paused: queued, not sent
    assert host.to("again") == [] and c.info(T0 + S).num_ack_pending == 2
    c.tick(UNTIL)
    sent = [(s.payload, parse_ack_subject(s.reply or "")) for s in host.to("again")]
    assert [(data, meta.deliveries if meta else 0) for data, meta in sent] == [
        (b"0", 2),
        (b"1", 2),
        (b"2", 1),
    ]


def test_max_deliveries_are_given_up_on_while_paused() -> None:
    c, host, _ = setup(n=1, ack_policy="explicit", ack_wait=S, max_deliver=1)
    c.request("r", b"1", T0)
    assert len(host.to("r")) == 1
    c.set_pause(format_time(UNTIL), T0)
    host.events()
    c.tick(T0 + S)
    assert [e for e, _ in host.events()] == ["MAX_DELIVERIES"]


def test_pause_changes_are_announced_only_when_they_change_something() -> None:
    c, host, _ = setup()
    c.set_pause(None, T0)
    c.set_pause(utc("0001-01-01T00:00:00Z"), T0)
    assert host.events() == []
    c.set_pause(utc("2000-01-01T00:00:00Z"), T0)  # a deadline in the past: no pause, but a change
    assert [(e, b["paused"], b["pause_until"]) for e, b in host.events()] == [
        ("PAUSE", False, "2000-01-01T00:00:00Z")
    ]
    assert not c.paused(T0) and c.next_deadline() is None
    c.set_pause(utc("2100-01-01T01:00:00+01:00"), T0)
    assert c.config.pause_until == "2100-01-01T00:00:00Z"  # kept in UTC
    assert [b["paused"] for _, b in host.events()] == [True]
    c.set_pause(None, T0 + S)
    assert [(b["paused"], b["pause_until"]) for _, b in host.events()] == [(False, "0001-01-01T00:00:00Z")]
    assert c.config.pause_until is None


def test_utc_keeps_the_epoch_apart_from_go_zero_time() -> None:
    assert utc("1970-01-01T00:00:00Z") == "1970-01-01T00:00:00Z"  # nats-py's resume_consumer
    assert utc("0001-01-01T00:00:00Z") is None
    assert utc(None) is None and utc("") is None


def test_a_consumer_rebuilt_from_its_config_and_state_is_still_paused() -> None:
    c, host, stream = setup(ack_policy="explicit")
    c.set_pause(format_time(UNTIL), T0)
    rebuilt = Consumer(stream, "D", c.config, T0, host, T0 + S, c.snapshot())
    host.events()
    rebuilt.request("r", b'{"batch": 3, "expires": 20000000000}', T0 + S)
    assert host.to("r") == [] and rebuilt.paused(T0 + S)
    assert rebuilt.next_deadline() == UNTIL
    rebuilt.tick(UNTIL)
    assert len(host.to("r")) == 3
    assert [b["paused"] for _, b in host.events()] == [False]
