"""The forms a file store's files take: plaintext, compressed or encrypted, and the keys of each.

Owns, for one stream directory: the key context of each of its files (crypto.py), the cipher and
key header of a new block file (framed when there are keys, frames.py) and of a compressed copy,
and what opening the store must check and do before anything is served: every file's key checked
first (a file written with another key refuses the store, touching nothing), then erases a crash
interrupted finished and every file found plaintext or under the previous key sealed with the
current one (rekey.py). Must not know: the index, records, limits, when to compress.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .consumer_state import META_MAGIC, needs_rekey
from .crypto import FileCipher, StoreKeys, encode_key_header
from .erase import finish_erases
from .frames import BLOCK_KEY_MAGIC, PACKED
from .layout import META_FILE, OBS_DIR
from .recovery import Recovered
from .rekey import SmallFile, check_consumer_files, rekey_store
from .tail import Tail, TailFile, read_tail_file

__all__ = ["FileForms", "KeyChecks", "meta_context"]


def meta_context(stream: str) -> str:
    """The key context of a stream's ``meta.dat``."""
    return f"{stream}/meta"


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
