"""The tail record: where a file store's stream ends, kept apart from the blocks that hold it.

Owns ``<stream dir>/tail.dat`` — its bytes, creating it, reading it, and rewriting it after
every group commit — so that a stream whose newest block file was deleted or cut short, or
whose whole ``msgs/`` directory went missing, is found out on open instead of silently handing
out acknowledged sequences again. Must not know: blocks' contents, the index, recovery's rules
(``recovery.py`` checks the blocks against what this record says), or when to commit.

What it says, as of the end of the last successful ``sync``: every sequence up to ``hwm`` was
on disk in the blocks, so nothing above ``hwm`` was ever acknowledged; every sequence below
``floor`` is deleted; and block ``<block>.blk``, the newest one then, held at least ``size``
durable bytes. ``GroupCommit.sync`` writes it only after the blocks' ``fdatasync`` returned and
syncs it before any PubAck goes out, so it never claims more than the blocks hold (no false
"lost" after a power cut) and always covers every acknowledged message. It lives outside
``msgs/`` so that losing that directory does not lose it too.

File (little-endian), 128 bytes, two slots; the valid slot with the higher ``gen`` wins, and a
rewrite goes to the older slot, so a torn rewrite always leaves the previous record intact::

    0   4  magic      b"JPTL"
    4   1  version    1
    5   3  reserved   zero
    8   8  hwm        u64, highest sequence durable in the blocks (and so the highest acknowledged)
    16  8  floor      u64, every sequence below it is deleted
    24  8  last_ts    i64, timestamp of the message with seq == hwm (0 if unknown)
    32  8  block      u64, base sequence of the newest block file at that sync
    40  8  size       u64, that block's durable size in bytes
    48  8  gen        u64, rewrite counter; slot = gen % 2
    56  4  crc32      zlib.crc32 over bytes [0, 56)
    60  4  padding    zero

The file is created whole (both slots' space) and synced before the store uses it, so a rewrite
never changes its size and ``fdatasync`` has no metadata to write: one small write and one sync
per group commit.

Encrypted (the store has keys, crypto.py), 384 bytes::

    0    64  key header (magic b"JPTX"), then its copy at 64
    128  128 slot A: nonce | AEAD(the 64-byte plain slot above) | tag (92 bytes), crc32 over
             those 92 bytes (4), zero padding; the associated data is the key header and the
             slot's index, so a slot cannot be moved to the other place
    256  128 slot B

A plaintext tail record of a store opened with keys, or one written with the previous key, is
replaced whole (atomically) by an encrypted one; one written with another key refuses to open
(``ErrEncryptionKey``), touching nothing.
"""

from __future__ import annotations

import errno as _errno
import os
import struct
import zlib
from pathlib import Path
from typing import Final

from .crypto import KEY_HEADER_SIZE, FileCipher, StoreKeys, decode_key_header, open_file_cipher
from .fileio import fsync_dir, write_synced
from .layout import TAIL_FILE

__all__ = [
    "SEALED_TAIL_SIZE",
    "TAIL_KEY_MAGIC",
    "TAIL_SIZE",
    "Tail",
    "TailFile",
    "decode_tail",
    "encode_tail",
    "read_tail",
    "read_tail_file",
]

_SLOT: Final = struct.Struct("<4sB3xQQqQQQ")
_CRC: Final = struct.Struct("<I")
_SLOT_SIZE: Final = 64
_MAGIC: Final = b"JPTL"
_VERSION: Final = 1
TAIL_SIZE: Final = 2 * _SLOT_SIZE
assert _SLOT.size + _CRC.size <= _SLOT_SIZE

TAIL_KEY_MAGIC: Final = b"JPTX"
_SEALED_SLOTS_AT: Final = 2 * KEY_HEADER_SIZE
_SEALED_SLOT: Final = 128
SEALED_TAIL_SIZE: Final = _SEALED_SLOTS_AT + 2 * _SEALED_SLOT


class Tail:
    """One decoded slot: see the module docstring for what each field promises."""

    __slots__ = ("block", "floor", "gen", "hwm", "last_ts", "size")

    def __init__(self, hwm: int, floor: int, last_ts: int, block: int, size: int, gen: int = 0) -> None:
        self.hwm = hwm
        self.floor = floor
        self.last_ts = last_ts
        self.block = block
        self.size = size
        self.gen = gen

    def values(self) -> tuple[int, int, int, int, int]:
        return self.hwm, self.floor, self.last_ts, self.block, self.size

    def __repr__(self) -> str:
        return (
            f"Tail(hwm={self.hwm}, floor={self.floor}, block={self.block}, size={self.size}, gen={self.gen})"
        )


