"""Framed block files: a block's bytes kept in frames, each compressed and/or encrypted.

Owns the second block file format (version 2; version 1 is record.py's plain file) and every
rule about its bytes: the frame codec, the file's layout, reading a range of a block's *logical*
bytes out of its frames, appending frames, rewriting one frame elsewhere and destroying the old
one (an erase), and parsing a whole file back into its logical bytes with every damaged frame
found (recovery and the offline checker).
Must not know: what the logical bytes hold (records, the block header: record.py), the index,
when to write, limits.

A block has *logical* bytes: exactly what a plain block file holds (two 64-byte header slots,
then records, record.py). Everything above this module works on logical bytes and logical
offsets (the index's record offsets are logical), so a store may hold plain, compressed and
encrypted blocks side by side, and a block may change form (a sealed block compressed off the
publish path, a plaintext one encrypted) without anything else noticing.

Framed file ``<base>.blk`` (little-endian)::

    0    64  key header (crypto.py, magic b"JPBF", value = the block's base sequence)
    64   64  the same key header again (a damaged copy costs nothing)
    128  128 slot frame A: logical bytes [0, 64), the block header's slot A
    256  128 slot frame B: logical bytes [64, 128), slot B (rewritten in place, as in a plain file)
    384  ..  data frames, back to back, holding logical bytes from 128 on

Frame::

    0   4  magic    b"JPFR"
    4   1  flags    bit0 S2 (the data is Snappy-block compressed), bit1 SEALED (the body is
                    nonce | AEAD ciphertext | tag, crypto.py), bit2 DEAD (a destroyed frame:
                    its body is zeros and means nothing); others zero
    5   3  reserved zero
    8   4  lpos     u32, the logical offset its data belongs at (>= 128 for data frames)
    12  4  llen     u32, the data's logical length
    16  4  slen     u32, the body's length (what follows this 28-byte header)
    20  4  gen      u32, rewrite generation: of two valid frames with the same lpos, the higher wins
    24  4  crc32    zlib.crc32 over bytes [0, 24), and over the body unless SEALED or DEAD
                    (a sealed body is authenticated by its AEAD tag, with bytes [0, 24) as the
                    associated data: a frame cannot be moved, resized or re-dated undetected)

Frames always start and end at record boundaries, so a damaged frame costs exactly the records in
it: recovery sees zeros in their place and reports their sequences lost, the rest of the block is
served. Appends write flush-sized frames of at most ``FRAME_TARGET`` bytes (plus one record);
sealed blocks are rewritten as ``FRAME_TARGET`` chunks, each compressed on its own, so reading
one message decodes one chunk, not the block.

S2 is a superset of Snappy's block format: ``compression: s2`` frames hold Snappy blocks
(``cramjam.snappy.compress_raw``), which every S2 decoder reads; a chunk that does not shrink is
kept as it is (no S2 flag).

An erase rewrites the frame holding the record: the patched frame is appended with ``gen + 1``
and made durable, then the old frame is overwritten in place with a DEAD frame of the same size
(its bytes destroyed); a crash in between leaves both, the newer wins, and the next open destroys
the older (``Parsed.superseded``).
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Final

import cramjam

from .base import ErrCorrupt, ErrStoreIO
from .crypto import KEY_HEADER_SIZE, FileCipher, StoreKeys, decode_key_header, open_file_cipher
from .fileio import pwrite_all
from .record import BLOCK_HEADER_SIZE, MAX_RECORD_SIZE

__all__ = [
    "BLOCK_KEY_MAGIC",
    "DATA_START",
    "FLAG_DEAD",
    "FLAG_S2",
    "FLAG_SEALED",
    "FRAME_HEADER_SIZE",
    "FRAME_MAGIC",
    "FRAME_TARGET",
    "PACKED",
    "FrameTable",
    "Parsed",
    "chunk_bounds",
    "encode_frame",
    "framed_prefix",
    "is_framed",
    "parse_framed",
]

BLOCK_KEY_MAGIC: Final = b"JPBF"
FRAME_MAGIC: Final = b"JPFR"
FLAG_S2: Final = 0x01
FLAG_SEALED: Final = 0x02
FLAG_DEAD: Final = 0x04
PACKED: Final = 0x01
"""The key header's flag of a file rewritten whole in compressed chunks (sealing.py)."""
_KNOWN: Final = FLAG_S2 | FLAG_SEALED | FLAG_DEAD

