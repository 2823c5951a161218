"""The info documents of running streams and consumers, as the API and /jsz report them.

Owns: ``StreamInfo`` (config, created, the ``StreamState`` with the optional subject details,
deleted list, lost data and consumer count, and the mirror or sources blocks the stream's
``origins`` report), the page of ``state.subjects`` STREAM.INFO answers
with, and ``ConsumerInfo`` as of now, all as the typed models. Must not know: routing, the
network, how streams and consumers are kept.
"""

from __future__ import annotations

import time
from typing import Final, NamedTuple

from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.models import ConsumerInfo, LostStreamData, StreamInfo, StreamState, format_time
from jetpy.jetstream.stream import Stream

__all__ = [
    "NO_SUBJECTS",
    "SUBJECT_DETAILS_LIMIT",
    "SubjectsPage",
    "consumer_info",
    "stream_info",
    "stream_state",
    "subjects_page",
]

SUBJECT_DETAILS_LIMIT: Final = 100_000
"""STREAM.INFO's page of ``state.subjects`` (nats-server's JSMaxSubjectDetails)."""


class SubjectsPage(NamedTuple):
    """One page of per-subject counts, and the paging STREAM.INFO reports with it (all 0 when
    no subject matched the filter)."""

    subjects: dict[str, int]
    total: int
    offset: int
    limit: int


NO_SUBJECTS: Final = SubjectsPage({}, 0, 0, 0)


def subjects_page(s: Stream, subjects_filter: str, offset: int) -> SubjectsPage:
    """The per-subject counts matching ``subjects_filter``, sorted by subject and paged once
    paging applies (an offset, or more than a page)."""
    subjects = s.store.subjects_state(subjects_filter)
    if not subjects:
        return NO_SUBJECTS
    total = len(subjects)
    offset = min(offset, total)
    if offset or total > SUBJECT_DETAILS_LIMIT:
        page = sorted(subjects)[offset : offset + SUBJECT_DETAILS_LIMIT]
        subjects = {k: subjects[k] for k in page}
    return SubjectsPage(subjects, total, offset, SUBJECT_DETAILS_LIMIT)


def stream_state(
    s: Stream, *, deleted_details: bool = False, subjects: dict[str, int] | None = None
) -> StreamState:
    """The stream's state now, with ``subjects`` (a page from :func:`subjects_page`) and the
    deleted sequences when asked for."""
    st = s.store.state(deleted_details=deleted_details)
    lost = st.lost
    return StreamState(
        messages=st.msgs,
        bytes=st.bytes,
        first_seq=st.first_seq,
        first_ts=format_time(st.first_ts),
        last_seq=st.last_seq,
        last_ts=format_time(st.last_ts),
        num_subjects=st.num_subjects,
        subjects=subjects or {},
        num_deleted=st.num_deleted,
        deleted=(st.deleted or []) if deleted_details else [],
        lost=LostStreamData(msgs=lost.msgs, bytes=lost.bytes) if lost is not None and lost.msgs else None,
        consumer_count=s.consumer_count - s.direct_count,
    )


def stream_info(
    s: Stream, *, deleted_details: bool = False, subjects: dict[str, int] | None = None
) -> StreamInfo:
    """StreamInfo as of now (see :func:`stream_state`), with its mirror's or sources' blocks."""
    origins = s.origins
    now = time.time_ns()
    return StreamInfo(
        config=s.config,
        created=format_time(s.created_ns),
        state=stream_state(s, deleted_details=deleted_details, subjects=subjects),
        mirror=origins.mirror_info(now) if origins is not None else None,
        sources=origins.sources_info(now) if origins is not None else [],
        domain=s.domain,
    )


def consumer_info(c: Consumer) -> ConsumerInfo:
    """ConsumerInfo as of now, with an exact ``num_pending``."""
    c.stream_changed()  # exact num_pending for reports
    return c.info(time.time_ns())
