"""Consistent exports: every message of a store as of one instant, read while the store goes on.

Owns the two ``StoreExport`` implementations behind ``StreamStore.export`` (the backup's read of
a stream). Taking one is cheap and happens on the store's own thread; reading it may then happen
on any one other thread, in slices, while the store keeps storing and removing messages, and it
always returns exactly the messages that were live when it was taken:

* ``MemoryExport`` keeps references to the store's entries, each holding its message (an
  immutable value): a C-speed copy of the list of entries, no payload copied.
* ``FileExport`` flushes the store's write buffer to the OS, then copies each block's index
  columns (``array`` copies) and the subject table, and duplicates the descriptors of the oldest
  :data:`EXPORT_FDS` blocks. Block files are append-only and a removed block is only unlinked, so
  the duplicated descriptors keep every byte the export needs readable: records are read with
  ``os.pread`` and verified by the record codec (``record.decode_msgs``), as any read of the
  store is. Newer blocks (a stream of more than ~4 GB) are opened by name when the export reaches
  them; one removed by then (the stream's head moved past it during the read) is ``ErrStoreIO``,
  never a silent hole. A record erased since the export was taken (``erase_msg`` overwrites it in
  place) is skipped; a record that fails its checksum is ``ErrCorrupt``, as a read of the live
  store would be. A framed block (compressed or encrypted, frames.py) is read through its frame
  table as of the export (the store puts no compressed copy in place of a block while an export
  is open, so the table stays its file's); an erase meanwhile rewrites a frame elsewhere in the
  same file, which the table follows.

Must not know: what the messages are for, the network.
"""

from __future__ import annotations

import errno
import os
from array import array
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from .base import ErrCorrupt, ErrStoreIO, StoredMsg
from .frames import FrameTable
from .record import FLAG_ERASED, Named, decode_msgs, longest_record, peek_header
from .segment import NO_SID, Block

__all__ = ["EXPORT_READ", "ExportPart", "FileExport", "HoldsMsg", "MemoryExport", "take_export"]

EXPORT_READ: Final = 1024 * 1024
"""Bytes per ``pread`` of a file export (a backup reads every block from end to end)."""

EXPORT_FDS: Final = 512
"""Blocks whose descriptors an export duplicates when it is taken (the oldest ones, which a
purge or the limits remove first); the rest are opened by name when reached, so a large stream
cannot exhaust the process's descriptors."""


class HoldsMsg(Protocol):
    """A memory store's entry: what ``MemoryExport`` needs of it."""

    @property
    def msg(self) -> StoredMsg: ...


class MemoryExport:
    """A memory store's messages as of one instant (see the module docstring)."""

    __slots__ = ("_entries", "_i")

    def __init__(self, entries: Sequence[HoldsMsg]) -> None:
        self._entries = entries
        self._i = 0

    def read(self, max_bytes: int) -> list[StoredMsg]:
        entries, i = self._entries, self._i
        out: list[StoredMsg] = []
        size = 0
        n = len(entries)
        while i < n and size < max_bytes:
            m = entries[i].msg
            out.append(m)
            size += len(m.subject) + len(m.hdr) + len(m.data)
            i += 1
        self._i = i
        return out

    def close(self) -> None:
        self._entries = ()


class ExportPart:
    """One block as of the export: its file (a duplicated descriptor, or -1 and its path to open
    when reached) and copies of its index columns."""

    __slots__ = ("base", "fd", "frames", "lens", "name", "offs", "path", "sids")

    def __init__(
        self,
        fd: int,
        path: str,
        base: int,
        offs: array[int],
        lens: array[int],
        sids: array[int],
        frames: FrameTable | None = None,
    ) -> None:
        self.fd = fd
        self.path = path
        self.name = os.path.basename(path)
        self.base = base
        self.offs = offs
        self.lens = lens
        self.sids = sids
        self.frames = frames


class FileExport:
    """A file store's messages as of one instant (see the module docstring)."""

    __slots__ = ("_done", "_i", "_k", "_names", "_parts")

    def __init__(
        self, parts: list[ExportPart], names: Sequence[Named | None], done: Callable[[], None] | None = None
    ) -> None:
        """``done`` is called once, by ``close``."""
        self._parts = parts
        self._names = names
        self._done = done
        self._k = 0  # the part being read
        self._i = 0  # its next entry

    def read(self, max_bytes: int) -> list[StoredMsg]:
        out: list[StoredMsg] = []
        size = 0
        parts = self._parts
        while self._k < len(parts) and size < max_bytes:
            p = parts[self._k]
            i = self._i
            n = len(p.sids)
            while i < n and p.sids[i] == NO_SID:
                i += 1
            if i >= n:
                self._next_part()
                continue
            off = p.offs[i]
            if p.fd < 0:
                p.fd = _open(p)
            want = max(EXPORT_READ, longest_record(p.lens[i]))
            try:
                if p.frames is None:
                    buf = os.pread(p.fd, want, off)
                else:
                    buf = p.frames.read(p.fd, off, off + want, p.name)
            except OSError as exc:
                raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {p.name}: {exc}") from exc
            j = decode_msgs(buf, off, p.offs, p.lens, p.sids, self._names, p.base, i, 1 << 30, out, NO_SID)
            if j == i:  # the record the entry expects is not there, or not whole
                fields = peek_header(buf, 0)
                if fields is None or fields[0] > len(buf):
                    self._next_part()  # the file ends here: rolled back, never acknowledged
                    continue
                if not fields[1] & FLAG_ERASED:
                    raise ErrCorrupt(f"record of seq {p.base + i} failed its checksum", [p.base + i])
                j = i + 1  # erased since the export was taken: it is gone
            size += (p.offs[j] - off) if j < n else len(buf)
            self._i = j
        return out

    def _next_part(self) -> None:
        p = self._parts[self._k]
        p.offs = p.lens = p.sids = array("I")  # read: its columns can go
        if p.fd >= 0:
            os.close(p.fd)
            p.fd = -1
        self._k += 1
        self._i = 0

    def close(self) -> None:
        for p in self._parts:
            if p.fd >= 0:
                os.close(p.fd)
                p.fd = -1
        self._k = len(self._parts)
        done, self._done = self._done, None
        if done is not None:
            done()


def _open(p: ExportPart) -> int:
    try:
        return os.open(p.path, os.O_RDONLY)
    except FileNotFoundError as exc:
        raise ErrStoreIO(
            errno.ENOENT,
            None,
            f"{p.name} was removed while it was being exported (the stream's head moved past it)",
        ) from exc
    except OSError as exc:
        raise ErrStoreIO(exc.errno or errno.EIO, None, f"opening {p.name}: {exc}") from exc


def take_export(
    blocks: Sequence[Block],
    fd_of: Callable[[Block], int],
    names: Sequence[Named | None],
    where: str,
    done: Callable[[], None],
) -> FileExport:
    """A file store's export (its write buffer already flushed): each block with live messages
    taken as copies of its index columns, its frame table and (the oldest ``EXPORT_FDS``) a
    duplicated descriptor. ``done`` is called when the export is closed."""
    parts: list[ExportPart] = []
    try:
        for blk in blocks:
            if blk.live:
                fd = os.dup(fd_of(blk)) if len(parts) < EXPORT_FDS else -1
                parts.append(
                    ExportPart(fd, str(blk.path), blk.base, blk.offs[:], blk.lens[:], blk.sids[:], blk.frames)
                )
    except OSError as exc:
        FileExport(parts, []).close()
        raise ErrStoreIO(exc.errno or errno.EIO, None, f"exporting {where}: {exc}") from exc
    return FileExport(parts, list(names), done)
