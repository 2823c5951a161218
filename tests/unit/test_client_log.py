"""ClientLog: nats-server's prefix for a client's log lines, and the rate limit over them."""

from __future__ import annotations

import logging

import pytest

from jetpy.server.client_log import ClientIdentity, ClientLog, client_prefix


def test_prefix_before_and_after_connect() -> None:
    c = ClientIdentity("127.0.0.1", 52340, 4)
    assert client_prefix(c) == "127.0.0.1:52340 - cid:4"
    c.version, c.lang, c.name, c.connected = "2.16.0", "python3", "app", True
    assert client_prefix(c) == '127.0.0.1:52340 - cid:4 - "v2.16.0:python3:app"'
    c.user = "alice"
    assert client_prefix(c) == '127.0.0.1:52340 - cid:4 - "v2.16.0:python3:app" - "$G/user:alice"'
    c.user = ""  # a token
    assert client_prefix(c).endswith(' - "$G/token"')
    bare = ClientIdentity("::1", 5, 6, name="only-name", connected=True)
    assert client_prefix(bare) == '[::1]:5 - cid:6 - "only-name"'
    assert client_prefix(ClientIdentity("h", 1, 2, connected=True)) == "h:1 - cid:2"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_is_cut_to_the_rate_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="test.clients")
    clock = Clock()
    cl = ClientLog(logging.getLogger("test.clients"), rate=10, burst=5, clock=clock)
    who = ClientIdentity("10.0.0.1", 1000, 1)
    for _ in range(50):  # all at once: the burst, then nothing
        cl.error(who, "authentication error")
    assert len(caplog.records) == 5 and cl.suppressed == 45
    clock.now = 1.0  # a second later: ten more may go, the first says how many were dropped
    for _ in range(50):
        cl.error(who, "authentication error")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[5] == "45 client error log lines suppressed (more than 10 a second)"
    assert caplog.records[5].levelno == logging.WARNING
    assert lines[6] == "10.0.0.1:1000 - cid:1 - authentication error"
    assert len(lines) == 5 + 1 + 5  # the burst is at most `burst`, refilled at `rate`
    assert cl.suppressed == 45


def test_levels_off_cost_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="test.quiet")
    cl = ClientLog(logging.getLogger("test.quiet"), rate=1, burst=1, clock=Clock())
    for _ in range(10):
        cl.debug(ClientIdentity("h", 1, 1), "Authentication Timeout")  # not written, not counted
    assert not caplog.records and cl.suppressed == 0
    cl.error(ClientIdentity("h", 1, 1), "authentication error")
    assert [r.getMessage() for r in caplog.records] == ["h:1 - cid:1 - authentication error"]
