"""Small durable files: stream/consumer metadata and consumer state, written atomically.

Owns: the framed single-file format (magic, version, length, CRC) used for ``meta.dat`` and
``o.dat``, the atomic replace dance (tmp file -> fsync -> rename -> fsync directory), name
validation for per-consumer directories, and the two ``ConsumerStore`` implementations.
Must not know: what the metadata bytes mean (the JetStream layer's JSON config), message blocks,
or when to persist (the caller decides; ``update`` blocks on fsync, so call it off the loop).

Framed file, little-endian, byte by byte::

    0   4  magic     b"JPMT" (meta) or b"JPCS" (consumer state)
    4   1  version   1
    5   3  reserved  zero
    8   4  length    u32, payload bytes that follow the header
    12  4  crc32     zlib.crc32 over bytes [0, 12) and the payload
    16  .. payload   meta: opaque bytes; consumer state: msgpack of ``ConsumerState``

A file that is short, has the wrong magic/version or fails its CRC raises ``ErrCorrupt``; the
caller quarantines it. Nothing here ever deletes a file because it looks bad.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from .base import ConsumerState, ErrCorrupt, ErrInvalidName, ErrStoreIO
from .layout import CONSUMER_META_FILE, CONSUMER_STATE_FILE

__all__ = [
    "CONSUMER_MAGIC",
    "META_MAGIC",
    "FileConsumerStore",
    "MemoryConsumerStore",
    "fsync_dir",
    "read_consumer_state",
    "read_framed",
    "validate_name",
    "write_framed_atomic",
]

META_MAGIC = b"JPMT"
CONSUMER_MAGIC = b"JPCS"
_VERSION = 1
_HDR = struct.Struct("<4sB3xI")
_CRC = struct.Struct("<I")
FRAME_HEADER_SIZE = _HDR.size + _CRC.size  # 16

# A metadata or consumer-state file larger than this is refused rather than read into memory:
# configs are kilobytes and even 1M pending acks encode to ~20 MB of msgpack.
MAX_FRAMED_PAYLOAD = 256 * 1024 * 1024

# Longest name usable as one directory entry on common Linux file systems (NAME_MAX).
MAX_NAME_BYTES = 255

_STATE_ENCODER = msgspec.msgpack.Encoder()
_STATE_DECODER = msgspec.msgpack.Decoder(ConsumerState)


def validate_name(name: str) -> None:
    """Refuse names that are not one safe path component (no traversal, no separators)."""
    if not name or name in (".", "..") or len(name.encode()) > MAX_NAME_BYTES:
        raise ErrInvalidName(f"invalid name {name!r}")
    if any(c in name for c in "/\\\0") or not name.isprintable():
        raise ErrInvalidName(f"invalid name {name!r}")


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (creates, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _frame(magic: bytes, payload: bytes) -> bytes:
    head = _HDR.pack(magic, _VERSION, len(payload))
    return head + _CRC.pack(zlib.crc32(payload, zlib.crc32(head))) + payload


def write_framed_atomic(path: Path, magic: bytes, payload: bytes) -> None:
    """Replace ``path`` so that after a crash it holds either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(_frame(magic, payload))
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextmanager
def _io_errors(what: str) -> Iterator[None]:
    """Translate OSError into the store's ``ErrStoreIO`` at this layer's boundary."""
    try:
        yield
    except OSError as exc:
        raise ErrStoreIO(exc.errno or errno.EIO, None, f"{what}: {exc}") from exc


def read_framed(path: Path, magic: bytes) -> bytes | None:
    """The payload of a framed file, None if it does not exist; ErrCorrupt if it fails checks."""
    try:
        with open(path, "rb") as f:
            raw = f.read(FRAME_HEADER_SIZE + MAX_FRAMED_PAYLOAD + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {path.name}: {exc}") from exc
    if len(raw) < FRAME_HEADER_SIZE:
        raise ErrCorrupt(f"{path.name}: truncated header ({len(raw)} bytes)")
    got_magic, version, length = _HDR.unpack_from(raw)
    if got_magic != magic or version != _VERSION:
        raise ErrCorrupt(f"{path.name}: bad magic or version")
    if length != len(raw) - FRAME_HEADER_SIZE:
        raise ErrCorrupt(f"{path.name}: length {length} does not match file size {len(raw)}")
    (crc,) = _CRC.unpack_from(raw, _HDR.size)
    payload = raw[FRAME_HEADER_SIZE:]
    if zlib.crc32(payload, zlib.crc32(raw[: _HDR.size])) != crc:
        raise ErrCorrupt(f"{path.name}: checksum mismatch")
    return payload


def read_consumer_state(path: Path) -> ConsumerState | None:
    """The consumer state in a framed ``o.dat``, None if there is none; ErrCorrupt if it fails
    its checks or does not decode."""
    payload = read_framed(path, CONSUMER_MAGIC)
    if payload is None:
        return None
    try:
        return _STATE_DECODER.decode(payload)
    except msgspec.DecodeError as exc:  # valid CRC but not our encoding: a format bug
        raise ErrCorrupt(f"{path.name}: undecodable state: {exc}") from exc


class MemoryConsumerStore:
    """Consumer state kept in memory (memory-storage streams, tests)."""

    def __init__(self, name: str, on_delete: Callable[[str], object] | None = None) -> None:
        validate_name(name)
        self.name = name
        self._on_delete = on_delete
        self._state = ConsumerState()
        self._meta: bytes | None = None

    def update(self, state: ConsumerState) -> None:
        self._state = state

    def load(self) -> ConsumerState:
        return self._state

    def write_meta(self, meta: bytes) -> None:
        self._meta = bytes(meta)

    def read_meta(self) -> bytes | None:
        return self._meta

    def delete(self) -> None:
        self._state = ConsumerState()
        self._meta = None
        if self._on_delete is not None:
            self._on_delete(self.name)


class FileConsumerStore:
    """Consumer state in ``<stream dir>/obs/<name>/{o.dat,meta.dat}``, each replaced atomically."""

    STATE_FILE = CONSUMER_STATE_FILE
    META_FILE = CONSUMER_META_FILE

    def __init__(self, obs_dir: Path, name: str) -> None:
        validate_name(name)
        self.name = name
        self._dir = obs_dir / name
        # update() may run on a worker thread; two concurrent updates must not share a tmp file.
        self._lock = threading.Lock()
        if not self._dir.is_dir():
            self._dir.mkdir(parents=True, exist_ok=True)
            fsync_dir(obs_dir)

    def update(self, state: ConsumerState) -> None:
        payload = _STATE_ENCODER.encode(state)
        with self._lock, _io_errors(self.STATE_FILE):
            write_framed_atomic(self._dir / self.STATE_FILE, CONSUMER_MAGIC, payload)

    def load(self) -> ConsumerState:
        state = read_consumer_state(self._dir / self.STATE_FILE)
        return ConsumerState() if state is None else state

    def write_meta(self, meta: bytes) -> None:
        with self._lock, _io_errors(self.META_FILE):
            write_framed_atomic(self._dir / self.META_FILE, META_MAGIC, bytes(meta))

    def read_meta(self) -> bytes | None:
        return read_framed(self._dir / self.META_FILE, META_MAGIC)

    def delete(self) -> None:
        with self._lock, _io_errors(self.name):
            shutil.rmtree(self._dir, ignore_errors=True)
            if self._dir.parent.is_dir():
                fsync_dir(self._dir.parent)
