"""Go's duration spelling, for texts that nats-server formats with ``time.Duration.String()``
(status lines such as ``409 Exceeded MaxRequestExpires of 1s``, monitoring fields). Pure.
"""

from __future__ import annotations

__all__ = ["NS_PER_SECOND", "go_duration"]

NS_PER_SECOND = 1_000_000_000


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
