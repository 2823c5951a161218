"""The info documents of running streams and consumers, as the API and /jsz report them.

Owns: ``StreamInfo`` (config, created, state with the optional subject details, deleted list,
lost data and consumer count) and ``ConsumerInfo`` as of now. Must not know: routing, the
network, how streams and consumers are kept.
"""

from __future__ import annotations

import time
from typing import Any, Final

import msgspec

from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.models import format_time
from jetpy.jetstream.stream import Stream

__all__ = ["SUBJECT_DETAILS_LIMIT", "consumer_info", "stream_info"]

SUBJECT_DETAILS_LIMIT: Final = 100_000
"""STREAM.INFO's page of ``state.subjects`` (nats-server's JSMaxSubjectDetails)."""


def stream_info(
    s: Stream,
    *,
    deleted_details: bool = False,
    subjects_filter: str = "",
    subjects_offset: int = 0,
    paging: dict[str, int] | None = None,
) -> dict[str, Any]:
    """StreamInfo as a dict; with ``subjects_filter``, ``state.subjects`` is paged (sorted by
    subject once paging applies) and ``paging`` receives ``total/offset/limit``."""
    st = s.store.state(deleted_details=deleted_details)
    state: dict[str, Any] = {
        "messages": st.msgs,
        "bytes": st.bytes,
        "first_seq": st.first_seq,
        "first_ts": format_time(st.first_ts),
        "last_seq": st.last_seq,
        "last_ts": format_time(st.last_ts),
    }
    if st.num_subjects:
        state["num_subjects"] = st.num_subjects
    if subjects_filter:
        subjects = s.store.subjects_state(subjects_filter)
        if subjects:
            total = len(subjects)
            offset = min(subjects_offset, total)
            if paging is not None:
                paging.update(total=total, offset=offset, limit=SUBJECT_DETAILS_LIMIT)
            if offset or total > SUBJECT_DETAILS_LIMIT:
                names = sorted(subjects)
                page = names[offset : offset + SUBJECT_DETAILS_LIMIT]
                subjects = {k: subjects[k] for k in page}
            if subjects:
                state["subjects"] = subjects
    if st.num_deleted:
        state["num_deleted"] = st.num_deleted
    if deleted_details and st.deleted:
        state["deleted"] = st.deleted
    if st.lost is not None and st.lost.msgs:
        state["lost"] = {"msgs": st.lost.msgs, "bytes": st.lost.bytes}
    state["consumer_count"] = s.consumer_count
    return {
        "config": msgspec.to_builtins(s.config),
        "created": format_time(s.created_ns),
        "state": state,
    }


def consumer_info(c: Consumer) -> dict[str, Any]:
    """ConsumerInfo as of now, with an exact ``num_pending``."""
    c.stream_changed()  # exact num_pending for reports
    out: dict[str, Any] = msgspec.to_builtins(c.info(format_time(time.time_ns())))
    return out
