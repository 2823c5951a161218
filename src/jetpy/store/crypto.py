"""Encryption at rest: the server's keys, one key per file derived from them, and the key header.

Owns: ``StoreKeys`` (the server's ``key``, its ``prev_encryption_key`` and its ``cipher``), the
derivation of a file's own keys from them, ``FileCipher`` (an AEAD from ``cryptography``:
ChaCha20-Poly1305 or AES-256-GCM, with a random 96-bit nonce per sealed piece) and the 64-byte
key header every encrypted file starts with, which says which cipher and salt the file uses and
lets a reader tell "written with another key" from "damaged" before it reads anything else.
Must not know: what the files hold (frames.py seals block frames, tail.py the tail record,
consumer_state.py the metadata and consumer files), the server's configuration format.

Keys. A file's keys come from the server key by HKDF-SHA256: ``salt`` is 16 random bytes of the
file's own (written in its header), ``info`` names the cipher and the file's context (the stream's
name and which file it is: ``ORDERS/msgs``, ``ORDERS/tail``, ``ORDERS/meta``,
``ORDERS/obs/C1/state`` ...), and the 64 bytes out are the file's data key (32) and check key
(32). Every file so has keys of its own, and moving a file into another stream or role does not
decrypt. No key is ever stored; a random salt per file means a nonce can never be reused across
a stream deleted and created again under the same name.

Key header (little-endian), 64 bytes::

    0   4  magic     the file kind's (b"JPBF" block, b"JPTX" tail record, b"JPMX" metadata,
                     b"JPCX" consumer state)
    4   1  version   2
    5   1  cipher    0 none (a compressed block without encryption), 1 chachapoly, 2 aes
    6   1  flags     the kind's own (a block: 1 = rewritten whole in compressed chunks)
    7   1  reserved  zero
    8   8  value     u64 the kind's own: a block's base sequence, a framed file's payload length
    16  16 salt      random, per file (zero without a cipher)
    32  16 check     HMAC-SHA256(check key, bytes [0, 32))[:16] (zero without a cipher)
    48  4  crc32     zlib.crc32 over bytes [0, 48)
    52  12 padding   zero

The CRC tells a damaged header (the caller tries its copy, or reports damage); a header whose
CRC holds but whose check matches neither key was written with another key
(``ErrEncryptionKey``): the file is not touched. A file whose check matches the previous key is
read with it and rewritten with the current key by its owner (``FileCipher.stale``).

Why AEADs here and nothing home-made: ``cryptography``'s ChaCha20Poly1305 and AESGCM are the
vetted constructions (RFC 8439, NIST SP 800-38D); a flipped bit anywhere in a sealed piece makes
``open`` fail instead of returning garbage, and the random nonce's collision bound (2^-32 after
2^32 pieces under one key) is far beyond what one file ever seals.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import zlib
from typing import Final, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .base import ErrEncryptionKey

__all__ = [
    "CIPHERS",
    "CIPHER_NAMES",
    "KEY_HEADER_SIZE",
    "NONCE_SIZE",
    "SEAL_OVERHEAD",
    "Cipher",
    "FileCipher",
    "KeyHeader",
    "StoreKeys",
    "decode_key_header",
    "encode_key_header",
    "open_file_cipher",
]

Cipher = Literal["chachapoly", "aes"]

CIPHERS: Final[dict[str, int]] = {"chachapoly": 1, "aes": 2}
"""Cipher name -> its byte in the key header."""

CIPHER_NAMES: Final[dict[str, str]] = {"chachapoly": "ChaCha20-Poly1305", "aes": "AES-GCM"}
"""How nats-server names them in its log (``Encryption: ChaCha20-Poly1305``)."""

_BY_ID: Final[dict[int, Cipher]] = {1: "chachapoly", 2: "aes"}

NONCE_SIZE: Final = 12
_TAG_SIZE: Final = 16
SEAL_OVERHEAD: Final = NONCE_SIZE + _TAG_SIZE
"""Bytes a sealed piece is longer than what it seals: its nonce and its tag."""

KEY_HEADER_SIZE: Final = 64
_VERSION: Final = 2
_HDR: Final = struct.Struct("<4sBBBxQ16s16s")
_CRC: Final = struct.Struct("<I")
_SALT_SIZE: Final = 16
_CHECKED: Final = 32  # bytes of the header the check covers
assert _HDR.size == 48


class FileCipher:
    """One file's AEAD: ``seal`` and ``open`` pieces of it with ``aad`` bound to each."""

    __slots__ = ("_aead", "check", "cipher", "salt", "stale")

    def __init__(self, cipher: Cipher, salt: bytes, data_key: bytes, check: bytes, stale: bool) -> None:
        self.cipher: Final = cipher
        self.salt: Final = salt
        self.check: Final = check  # the header's check value for this file's header
        self.stale: Final = stale  # derived from the previous key: its file must be rewritten
        self._aead = ChaCha20Poly1305(data_key) if cipher == "chachapoly" else AESGCM(data_key)

    def seal(self, data: bytes | bytearray | memoryview, aad: bytes) -> bytes:
        """``nonce | ciphertext | tag`` of ``data``."""
        nonce = os.urandom(NONCE_SIZE)
        return nonce + self._aead.encrypt(nonce, bytes(data), aad)

    def open(self, body: bytes | memoryview, aad: bytes) -> bytes | None:
        """What ``seal`` sealed, or None if ``body`` or ``aad`` are not what was sealed."""
        if len(body) < SEAL_OVERHEAD:
            return None
        try:
            return self._aead.decrypt(bytes(body[:NONCE_SIZE]), bytes(body[NONCE_SIZE:]), aad)
        except InvalidTag:
            return None


