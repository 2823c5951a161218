"""One block (segment) file of a file store and its compact in-memory index.

Owns: the ``Block`` object — the path and lazily opened descriptor of one ``*.blk`` file, its
write/flush/durable offsets, and three parallel ``array('I')`` columns indexed by
``seq - base``: record offset, accounted size (``record.accounted_size``; 0 once deleted) and
subject id (``NO_SID`` once deleted). That is 12 bytes per message and no Python object per message; payloads stay on disk.
Offsets and sizes are *logical* (frames.py): a framed block's ``frames`` says where in its file
they are, ``pdurable`` how much of the file is durable; a plain block has ``frames`` None and
its logical bytes are its file's.
Also owns ``SubjectInfo``, the per-subject counters, block file naming, listing and creation, and
the block size a stream's blocks roll at.
Must not know: limits, purge semantics, recovery policy, the write buffer, or other blocks.
"""

from __future__ import annotations

import errno
import os
from array import array
from pathlib import Path
from typing import Final

from .crypto import FileCipher
from .frames import FrameTable, framed_prefix
from .record import BLOCK_HEADER_SIZE, BlockHeader, encode_block_header

__all__ = [
    "BLOCK_SUFFIX",
    "DEFAULT_BLOCK_SIZE",
    "MIN_BLOCK_SIZE",
    "NO_SID",
    "Block",
    "SubjectInfo",
    "block_name",
    "block_size_for",
    "list_blocks",
    "parse_block_name",
]

DEFAULT_BLOCK_SIZE: Final = 8 * 1024 * 1024
"""Roll to a new block past this size. nats-server's maximum for limits streams: large enough that
per-block costs (a file, a descriptor, a header) vanish per message, small enough that a dead
block frees its space soon and that reading one block to carry its tombstones stays cheap."""

MIN_BLOCK_SIZE: Final = 1024
"""Smallest accepted ``block_size`` (tests use tiny blocks to exercise rolling and removal)."""

SMALL_STREAM_BLOCK_SIZE: Final = 32_000
MEDIUM_BLOCK_SIZE: Final = 4 * 1024 * 1024


def block_size_for(max_bytes: int) -> int:
    """The block size of a stream with this ``max_bytes`` and no explicit ``block_size``, by
    nats-server's rule: a quarter of ``max_bytes`` (plus 1, rounded up to 100) is at most
    32,000 bytes -> 32,000; at least 8 MiB -> 8 MiB; in between -> 4 MiB. Without ``max_bytes``
    8 MiB. A small stream so spreads over several blocks, and frees its space a block at a time."""
    if max_bytes <= 0:
        return DEFAULT_BLOCK_SIZE
    size = max_bytes // 4 + 1
    size += -size % 100
    if size <= SMALL_STREAM_BLOCK_SIZE:
        return SMALL_STREAM_BLOCK_SIZE
    return DEFAULT_BLOCK_SIZE if size >= DEFAULT_BLOCK_SIZE else MEDIUM_BLOCK_SIZE


NO_SID: Final = 0xFFFFFFFF  # subject id of a deleted (or never written) sequence
BLOCK_SUFFIX: Final = ".blk"
_NAME_DIGITS: Final = 20  # u64 max has 20 decimal digits; fixed width keeps names sortable


def block_name(base: int) -> str:
    return f"{base:0{_NAME_DIGITS}d}{BLOCK_SUFFIX}"


def parse_block_name(name: str) -> int | None:
    """The base sequence of a block file name, None for anything else (tmp files, strays)."""
    if not name.endswith(BLOCK_SUFFIX):
        return None
    stem = name[: -len(BLOCK_SUFFIX)]
    if len(stem) != _NAME_DIGITS or not stem.isdigit():
        return None
    return int(stem)


def list_blocks(msgdir: Path) -> list[tuple[int, Path]]:
    """``(base, path)`` of every block file in ``msgdir``, oldest first (other names ignored)."""
    return sorted(
        (base, msgdir / name) for name in os.listdir(msgdir) if (base := parse_block_name(name)) is not None
    )


class SubjectInfo:
    """Live-message bookkeeping for one subject. ``first`` is a lower bound, validated on use."""

    __slots__ = ("count", "enc", "first", "last", "name", "sid", "slen")

    def __init__(self, name: str, enc: bytes, sid: int, seq: int) -> None:
        self.name = name
        self.enc = enc
        self.slen = len(enc)  # the append path needs it for every message
        self.sid = sid
        self.count = 0
        self.first = seq
        self.last = seq


class Block:
    """One ``<base>.blk`` file plus its index columns."""

    __slots__ = (
        "base",
        "durable",
        "fd",
        "flushed",
        "frames",
        "hdr_gen",
        "lens",
        "live",
        "offs",
        "path",
        "pdurable",
        "sids",
        "size",
        "tombs",
        "wseq",
    )

    def __init__(self, path: Path, base: int) -> None:
        self.path = path
        self.base = base
        self.fd = -1
        self.offs = array("I")
        self.lens = array("I")
        self.sids = array("I")
        self.live = 0  # entries whose sid is not NO_SID
        self.tombs = 0  # tombstone records in this file (only these force a read on deletion)
        self.size = BLOCK_HEADER_SIZE  # logical end, including bytes still in the write buffer
        self.flushed = BLOCK_HEADER_SIZE  # bytes handed to the OS
        self.durable = 0  # bytes known to be on stable storage
        self.hdr_gen = 0
        self.wseq = 0  # bumped on every write into the file, so sync can tell if it is clean
        self.frames: FrameTable | None = None  # a framed file's frames (None: a plain file)
        self.pdurable = 0  # framed: file bytes known to be on stable storage

    @property
    def end_seq(self) -> int:
        """One past the highest sequence the index columns cover."""
        return self.base + len(self.sids)

    def open(self) -> int:
        """Open the file (read-write if allowed, else read-only) and return the descriptor."""
        if self.fd < 0:
            try:
                self.fd = os.open(self.path, os.O_RDWR)
            except PermissionError:
                self.fd = os.open(self.path, os.O_RDONLY)
            except OSError as exc:
                if exc.errno != errno.EROFS:  # serve reads from a read-only mount
                    raise
                self.fd = os.open(self.path, os.O_RDONLY)
        return self.fd

    @classmethod
    def create(
        cls, directory: Path, header: BlockHeader, framed: tuple[FileCipher, bytes] | None = None
    ) -> Block:
        """Create a new block file holding only its header (gen 1): plain, or with ``framed``
        (its cipher and key header) a framed one. Raises OSError."""
        blk = cls(directory / block_name(header.base), header.base)
        fd = os.open(blk.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            header.gen = 1
            off, slot = encode_block_header(header)
            if framed is None:
                buf = bytearray(BLOCK_HEADER_SIZE)
                buf[off : off + len(slot)] = slot
                data = bytes(buf)
            else:
                data, blk.frames = framed_prefix(framed[0], framed[1], slot)
            if os.pwrite(fd, data, 0) != len(data):
                raise OSError(28, "short write of block header")
        except BaseException:
            os.close(fd)
            try:
                os.unlink(blk.path)
            except OSError:
                pass
            raise
        blk.fd = fd
        blk.hdr_gen = 1
        return blk
