"""The sink's publishing: rows to JetStream messages with ``Nats-Msg-Id``, PubAcks awaited.

Owns one task's publishing over a blocking connection (``wire.Wire``): on jetpy through its bulk
publish (``bulk_publish.py``: many rows per request, built from the Arrow columns); elsewhere
(nats-server) one publish per row, as follows. Each row becomes an
HPUB frame (its headers, ``Nats-Msg-Id``, ``Nats-Expected-Stream`` when the ``stream`` option is
set) with its own reply subject, frames go out in batches of ~64 KB, and at most
``maxInFlight`` publishes wait for their PubAck at a time (a large window lets the server's
group commit cover thousands of messages per fsync). Every PubAck is read: a duplicate is
counted (the stream already had that id), an error fails the task naming the row. The task's
commit message is only made once every publish was acknowledged.
Must not know: Spark, the message ids' scheme (the writer passes them in).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from jetpy.spark.bulk_publish import publish_bulk, stream_router
from jetpy.spark.options import SinkOptions
from jetpy.spark.paths import connect
from jetpy.spark.wire import Reply, Wire, WireError
from jetpy.subjects import is_valid_subject

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Published", "publish_rows"]

BULK_PREFIX: Final = "$JS.API"
"""The API prefix jetpy serves its bulk publish under (not a domain's): elsewhere, one publish
per row."""
SEND_BYTES: Final = 64 * 1024
"""Frames are handed to the socket in batches of about this size."""


@dataclass
class Published:
    """What one task published: new messages, duplicates the stream dropped, sequence span."""

    published: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0


def _header_line(key: str, value: Any, row: int) -> bytes:
    k, v = str(key), "" if value is None else str(value)
    if not k or any(c in k for c in ": \r\n") or "\r" in v or "\n" in v:
        raise ValueError(f"row {row}: header {k!r}: keys are tokens and values one line")
    return f"{k}: {v}\r\n".encode()


def _user_headers(value: Any, row: int) -> bytes:
    if not value:
        return b""
    out = []
    for k, v in value:
        if isinstance(v, list):
            if len(v) > 1:
                raise ValueError(f"row {row}: header {k!r} has {len(v)} values; the writer sends one per key")
            v = v[0] if v else ""
        out.append(_header_line(k, v, row))
    return b"".join(out)


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    i = batch.schema.get_field_index(name)
    return None if i < 0 else batch.column(i).to_pylist()


def publish_rows(opts: SinkOptions, batches: Iterator[pa.RecordBatch], id_prefix: str) -> Published:
    """Publish every row of ``batches`` (ids ``<id_prefix>:<row>`` where a row has no
    ``msg_id``) and wait for every PubAck: through bulk publishes on jetpy (under its own API
    prefix), else one publish per row."""
    w = connect(opts.conn, "sink")
    res = Published()
    try:
        router = stream_router(w, opts.stream) if w.is_jetpy and opts.conn.api_prefix == BULK_PREFIX else None
        if router is not None:
            c = publish_bulk(w, opts, batches, id_prefix, _user_headers, router)
            res = Published(c.published, c.duplicates, c.first_seq, c.last_seq)
        else:
            _publish(w, opts, batches, id_prefix, res)
    except WireError as e:
        raise WireError(f"jetstream sink: publishing to {w.url} (option 'servers') failed: {e}") from None
    finally:
        w.close()
    return res


def _publish(
    w: Wire, opts: SinkOptions, batches: Iterator[pa.RecordBatch], prefix: str, res: Published
) -> None:
    inbox = w.inbox.encode()
    expected = b"Nats-Expected-Stream: %s\r\n" % opts.stream.encode() if opts.stream else b""
    fixed = opts.subject.encode() if opts.subject else None
    window = opts.max_in_flight
    w.set_timeout(opts.publish_timeout_ms / 1000)
    checked: set[bytes] = set()
    pid = prefix.encode()
    pending: set[int] = set()  # rows (reply numbers) not acknowledged yet
    row = 0
    out: list[bytes] = []
    size = 0
    for batch in batches:
        n = batch.num_rows
        subjects = _column(batch, "subject") if fixed is None else None
        datas = _column(batch, "data") or [b""] * n
        ids = _column(batch, opts.msg_id_column)
        hdrs = _column(batch, "headers")
        for i in range(n):
            if fixed is not None:
                subject = fixed
            else:
                s = subjects[i] if subjects is not None else None
                subject = s.encode() if isinstance(s, str) else b""
                if subject not in checked:
                    if not is_valid_subject(subject.decode(), allow_wildcards=False):
                        raise ValueError(f"row {row}: invalid subject {s!r}")
                    checked.add(subject)
            data = datas[i]
            if data is None:
                data = b""
            elif isinstance(data, str):
                data = data.encode()
            mid = ids[i] if ids is not None else None
            if mid:
                msg_id = mid.encode()
                if b"\r" in msg_id or b"\n" in msg_id:
                    raise ValueError(f"row {row}: a msg_id is one line")
            else:
                msg_id = b"%s:%d" % (pid, row)
            user = _user_headers(hdrs[i], row) if hdrs is not None else b""
            hdr = b"NATS/1.0\r\n%sNats-Msg-Id: %s\r\n%s\r\n" % (user, msg_id, expected)
            frame = b"HPUB %s %s.%d %d %d\r\n%s%s\r\n" % (
                subject,
                inbox,
                row,
                len(hdr),
                len(hdr) + len(data),
                hdr,
                data,
            )
            out.append(frame)
            size += len(frame)
            pending.add(row)
            row += 1
            if size >= SEND_BYTES:
                w.send(b"".join(out))
                out, size = [], 0
                while len(pending) > window:
                    _ack(w, res, inbox, pending)
    if out:
        w.send(b"".join(out))
    while pending:
        _ack(w, res, inbox, pending)


def _ack(w: Wire, res: Published, inbox: bytes, pending: set[int]) -> None:
    """Read the PubAcks buffered (at least one message)."""
    acks = w.plain_replies(len(pending))
    if not acks:  # something else first: a status (no responders), or a stray message
        subj, _, hlen, view = w.next_frame()
        if not subj.startswith(inbox + b".") or not subj[len(inbox) + 1 :].isdigit():
            return
        row = int(subj[len(inbox) + 1 :])
        if row not in pending:
            return
        if hlen:
            status = Reply(bytes(view[:hlen]), b"").status
            if status == 503:
                raise WireError(
                    f"row {row}: no stream listens on its subject (option 'subject' or the 'subject' column)"
                )
            raise WireError(f"row {row}: unexpected reply {bytes(view[:hlen]).splitlines()[0]!r}")
        acks = [(row, bytes(view))]
    for row, ack in acks:
        if row not in pending:
            continue
        pending.discard(row)
        if b'"error"' in ack:
            err = json.loads(ack).get("error") or {}
            raise WireError(
                f"row {row}: the stream refused it: {err.get('description')} ({err.get('err_code')})"
            )
        k = ack.find(b'"seq":')
        if k < 0:
            raise WireError(f"row {row}: not a PubAck: {ack[:200]!r}")
        k += 6
        e = k
        while e < len(ack) and 48 <= ack[e] <= 57:
            e += 1
        seq = int(ack[k:e])
        if b'"duplicate":true' in ack or b'"duplicate": true' in ack:
            res.duplicates += 1
        else:
            res.published += 1
            if not res.first_seq or seq < res.first_seq:
                res.first_seq = seq
            res.last_seq = max(res.last_seq, seq)
