"""Raft's bytes on the wire: every message, and the membership a CONF entry carries.

Owns: the binary layout of each ``Message`` and of ``Membership``, version 1, documented here
byte by byte, with a CRC over each frame; decoding that refuses anything malformed with
``CodecError`` (and nothing else). Must not know: how frames travel (the host's transport
delimits them) or what an entry's data means.

All integers little-endian. ``str8`` is a u8 length then that many UTF-8 bytes (node ids are at
most 255 bytes).

Frame::

    0   1  version     1
    1   1  type        1 VoteRequest, 2 VoteResponse, 3 AppendRequest, 4 AppendResponse,
                       5 Heartbeat, 6 HeartbeatResponse, 7 InstallSnapshot, 8 TimeoutNow
    2   2  reserved    zero
    4   4  body_len    u32, the bytes from offset 8 (the term) up to the CRC
    8   8  term        u64
    16  ..  src str8, dst str8, then the type's fields below
    8+body_len  4  crc32  zlib.crc32 over everything before it

Type fields (after src/dst)::

    VoteRequest        last_index u64, last_term u64, flags u8 (bit0 pre-vote, bit1 transfer)
    VoteResponse       flags u8 (bit0 pre-vote, bit1 granted)
    AppendRequest      prev_index u64, prev_term u64, commit u64, count u32, then count entries:
                       term u64, kind u8, data_len u32, data (indexes follow prev_index + 1)
    AppendResponse     index u64, hint_index u64, hint_term u64, flags u8 (bit0 reject)
    Heartbeat          commit u64
    HeartbeatResponse  flags u8 (bit0 lost)
    InstallSnapshot    index u64, term u64, membership (below), data_len u32, data
    TimeoutNow         (nothing)

Membership (in InstallSnapshot)::

    u16 voter count, that many str8 (sorted), u16 learner count, that many str8 (sorted)

A CONF entry's ``data`` (stored in logs, so versioned on its own)::

    0   1  version     1
    1   ..  membership, as above: the whole membership after the change

The term sits at a fixed offset so a transport can read it without decoding the rest.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Final

from .messages import (
    AppendRequest,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from .types import Entry, EntryKind, Membership, RaftError, Snapshot, SnapshotMeta

__all__ = [
    "MAX_FRAME",
    "VERSION",
    "CodecError",
    "decode",
    "decode_conf",
    "decode_membership",
    "encode",
    "encode_conf",
    "encode_membership",
]

VERSION: Final = 1
# A frame larger than this is refused before it is read: a host sizes its appends and snapshots
# well below it (Config.max_append_bytes defaults to 1 MiB).
MAX_FRAME: Final = 1 << 30

_HEAD: Final = struct.Struct("<BBHIQ")  # version, type, reserved, body_len, term
_CRC: Final = struct.Struct("<I")
_U8: Final = struct.Struct("<B")
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_VOTE_REQ: Final = struct.Struct("<QQB")
_APP_REQ: Final = struct.Struct("<QQQI")
_ENTRY: Final = struct.Struct("<QBI")
_APP_RESP: Final = struct.Struct("<QQQB")
_U64: Final = struct.Struct("<Q")
_SNAP: Final = struct.Struct("<QQ")
_BODY_START: Final = 8  # body_len counts from the term on

_T_VOTE_REQ, _T_VOTE_RESP, _T_APP_REQ, _T_APP_RESP = 1, 2, 3, 4
_T_HB, _T_HB_RESP, _T_SNAP, _T_TIMEOUT = 5, 6, 7, 8
_KINDS: Final = tuple(EntryKind)


class CodecError(RaftError):
    """Bytes that are not a well-formed version-1 frame (or membership)."""


def _str8(s: str) -> bytes:
    raw = s.encode()
    if len(raw) > 255:
        raise ValueError(f"node id longer than 255 bytes: {s[:40]!r}...")
    return _U8.pack(len(raw)) + raw


def encode_membership(m: Membership) -> bytes:
    parts = [_U16.pack(len(m.voters))]
    parts += [_str8(v) for v in sorted(m.voters)]
    parts.append(_U16.pack(len(m.learners)))
    parts += [_str8(v) for v in sorted(m.learners)]
    return b"".join(parts)


def _frame(kind: int, term: int, src: str, dst: str, fields: Sequence[bytes]) -> bytes:
    body = b"".join((_str8(src), _str8(dst), *fields))
    head = _HEAD.pack(VERSION, kind, 0, len(body) + 8, term)
    crc = zlib.crc32(body, zlib.crc32(head))
    return b"".join((head, body, _CRC.pack(crc)))


def encode(m: Message) -> bytes:
    """One message as a version-1 frame."""
    if isinstance(m, AppendRequest):
        parts = [_APP_REQ.pack(m.prev_index, m.prev_term, m.commit, len(m.entries))]
        pack = _ENTRY.pack
        for e in m.entries:
            parts.append(pack(e.term, e.kind, len(e.data)))
            parts.append(e.data)
        return _frame(_T_APP_REQ, m.term, m.src, m.dst, parts)
    if isinstance(m, AppendResponse):
        fields = [_APP_RESP.pack(m.index, m.hint_index, m.hint_term, int(m.reject))]
        return _frame(_T_APP_RESP, m.term, m.src, m.dst, fields)
    if isinstance(m, Heartbeat):
        return _frame(_T_HB, m.term, m.src, m.dst, [_U64.pack(m.commit)])
    if isinstance(m, HeartbeatResponse):
        return _frame(_T_HB_RESP, m.term, m.src, m.dst, [_U8.pack(int(m.lost))])
    if isinstance(m, VoteRequest):
        flags = int(m.pre) | int(m.transfer) << 1
        return _frame(_T_VOTE_REQ, m.term, m.src, m.dst, [_VOTE_REQ.pack(m.last_index, m.last_term, flags)])
    if isinstance(m, VoteResponse):
        return _frame(_T_VOTE_RESP, m.term, m.src, m.dst, [_U8.pack(int(m.pre) | int(m.granted) << 1)])
    if isinstance(m, InstallSnapshot):
        meta = m.snapshot.meta
        fields = [
            _SNAP.pack(meta.index, meta.term),
            encode_membership(meta.membership),
            _U32.pack(len(m.snapshot.data)),
            m.snapshot.data,
        ]
        return _frame(_T_SNAP, m.term, m.src, m.dst, fields)
    return _frame(_T_TIMEOUT, m.term, m.src, m.dst, [])


class _Reader:
    """Bounds-checked reads from one frame's body (``raw``: the frame as bytes, sliced once per
    field without an intermediate view)."""

    __slots__ = ("end", "pos", "raw")

    def __init__(self, raw: bytes, pos: int, end: int) -> None:
        self.raw, self.pos, self.end = raw, pos, end

    def take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise CodecError("frame too short")
        self.pos = start + n
        return start

    def unpack(self, s: struct.Struct) -> tuple[int, ...]:
        return s.unpack_from(self.raw, self.take(s.size))

    def bytes(self, n: int) -> bytes:
        start = self.take(n)
        return self.raw[start : start + n]

    def str8(self) -> str:
        (n,) = self.unpack(_U8)
        try:
            return self.bytes(n).decode()
        except UnicodeDecodeError as exc:
            raise CodecError("node id is not UTF-8") from exc

    def done(self) -> None:
        if self.pos != self.end:
            raise CodecError(f"{self.end - self.pos} unexpected bytes at the end of the frame")


def _read_membership(r: _Reader) -> Membership:
    (nv,) = r.unpack(_U16)
    voters = frozenset(r.str8() for _ in range(nv))
    (nl,) = r.unpack(_U16)
    learners = frozenset(r.str8() for _ in range(nl))
    if len(voters) != nv or len(learners) != nl or voters & learners or "" in voters | learners:
        raise CodecError("membership lists repeat, overlap or hold an empty id")
    return Membership(voters, learners)


def decode_membership(data: bytes) -> Membership:
    r = _Reader(bytes(data), 0, len(data))
    m = _read_membership(r)
    r.done()
    return m


def encode_conf(m: Membership) -> bytes:
    """The ``data`` of a CONF entry that makes ``m`` the membership."""
    return bytes((VERSION,)) + encode_membership(m)


def decode_conf(data: bytes) -> Membership:
    if not data or data[0] != VERSION:
        raise CodecError("membership entry of an unknown version")
    r = _Reader(bytes(data), 1, len(data))
    m = _read_membership(r)
    r.done()
    return m


def decode(frame: bytes | bytearray | memoryview) -> Message:
    """The message in one frame; ``CodecError`` for anything malformed."""
    buf = frame if isinstance(frame, bytes) else bytes(frame)
    if len(buf) < _HEAD.size + _CRC.size:
        raise CodecError("frame too short")
    version, kind, _, body_len, term = _HEAD.unpack_from(buf)
    if version != VERSION:
        raise CodecError(f"unknown frame version {version}")
    if body_len > MAX_FRAME or _BODY_START + body_len + _CRC.size != len(buf):
        raise CodecError(f"frame length {len(buf)} does not match its header ({body_len})")
    end = _BODY_START + body_len
    (crc,) = _CRC.unpack_from(buf, end)
    if zlib.crc32(memoryview(buf)[:end]) != crc:
        raise CodecError("frame checksum mismatch")
    r = _Reader(buf, _HEAD.size, end)
    src, dst = r.str8(), r.str8()
    handler = _DECODERS.get(kind)
    if handler is None:
        raise CodecError(f"unknown message type {kind}")
    msg = handler(r, term, src, dst)
    r.done()
    return msg


def _vote_req(r: _Reader, term: int, src: str, dst: str) -> Message:
    last_index, last_term, flags = r.unpack(_VOTE_REQ)
    return VoteRequest(src, dst, term, last_index, last_term, bool(flags & 1), bool(flags & 2))


def _vote_resp(r: _Reader, term: int, src: str, dst: str) -> Message:
    (flags,) = r.unpack(_U8)
    return VoteResponse(src, dst, term, bool(flags & 2), bool(flags & 1))


def _app_req(r: _Reader, term: int, src: str, dst: str) -> Message:
    prev_index, prev_term, commit, count = r.unpack(_APP_REQ)
    buf, pos, end = r.raw, r.pos, r.end
    size = _ENTRY.size
    if count > (end - pos) // size:
        raise CodecError("entry count larger than the frame")
    # The hot path of a follower: one tight loop, entries built straight as tuples.
    entries: list[Entry] = []
    append, unpack, kinds, new = entries.append, _ENTRY.unpack_from, _KINDS, tuple.__new__
    index = prev_index
    for _ in range(count):
        if pos + size > end:
            raise CodecError("frame too short")
        e_term, kind, n = unpack(buf, pos)
        pos += size
        stop = pos + n
        if stop > end:
            raise CodecError("frame too short")
        if kind >= len(kinds):
            raise CodecError(f"unknown entry kind {kind}")
        index += 1
        append(new(Entry, (index, e_term, kinds[kind], buf[pos:stop])))
        pos = stop
    r.pos = pos
    return AppendRequest(src, dst, term, prev_index, prev_term, entries, commit)


def _app_resp(r: _Reader, term: int, src: str, dst: str) -> Message:
    index, hint_index, hint_term, flags = r.unpack(_APP_RESP)
    return AppendResponse(src, dst, term, index, bool(flags & 1), hint_index, hint_term)


def _heartbeat(r: _Reader, term: int, src: str, dst: str) -> Message:
    (commit,) = r.unpack(_U64)
    return Heartbeat(src, dst, term, commit)


def _heartbeat_resp(r: _Reader, term: int, src: str, dst: str) -> Message:
    (flags,) = r.unpack(_U8)
    return HeartbeatResponse(src, dst, term, bool(flags & 1))


def _snapshot(r: _Reader, term: int, src: str, dst: str) -> Message:
    index, snap_term = r.unpack(_SNAP)
    membership = _read_membership(r)
    (n,) = r.unpack(_U32)
    data = r.bytes(n)
    return InstallSnapshot(src, dst, term, Snapshot(SnapshotMeta(index, snap_term, membership), data))


def _timeout_now(r: _Reader, term: int, src: str, dst: str) -> Message:
    return TimeoutNow(src, dst, term)


_DECODERS: Final[dict[int, Callable[[_Reader, int, str, str], Message]]] = {
    _T_VOTE_REQ: _vote_req,
    _T_VOTE_RESP: _vote_resp,
    _T_APP_REQ: _app_req,
    _T_APP_RESP: _app_resp,
    _T_HB: _heartbeat,
    _T_HB_RESP: _heartbeat_resp,
    _T_SNAP: _snapshot,
    _T_TIMEOUT: _timeout_now,
}
