"""CONNECT options and the JSON rules of the two JSON-carrying client ops (CONNECT, INFO). Sans-IO.

nats-server decodes these arguments with Go's ``encoding/json`` into typed structs, and a client
that sends a value of the wrong type is closed without a word. We follow those rules rather than
Python's looser ones, field by field, from the tables below:

* the argument must be a JSON object or ``null`` (``null`` changes nothing); anything else closes;
* a key names a field exactly or, failing that, case-insensitively (``"Verbose"`` sets
  ``verbose``); unknown keys are ignored whatever their value;
* ``null`` leaves a field unchanged; otherwise a ``bool`` field takes only ``true``/``false``, a
  string field only a string, an integer field only an integer literal in range (``1.0`` and
  ``1e0`` are errors);
* ``NaN``/``Infinity`` are not JSON; invalid UTF-8 is replaced, not refused.

Fields absent from a CONNECT keep their previous value, so a second CONNECT only changes what it
names (nats-server decodes into the connection's existing options).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Final

from jetpy.protocol.errors import ProtocolError

__all__ = [
    "CONNECT_FIELDS",
    "INFO_FIELDS",
    "ConnectOptions",
    "decode_connect",
    "decode_fields",
    "validate_info",
]

# kinds of a Go struct field, as far as JSON decoding can tell them apart
BOOL: Final = "bool"
STRING: Final = "string"
INT64: Final = "int64"
INT32: Final = "int32"
UINT64: Final = "uint64"
UINT8: Final = "uint8"
STRINGS: Final = "[]string"
PERMISSION: Final = "permission"  # *SubjectPermission: {"allow": []string, "deny": []string}
BYTES: Final = "[]byte"  # base64 text

_RANGES: Final = {
    INT64: (-(1 << 63), (1 << 63) - 1),
    INT32: (-(1 << 31), (1 << 31) - 1),
    UINT64: (0, (1 << 64) - 1),
    UINT8: (0, 255),
}

# wire name -> (ConnectOptions attribute, kind); nats-server's ClientOpts
CONNECT_FIELDS: Final[dict[str, tuple[str, str]]] = {
    "echo": ("echo", BOOL),
    "verbose": ("verbose", BOOL),
    "pedantic": ("pedantic", BOOL),
    "tls_required": ("tls_required", BOOL),
    "nkey": ("nkey", STRING),
    "jwt": ("jwt", STRING),
    "sig": ("sig", STRING),
    "auth_token": ("auth_token", STRING),
    "user": ("user", STRING),
    "pass": ("password", STRING),
    "name": ("name", STRING),
    "lang": ("lang", STRING),
    "version": ("version", STRING),
    "protocol": ("protocol", INT64),
    "account": ("account", STRING),
    "new_account": ("new_account", BOOL),
    "headers": ("headers", BOOL),
    "no_responders": ("no_responders", BOOL),
    "import": ("", PERMISSION),  # route/leafnode only: type-checked, then ignored
    "export": ("", PERMISSION),
}

# wire name -> kind; nats-server's Info, which it decodes (and then ignores) when a client sends INFO
INFO_FIELDS: Final[dict[str, str]] = {
    "server_id": STRING,
    "server_name": STRING,
    "version": STRING,
    "proto": INT64,
    "git_commit": STRING,
    "go": STRING,
    "host": STRING,
    "port": INT64,
    "headers": BOOL,
    "auth_required": BOOL,
    "tls_required": BOOL,
    "tls_verify": BOOL,
    "tls_available": BOOL,
    "max_payload": INT32,
    "jetstream": BOOL,
    "ip": STRING,
    "client_id": UINT64,
    "client_ip": STRING,
    "nonce": STRING,
    "cluster": STRING,
    "cluster_dynamic": BOOL,
    "domain": STRING,
    "connect_urls": STRINGS,
    "ws_connect_urls": STRINGS,
    "ldm": BOOL,
    "import": PERMISSION,
    "export": PERMISSION,
    "lnoc": BOOL,
    "info_on_connect": BOOL,
    "connect_info": BOOL,
    "gateway": STRING,
    "gateway_urls": STRINGS,
    "gateway_url": STRING,
    "gateway_cmd": UINT8,
    "gateway_cmd_payload": BYTES,
    "gateway_nrp": BOOL,
    "leafnode_urls": STRINGS,
    "remote_account": STRING,
}


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """A client's CONNECT options. The defaults are what nats-server assumes before any CONNECT."""

    verbose: bool = True
    pedantic: bool = True
    tls_required: bool = False
    echo: bool = True
    headers: bool = False
    no_responders: bool = False
    protocol: int = 0
    name: str = ""
    lang: str = ""
    version: str = ""
    user: str = ""
    password: str = ""
    auth_token: str = ""
    nkey: str = ""
    jwt: str = ""
    sig: str = ""
    account: str = ""
    new_account: bool = False


