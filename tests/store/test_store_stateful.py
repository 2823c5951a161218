"""Hypothesis state machine: FileStore (reopened and crashed at random) must equal MemoryStore."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from jetpy.store import FileStore, MemoryStore, StoreConfig, StoreError, StoreLimits, StreamStore

SUBJECTS = ["a", "b", "c.x", "c.y", "d.e.f"]
FILTERS = ["", ">", "a", "c.*", "c.>", "*.x", "d.*.f", "zz"]
LIMITS = [
    StoreLimits(),
    StoreLimits(max_msgs=12),
    StoreLimits(max_bytes=1500),
    StoreLimits(max_msgs_per_subject=2),
    StoreLimits(max_msgs_per_subject=1, max_msgs=20),
    StoreLimits(max_msgs=10, discard="new"),
    StoreLimits(max_bytes=2000, max_msgs_per_subject=3, discard="new"),
    StoreLimits(max_msgs_per_subject=2, discard="new", discard_new_per_subject=True),
    StoreLimits(max_age=200),
    StoreLimits(max_msg_size=150),
]
BLOCK_SIZE = 1024  # a few records per block: rolls, dead blocks and tombstone carrying happen often


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except StoreError as exc:
        return ("err", type(exc).__name__)


class FileVsMemory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="jetpy-store-sm-"))
        self.limits = StoreLimits()
        # the oracle with the file store's accounting (sizes and the discard-new edge)
        self.model = MemoryStore(StoreConfig("sm", "file", self.limits))
        self.fs = FileStore(self.root / "s", self._cfg())
        self.ts = 1_000

    def _cfg(self) -> StoreConfig:
        return StoreConfig("sm", "file", self.limits, 1, BLOCK_SIZE)

    def both(self, name: str, *args: Any) -> Any:
        m = outcome(getattr(self.model, name), *args)
        f = outcome(getattr(self.fs, name), *args)
        assert m == f, (name, args, m, f)
        return m

    def teardown(self) -> None:
        try:
            self.fs.stop()
        except StoreError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ rules

    @rule(subject=st.sampled_from(SUBJECTS), size=st.integers(0, 220), with_hdr=st.booleans())
    def store(self, subject: str, size: int, with_hdr: bool) -> None:
        self.ts += 17
        hdr = b"NATS/1.0\r\nX: 1\r\n\r\n" if with_hdr else b""
        data = bytes([self.ts % 251]) * size
        self.both("store_msg", subject, hdr, data, self.ts)

    @rule(seq=st.integers(0, 90))
    def remove(self, seq: int) -> None:
        self.both("remove_msg", seq)

    @rule(seq=st.integers(0, 90))
    def erase(self, seq: int) -> None:
        self.both("erase_msg", seq)

    @rule(subject=st.sampled_from(FILTERS), seq=st.integers(0, 90), keep=st.integers(0, 4))
    def purge(self, subject: str, seq: int, keep: int) -> None:
        self.both("purge", subject, seq, keep)

    @rule(seq=st.integers(0, 130))
    def compact(self, seq: int) -> None:
        self.both("compact", seq)

    @rule(back=st.integers(0, 600))
    def expire(self, back: int) -> None:
        self.both("expire", self.ts - back)

    @rule(limits=st.sampled_from(LIMITS))
    def update_limits(self, limits: StoreLimits) -> None:
        self.limits = limits
        self.both("update_limits", limits)

    @rule()
    def flush_and_sync(self) -> None:
        assert self.fs.flush() == self.model.flush()
        self.fs.sync()

    @rule()
    def reopen(self) -> None:
        self.fs.stop()
        self.fs = FileStore(self.root / "s", self._cfg())

    @rule()
    def crash_after_flush(self) -> None:
        """kill -9 after a flush: the page cache keeps what was written, nothing else runs."""
        self.fs.flush()
        self.fs.abandon()
        self.fs = FileStore(self.root / "s", self._cfg())

    # ------------------------------------------------------------------ invariants

    @invariant()
    def same_state(self) -> None:
        ms = self.model.state(deleted_details=True)
        fs = self.fs.state(deleted_details=True)
        assert fs.lost is None, fs.lost
        assert ms == fs

    @invariant()
    def same_messages(self) -> None:
        last = self.model.state().last_seq
        for seq in range(max(last - 60, 0), last + 2):
            assert self.model.load_msg(seq) == self.fs.load_msg(seq), seq

    @invariant()
    def same_queries(self) -> None:
        model: StreamStore = self.model
        last = model.state().last_seq
        for f in FILTERS:
            assert model.subjects_state(f) == self.fs.subjects_state(f), f
            assert model.load_last_msg(f) == self.fs.load_last_msg(f), f
            for start in (0, last // 2, last - 3, last + 1):
                assert model.load_next_msg(f, start) == self.fs.load_next_msg(f, start), (f, start)
                assert model.filtered_state(start, f) == self.fs.filtered_state(start, f), (f, start)
                for lps in (False, True):
                    assert model.num_pending(start, f, lps) == self.fs.num_pending(start, f, lps), (f, start)
        assert model.next_expiry() == self.fs.next_expiry()


FileVsMemory.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestFileVsMemory = FileVsMemory.TestCase
