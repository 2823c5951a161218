"""Reading one partition: the read path the server offers, reading through it, and the errors.

Owns the three read paths and the choice between them (``readMode``; ``auto`` takes the fastest
the server offers for the stream, and says once per stream and process which one it took):

* ``bulk``: jetpy's bulk read (``jetpy.protocol.bulk``), any stream: the server hands out its
  stored records in ~1 MiB messages and the task decodes them in bulk (``spark/bulk.py``);
* ``direct``: batched direct gets (nats-server 2.11+ and jetpy, ADR-31), streams with
  ``allow_direct`` (``Wire.read_range``);
* ``consumer``: an ephemeral pull consumer, any stream on any nats-server 2.9+
  (``spark/consumer.py``).

Also owns what a read may meet, each as one error naming the stream and the option to look at
(:class:`JetStreamReadError`): a server that cannot be reached or refuses the credentials, a
stream that does not exist or is deleted while being read, a connection lost mid-read (a
server restart), damaged data; and data loss (:class:`JetStreamDataLossError`,
``failOnDataLoss``): messages of the range removed before they were read. A task that fails
returns nothing; Spark runs it again (where it retries) over the same range.
Must not know: Spark's reader classes, option parsing.
"""

from __future__ import annotations

import atexit
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from jetpy.spark.options import COLUMNS, ConnOptions
from jetpy.spark.schema import arrow_schema, to_record_batch
from jetpy.spark.wire import ApiReplyError, Wire, WireError
from jetpy.subjects import subject_matches

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "PATHS",
    "JetStreamDataLossError",
    "JetStreamReadError",
    "SeqRange",
    "StreamHead",
    "choose_path",
    "connect",
    "data_loss",
    "read_partition",
    "stream_head",
]

log = logging.getLogger("jetpy.spark")

PATHS: Final = ("bulk", "direct", "consumer")
_BATCHED_DIRECT: Final = (2, 11, 0)
"""The first nats-server with batched direct gets (ADR-31)."""
_STREAM_NOT_FOUND: Final = 10059


class JetStreamReadError(RuntimeError):
    """A read failed; the message names the stream and the option to look at."""


class JetStreamDataLossError(JetStreamReadError):
    """Messages the query should have read were removed from the stream (retention, purge)."""


@dataclass(frozen=True, slots=True)
class StreamHead:
    """What planning needs of a stream's STREAM.INFO."""

    first: int
    last: int
    msgs: int
    bytes: int
    allow_direct: bool


@dataclass(frozen=True, slots=True)
class SeqRange:
    """One partition: sequences ``first..last`` (inclusive) of ``stream``, read through
    ``path``. Picklable: it is all a task gets."""

    stream: str
    first: int
    last: int
    filters: tuple[str, ...]
    conn: ConnOptions
    include_headers: bool
    fetch_batch: int
    fetch_max_bytes: int
    fail_on_data_loss: bool
    path: str = "bulk"
    window: int = 0
    """Sequences per bulk-read request, so that two can be in flight (0: one request at a time)."""
    columns: tuple[str, ...] = COLUMNS
    """The columns of the rows, in order; only these are made."""


# ----------------------------------------------------------------------------- the server


def _servers(conn: ConnOptions) -> str:
    return ", ".join(conn.servers)


def connect(conn: ConnOptions, what: str = "source") -> Wire:
    """A connection; failing, one error naming the option to look at."""
    try:
        return Wire(conn)
    except WireError as e:
        text = str(e)
        if "uthoriz" in text or "uthentic" in text:
            raise JetStreamReadError(
                f"jetstream {what}: the server refused the credentials (options 'user'/'password' or "
                f"'token', or user:password@ in 'servers'): {text}"
            ) from None
        raise JetStreamReadError(
            f"jetstream {what}: cannot reach a NATS server at {_servers(conn)} (option 'servers'): {text}"
        ) from None


