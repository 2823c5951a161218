"""Acknowledgements: the ack reply subject a delivered message carries, and what a client may
publish to it.

Owns the wire spelling: ``$JS.ACK.<stream>.<consumer>.<deliveries>.<stream seq>.<consumer seq>
.<timestamp ns>.<pending>`` and the ack bodies (``+ACK`` or empty, ``-NAK`` with an optional
delay as JSON ``{"delay": ns}`` or a Go duration, ``+WPI``, ``+NXT`` with an optional pull request,
``+TERM`` with an optional reason). Pure: no consumer state, no clock.

Every ack subject jetpy sends is built here (:func:`ack_reply` for one delivery,
:func:`ack_replies` for the run of first deliveries a consumer hands over in one go) and every
one it receives is read here (:func:`parse_ack_subject`, and :func:`ack_sequences` on the
plain-ack path): the consumer and its host never spell the tokens themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import msgspec

from jetpy.gotime import parse_go_duration
from jetpy.store.base import StoredMsg

__all__ = [
    "ACK_PREFIX",
    "Ack",
    "AckKind",
    "AckReply",
    "ack_prefix",
    "ack_replies",
    "ack_reply",
    "ack_sequences",
    "parse_ack",
    "parse_ack_subject",
]

ACK_PREFIX: Final = "$JS.ACK."

AckKind = Literal["ack", "nak", "wpi", "next", "term"]


@dataclass(slots=True, frozen=True)
class AckReply:
    """The metadata an ack subject carries."""

    stream: str
    consumer: str
    deliveries: int
    stream_seq: int
    consumer_seq: int
    ts: int
    pending: int


@dataclass(slots=True, frozen=True)
class Ack:
    kind: AckKind
    delay: int = 0  # -NAK: ns before redelivery (0 = at once)
    reason: str = ""  # +TERM
    next_request: bytes = b""  # +NXT: the pull request that follows (empty = one message)


def ack_prefix(stream: str, consumer: str) -> str:
    """An ack subject up to its variable tokens; a delivery appends
    ``<deliveries>.<stream seq>.<consumer seq>.<timestamp ns>.<pending>``."""
    return f"{ACK_PREFIX}{stream}.{consumer}."


def ack_reply(prefix: str, deliveries: int, stream_seq: int, consumer_seq: int, ts: int, pending: int) -> str:
    """The ack subject of one delivery; ``prefix`` is :func:`ack_prefix`'s, ``ts`` the message's
    timestamp (ns) and ``pending`` how many messages are still to be delivered after it."""
    return f"{prefix}{deliveries}.{stream_seq}.{consumer_seq}.{ts}.{pending}"


def ack_replies(prefix: bytes, msgs: list[StoredMsg], consumer_seq: int, pending: int) -> list[bytes]:
    """The ack subjects (bytes, as the bus writes them) of a run of first deliveries: ``msgs``
    numbered from ``consumer_seq`` on, with ``pending`` still to be delivered after the first
    of them (one less after each). ``prefix`` is :func:`ack_prefix`'s, encoded. One pass per
    bulk delivery: what :func:`ack_reply` gives for each, as bytes."""
    return [
        b"%b1.%d.%d.%d.%d" % (prefix, m.seq, consumer_seq + j, m.ts, pending - j) for j, m in enumerate(msgs)
    ]


def parse_ack_subject(subject: str) -> AckReply | None:
    """The metadata of a v1 ack subject, or None if it is not one."""
    if not subject.startswith(ACK_PREFIX):
        return None
    toks = subject[len(ACK_PREFIX) :].split(".")
    if len(toks) != 7:
        return None
    try:
        return AckReply(
            toks[0], toks[1], int(toks[2]), int(toks[3]), int(toks[4]), int(toks[5]), int(toks[6])
        )
    except ValueError:
        return None


def ack_sequences(subject: bytes) -> tuple[int, int] | None:
    """(stream seq, consumer seq) of a v1 ack subject as received, or None if it is not one: the
    rule of :func:`parse_ack_subject`, on the bytes and without the rest of its metadata (the
    plain-ack path, once per acknowledged message)."""
    toks = subject.split(b".")
    if len(toks) != 9 or toks[0] != b"$JS" or toks[1] != b"ACK":
        return None
    try:
        int(toks[4]), int(toks[7]), int(toks[8])  # must be numbers too, though not needed here
        return int(toks[5]), int(toks[6])
    except ValueError:
        return None


def _nak_delay(rest: bytes) -> int:
    rest = rest.strip()
    if not rest:
        return 0
    if rest.startswith(b"{"):
        try:
            obj = msgspec.json.decode(rest)
        except (msgspec.DecodeError, RecursionError):
            return 0
        delay = obj.get("delay") if isinstance(obj, dict) else None
        return delay if isinstance(delay, int) and delay > 0 else 0
    try:
        return max(0, parse_go_duration(rest.decode()))
    except (ValueError, UnicodeDecodeError):
        return 0


_PLAIN_ACK: Final = Ack("ack")


def parse_ack(body: bytes) -> Ack | None:
    """What an ack body asks for; None for a body that is not an ack (ignored, as nats-server)."""
    if not body or body == b"+ACK" or body == b"+OK":
        return _PLAIN_ACK
    head = body[:4]
    rest = body[4:]
    if head == b"+ACK" or head == b"+OK ":
        return _PLAIN_ACK
    if head == b"-NAK":
        return Ack("nak", delay=_nak_delay(rest))
    if head == b"+WPI":
        return Ack("wpi")
    if head == b"+NXT":
        return Ack("next", next_request=rest.strip())
    if body.startswith(b"+TERM"):
        return Ack("term", reason=body[5:].strip().decode(errors="replace"))
    return None
