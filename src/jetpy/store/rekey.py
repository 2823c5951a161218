"""Bringing a stream's files under the current encryption key when its store opens.

Owns the open-time rewrites of a store with keys (crypto.py): every file that is plaintext (the
store was not encrypted before) or was written with the ``prev_encryption_key`` is read and
written again sealed with the current key: block files (whole, as framed files, renamed over
the old ones), the stream's metadata, and each consumer's state and metadata; and, before any of
that, the check that no file was written with a key the store was not given
(``check_consumer_files``: a wrong key must change nothing). The tail record is rewritten by
``TailFile`` itself. Must not know: recovery's rules, the index, when a store opens.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .consumer_state import (
    CONSUMER_MAGIC,
    META_MAGIC,
    consumer_context,
    needs_rekey,
    read_framed,
    write_framed_atomic,
)
from .crypto import StoreKeys
from .fileio import fsync_dir
from .frames import BLOCK_KEY_MAGIC, PACKED
from .layout import CONSUMER_META_FILE, CONSUMER_STATE_FILE, META_FILE, MSGS_DIR
from .record import BLOCK_HEADER_SIZE
from .sealing import build_framed, read_logical, write_copy
from .segment import Block

__all__ = ["check_consumer_files", "rekey_blocks", "rekey_small_files", "rekey_store"]

log = logging.getLogger("jetpy.store")

SmallFile = tuple[Path, bytes, str]
"""A framed small file to rewrite: its path, its plain magic and its key context."""


def check_consumer_files(obs_dir: Path, keys: StoreKeys | None, stream: str) -> list[SmallFile]:
    """Every consumer file that must be rewritten under the current key. Raises
    ErrEncryptionKey if one was written with another key (nothing is changed then)."""
    out: list[SmallFile] = []
    if not obs_dir.is_dir():
        return out
    for cdir in sorted(p for p in obs_dir.iterdir() if p.is_dir()):
        for name, magic in ((CONSUMER_STATE_FILE, CONSUMER_MAGIC), (CONSUMER_META_FILE, META_MAGIC)):
            ctx = consumer_context(stream, cdir.name, name)
            if needs_rekey(cdir / name, magic, keys, ctx):
                out.append((cdir / name, magic, ctx))
    return out


def rekey_small_files(files: list[SmallFile], keys: StoreKeys) -> int:
    """Rewrite each file sealed with the current key (atomically); returns how many. A file
    that does not read (damaged) is left as it is for its reader to report."""
    done = 0
    for path, magic, ctx in files:
        try:
            payload = read_framed(path, magic, keys, ctx)
        except Exception:
            continue
        if payload is None:
            continue
        write_framed_atomic(path, magic, payload, keys, ctx)
        done += 1
    return done


def rekey_blocks(blocks: list[Block], keys: StoreKeys, context: str, msgdir: Path) -> int:
    """Rewrite each block's file as a framed file sealed with the current key (from its
    logical bytes, so its index stays valid) and read it through its new frames from now on.
    Runs while the store opens: no descriptor of these blocks is open yet. Raises OSError."""
    for blk in blocks:
        fd = os.open(blk.path, os.O_RDONLY)
        try:
            logical = read_logical(fd, blk.frames, blk.size, blk.path.name)
        finally:
            os.close(fd)
        if len(logical) < BLOCK_HEADER_SIZE:
            logical += bytes(BLOCK_HEADER_SIZE - len(logical))
        packed = blk.frames is not None and blk.frames.packed
        fc, header = keys.new_file(BLOCK_KEY_MAGIC, blk.base, context, PACKED if packed else 0)
        data, table = build_framed(logical, fc, header, blk.offs, packed)
        os.rename(write_copy(blk.path, data), blk.path)
        blk.frames = table
        blk.pdurable = table.end
    if blocks:
        fsync_dir(msgdir)
    return len(blocks)


def rekey_store(
    directory: Path, keys: StoreKeys, blocks: list[Block], meta: bool, obs: list[SmallFile]
) -> None:
    """Seal with the current key every file of the stream in ``directory`` found plaintext or
    written with the previous key: ``blocks`` (recovery's ``rekey``), its metadata if ``meta``,
    the consumer files ``obs``. The checks are done: every file opens with one of the keys."""
    name = directory.name
    n = rekey_blocks(blocks, keys, f"{name}/msgs", directory / MSGS_DIR)
    if meta:
        n += rekey_small_files([(directory / META_FILE, META_MAGIC, f"{name}/meta")], keys)
    n += rekey_small_files(obs, keys)
    if n:
        log.info("stream '%s': %d files sealed with the current encryption key", name, n)
