"""The storage seam: the ``StreamStore`` protocol, its value types and the store error root.

Owns: what a stream store promises (sequence numbering, limits enforcement, purge/compact
semantics, the group-commit contract) and the immutable values that cross into the JetStream
layer. Both ``MemoryStore`` (the oracle) and ``FileStore`` implement exactly this and are held to
it by one shared contract test suite. The rules below that both stores apply alike are written
once here, over each store's own primitives: ``check_discard_new``, ``payload_cap``,
``purge_ex`` and ``stream_state`` (expiry is ``expiry.py``).

Must not know: the network, the JSON API, consumers' delivery logic, clocks or timers (the caller
passes ``now_ns`` to ``expire`` and schedules its own timer from ``next_expiry``).

Semantics shared by every store (nats-server's memstore/filestore are the reference):

* Sequences start at ``StoreConfig.first_seq`` and only grow; a sequence is never handed out twice,
  not even after the message was removed, purged or lost.
* An empty store reports ``first_seq = last_seq + 1`` (``0, 0`` while nothing was ever stored and
  ``first_seq`` is 1), ``first_ts = 0``; ``last_ts`` is the timestamp of the message that got
  ``last_seq`` and survives its removal.
* ``bytes`` counts ``msg_size(storage, ...)`` per message, nats-server's own accounting, which
  differs by storage type exactly as nats-server's does: a memory store counts subject + headers
  + payload + 16 (``memStoreMsgSize``), a file store subject + payload + 30, plus 4 + headers when
  there are headers (``fileStoreMsgSize``). ``max_bytes`` and every reported size use these.
* Limits: ``-1`` (or ``0``) means unlimited. After every append (and on ``update_limits``) the
  oldest messages (or the oldest of a subject, for ``max_msgs_per_subject``) are removed until
  every limit holds, whatever the discard policy. With ``discard="new"`` a message is refused
  first (nats-server 2.9's rules, the reference): ``ErrMaxMsgs`` when the stream already holds
  ``max_msgs``; ``ErrMaxBytes`` when ``bytes`` + the new message's headers and payload would
  *reach* ``max_bytes`` (it compares the payload, not the accounted size, so the append may
  then still push out an old message); either is waived when the message replaces the oldest of
  its own subject at ``max_msgs_per_subject`` (for bytes: only if that oldest message is large
  enough), and with ``discard_new_per_subject`` a full subject refuses with
  ``ErrMaxMsgsPerSubject``.
* Age expiry looks only at the head of the stream, like nats-server: ``expire(now)`` removes
  messages from the front while ``ts <= now - max_age``, stepping over messages whose TTL is
  ``never`` (they stay).
* Per-message TTL (nats-server 2.11): ``store_msg(..., ttl=n)`` with ``n > 0`` nanoseconds makes
  the message expire at ``ts + n`` (or earlier, by ``max_age``); ``ttl=-1`` (``never``) exempts
  it from ``max_age``. ``next_expiry``/``expire`` cover both, so one timer serves a stream. The
  TTL must also be in the message's own ``Nats-TTL`` header (the file store reads it back from
  there on recovery).
* Subject delete markers: with ``subject_delete_marker_ttl`` set, when ``expire`` removes the
  last message of a subject (one that is not itself a marker, see ``ttl.is_marker``) the store
  appends a marker on that subject: no payload, headers ``Nats-Marker-Reason: MaxAge`` and
  ``Nats-TTL: <marker ttl>``, expiring after that TTL. Markers get the next sequences.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Generator, Iterable, Sequence
from itertools import islice
from typing import Final, Literal, Protocol, runtime_checkable

import msgspec

from jetpy.subjects import matches_all as is_all

__all__ = [
    "BULK_MAX_EXAMINED",
    "FILE_HDR_OVERHEAD",
    "FILE_MSG_OVERHEAD",
    "LOST_RANGES_SHOWN",
    "MAX_PAYLOAD",
    "MAX_SUBJECT_BYTES",
    "MEMORY_MSG_OVERHEAD",
    "UNLIMITED",
    "Compression",
    "ConsumerState",
    "ConsumerStore",
    "ErrCorrupt",
    "ErrEncryptionKey",
    "ErrInvalidName",
    "ErrMaxBytes",
    "ErrMaxMsgs",
    "ErrMaxMsgsPerSubject",
    "ErrMsgTooLarge",
    "ErrStoreClosed",
    "ErrStoreIO",
    "ErrStoreLocked",
    "ErrWrongSequence",
    "LostData",
    "SimpleState",
    "Steps",
    "StoreConfig",
    "StoreError",
    "StoreExport",
    "StoreLimits",
    "StoredMsg",
    "StoredRecords",
    "StreamState",
    "StreamStore",
    "check_discard_new",
    "compression_of",
    "finish",
    "msg_size",
    "payload_cap",
    "purge_ex",
    "stream_state",
]

UNLIMITED = -1
"""The NATS spelling of "no limit" for every count/size limit."""

MEMORY_MSG_OVERHEAD = 16
"""Accounted bytes per message in a memory store on top of subject + headers + payload: nats-server's
``memStoreMsgSize`` (a sequence and a timestamp, 8 bytes each)."""

FILE_MSG_OVERHEAD = 30
"""Accounted bytes per message in a file store on top of subject + payload: nats-server's
``fileStoreMsgSize`` (its record's length 4, seq 8, ts 8, subject length 2 and hash 8)."""

FILE_HDR_OVERHEAD = 4
"""Added to ``FILE_MSG_OVERHEAD`` (with the headers) when a message has headers: the header length
field of nats-server's record. jetpy's own record always has it, so its on-disk record is 4 bytes
longer than the accounted size for a message without headers (see record.py)."""


MAX_SUBJECT_BYTES = 0xFFFF
"""Longest subject (UTF-8 bytes) a store accepts: the record's subject length field is a u16."""

MAX_PAYLOAD = 64 * 1024 * 1024
"""Hard cap on headers + payload of one message, whatever ``max_msg_size`` says: nats-server
refuses a ``max_payload`` above 64 MB, and it keeps every record offset in a block within a u32."""


def msg_size(storage: Literal["file", "memory"], subject: str, hdr: bytes, data: bytes) -> int:
    """Bytes one message counts against ``max_bytes`` and in ``StreamState.bytes``."""
    sl = len(subject.encode())
    if storage == "memory":
        return MEMORY_MSG_OVERHEAD + sl + len(hdr) + len(data)
    if hdr:
        return FILE_MSG_OVERHEAD + FILE_HDR_OVERHEAD + sl + len(hdr) + len(data)
    return FILE_MSG_OVERHEAD + sl + len(data)


# ----------------------------------------------------------------------------- values


class StoredMsg(msgspec.Struct, frozen=True, gc=False):
    """One stored message as read back. ``ts`` is nanoseconds since the Unix epoch."""

    subject: str
    seq: int
    ts: int
    hdr: bytes
    data: bytes


LOST_RANGES_SHOWN = 16
"""Ranges of lost sequences ``LostData.ranges`` names (the count is always exact): a damaged
store must not write megabytes into a log line or a report."""


BULK_MAX_EXAMINED = 262_144
"""Sequences one ``read_records`` call looks at, at most: a filter matching nothing in a stream
of 100 million messages costs a bounded slice of work per call (milliseconds), never one long
stall of its owner's loop."""


class StoredRecords(msgspec.Struct, frozen=True, gc=False):
    """Stored messages as the file store's message records (``record.py``: header, subject,
    headers, payload, CRC-32), many at a time: what ``StreamStore.read_records`` hands out.

    The records area is ``b"".join(parts)`` (``size`` bytes); record ``k`` starts at
    ``offsets[k] - base`` in it (``offsets`` is an ``array("I")``: a file store hands out its
    block offsets as they are, with ``base`` where its first run starts). Bytes between
    records belong to no message of the read (tombstones, a few bytes of padding): readers go
    by the offsets. ``next_seq`` is where the next read continues: every matching message with
    a sequence below it, from the requested start on, was handed out."""

    parts: list[bytes]
    offsets: array[int]
    base: int
    size: int
    next_seq: int


class LostData(msgspec.Struct, frozen=True):
    """Messages the store had accepted but can no longer return (a damaged or missing file)."""

    msgs: list[int]
    bytes: int

    def ranges(self, limit: int = LOST_RANGES_SHOWN) -> str:
        """The lost sequences as ``1-5, 9, 12-40``, at most ``limit`` ranges (then how many more)."""
        spans: list[tuple[int, int]] = []
        for q in sorted(self.msgs):
            if spans and q == spans[-1][1] + 1:
                spans[-1] = (spans[-1][0], q)
            else:
                spans.append((q, q))
        shown = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans[:limit])
        if len(spans) > limit:
            shown += f" and {len(spans) - limit} more ranges"
        return shown


