"""PushDelivery: how a push consumer hands messages to its deliver subject.

Owns: whether anyone listens on the deliver subject (``active``, and since when nobody has, for
``inactive_threshold``), the delivery loop of a push consumer (bulk runs of ``PUSH_BURST`` new
messages, else one by one), flow control (a ``$JS.FC.<stream>.<consumer>.<n>`` request after
``FC_WINDOW`` bytes, delivery stalled at twice that until the client answers it) and idle
heartbeats (a ``100 Idle Heartbeat`` status when nothing was sent for ``idle_heartbeat``, naming
an unanswered flow-control request once delivery is stalled on it).

Must not know: which message comes next, pending acks or the store (it asks its
:class:`~jetpy.jetstream.consumers.delivery.DeliverySource`), the consumer's config beyond the
three fields it is configured with, or the network beyond the ``send`` it is given. Sans-IO and
clock-free: times are given (ns since the epoch).
"""

from __future__ import annotations

from typing import Final

from jetpy.jetstream.consumers.delivery import PUMP_BUDGET, DeliverySource, Send
from jetpy.jetstream.consumers.pull import status

__all__ = ["DIRECT_FC_WINDOW", "FC_PREFIX", "FC_WINDOW", "PUSH_BURST", "PushDelivery", "flow_control_prefix"]

# Push flow control: ask the client to confirm after this many bytes, and stop delivering when
# twice as many are unconfirmed (nats-server sizes this from the client's pending limits; the
# client answers at once, so a few MB in flight keeps a fast subscriber busy).
FC_WINDOW: Final = 4 * 1024 * 1024

# The window of a ``direct`` consumer (a mirror's or source's own, in this server): its receiver
# stores what it gets on the spot and answers flow control on the next loop turn, so this is
# what one loop turn copies at most; small enough that other clients are served in between.
DIRECT_FC_WINDOW: Final = 256 * 1024

# New messages handed to the host in one bulk delivery by a push consumer (a pull request's
# batch is its own bound): small enough that flow control stays near its window.
PUSH_BURST: Final = 256

FC_PREFIX: Final = "$JS.FC."

_HEARTBEAT: Final = "Idle Heartbeat"


def flow_control_prefix(stream: str, consumer: str) -> str:
    """A flow-control request's reply subject up to its counter."""
    return f"{FC_PREFIX}{stream}.{consumer}."


class PushDelivery:
    def __init__(self, stream: str, consumer: str, send: Send, now: int) -> None:
        self._send = send
        self._fc_prefix = flow_control_prefix(stream, consumer)
        self.deliver_subject = ""
        self.flow_control = False
        self.idle_heartbeat = 0  # ns, 0 = none
        self.active = False  # someone listens on the deliver subject
        self.inactive_since = now
        self.last_sent = now  # last message or heartbeat sent to the deliver subject
        self._fc_reply = ""  # outstanding flow-control request
        self._fc_bytes = 0  # bytes delivered since the last confirmed flow control
        self._fc_count = 0
        self._request_at = FC_WINDOW  # unconfirmed bytes that ask for flow control
        self._stall_at = 2 * FC_WINDOW  # unconfirmed bytes that stop delivery

    def configure(
        self, deliver_subject: str, flow_control: bool, idle_heartbeat: int, window: int = FC_WINDOW
    ) -> None:
        self.deliver_subject = deliver_subject
        self.flow_control = flow_control
        self.idle_heartbeat = idle_heartbeat
        self._request_at = window
        self._stall_at = 2 * window

    def set_active(self, active: bool, now: int) -> None:
        """Someone (no longer) listens on the deliver subject."""
        if active == self.active:
            return
        self.active = active
        if not active:
            self.inactive_since = now
        else:
            self.last_sent = now
            # a new subscriber: outstanding flow control is void (nats-server resets it too)
            self._fc_reply = ""
            self._fc_bytes = 0

    def stalled(self) -> bool:
        """Is delivery waiting for the client to answer flow control?"""
        return self.flow_control and self._fc_bytes >= self._stall_at

    # -- delivery -------------------------------------------------------------------------------

    def pump(self, source: DeliverySource, now: int) -> int:
        """Deliver what ``source`` has, as long as someone listens and flow control allows;
        returns how many messages were sent."""
        if not self.active:
            return 0
        to = self.deliver_subject
        fc = self.flow_control
        sent = 0
        bulk = source.bulk
        while True:
            if fc and self._fc_bytes >= self._stall_at:
                break  # stalled until the client confirms
            if sent >= PUMP_BUDGET:
                source.more = True  # the rest on the next loop turn
                break
            if bulk and source.plain_next(now):
                msgs = source.burst(to, min(PUSH_BURST, PUMP_BUDGET - sent), now)
                if msgs:
                    sent += len(msgs)
                    if fc:
                        self._fc_bytes += sum([len(m.subject) + len(m.hdr) + len(m.data) for m in msgs])
                        if not self._fc_reply and self._fc_bytes >= self._request_at:
                            self._request_flow_control()
                    continue
            nxt = source.next_message(now)
            if nxt is None:
                break
            size = source.deliver(nxt[0], nxt[1], to, now)
            sent += 1
            if fc:
                self._fc_bytes += size
                if not self._fc_reply and self._fc_bytes >= self._request_at:
                    self._request_flow_control()
        if sent:
            self.last_sent = now
        return sent

    def _request_flow_control(self) -> None:
        self._fc_count += 1
        self._fc_reply = f"{self._fc_prefix}{self._fc_count}"
        to = self.deliver_subject
        self._send(to, to, self._fc_reply, b"", status(100, "FlowControl Request"))

    def flow_control_reply(self, subject: str) -> bool:
        """The client answered on ``subject``: if that is the outstanding flow-control request,
        what was sent before it is consumed (returns True)."""
        if subject != self._fc_reply:
            return False
        self._fc_reply = ""
        self._fc_bytes = 0
        return True

    # -- time -----------------------------------------------------------------------------------

    def heartbeat_deadline(self) -> int | None:
        """When the next idle heartbeat is due (ns), or None."""
        if self.active and self.idle_heartbeat > 0:
            return self.last_sent + self.idle_heartbeat
        return None

    def heartbeat_due(self, now: int) -> bool:
        return self.active and self.idle_heartbeat > 0 and now - self.last_sent >= self.idle_heartbeat

    def heartbeat(self, now: int, last_consumer_seq: int, last_stream_seq: int) -> None:
        """Send an idle heartbeat naming the last delivery (and a stalled flow control)."""
        hdrs = [("Nats-Last-Consumer", str(last_consumer_seq)), ("Nats-Last-Stream", str(last_stream_seq))]
        if self._fc_reply and self._fc_bytes >= self._stall_at:
            hdrs.append(("Nats-Consumer-Stalled", self._fc_reply))
        to = self.deliver_subject
        self._send(to, to, None, b"", status(100, _HEARTBEAT, hdrs))
        self.last_sent = now

    def inactive_deadline(self, threshold: int) -> int | None:
        """When a consumer with this ``inactive_threshold`` (> 0) is inactive long enough to go,
        or None while someone listens."""
        return None if self.active else self.inactive_since + threshold