_FRAME: Final = struct.Struct("<4sB3xIIII")
_CRC: Final = struct.Struct("<I")
FRAME_HEADER_SIZE: Final = _FRAME.size + _CRC.size
assert FRAME_HEADER_SIZE == 28

_SLOT: Final = 64  # a block header slot's logical size (record.py)
_SLOT_PHYS: Final = 128  # room a slot frame has in the file (28 + 12 + 64 + 16 = 120 sealed)
_SLOTS_AT: Final = 2 * KEY_HEADER_SIZE
DATA_START: Final = _SLOTS_AT + 2 * _SLOT_PHYS
"""Where a framed file's data frames begin."""

FRAME_TARGET: Final = 64 * 1024
"""Logical bytes per frame (a frame ends at the first record boundary past it): small enough
that reading one message decrypts or decompresses little, large enough that a frame's 56 bytes
of overhead and its one AEAD call vanish per message."""

_MAX_LLEN: Final = FRAME_TARGET + MAX_RECORD_SIZE
_crc32 = zlib.crc32


def is_framed(head: bytes) -> bool:
    """Whether a block file starting with ``head`` (at least 68 bytes, or all of a short file) is
    framed: its key header's magic, in either copy (a plain file starts with a header slot's
    magic b"JPBK" or with zeros)."""
    return head[:4] == BLOCK_KEY_MAGIC or head[KEY_HEADER_SIZE : KEY_HEADER_SIZE + 4] == BLOCK_KEY_MAGIC


def encode_frame(
    lpos: int, data: bytes | bytearray | memoryview, gen: int, fc: FileCipher | None, compress: bool
) -> bytes:
    """One frame of ``data`` (logical offset ``lpos``)."""
    llen = len(data)
    flags = 0
    body = bytes(data)
    if compress and llen:
        packed = bytes(cramjam.snappy.compress_raw(body))
        if len(packed) < llen:
            body, flags = packed, FLAG_S2
    if fc is not None:
        flags |= FLAG_SEALED
        head = _FRAME.pack(FRAME_MAGIC, flags, lpos, llen, len(body) + 28, gen)
        return head + _CRC.pack(_crc32(head)) + fc.seal(body, head)
    head = _FRAME.pack(FRAME_MAGIC, flags, lpos, llen, len(body), gen)
    return head + _CRC.pack(_crc32(body, _crc32(head))) + body


def _dead(size: int) -> bytes:
    """A DEAD frame exactly ``size`` bytes long (what an erased frame is overwritten with)."""
    head = _FRAME.pack(FRAME_MAGIC, FLAG_DEAD, 0, 0, size - FRAME_HEADER_SIZE, 0)
    return head + _CRC.pack(_crc32(head)) + bytes(size - FRAME_HEADER_SIZE)


FrameFields = tuple[int, int, int, int, int]
"""``(flags, lpos, llen, size, gen)`` of a well-formed frame (``size`` includes the header)."""


