"""Go's durations: the spelling nats-server formats with ``time.Duration.String()`` (status
lines such as ``409 Exceeded MaxRequestExpires of 1s``, monitoring fields, ``Nats-TTL`` on
markers) and the one clients write for ``time.ParseDuration`` (``Nats-TTL``, ``-NAK 5s``). Pure.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["NS_PER_SECOND", "go_duration", "parse_go_duration"]

NS_PER_SECOND = 1_000_000_000
_S: Final = NS_PER_SECOND
_UNITS: Final = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": _S,
    "m": 60 * _S,
    "h": 3600 * _S,
}
_COMPONENT: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)")


def _frac(value: int, unit: int) -> str:
    """``value / unit`` in decimal without trailing zeros (Go's fmtFrac + fmtInt)."""
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{rest:0{digits}d}".rstrip("0")


def go_duration(nanos: int) -> str:
    """Go's ``time.Duration.String()``: ``0s``, ``750ns``, ``633µs``, ``1.5ms``, ``2m3.5s``."""
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    d = abs(nanos)
    if d < 1_000:
        return f"{sign}{d}ns"
    if d < 1_000_000:
        return f"{sign}{_frac(d, 1_000)}µs"
    if d < NS_PER_SECOND:
        return f"{sign}{_frac(d, 1_000_000)}ms"
    hours, rest = divmod(d, 3600 * NS_PER_SECOND)
    mins, rest = divmod(rest, 60 * NS_PER_SECOND)
    secs = _frac(rest, NS_PER_SECOND) + "s"
    if hours:
        return f"{sign}{hours}h{mins}m{secs}"
    if mins:
        return f"{sign}{mins}m{secs}"
    return sign + secs


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds ("1h30m", "1.5s", "-2m", "0"); ValueError otherwise."""
    s = text
    neg = False
    if s[:1] in ("+", "-"):
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total = 0
    pos = 0
    while pos < len(s):
        m = _COMPONENT.match(s, pos)
        if m is None or (not m.group(1) and not m.group(2)):
            raise ValueError(f"invalid duration {text!r}")
        unit = _UNITS[m.group(3)]
        whole = int(m.group(1) or "0") * unit
        frac = m.group(2) or ""
        total += whole + (int(frac) * unit // 10 ** len(frac) if frac else 0)
        pos = m.end()
    return -total if neg else total
