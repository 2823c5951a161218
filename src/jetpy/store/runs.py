"""A run of messages appended in one call: the file store's ``store_many`` (the bulk publish).

Owns the loop that appends consecutive records to the active block and indexes them, hoisting
what a single ``store_msg`` looks up per message, and the rule for where a run stops: at a
record that would need more than an append (a subject the store does not know yet, a block
to roll, a full write buffer, a message over the largest). ``store_msg`` appends the same
records with the same index entries one at a time (``tests/store/test_store_contract.py``
holds the two to each other). Must not know: limits, discard policies, TTLs, flushing (the
caller leaves those to ``store_msg``).
"""

from __future__ import annotations

from .index import StoreIndex
from .record import BLOCK_HEADER_SIZE, RECORD_OVERHEAD, append_record

__all__ = ["append_run"]


def append_run(
    ix: StoreIndex,
    buf: bytearray,
    room: int,
    max_payload: int,
    block_size: int,
    subjects: list[str],
    hdrs: list[bytes],
    payloads: list[bytes],
    start: int,
    ts: int,
) -> int:
    """Append messages ``start ..`` of the lists at ``ts`` to ``ix``'s active block through
    ``buf`` (``room`` bytes left in it) while each needs nothing beyond the append; how many,
    as sequences ``ix.last_seq + 1 ..`` (``last_seq`` before)."""
    names = ix.subjects
    blk = ix.active
    offs, lens, sids = blk.offs, blk.lens, blk.sids
    off = blk.size
    seq = first = ix.last_seq
    nbytes = 0
    for i in range(start, len(subjects)):
        info = names.get(subjects[i])
        if info is None:
            break
        hdr = hdrs[i]
        data = payloads[i]
        hl = len(hdr)
        pl = hl + len(data)
        rec_len = RECORD_OVERHEAD + info.slen + pl  # the bytes it appends (record.py)
        end = off + rec_len
        room -= rec_len
        if pl > max_payload or (end > block_size and off > BLOCK_HEADER_SIZE) or room <= 0:
            break
        seq += 1
        acct = append_record(buf, seq, ts, info.enc, hdr, data, info.slen, hl, rec_len)
        offs.append(off)
        lens.append(acct)
        sids.append(info.sid)
        off = end
        info.count += 1
        info.last = seq
        nbytes += acct
    n = seq - first
    if n:
        blk.size = off
        blk.live += n
        ix.msgs += n
        ix.bytes += nbytes
        ix.last_seq = seq
        ix.last_ts = ts
    return n