def check_frame(buf: bytes | bytearray | memoryview, pos: int, end: int) -> FrameFields | str:
    """The fields of the frame at ``buf[pos:end]`` if it is well formed (its body's authenticity
    aside), else why not."""
    if end - pos < FRAME_HEADER_SIZE:
        return f"truncated: {end - pos} bytes where a frame needs at least {FRAME_HEADER_SIZE}"
    magic, flags, lpos, llen, slen, gen = _FRAME.unpack_from(buf, pos)
    if magic != FRAME_MAGIC:
        return f"not a frame: magic {bytes(magic)!r}"
    if flags & ~_KNOWN or buf[pos + 5 : pos + 8] != b"\0\0\0":
        return f"bad frame header: flags {flags:#04x}"
    size = FRAME_HEADER_SIZE + slen
    if llen > _MAX_LLEN or slen > _MAX_LLEN + 64:
        return f"bad frame header: lengths {llen}/{slen}"
    if size > end - pos:
        return f"truncated: frame of {size} bytes, only {end - pos} left in the file"
    (crc,) = _CRC.unpack_from(buf, pos + _FRAME.size)
    view = memoryview(buf)
    c = _crc32(view[pos : pos + _FRAME.size])
    if not flags & (FLAG_SEALED | FLAG_DEAD):
        c = _crc32(view[pos + FRAME_HEADER_SIZE : pos + size], c)
    if c != crc:
        return "frame checksum mismatch"
    return flags, lpos, llen, size, gen


def _body(
    buf: bytes | bytearray | memoryview, pos: int, fields: FrameFields, fc: FileCipher | None
) -> bytes | str:
    """The logical data of a checked frame, or why it cannot be had."""
    flags, _lpos, llen, size, _gen = fields
    body = memoryview(buf)[pos + FRAME_HEADER_SIZE : pos + size]
    if flags & FLAG_SEALED:
        if fc is None:
            return "sealed frame in a file without a cipher"
        opened = fc.open(body, bytes(buf[pos : pos + _FRAME.size]))
        if opened is None:
            return "frame failed authentication"
        data = opened
    else:
        data = bytes(body)
    if flags & FLAG_S2:
        try:
            data = bytes(cramjam.snappy.decompress_raw(data))
        except cramjam.DecompressionError:
            return "frame does not decompress"
    if len(data) != llen:
        return f"frame holds {len(data)} bytes, its header says {llen}"
    return data


def chunk_bounds(start: int, end: int, record_offs: Sequence[int], target: int = FRAME_TARGET) -> list[int]:
    """Where frames of the logical range ``[start, end)`` end: at the first record start at or
    past every ``target`` bytes (``record_offs`` are record starts, ascending, found by bisection:
    no Python work per record). The last bound is ``end``."""
    bounds: list[int] = []
    at = start
    while end - at > target:
        k = bisect_left(record_offs, at + target)
        if k >= len(record_offs) or not at < record_offs[k] < end:
            break  # (a recovered block's columns hold 0 for lost records: never a bound)
        at = record_offs[k]
        bounds.append(at)
    bounds.append(end)
    return bounds