DEFAULT_CONNECT: Final = ConnectOptions()


class _Invalid(Exception):
    pass


def _reject_constant(name: str) -> Any:
    raise _Invalid(f"{name} is not JSON")


def _pairs(raw: bytes) -> list[tuple[str, Any]] | None:
    """The top-level object's (key, value) pairs in document order; None for ``null``."""
    try:
        value = json.loads(
            raw.decode("utf-8", "replace"),
            object_pairs_hook=_PairList,
            parse_constant=_reject_constant,
        )
    except (ValueError, RecursionError, _Invalid) as e:
        raise ProtocolError(None, f"invalid JSON: {e}") from None
    if value is None:
        return None
    if not isinstance(value, _PairList):
        raise ProtocolError(None, "JSON argument is not an object")
    return value


class _PairList(list[tuple[str, Any]]):
    """An object decoded as its pairs (keeps duplicates and order, tells objects from arrays)."""


def _clean(s: str) -> str:
    # lone surrogates from \\ud800-style escapes: Go replaces them, and they cannot be encoded
    try:
        s.encode()
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return s


def _check(kind: str, value: Any) -> Any:
    """The decoded value of a non-null JSON ``value`` for a field of ``kind``; raises on mismatch."""
    if kind == BOOL:
        if isinstance(value, bool):
            return value
    elif kind in (STRING, BYTES):
        if isinstance(value, str):
            return _clean(value)
    elif kind in _RANGES:
        lo, hi = _RANGES[kind]
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
    elif kind == STRINGS:
        is_array = isinstance(value, list) and not isinstance(value, _PairList)
        if is_array and all(v is None or isinstance(v, str) for v in value):
            return value
    elif kind == PERMISSION and isinstance(value, _PairList):
        for key, v in value:
            if key.lower() in ("allow", "deny") and v is not None:
                _check(STRINGS, v)
        return value
    raise ProtocolError(None, f"JSON value {value!r:.40} is not a {kind}")


def _field(fields: dict[str, Any], key: str) -> Any:
    """Go's rule: the field named exactly ``key``, else one whose name matches ignoring case."""
    f = fields.get(key)
    if f is None:
        low = key.lower()
        for name, spec in fields.items():
            if name.lower() == low:
                return spec
    return f


def decode_connect(raw: bytes, prev: ConnectOptions = DEFAULT_CONNECT) -> ConnectOptions:
    """``prev`` updated with the fields a CONNECT argument sets. Raises ``ProtocolError(None)``."""
    pairs = _pairs(raw)
    if not pairs:
        return prev
    changes: dict[str, Any] = {}
    for key, value in pairs:
        spec = _field(CONNECT_FIELDS, key)
        if spec is None or value is None:
            continue
        attr, kind = spec
        checked = _check(kind, value)
        if attr:
            changes[attr] = checked
    return dataclasses.replace(prev, **changes) if changes else prev


def validate_info(raw: bytes) -> None:
    """Check an INFO a client sent as nats-server does (it is otherwise ignored)."""
    decode_fields(raw, INFO_FIELDS)


def decode_fields(raw: bytes, fields: dict[str, str]) -> dict[str, Any]:
    """The fields of a JSON object argument that ``fields`` (wire name -> kind) names, checked
    by Go's rules as above and keyed by their wire names; others are ignored, ``null`` is
    absent. Raises ``ProtocolError(None)``. (Servers' INFO and CONNECT on routes use it.)"""
    out: dict[str, Any] = {}
    for key, value in _pairs(raw) or ():
        if value is None:
            continue
        kind = _field(fields, key)
        if kind is not None:
            name = key if key in fields else next(k for k in fields if k.lower() == key.lower())
            out[name] = _check(kind, value)
    return out
