"""Broker.publish_reply (JetStream's PubAcks): what each receiver gets is what publish_internal
would have delivered, for the lone inbox subscription and for any other interest."""

from __future__ import annotations

from jetpy.server.broker import Broker, Subscription

Delivery = tuple[bytes, bytes, bytes | None, int, bytes, bytes]


class Recorder:
    """A subscriber that records its deliveries: (sid, subject, reply, hdr_len, data, tail)."""

    kind = "Client"
    origin = 0

    def __init__(self, batches: bool = False) -> None:
        self.got: list[Delivery] = []
        self.batches: list[int] | None = [] if batches else None  # the size of each batch taken

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
        replies: list[bytes] | None,
        hdrs: list[bytes],
        datas: list[bytes],
    ) -> bool:
        if self.batches is None:
            return False
        assert replies is None and not any(hdrs)  # PubAcks: plain replies
        self.batches.append(len(datas))
        for subject, data in zip(subjects, datas, strict=True):
            self.got.append((sub.sid, subject, None, 0, data, b"%d\r\n%b\r\n" % (len(data), data)))
        return True

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


def acks_for(subjects: list[bytes]) -> list[bytes]:
    return [b'{"stream":"S", "seq":%d}' % n for n in range(len(subjects))]


def test_replies_to_one_inbox_go_as_one_batch_and_as_one_by_one() -> None:
    by_batch, by_one = Broker(), Broker()
    a, b = Recorder(batches=True), Recorder()
    subscribe(by_batch, a, b"_INBOX.x.*", b"1")
    subscribe(by_one, b, b"_INBOX.x.*", b"1")
    subjects = [b"_INBOX.x.%d" % n for n in range(5)]
    acks = acks_for(subjects)
    assert by_batch.publish_replies(subjects, acks) == 5
    for subject, ack in zip(subjects, acks, strict=True):
        assert by_one.publish_reply(subject, ack) == 1
    assert a.batches == [5]  # (the first match fills the entry the others share)
    assert a.got == b.got
    assert (by_batch.in_msgs, by_batch.in_bytes) == (by_one.in_msgs, by_one.in_bytes)
    assert by_batch.subs.matches == by_one.subs.matches


def test_replies_never_reach_a_receiver_they_do_not_match() -> None:
    broker = Broker()
    inbox, literal, other = Recorder(batches=True), Recorder(batches=True), Recorder(batches=True)
    subscribe(broker, inbox, b"_INBOX.x.*", b"1")
    subscribe(broker, other, b"_INBOX.y.*", b"2")
    broker.publish_replies([b"_INBOX.x.0"], [ACK])  # the shared entry is there
    subscribe(broker, literal, b"_INBOX.x.3", b"3")  # a sibling of its own: the entry goes
    subjects = [b"_INBOX.x.1", b"_INBOX.x.2", b"_INBOX.x.3", b"_INBOX.y.1", b"_INBOX.x.4", b"_INBOX.z.1"]
    assert broker.publish_replies(subjects, acks_for(subjects)) == 6  # x.3 twice, z.1 to nobody
    assert [g[1] for g in inbox.got] == [
        b"_INBOX.x.0",
        b"_INBOX.x.1",
        b"_INBOX.x.2",
        b"_INBOX.x.3",
        b"_INBOX.x.4",
    ]
    assert [g[1] for g in literal.got] == [b"_INBOX.x.3"]
    assert [g[1] for g in other.got] == [b"_INBOX.y.1"]
    # the inbox is unsubscribed: what was shared is not given any more
    broker.remove(broker.subs.match(b"_INBOX.x.9")[0][0])
    assert broker.publish_replies([b"_INBOX.x.5", b"_INBOX.x.6"], [ACK, ACK]) == 0
    assert len(inbox.got) == 5
