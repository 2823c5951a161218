"""What one `jetpy bench` run is asked to do: validated, immutable options and their derived mode.

Owns the option model (``BenchOptions``), the mode a combination of flags selects, the connection
settings seam (``ConnectSettings``, a Protocol the CLI's global options satisfy, so this package
never imports the CLI) and small pure helpers (size parsing, splitting counts across clients).
Knows nothing of sockets, asyncio or output formatting.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_MSGS",
    "DEFAULT_SIZE",
    "DEFAULT_STREAM",
    "DEFAULT_TIMEOUT",
    "DEFAULT_WINDOW",
    "AckKind",
    "BenchOptions",
    "ConnectSettings",
    "ConsumerKind",
    "Mode",
    "OptionsError",
    "StorageKind",
    "parse_size",
    "split",
]

DEFAULT_MSGS = 100_000
DEFAULT_SIZE = 128  # bytes; nats bench's default, and what the published baselines use
DEFAULT_STREAM = "benchstream"  # created by the JetStream modes and deleted after them
DEFAULT_TIMEOUT = 60.0  # seconds: hard bound on the measured phase, so a broken server cannot hang us
DEFAULT_WINDOW = 4000  # un-acked JetStream publishes in flight per publisher (natsbench's default)
DEFAULT_BATCH = 500  # messages per pull-consumer fetch (natsbench's default)
MAX_CLIENTS = 1000  # each client is its own connection; beyond this the run measures the client machine


class OptionsError(ValueError):
    """A combination of options that does not describe a benchmark."""


class Mode(enum.StrEnum):
    """The benchmark a combination of flags selects; the value is the JSON spelling."""

    PUB = "pub"  # core publish only (--sub 0)
    PUBSUB = "pubsub"  # core publish, every subscriber receives every message
    REQUEST = "request"  # request/reply latency (--request)
    JS_PUB = "js-pub"  # JetStream publish, every publish acknowledged by the stream
    JS_PUBSUB = "js-pubsub"  # JetStream publish while consumers read concurrently
    JS_CONSUME = "js-consume"  # consume a stream prefilled before the clock starts (--js --pub 0)


class StorageKind(enum.StrEnum):
    FILE = "file"
    MEMORY = "memory"


class ConsumerKind(enum.StrEnum):
    PUSH = "push"  # each subscriber has its own push consumer and receives every message
    PULL = "pull"  # subscribers share one durable pull consumer; every message is delivered once


class AckKind(enum.StrEnum):
    EXPLICIT = "explicit"
    NONE = "none"


class ConnectSettings(Protocol):
    """How to reach the server; the CLI's global options satisfy this structurally."""

    @property
    def server(self) -> str:
        """One URL or several, comma separated (as ``NATS_URL``)."""
        ...

    @property
    def user(self) -> str | None: ...

    @property
    def password(self) -> str | None: ...

    @property
    def creds(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """One benchmark run; construction validates (raises :class:`OptionsError`)."""

    subject: str
    pubs: int = 1
    subs: int = 0
    msgs: int = DEFAULT_MSGS
    size: int = DEFAULT_SIZE
    request: bool = False
    js: bool = False
    storage: StorageKind = StorageKind.FILE
    stream: str = DEFAULT_STREAM
    consumer: ConsumerKind = ConsumerKind.PUSH
    ack: AckKind = AckKind.EXPLICIT
    batch: int = DEFAULT_BATCH
    window: int = DEFAULT_WINDOW
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not self.subject or any(c in self.subject for c in " \t\r\n"):
            raise OptionsError(f"invalid subject {self.subject!r}")
        if self.msgs < 1:
            raise OptionsError("--msgs must be at least 1")
        if self.size < 0:
            raise OptionsError("--size must not be negative")
        if not 0 <= self.pubs <= MAX_CLIENTS or not 0 <= self.subs <= MAX_CLIENTS:
            raise OptionsError(f"--pub and --sub must be between 0 and {MAX_CLIENTS}")
        if self.batch < 1 or self.window < 1:
            raise OptionsError("--batch and --window must be at least 1")
        if self.timeout <= 0:
            raise OptionsError("--timeout must be positive")
        if self.request and self.js:
            raise OptionsError("--request and --js are different benchmarks; pick one")
        if self.request and self.pubs < 1:
            raise OptionsError("--request needs at least one requester (--pub)")
        if not self.js and not self.request and self.pubs < 1:
            raise OptionsError("core benchmarks need at least one publisher (--pub)")
        if self.js and self.pubs < 1 and self.subs < 1:
            raise OptionsError("--js needs publishers (--pub), consumers (--sub) or both")
        if self.js and self.pubs > 0 and self.msgs < self.pubs:
            raise OptionsError("--msgs must be at least the number of publishers")

    @property
    def mode(self) -> Mode:
        if self.request:
            return Mode.REQUEST
        if self.js:
            if self.pubs == 0:
                return Mode.JS_CONSUME
            return Mode.JS_PUBSUB if self.subs > 0 else Mode.JS_PUB
        return Mode.PUBSUB if self.subs > 0 else Mode.PUB

    @property
    def repliers(self) -> int:
        """Request mode: --sub repliers in one queue group (at least one)."""
        return max(1, self.subs)

    @property
    def expected_per_subscriber(self) -> int:
        """Messages each subscriber must receive for the run to be complete."""
        if self.js and self.consumer is ConsumerKind.PULL:
            return 0  # pull workers share the stream: only their sum is fixed
        return self.msgs

    @property
    def expected_received(self) -> int:
        """Messages all subscribers together must receive (0 when there are none)."""
        if self.request or self.subs == 0:
            return 0
        if self.js and self.consumer is ConsumerKind.PULL:
            return self.msgs
        return self.msgs * self.subs


_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kKmM]?)(i?)[bB]?\s*$")


def parse_size(text: str) -> int:
    """``128``, ``1K``, ``1KB``, ``1KiB``, ``2MB`` -> bytes (K and M are powers of 1024, as nats bench)."""
    m = _SIZE_RE.match(text)
    if m is None:
        raise OptionsError(f"invalid size {text!r} (examples: 128, 1KB, 1MB)")
    number, unit = int(m.group(1)), m.group(2).upper()
    return number * {"": 1, "K": 1024, "M": 1024 * 1024}[unit]


def split(total: int, parts: int) -> list[int]:
    """Divide ``total`` into ``parts`` near-equal counts, the first ones larger (as nats bench)."""
    if parts <= 0:
        return []
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]
