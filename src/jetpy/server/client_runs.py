"""ClientRuns: what a client connection does with the runs its parser groups (see
:mod:`jetpy.protocol.ops`).

Owns, for one connection, a ``PUBS`` run (plain PUBs to one subject: routed once, unless the
client's permissions or its ``verbose``/``pedantic`` options want each message seen on its own)
and a ``PUBR`` run (PUBs and HPUBs with a reply to one subject: a JetStream publisher's window,
handed in one call to a stream that is the subject's only receiver, see
:meth:`~jetpy.server.broker.Broker.publish_requests`; anything else, and every message that a
per-message check could answer differently, is acted on as the PUBs it stands for). Either way
each message meets the same checks and reaches the same receivers, in the same order, as when
sent alone. A mixin of :class:`~jetpy.server.connection.ClientConnection`, knowing it only by the
attributes below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from jetpy.protocol import encode as enc
from jetpy.protocol.errors import ERR_INVALID_PUB_SUBJECT
from jetpy.protocol.ops import PUB, Op
from jetpy.server.gateway_interest import ReplyMap
from jetpy.server.permissions import pub_violation, reserved_reply
from jetpy.subjects import valid_literal_bytes

__all__ = ["INVALID_PUB_SUBJECT", "ClientRuns"]

INVALID_PUB_SUBJECT: Final = enc.err(ERR_INVALID_PUB_SUBJECT)  # pedantic: complained of, still delivered

RequestsRun = Callable[[bytes, list[bytes], list[int], list[bytes]], bool]


class ClientRuns:
    """The run half of a client connection (a mixin)."""

    closed: bool
    verbose: bool
    pedantic: bool
    echo: bool
    in_msgs: int
    in_bytes: int
    gw_replies: ReplyMap | None
    _pub_ok: Callable[[bytes], bool] | None
    _publish: Callable[..., int]
    _publish_run: Callable[..., int]
    _publish_requests: RequestsRun | None

    if TYPE_CHECKING:

        def send(self, data: bytes) -> None: ...

        def _answers(self, subject: bytes) -> bool: ...

        def _violation(self, kind: str, err: str, log_text: str) -> None: ...

        def _handle(self, ops: list[Op]) -> None: ...

    def _plain_run(self, op: Op) -> None:
        """A PUBS run: ``(PUBS, subject, datas, sizes)``."""
        _, subject, datas, sizes = op
        self.in_msgs += len(datas)
        self.in_bytes += sum(map(len, datas))
        publish = self._publish
        pub_ok = self._pub_ok
        verbose = self.verbose
        pedantic = self.pedantic
        echo = self.echo
        if pub_ok is not None and not pub_ok(subject):  # refused, but for replies it may send
            for data, sz in zip(datas, sizes, strict=True):
                if pedantic and not valid_literal_bytes(subject):
                    self.send(INVALID_PUB_SUBJECT)
                if self._answers(subject):
                    if verbose:
                        self.send(enc.OK)
                    publish(self, subject, None, 0, data, echo, sz)
                else:
                    self._violation("publish", *pub_violation(subject))
        elif verbose or pedantic:  # acknowledged and checked one by one
            for data, sz in zip(datas, sizes, strict=True):
                if pedantic and not valid_literal_bytes(subject):
                    self.send(INVALID_PUB_SUBJECT)
                if verbose:
                    self.send(enc.OK)
                publish(self, subject, None, 0, data, echo, sz)
        else:
            gw_replies = self.gw_replies
            if gw_replies:  # an answer to a request from another cluster goes back mapped
                subject = gw_replies.get(subject) or subject
            self._publish_run(self, subject, datas, sizes, echo)

    def _request_run(self, op: Op) -> None:
        """A PUBR run: ``(PUBR, subject, replies, hdr_lens, datas, sizes)``. In one call where
        no per-message check applies (no ``verbose`` or ``pedantic``, the subject permitted
        outright, no reserved reply, no mapping) and a stream takes the run; else as the PUBs
        it stands for, one by one."""
        _, subject, replies, hdr_lens, datas, sizes = op
        run = self._publish_requests
        pub_ok = self._pub_ok
        if (
            run is not None
            and not self.verbose
            and not self.pedantic
            and not self.gw_replies
            and (pub_ok is None or pub_ok(subject))
            and not any(map(reserved_reply, replies))
            and run(subject, replies, hdr_lens, datas)
        ):
            self.in_msgs += len(datas)
            self.in_bytes += sum(map(len, datas))
            return
        self._handle(
            [(PUB, subject, r, h, d, s) for r, h, d, s in zip(replies, hdr_lens, datas, sizes, strict=True)]
        )
