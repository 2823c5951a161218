"""The forms a file store's files take: plaintext, compressed or encrypted, and the keys of each.

Owns, for one stream directory: the key context of each of its files (crypto.py), the cipher and
key header of a new block file (framed when there are keys, frames.py) and of a compressed copy,
and what opening the store must check and do before anything is served: every file's key checked
first (a file written with another key refuses the store, touching nothing), then erases a crash
interrupted finished and every file found plaintext or under the previous key sealed with the
current one (rekey.py). Must not know: the index, records, limits, when to compress.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from .base import ErrStoreIO
from .consumer_state import META_MAGIC, FileConsumerStore, needs_rekey, read_framed, write_framed_atomic
from .crypto import FileCipher, StoreKeys, encode_key_header
from .erase import finish_erases
from .frames import BLOCK_KEY_MAGIC, PACKED
from .layout import META_FILE, OBS_DIR
from .recovery import Recovered
from .rekey import SmallFile, check_consumer_files, rekey_store
from .tail import Tail, TailFile, read_tail_file

__all__ = ["FileForms", "KeyChecks", "meta_context", "read_meta_file"]


def meta_context(stream: str) -> str:
    """The key context of a stream's ``meta.dat``."""
    return f"{stream}/meta"


def read_meta_file(directory: str | os.PathLike[str], keys: StoreKeys | None = None) -> bytes | None:
    """A stream directory's metadata bytes, without opening its store (None if there are none).
    Raises ErrCorrupt if the file fails its checks, ErrStoreIO if it cannot be read,
    ErrEncryptionKey if it was written with another key than ``keys``."""
    d = Path(directory)
    return read_framed(d / META_FILE, META_MAGIC, keys, meta_context(d.name))


@dataclass
class KeyChecks:
    """What opening found of the files outside ``msgs/`` (their keys all checked)."""

    tail: Tail | str | None
    tail_rekey: bool
    meta_rekey: bool
    obs_rekey: list[SmallFile]


class FileForms:
    """One stream directory's file forms (see the module docstring)."""

    __slots__ = ("directory", "keys", "name")

    def __init__(self, directory: Path, keys: StoreKeys | None) -> None:
        self.directory = directory
        self.keys = keys
        self.name = directory.name  # the stream's name: the key contexts name it

    def context(self, what: str) -> str:
        return f"{self.name}/{what}"

    def check(self) -> KeyChecks:
        """The tail record, and which files outside ``msgs/`` must be sealed anew. Raises
        ErrEncryptionKey (before anything is written) if one was written with another key."""
        keys = self.keys
        tail, tail_rekey = read_tail_file(self.directory, keys, self.context("tail"))
        meta = needs_rekey(self.directory / META_FILE, META_MAGIC, keys, meta_context(self.name))
        obs = check_consumer_files(self.directory / OBS_DIR, keys, self.name)
        return KeyChecks(tail, tail_rekey, meta, obs)

    def opened(self, rec: Recovered, checks: KeyChecks) -> None:
        """After recovery (every key checked): finish interrupted erases, and seal every file
        found plaintext or under the previous key with the current key."""
        finish_erases(rec.superseded)
        if self.keys is not None:
            rekey_store(self.directory, self.keys, rec.rekey, checks.meta_rekey, checks.obs_rekey)

    def new_block(self, base: int) -> tuple[FileCipher, bytes] | None:
        """The cipher and key header of a new block file: framed when there are keys."""
        if self.keys is None:
            return None
        return self.keys.new_file(BLOCK_KEY_MAGIC, base, self.context("msgs"))

    def packed(self, base: int) -> tuple[FileCipher | None, bytes]:
        """The cipher (None without keys) and key header of a block's compressed copy."""
        if self.keys is None:
            return None, encode_key_header(BLOCK_KEY_MAGIC, base, None, PACKED)
        return self.keys.new_file(BLOCK_KEY_MAGIC, base, self.context("msgs"), PACKED)

    def open_tail(self, found: Tail | None, rekey: bool, recovered: Tail) -> TailFile:
        """The store's tail record: ``found`` as it is, or written anew sealed with the current
        key (``rekey``), or created from the ``recovered`` view if there was none (the sync at
        the end of opening brings it up to date). Raises OSError."""
        first = None if found is not None else recovered
        if rekey and found is not None:
            first = Tail(*found.values())
        tf = TailFile(self.directory, first, self.keys, self.context("tail"), rekey)
        if found is not None and not rekey:
            tf.last = found  # its next rewrite goes to the older slot
        return tf

    def write_meta(self, meta: bytes) -> None:
        """The stream's ``meta.dat``, sealed with the current key (atomically). Raises ErrStoreIO."""
        try:
            write_framed_atomic(
                self.directory / META_FILE, META_MAGIC, bytes(meta), self.keys, meta_context(self.name)
            )
        except OSError as exc:
            raise ErrStoreIO(exc.errno or errno.EIO, None, f"writing {META_FILE}: {exc}") from exc

    def consumer_store(self, name: str) -> FileConsumerStore:
        """Consumer ``name``'s files, under the stream's keys. Raises ErrStoreIO."""
        try:
            return FileConsumerStore(self.directory / OBS_DIR, name, self.keys, self.name)
        except OSError as exc:
            raise ErrStoreIO(exc.errno or errno.EIO, None, f"consumer directory {name}: {exc}") from exc

    def consumer_names(self) -> list[str]:
        obs = self.directory / OBS_DIR
        return sorted(p.name for p in obs.iterdir() if p.is_dir()) if obs.is_dir() else []
