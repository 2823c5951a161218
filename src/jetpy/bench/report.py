"""The human-readable report of a benchmark run, in the spirit of ``nats bench``'s output.

Owns wording and number formatting only; the numbers come from ``stats``.
"""

from __future__ import annotations

from jetpy.bench.options import BenchOptions, ConsumerKind, Mode
from jetpy.bench.stats import BenchResult, SideStats

__all__ = ["describe", "format_report"]

MAX_CLIENT_LINES = 20  # per side; beyond this the min/avg/max line says enough

_MODE_TITLES = {
    Mode.PUB: "publish",
    Mode.PUBSUB: "pub/sub",
    Mode.REQUEST: "request/reply",
    Mode.JS_PUB: "JetStream publish",
    Mode.JS_PUBSUB: "JetStream pub/sub",
    Mode.JS_CONSUME: "JetStream consume",
}


def _size(n: int) -> str:
    return f"{n:,} B"


def describe(opts: BenchOptions, server: str) -> str:
    """One line saying what is about to run."""
    parts = [
        f"subject={opts.subject}",
        f"msgs={opts.msgs:,}",
        f"size={_size(opts.size)}",
    ]
    if opts.request:
        parts += [f"requesters={opts.pubs}", f"repliers={opts.repliers}"]
    else:
        parts += [f"pubs={opts.pubs}", f"subs={opts.subs}"]
    if opts.js:
        parts += [f"stream={opts.stream}", f"storage={opts.storage.value}"]
        if opts.subs:
            parts += [f"consumer={opts.consumer.value}", f"ack={opts.ack.value}"]
    return f"Starting {_MODE_TITLES[opts.mode]} benchmark on {server} [{', '.join(parts)}]"


def _side_lines(title: str, side: SideStats) -> list[str]:
    lines = [
        f"{title}: {side.msgs_per_s:,.0f} msgs/s ~ {side.mb_per_s:,.2f} MB/s ({side.msgs:,} msgs in {side.elapsed_s:.3f} s)"
    ]
    for i, c in enumerate(side.clients[:MAX_CLIENT_LINES], start=1):
        lines.append(f" [{i}] {c.msgs_per_s:,.0f} msgs/s ~ {c.mb_per_s:,.2f} MB/s ({c.msgs:,} msgs)")
    if len(side.clients) > MAX_CLIENT_LINES:
        lines.append(f" ... and {len(side.clients) - MAX_CLIENT_LINES} more")
    if len(side.clients) > 1:
        lo, avg, hi, std = side.client_rates()
        lines.append(f" min {lo:,.0f} | avg {avg:,.0f} | max {hi:,.0f} | stddev {std:,.0f} msgs/s")
    return lines


def format_report(result: BenchResult) -> str:
    o = result.options
    lines: list[str] = []
    if result.prefill_msgs_per_s is not None:
        lines.append(f"Prefill (untimed): {result.prefill_msgs_per_s:,.0f} msgs/s")
    pub_title = "Requester stats" if o.request else ("JS pub stats (acked)" if o.js else "Pub stats")
    if result.pub is not None:
        lines += _side_lines(pub_title, result.pub)
    if result.sub is not None:
        sub_title = "Sub stats"
        if o.js:
            sub_title = "Pull consumer stats" if o.consumer is ConsumerKind.PULL else "Push consumer stats"
        lines += _side_lines(sub_title, result.sub)
    if result.pub is not None and result.sub is not None:
        lines.append(
            f"Aggregate: {result.aggregate_msgs_per_s:,.0f} msgs/s ~ {result.aggregate_mb_per_s:,.2f} MB/s "
            f"({result.aggregate_msgs:,} msgs in {result.elapsed_s:.3f} s)"
        )
    if result.latency is not None:
        lat = result.latency
        lines.append(
            f"Latency: p50 {lat.p50_us:,.0f} µs | p90 {lat.p90_us:,.0f} µs | p99 {lat.p99_us:,.0f} µs"
            f" | max {lat.max_us:,.0f} µs ({lat.count:,} round trips)"
        )
    if result.complete:
        lines.append("Complete: every message accounted for")
    else:
        lines.append(f"INCOMPLETE: {result.errors} error(s); not every message was accounted for")
    lines += [f"  - {n}" for n in result.notes]
    return "\n".join(lines)