class StreamState(msgspec.Struct, frozen=True):
    msgs: int
    bytes: int
    first_seq: int
    first_ts: int
    last_seq: int
    last_ts: int
    num_subjects: int
    num_deleted: int
    deleted: list[int] | None = None
    lost: LostData | None = None


class SimpleState(msgspec.Struct, frozen=True):
    """A filtered view: how many messages match, and the first/last matching sequence (0 if none)."""

    msgs: int = 0
    first: int = 0
    last: int = 0


class StoreLimits(msgspec.Struct, frozen=True):
    """The limits a store enforces by itself on every append (NATS StreamConfig spelling)."""

    max_msgs: int = UNLIMITED
    max_bytes: int = UNLIMITED
    max_age: int = 0  # nanoseconds, 0 = keep forever
    max_msgs_per_subject: int = UNLIMITED
    max_msg_size: int = UNLIMITED  # headers + payload
    discard: Literal["old", "new"] = "old"
    discard_new_per_subject: bool = False
    subject_delete_marker_ttl: int = 0  # nanoseconds; > 0: expiry leaves a marker (see above)


Compression = Literal["none", "s2"]
"""A stream's ``compression`` (nats-server 2.10's spelling)."""


def compression_of(value: str) -> Compression:
    """``value`` as a ``Compression``; ValueError for anything else."""
    if value == "s2":
        return "s2"
    if value == "none":
        return "none"
    raise ValueError(f"unknown compression {value!r}")


