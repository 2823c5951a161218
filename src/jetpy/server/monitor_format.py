"""Monitoring formats: nats-server's spellings of times, durations, numbers, JSON and query values.

Owns the small conversions that make jetpy's monitoring answers read like nats-server's: Go's
RFC 3339 timestamps, ``time.Duration`` strings (``"633µs"``), the monitor's own uptime format
(``"1d2h3m4s"``), Go's ``strconv`` query parsing with its error texts, and the process usage
figures (RSS, CPU percent) that /varz reports. Knows nothing of HTTP or of the server.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from jetpy.gotime import NS_PER_SECOND, go_duration

__all__ = [
    "ProcessUsage",
    "Query",
    "QueryError",
    "encode_json",
    "go_duration",
    "go_number",
    "go_time",
    "ns",
    "uptime",
]

# Go's encoding/json escapes these inside strings (HTML safety); nothing else in a document can
# contain them, so a plain replace over the encoded text gives byte-compatible output.
_GO_HTML_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)
CPU_WINDOW = 1.0  # seconds: nats-server samples process CPU once a second
MIN_CPU_WINDOW = 0.05  # a shorter window than this measures scheduler noise, not load


class QueryError(Exception):
    """A query parameter that does not parse; the text is nats-server's and goes in a 400."""


def ns(seconds: float) -> int:
    """A duration in seconds as Go's ``time.Duration`` (integer nanoseconds), as /varz prints it."""
    return round(seconds * NS_PER_SECOND)


def go_number(x: float) -> int | float:
    """Go prints a float64 without a fraction as an integer (``2``, not ``2.0``)."""
    return int(x) if x == int(x) else x


def go_time(ts: float) -> str:
    """An epoch timestamp as Go's RFC 3339 with nanoseconds in UTC, trailing zeros trimmed."""
    secs = int(ts // 1)
    micros = round((ts - secs) * 1_000_000)
    if micros >= 1_000_000:
        secs += 1
        micros -= 1_000_000
    base = datetime.datetime.fromtimestamp(secs, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if micros:
        return f"{base}.{micros:06d}".rstrip("0") + "Z"
    return base + "Z"


def uptime(seconds: float) -> str:
    """nats-server's ``myUptime``: whole seconds as ``[Ny][Nd][Nh][Nm]Ns``."""
    tsecs = max(0, int(seconds))
    tmins, tsecs_r = divmod(tsecs, 60)
    thrs, tmins_r = divmod(tmins, 60)
    tdays, thrs_r = divmod(thrs, 24)
    tyrs, tdays_r = divmod(tdays, 365)
    if tyrs:
        return f"{tyrs}y{tdays_r}d{thrs_r}h{tmins_r}m{tsecs_r}s"
    if tdays:
        return f"{tdays}d{thrs_r}h{tmins_r}m{tsecs_r}s"
    if thrs:
        return f"{thrs}h{tmins_r}m{tsecs_r}s"
    if tmins:
        return f"{tmins}m{tsecs_r}s"
    return f"{tsecs}s"


def encode_json(doc: Any, indent: bool = True, width: int = 2) -> bytes:
    """JSON as nats-server writes it: two-space indent (``width``: /raftz's three), or compact,
    UTF-8, HTML-escaped."""
    text = json.dumps(
        doc, indent=width if indent else None, separators=None if indent else (",", ":"), ensure_ascii=False
    )
    for raw, esc in _GO_HTML_ESCAPES:
        if raw in text:
            text = text.replace(raw, esc)
    return text.encode()


# -- query parameters (Go's net/url + strconv) -------------------------------------------------

_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1


class Query:
    """The first value of each query parameter, decoded the way nats-server's handlers do."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = values

    def get(self, name: str) -> str:
        return self.values.get(name, "")

    def boolean(self, name: str) -> bool:
        s = self.get(name)
        if s == "":
            return False
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise QueryError(
            f"Error decoding boolean for '{name}': strconv.ParseBool: parsing {_quote(s)}: invalid syntax"
        )

    def integer(self, name: str) -> int:
        s = self.get(name)
        if s == "":
            return 0
        body = s[1:] if s[:1] in "+-" else s
        if not body or not body.isascii() or not body.isdigit():
            raise QueryError(
                f"Error decoding int for '{name}': strconv.Atoi: parsing {_quote(s)}: invalid syntax"
            )
        v = int(s)
        if not -_INT64_MAX - 1 <= v <= _INT64_MAX:
            raise QueryError(
                f"Error decoding int for '{name}': strconv.Atoi: parsing {_quote(s)}: value out of range"
            )
        return v

    def unsigned(self, name: str) -> int:
        s = self.get(name)
        if s == "":
            return 0
        if not s.isascii() or not s.isdigit():
            raise QueryError(
                f"Error decoding uint64 for '{name}': strconv.ParseUint: parsing {_quote(s)}: invalid syntax"
            )
        v = int(s)
        if v > _UINT64_MAX:
            raise QueryError(
                f"Error decoding uint64 for '{name}': strconv.ParseUint: parsing {_quote(s)}: value out of range"
            )
        return v


def _quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


# -- process usage ------------------------------------------------------------------------------


class ProcessUsage:
    """Resident memory and CPU percent of this process, measured as nats-server's ``pse`` does.

    CPU is the process's user+system time over wall time in the last window of about a second,
    as a percentage of one core (so a busy multi-threaded process can exceed 100), rounded to a
    tenth as nats-server reports it.
    """

    def __init__(self) -> None:
        self._wall = time.monotonic()
        self._cpu = _cpu_seconds()
        self._pct = 0.0
        self._full_window = False  # has a whole CPU_WINDOW been measured yet?

    def cpu_percent(self) -> float:
        wall = time.monotonic()
        cpu = _cpu_seconds()
        window = wall - self._wall
        if window >= CPU_WINDOW:
            self._pct = _percent(cpu - self._cpu, window)
            self._wall, self._cpu, self._full_window = wall, cpu, True
        elif not self._full_window and window >= MIN_CPU_WINDOW:
            # until the first whole window, report the average since the monitor started
            self._pct = _percent(cpu - self._cpu, window)
        return self._pct

    @staticmethod
    def rss() -> int:
        """Resident set size in bytes (Linux /proc; elsewhere the peak from getrusage)."""
        try:
            with open("/proc/self/statm", "rb") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
        try:
            import resource
            import sys

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return int(peak) if sys.platform == "darwin" else int(peak) * 1024
        except (ImportError, OSError):
            return 0

    @staticmethod
    def cores() -> int:
        return os.cpu_count() or 1

    @staticmethod
    def usable_cores() -> int:
        """What Go's GOMAXPROCS defaults to: the CPUs this process may run on."""
        try:
            return len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return os.cpu_count() or 1


def _percent(cpu: float, wall: float) -> float:
    return round(max(0.0, cpu) / wall * 100.0, 1)


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system
