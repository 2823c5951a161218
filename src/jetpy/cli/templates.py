"""Body templates for `jetpy pub` and `jetpy reply`, as the nats CLI has them.

Owns: parsing ``{{Count}}``, ``{{.Count}}`` and ``{{ Count }}`` style placeholders once (an unknown
name or bad arguments is a ``ValueError`` before anything is published) and rendering them per
message. Names: ``Count`` (1-based message number), ``ID`` (unique id), ``Time`` (``15:04:05``),
``TimeStamp`` (RFC 3339 with nanoseconds), ``Unix``, ``UnixNano``, ``Random min max`` (random
letters, ``min..max`` long), ``Request`` (the request's payload, `reply` only).
"""

from __future__ import annotations

import os
import random
import re
import string
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

__all__ = ["Template"]

_PLACEHOLDER = re.compile(r"\{\{\s*\.?([A-Za-z]+)((?:\s+[^\s}]+)*)\s*\}\}")
_NAMES: Final = frozenset({"Count", "ID", "Time", "TimeStamp", "Unix", "UnixNano", "Random", "Request"})
_ALPHABET: Final = string.ascii_letters + string.digits


@dataclass(frozen=True, slots=True)
class _Part:
    name: str  # "" for literal text
    text: str = ""
    args: tuple[int, ...] = ()


class Template:
    """A parsed body; ``render`` fills it in for one message."""

    def __init__(self, text: str, *, allow_request: bool = False) -> None:
        parts: list[_Part] = []
        pos = 0
        for m in _PLACEHOLDER.finditer(text):
            if m.start() > pos:
                parts.append(_Part("", text[pos : m.start()]))
            name = m.group(1)
            if name not in _NAMES or (name == "Request" and not allow_request):
                raise ValueError(f"unknown template {m.group(0)!r}")
            raw_args = m.group(2).split()
            args: tuple[int, ...] = ()
            if name == "Random":
                try:
                    args = tuple(int(a) for a in raw_args)
                except ValueError as exc:
                    raise ValueError(f"{m.group(0)!r}: Random takes two numbers, min and max") from exc
                if len(args) != 2 or not 0 <= args[0] <= args[1]:
                    raise ValueError(f"{m.group(0)!r}: Random takes two numbers, min and max")
            elif raw_args:
                raise ValueError(f"{m.group(0)!r}: {name} takes no arguments")
            parts.append(_Part(name, args=args))
            pos = m.end()
        if pos < len(text):
            parts.append(_Part("", text[pos:]))
        self._parts = tuple(parts)
        self.dynamic = any(p.name for p in parts)

    def render(self, count: int, request: bytes = b"") -> bytes:
        out: list[bytes] = []
        for p in self._parts:
            if not p.name:
                out.append(p.text.encode())
            elif p.name == "Count":
                out.append(str(count).encode())
            elif p.name == "ID":
                out.append(os.urandom(11).hex().upper().encode())
            elif p.name == "Time":
                out.append(datetime.now().strftime("%H:%M:%S").encode())
            elif p.name == "TimeStamp":
                ns = time.time_ns()
                dt = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
                out.append(f"{dt:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}Z".encode())
            elif p.name == "Unix":
                out.append(str(int(time.time())).encode())
            elif p.name == "UnixNano":
                out.append(str(time.time_ns()).encode())
            elif p.name == "Random":
                n = random.randint(p.args[0], p.args[1])
                out.append("".join(random.choices(_ALPHABET, k=n)).encode())
            elif p.name == "Request":
                out.append(request)
        return b"".join(out)
