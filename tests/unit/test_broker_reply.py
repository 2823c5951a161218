"""Broker.publish_reply (JetStream's PubAcks): what each receiver gets is what publish_internal
would have delivered, for the lone inbox subscription and for any other interest."""

from __future__ import annotations

from jetpy.server.broker import Broker, Subscription

Delivery = tuple[bytes, bytes, bytes | None, int, bytes, bytes]


class Recorder:
    """A subscriber that records its deliveries: (sid, subject, reply, hdr_len, data, tail)."""

    kind = "Client"
    origin = 0

    def __init__(self) -> None:
        self.got: list[Delivery] = []

    def deliver(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes, tail: bytes
    ) -> None:
        self.got.append((sub.sid, subject, reply, hdr_len, data, tail))

    def deliver_run(self, sub: Subscription, subject: bytes, datas: list[bytes], tails: list[bytes]) -> None:
        raise AssertionError("a reply is one message")

    def deliver_batch(
        self,
        sub: Subscription,
        subjects: list[bytes],
        replies: list[bytes],
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        raise AssertionError("a reply is one message")

    def flush(self) -> None:
        pass


def subscribe(
    broker: Broker, client: Recorder, subject: bytes, sid: bytes, queue: bytes | None = None
) -> None:
    broker.add(Subscription(client, subject, queue, sid))


ACK = b'{"stream":"S", "seq":1}'


def test_the_inbox_subscription_gets_the_reply_as_publish_internal_sends_it() -> None:
    by_reply, by_internal = Broker(), Broker()
    a, b = Recorder(), Recorder()
    subscribe(by_reply, a, b"_INBOX.x.*", b"1")
    subscribe(by_internal, b, b"_INBOX.x.*", b"1")
    assert by_reply.publish_reply(b"_INBOX.x.7", ACK) == 1
    assert by_internal.publish_internal("_INBOX.x.7", None, ACK) == 1
    assert a.got == b.got == [(b"1", b"_INBOX.x.7", None, 0, ACK, b"23\r\n" + ACK + b"\r\n")]
    assert (
        (by_reply.in_msgs, by_reply.in_bytes) == (by_internal.in_msgs, by_internal.in_bytes) == (1, len(ACK))
    )


def test_other_interest_takes_the_general_path() -> None:
    broker = Broker()
    a, b, q1, q2 = Recorder(), Recorder(), Recorder(), Recorder()
    subscribe(broker, a, b"_INBOX.x.*", b"1")
    subscribe(broker, b, b"_INBOX.>", b"2")
    subscribe(broker, q1, b"_INBOX.x.*", b"3", queue=b"q")
    subscribe(broker, q2, b"_INBOX.x.*", b"4", queue=b"q")
    assert broker.publish_reply(b"_INBOX.x.1", ACK) == 3  # both plain ones, one of the group
    assert len(a.got) == len(b.got) == 1
    assert len(q1.got) + len(q2.got) == 1
    assert broker.publish_reply(b"nobody.listens", ACK) == 0
    assert broker.in_msgs == 2