class FrameTable:
    """Where a framed file's frames are: the logical range and physical place of each valid
    frame, ordered by logical offset, and the file's cipher and end. Changed by the store's
    owning thread (appends, an erase's rewrite, a rollback); read by it and by an export on
    another thread, hence the lock around every look-up and change (never held across I/O)."""

    __slots__ = ("end", "fc", "gens", "lens", "lock", "packed", "pos", "sizes", "starts")

    def __init__(self, fc: FileCipher | None, end: int = DATA_START, packed: bool = False) -> None:
        self.fc = fc
        self.packed = packed  # rewritten whole in compressed chunks (sealing.py): nothing to do
        self.starts = array("Q")
        self.lens = array("Q")
        self.pos = array("Q")
        self.sizes = array("Q")
        self.gens = array("I")
        self.end = end  # where the next frame is written
        self.lock: Final = threading.Lock()

    @property
    def logical_end(self) -> int:
        return self.starts[-1] + self.lens[-1] if self.starts else BLOCK_HEADER_SIZE

    def _add(self, lpos: int, llen: int, pos: int, size: int, gen: int) -> None:
        self.starts.append(lpos)
        self.lens.append(llen)
        self.pos.append(pos)
        self.sizes.append(size)
        self.gens.append(gen)

    # ------------------------------------------------------------------ reading

    def read(self, fd: int, a: int, b: int, name: str) -> bytes:
        """Logical bytes ``[a, b)`` (``a >= 128``; cut short at the last frame's end; a region
        no frame covers reads as zeros: recovery found it damaged). Raises ErrCorrupt if a frame
        no longer decodes, ErrStoreIO on a read error."""
        for attempt in (0, 1):
            with self.lock:
                starts = self.starts
                k = max(bisect_right(starts, a) - 1, 0)
                picks = []
                n = len(starts)
                while k < n and starts[k] < b:
                    if starts[k] + self.lens[k] > a:
                        picks.append((starts[k], self.lens[k], self.pos[k], self.sizes[k]))
                    k += 1
            try:
                return self._read(fd, a, b, picks, name)
            except _Moved:
                if attempt:  # twice: not a frame rewritten under us, a damaged one
                    break
        raise ErrCorrupt(f"{name}: a frame holding logical bytes {a}-{b} does not decode")

    def _read(self, fd: int, a: int, b: int, picks: list[tuple[int, int, int, int]], name: str) -> bytes:
        out: list[bytes] = []
        at = a
        i = 0
        while i < len(picks):
            j = i + 1  # frames back to back in the file are read with one pread
            while j < len(picks) and picks[j][2] == picks[j - 1][2] + picks[j - 1][3]:
                j += 1
            p0 = picks[i][2]
            span = picks[j - 1][2] + picks[j - 1][3] - p0
            try:
                raw = os.pread(fd, span, p0)
            except OSError as exc:
                raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {name}: {exc}") from exc
            for lpos, llen, pos, size in picks[i:j]:
                rel = pos - p0
                fields = check_frame(raw, rel, len(raw))
                if isinstance(fields, str) or fields[1] != lpos or fields[2] != llen or fields[3] != size:
                    raise _Moved
                data = _body(raw, rel, fields, self.fc)
                if isinstance(data, str):
                    raise _Moved
                if lpos > at:
                    out.append(bytes(min(lpos, b) - at))
                    at = min(lpos, b)
                lo = at - lpos
                hi = min(b, lpos + llen) - lpos
                if hi > lo:
                    out.append(data[lo:hi])
                    at = lpos + hi
            i = j
        return b"".join(out)

    def read_header(self, fd: int) -> bytes:
        """The logical header region (both slots; zeros for a slot that does not decode)."""
        raw = os.pread(fd, DATA_START - _SLOTS_AT, _SLOTS_AT)
        return _slots(raw, 0, self.fc)

    # ------------------------------------------------------------------ writing (owning thread)

    def encode(self, pieces: Sequence[tuple[int, bytes | memoryview]], compress: bool = False) -> bytes:
        """The frames of ``pieces`` (``(lpos, data)``), to be written at ``self.end`` by
        ``appended``."""
        return b"".join(encode_frame(lpos, data, 0, self.fc, compress) for lpos, data in pieces)

    def appended(self, frames: bytes) -> None:
        """Frames ``encode`` made were written at ``self.end``: take them into the table."""
        at = 0
        with self.lock:
            while at < len(frames):
                _m, _f, lpos, llen, slen, gen = _FRAME.unpack_from(frames, at)
                size = FRAME_HEADER_SIZE + slen
                self._add(lpos, llen, self.end + at, size, gen)
                at += size
            self.end += len(frames)

    def slot(self, index: int, data: bytes) -> tuple[int, bytes]:
        """``(file offset, bytes)`` of block header slot ``index`` (0 or 1) holding ``data``."""
        frame = encode_frame(index * _SLOT, data, 0, self.fc, False)
        return _SLOTS_AT + index * _SLOT_PHYS, frame + bytes(_SLOT_PHYS - len(frame))

    def frame_of(self, lpos: int) -> int:
        """The index of the frame holding logical offset ``lpos`` (-1 if none does)."""
        with self.lock:
            k = bisect_right(self.starts, lpos) - 1
            if k < 0 or lpos >= self.starts[k] + self.lens[k]:
                return -1
            return k

    def frame_span(self, k: int) -> tuple[int, int]:
        """``(lpos, llen)`` of frame ``k``."""
        with self.lock:
            return self.starts[k], self.lens[k]

    def rewrite(self, fd: int, k: int, data: bytes, compress: bool) -> tuple[int, int, int, int]:
        """Append frame ``k``'s replacement holding ``data`` (same length, gen + 1) and point
        the table at it; returns ``(k, offset, size, gen)`` of the old frame: ``destroy`` it once
        the replacement is durable, or ``undo`` the rewrite if that fails. Raises OSError."""
        with self.lock:
            lpos, llen, gen = self.starts[k], self.lens[k], self.gens[k]
            old = (k, self.pos[k], self.sizes[k], gen)
        if len(data) != llen:
            raise ValueError("a rewritten frame must keep its length")
        frame = encode_frame(lpos, data, gen + 1, self.fc, compress)
        pwrite_all(fd, frame, self.end)
        with self.lock:
            self.pos[k] = self.end
            self.sizes[k] = len(frame)
            self.gens[k] = gen + 1
            self.end += len(frame)
        return old

    def undo(self, olds: list[tuple[int, int, int, int]], end: int) -> None:
        """Point the table back at the frames ``rewrite`` replaced (their replacements, from
        file offset ``end`` on, never became durable)."""
        with self.lock:
            for k, pos, size, gen in reversed(olds):
                self.pos[k] = pos
                self.sizes[k] = size
                self.gens[k] = gen
            self.end = end

    @staticmethod
    def destroy(fd: int, pos: int, size: int) -> None:
        """Overwrite the frame at ``pos`` with a DEAD frame of its size. Raises OSError."""
        pwrite_all(fd, _dead(size), pos)

    def cut(self, end: int) -> None:
        """Forget every frame at or past file offset ``end`` (a rollback truncated the file)."""
        with self.lock:
            while self.pos and self.pos[-1] >= end:
                for col in (self.starts, self.lens, self.pos, self.sizes, self.gens):
                    del col[-1]
            self.end = min(self.end, end)


