"""The pure parts of `jetpy bench`: option validation and modes, count splitting, sizes, statistics."""

from __future__ import annotations

import json

import pytest

from jetpy.bench.options import BenchOptions, ConsumerKind, Mode, OptionsError, parse_size, split
from jetpy.bench.stats import BenchResult, ClientSample, Latency, SideStats, percentile


def test_split_is_exact_and_front_loaded() -> None:
    assert split(10, 3) == [4, 3, 3]
    assert split(2, 3) == [1, 1, 0]
    assert sum(split(1_000_001, 7)) == 1_000_001
    assert split(5, 0) == []


@pytest.mark.parametrize(
    ("text", "size"), [("0", 0), ("128", 128), ("1K", 1024), ("1KB", 1024), ("2KiB", 2048), ("1MB", 1 << 20)]
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_parse_size_rejects_junk() -> None:
    with pytest.raises(OptionsError):
        parse_size("12 parsecs")


@pytest.mark.parametrize(
    ("kwargs", "mode", "expected_received"),
    [
        ({}, Mode.PUB, 0),
        ({"subs": 2}, Mode.PUBSUB, 200),
        ({"request": True, "subs": 3}, Mode.REQUEST, 0),
        ({"js": True}, Mode.JS_PUB, 0),
        ({"js": True, "subs": 2}, Mode.JS_PUBSUB, 200),
        ({"js": True, "subs": 2, "consumer": ConsumerKind.PULL}, Mode.JS_PUBSUB, 100),
        ({"js": True, "pubs": 0, "subs": 1}, Mode.JS_CONSUME, 100),
    ],
)
def test_modes(kwargs: dict[str, object], mode: Mode, expected_received: int) -> None:
    opts = BenchOptions(subject="s", msgs=100, **kwargs)  # type: ignore[arg-type]
    assert opts.mode is mode
    assert opts.expected_received == expected_received


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pubs": 0},
        {"request": True, "js": True},
        {"msgs": 0},
        {"subject": "has space"},
        {"js": True, "pubs": 0, "subs": 0},
        {"timeout": 0},
    ],
)
def test_invalid_options(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"subject": "s", **kwargs}
    with pytest.raises(OptionsError):
        BenchOptions(**args)  # type: ignore[arg-type]


def test_percentiles_follow_natsbench() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.5) == 50  # index int(0.5 * 99) = 49
    assert percentile(values, 0.99) == 99
    assert percentile([], 0.5) == 0
    lat = Latency.from_ns([3000, 1000, 2000])
    assert lat is not None
    assert (lat.p50_us, lat.max_us, lat.count) == (2.0, 3.0, 3)
    assert Latency.from_ns([]) is None


def test_result_json_is_one_line_with_rates() -> None:
    opts = BenchOptions(subject="s", msgs=1000, size=100, subs=1)
    pub = SideStats((ClientSample(1000, 0.5, 100),), 0.5, 100)
    sub = SideStats((ClientSample(1000, 1.0, 100),), 1.0, 100)
    result = BenchResult(opts, "nats://x", 1.0, pub, sub, None, 0, True)
    text = result.to_json()
    assert "\n" not in text
    doc = json.loads(text)
    assert doc["pub"]["msgs_per_s"] == 2000.0
    assert doc["pub"]["mb_per_s"] == 0.2  # MB = 10^6 bytes
    assert doc["aggregate"] == {"msgs": 2000, "msgs_per_s": 2000.0, "mb_per_s": 0.2}
    assert doc["sub"]["client_msgs_per_s"]["stddev"] == 0.0
