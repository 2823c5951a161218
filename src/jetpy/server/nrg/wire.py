"""The Raft host's own bytes: a batch of proposals in one log entry, the requests a member
forwards to the leader and their answers, join requests, and fragments of large frames.

Owns the layouts below (all integers little-endian, ``str8``: a u8 length then UTF-8) and their
decoders, which refuse anything malformed with :class:`WireError` and nothing else. Must not
know: Raft messages' own layout (``jetpy.raft.codec``) or subjects.

Batch (a NORMAL entry's data: many proposals in one entry, and a forwarded proposal's body)::

    0  1  version   1
    1  4  count     u32
    then count times: u32 length, that many bytes

Answer to a forwarded request (published to its reply subject)::

    0  1  status    0 ok, 1 not the leader, 2 dropped, 3 lost, 4 refused
    1  .. detail    str8 (the leader's id for status 1, else the reason)
    then, for an answered proposal, the results as a batch

Change (the body of a ``$NRG.RP`` request)::

    0  1  version   1
    1  1  op        0 add voter, 1 add learner, 2 remove, 3 transfer leadership
    2  .. peer      str8 ("" for a transfer to whoever is most caught up)

Join (the body of a ``$NRG.J`` request)::

    0  1  version   1
    1  .. member    str8, then server name str8

Fragment (a Raft frame larger than ``FRAGMENT_BYTES``, sent in parts; a Raft frame's first
byte is its codec version, 1, so the first byte tells the two apart)::

    0  1  marker    0xF7
    1  8  id        u64, the sender's counter
    9  4  part      u32, from 0
    13 4  parts     u32
    17 .. bytes
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Final

__all__ = [
    "FRAGMENT",
    "FRAGMENT_BYTES",
    "ChangeOp",
    "Status",
    "WireError",
    "decode_answer",
    "decode_batch",
    "decode_change",
    "decode_fragment",
    "decode_join",
    "encode_answer",
    "encode_batch",
    "encode_change",
    "encode_fragments",
    "encode_join",
]

VERSION: Final = 1
FRAGMENT: Final = 0xF7
FRAGMENT_BYTES: Final = 1 << 20
"""Frames larger than this travel in parts of this size (a snapshot, an oversized append): one
route message stays far below a route's limits, and parts interleave with other traffic."""

_U32: Final = struct.Struct("<I")
_HEAD: Final = struct.Struct("<BI")
_FRAG: Final = struct.Struct("<BQII")


class WireError(ValueError):
    """Bytes that are not one of this module's layouts."""


class Status(IntEnum):
    OK = 0
    NOT_LEADER = 1
    DROPPED = 2
    LOST = 3
    REFUSED = 4


class ChangeOp(IntEnum):
    ADD_VOTER = 0
    ADD_LEARNER = 1
    REMOVE = 2
    TRANSFER = 3


def encode_batch(items: Sequence[bytes]) -> bytes:
    parts = [_HEAD.pack(VERSION, len(items))]
    pack = _U32.pack
    for it in items:
        parts.append(pack(len(it)))
        parts.append(it)
    return b"".join(parts)


def _read_batch(buf: bytes, pos: int) -> list[bytes]:
    end = len(buf)
    if pos + _U32.size > end:
        raise WireError("batch too short")
    (count,) = _U32.unpack_from(buf, pos)
    pos += _U32.size
    if count > (end - pos) // _U32.size:
        raise WireError("batch count larger than the batch")
    out: list[bytes] = []
    unpack = _U32.unpack_from
    for _ in range(count):
        if pos + 4 > end:
            raise WireError("batch too short")
        (n,) = unpack(buf, pos)
        pos += 4
        if pos + n > end:
            raise WireError("batch item longer than the batch")
        out.append(buf[pos : pos + n])
        pos += n
    if pos != end:
        raise WireError(f"{end - pos} unexpected bytes after the batch")
    return out


def decode_batch(data: bytes) -> list[bytes]:
    if not data or data[0] != VERSION:
        raise WireError("batch of an unknown version")
    return _read_batch(data, 1)


def _str8(s: str) -> bytes:
    raw = s.encode()[:255]
    return bytes((len(raw),)) + raw


def _read_str8(buf: bytes, pos: int) -> tuple[str, int]:
    if pos >= len(buf) or pos + 1 + buf[pos] > len(buf):
        raise WireError("string too short")
    n = buf[pos]
    try:
        return buf[pos + 1 : pos + 1 + n].decode(), pos + 1 + n
    except UnicodeDecodeError as exc:
        raise WireError("string is not UTF-8") from exc


def encode_answer(status: Status, detail: str = "", results: Sequence[bytes] | None = None) -> bytes:
    head = bytes((status,)) + _str8(detail)
    if results is None:
        return head
    return head + encode_batch(results)[1:]


def decode_answer(data: bytes) -> tuple[Status, str, list[bytes] | None]:
    if not data:
        raise WireError("empty answer")
    try:
        status = Status(data[0])
    except ValueError as exc:
        raise WireError(f"unknown answer status {data[0]}") from exc
    detail, pos = _read_str8(data, 1)
    results = _read_batch(data, pos) if pos < len(data) else None
    return status, detail, results


def encode_change(op: ChangeOp, peer: str) -> bytes:
    return bytes((VERSION, op)) + _str8(peer)


def decode_change(data: bytes) -> tuple[ChangeOp, str]:
    if len(data) < 3 or data[0] != VERSION:
        raise WireError("change of an unknown version")
    try:
        op = ChangeOp(data[1])
    except ValueError as exc:
        raise WireError(f"unknown change {data[1]}") from exc
    peer, pos = _read_str8(data, 2)
    if pos != len(data):
        raise WireError("unexpected bytes after the change")
    return op, peer


def encode_join(member: str, server_name: str) -> bytes:
    return bytes((VERSION,)) + _str8(member) + _str8(server_name)


def decode_join(data: bytes) -> tuple[str, str]:
    if not data or data[0] != VERSION:
        raise WireError("join of an unknown version")
    member, pos = _read_str8(data, 1)
    name, pos = _read_str8(data, pos)
    if pos != len(data) or not member:
        raise WireError("malformed join")
    return member, name


def encode_fragments(frame: bytes, frag_id: int) -> list[bytes]:
    """``frame`` in parts of ``FRAGMENT_BYTES``."""
    parts = (len(frame) + FRAGMENT_BYTES - 1) // FRAGMENT_BYTES
    view = memoryview(frame)
    return [
        _FRAG.pack(FRAGMENT, frag_id, i, parts) + view[i * FRAGMENT_BYTES : (i + 1) * FRAGMENT_BYTES]
        for i in range(parts)
    ]


def decode_fragment(data: bytes) -> tuple[int, int, int, bytes]:
    """(id, part, parts, bytes) of one fragment."""
    if len(data) < _FRAG.size:
        raise WireError("fragment too short")
    marker, frag_id, part, parts = _FRAG.unpack_from(data)
    if marker != FRAGMENT or parts == 0 or part >= parts:
        raise WireError("malformed fragment header")
    return frag_id, part, parts, data[_FRAG.size :]
