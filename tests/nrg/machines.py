"""State machines for the Raft host's tests: a log of everything applied, with its results."""

from __future__ import annotations

import json
from collections.abc import Sequence


class AppendLog:
    """Every proposal appended in order; a proposal's result is its position (1-based)."""

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.entries = 0  # log entries applied (a batch of proposals is one)
        self.restores = 0

    def apply(self, index: int, items: Sequence[bytes]) -> Sequence[bytes]:
        self.entries += 1
        first = len(self.items) + 1
        self.items.extend(items)
        return [b"%d" % (first + i) for i in range(len(items))]

    def snapshot(self) -> bytes:
        return json.dumps([i.decode() for i in self.items]).encode()

    def restore(self, data: bytes) -> None:
        self.restores += 1
        self.items = [x.encode() for x in json.loads(data)] if data else []
