"""A replicated stream's snapshot, and a replica catching up with its leader's store after one.

Owns: what a stream group's snapshot holds (:class:`StreamSnapshot`: the store's sequence range
and its removed sequences, the last applied time stamp, the config, and the entries a replica
applied while it was still catching up), the catch-up request a replica sends its stream's
leader (:class:`CatchupRequest`) and the batch of stored messages the leader answers with
(:class:`CatchupBatch`), reading such a batch from a store and writing one into a store that is
behind, keeping the leader's sequences (removed ones become skipped sequences), as nats-server's
stream catch-up does. Must not know: the Raft host, the API, the wire of the system account.

A snapshot holds no message: the store it describes is synced before it is taken, so a replica
restarting from its own snapshot has the messages already, and a replica handed the leader's
snapshot (it fell behind what the leader's log still holds) fetches the messages it lacks from
the leader. A leader answers with what its store holds from the requested sequence on; what it
no longer holds below a message it sends (or below its own last sequence) was removed, and the
replica skips those sequences; what is past its last sequence it has not applied yet, and the
replica asks again.

The replica fetches past the snapshot's last sequence, through all the answering store holds:
a message the leader removed after its snapshot (a newer one on the subject under
``max_msgs_per_subject``, a KV bucket's every write) was removed by a later entry, and the
entries between decide by it (``Nats-Expected-Last-Subject-Sequence``, a KV update's revision).
Stopping at the snapshot's last sequence left such a message out (a skipped sequence), and the
replica then refused what the leader had stored: its sequences went apart from the leader's.
Fetched through the answer's last message, the store is the answering replica's at a later
entry, and the entries up to it are skipped as a restart's replay skips them (their time stamps
are not after the store's last message's). When that store's last messages were removed (a work
queue's acknowledged ones), the answer's last sequence comes with its message's time stamp
(:class:`CatchupBatch` ``last_ts``) and the replica's store takes it with the skipped sequences,
durably: with its own last message's, older, the entries that had published the removed ones
were applied again, storing them a second time at new sequences.
"""

from __future__ import annotations

from typing import Final

import msgspec

from jetpy.protocol.headers import get_header
from jetpy.store.base import StreamStore
from jetpy.store.ttl import H_TTL, parse_ttl

__all__ = [
    "CATCHUP_ALL",
    "CATCHUP_BATCH_BYTES",
    "CatchupBatch",
    "CatchupRequest",
    "CaughtMsg",
    "StreamSnapshot",
    "decode_batch",
    "decode_request",
    "decode_snapshot",
    "encode",
    "last_ts_of",
    "read_batch",
    "write_batch",
]

CATCHUP_BATCH_BYTES: Final = 1 << 20  # message bytes per batch, at most (and at least one message)
CATCHUP_BATCH_MSGS: Final = 1024
CATCHUP_ALL: Final = (1 << 63) - 1  # a request's ``to_seq``: all the answering replica holds


class StreamSnapshot(msgspec.Struct, array_like=True, frozen=True):
    """A replica's state at an applied entry: its store held ``first_seq .. last_seq`` but
    ``deleted`` (synced), ``ts`` the last applied time stamp, ``config`` the stream's config
    (JSON), ``held`` entries applied after it while the replica was still catching up (applied
    again once caught up), ``copy_epoch`` the open copying epoch of a mirror's or sources'
    (:mod:`.copying`; 0: none), ``last_ts`` the store's ``last_ts`` (the time stamp of
    ``last_seq``'s message, removed or not; 0 in a snapshot from before it was sent:
    :func:`last_ts_of`)."""

    first_seq: int
    last_seq: int
    ts: int
    deleted: list[int]
    config: bytes
    held: list[bytes] = []
    copy_epoch: int = 0
    last_ts: int = 0


def last_ts_of(snap: StreamSnapshot) -> int:
    """The time stamp of the snapshot's last sequence, for a store moved on to it without its
    message: the store's own, or (not sent) the last applied one, later than or equal to it and
    earlier than any entry after the snapshot, which decides the same (see the package doc)."""
    return snap.last_ts or snap.ts


class CatchupRequest(msgspec.Struct, array_like=True, frozen=True):
    """The stored messages from ``from_seq`` through ``to_seq``, please."""

    from_seq: int
    to_seq: int


class CaughtMsg(msgspec.Struct, array_like=True, frozen=True, gc=False):
    seq: int
    subject: str
    hdr: bytes
    data: bytes
    ts: int


class CatchupBatch(msgspec.Struct, array_like=True, frozen=True):
    """Stored messages in order from the requested sequence; ``last_seq``: the leader's, and
    ``last_ts`` its message's time stamp (removed or not; 0: not sent, an older server);
    ``more``: the batch stopped at its size, the range may hold more."""

    msgs: list[CaughtMsg]
    last_seq: int
    more: bool
    last_ts: int = 0


encode = msgspec.msgpack.Encoder().encode
decode_snapshot = msgspec.msgpack.Decoder(StreamSnapshot).decode
decode_request = msgspec.msgpack.Decoder(CatchupRequest).decode
decode_batch = msgspec.msgpack.Decoder(CatchupBatch).decode


def read_batch(store: StreamStore, req: CatchupRequest) -> CatchupBatch:
    """The leader's answer: its stored messages from ``req.from_seq`` on, up to ``req.to_seq``
    and :data:`CATCHUP_BATCH_BYTES`."""
    out: list[CaughtMsg] = []
    size = 0
    got = store.load_next_batch("", max(req.from_seq, 1), CATCHUP_BATCH_MSGS)
    more = len(got) == CATCHUP_BATCH_MSGS
    for m in got:
        if m.seq > req.to_seq:
            more = False
            break
        if size >= CATCHUP_BATCH_BYTES:
            more = True
            break
        out.append(CaughtMsg(m.seq, m.subject, m.hdr, m.data, m.ts))
        size += len(m.subject) + len(m.hdr) + len(m.data)
    st = store.state()
    return CatchupBatch(out, st.last_seq, more, st.last_ts)


def write_batch(store: StreamStore, batch: CatchupBatch, to_seq: int) -> int:
    """Store a batch into a replica's store that ends before it, keeping the leader's sequences:
    the sequence to ask for next (past ``to_seq`` when caught up). A gap below a message sent,
    or below the leader's last sequence, was removed there and is skipped here; skipped through
    the leader's last sequence, the store takes that one's time stamp as its ``last_ts`` (it
    says which entries the store has decided: the package doc's replay rule)."""
    last = store.state().last_seq
    for m in batch.msgs:
        if m.seq <= last:
            continue
        if m.seq > last + 1:
            store.skip_msgs(last + 1, m.seq - last - 1)
        store.store_msg(m.subject, m.hdr, m.data, m.ts, _ttl(m.hdr))
        last = m.seq
    known = min(to_seq, batch.last_seq)  # the leader holds (or removed) everything up to here
    if not batch.more and last < known:  # none of those left there
        store.skip_msgs(last + 1, known - last, batch.last_ts if known == batch.last_seq else 0)
        last = known
    return last + 1


def _ttl(hdr: bytes) -> int:
    """A fetched message's own TTL (it was stored with it: a valid one)."""
    raw = get_header(hdr, H_TTL) if hdr else None
    if raw is None:
        return 0
    try:
        return parse_ttl(raw)
    except ValueError:
        return 0