def stream_head(w: Wire, stream: str) -> StreamHead:
    """The stream's STREAM.INFO; a refusal names the stream (a lost connection is a WireError)."""
    try:
        info = w.stream_info(stream)
    except ApiReplyError as e:
        if e.err_code == _STREAM_NOT_FOUND:
            raise JetStreamReadError(
                f"jetstream source: stream {stream!r} (option 'stream') does not exist on {w.url}"
            ) from None
        raise JetStreamReadError(f"jetstream source: stream {stream!r} (option 'stream'): {e}") from None
    st = info.get("state", {})
    return StreamHead(
        int(st.get("first_seq", 0)),
        int(st.get("last_seq", 0)),
        int(st.get("messages", 0)),
        int(st.get("bytes", 0)),
        bool(info.get("config", {}).get("allow_direct", False)),
    )


_told: set[tuple[str, str, str]] = set()


def choose_path(w: Wire, stream: str, head: StreamHead, mode: str) -> str:
    """The read path for ``stream`` on this server: ``mode`` if the server offers it (else an
    error naming ``readMode``), or with ``auto`` the fastest it offers, logged once."""
    version = ".".join(map(str, w.server_version))
    batched = w.is_jetpy or w.server_version >= _BATCHED_DIRECT
    if mode == "bulk" and not w.is_jetpy:
        raise JetStreamReadError(
            f"jetstream source: readMode 'bulk' needs a jetpy server; {w.url} is nats-server {version} "
            "(use readMode 'auto')"
        )
    if mode == "direct" and not (batched and head.allow_direct):
        why = "does not allow direct get" if batched else f"is on nats-server {version}, before 2.11"
        raise JetStreamReadError(
            f"jetstream source: readMode 'direct' reads with batched direct gets, but stream {stream!r} "
            f"{why} (use readMode 'auto', or set allow_direct, e.g. `nats stream edit {stream} --allow-direct`)"
        )
    if mode != "auto":
        return mode
    if w.is_jetpy:
        path, how = "bulk", "jetpy's bulk read"
    elif batched and head.allow_direct:
        path, how = "direct", "batched direct gets"
    else:
        path = "consumer"
        why = (
            "the stream does not allow direct get" if batched else f"nats-server {version} has no batched get"
        )
        how = (
            f"a pull consumer, the slowest path ({why}; nats-server 2.11+ with allow_direct, or jetpy, "
            "read faster)"
        )
    key = (w.url, stream, path)
    if key not in _told:
        _told.add(key)
        (log.warning if path == "consumer" else log.info)(
            "jetstream source: reading stream %r from %s with %s", stream, w.url, how
        )
    return path


def data_loss(fail: bool, what: str) -> None:
    if fail:
        raise JetStreamDataLossError(
            f"jetstream source: {what}. Set failOnDataLoss=false to skip them (they are gone from the "
            "stream), or size the stream's retention (max_age, max_msgs, max_bytes) to the query's lag."
        )
    log.warning("jetstream source: %s; skipped (failOnDataLoss=false)", what)


# ----------------------------------------------------------------------------- reading


def _keep(filters: tuple[str, ...]) -> Callable[[bytes], bool] | None:
    """The client-side subject check for several filters (one goes to the server)."""
    if len(filters) < 2:
        return None
    return lambda subject: any(subject_matches(f, subject.decode()) for f in filters)


_idle: dict[ConnOptions, list[Wire]] = {}
IDLE_PER_SERVER: Final = 2
"""Connections kept open between tasks in a Python worker (Spark reuses workers): a task then
starts with one PING instead of a connect."""


@atexit.register
def _close_idle() -> None:
    for idle in _idle.values():
        for w in idle:
            w.close()
    _idle.clear()


def _acquire(conn: ConnOptions) -> Wire:
    idle = _idle.get(conn)
    while idle:
        w = idle.pop()
        if w.ping():
            return w
        w.close()
    return connect(conn)


def _release(w: Wire) -> None:
    """A connection whose read ended cleanly (nothing more is coming on it) waits for the next."""
    idle = _idle.setdefault(w.conn, [])
    if len(idle) < IDLE_PER_SERVER:
        idle.append(w)
    else:
        w.close()