def encode_tail(t: Tail) -> tuple[int, bytes]:
    """``(file offset, 64 bytes)`` of the slot that ``t.gen`` selects."""
    body = _SLOT.pack(_MAGIC, _VERSION, t.hwm, t.floor, t.last_ts, t.block, t.size, t.gen)
    slot = body + _CRC.pack(zlib.crc32(body))
    return (t.gen % 2) * _SLOT_SIZE, slot + bytes(_SLOT_SIZE - len(slot))


def decode_tail(buf: bytes) -> Tail | str:
    """The winning slot of a tail file's bytes, or why there is none."""
    if len(buf) < TAIL_SIZE:
        return f"{TAIL_FILE} is {len(buf)} bytes, shorter than {TAIL_SIZE}"
    best: Tail | None = None
    for off in (0, _SLOT_SIZE):
        if zlib.crc32(buf[off : off + _SLOT.size]) != _CRC.unpack_from(buf, off + _SLOT.size)[0]:
            continue
        magic, version, hwm, floor, last_ts, block, size, gen = _SLOT.unpack_from(buf, off)
        if magic != _MAGIC or version != _VERSION or gen % 2 != off // _SLOT_SIZE:
            continue
        if best is None or gen > best.gen:
            best = Tail(hwm, floor, last_ts, block, size, gen)
    if best is None:
        return f"{TAIL_FILE} at offset 0: no valid slot (both fail their checksum)"
    if best.floor > best.hwm + 1:
        at = (best.gen % 2) * _SLOT_SIZE
        return f"{TAIL_FILE} at offset {at}: impossible record: floor {best.floor} above hwm {best.hwm} + 1"
    return best


def _sealed_slot(fc: FileCipher, key_header: bytes, index: int, plain: bytes) -> bytes:
    body = fc.seal(plain, key_header + bytes((index,)))
    return (body + _CRC.pack(zlib.crc32(body))).ljust(_SEALED_SLOT, b"\0")


def _open_sealed(raw: bytes, keys: StoreKeys | None, context: str) -> tuple[Tail | str, FileCipher | None]:
    """The winning slot of an encrypted tail file and its cipher. Raises ErrEncryptionKey."""
    if len(raw) != SEALED_TAIL_SIZE:
        return f"{TAIL_FILE} is {len(raw)} bytes, an encrypted one is {SEALED_TAIL_SIZE}", None
    hdr = None
    for at in (0, KEY_HEADER_SIZE):
        got = decode_key_header(raw, at, TAIL_KEY_MAGIC)
        if not isinstance(got, str):
            hdr = got
            break
    if hdr is None:
        return f"{TAIL_FILE} at offset 0: no valid key header (both copies damaged)", None
    fc = open_file_cipher(keys, hdr, context, TAIL_FILE)
    if fc is None:
        return f"{TAIL_FILE} at offset 0: an encrypted tail record's header without a cipher", None
    plain = bytearray(TAIL_SIZE)
    for index in (0, 1):
        at = _SEALED_SLOTS_AT + index * _SEALED_SLOT
        body = raw[at : at + 92]
        if zlib.crc32(body) != _CRC.unpack_from(raw, at + 92)[0]:
            continue
        opened = fc.open(body, hdr.raw + bytes((index,)))
        if opened is not None and len(opened) == _SLOT_SIZE:
            plain[index * _SLOT_SIZE : (index + 1) * _SLOT_SIZE] = opened
    got_tail = decode_tail(bytes(plain))
    if isinstance(got_tail, str):
        got_tail = got_tail.replace(
            "no valid slot (both fail their checksum)", "no valid slot (both fail authentication)"
        )
    return got_tail, fc