class KeyHeader:
    """A decoded key header (its CRC held)."""

    __slots__ = ("check", "cipher", "flags", "magic", "raw", "salt", "value")

    def __init__(
        self, magic: bytes, cipher: int, flags: int, value: int, salt: bytes, check: bytes, raw: bytes
    ) -> None:
        self.magic = magic
        self.cipher = cipher
        self.flags = flags
        self.value = value
        self.salt = salt
        self.check = check
        self.raw = raw


def encode_key_header(magic: bytes, value: int, fc: FileCipher | None, flags: int = 0) -> bytes:
    """The 64 header bytes of a file of kind ``magic`` sealed by ``fc`` (None: no cipher); a
    cipher's header must carry the ``flags`` it was made with (``StoreKeys.new_file``)."""
    if fc is None:
        body = _HDR.pack(magic, _VERSION, 0, flags, value, bytes(_SALT_SIZE), bytes(16))
    else:
        body = _HDR.pack(magic, _VERSION, CIPHERS[fc.cipher], flags, value, fc.salt, bytes(16))
        body = body[:_CHECKED] + fc.check + body[_CHECKED + 16 :]
    return body + _CRC.pack(zlib.crc32(body)) + bytes(KEY_HEADER_SIZE - _HDR.size - _CRC.size)


def decode_key_header(buf: bytes | bytearray | memoryview, pos: int, magic: bytes) -> KeyHeader | str:
    """The key header at ``buf[pos:]``, or why it is not one (short, damaged, another kind)."""
    raw = bytes(buf[pos : pos + KEY_HEADER_SIZE])
    if len(raw) < KEY_HEADER_SIZE:
        return f"truncated key header ({len(raw)} of {KEY_HEADER_SIZE} bytes)"
    if zlib.crc32(raw[: _HDR.size]) != _CRC.unpack_from(raw, _HDR.size)[0]:
        return "key header checksum mismatch"
    got, version, cipher, flags, value, salt, check = _HDR.unpack_from(raw)
    if got != magic:
        return f"bad magic {got!r} (expected {magic!r})"
    if version != _VERSION:
        return f"unknown version {version}"
    if cipher and cipher not in _BY_ID:
        return f"unknown cipher {cipher}"
    return KeyHeader(got, cipher, flags, value, salt, check, raw)


def _check_value(check_key: bytes, header: bytes) -> bytes:
    return hmac.new(check_key, header[:_CHECKED], hashlib.sha256).digest()[:16]


class StoreKeys:
    """The server's encryption keys: ``key`` seals everything written, ``prev`` (the
    ``prev_encryption_key``) only opens what was written with it, for its rewrite."""

    __slots__ = ("_key", "_prev", "cipher")

    def __init__(
        self, key: str | bytes, cipher: Cipher = "chachapoly", prev: str | bytes | None = None
    ) -> None:
        if cipher not in CIPHERS:
            raise ValueError(f"unknown cipher {cipher!r}")
        self._key = key.encode() if isinstance(key, str) else bytes(key)
        self._prev = prev.encode() if isinstance(prev, str) else prev
        if not self._key:
            raise ValueError("an encryption key must not be empty")
        self.cipher: Final[Cipher] = cipher

    def __repr__(self) -> str:  # never the keys themselves
        return f"StoreKeys(cipher={self.cipher!r}, prev={'yes' if self._prev else 'no'})"

    @staticmethod
    def _derive(ikm: bytes, cipher: Cipher, salt: bytes, context: str) -> tuple[bytes, bytes]:
        info = b"jetpy store v1\x00" + cipher.encode() + b"\x00" + context.encode("utf-8", "surrogateescape")
        out = HKDF(algorithm=hashes.SHA256(), length=64, salt=salt, info=info).derive(ikm)
        return out[:32], out[32:]

    def new_file(self, magic: bytes, value: int, context: str, flags: int = 0) -> tuple[FileCipher, bytes]:
        """A fresh cipher for a new file of kind ``magic`` (a new random salt) and its header."""
        salt = os.urandom(_SALT_SIZE)
        data_key, check_key = self._derive(self._key, self.cipher, salt, context)
        draft = _HDR.pack(magic, _VERSION, CIPHERS[self.cipher], flags, value, salt, bytes(16))
        fc = FileCipher(self.cipher, salt, data_key, _check_value(check_key, draft), False)
        return fc, encode_key_header(magic, value, fc, flags)

    def open_file(self, hdr: KeyHeader, context: str, name: str) -> FileCipher:
        """The cipher of an existing file with key header ``hdr`` (``name`` for the error).
        Raises ErrEncryptionKey if neither key wrote it."""
        cipher = _BY_ID[hdr.cipher]
        for ikm, stale in ((self._key, False), (self._prev, True)):
            if ikm is None:
                continue
            data_key, check_key = self._derive(ikm, cipher, hdr.salt, context)
            if hmac.compare_digest(_check_value(check_key, hdr.raw), hdr.check):
                return FileCipher(cipher, hdr.salt, data_key, hdr.check, stale or cipher != self.cipher)
        which = "key" if self._prev is None else "key nor prev_encryption_key"
        raise ErrEncryptionKey(
            f"{name} was written with another encryption key (the configured {which} does not open it)"
        )


def open_file_cipher(keys: StoreKeys | None, hdr: KeyHeader, context: str, name: str) -> FileCipher | None:
    """The cipher of a file whose key header is ``hdr``: None for an unencrypted one; raises
    ErrEncryptionKey for an encrypted file when there are no keys or the wrong ones."""
    if not hdr.cipher:
        return None
    if keys is None:
        raise ErrEncryptionKey(
            f"{name} is encrypted and this server has no encryption key (jetstream {{ key }})"
        )
    return keys.open_file(hdr, context, name)
