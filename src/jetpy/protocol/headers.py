"""NATS message headers (ADR-4): ``NATS/1.0[ <status>[ <description>]]\\r\\n`` + ``Key: Value``
lines + ``\\r\\n``. Sans-IO.

Keys keep their case and may repeat. Parsing is lenient like the clients (a malformed line is
skipped); building is strict. This is the one spelling of a header block, status-only blocks
(``NATS/1.0 503``, ``NATS/1.0 408 Request Timeout``) included: the JetStream layer builds its
blocks here, and the core message path only sends the no responders block built here once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["HEADER_LINE", "Headers", "encode_headers", "get_header", "parse_headers"]

HEADER_LINE = b"NATS/1.0"


@dataclass(slots=True)
class Headers:
    status: int = 0
    description: str = ""
    items: list[tuple[str, str]] = field(default_factory=list)

    def get(self, key: str) -> str | None:
        """First value of ``key`` (exact case first, then case-insensitive, as the clients do)."""
        for k, v in self.items:
            if k == key:
                return v
        low = key.lower()
        for k, v in self.items:
            if k.lower() == low:
                return v
        return None

    def get_all(self, key: str) -> list[str]:
        return [v for k, v in self.items if k == key]

    def without(self, *keys: str) -> Headers:
        drop = set(keys)
        return Headers(self.status, self.description, [(k, v) for k, v in self.items if k not in drop])


def parse_headers(block: bytes) -> Headers:
    text = block.decode("utf-8", "replace")
    lines = text.split("\r\n")
    h = Headers()
    first = lines[0] if lines else ""
    if first.startswith("NATS/1.0"):
        rest = first[8:].strip()
        if rest:
            code, _, desc = rest.partition(" ")
            if code.isdigit():
                h.status = int(code)
                h.description = desc.strip()
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if not sep or not k:
            continue
        h.items.append((k.strip(), v.strip()))
    return h


def encode_headers(
    items: list[tuple[str, str]] | dict[str, str], status: int = 0, description: str = ""
) -> bytes:
    """A header block: the status line (``NATS/1.0``, then ``status`` and ``description`` when
    given) and ``Key: Value`` lines, each ended by CRLF, then the blank line."""
    pairs = list(items.items()) if isinstance(items, dict) else items
    first = "NATS/1.0" + (f" {status}" if status else "") + (f" {description}" if description else "")
    out = [first]
    out.extend(f"{k}: {v}" for k, v in pairs)
    return ("\r\n".join(out) + "\r\n\r\n").encode()


def get_header(block: bytes, key: bytes) -> bytes | None:
    """Fast single-key lookup without building a Headers object (exact key case)."""
    needle = b"\r\n" + key + b":"
    i = block.find(needle)
    if i < 0:
        return None
    j = block.find(b"\r\n", i + len(needle))
    return block[i + len(needle) : j if j >= 0 else len(block)].strip()
