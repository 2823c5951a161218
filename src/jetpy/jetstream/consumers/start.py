"""Where a new consumer starts in its stream: its deliver policy read against the stream as it
is when the consumer is created.

Owns :func:`start_position`: ``all`` at the first message, ``new`` after the last, ``last`` at
the newest message matching a filter, ``by_start_sequence`` / ``by_start_time`` where they say
(never before the first message), ``last_per_subject`` at the newest message of every subject the
filters match (the sequences to send first, in stream order, then on after the last). Where a
durable consumer whose state was lost starts again is ``restore.py``'s. Pure: reads the store
through the ``StreamStore`` interface, knows nothing of delivery or the network.
"""

from __future__ import annotations

from collections import deque

from jetpy.jetstream.models import ConsumerConfig, parse_time
from jetpy.jetstream.seek import seq_at_time
from jetpy.store.base import StreamStore

__all__ = ["start_position"]


def start_position(store: StreamStore, cfg: ConsumerConfig) -> tuple[int, deque[int] | None]:
    """(the stream cursor: the first sequence to look at, the last-per-subject sequences to send
    before it or None)."""
    st = store.state()
    first, last = st.first_seq, st.last_seq
    filters = cfg.filters
    policy = cfg.deliver_policy
    if policy == "new":
        return last + 1, None
    if policy == "last":
        seq = 0
        for f in filters or [""]:
            m = store.load_last_msg(f)
            if m is not None:
                seq = max(seq, m.seq)
        return (seq if seq else last + 1), None
    if policy == "by_start_sequence":
        return max(cfg.opt_start_seq, first, 1), None
    if policy == "by_start_time":
        t = parse_time(cfg.opt_start_time or "")
        return max(seq_at_time(store, t, first, last), 1), None
    if policy == "last_per_subject":
        seqs: list[int] = []
        for f in filters or [">"]:
            for subj in store.subjects_state(f):
                m = store.load_last_msg(subj)
                if m is not None:
                    seqs.append(m.seq)
        seqs.sort()
        return last + 1, deque(seqs)
    return max(first, 1), None  # all