class _Moved(Exception):
    """A frame was not where (or what) the table said: rewritten meanwhile, or damaged."""


def framed_prefix(fc: FileCipher | None, key_header: bytes, slot_b: bytes) -> tuple[bytes, FrameTable]:
    """The first ``DATA_START`` bytes of a new framed block file (both key headers, an empty slot
    A, slot B holding ``slot_b``) and its table."""
    table = FrameTable(fc)
    off, slot = table.slot(1, slot_b)
    buf = bytearray(DATA_START)
    buf[0:KEY_HEADER_SIZE] = key_header
    buf[KEY_HEADER_SIZE:_SLOTS_AT] = key_header
    buf[off : off + len(slot)] = slot
    return bytes(buf), table


# ----------------------------------------------------------------------------- parsing a file


class Parsed:
    """What ``parse_framed`` made of a framed file."""

    __slots__ = ("bad", "compressed", "cut", "data", "notes", "superseded", "table")

    def __init__(self, table: FrameTable) -> None:
        self.table = table
        self.data = bytearray()  # the logical bytes (zeros where no valid frame says otherwise)
        self.cut: int | None = None  # file offset of a torn tail: nothing valid from there on
        self.bad: list[tuple[int, int, str]] = []  # (file offset, length, reason) of damage
        self.superseded: list[tuple[int, int]] = []  # (offset, size) of frames a newer gen replaced
        self.notes: list[str] = []
        self.compressed = False  # some frame holds S2-compressed data


