"""Finding a position in a stream by time: the binary search that consumers (``by_start_time``)
and direct gets (``start_time``, ``up_to_time``) share.

Owns the search only: what to do with the position it finds (start a consumer there, step to
the next stored message) is the caller's. Knows the store only through ``StreamStore``; knows
nothing of consumers, the API or the network.
"""

from __future__ import annotations

from jetpy.store.base import StreamStore

__all__ = ["seq_at_time"]


def seq_at_time(store: StreamStore, ts_ns: int, first: int, last: int) -> int:
    """The lowest sequence ``s`` in ``first .. last + 1`` such that the first message stored at or
    after ``s`` is at or after ``ts_ns`` (``last + 1`` if no message is).

    Binary search over ``s``: that condition only turns from false to true as ``s`` grows,
    because timestamps never go backwards. ``s`` itself may be a deleted sequence (the search
    skips over gaps by jumping past the message it read); callers that need a stored message
    read the next one from there."""
    lo, hi = first, last + 1
    while lo < hi:
        mid = (lo + hi) // 2
        m = store.load_next_msg("", mid)
        if m is None or m.ts >= ts_ns:
            hi = mid
        else:
            lo = m.seq + 1
    return lo
