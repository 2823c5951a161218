"""The connector's path for servers without a batched get: an ephemeral pull consumer.

Owns reading a range of a stream through a consumer nats-server 2.9+ (and jetpy) accept: an
ephemeral consumer with ``ack_policy: none`` starting at the range's first sequence (the
server's filter when there is one subject filter, or several on 2.10+), pulled with two
requests of ``fetchBatch`` messages in flight; each delivery's stream sequence, timestamp and
pending count come from its ``$JS.ACK`` reply subject. The read ends at the range's last
sequence, or when the server says nothing more is pending; the consumer is deleted then (and
expires by itself after ``INACTIVE_THRESHOLD_NS`` if the task dies first).
Must not know: Spark, Arrow, the server's internals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from jetpy.spark.wire import BatchColumns, Reply, Wire, WireError, user_headers

__all__ = ["INACTIVE_THRESHOLD_NS", "read_consumer"]

INACTIVE_THRESHOLD_NS: Final = 60 * 1_000_000_000
"""An abandoned consumer (its task died) is removed by the server after this long."""
PULL_EXPIRES_NS: Final = 10 * 1_000_000_000
"""How long one pull request waits for messages (the read normally ends before, by sequence)."""
HEARTBEAT_NS: Final = 1_000_000_000
"""The idle heartbeat asked of each pull: silence for ``SILENCE`` heartbeats means the pull is
gone (its consumer or stream deleted), which is then checked and named."""
SILENCE: Final = 3
PIPELINE_DEPTH: Final = 2


def _ack_fields(reply: bytes) -> tuple[int, int, int] | None:
    """``(stream sequence, timestamp ns, pending)`` from a ``$JS.ACK`` subject (both forms)."""
    toks = reply.split(b".")
    if len(toks) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(toks[5]), int(toks[7]), int(toks[8])
    if len(toks) >= 11:  # $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>...
        return int(toks[7]), int(toks[9]), int(toks[10])
    return None


def read_consumer(
    w: Wire,
    stream: str,
    first: int,
    last: int,
    filters: tuple[str, ...],
    keep: Callable[[bytes], bool] | None,
    batch: int,
    with_headers: bool,
) -> Iterator[BatchColumns]:
    """Every message of ``stream`` with ``first <= seq <= last`` matching ``filters`` (on the
    server when it can, else through ``keep``), one :class:`BatchColumns` per pull request."""
    cfg: dict[str, Any] = {
        "deliver_policy": "by_start_sequence",
        "opt_start_seq": first,
        "ack_policy": "none",
        "replay_policy": "instant",
        "inactive_threshold": INACTIVE_THRESHOLD_NS,
        "mem_storage": True,
        "num_replicas": 1,
    }
    if len(filters) == 1:
        cfg["filter_subject"] = filters[0]
    elif filters and w.server_version >= (2, 10, 0):
        cfg["filter_subjects"] = list(filters)
    else:
        keep = keep if filters else None
    info = w.api(f"CONSUMER.CREATE.{stream}", {"stream_name": stream, "config": cfg})
    name = str(info.get("name", ""))
    if not name:
        raise WireError(f"consumer create on {stream!r} answered without a consumer name")
    try:
        if int(info.get("num_pending", 0)) == 0:
            return
        yield from _pull(w, stream, name, last, keep, batch, with_headers)
    finally:
        try:
            w.api(f"CONSUMER.DELETE.{stream}.{name}")
        except (WireError, OSError):
            pass  # gone with its stream, or the connection is: it expires by itself


def _check_alive(w: Wire, stream: str, name: str) -> None:
    """After a silence: raise naming the stream or the consumer if either is gone."""
    w.stream_info(stream)  # raises 10059 when the stream is gone
    try:
        w.api(f"CONSUMER.INFO.{stream}.{name}")
    except WireError as e:
        raise WireError(f"the read's consumer {name!r} on stream {stream!r} is gone: {e}") from None


def _pull(
    w: Wire,
    stream: str,
    name: str,
    last: int,
    keep: Callable[[bytes], bool] | None,
    batch: int,
    with_headers: bool,
) -> Iterator[BatchColumns]:
    subject = f"{w.conn.api_prefix}.CONSUMER.MSG.NEXT.{stream}.{name}"
    body = b'{"batch": %d, "expires": %d, "idle_heartbeat": %d}' % (batch, PULL_EXPIRES_NS, HEARTBEAT_NS)
    pending: list[bytes] = [w.send_request(subject, body) for _ in range(PIPELINE_DEPTH)]
    out = BatchColumns(headers=[] if with_headers else None)
    got = 0  # messages delivered for the oldest pull request
    while True:
        w.set_timeout(SILENCE * HEARTBEAT_NS / 1e9)
        try:
            subj, reply, hlen, view = w.next_frame()
        except WireError as e:
            if "no reply" not in str(e):
                raise
            _check_alive(w, stream, name)  # silence: say what is gone, or wait on
            continue
        finally:
            w.set_timeout(None)
        if not reply.startswith(b"$JS.ACK."):
            if subj not in pending:
                continue  # a late reply to something else
            r = Reply(bytes(view[:hlen]), b"")
            code = r.status
            if code in (404, 408):  # that request is over: ask again
                if subj == pending[0]:
                    got = 0
                pending.remove(subj)
                pending.append(w.send_request(subject, body))
                continue
            if code == 100:
                continue  # a heartbeat
            raise WireError(
                f"pull from consumer {name!r} of stream {stream!r} failed: "
                f"{bytes(view[:hlen]).splitlines()[0].decode(errors='replace')}"
            )
        fields = _ack_fields(reply)
        if fields is None:
            raise WireError(f"unexpected delivery reply subject {reply[:80]!r}")
        seq, ts, left = fields
        if seq > last:
            break
        if keep is None or keep(subj):
            out.seqs.append(seq)
            out.subjects.append(subj)
            out.ts_us.append(ts // 1000)
            out.data.append(bytes(view[hlen:]))
            if out.headers is not None:
                out.headers.append(user_headers(bytes(view[:hlen])) if hlen else None)
        got += 1
        if seq == last or left == 0:
            break
        if got >= batch:  # the oldest request is served: keep two in flight
            got = 0
            pending.pop(0)
            pending.append(w.send_request(subject, body))
            if len(out):
                yield out
                out = BatchColumns(headers=[] if with_headers else None)
    if len(out):
        yield out
