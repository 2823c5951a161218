"""The ack reply subject: built by acks.ack_reply / ack_replies, read back by parse_ack_subject
and ack_sequences, the same spelling both ways."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jetpy.jetstream.consumers.acks import (
    AckReply,
    ack_prefix,
    ack_replies,
    ack_reply,
    ack_sequences,
    parse_ack_subject,
)
from jetpy.store.base import StoredMsg

seqs = st.integers(0, 2**63)


def test_the_spelling() -> None:
    prefix = ack_prefix("ORDERS", "worker")
    assert ack_reply(prefix, 2, 10, 7, 1_700_000_000_000_000_000, 3) == (
        "$JS.ACK.ORDERS.worker.2.10.7.1700000000000000000.3"
    )


@given(dc=st.integers(1, 1000), sseq=seqs, cseq=seqs, ts=seqs, pending=seqs)
def test_one_reply_reads_back(dc: int, sseq: int, cseq: int, ts: int, pending: int) -> None:
    subject = ack_reply(ack_prefix("S", "C"), dc, sseq, cseq, ts, pending)
    assert parse_ack_subject(subject) == AckReply("S", "C", dc, sseq, cseq, ts, pending)
    assert ack_sequences(subject.encode()) == (sseq, cseq)


@given(
    n=st.integers(0, 20), first=st.integers(1, 2**40), cseq=st.integers(1, 2**40), left=st.integers(0, 2**40)
)
def test_a_burst_s_replies_are_each_delivery_s(n: int, first: int, cseq: int, left: int) -> None:
    prefix = ack_prefix("S", "C")
    msgs = [StoredMsg("s", first + 2 * j, 1000 + j, b"", b"") for j in range(n)]
    pending = left + n - 1
    replies = ack_replies(prefix.encode(), msgs, cseq, pending)
    assert replies == [
        ack_reply(prefix, 1, m.seq, cseq + j, m.ts, pending - j).encode() for j, m in enumerate(msgs)
    ]
