"""Where a durable consumer whose state is gone starts again (``restore.restart_position``):
the first message it could ever have been meant to deliver, by deliver policy, so nothing
unacknowledged is skipped. Sans-IO: a memory store with invented timestamps."""

from __future__ import annotations

from typing import Any

import pytest

from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.restore import RESTART_CLOCK_MARGIN, restart_position
from jetpy.jetstream.models import ConsumerConfig, StreamConfig, format_time
from jetpy.jetstream.stream import Stream
from jetpy.jetstream.validate import check_consumer_config, check_stream_config
from jetpy.store import MemoryStore, StoreConfig, StoredMsg

SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND


class Host:
    def send(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes) -> None:
        pass

    def send_batch(self, route: str, msgs: list[StoredMsg], replies: list[bytes]) -> None:
        pass

    def has_interest(self, subject: str) -> bool:
        return False

    def advisory(self, subject: str, body: dict[str, Any]) -> None:
        pass

    def acked(self, consumer: Consumer, seqs: list[int]) -> None:
        pass

    def state_changed(self, consumer: Consumer) -> None:
        pass

    def confirm(self, consumer: Consumer, reply: str, stream_seq: int) -> None:
        pass


def stream() -> Stream:
    """100 messages, one a second from T0, on a.1 (odd) and a.2 (even); the first 10 removed."""
    scfg = check_stream_config(StreamConfig(name="S", subjects=["a.*"], storage="memory"))
    store = MemoryStore(StoreConfig("S", "memory"))
    for i in range(1, 101):
        store.store_msg(f"a.{2 - i % 2}", b"", b"x", ts=T0 + i * SECOND)
    for i in range(1, 11):
        store.remove_msg(i)
    return Stream(scfg, store, T0)


def restarted(s: Stream, created: int, **cfg: Any) -> Consumer:
    config = check_consumer_config(s.config, ConsumerConfig(durable_name="D", ack_policy="explicit", **cfg))
    start = restart_position(s.store, config, created)
    return Consumer(s, "D", config, created, Host(), created, start=start)


@pytest.mark.parametrize(
    ("cfg", "created", "start"),
    [
        ({"deliver_policy": "all"}, T0 + 50 * SECOND, 11),  # the stream's first message
        ({"deliver_policy": "all", "filter_subject": "a.2"}, T0 + 50 * SECOND, 11),
        ({"deliver_policy": "last"}, T0 + 50 * SECOND, 11),  # which was last is not recorded
        ({"deliver_policy": "last_per_subject", "filter_subject": "a.*"}, T0 + 50 * SECOND, 11),
        ({"deliver_policy": "by_start_sequence", "opt_start_seq": 40}, T0, 40),
        ({"deliver_policy": "by_start_sequence", "opt_start_seq": 3}, T0, 11),
        ({"deliver_policy": "by_start_time", "opt_start_time": format_time(T0 + 30 * SECOND)}, T0, 30),
        # new: the first message stored after the creation, less the clock margin
        ({"deliver_policy": "new"}, T0 + 60 * SECOND + RESTART_CLOCK_MARGIN, 60),
        ({"deliver_policy": "new"}, T0 + 500 * SECOND, 101),
    ],
)
def test_restart_position_by_deliver_policy(cfg: dict[str, Any], created: int, start: int) -> None:
    c = restarted(stream(), created, **cfg)
    assert c.next_stream_seq == start
    info = c.info(T0)
    assert (info.delivered.consumer_seq, info.delivered.stream_seq) == (0, start - 1)
    assert (info.ack_floor.consumer_seq, info.ack_floor.stream_seq) == (0, start - 1)
    assert info.num_ack_pending == 0


def test_a_restarted_consumer_delivers_everything_from_its_restart_position() -> None:
    s = stream()
    c = restarted(s, T0 + 500 * SECOND, deliver_policy="all", filter_subject="a.2")
    got = []
    while (nxt := c.next_message(T0)) is not None:
        got.append(nxt[0].seq)
    assert got == list(range(12, 101, 2))
