"""Server-to-client encoding: INFO, MSG/HMSG, PING/PONG, +OK, -ERR. Sans-IO.

Byte-for-byte what nats-server writes (note the space before CRLF after INFO's JSON). The only
place the MSG/HMSG frame is spelled::

    MSG <subject> <sid> [reply ]<total>\\r\\n<payload>\\r\\n
    HMSG <subject> <sid> [reply ]<hdr_len> <total>\\r\\n<header block><payload>\\r\\n

A frame is built in two halves so that the message path formats each half once: the *prefix*
(``MSG <subject> <sid> ``) belongs to a subscription and is computed when it is made, the *tail*
(``[reply ]<sizes>\\r\\n<data>\\r\\n``) belongs to a published message and is shared by every
receiver. ``sizes`` is ``<total>`` or ``<hdr_len> <total>``; a publisher's own spelling of it
(the bytes of its PUB/HPUB line) is echoed as nats-server does. Runs of messages are framed by
one call per run (:func:`msg_tails`, :func:`append_run`, :func:`msg_batch`), never one per message.

Header blocks (status lines included) are spelled by :mod:`jetpy.protocol.headers`.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = [
    "CRLF",
    "OK",
    "PING",
    "PONG",
    "append_run",
    "err",
    "info",
    "msg",
    "msg_batch",
    "msg_prefix",
    "msg_tail",
    "msg_tails",
]

CRLF: Final = b"\r\n"
PING: Final = b"PING\r\n"
PONG: Final = b"PONG\r\n"
OK: Final = b"+OK\r\n"


def info(fields: dict[str, Any]) -> bytes:
    return b"INFO " + json.dumps(fields, separators=(",", ":")).encode() + b" \r\n"


def err(text: str) -> bytes:
    return b"-ERR '" + text.encode() + b"'\r\n"


def msg_prefix(subject: bytes, sid: bytes, headers: bool = False) -> bytes:
    """The start of a frame up to its reply: ``MSG <subject> <sid> `` (``HMSG`` with headers)."""
    return b"".join((b"HMSG " if headers else b"MSG ", subject, b" ", sid, b" "))


LARGE_PAYLOAD: Final = 64 * 1024
"""Past this, a payload is not %-formatted into its frame: CPython's bytes formatting copies a
large result several times (1 MiB: ~400 us against ~25 us for a join), which a bulk read's 1 MiB
replies and the object store's chunks would pay on every message."""


def msg_tail(reply: bytes | None, hdr_len: int, data: bytes, sizes: bytes | None = None) -> bytes:
    """The rest of a frame after its prefix: ``[reply ]<sizes>\\r\\n<data>\\r\\n``, ``data``
    holding ``hdr_len`` bytes of header block then the payload. ``sizes`` as the publisher
    wrote them, or None to spell them here."""
    # joins where no number is to be spelled: cheaper than %-formatting, on a per-message path
    if sizes is not None:
        if reply:
            return b"".join((reply, b" ", sizes, b"\r\n", data, b"\r\n"))
        return b"".join((sizes, b"\r\n", data, b"\r\n"))
    if len(data) > LARGE_PAYLOAD:  # spelled apart, then joined: one copy of the payload
        if hdr_len:
            head = (
                b"%b %d %d\r\n" % (reply, hdr_len, len(data))
                if reply
                else b"%d %d\r\n" % (hdr_len, len(data))
            )
        else:
            head = b"%b %d\r\n" % (reply, len(data)) if reply else b"%d\r\n" % len(data)
        return b"".join((head, data, b"\r\n"))
    if hdr_len:
        if reply:
            return b"%b %d %d\r\n%b\r\n" % (reply, hdr_len, len(data), data)
        return b"%d %d\r\n%b\r\n" % (hdr_len, len(data), data)
    if reply:
        return b"%b %d\r\n%b\r\n" % (reply, len(data), data)
    return b"%d\r\n%b\r\n" % (len(data), data)


def msg(subject: bytes, sid: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> bytes:
    """One MSG (hdr_len 0) or HMSG frame; ``data`` holds headers then payload."""
    return msg_prefix(subject, sid, hdr_len > 0) + msg_tail(reply, hdr_len, data)


def msg_tails(sizes: list[bytes], datas: list[bytes]) -> list[bytes]:
    """The tails of a run of plain messages (no reply, no headers), ``sizes[n]`` as published."""
    join = b"".join
    return [join((sz, b"\r\n", data, b"\r\n")) for sz, data in zip(sizes, datas, strict=True)]


def append_run(out: bytearray, prefix: bytes, tails: list[bytes]) -> None:
    """Append to ``out`` the frames of a run of messages for one receiver: each tail behind the
    same prefix (appended in two steps, so the run is copied once)."""
    out += prefix
    out += prefix.join(tails)


def msg_batch(
    subjects: list[bytes],
    sid: bytes,
    replies: list[bytes] | None,
    hdrs: list[bytes],
    datas: list[bytes],
    headers: bool,
) -> bytes:
    """The frames of a run of messages to one subscription ``sid``, each on its own subject with
    its own reply, header block ``hdrs[n]`` (empty: none) and payload ``datas[n]``: a consumer's
    deliveries, whose replies are their ack subjects and never empty (an empty one is not
    looked for: that would cost a test per message; frame such messages with :func:`msg`). A
    receiver that cannot take headers (``headers`` False) gets every message as a MSG without
    its header block. ``replies`` None: no message has one (a route's run of replies to a
    client's requests). The same bytes as :func:`msg` of each, in one pass."""
    if replies is None:
        if headers and any(hdrs):
            return b"".join(
                [msg(s, sid, None, len(h), h + d) for s, h, d in zip(subjects, hdrs, datas, strict=True)]
            )
        return b"".join(
            [b"MSG %b %b %d\r\n%b\r\n" % (s, sid, len(d), d) for s, d in zip(subjects, datas, strict=True)]
        )
    if headers and any(hdrs):
        return b"".join(
            [
                b"HMSG %b %b %b %d %d\r\n%b%b\r\n" % (s, sid, r, len(h), len(h) + len(d), h, d)
                if h
                else b"MSG %b %b %b %d\r\n%b\r\n" % (s, sid, r, len(d), d)
                for s, r, h, d in zip(subjects, replies, hdrs, datas, strict=True)
            ]
        )
    return b"".join(
        [
            b"MSG %b %b %b %d\r\n%b\r\n" % (s, sid, r, len(d), d)
            for s, r, d in zip(subjects, replies, datas, strict=True)
        ]
    )
