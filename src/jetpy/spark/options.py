"""The ``jetstream`` data source's options: parsing, defaults and validation, with no Spark import.

Owns every option the source and sink accept (modelled on Spark's Kafka source: names, the
``earliest``/``latest``/JSON offsets, ``-2``/``-1`` in offset JSON), their defaults, and the error
text for a wrong value, which names the option and what it accepts. Option keys are
case-insensitive (Spark lower-cases them); values keep their case.
Must not know: sockets, Spark's classes, the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal
from urllib.parse import urlsplit

from jetpy.subjects import is_valid_subject

__all__ = [
    "COLUMNS",
    "EARLIEST",
    "LATEST",
    "ConnOptions",
    "JetStreamOptionError",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "parse_sink",
    "parse_source",
]

EARLIEST = -2
"""In offset JSON, as in Kafka's: the first message still in the stream."""
LATEST = -1
"""In offset JSON: the sequence after the last message (only new messages)."""

COLUMNS = ("stream", "subject", "seq", "ts", "data", "headers")
"""The columns of a read, in order (``spark/schema.py`` has their types); a schema given to the
reader picks some of them, in any order, and only those are made."""

DEFAULT_SERVERS = "nats://127.0.0.1:4222"
"""Where ``make run`` listens, so examples work with no option."""
DEFAULT_FETCH_BATCH = 10_000
"""Messages per batched direct-get request: large enough that a round trip per batch is noise,
small enough that one reply (~10k x message size) stays far below a connection's 64 MB
slow-consumer limit."""
DEFAULT_FETCH_MAX_BYTES = 8 * 1024 * 1024
"""Bytes per batched direct-get request (the server stops a batch once it is reached)."""
DEFAULT_MAX_PER_PARTITION = 1_000_000
"""Sequences per Spark partition, at most (``maxBytesPerPartition`` usually decides first)."""
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
"""Stored bytes per Spark partition, at most: Spark's own default for files
(``spark.sql.files.maxPartitionBytes``), about a million small messages, a task of about a second
at a core's bulk-read speed, so Spark's cost per task (tens of milliseconds) stays small while a
large stream still spreads over a cluster (1 GB: 8 tasks, or more to fill the cores)."""
READ_MODES = ("auto", "bulk", "direct", "consumer")
"""``readMode``: how a partition is read (``spark/paths.py``); ``auto`` picks the fastest the
server offers for the stream."""
DEFAULT_MAX_IN_FLIGHT = 10_000
"""Un-acked publishes per writing task: a server that syncs before it acks (jetpy) covers the
whole window with each fsync, so the window, not the fsync rate, bounds the throughput
(~2 MB of frames in flight)."""
DEFAULT_TIMEOUT_MS = 30_000

_NAME_RE = re.compile(r"^[^.*>\s]+$")

# Spark itself may hand these to a data source; they are not ours and not typos.
_SPARK_KEYS = frozenset({"path", "paths", "checkpointlocation", "queryname"})


class JetStreamOptionError(ValueError):
    """A wrong option: the message names the option and the values it accepts."""

    def __init__(self, option: str, got: object, accepted: str) -> None:
        self.option = option
        super().__init__(f"jetstream option '{option}': got {got!r}; accepted: {accepted}")


# ----------------------------------------------------------------------------- small parsers


class _Opts:
    """Option lookup by canonical (camelCase) name over Spark's lower-cased keys; records use."""

    def __init__(self, raw: Mapping[str, str]) -> None:
        self.raw = {str(k).lower(): str(v) for k, v in raw.items() if v is not None}
        self.used: set[str] = set()

    def get(self, name: str) -> str | None:
        key = name.lower()
        self.used.add(key)
        v = self.raw.get(key)
        return v if v is None or v.strip() != "" else None

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    def string(self, name: str, default: str = "") -> str:
        v = self.get(name)
        return default if v is None else v.strip()

    def integer(self, name: str, default: int, minimum: int = 1) -> int:
        v = self.get(name)
        if v is None:
            return default
        try:
            n = int(v.strip())
        except ValueError:
            raise JetStreamOptionError(name, v, f"an integer >= {minimum}") from None
        if n < minimum:
            raise JetStreamOptionError(name, v, f"an integer >= {minimum}")
        return n

    def boolean(self, name: str, default: bool) -> bool:
        v = self.get(name)
        if v is None:
            return default
        low = v.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise JetStreamOptionError(name, v, "'true' or 'false'")

    def check_unknown(self, known_for: str) -> None:
        unknown = sorted(k for k in self.raw if k not in self.used and k not in _SPARK_KEYS)
        if unknown:
            k = unknown[0]
            raise JetStreamOptionError(
                k, self.raw[k], f"a {known_for} option; see the README's Spark options table"
            )


# ----------------------------------------------------------------------------- connection