def read_tail_file(
    directory: Path, keys: StoreKeys | None = None, context: str = ""
) -> tuple[Tail | str | None, bool]:
    """The stream directory's tail record (None if there is none; why, if it cannot be used) and
    whether its file must be rewritten to be sealed with ``keys``' current key (it is plaintext,
    or written with the previous key). Raises OSError if the file exists but cannot be read,
    ErrEncryptionKey if it was written with another key."""
    try:
        with open(directory / TAIL_FILE, "rb") as f:
            raw = f.read(SEALED_TAIL_SIZE + 1)
    except FileNotFoundError:
        return None, False
    if raw[:4] == TAIL_KEY_MAGIC or raw[KEY_HEADER_SIZE : KEY_HEADER_SIZE + 4] == TAIL_KEY_MAGIC:
        tail, fc = _open_sealed(raw, keys, context)
        return tail, fc is not None and fc.stale
    if len(raw) > TAIL_SIZE:
        return f"{TAIL_FILE} is longer than {TAIL_SIZE} bytes", False
    return decode_tail(raw), keys is not None


def read_tail(directory: Path, keys: StoreKeys | None = None, context: str = "") -> Tail | str | None:
    """The stream directory's tail record; None if there is none; why, if it cannot be used.
    Raises OSError if the file exists but cannot be read, ErrEncryptionKey (see above)."""
    return read_tail_file(directory, keys, context)[0]


class TailFile:
    """The open tail record of a store: one rewrite and one ``fdatasync`` per group commit.

    ``write`` runs wherever ``GroupCommit.sync`` runs (one at a time, under its sync mutex)."""

    __slots__ = ("_fc", "_fd", "_hdr", "_path", "last")

    def __init__(
        self,
        directory: Path,
        first: Tail | None,
        keys: StoreKeys | None = None,
        context: str = "",
        replace: bool = False,
    ) -> None:
        """Open ``directory``'s tail record, creating it (durably) from ``first`` if given and
        there is none, or with ``replace`` in any case (sealed with ``keys``' current key, if
        any: how a plaintext or previous-key record is re-encrypted). Raises OSError,
        ErrEncryptionKey."""
        self._path = directory / TAIL_FILE
        self.last = first
        self._fc: FileCipher | None = None
        self._hdr = b""
        if first is not None and (replace or not self._path.exists()):
            first.gen = 1
            if keys is not None:
                self._fc, self._hdr = keys.new_file(TAIL_KEY_MAGIC, 0, context)
                buf = bytearray(SEALED_TAIL_SIZE)
                buf[0:KEY_HEADER_SIZE] = buf[KEY_HEADER_SIZE:_SEALED_SLOTS_AT] = self._hdr
                off, slot = encode_tail(first)
                index = off // _SLOT_SIZE
                at = _SEALED_SLOTS_AT + index * _SEALED_SLOT
                buf[at : at + _SEALED_SLOT] = _sealed_slot(self._fc, self._hdr, index, slot)
            else:
                buf = bytearray(TAIL_SIZE)
                off, slot = encode_tail(first)
                buf[off : off + len(slot)] = slot
            tmp = self._path.with_name(TAIL_FILE + ".tmp")
            write_synced(tmp, bytes(buf))
            os.replace(tmp, self._path)
            fsync_dir(directory)
        elif keys is not None:
            with open(self._path, "rb") as f:
                raw = f.read(SEALED_TAIL_SIZE)
            got = decode_key_header(raw, 0, TAIL_KEY_MAGIC)
            if isinstance(got, str):
                got = decode_key_header(raw, KEY_HEADER_SIZE, TAIL_KEY_MAGIC)
            if isinstance(got, str):
                raise OSError(_errno.EIO, f"{TAIL_FILE}: {got}")
            self._fc = open_file_cipher(keys, got, context, TAIL_FILE)
            self._hdr = got.raw
        self._fd = os.open(self._path, os.O_RDWR)

    def write(self, hwm: int, floor: int, last_ts: int, block: int, size: int) -> None:
        """Make these the record's values, durably (the older slot is rewritten). Raises OSError."""
        last = self.last
        if last is not None and last.values() == (hwm, floor, last_ts, block, size):
            return
        t = Tail(hwm, floor, last_ts, block, size, (last.gen if last is not None else 0) + 1)
        off, slot = encode_tail(t)
        if self._fc is not None:
            index = off // _SLOT_SIZE
            off = _SEALED_SLOTS_AT + index * _SEALED_SLOT
            slot = _sealed_slot(self._fc, self._hdr, index, slot)
        if os.pwrite(self._fd, slot, off) != len(slot):
            raise OSError(_errno.EIO, f"short write of {TAIL_FILE}")
        os.fdatasync(self._fd)
        self.last = t

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
