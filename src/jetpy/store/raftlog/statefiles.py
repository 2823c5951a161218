"""The hard-state and snapshot files of a Raft log: their payloads, byte by byte.

Owns: the encodings inside the two framed files (``consumer_state``'s frame: magic, version,
length, CRC) that sit next to the segments. Must not know: when they are written (``store``,
``jobs``) or what the values mean to Raft.

``hardstate``, magic ``b"JPRH"``::

    term u64, commit u64, repair_through u64, synced u64, vote (u8 length + UTF-8)

``snapshot``, magic ``b"JPRS"``::

    index u64, term u64, membership length u32, membership (raft.codec), data
"""

from __future__ import annotations

import struct
from typing import Final

from ...raft import HardState, Snapshot, SnapshotMeta, decode_membership, encode_membership
from ..base import ErrCorrupt

__all__ = [
    "HARDSTATE_FILE",
    "HS_MAGIC",
    "SNAPSHOT_FILE",
    "SNAP_MAGIC",
    "decode_hs",
    "decode_snapshot",
    "encode_hs",
    "encode_snapshot",
]

HARDSTATE_FILE: Final = "hardstate"
SNAPSHOT_FILE: Final = "snapshot"
HS_MAGIC: Final = b"JPRH"
SNAP_MAGIC: Final = b"JPRS"
_HS: Final = struct.Struct("<QQQQB")
_SNAP: Final = struct.Struct("<QQI")


def encode_hs(hs: HardState, synced: int) -> bytes:
    vote = hs.vote.encode()
    return _HS.pack(hs.term, hs.commit, hs.repair_through, synced, len(vote)) + vote


def decode_hs(raw: bytes) -> tuple[HardState, int]:
    try:
        term, commit, repair, synced, n = _HS.unpack_from(raw)
        vote = raw[_HS.size : _HS.size + n].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise ErrCorrupt(f"{HARDSTATE_FILE}: malformed ({exc})") from exc
    if len(raw) != _HS.size + n:
        raise ErrCorrupt(f"{HARDSTATE_FILE}: {len(raw)} bytes, expected {_HS.size + n}")
    return HardState(term, vote, commit, repair), synced


def encode_snapshot(snap: Snapshot) -> bytes:
    members = encode_membership(snap.meta.membership)
    return b"".join((_SNAP.pack(snap.meta.index, snap.meta.term, len(members)), members, snap.data))


def decode_snapshot(raw: bytes) -> Snapshot:
    try:
        index, term, n = _SNAP.unpack_from(raw)
        membership = decode_membership(raw[_SNAP.size : _SNAP.size + n])
    except Exception as exc:  # struct.error or the raft codec's CodecError
        raise ErrCorrupt(f"{SNAPSHOT_FILE}: malformed ({exc})") from exc
    return Snapshot(SnapshotMeta(index, term, membership), raw[_SNAP.size + n :])
