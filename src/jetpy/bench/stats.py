"""The numbers a benchmark run produces: per-client samples, per-side aggregates, latency percentiles.

Owns the result model and its one-line JSON form. Pure: no I/O, no clock (the runner measures and
hands in durations). Rates are messages per second; MB is 10^6 bytes of payload, as natsbench.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jetpy.bench.options import BenchOptions

__all__ = ["BenchResult", "ClientSample", "Latency", "SideStats", "percentile"]

MB = 1_000_000


def _rate(msgs: int, seconds: float) -> float:
    return msgs / seconds if seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class ClientSample:
    """What one connection did: messages sent (or received) and how long it took."""

    msgs: int
    elapsed_s: float
    size: int

    @property
    def msgs_per_s(self) -> float:
        return _rate(self.msgs, self.elapsed_s)

    @property
    def mb_per_s(self) -> float:
        return self.msgs_per_s * self.size / MB

    def to_dict(self) -> dict[str, Any]:
        return {
            "msgs": self.msgs,
            "elapsed_s": round(self.elapsed_s, 6),
            "msgs_per_s": round(self.msgs_per_s, 1),
            "mb_per_s": round(self.mb_per_s, 3),
        }


@dataclass(frozen=True, slots=True)
class SideStats:
    """One side (publishers or subscribers): the clients and the side's wall-clock span."""

    clients: tuple[ClientSample, ...]
    elapsed_s: float
    size: int

    @property
    def msgs(self) -> int:
        return sum(c.msgs for c in self.clients)

    @property
    def msgs_per_s(self) -> float:
        return _rate(self.msgs, self.elapsed_s)

    @property
    def mb_per_s(self) -> float:
        return self.msgs_per_s * self.size / MB

    def client_rates(self) -> tuple[float, float, float, float]:
        """(min, avg, max, population stddev) of the per-client msgs/s."""
        rates = [c.msgs_per_s for c in self.clients]
        if not rates:
            return (0.0, 0.0, 0.0, 0.0)
        avg = sum(rates) / len(rates)
        std = math.sqrt(sum((r - avg) ** 2 for r in rates) / len(rates))
        return (min(rates), avg, max(rates), std)

    def to_dict(self) -> dict[str, Any]:
        lo, avg, hi, std = self.client_rates()
        return {
            "msgs": self.msgs,
            "elapsed_s": round(self.elapsed_s, 6),
            "msgs_per_s": round(self.msgs_per_s, 1),
            "mb_per_s": round(self.mb_per_s, 3),
            "client_msgs_per_s": {
                "min": round(lo, 1),
                "avg": round(avg, 1),
                "max": round(hi, 1),
                "stddev": round(std, 1),
            },
            "clients": [c.to_dict() for c in self.clients],
        }


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank-below percentile of already sorted values (natsbench's rule: index q*(n-1))."""
    if not sorted_values:
        return 0
    return sorted_values[int(q * (len(sorted_values) - 1))]


@dataclass(frozen=True, slots=True)
class Latency:
    """Round-trip latency percentiles in microseconds."""

    count: int
    p50_us: float
    p90_us: float
    p99_us: float
    max_us: float

    @classmethod
    def from_ns(cls, samples_ns: Sequence[int]) -> Latency | None:
        if not samples_ns:
            return None
        s = sorted(samples_ns)
        return cls(
            count=len(s),
            p50_us=percentile(s, 0.50) / 1e3,
            p90_us=percentile(s, 0.90) / 1e3,
            p99_us=percentile(s, 0.99) / 1e3,
            max_us=s[-1] / 1e3,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "p50": round(self.p50_us, 1),
            "p90": round(self.p90_us, 1),
            "p99": round(self.p99_us, 1),
            "max": round(self.max_us, 1),
        }


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Everything one run measured. ``complete`` means every message was accounted for."""

    options: BenchOptions
    server: str
    elapsed_s: float
    pub: SideStats | None
    sub: SideStats | None
    latency: Latency | None
    errors: int
    complete: bool
    prefill_msgs_per_s: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def aggregate_msgs(self) -> int:
        """Messages moved through the server: published plus received."""
        return (self.pub.msgs if self.pub else 0) + (self.sub.msgs if self.sub else 0)

    @property
    def aggregate_msgs_per_s(self) -> float:
        return _rate(self.aggregate_msgs, self.elapsed_s)

    @property
    def aggregate_mb_per_s(self) -> float:
        return self.aggregate_msgs_per_s * self.options.size / MB

    def to_dict(self) -> dict[str, Any]:
        o = self.options
        out: dict[str, Any] = {
            "tool": "jetpy-bench",
            "mode": o.mode.value,
            "server": self.server,
            "subject": o.subject,
            "pubs": o.pubs,
            "subs": o.repliers if o.request else o.subs,
            "msgs": o.msgs,
            "size": o.size,
            "elapsed_s": round(self.elapsed_s, 6),
            "pub": self.pub.to_dict() if self.pub else None,
            "sub": self.sub.to_dict() if self.sub else None,
            "aggregate": {
                "msgs": self.aggregate_msgs,
                "msgs_per_s": round(self.aggregate_msgs_per_s, 1),
                "mb_per_s": round(self.aggregate_mb_per_s, 3),
            },
            "latency_us": self.latency.to_dict() if self.latency else None,
            "expected_received": o.expected_received,
            "errors": self.errors,
            "complete": self.complete,
            "notes": list(self.notes),
        }
        if o.js:
            out["js"] = {
                "stream": o.stream,
                "storage": o.storage.value,
                "consumer": o.consumer.value if o.subs else None,
                "ack": o.ack.value if o.subs else None,
                "window": o.window,
                "batch": o.batch if o.subs and o.consumer.value == "pull" else None,
                "prefill_msgs_per_s": (
                    round(self.prefill_msgs_per_s, 1) if self.prefill_msgs_per_s is not None else None
                ),
            }
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))
