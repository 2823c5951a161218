"""Parsing and formatting the values people type on the command line and in apply files.

Owns: durations (``1d``, ``1h30m``, ``500ms``; JetStream wants nanoseconds), sizes (``10MB``,
``1GiB``, ``-1``), the name rules the server and the KV/Object Store conventions enforce (checked
here so that a bad name is a usage error before anything is sent), and the human formatting of
the same values in tables. Pure functions, no I/O: every error is a ``ValueError`` whose text is
meant for the user.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Final

__all__ = [
    "check_bucket",
    "check_consumer_name",
    "check_key",
    "check_key_pattern",
    "check_object_name",
    "check_pub_subject",
    "check_rfc3339",
    "check_stream_name",
    "check_subject",
    "format_bytes",
    "format_count",
    "format_duration",
    "format_time",
    "parse_duration",
    "parse_size",
    "rfc3339",
]

NS_PER: Final[dict[str, int]] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
    "d": 86400 * 1_000_000_000,
    "w": 7 * 86400 * 1_000_000_000,
    "y": 365 * 86400 * 1_000_000_000,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w|y)")

_SIZE_UNITS: Final[dict[str, int]] = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")

# KV and Object Store conventions (ADR-8 / ADR-20), as the clients enforce them.
_BUCKET = re.compile(r"[a-zA-Z0-9_-]+")
_KEY = re.compile(r"[-/_=.a-zA-Z0-9]+")

MAX_NAME_LEN: Final = 255
"""Stream and consumer names become directory names in a file store (NAME_MAX)."""


def parse_duration(text: str, *, allow_unlimited: bool = True) -> int:
    """Nanoseconds of ``text``: ``1d``, ``1h30m``, ``250ms``, ``90`` (seconds); ``0``/``-1`` is
    0 (unlimited) when ``allow_unlimited``."""
    s = text.strip().lower()
    if s in ("0", "-1", "unlimited", "never", "none") and allow_unlimited:
        return 0
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return int(float(s) * NS_PER["s"])
    pos = 0
    total = 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * NS_PER[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"invalid duration {text!r} (examples: 30s, 5m, 1h30m, 1d, 1w, 1y)")
    return int(total)


def parse_size(text: str | int) -> int:
    """Bytes of ``text``: ``1024``, ``10KB``, ``1.5MiB``, ``2G``; ``-1`` means unlimited."""
    if isinstance(text, int):
        if text < -1:
            raise ValueError(f"invalid size {text} (use -1 for unlimited)")
        return text
    s = text.strip().lower()
    if s in ("-1", "unlimited"):
        return -1
    m = _SIZE.fullmatch(s)
    if m is None or m.group(2) not in _SIZE_UNITS:
        raise ValueError(f"invalid size {text!r} (examples: 1024, 10KB, 1MB, 2GB, -1)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


def format_duration(ns: int | None, *, zero: str = "unlimited") -> str:
    """``1d2h``, ``1m30s``, ``250ms``; ``zero`` for 0 / None."""
    if not ns:
        return zero
    if ns < 0:
        return str(ns)
    if ns < NS_PER["s"]:
        for unit in ("ms", "us"):
            if ns >= NS_PER[unit] and ns % NS_PER[unit] == 0:
                return f"{ns // NS_PER[unit]}{unit}"
        return f"{ns / NS_PER['ms']:g}ms" if ns >= NS_PER["ms"] else f"{ns}ns"
    out = []
    rest = ns
    for unit in ("y", "d", "h", "m", "s"):
        n, rest = divmod(rest, NS_PER[unit])
        if n:
            out.append(f"{n}{unit}")
    if rest:
        out.append(f"{rest // NS_PER['ms']}ms" if rest % NS_PER["ms"] == 0 else f"{rest}ns")
    return "".join(out)


def format_bytes(n: int | None, *, negative: str = "unlimited") -> str:
    """``512 B``, ``1.5 KiB``, ``10 MiB``; ``negative`` for -1."""
    if n is None:
        return "-"
    if n < 0:
        return negative
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_count(n: int | None, *, negative: str = "unlimited") -> str:
    if n is None:
        return "-"
    return negative if n < 0 else f"{n:,}"


def rfc3339(ns: int) -> str:
    """Unix nanoseconds as the API takes a time: RFC 3339 in UTC with nanoseconds."""
    secs, frac = divmod(ns, NS_PER["s"])
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:09d}Z"


def check_rfc3339(text: str) -> str:
    """``text`` if it is an RFC 3339 time with a zone (``2030-01-01T00:00:00Z``, ``...+02:00``)."""
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
    try:
        ok = datetime.fromisoformat(trimmed).tzinfo is not None and "T" in text
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"invalid time {text!r} (example: 2030-01-01T00:00:00Z)")
    return text


def format_time(value: str | None) -> str:
    """An RFC 3339 timestamp from the API as ``2024-05-01 12:00:00`` (UTC), or ``never``."""
    if not value or value.startswith("0001-01-01"):
        return "never"
    try:
        # the API sends nanoseconds; datetime takes at most microseconds
        trimmed = re.sub(r"(\.\d{6})\d+", r"\1", value.replace("Z", "+00:00"))
        dt = datetime.fromisoformat(trimmed).astimezone(UTC)
    except ValueError:
        return value
    return dt.strftime("%Y-%m-%d %H:%M:%S")


def _check_name(kind: str, name: str) -> None:
    if not name:
        raise ValueError(f"{kind} name is empty")
    if len(name.encode()) > MAX_NAME_LEN:
        raise ValueError(f"{kind} name {name!r} is longer than {MAX_NAME_LEN} bytes")
    bad = [c for c in name if c in ".*>/\\" or c.isspace() or not c.isprintable()]
    if bad:
        raise ValueError(
            f"invalid {kind} name {name!r}: it may not contain spaces, '.', '*', '>', '/' or '\\'"
        )


def check_stream_name(name: str) -> str:
    _check_name("stream", name)
    return name


def check_consumer_name(name: str) -> str:
    _check_name("consumer", name)
    return name


def check_bucket(name: str) -> str:
    if not _BUCKET.fullmatch(name):
        raise ValueError(f"invalid bucket name {name!r}: use only letters, digits, '_' and '-'")
    return name


def check_key(key: str) -> str:
    if not _KEY.fullmatch(key) or key.startswith(".") or key.endswith("."):
        raise ValueError(
            f"invalid key {key!r}: use letters, digits and '-/_=.', not starting or ending with '.'"
        )
    return key


def check_key_pattern(pattern: str) -> str:
    """A key or a pattern of keys for watching: tokens are keys' tokens, ``*`` or a final ``>``."""
    toks = pattern.split(".")
    for i, t in enumerate(toks):
        if (t == ">" and i == len(toks) - 1) or t == "*":
            continue
        if not t or not _KEY.fullmatch(t):
            raise ValueError(f"invalid key pattern {pattern!r}")
    return pattern


def check_object_name(name: str) -> str:
    if not name or not name.isprintable():
        raise ValueError(f"invalid object name {name!r}")
    return name


def check_subject(subject: str, *, what: str = "subject") -> str:
    """A subscription subject: non-empty tokens, no whitespace, ``>`` only as the last token."""
    toks = subject.split(".")
    if not subject or any(c.isspace() for c in subject) or any(not t for t in toks):
        raise ValueError(f"invalid {what} {subject!r}")
    for i, t in enumerate(toks):
        if (">" in t and (t != ">" or i != len(toks) - 1)) or ("*" in t and t != "*"):
            raise ValueError(f"invalid {what} {subject!r}")
    return subject


def check_pub_subject(subject: str) -> str:
    """A publish subject: a valid subject without wildcards."""
    check_subject(subject)
    if any(t in ("*", ">") for t in subject.split(".")):
        raise ValueError(f"cannot publish to a wildcard subject {subject!r}")
    return subject
