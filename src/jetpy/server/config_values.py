"""Config values: what one configuration run collects, and the converters every block uses.

Owns :class:`Context` (the options being filled, warnings, errors), the value converters with
nats-server's error texts (``invalid value for "key": expected an integer, got string "x"``),
Go durations (:func:`parse_duration`), addresses (``host:port``) and Go's ``%q`` quoting. Knows
nothing of which key means what: that is ``config`` and ``config_security``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from jetpy.server.conf_format import ConfigError, ConfigMap, Position
from jetpy.server.options import ServerOptions

__all__ = [
    "PORT_RE",
    "Context",
    "Handler",
    "describe",
    "expect",
    "go_duration",
    "host_port",
    "listen_key",
    "parse_duration",
    "q",
    "to_bool",
    "to_int",
    "to_map",
    "to_str",
    "wrong",
]

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d*(?:\.\d*)?)(ns|us|µs|μs|ms|s|m|h)")
PORT_RE = re.compile(r"[+-]?\d+")


class Context:
    """What one ``apply_config`` run collects: the options being filled, warnings, errors."""

    def __init__(self, opts: ServerOptions) -> None:
        self.opts = opts
        self.warnings: list[str] = []
        self.errors: list[ConfigError] = []
        self.store_dir_at: Position | None = None
        self.accounts_at: Position | None = None  # where the accounts {} block is
        self.operator_at: Position | None = None  # where operator (or trusted_keys) is
        self.resolver_at: Position | None = None  # where resolver (or resolver_preload) is

    def warn(self, pos: Position, message: str) -> None:
        self.warnings.append(f"{pos}: {message}")


Handler = Callable[["Context", str, Any, Position], None]


def parse_duration(text: str) -> float:
    """A Go ``time.ParseDuration`` string (``"1h30m"``, ``"250ms"``, ``"-5s"``, ``"0"``) in seconds."""
    sign = -1.0 if text.startswith("-") else 1.0
    s = text[1:] if text.startswith(("+", "-")) else text
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {json.dumps(text)}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.group(1) in ("", "."):
            raise ValueError(
                f'invalid duration {json.dumps(text)} (use a number and a unit, e.g. "2m", "10s", "1h30m")'
            )
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value}"
    if isinstance(value, str):
        return f"string {q(value)}"
    if isinstance(value, datetime):
        return f"datetime {value.isoformat()}"
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def q(text: str) -> str:
    """Quote like Go's %q, as nats-server's messages do."""
    return json.dumps(text, ensure_ascii=False)


def wrong(key: str, value: Any, expected: str, pos: Position) -> ConfigError:
    return ConfigError(f'invalid value for "{key}": expected {expected}, got {describe(value)}', pos)


_V = TypeVar("_V")


def expect(kind: type[_V], expected: str) -> Callable[[str, Any, Position], _V]:
    """A converter that takes a value of ``kind`` as it is and refuses anything else (a boolean
    is no integer here, though Python's bool is an int)."""

    def convert(key: str, value: Any, pos: Position) -> _V:
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise wrong(key, value, expected, pos)
        return value

    return convert


to_int = expect(int, "an integer")
to_str = expect(str, "a string")
to_bool = expect(bool, "a boolean (true/false)")
to_map = expect(ConfigMap, "a map ({ ... })")


def go_duration(key: str, value: Any, pos: Position) -> float:
    if not isinstance(value, str):
        raise wrong(key, value, 'a duration string such as "2m"', pos)
    try:
        return parse_duration(value)
    except ValueError as e:
        raise ConfigError(f"error parsing {key}: {e}", pos) from e


def host_port(key: str, value: Any, pos: Position) -> tuple[str | None, int]:
    """``listen``/``http``: a port number, or ``host:port`` (``[::1]:4222``, ``:4222``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None, value
    text = to_str(key, value, pos)
    if text.startswith("["):
        close = text.find("]")
        host, rest = (text[1:close], text[close + 1 :]) if close > 0 else ("", "")
        ok = rest.startswith(":")
        port_text = rest[1:]
    else:
        host, colon, port_text = text.rpartition(":")
        ok = bool(colon) and ":" not in host
    if not ok:
        raise ConfigError(f"could not parse address string {q(text)}", pos)
    if not PORT_RE.fullmatch(port_text):
        raise ConfigError(f"could not parse port {q(port_text)}", pos)
    return host, int(port_text)


class _Listens(Protocol):
    host: str
    port: int


def listen_key(target: _Listens, name: str, key: str, value: Any, pos: Position) -> bool:
    """A listener block's address keys (``listen``, ``port``, ``host``/``net``; ``name`` is the
    key lowered) set on ``target``, as the cluster and gateway blocks take them; False for any
    other key."""
    if name == "listen":
        host, port = host_port(key, value, pos)
        if host is not None:
            target.host = host or target.host
        target.port = port
    elif name == "port":
        target.port = to_int(key, value, pos)
    elif name in ("host", "net"):
        target.host = to_str(key, value, pos)
    else:
        return False
    return True
