"""A consumer's advisories and ack metrics: ``$JS.EVENT.ADVISORY.CONSUMER.<event>.<stream>.
<consumer>`` (max deliveries, naks, terminations, pauses, pins) and ``$JS.EVENT.METRIC.CONSUMER.
ACK.<stream>.<consumer>`` (sampled acks, ``sample_freq``).

Owns the documents' shape as nats-server writes them: ``type``, ``timestamp``, then (for the
priority-group events) the ``account``, then the stream and consumer, then the event's own
fields; the host adds the ``id`` and publishes only when someone listens. Must not know: why an
event happens (the consumer and its collaborators decide), the network beyond the host.
"""

from __future__ import annotations

from typing import Any, Protocol

from jetpy.jetstream.models import format_time

__all__ = ["Advisories", "AdvisoryHost", "sample_percent"]


class AdvisoryHost(Protocol):
    def advisory(self, subject: str, body: dict[str, Any]) -> None: ...


class Advisories:
    def __init__(self, host: AdvisoryHost, stream: str, consumer: str) -> None:
        self._host = host
        self._stream = stream
        self._consumer = consumer
        self._suffix = f".{stream}.{consumer}"

    def send(self, event: str, kind: str, now: int, fields: dict[str, Any]) -> None:
        """The ``<event>`` advisory of type ``io.nats.jetstream.advisory.v1.<kind>``."""
        body: dict[str, Any] = {
            "type": f"io.nats.jetstream.advisory.v1.{kind}",
            "timestamp": format_time(now),
        }
        if "account" in fields:
            body["account"] = fields["account"]
        body["stream"] = self._stream
        body["consumer"] = self._consumer
        body.update(fields)
        if kind == "terminated" and not fields.get("reason"):
            body.pop("reason", None)  # Go's omitempty
        self._host.advisory(f"$JS.EVENT.ADVISORY.CONSUMER.{event}{self._suffix}", body)

    def ack_metric(
        self, consumer_seq: int, stream_seq: int, ack_time: int, deliveries: int, now: int
    ) -> None:
        """A sampled ack's ``consumer_ack`` metric."""
        self._host.advisory(
            f"$JS.EVENT.METRIC.CONSUMER.ACK{self._suffix}",
            {
                "type": "io.nats.jetstream.metric.v1.consumer_ack",
                "timestamp": format_time(now),
                "stream": self._stream,
                "consumer": self._consumer,
                "consumer_seq": consumer_seq,
                "stream_seq": stream_seq,
                "ack_time": ack_time,
                "deliveries": deliveries,
            },
        )


def sample_percent(freq: str) -> int:
    """``sample_freq`` (``"30"`` or ``"30%"``) as a percentage (0: no sampling)."""
    if not freq:
        return 0
    try:
        return max(0, min(100, int(freq.removesuffix("%"))))
    except ValueError:
        return 0
