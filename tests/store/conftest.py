"""Fixtures for the store tests: one ``store`` fixture parametrized over every backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from jetpy.store import FileStore, MemoryStore, StoreConfig, StoreError, StoreLimits, StreamStore
from jetpy.store.base import Compression
from jetpy.store.crypto import StoreKeys

# Small blocks make the contract suite cross block boundaries, roll, and delete whole blocks.
CONTRACT_BLOCK_SIZE = 2048

TEST_KEYS = StoreKeys("contract-test-key-0123456789abcdef")
"""The key of the encrypted file stores the contract runs over."""

FILE_KINDS: dict[str, tuple[Compression, bool]] = {
    "file": ("none", False),
    "file-s2": ("s2", False),  # sealed blocks compressed (frames.py)
    "file-enc": ("none", True),  # every file encrypted (crypto.py)
    "file-s2-enc": ("s2", True),
}


class SettlingFileStore(FileStore):
    """A file store that puts compressed copies of its sealed blocks in place every few messages,
    so that the contract runs over compressed blocks rather than waiting for the background."""

    def store_msg(
        self, subject: str, hdr: bytes, data: bytes, ts: int | None = None, ttl: int = 0
    ) -> tuple[int, int]:
        out = super().store_msg(subject, hdr, data, ts, ttl)
        if out[0] % 8 == 0:
            self.settle()
        return out


def open_file_store(kind: str, path: Path, cfg: StoreConfig) -> FileStore:
    compression, encrypted = FILE_KINDS[kind]
    cfg = StoreConfig(cfg.name, "file", cfg.limits, cfg.first_seq, cfg.block_size, compression)
    cls = SettlingFileStore if compression == "s2" else FileStore
    return cls(path, cfg, TEST_KEYS if encrypted else None)


class MakeStore(Protocol):
    def __call__(
        self, limits: StoreLimits | None = None, first_seq: int = 1, block_size: int = CONTRACT_BLOCK_SIZE
    ) -> StreamStore: ...


@pytest.fixture(params=["memory", *FILE_KINDS])
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
        if kind == "memory":
            store = MemoryStore(cfg)
        else:
            store = open_file_store(kind, tmp_path / f"stream{len(opened)}", cfg)
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
def reopen(kind: str) -> Iterator[Reopen]:
    """Stop and reopen a file store from its directory; a memory store is returned as is."""
    reopened: list[StreamStore] = []

    def _reopen(store: StreamStore) -> StreamStore:
        if isinstance(store, FileStore):
            cfg = store.config
            store.stop()
            fresh = open_file_store(kind, store.directory, cfg)
            reopened.append(fresh)
            return fresh
        return store

    yield _reopen
    for s in reopened:
        try:
            s.stop()
        except StoreError:
            pass