def read_partition(r: SeqRange) -> Iterator[pa.RecordBatch]:
    """Every message of one partition as Arrow record batches (runs on executors). Errors are
    :class:`JetStreamReadError` naming the stream and the option."""
    # the decoders are imported by the tasks that read, not at import: Spark starts a new
    # Python process for each streaming query's planner, which needs none of them
    from jetpy.protocol.bulk import BulkFormatError

    w = _acquire(r.conn)
    clean = False
    try:
        yield from _read(w, r)
        clean = r.path == "bulk"  # the other paths may leave replies (a pull) in flight
    except ApiReplyError as e:
        if e.err_code == _STREAM_NOT_FOUND:
            raise _deleted(r) from None
        raise JetStreamReadError(f"jetstream source: reading stream {r.stream!r}: {e}") from None
    except BulkFormatError as e:
        raise JetStreamReadError(f"jetstream source: {e}") from None
    except WireError as e:
        raise _explain(w, r, e) from None
    finally:
        if clean:
            _release(w)
        else:
            w.close()


def _deleted(r: SeqRange) -> JetStreamReadError:
    return JetStreamReadError(
        f"jetstream source: stream {r.stream!r} (option 'stream') was deleted while sequences "
        f"{r.first}..{r.last} were being read"
    )


def _explain(w: Wire, r: SeqRange, e: WireError) -> JetStreamReadError:
    text = str(e)
    what = f"stream {r.stream!r} sequences {r.first}..{r.last}"
    if "connection" in text or "no reply" in text:
        return JetStreamReadError(
            f"jetstream source: lost the server at {w.url} (option 'servers') while reading {what}: "
            f"{text} (restarted?); this attempt returns nothing, Spark runs it again where it retries"
        )
    try:  # still connected: is the stream gone?
        stream_head(w, r.stream)
    except JetStreamReadError:
        return _deleted(r)
    except WireError:
        pass
    return JetStreamReadError(f"jetstream source: reading {what} from {w.url} failed: {text}")


def _read(w: Wire, r: SeqRange) -> Iterator[pa.RecordBatch]:
    first_seen = 0
    last_seen = r.first - 1
    head: tuple[int, int] | None = None  # the stream's (first, last) seen by the read
    schema = arrow_schema(r.columns)
    headers = r.include_headers and "headers" in r.columns
    if r.path == "bulk":
        from jetpy.spark.bulk import read_bulk, to_batch

        keep = None
        if r.filters:
            filters = r.filters
            keep = lambda s: any(subject_matches(f, s) for f in filters)  # noqa: E731
        afters: dict[int, int] = {}  # a window's first sequence -> the last one read in it
        for chunk in read_bulk(w, r.stream, r.first, r.last, r.filters, r.fetch_max_bytes, r.window):
            h = chunk.header
            head = (h.first_seq, h.last_seq)
            if not h.count:
                continue
            after = afters.get(chunk.lo, chunk.lo - 1)
            batch, lo, hi = to_batch(chunk, r.stream, chunk.lo, chunk.hi, after, schema, headers, keep)
            afters[chunk.lo] = hi
            first_seen = min(first_seen, lo) if first_seen else lo
            last_seen = max(last_seen, hi)
            yield batch
    else:
        keep_bytes = _keep(r.filters)
        if r.path == "direct":
            flt = r.filters[0] if len(r.filters) == 1 else None
            cols = w.read_range(
                r.stream,
                r.first,
                r.last,
                flt,
                keep_bytes,
                r.fetch_batch,
                r.fetch_max_bytes,
                headers,
            )
        else:
            from jetpy.spark.consumer import read_consumer

            cols = read_consumer(w, r.stream, r.first, r.last, r.filters, keep_bytes, r.fetch_batch, headers)
        for c in cols:
            first_seen = first_seen or c.seqs[0]
            last_seen = c.seqs[-1]
            yield to_record_batch(c, r.stream, schema)
    if head is None or first_seen != r.first:
        st = stream_head(w, r.stream)
        head = (st.first, st.last)
    gone_to = min(head[0], first_seen or r.last + 1, r.last + 1)
    if gone_to > r.first:  # the head of the range was removed before it was read
        data_loss(
            r.fail_on_data_loss,
            f"stream {r.stream!r}: sequences {r.first}..{gone_to - 1} were removed before they were read",
        )
    if head[1] < r.last and last_seen < r.last:
        data_loss(
            r.fail_on_data_loss,
            f"stream {r.stream!r}: sequences {max(head[1], last_seen) + 1}..{r.last} were in the stream "
            "when the read was planned and are gone (was the stream deleted and made again?)",
        )