@dataclass(frozen=True, slots=True)
class ConnOptions:
    """How to reach the server: picklable, shipped to every task."""

    servers: tuple[str, ...] = (DEFAULT_SERVERS,)
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool = False
    name: str = "jetpy-spark"
    api_prefix: str = "$JS.API"
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def ssl_context(self) -> object:
        import ssl

        ctx = ssl.create_default_context(cafile=self.tls_ca)
        if self.tls_cert:
            ctx.load_cert_chain(self.tls_cert, self.tls_key)
        if self.tls_insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def _conn(o: _Opts) -> ConnOptions:
    raw = o.string("servers", DEFAULT_SERVERS)
    servers = tuple(s.strip() for s in raw.split(",") if s.strip())
    for s in servers:
        u = urlsplit(s if "://" in s else f"nats://{s}")
        if u.scheme not in ("nats", "tls") or not u.hostname:
            raise JetStreamOptionError("servers", raw, "comma-separated nats://host:port (or tls://) URLs")
        try:
            u.port  # noqa: B018 - validates the port
        except ValueError:
            raise JetStreamOptionError("servers", raw, "comma-separated nats://host:port URLs") from None
    if not servers:
        raise JetStreamOptionError("servers", raw, "comma-separated nats://host:port URLs")
    tls = o.boolean("tls", any(s.startswith("tls://") for s in servers))
    domain = o.string("jsDomain")
    prefix = o.string("jsApiPrefix")
    if domain and prefix:
        raise JetStreamOptionError("jsApiPrefix", prefix, "either jsDomain or jsApiPrefix, not both")
    api = f"$JS.{domain}.API" if domain else (prefix.rstrip(".") if prefix else "$JS.API")
    user, token = o.get("user"), o.get("token")
    if user is not None and token is not None:
        raise JetStreamOptionError("token", "***", "either user/password or token, not both")
    return ConnOptions(
        servers=servers,
        user=user,
        password=o.get("password"),
        token=token,
        tls=tls,
        tls_ca=o.get("tls.ca"),
        tls_cert=o.get("tls.cert"),
        tls_key=o.get("tls.key"),
        tls_insecure=o.boolean("tls.insecure", False),
        name=o.string("name", "jetpy-spark"),
        api_prefix=api,
        timeout_ms=o.integer("timeoutMs", DEFAULT_TIMEOUT_MS),
    )