class StoreConfig(msgspec.Struct, frozen=True):
    name: str
    storage: Literal["file", "memory"] = "file"
    limits: StoreLimits = msgspec.field(default_factory=StoreLimits)
    first_seq: int = 1  # only used when the store is created
    block_size: int = 0  # file store only; 0 = by max_bytes, as nats-server (filestore.block_size_for)
    compression: Compression = "none"  # file store: sealed blocks compressed (frames.py)


class ConsumerState(msgspec.Struct, frozen=True):
    """A consumer's durable progress. ``pending`` maps stream seq -> (consumer seq, delivery ts ns)."""

    delivered_consumer_seq: int = 0
    delivered_stream_seq: int = 0
    ack_floor_consumer_seq: int = 0
    ack_floor_stream_seq: int = 0
    pending: dict[int, tuple[int, int]] = msgspec.field(default_factory=dict)
    redelivered: dict[int, int] = msgspec.field(default_factory=dict)


# ----------------------------------------------------------------------------- errors


class StoreError(Exception):
    """Root of every error the store layer raises; ``description`` is the nats-server text."""

    description: str = "store error"

    def __init__(self, description: str | None = None) -> None:
        if description is not None:
            self.description = description
        super().__init__(self.description)


class ErrMaxMsgs(StoreError):
    description = "maximum messages exceeded"


class ErrMaxBytes(StoreError):
    description = "maximum bytes exceeded"


class ErrMaxMsgsPerSubject(StoreError):
    description = "maximum messages per subject exceeded"


class ErrMsgTooLarge(StoreError):
    description = "message to large"  # sic: nats-server's ErrMsgTooLarge text


class ErrStoreClosed(StoreError):
    description = "store is closed"


class ErrStoreLocked(StoreError):
    """Another FileStore (in this or another process) has the directory open."""

    description = "store directory is in use"


class ErrInvalidName(StoreError):
    description = "invalid name"


class ErrStoreIO(StoreError):
    """A write, fsync or truncate failed (ENOSPC, EIO, EROFS...).

    ``lost`` lists every sequence that was accepted by ``store_msg`` but rolled back because it
    could not be made durable: the caller must answer those publishes with an error, never an
    ack. Those sequences are never reused. Sequences stored before the failure are unaffected.
    """

    description = "store I/O error"

    def __init__(self, errno: int, lost: Sequence[int] | None = None, detail: str = "") -> None:
        self.errno = errno
        # A range when the store can name the rolled-back window in O(1) (``seq in err.lost``).
        self.lost: Sequence[int] = lost if lost is not None else ()
        text = f"{ErrStoreIO.description}: errno {errno}"
        if detail:
            text += f" ({detail})"
        super().__init__(text)


class ErrWrongSequence(StoreError):
    description = "wrong sequence for skipped msg"  # nats-server's text


class ErrCorrupt(StoreError):
    """Stored bytes failed their checksum or sanity checks (``seqs`` names messages, if known)."""

    description = "store is corrupt"

    def __init__(self, detail: str, seqs: list[int] | None = None) -> None:
        self.seqs: list[int] = list(seqs or ())
        super().__init__(f"{ErrCorrupt.description}: {detail}")


