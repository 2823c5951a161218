"""Pacer on its own: replay_policy original (messages spaced as they were stored) and
rate_limit_bps. Sans-IO with an invented clock."""

from __future__ import annotations

from jetpy.jetstream.consumers.pacing import Pacer
from jetpy.store.base import StoredMsg

T0 = 1_000_000_000


def msg(seq: int, ts: int) -> StoredMsg:
    return StoredMsg("s", seq, ts, b"", b"")


def test_replay_spaces_messages_as_they_were_stored() -> None:
    p = Pacer()
    assert not p.hold_for_replay(msg(1, 500), T0)  # the first sets the pace
    assert not p.hold_for_replay(msg(2, 500), T0)
    m3 = msg(3, 800)
    assert p.hold_for_replay(m3, T0 + 100)  # due at T0 + 300
    assert p.held is m3 and p.blocked(T0 + 299) and p.deadline() == T0 + 300
    p.tick(T0 + 299)
    assert p.blocked(T0 + 299)
    p.tick(T0 + 300)
    assert not p.blocked(T0 + 300) and p.deadline() is None
    assert p.take_held() is m3 and p.held is None
    assert not p.hold_for_replay(m3, T0 + 300)


def test_rate_limit() -> None:
    p = Pacer()
    p.rate_bps = 8_000  # 1,000 bytes a second
    p.sent(100, T0)
    assert p.not_before == T0 + 100_000_000
    p.sent(100, T0 + 10)  # queued behind the first
    assert p.not_before == T0 + 200_000_000
    p.sent(100, T0 + 1_000_000_000)  # after a pause: from now
    assert p.not_before == T0 + 1_100_000_000


def test_a_message_put_back_is_held() -> None:
    p = Pacer()
    m = msg(1, 1)
    p.hold(m)
    assert p.take_held() is m and p.take_held() is None