# ----------------------------------------------------------------------------- source


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends: ``earliest``, ``latest``, per-stream sequences, or a time."""

    kind: Literal["earliest", "latest", "seqs", "time"]
    seqs: Mapping[str, int] = field(default_factory=dict)
    time_ns: int = 0


@dataclass(frozen=True, slots=True)
class SourceOptions:
    conn: ConnOptions
    streams: tuple[str, ...]
    filters: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    max_per_trigger: int | None
    min_partitions: int
    max_per_partition: int
    max_bytes_per_partition: int
    read_mode: str
    fail_on_data_loss: bool
    include_headers: bool
    fetch_batch: int
    fetch_max_bytes: int
    columns: tuple[str, ...] = COLUMNS
    """The columns each row has, in order: all of :data:`COLUMNS` unless a schema names fewer."""


_OFFSETS_ACCEPTED = (
    "'earliest', 'latest' or JSON with a stream sequence per stream, "
    'like {"ORDERS": 1201} (-2 = earliest, -1 = latest)'
)


def _offsets(o: _Opts, name: str, default: str, streams: tuple[str, ...], allow_earliest: bool) -> OffsetSpec:
    raw = o.string(name, default)
    low = raw.lower()
    accepted = _OFFSETS_ACCEPTED if allow_earliest else _OFFSETS_ACCEPTED.replace("'earliest', ", "")
    if low == "earliest" and allow_earliest:
        return OffsetSpec("earliest")
    if low == "latest":
        return OffsetSpec("latest")
    try:
        obj = json.loads(raw)
    except ValueError:
        raise JetStreamOptionError(name, raw, accepted) from None
    if not isinstance(obj, dict) or not obj:
        raise JetStreamOptionError(name, raw, accepted)
    seqs: dict[str, int] = {}
    for k, v in obj.items():
        if k not in streams:
            raise JetStreamOptionError(
                name, raw, f"{accepted}; {k!r} is not one of the streams {list(streams)}"
            )
        if (
            isinstance(v, bool)
            or not isinstance(v, int)
            or v < EARLIEST
            or (v == EARLIEST and not allow_earliest)
        ):
            raise JetStreamOptionError(name, raw, accepted)
        seqs[k] = v
    return OffsetSpec("seqs", seqs)


def parse_time_option(name: str, raw: str) -> int:
    """Milliseconds since the epoch (as Kafka's) or an RFC 3339 time -> nanoseconds."""
    s = raw.strip()
    if re.fullmatch(r"\d+", s):
        return int(s) * 1_000_000
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise JetStreamOptionError(
            name, raw, "milliseconds since the epoch or an RFC 3339 time like 2024-05-01T12:00:00Z"
        ) from None
    if dt.tzinfo is None:
        raise JetStreamOptionError(
            name, raw, "an RFC 3339 time with a zone (Z or +hh:mm), or epoch milliseconds"
        )
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000


def _read_mode(o: _Opts) -> str:
    mode = o.string("readMode", "auto").lower()
    if mode not in READ_MODES:
        raise JetStreamOptionError("readMode", o.string("readMode"), ", ".join(READ_MODES))
    return mode


def parse_source(raw: Mapping[str, str], streaming: bool) -> SourceOptions:
    """The source's options; raises :class:`JetStreamOptionError` naming the first wrong one."""
    o = _Opts(raw)
    conn = _conn(o)
    stream_raw = o.string("stream")
    if not stream_raw:
        raise JetStreamOptionError("stream", None, "a stream name, or several separated by commas")
    streams = tuple(s.strip() for s in stream_raw.split(","))
    if any(not _NAME_RE.match(s) for s in streams) or len(set(streams)) != len(streams):
        raise JetStreamOptionError(
            "stream", stream_raw, "stream names (no '.', '*', '>' or spaces), comma-separated"
        )
    one, many = o.get("filterSubject"), o.get("filterSubjects")
    if one is not None and many is not None:
        raise JetStreamOptionError("filterSubjects", many, "either filterSubject or filterSubjects, not both")
    filters = tuple(f.strip() for f in (many or one or "").split(",") if f.strip())
    for f in filters:
        if not is_valid_subject(f):
            raise JetStreamOptionError(
                "filterSubject" if one else "filterSubjects",
                f,
                "valid NATS subjects (wildcards * and > allowed)",
            )
    if o.has("startingTimestamp"):
        o.get("startingOffsets")
        starting = OffsetSpec(
            "time", time_ns=parse_time_option("startingTimestamp", o.string("startingTimestamp"))
        )
    else:
        starting = _offsets(o, "startingOffsets", "latest" if streaming else "earliest", streams, True)
    if o.has("endingTimestamp"):
        o.get("endingOffsets")
        ending = OffsetSpec("time", time_ns=parse_time_option("endingTimestamp", o.string("endingTimestamp")))
    else:
        ending = _offsets(o, "endingOffsets", "latest", streams, False)
    if not streaming and starting.kind == "latest":
        raise JetStreamOptionError(
            "startingOffsets", "latest", "'earliest' or JSON for a batch read (latest would read nothing)"
        )
    a, b = o.get("maxMessagesPerTrigger"), o.get("maxOffsetsPerTrigger")
    if a is not None and b is not None:
        raise JetStreamOptionError(
            "maxOffsetsPerTrigger", b, "either maxMessagesPerTrigger or its alias maxOffsetsPerTrigger"
        )
    max_trigger = o.integer("maxOffsetsPerTrigger" if b is not None else "maxMessagesPerTrigger", 0)
    opts = SourceOptions(
        conn=conn,
        streams=streams,
        filters=filters,
        starting=starting,
        ending=ending,
        max_per_trigger=max_trigger or None,
        min_partitions=o.integer("minPartitions", 1),
        max_per_partition=o.integer("maxMessagesPerPartition", DEFAULT_MAX_PER_PARTITION),
        max_bytes_per_partition=o.integer(
            "maxBytesPerPartition", DEFAULT_MAX_BYTES_PER_PARTITION, minimum=1024
        ),
        read_mode=_read_mode(o),
        fail_on_data_loss=o.boolean("failOnDataLoss", True),
        include_headers=o.boolean("includeHeaders", False),
        fetch_batch=o.integer("fetchBatch", DEFAULT_FETCH_BATCH),
        fetch_max_bytes=o.integer("fetchMaxBytes", DEFAULT_FETCH_MAX_BYTES, minimum=1024),
    )
    o.check_unknown("source")
    return opts


# ----------------------------------------------------------------------------- sink


@dataclass(frozen=True, slots=True)
class SinkOptions:
    conn: ConnOptions
    subject: str | None
    stream: str | None
    msg_id_column: str
    write_id: str | None
    max_in_flight: int
    publish_timeout_ms: int


def parse_sink(raw: Mapping[str, str]) -> SinkOptions:
    o = _Opts(raw)
    conn = _conn(o)
    subject = o.get("subject")
    if subject is not None and not is_valid_subject(subject, allow_wildcards=False):
        raise JetStreamOptionError("subject", subject, "a literal NATS subject (no wildcards)")
    stream = o.get("stream")
    if stream is not None and not _NAME_RE.match(stream):
        raise JetStreamOptionError("stream", stream, "one stream name (no '.', '*', '>' or spaces)")
    write_id = o.get("writeId")
    if write_id is not None and not re.fullmatch(r"[A-Za-z0-9_.:-]+", write_id):
        raise JetStreamOptionError("writeId", write_id, "letters, digits and _ . : -")
    opts = SinkOptions(
        conn=conn,
        subject=subject,
        stream=stream,
        msg_id_column=o.string("msgIdColumn", "msg_id"),
        write_id=write_id,
        max_in_flight=o.integer("maxInFlight", DEFAULT_MAX_IN_FLIGHT),
        publish_timeout_ms=o.integer("publishTimeoutMs", DEFAULT_TIMEOUT_MS),
    )
    o.check_unknown("sink")
    return opts
