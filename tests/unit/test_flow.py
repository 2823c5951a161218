"""Flow: a producer stalls on the receivers it backed up, for STALL_MAX at most."""

from __future__ import annotations

import asyncio

from jetpy.server.flow import STALL_MAX, Flow


class Reader:
    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False


async def test_a_producer_waits_until_its_receiver_drains() -> None:
    pr, rr = Reader(), Reader()
    producer, receiver = Flow(pr), Flow(rr)
    producer.stall([receiver])
    assert pr.paused
    receiver.drained()
    assert not pr.paused
    producer.stall([receiver])
    producer.stall([receiver])  # already stalled: one pause
    assert pr.pauses == 2


async def test_a_stall_ends_after_stall_max_even_if_nothing_drains() -> None:
    pr = Reader()
    producer = Flow(pr)
    producer.stall([Flow(Reader())])
    assert pr.paused
    await asyncio.sleep(STALL_MAX * 4)
    assert not pr.paused


async def test_nobody_stalls_on_itself_and_a_closing_receiver_releases_its_producers() -> None:
    pr = Reader()
    producer = Flow(pr)
    producer.stall([producer])
    assert not pr.paused
    receiver = Flow(Reader())
    producer.stall([receiver, producer])
    assert pr.paused
    receiver.close()
    assert not pr.paused
