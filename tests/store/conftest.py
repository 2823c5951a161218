"""Fixtures for the store tests: one ``store`` fixture parametrized over every backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from jetpy.store import FileStore, MemoryStore, StoreConfig, StoreError, StoreLimits, StreamStore

# Small blocks make the contract suite cross block boundaries, roll, and delete whole blocks.
CONTRACT_BLOCK_SIZE = 2048


class MakeStore(Protocol):
    def __call__(
        self, limits: StoreLimits | None = None, first_seq: int = 1, block_size: int = CONTRACT_BLOCK_SIZE
    ) -> StreamStore: ...


@pytest.fixture(params=["memory", "file"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(kind: str, tmp_path: Path) -> Iterator[MakeStore]:
    opened: list[StreamStore] = []

    def factory(
        limits: StoreLimits | None = None, first_seq: int = 1, block_size: int = CONTRACT_BLOCK_SIZE
    ) -> StreamStore:
        cfg = StoreConfig(
            "test", "memory" if kind == "memory" else "file", limits or StoreLimits(), first_seq, block_size
        )
        store: StreamStore
        store = MemoryStore(cfg) if kind == "memory" else FileStore(tmp_path / f"stream{len(opened)}", cfg)
        opened.append(store)
        return store

    yield factory
    for s in opened:
        try:
            s.stop()
        except StoreError:
            pass


@pytest.fixture
def store(make_store: MakeStore) -> StreamStore:
    return make_store()


Reopen = Callable[[StreamStore], StreamStore]


@pytest.fixture
def reopen() -> Iterator[Reopen]:
    """Stop and reopen a file store from its directory; a memory store is returned as is."""
    reopened: list[StreamStore] = []

    def _reopen(store: StreamStore) -> StreamStore:
        if isinstance(store, FileStore):
            cfg = store.config
            store.stop()
            fresh = FileStore(store.directory, cfg)
            reopened.append(fresh)
            return fresh
        return store

    yield _reopen
    for s in reopened:
        try:
            s.stop()
        except StoreError:
            pass
