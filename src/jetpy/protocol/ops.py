"""The operations the parser yields, as plain tuples (one small allocation per op).

Shapes (first element is the op code):

    (PUB,     subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, sizes: bytes)
    (PUBS,    subject: bytes, datas: list[bytes], sizes: list[bytes])  # a run of plain PUBs
    (PUBR,    subject: bytes, replies: list[bytes], hdr_lens: list[int], datas: list[bytes],
              sizes: list[bytes])                            # a run of PUBs with replies
    (SUB,     subject: bytes, queue: bytes | None, sid: bytes)
    (UNSUB,   sid: bytes, max_msgs: int)                     # max_msgs 0 = now
    (CONNECT, options: ConnectOptions)                       # merged with any earlier CONNECT
    (PING,) (PONG,) (OK,)
    (INFO,    json: bytes)                                   # already checked like nats-server
    (ERR,     text: bytes)

HPUB is PUB with ``hdr_len > 0``; ``data`` then holds the header block followed by the payload,
so a delivery to a headers-capable client writes it without any copying or re-joining.
``sizes`` is the size field of the MSG line a receiver gets, exactly as the publisher wrote it
(``b"128"``, or ``b"22 150"`` for HPUB): nats-server echoes those bytes rather than reformatting.
An HPUB with a zero header size is delivered as a plain MSG, as nats-server does.

PUBS is a run of two or more consecutive plain PUBs (no reply, no headers) to one subject, as
a publisher streaming to a subject sends them: the n-th message is ``datas[n]`` with ``sizes[n]``
(a lone one is a PUB with reply None). Handling
the run at once (one route lookup, one write per receiver) is the same as handling each PUB in
turn; it only saves the per-message work of doing so.

PUBR is a run of two or more consecutive PUBs or HPUBs with a reply to one subject (a JetStream
publisher's window of async publishes, each with its own inbox): the n-th message is a PUB of
``subject`` with ``replies[n]``, ``hdr_lens[n]``, ``datas[n]`` and ``sizes[n]``. Its layers
above hand it to a stream in one call where one takes the subject, else act on each in turn.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["CONNECT", "ERR", "INFO", "OK", "PING", "PONG", "PUB", "PUBR", "PUBS", "SUB", "UNSUB", "Op"]

PUB: Final = 1
SUB: Final = 2
UNSUB: Final = 3
PING: Final = 4
PONG: Final = 5
CONNECT: Final = 6
INFO: Final = 7
OK: Final = 8
ERR: Final = 9
PUBS: Final = 10
PUBR: Final = 11

Op = tuple[Any, ...]  # heterogeneous shapes documented above