class ErrEncryptionKey(StoreError):
    """A file was written with an encryption key this store was not given, or is encrypted and
    no key was given (plaintext files are read and re-encrypted, never refused). The store
    refuses to open rather than guess; nothing past the file's header is read, nothing is
    changed (see crypto.py)."""

    description = "encryption key mismatch"

    def __init__(self, detail: str) -> None:
        super().__init__(f"{ErrEncryptionKey.description}: {detail}")


# ----------------------------------------------------------------------------- the seam


def check_discard_new(
    lim: StoreLimits,
    msgs: int,
    nbytes: int,
    subject_count: int | None,
    oldest_of_subject: Callable[[], int],
    payload: int,
    file_rules: bool,
) -> None:
    """Refuse a message that discard "new" keeps out, by nats-server 2.9's rules (see the module
    docstring): the store holds ``msgs`` messages of ``nbytes`` accounted bytes, the message's
    subject ``subject_count`` (None: a new subject), and ``payload`` is its headers and payload
    (not its accounted size). ``oldest_of_subject`` gives the accounted size of that subject's
    oldest message, asked only when it decides; it must be larger than ``payload`` with
    ``file_rules`` (nats-server's filestore), at least as large without (its memstore)."""
    asl = (
        lim.max_msgs_per_subject > 0
        and subject_count is not None
        and subject_count >= lim.max_msgs_per_subject
    )
    if asl and lim.discard_new_per_subject:
        raise ErrMaxMsgsPerSubject()
    if lim.max_msgs > 0 and msgs >= lim.max_msgs and not asl:
        raise ErrMaxMsgs()
    if lim.max_bytes > 0 and nbytes + payload >= lim.max_bytes:
        if not asl:
            raise ErrMaxBytes()
        oldest = oldest_of_subject()
        if oldest < payload or (file_rules and oldest == payload):
            raise ErrMaxBytes()


def payload_cap(lim: StoreLimits) -> int:
    """The most headers + payload one message may have under these limits (``MAX_PAYLOAD`` at most)."""
    return min(lim.max_msg_size, MAX_PAYLOAD) if lim.max_msg_size > 0 else MAX_PAYLOAD


def stream_state(
    msgs: int,
    nbytes: int,
    first: int,
    last: int,
    last_ts: int,
    num_subjects: int,
    first_ts: Callable[[], int],
    deleted: Callable[[int, int], list[int]] | None,
    lost: list[int],
    lost_bytes: int,
) -> StreamState:
    """A store's ``StreamState`` by the module's rules (what an empty store reports). ``first``
    is the first live seq (``last + 1`` when empty); ``first_ts()`` and ``deleted(first, last)``
    (the seqs without a message, asked only for ``deleted_details``) are called only when the
    store has messages."""
    if msgs == 0 and last == 0:
        first = 0
    listed: list[int] | None = None
    if deleted is not None:
        listed = deleted(first, last) if msgs else []
    return StreamState(
        msgs=msgs,
        bytes=nbytes,
        first_seq=first,
        first_ts=first_ts() if msgs else 0,
        last_seq=last,
        last_ts=last_ts,
        num_subjects=num_subjects,
        num_deleted=(last - first + 1 - msgs) if msgs else 0,
        deleted=listed,
        lost=LostData(list(lost), lost_bytes) if (lost or lost_bytes) else None,
    )


PURGE_STEP: Final = 4096
"""Messages removed one by one (a purge by subject) between two points where a purge may pause:
a few milliseconds of work, so a purge of a million messages can let other work in between."""

COMPACT_STEP: Final = 65536
"""Sequences compacted away between two such points (a purge of the head: whole runs at once)."""

Steps = Generator[None, None, int]
"""Work that yields where it may pause and returns a count (``finish`` runs it at once)."""