def parse_framed(raw: bytes, base: int, keys: StoreKeys | None, context: str, name: str) -> Parsed:
    """The logical bytes and frame table of a framed block file's bytes ``raw``. Raises
    ErrEncryptionKey (nothing read but its header) if it was written with another key, and
    ErrCorrupt if neither key header copy is readable or names another base."""
    why = []
    hdr = None
    for at in (0, KEY_HEADER_SIZE):
        got = decode_key_header(raw, at, BLOCK_KEY_MAGIC)
        if isinstance(got, str):
            why.append(f"offset {at}: {got}")
        elif got.value != base:
            why.append(f"offset {at}: names base {got.value}")
        elif hdr is None:
            hdr = got
    if hdr is None:
        raise ErrCorrupt(f"{name}: no valid key header ({'; '.join(why)})")
    fc = open_file_cipher(keys, hdr, context, name)
    table = FrameTable(fc, len(raw), bool(hdr.flags & PACKED))
    out = Parsed(table)
    if why:
        out.notes.append(f"{name}: one key header copy is damaged ({why[0]}); the other is used")
    logical = bytearray(_slots(raw, _SLOTS_AT, fc))
    best: dict[int, tuple[int, int, int, int, bytes]] = {}  # lpos -> (gen, pos, size, llen, data)
    pos = DATA_START
    size = len(raw)
    while pos < size:
        fields = check_frame(raw, pos, size)
        if isinstance(fields, str):
            nxt = _next_frame(raw, pos, size)
            if nxt is None:
                out.cut = pos
                out.bad.append((pos, size - pos, fields))
                table.end = pos
                break
            out.bad.append((pos, nxt - pos, fields))
            pos = nxt
            continue
        flags, lpos, llen, fsize, gen = fields
        if flags & FLAG_DEAD:
            pos += fsize
            continue
        data = _body(raw, pos, fields, fc)
        if isinstance(data, str) or lpos < BLOCK_HEADER_SIZE:
            out.bad.append((pos, fsize, data if isinstance(data, str) else f"data frame at logical {lpos}"))
            pos += fsize
            continue
        if flags & FLAG_S2:
            out.compressed = True
        prev = best.get(lpos)
        if prev is None or gen > prev[0]:
            if prev is not None:
                out.superseded.append((prev[1], prev[2]))
            best[lpos] = (gen, pos, fsize, llen, data)
        else:
            out.superseded.append((pos, fsize))
        pos += fsize
    end = BLOCK_HEADER_SIZE
    for lpos in sorted(best):
        gen, fpos, fsize, llen, data = best[lpos]
        if lpos < end:  # overlaps the frame before it: cannot have been written so
            out.bad.append((fpos, fsize, f"frame overlaps logical bytes before {end}"))
            continue
        if lpos > end:
            logical.extend(bytes(lpos - end))
        logical += data
        table._add(lpos, llen, fpos, fsize, gen)
        end = lpos + llen
    out.data = logical
    return out


def _slots(raw: bytes, at0: int, fc: FileCipher | None) -> bytes:
    """The block header's two slots from their frames at ``raw[at0:]``; a bad one reads as zeros
    (record.py then takes the other)."""
    logical = bytearray(BLOCK_HEADER_SIZE)
    for k in (0, 1):
        at = at0 + k * _SLOT_PHYS
        fields = check_frame(raw, at, min(len(raw), at + _SLOT_PHYS))
        if not isinstance(fields, str) and fields[1] == k * _SLOT and fields[2] == _SLOT:
            data = _body(raw, at, fields, fc)
            if not isinstance(data, str):
                logical[k * _SLOT : (k + 1) * _SLOT] = data
    return bytes(logical)


def _next_frame(raw: bytes, pos: int, end: int) -> int | None:
    """Offset of the next well-formed frame strictly after ``pos`` (re-synchronisation)."""
    p = pos + 1
    while True:
        p = raw.find(FRAME_MAGIC, p, end)
        if p < 0:
            return None
        if not isinstance(check_frame(raw, p, end), str):
            return p
        p += 1
