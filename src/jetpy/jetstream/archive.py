"""jetpy's backup archive: the bytes ``$JS.API.STREAM.SNAPSHOT`` sends and ``STREAM.RESTORE`` reads.

Owns the format, byte by byte, its writer (frames built from messages, consumers and the stream's
config and state) and its incremental reader (bytes in, in any pieces; verified items out;
``ArchiveError`` naming the first thing wrong). Sans-IO: no sockets, files, stores or clocks.

What a snapshot is made of is the server's own business (nats-server sends an s2-compressed tar
of its block files, which jetpy cannot read: ``is_foreign`` recognises one). This format is
versioned, every frame is checksummed, and an archive is only whole when its END frame says how
many messages, consumers and frames came before it.

Archive::

    0   8  magic     b"JPBACKUP"
    8   2  version   u16 little-endian, 1
    10  6  reserved  zero
    16  .. frames, back to back; the last one is END

Frame (little-endian)::

    0   1  kind        1 META, 2 MSGS, 3 CONSUMER, 4 END
    1   1  codec       0 stored as is, 1 zlib (the payload is ``zlib.compress``'s output)
    2   2  reserved    zero
    4   4  stored_len  u32, payload bytes that follow this 16-byte header
    8   4  raw_len     u32, payload bytes once decompressed (at most MAX_FRAME)
    12  4  crc32       zlib.crc32 over bytes [0, 12) of this header, then the raw payload
    16  .. payload

Payloads:

* META (first frame, JSON): ``{"format": "jetpy-backup", "version": 1, "server": <jetpy version>,
  "taken": <ns>, "config": <StreamConfig>, "created": <ns>, "state": {"msgs", "bytes",
  "first_seq", "last_seq", "last_ts"}}``: the stream's config and state at the instant of the
  snapshot. Sequences between ``first_seq`` and ``last_seq`` without a message are the stream's
  gaps (deleted messages); ``last_ts`` is the time of ``last_seq`` even when it was deleted.
* MSGS (zlib, or as is when zlib cannot shrink it): message records back to back, in sequence order: ``seq u64 | ts i64 (ns) |
  subj_len u16 | hdr_len u32 | data_len u32 | subject | headers | data``.
* CONSUMER (JSON, one per durable consumer): ``{"name", "config": <ConsumerConfig>, "created":
  <ns>, "state": {"delivered_consumer_seq", "delivered_stream_seq", "ack_floor_consumer_seq",
  "ack_floor_stream_seq", "pending": [[stream seq, consumer seq, ts], ...], "redelivered":
  [[stream seq, count], ...]}}``.
* END (JSON): ``{"msgs", "consumers", "frames"}``, counting what came before it; nothing follows.

Must not know: stores, streams, consumers beyond their wire configs, the network.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import Final, Literal

import msgspec

from jetpy.jetstream.models import ConsumerConfig, StreamConfig
from jetpy.store.base import MAX_PAYLOAD, ConsumerState, StoredMsg

__all__ = [
    "FORMAT",
    "MAGIC",
    "MAX_FRAME",
    "MSGS_FRAME",
    "POOR_RATIO",
    "PROBE_EVERY",
    "VERSION",
    "ArchiveConsumer",
    "ArchiveEnd",
    "ArchiveError",
    "ArchiveMeta",
    "ArchiveReader",
    "ArchiveState",
    "ArchiveWriter",
    "is_foreign",
]

MAGIC: Final = b"JPBACKUP"
VERSION: Final = 1
FORMAT: Final = "jetpy-backup"
_HEADER: Final = MAGIC + struct.pack("<H", VERSION) + bytes(6)
_FRAME: Final = struct.Struct("<BBHII")  # kind, codec, reserved, stored_len, raw_len (+ crc)
_CRC: Final = struct.Struct("<I")
_FRAME_SIZE: Final = _FRAME.size + _CRC.size
_REC: Final = struct.Struct("<QqHII")
assert _FRAME_SIZE == 16 and _REC.size == 26

META, MSGS, CONSUMER, END = 1, 2, 3, 4
RAW, ZLIB = 0, 1

MSGS_FRAME: Final = 1024 * 1024
"""Raw bytes of message records per MSGS frame (one bigger message makes a frame of its own)."""

MAX_FRAME: Final = MAX_PAYLOAD + 2 * 65536
"""The largest raw payload a reader believes: one message of the largest size with its subject.
A corrupt length above it is refused before anything is allocated."""

ZLIB_LEVEL: Final = 1
"""Fast compression: a backup is bound by reading and sending, and level 1 takes most of what
zlib can take from typical payloads."""

POOR_RATIO: Final = 0.9
"""A MSGS frame that zlib cannot shrink below this share of its size is stored as is, and the
next :data:`PROBE_EVERY` - 1 frames are not even tried: payloads that are already compressed or
encrypted would otherwise cost ~16 ms of CPU per MiB for nothing."""
PROBE_EVERY: Final = 16

_NATS_S2: Final = b"\xff\x06\x00\x00S2sTwO"  # the stream identifier chunk nats-server's snapshots start with


class ArchiveError(Exception):
    """The bytes are not a whole, intact jetpy backup; the message says what is wrong."""


class ArchiveState(msgspec.Struct, frozen=True):
    msgs: int
    bytes: int
    first_seq: int
    last_seq: int
    last_ts: int


class ArchiveMeta(msgspec.Struct, frozen=True):
    config: StreamConfig
    created: int
    state: ArchiveState
    taken: int = 0
    server: str = ""
    format: str = FORMAT
    version: int = VERSION


class _WireConsumerState(msgspec.Struct, frozen=True):
    delivered_consumer_seq: int = 0
    delivered_stream_seq: int = 0
    ack_floor_consumer_seq: int = 0
    ack_floor_stream_seq: int = 0
    pending: list[tuple[int, int, int]] = msgspec.field(default_factory=list)
    redelivered: list[tuple[int, int]] = msgspec.field(default_factory=list)


class _WireConsumer(msgspec.Struct, frozen=True):
    name: str
    config: ConsumerConfig
    created: int
    state: _WireConsumerState


class ArchiveConsumer(msgspec.Struct, frozen=True):
    """A durable consumer as the archive carries it."""

    name: str
    config: ConsumerConfig
    created: int
    state: ConsumerState


class ArchiveEnd(msgspec.Struct, frozen=True):
    msgs: int
    consumers: int
    frames: int


def is_foreign(head: bytes) -> Literal["nats-server", ""]:
    """Who made these bytes if not jetpy: ``"nats-server"`` for its s2-compressed tar."""
    return "nats-server" if head.startswith(_NATS_S2) else ""


def _frame(kind: int, raw: bytes, compress: bool) -> bytes:
    codec, stored = RAW, raw
    if compress:
        packed = zlib.compress(raw, ZLIB_LEVEL)
        if len(packed) < len(raw) * POOR_RATIO:
            codec, stored = ZLIB, packed
    head = _FRAME.pack(kind, codec, 0, len(stored), len(raw))
    return head + _CRC.pack(zlib.crc32(raw, zlib.crc32(head))) + stored


class ArchiveWriter:
    """Builds an archive frame by frame: ``header`` (with META), ``messages`` any number of
    times, ``consumer`` per consumer, then ``end``. Each returns the bytes to send."""

    def __init__(self) -> None:
        self.msgs = 0
        self.consumers = 0
        self.frames = 0
        self._skip = 0  # MSGS frames still to store without trying to compress them

    def _msgs_frame(self, raw: bytes) -> bytes:
        if self._skip:
            self._skip -= 1
            return _frame(MSGS, raw, False)
        out = _frame(MSGS, raw, True)
        if out[1] == RAW:  # zlib did not help: stop trying for a while
            self._skip = PROBE_EVERY - 1
        return out

    def header(self, meta: ArchiveMeta) -> bytes:
        self.frames += 1
        return _HEADER + _frame(META, msgspec.json.encode(meta), False)

    def messages(self, msgs: Iterable[StoredMsg]) -> bytes:
        """MSGS frames for ``msgs`` (in sequence order), about :data:`MSGS_FRAME` raw bytes each."""
        out: list[bytes] = []
        recs: list[bytes] = []
        size = 0
        pack = _REC.pack
        for m in msgs:
            subj = m.subject.encode()
            rec = pack(m.seq, m.ts, len(subj), len(m.hdr), len(m.data)) + subj + m.hdr + m.data
            recs.append(rec)
            size += len(rec)
            self.msgs += 1
            if size >= MSGS_FRAME:
                out.append(self._msgs_frame(b"".join(recs)))
                recs, size = [], 0
        if recs:
            out.append(self._msgs_frame(b"".join(recs)))
        self.frames += len(out)
        return b"".join(out)

    def consumer(self, c: ArchiveConsumer) -> bytes:
        st = c.state
        wire = _WireConsumer(
            c.name,
            c.config,
            c.created,
            _WireConsumerState(
                st.delivered_consumer_seq,
                st.delivered_stream_seq,
                st.ack_floor_consumer_seq,
                st.ack_floor_stream_seq,
                [(s, cs, ts) for s, (cs, ts) in sorted(st.pending.items())],
                sorted(st.redelivered.items()),
            ),
        )
        self.consumers += 1
        self.frames += 1
        return _frame(CONSUMER, msgspec.json.encode(wire), False)

    def end(self) -> bytes:
        doc = ArchiveEnd(self.msgs, self.consumers, self.frames)
        return _frame(END, msgspec.json.encode(doc), False)


Item = ArchiveMeta | list[StoredMsg] | ArchiveConsumer | ArchiveEnd


class ArchiveReader:
    """Reads an archive fed in pieces of any size; see :meth:`feed` and :meth:`finish`."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._started = False
        self._meta: ArchiveMeta | None = None
        self._ended = False
        self._end: ArchiveEnd | None = None
        self._frames = 0
        self._msgs = 0
        self._consumers = 0
        self._last_seq = 0
        self.received = 0  # bytes fed so far

    @property
    def meta(self) -> ArchiveMeta | None:
        return self._meta

    def feed(self, data: bytes) -> list[Item]:
        """The items completed by ``data``, in order. Raises ArchiveError at the first problem."""
        self.received += len(data)
        buf = self._buf
        buf += data
        items: list[Item] = []
        pos = 0
        if not self._started:
            if len(buf) < len(_HEADER):
                if not MAGIC.startswith(bytes(buf[: len(MAGIC)])):
                    self._not_ours(bytes(buf))
                return items
            if bytes(buf[: len(MAGIC)]) != MAGIC:
                self._not_ours(bytes(buf))
            version = struct.unpack_from("<H", buf, len(MAGIC))[0]
            if version != VERSION:
                raise ArchiveError(
                    f"backup format version {version} is not supported (this server reads {VERSION})"
                )
            self._started = True
            pos = len(_HEADER)
        while len(buf) - pos >= _FRAME_SIZE:
            kind, codec, _r, stored_len, raw_len = _FRAME.unpack_from(buf, pos)
            if self._ended:
                raise ArchiveError("data after the end of the backup")
            if kind not in (META, MSGS, CONSUMER, END) or codec not in (RAW, ZLIB) or raw_len > MAX_FRAME:
                raise ArchiveError(f"damaged frame header at offset {self.received - len(buf) + pos}")
            if (codec == RAW and stored_len != raw_len) or stored_len > MAX_FRAME + 1024:
                raise ArchiveError(f"damaged frame header at offset {self.received - len(buf) + pos}")
            end = pos + _FRAME_SIZE + stored_len
            if end > len(buf):
                break
            stored = bytes(buf[pos + _FRAME_SIZE : end])
            raw = stored
            if codec == ZLIB:
                try:
                    raw = zlib.decompress(stored, bufsize=max(raw_len, 1))
                except zlib.error as e:
                    raise ArchiveError(f"damaged frame {self._frames + 1}: {e}") from None
            want = _CRC.unpack_from(buf, pos + _FRAME.size)[0]
            if len(raw) != raw_len or zlib.crc32(raw, zlib.crc32(buf[pos : pos + _FRAME.size])) != want:
                raise ArchiveError(f"frame {self._frames + 1} failed its checksum")
            items.append(self._item(kind, raw))
            pos = end
        del buf[:pos]
        return items

    def finish(self) -> ArchiveEnd:
        """Check that the archive was whole; its END frame."""
        if self._end is None or self._buf:
            got = "no backup data" if not self.received else f"{self.received} bytes"
            raise ArchiveError(f"the backup is truncated ({got}, no end of backup)")
        return self._end

    def _not_ours(self, head: bytes) -> None:
        if is_foreign(head):
            raise ArchiveError(
                "this is a nats-server snapshot (an s2-compressed tar of its files): "
                "jetpy restores only backups taken from jetpy"
            )
        raise ArchiveError("not a jetpy backup (bad magic)")

    def _item(self, kind: int, raw: bytes) -> Item:
        self._frames += 1
        if kind != META and self._meta is None:
            raise ArchiveError("the backup does not start with its stream metadata")
        try:
            if kind == META:
                if self._meta is not None:
                    raise ArchiveError("two stream metadata frames")
                meta = msgspec.json.decode(raw, type=ArchiveMeta)
                if meta.format != FORMAT or meta.version != VERSION:
                    raise ArchiveError(f"unknown backup format {meta.format!r} version {meta.version}")
                self._meta = meta
                return meta
            if kind == MSGS:
                return self._records(raw)
            if kind == CONSUMER:
                w = msgspec.json.decode(raw, type=_WireConsumer)
                self._consumers += 1
                st = w.state
                return ArchiveConsumer(
                    w.name,
                    w.config,
                    w.created,
                    ConsumerState(
                        st.delivered_consumer_seq,
                        st.delivered_stream_seq,
                        st.ack_floor_consumer_seq,
                        st.ack_floor_stream_seq,
                        {s: (cs, ts) for s, cs, ts in st.pending},
                        dict(st.redelivered),
                    ),
                )
            end = msgspec.json.decode(raw, type=ArchiveEnd)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise ArchiveError(f"damaged frame {self._frames}: {e}") from None
        if end != ArchiveEnd(self._msgs, self._consumers, self._frames - 1):
            raise ArchiveError(
                f"the backup is incomplete: its end counts {end.msgs} messages, {end.consumers} "
                f"consumers and {end.frames} frames, {self._msgs}, {self._consumers} and "
                f"{self._frames - 1} were read"
            )
        self._ended = True
        self._end = end
        return end

    def _records(self, raw: bytes) -> list[StoredMsg]:
        out: list[StoredMsg] = []
        pos, n = 0, len(raw)
        unpack = _REC.unpack_from
        last = self._last_seq
        meta = self._meta
        assert meta is not None
        top = meta.state.last_seq
        while pos < n:
            if pos + _REC.size > n:
                raise ArchiveError(f"damaged message record after seq {last}")
            seq, ts, sl, hl, dl = unpack(raw, pos)
            pos += _REC.size
            end = pos + sl + hl + dl
            if end > n or seq <= last or seq > top:
                raise ArchiveError(f"damaged message record after seq {last}")
            try:
                subject = raw[pos : pos + sl].decode()
            except UnicodeDecodeError:
                raise ArchiveError(f"damaged subject of seq {seq}") from None
            out.append(StoredMsg(subject, seq, ts, raw[pos + sl : pos + sl + hl], raw[pos + sl + hl : end]))
            pos = end
            last = seq
        self._last_seq = last
        self._msgs += len(out)
        return out
