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

Encrypted (the store has keys, crypto.py): a key header (magic b"JPMX" for meta, b"JPCX" for
consumer state; its value the payload's length), then ``nonce | AEAD(payload) | tag`` with the key
header as associated data. A file written with another key raises ``ErrEncryptionKey`` (a wrong
key is not damage: nothing is set aside); one that fails authentication is damaged, as a CRC
mismatch is.

A file that is short, has the wrong magic/version or fails its CRC raises ``ErrCorrupt``; the
caller quarantines it. Nothing here ever deletes a file because it looks bad: a damaged state
file the caller gives up on is renamed aside (``o.dat.damaged``), never removed.

Also owns the consistency rules of a decoded ``ConsumerState`` (:func:`state_problems`): the
recovering server and the offline checker apply the same ones.
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
from .crypto import KEY_HEADER_SIZE, SEAL_OVERHEAD, StoreKeys, decode_key_header, open_file_cipher
from .fileio import fsync_dir, write_synced
from .layout import CONSUMER_META_FILE, CONSUMER_STATE_FILE

__all__ = [
    "CONSUMER_MAGIC",
    "DAMAGED_SUFFIX",
    "FRAME_HEADER_SIZE",
    "META_MAGIC",
    "FileConsumerStore",
    "FrameFault",
    "MemoryConsumerStore",
    "check_framed",
    "consumer_context",
    "decode_state",
    "needs_rekey",
    "past_last_seq",
    "read_consumer_state",
    "read_framed",
    "state_problems",
    "validate_name",
    "write_framed_atomic",
]

META_MAGIC = b"JPMT"
CONSUMER_MAGIC = b"JPCS"
_SEALED_MAGIC = {META_MAGIC: b"JPMX", CONSUMER_MAGIC: b"JPCX"}  # their encrypted forms
_VERSION = 1
_HDR = struct.Struct("<4sB3xI")
_CRC = struct.Struct("<I")
FRAME_HEADER_SIZE = _HDR.size + _CRC.size  # 16

# A metadata or consumer-state file larger than this is refused rather than read into memory:
# configs are kilobytes and even 1M pending acks encode to ~20 MB of msgpack.
MAX_FRAMED_PAYLOAD = 256 * 1024 * 1024

# Longest name usable as one directory entry on common Linux file systems (NAME_MAX).
MAX_NAME_BYTES = 255

# What a damaged consumer state file is renamed to when its consumer restarts without it.
DAMAGED_SUFFIX = ".damaged"

_STATE_ENCODER = msgspec.msgpack.Encoder()
_STATE_DECODER = msgspec.msgpack.Decoder(ConsumerState)


def consumer_context(stream: str, consumer: str, file: str) -> str:
    """The key context (crypto.py) of one of a consumer's files."""
    return f"{stream}/obs/{consumer}/{file}"


def validate_name(name: str) -> None:
    """Refuse names that are not one safe path component (no traversal, no separators)."""
    if not name or name in (".", "..") or len(name.encode()) > MAX_NAME_BYTES:
        raise ErrInvalidName(f"invalid name {name!r}")
    if any(c in name for c in "/\\\0") or not name.isprintable():
        raise ErrInvalidName(f"invalid name {name!r}")


def _frame(magic: bytes, payload: bytes) -> bytes:
    head = _HDR.pack(magic, _VERSION, len(payload))
    return head + _CRC.pack(zlib.crc32(payload, zlib.crc32(head))) + payload


def _sealed_frame(magic: bytes, payload: bytes, keys: StoreKeys, context: str) -> bytes:
    fc, head = keys.new_file(_SEALED_MAGIC[magic], len(payload), context)
    return head + fc.seal(payload, head)


def write_framed_atomic(
    path: Path, magic: bytes, payload: bytes, keys: StoreKeys | None = None, context: str = ""
) -> None:
    """Replace ``path`` so that after a crash it holds either the old or the new content
    (encrypted with ``keys``' current key under ``context``, if given)."""
    tmp = path.with_name(path.name + ".tmp")
    data = _frame(magic, payload) if keys is None else _sealed_frame(magic, payload, keys, context)
    write_synced(tmp, data)
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextmanager
def _io_errors(what: str) -> Iterator[None]:
    """Translate OSError into the store's ``ErrStoreIO`` at this layer's boundary."""
    try:
        yield
    except OSError as exc:
        raise ErrStoreIO(exc.errno or errno.EIO, None, f"{what}: {exc}") from exc


class FrameFault(msgspec.Struct, frozen=True):
    """Why a framed file's bytes were refused: the byte ``offset`` where the check fails (the
    field that is wrong, or where the file ends too early) and the ``reason``."""

    offset: int
    reason: str


def check_framed(
    raw: bytes, magic: bytes, keys: StoreKeys | None = None, context: str = "", name: str = ""
) -> bytes | FrameFault:
    """The payload of a framed file's bytes (plain, or encrypted under ``context``), or why they
    are refused. Raises ErrEncryptionKey for an encrypted file ``keys`` do not open."""
    sealed = _SEALED_MAGIC.get(magic)
    if sealed is not None and raw[:4] == sealed:
        return _check_sealed(raw, sealed, keys, context, name)
    if len(raw) < FRAME_HEADER_SIZE:
        return FrameFault(len(raw), f"truncated header ({len(raw)} of {FRAME_HEADER_SIZE} bytes)")
    got_magic, version, length = _HDR.unpack_from(raw)
    if got_magic != magic:
        return FrameFault(0, f"bad magic {got_magic!r} (expected {magic!r})")
    if version != _VERSION:
        return FrameFault(4, f"unknown version {version}")
    if length != len(raw) - FRAME_HEADER_SIZE:
        return FrameFault(8, f"length {length} does not match file size {len(raw)}")
    (crc,) = _CRC.unpack_from(raw, _HDR.size)
    payload = raw[FRAME_HEADER_SIZE:]
    if zlib.crc32(payload, zlib.crc32(raw[: _HDR.size])) != crc:
        return FrameFault(12, "checksum mismatch")
    return payload


def _check_sealed(
    raw: bytes, sealed: bytes, keys: StoreKeys | None, context: str, name: str
) -> bytes | FrameFault:
    hdr = decode_key_header(raw, 0, sealed)
    if isinstance(hdr, str):
        return FrameFault(0, hdr)
    fc = open_file_cipher(keys, hdr, context, name)
    if fc is None:
        return FrameFault(5, "an encrypted file's header without a cipher")
    if len(raw) != KEY_HEADER_SIZE + SEAL_OVERHEAD + hdr.value:
        return FrameFault(8, f"length {hdr.value} does not match file size {len(raw)}")
    payload = fc.open(raw[KEY_HEADER_SIZE:], hdr.raw)
    if payload is None:
        return FrameFault(KEY_HEADER_SIZE, "failed authentication (the bytes were changed)")
    return payload


def needs_rekey(path: Path, magic: bytes, keys: StoreKeys | None, context: str) -> bool:
    """Whether the framed file at ``path`` must be rewritten to be sealed with ``keys``' current
    key (it is plaintext, or was written with the previous key); False if it does not exist or
    there are no keys. Raises ErrEncryptionKey if it was written with another key, OSError."""
    if keys is None:
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(KEY_HEADER_SIZE)
    except FileNotFoundError:
        return False
    sealed = _SEALED_MAGIC[magic]
    if head[:4] != sealed:
        return True
    hdr = decode_key_header(head, 0, sealed)
    if isinstance(hdr, str):
        return False  # damaged: its reader reports it, a rewrite would only hide it
    fc = open_file_cipher(keys, hdr, context, path.name)
    return fc is None or fc.stale


def read_framed(path: Path, magic: bytes, keys: StoreKeys | None = None, context: str = "") -> bytes | None:
    """The payload of a framed file, None if it does not exist; ErrCorrupt if it fails checks,
    ErrEncryptionKey if it was written with another key."""
    try:
        with open(path, "rb") as f:
            raw = f.read(KEY_HEADER_SIZE + SEAL_OVERHEAD + MAX_FRAMED_PAYLOAD + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ErrStoreIO(exc.errno or errno.EIO, None, f"reading {path.name}: {exc}") from exc
    got = check_framed(raw, magic, keys, context, path.name)
    if isinstance(got, FrameFault):
        raise ErrCorrupt(f"{path.name}: {got.reason} (offset {got.offset})")
    return got


def decode_state(payload: bytes, name: str = CONSUMER_STATE_FILE) -> ConsumerState:
    """A state file's payload decoded; ErrCorrupt if it is not our encoding."""
    try:
        return _STATE_DECODER.decode(payload)
    except msgspec.DecodeError as exc:  # valid CRC but not our encoding: a format bug
        raise ErrCorrupt(f"{name}: undecodable state: {exc} (offset {FRAME_HEADER_SIZE})") from exc


def state_problems(st: ConsumerState) -> list[str]:
    """What makes a decoded state impossible (a consumer restarted from it could skip messages or
    misnumber them): floors above what was delivered, pending acks outside (floor, delivered],
    redelivery counts of messages not pending. Empty if consistent."""
    out: list[str] = []
    if st.ack_floor_stream_seq > st.delivered_stream_seq:
        out.append(
            f"ack floor stream sequence {st.ack_floor_stream_seq} is above the delivered "
            f"stream sequence {st.delivered_stream_seq}"
        )
    if st.ack_floor_consumer_seq > st.delivered_consumer_seq:
        out.append(
            f"ack floor consumer sequence {st.ack_floor_consumer_seq} is above the delivered "
            f"consumer sequence {st.delivered_consumer_seq}"
        )
    outside = [s for s in st.pending if not st.ack_floor_stream_seq < s <= st.delivered_stream_seq]
    if outside:
        out.append(
            f"{len(outside)} pending acks outside ({st.ack_floor_stream_seq}, {st.delivered_stream_seq}], "
            f"first {min(outside)}"
        )
    if any(c > st.delivered_consumer_seq or c <= 0 for c, _ in st.pending.values()):
        out.append("pending acks with consumer sequences past the delivered consumer sequence")
    if any(s not in st.pending for s in st.redelivered):
        out.append("redelivery counts for messages that are not pending")
    return out


def past_last_seq(st: ConsumerState, last_seq: int) -> str | None:
    """Why ``st`` points past a stream whose last sequence is ``last_seq`` (None if it does not):
    the stream lost its tail, and a consumer restarted from ``st`` would skip the messages that
    are stored under those sequences next."""
    if st.delivered_stream_seq <= last_seq:
        return None
    return (
        f"delivered stream sequence {st.delivered_stream_seq} is past the stream's last sequence {last_seq}"
    )


def read_consumer_state(path: Path, keys: StoreKeys | None = None, context: str = "") -> ConsumerState | None:
    """The consumer state in a framed ``o.dat``, None if there is none; ErrCorrupt if it fails
    its checks or does not decode."""
    payload = read_framed(path, CONSUMER_MAGIC, keys, context)
    if payload is None:
        return None
    return decode_state(payload, path.name)


class MemoryConsumerStore:
    """Consumer state kept in memory (memory-storage streams, tests)."""

    def __init__(self, name: str, on_delete: Callable[[str], object] | None = None) -> None:
        validate_name(name)
        self.name = name
        self.where = ""
        self._on_delete = on_delete
        self._state: ConsumerState | None = None
        self._meta: bytes | None = None

    def update(self, state: ConsumerState) -> None:
        self._state = state

    def load(self) -> ConsumerState | None:
        return self._state

    def set_aside_state(self) -> str | None:
        self._state = None
        return None

    def write_meta(self, meta: bytes) -> None:
        self._meta = bytes(meta)

    def read_meta(self) -> bytes | None:
        return self._meta

    def delete(self) -> None:
        self._state = None
        self._meta = None
        if self._on_delete is not None:
            self._on_delete(self.name)


class FileConsumerStore:
    """Consumer state in ``<stream dir>/obs/<name>/{o.dat,meta.dat}``, each replaced atomically."""

    STATE_FILE = CONSUMER_STATE_FILE
    META_FILE = CONSUMER_META_FILE

    def __init__(self, obs_dir: Path, name: str, keys: StoreKeys | None = None, stream: str = "") -> None:
        """``keys``: the store's (its files are encrypted under contexts naming ``stream``,
        this consumer and the file)."""
        validate_name(name)
        self.name = name
        self._dir = obs_dir / name
        self.where = str(self._dir)
        self._keys = keys
        self._ctx_state = consumer_context(stream, name, CONSUMER_STATE_FILE)
        self._ctx_meta = consumer_context(stream, name, CONSUMER_META_FILE)
        # update() may run on a worker thread; two concurrent updates must not share a tmp file.
        self._lock = threading.Lock()
        if not self._dir.is_dir():
            self._dir.mkdir(parents=True, exist_ok=True)
            fsync_dir(obs_dir)

    def update(self, state: ConsumerState) -> None:
        payload = _STATE_ENCODER.encode(state)
        with self._lock, _io_errors(self.STATE_FILE):
            write_framed_atomic(
                self._dir / self.STATE_FILE, CONSUMER_MAGIC, payload, self._keys, self._ctx_state
            )

    def load(self) -> ConsumerState | None:
        return read_consumer_state(self._dir / self.STATE_FILE, self._keys, self._ctx_state)

    def set_aside_state(self) -> str | None:
        """Rename a damaged ``o.dat`` to ``o.dat.damaged`` (numbered if that exists), kept for
        inspection; returns the new name (None if there was no file)."""
        src = self._dir / self.STATE_FILE
        with self._lock, _io_errors(self.STATE_FILE):
            if not src.exists():
                return None
            dst = src.with_name(src.name + DAMAGED_SUFFIX)
            n = 1
            while dst.exists():
                n += 1
                dst = src.with_name(f"{src.name}{DAMAGED_SUFFIX}.{n}")
            os.rename(src, dst)
            fsync_dir(self._dir)
            return dst.name

    def write_meta(self, meta: bytes) -> None:
        with self._lock, _io_errors(self.META_FILE):
            write_framed_atomic(
                self._dir / self.META_FILE, META_MAGIC, bytes(meta), self._keys, self._ctx_meta
            )

    def read_meta(self) -> bytes | None:
        return read_framed(self._dir / self.META_FILE, META_MAGIC, self._keys, self._ctx_meta)

    def delete(self) -> None:
        with self._lock, _io_errors(self.name):
            shutil.rmtree(self._dir, ignore_errors=True)
            if self._dir.parent.is_dir():
                fsync_dir(self._dir.parent)