def finish(steps: Steps) -> int:
    """Run every step now; the result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return int(done.value)


def purge_ex(
    subject: str,
    seq: int,
    keep: int,
    *,
    msgs: int,
    first_seq: int,
    last_seq: int,
    purge_all: Callable[[], int],
    compact: Callable[[int], int],
    nth_newest: Callable[[int], int],
    matching_seqs: Callable[[str, int], Iterable[int]],
    matching_count: Callable[[str], int],
    remove: Callable[[int], bool],
) -> Steps:
    """``StreamStore.purge_steps`` (nats-server's PurgeEx) over a store's own primitives: it
    holds ``msgs`` messages from ``first_seq`` to ``last_seq``; ``nth_newest(k)`` is the seq
    from which exactly ``k`` are live; ``matching_seqs(filter, upper)`` the live seqs up to
    ``upper`` on matching subjects, ascending (produced as they are consumed), and
    ``matching_count(filter)`` how many match in all.

    Yields every ``PURGE_STEP`` removals or ``COMPACT_STEP`` sequences compacted. Messages stored
    while it is paused have higher sequences than any it removes, so they are never purged by
    it (a purge past the end, which gives the next message a higher sequence, never pauses)."""
    if is_all(subject):
        if keep <= 0 and seq <= 1:
            return purge_all()
        if seq > 1:
            target = seq
        elif keep >= msgs:
            return 0
        else:
            target = nth_newest(keep)
        if target > last_seq + 1:
            return compact(target)  # at once: nothing below it may be stored in between
        removed = 0
        at = first_seq + COMPACT_STEP
        while at < target:
            removed += compact(at)
            yield
            at += COMPACT_STEP
        return removed + compact(target)
    victims: Iterable[int] = matching_seqs(subject, seq - 1 if seq > 1 else last_seq)
    if keep > 0:
        total = matching_count(subject)
        if keep >= total:
            return 0
        victims = islice(victims, total - keep)
    removed = 0
    for i, s in enumerate(victims, 1):
        if remove(s):
            removed += 1
        if not i % PURGE_STEP:
            yield
    return removed


@runtime_checkable
class ConsumerStore(Protocol):
    """Durable state of one consumer of a stream. ``where`` names its directory in log lines ("" for
    memory)."""

    where: str

    def update(self, state: ConsumerState) -> None:
        """Replace the stored state (file store: atomically and durably; blocks on fsync)."""

    def load(self) -> ConsumerState | None:
        """The last state given to ``update`` (None if none was). Raises ErrCorrupt."""

    def set_aside_state(self) -> str | None:
        """Keep a damaged state out of the way without deleting it (file store: renamed to
        ``o.dat.damaged``); returns where it went (None: nothing was there, or memory)."""

    def write_meta(self, meta: bytes) -> None:
        """Store the consumer's config bytes atomically, with a checksum."""

    def read_meta(self) -> bytes | None:
        """The bytes given to ``write_meta`` (None if never written). Raises ErrCorrupt."""

    def delete(self) -> None:
        """Forget this consumer's state."""


class StoreExport(Protocol):
    """Every message a store held at one instant (``StreamStore.export``), to be read in slices
    from any one thread while the store goes on (the backup's read; see ``export.py``)."""

    def read(self, max_bytes: int) -> list[StoredMsg]:
        """The next messages in sequence order, about ``max_bytes`` of them (at least one while
        any are left); an empty list once all were read. Raises ErrCorrupt / ErrStoreIO."""

    def close(self) -> None:
        """Release what the export holds (descriptors); reading after it returns nothing."""


@runtime_checkable
class StreamStore(Protocol):
    """What the JetStream layer may ask of a stream's storage. Not thread-safe except ``sync``.

    Group commit: ``store_msg`` only buffers (the message is readable at once), ``flush`` hands
    the buffer to the OS and returns the highest sequence written, and ``sync`` (safe to run on a
    worker thread while the owning thread keeps storing and flushing) makes everything flushed
    before it started durable. Ack a publish only after a ``sync`` that began after the ``flush``
    that covered its sequence. ``ErrStoreIO`` from any of them names the rolled-back sequences.
    """

    @property
    def config(self) -> StoreConfig: ...

    def store_msg(
        self, subject: str, hdr: bytes, data: bytes, ts: int | None = None, ttl: int = 0
    ) -> tuple[int, int]:
        """Append a message, enforce limits, return ``(seq, ts)``. ``ttl``: 0 none, > 0 nanoseconds,
        -1 never (see the module rules)."""

    def store_many(
        self, subjects: list[str], hdrs: list[bytes], payloads: list[bytes], start: int, ts: int
    ) -> int:
        """``store_msg(subjects[i], hdrs[i], payloads[i], ts)`` for ``i`` from ``start`` on, in
        one call, while a message needs nothing a single store would do beyond appending it;
        returns how many it stored, as sequences ``last_seq + 1 ..`` (0: the next goes through
        ``store_msg``, as every message may)."""

    def load_msg(self, seq: int) -> StoredMsg | None: ...

    def load_next_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None:
        """The first message with seq >= start_seq whose subject matches the filter."""

    def load_last_msg(self, filter_subject: str) -> StoredMsg | None:
        """The newest message whose subject matches the filter ("" or ">" = any)."""

    def load_next_batch(self, filter_subject: str, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """Up to ``max_msgs`` of the messages ``load_next_msg`` would return one by one from
        ``start_seq`` on, in order (fewer only when no more match): the consumers' bulk read."""

    def read_records(
        self, start_seq: int, end_seq: int, filters: Sequence[str], max_bytes: int
    ) -> StoredRecords:
        """The bulk read: the live messages with ``start_seq <= seq <= end_seq`` whose subject
        matches one of ``filters`` (none, or ``>``: every subject), in order, as records (see
        ``StoredRecords``). Adds records while the area holds less than ``max_bytes``, and
        examines at most ``BULK_MAX_EXAMINED`` sequences; ``next_seq`` says where to go on."""

    def remove_msg(self, seq: int) -> bool: ...

    def erase_msg(self, seq: int) -> bool:
        """Remove and overwrite the message's bytes wherever they are stored."""

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        """nats-server PurgeEx: remove matching messages below ``seq`` (0 or 1 = no bound), keeping
        the ``keep`` newest matching ones. With no subject filter, ``seq`` > 1 is ``compact(seq)``."""

    def purge_steps(self, subject: str = "", seq: int = 0, keep: int = 0) -> Steps:
        """``purge`` in steps (see ``purge_ex``): the caller may store, read and remove between
        them; the result is how many messages the purge removed."""

    def compact(self, seq: int, last_ts: int = 0) -> int:
        """Remove every message below ``seq``; past the end, the next message gets ``seq``, and
        ``last_ts`` (when not 0) is the time stamp of ``seq - 1``'s message (see ``skip_msgs``)."""

    def skip_msgs(self, seq: int, num: int, last_ts: int = 0) -> None:
        """Use up sequences ``seq .. seq+num-1`` without storing anything (nats-server's
        ``SkipMsgs``): they read as deleted and the next message gets ``seq + num``. ``seq`` must
        be ``last_seq + 1`` (``ErrWrongSequence`` otherwise). A mirror keeps its origin's numbers
        this way across the origin's gaps. ``last_ts``, when not 0, is the time stamp of the
        message that had the last of them elsewhere (a replica copying another's store, where
        it was removed): the store's ``last_ts`` from then on, durable with ``last_seq``, as if
        that message had been stored and removed here; 0 leaves ``last_ts`` as it was."""

    def state(self, deleted_details: bool = False) -> StreamState: ...

    def filtered_state(self, start_seq: int, filter_subject: str) -> SimpleState: ...

    def subjects_state(self, filter_subject: str) -> dict[str, int]: ...

    def num_pending(self, start_seq: int, filter_subject: str, last_per_subject: bool) -> int: ...

    def update_limits(self, limits: StoreLimits) -> None: ...

    def set_compression(self, compression: str) -> None:
        """``"none"`` or ``"s2"`` (the stream config's ``compression``): a file store compresses
        its sealed blocks with S2 from now on; a memory store keeps nothing on disk, so this
        only changes its config, as nats-server's memory store."""

    def update_limits_steps(self, limits: StoreLimits) -> Steps:
        """``update_limits`` in steps, yielding every ``PURGE_STEP`` messages its lower limits
        remove (they hold for what is stored in between); returns how many it removed."""

    def expire(self, now_ns: int, limit: int = 0) -> int:
        """Remove messages older than ``max_age`` or past their own TTL at ``now_ns`` (and leave
        delete markers if configured), at most ``limit`` of them (0: all); returns how many were
        removed (``limit`` when more may be due: call again)."""

    def next_expiry(self) -> int | None:
        """When (ns since epoch) the next message expires (by age or TTL), or None if none will."""

    def flush(self) -> int: ...

    def sync(self) -> None: ...

    def export(self) -> StoreExport:
        """The messages live now, readable later from another thread while this store keeps
        storing and removing (a consistent backup). Cheap: no payload is copied or read here."""

    def consumer_store(self, name: str) -> ConsumerStore: ...

    def consumer_names(self) -> list[str]: ...

    def write_meta(self, meta: bytes) -> None: ...

    def read_meta(self) -> bytes | None: ...

    def recovery_notes(self) -> list[str]:
        """What opening the store found wrong with its files and what was made of it, one line
        each (the losses themselves are in ``state().lost``); empty for a healthy store."""

    def stop(self) -> None: ...

    def delete(self) -> None: ...
