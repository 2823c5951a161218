"""Consumer config defaults, refusals, work-queue partitioning and update rules."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import ConsumerConfig, StreamConfig, StreamConsumerLimits, StreamSource
from jetpy.jetstream.validate import (
    ACK_WAIT_DEFAULT,
    EPHEMERAL_INACTIVE_THRESHOLD,
    check_consumer_config,
    check_consumer_update,
    check_stream_config,
)

S = 1_000_000_000
MS = 1_000_000

LIMITS = check_stream_config(StreamConfig(name="S", subjects=["s.>"]))
WQ = check_stream_config(StreamConfig(name="W", subjects=["w.>"], retention="workqueue"))
INTEREST = check_stream_config(StreamConfig(name="I", subjects=["i.>"], retention="interest"))


def ok(cfg: ConsumerConfig, stream: StreamConfig = LIMITS, **kw: Any) -> ConsumerConfig:
    return check_consumer_config(stream, cfg, **kw)


def err_of(cfg: ConsumerConfig, stream: StreamConfig = LIMITS, **kw: Any) -> ApiError:
    with pytest.raises(ApiError) as exc:
        check_consumer_config(stream, cfg, **kw)
    return exc.value


def test_ephemeral_pull_defaults() -> None:
    cfg = ok(ConsumerConfig())
    assert cfg.max_deliver == -1
    assert cfg.max_waiting == 512
    assert cfg.inactive_threshold == EPHEMERAL_INACTIVE_THRESHOLD
    assert cfg.ack_wait == 0 and cfg.max_ack_pending == 0  # ack none needs neither
    assert cfg.deliver_policy == "all" and cfg.replay_policy == "instant"


def test_durable_explicit_defaults() -> None:
    cfg = ok(ConsumerConfig(durable_name="d", ack_policy="explicit"))
    assert cfg.ack_wait == ACK_WAIT_DEFAULT
    assert cfg.max_ack_pending == 1000
    assert cfg.inactive_threshold == 0  # durables live until deleted
    push = ok(ConsumerConfig(durable_name="p", ack_policy="all", deliver_subject="out"))
    assert push.max_waiting == 0 and push.ack_wait == ACK_WAIT_DEFAULT


def test_backoff_sets_first_ack_wait() -> None:
    cfg = ok(ConsumerConfig(ack_policy="explicit", backoff=[2 * S, 5 * S], max_deliver=3))
    assert cfg.ack_wait == 2 * S


def test_stream_consumer_limits_are_defaults_and_caps() -> None:
    stream = check_stream_config(
        StreamConfig(
            name="S", consumer_limits=StreamConsumerLimits(inactive_threshold=10 * S, max_ack_pending=50)
        )
    )
    cfg = ok(ConsumerConfig(durable_name="d", ack_policy="explicit"), stream)
    assert (cfg.max_ack_pending, cfg.inactive_threshold) == (50, 10 * S)
    assert err_of(ConsumerConfig(ack_policy="explicit", max_ack_pending=51), stream).description == (
        "consumer max ack pending exceeds system limit of 50"
    )
    assert err_of(ConsumerConfig(inactive_threshold=11 * S), stream).err_code == 10153


def test_negative_values_clamp_or_fail_pedantic() -> None:
    cfg = ok(ConsumerConfig(max_deliver=-5, max_ack_pending=-9, max_batch=-1, inactive_threshold=-1))
    assert (cfg.max_deliver, cfg.max_ack_pending, cfg.max_batch) == (-1, -1, 0)
    assert err_of(ConsumerConfig(max_deliver=-5), pedantic=True).description == (
        "pedantic mode: max_deliver must be set to -1"
    )
    assert (
        err_of(
            ConsumerConfig(ack_policy="explicit", backoff=[S], ack_wait=2 * S, max_deliver=3), pedantic=True
        ).err_code
        == 10157
    )


def test_pinned_priority_timeout_default() -> None:
    cfg = ok(ConsumerConfig(priority_policy="pinned_client", priority_groups=["jobs"]))
    assert cfg.priority_timeout == 120 * S


def test_mirror_streams_skip_the_filter_subset_check() -> None:
    mirror = check_stream_config(StreamConfig(name="M", mirror=StreamSource(name="O")))
    assert ok(ConsumerConfig(filter_subject="anything.>"), mirror).filter_subject == "anything.>"


BAD: list[tuple[str, dict[str, Any], StreamConfig, int, str]] = [
    ("slash", {"durable_name": "a/b"}, LIMITS, 10127, "Consumer name can not contain path separators"),
    ("dot", {"durable_name": "a.b"}, LIMITS, 10103, "durable name can not contain '.', '*', '>'"),
    ("name dot", {"name": "a.b"}, LIMITS, 10103, ""),
    ("long", {"durable_name": "x" * 256}, LIMITS, 10102, "consumer name is too long, maximum allowed is 255"),
    ("replicas > 1", {"num_replicas": 3}, LIMITS, 10074, "replicas > 1 not supported in non-clustered mode"),
    ("replicas < 0", {"num_replicas": -1}, LIMITS, 10133, ""),
    ("negative backoff", {"ack_policy": "explicit", "backoff": [-1]}, LIMITS, 10184, ""),
    ("negative ack wait", {"ack_policy": "explicit", "ack_wait": -1}, LIMITS, 10183, ""),
    ("backoff > max_deliver", {"ack_policy": "explicit", "backoff": [S, S, S], "max_deliver": 2}, LIMITS, 10116, "max deliver is required to be > length of backoff values"),
    ("description", {"description": "d" * 4097}, LIMITS, 10107, "consumer description is too long, maximum allowed is 4096"),
    ("deliver wildcard", {"deliver_subject": "out.*"}, LIMITS, 10079, ""),
    ("deliver invalid", {"deliver_subject": "out..x"}, LIMITS, 10112, ""),
    ("deliver cycle", {"deliver_subject": "s.out"}, LIMITS, 10081, "consumer deliver subject forms a cycle"),
    ("push max_waiting", {"deliver_subject": "out", "max_waiting": 5}, LIMITS, 10080, ""),
    ("push max ack pending w/o acks", {"deliver_subject": "out", "max_ack_pending": 5}, LIMITS, 10082, ""),
    ("small heartbeat", {"deliver_subject": "out", "idle_heartbeat": 50 * MS}, LIMITS, 10083, "consumer idle heartbeat needs to be >= 100ms"),
    ("wq pull ack none", {}, WQ, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream"),
    ("pull rate limit", {"rate_limit_bps": 1}, LIMITS, 10086, ""),
    ("pull heartbeat", {"idle_heartbeat": S}, LIMITS, 10088, ""),
    ("pull flow control", {"flow_control": True}, LIMITS, 10089, ""),
    ("pull tiny expires", {"max_expires": 10}, LIMITS, 10115, ""),
    ("direct pull", {"direct": True}, LIMITS, 10090, ""),
    ("direct durable", {"direct": True, "durable_name": "d", "deliver_subject": "out"}, LIMITS, 10091, ""),
    ("both filters", {"filter_subject": "s.a", "filter_subjects": ["s.b"]}, LIMITS, 10136, ""),
    ("bad filter", {"filter_subject": "s..a"}, LIMITS, 10052, "invalid subject"),
    ("empty filter", {"filter_subjects": ["s.a", ""]}, LIMITS, 10139, ""),
    ("overlapping filters", {"filter_subjects": ["s.>", "s.a"]}, LIMITS, 10138, "consumer subject filters cannot overlap"),
    ("filter outside stream", {"filter_subject": "zzz"}, LIMITS, 10093, "consumer filter subject is not a valid subset of the interest subjects"),
    ("all + start seq", {"opt_start_seq": 3}, LIMITS, 10094, "consumer delivery policy is deliver all, but optional start sequence is also set"),
    ("new + start time", {"deliver_policy": "new", "opt_start_time": "2024-01-01T00:00:00Z"}, LIMITS, 10094, "consumer delivery policy is deliver new, but optional start time is also set"),
    ("by seq w/o seq", {"deliver_policy": "by_start_sequence"}, LIMITS, 10094, "consumer delivery policy is deliver by start sequence, but optional start sequence is not set"),
    ("by time w/o time", {"deliver_policy": "by_start_time"}, LIMITS, 10094, "consumer delivery policy is deliver by start time, but optional start time is not set"),
    ("by time + seq", {"deliver_policy": "by_start_time", "opt_start_time": "2024-01-01T00:00:00Z", "opt_start_seq": 2}, LIMITS, 10094, ""),
    ("last per subject w/o filter", {"deliver_policy": "last_per_subject"}, LIMITS, 10094, "consumer delivery policy is deliver last per subject, but optional filter subject is not set"),
    ("bad start time", {"deliver_policy": "by_start_time", "opt_start_time": "yesterday"}, LIMITS, 10025, ""),
    ("sample freq", {"sample_freq": "abc%"}, LIMITS, 10095, ""),
    ("flow control w/o heartbeat", {"deliver_subject": "out", "flow_control": True}, LIMITS, 10108, "consumer with flow control also needs heartbeats"),
    ("durable != name", {"durable_name": "a", "name": "b"}, LIMITS, 10132, ""),
    ("metadata", {"metadata": {"k": "v" * (128 * 1024)}}, LIMITS, 10135, "consumer metadata exceeds maximum size of 128KB"),
    ("priority w/o groups", {"priority_policy": "overflow"}, LIMITS, 10159, ""),
    ("priority bad group", {"priority_policy": "overflow", "priority_groups": ["has space"]}, LIMITS, 10162, ""),
    ("wq push ack none", {"deliver_subject": "out"}, WQ, 10098, "workqueue stream requires explicit ack"),
    ("wq deliver new", {"ack_policy": "explicit", "deliver_policy": "new"}, WQ, 10101, ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "fields", "stream", "err_code", "description"), BAD, ids=[b[0] for b in BAD]
)
def test_refusals(
    case: str, fields: dict[str, Any], stream: StreamConfig, err_code: int, description: str
) -> None:
    err = err_of(ConsumerConfig(**fields), stream)
    assert err.err_code == err_code, err
    if description:
        assert err.description == description


def test_filters_that_can_match_the_stream_are_fine() -> None:
    # 2.10 is liberal: a filter only has to be able to match something the stream stores
    assert ok(ConsumerConfig(filter_subject="*.x")).filter_subject == "*.x"
    assert ok(ConsumerConfig(filter_subjects=["s.a", "s.b"])).filters == ["s.a", "s.b"]


# -- work queues ---------------------------------------------------------------------------------


def wq(filter_subject: str = "", **fields: Any) -> ConsumerConfig:
    return ConsumerConfig(ack_policy="explicit", filter_subject=filter_subject, **fields)


def test_work_queue_partitions() -> None:
    first = ok(wq(durable_name="a"), WQ)
    assert ok(wq("w.b", durable_name="b"), WQ, others=[]).filter_subject == "w.b"
    # an unfiltered consumer owns everything
    assert err_of(wq("w.b"), WQ, others=[first]).err_code == 10100
    assert err_of(wq(), WQ, others=[ok(wq("w.a"), WQ)]).err_code == 10099
    a = ok(wq("w.a.>"), WQ)
    assert err_of(wq("w.a.b"), WQ, others=[a]).err_code == 10100
    assert err_of(wq("w.>"), WQ, others=[a]).err_code == 10100
    assert ok(wq("w.b.>"), WQ, others=[a]).filter_subject == "w.b.>"
    # overlapping but neither a subset of the other: nats-server lets these share the queue
    assert ok(wq("w.*.x"), WQ, others=[ok(wq("w.y.*"), WQ)]).filter_subject == "w.*.x"
    # internal (direct) consumers do not take part
    assert ok(wq("w.a.x"), WQ, others=[replace(a, direct=True)]).filter_subject == "w.a.x"


def test_interest_stream_replicas_must_match() -> None:
    assert ok(ConsumerConfig(num_replicas=1), INTEREST).num_replicas == 1


# -- updates -------------------------------------------------------------------------------------


def test_update_allows_mutable_fields() -> None:
    old = ok(ConsumerConfig(durable_name="d", ack_policy="explicit", filter_subject="s.a"))
    new = ok(
        replace(old, description="x", max_ack_pending=5, filter_subject="s.b", max_deliver=9, ack_wait=S)
    )
    assert check_consumer_update(old, new) == new
    assert check_consumer_update(old, old) == old
    same_time = ok(ConsumerConfig(deliver_policy="by_start_time", opt_start_time="2024-01-01T01:00:00+01:00"))
    assert check_consumer_update(same_time, replace(same_time, opt_start_time="2024-01-01T00:00:00Z"))


UPDATE_BAD: list[tuple[dict[str, Any], str]] = [
    ({"deliver_policy": "new"}, "deliver policy can not be updated"),
    ({"mem_storage": True}, "storage type can not be updated"),
    ({"ack_policy": "all"}, "ack policy can not be updated"),
    ({"replay_policy": "original"}, "replay policy can not be updated"),
    ({"deliver_subject": "out"}, "can not update pull consumer to push based"),
    ({"max_waiting": 10}, "max waiting can not be updated"),
]


@pytest.mark.parametrize(("fields", "description"), UPDATE_BAD)
def test_update_refusals(fields: dict[str, Any], description: str) -> None:
    old = ok(ConsumerConfig(durable_name="d", ack_policy="explicit"))
    with pytest.raises(ApiError) as exc:
        check_consumer_update(old, replace(old, **fields))
    assert (exc.value.err_code, exc.value.description) == (10012, description)


def test_push_update_rules() -> None:
    old = ok(ConsumerConfig(durable_name="p", deliver_subject="out", idle_heartbeat=S, flow_control=True))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"idle_heartbeat": 2 * S}, "heart beats can not be updated"),
        ({"flow_control": False}, "flow control can not be updated"),
        ({"deliver_subject": ""}, "can not update push consumer to pull based"),
    ]
    for fields, text in cases:
        with pytest.raises(ApiError) as exc:
            check_consumer_update(old, replace(old, **fields))
        assert exc.value.description == text
    moved = replace(old, deliver_subject="elsewhere")
    assert check_consumer_update(old, moved) == moved
    with pytest.raises(ApiError) as exc:
        check_consumer_update(old, moved, deliver_subject_bound=True)
    assert exc.value.err_code == 10013
    with pytest.raises(ApiError) as exc:
        check_consumer_update(old, replace(old, backoff=[S, S], max_deliver=1))
    assert exc.value.err_code == 10116
