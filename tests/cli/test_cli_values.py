"""The pure parts of the CLI: durations, sizes, names and body templates (in-process, no server)."""

from __future__ import annotations

import re

import pytest

from jetpy.cli import values as V
from jetpy.cli.templates import Template

S = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1d", 86400 * S),
        ("1h30m", 5400 * S),
        ("250ms", 250_000_000),
        ("90", 90 * S),
        ("0", 0),
        ("-1", 0),
        ("1w", 7 * 86400 * S),
        ("1y", 365 * 86400 * S),
        ("1.5s", 1_500_000_000),
    ],
)
def test_parse_duration(text: str, ns: int) -> None:
    assert V.parse_duration(text) == ns


@pytest.mark.parametrize("text", ["", "1q", "d1", "1h x", "abc", "1d-"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        V.parse_duration(text)


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("1024", 1024),
        ("1KB", 1024),
        ("1k", 1024),
        ("1.5MiB", 1536 * 1024),
        ("2GB", 2 * 1024**3),
        ("-1", -1),
        (-1, -1),
        (10, 10),
    ],
)
def test_parse_size(text: str | int, n: int) -> None:
    assert V.parse_size(text) == n


@pytest.mark.parametrize("text", ["1XB", "many", "-2", -5])
def test_parse_size_rejects(text: str | int) -> None:
    with pytest.raises(ValueError):
        V.parse_size(text)


def test_formatting_round_trips_common_values() -> None:
    assert V.format_duration(86400 * S) == "1d"
    assert V.format_duration(5400 * S) == "1h30m"
    assert V.format_duration(250_000_000) == "250ms"
    assert V.format_duration(0) == "unlimited"
    assert V.format_bytes(-1) == "unlimited"
    assert V.format_bytes(512) == "512 B"
    assert V.format_bytes(1536) == "1.5 KiB"
    assert V.format_count(1234567) == "1,234,567"
    assert V.format_time("2024-05-01T12:00:00.123456789Z") == "2024-05-01 12:00:00"
    assert V.format_time("0001-01-01T00:00:00Z") == "never"


@pytest.mark.parametrize("name", ["ORDERS", "a-b_c", "x1"])
def test_valid_stream_names(name: str) -> None:
    assert V.check_stream_name(name) == name


@pytest.mark.parametrize("name", ["", "a.b", "a b", "a*", "a>", "a/b", "x" * 256])
def test_invalid_stream_names(name: str) -> None:
    with pytest.raises(ValueError):
        V.check_stream_name(name)


def test_bucket_and_key_rules_follow_the_kv_convention() -> None:
    assert V.check_bucket("CONFIG_1-a") == "CONFIG_1-a"
    for bad in ("a.b", "a b", "", "ä"):
        with pytest.raises(ValueError):
            V.check_bucket(bad)
    assert V.check_key("app.color/x=1") == "app.color/x=1"
    for bad in (".a", "a.", "a b", "a*", ""):
        with pytest.raises(ValueError):
            V.check_key(bad)
    assert V.check_key_pattern("app.*") == "app.*"
    assert V.check_key_pattern("app.>") == "app.>"
    with pytest.raises(ValueError):
        V.check_key_pattern("app.>.x")


def test_subjects() -> None:
    assert V.check_subject("logs.>") == "logs.>"
    assert V.check_pub_subject("logs.app") == "logs.app"
    for bad in ("a..b", "a b", ">.a", "a.b*", ""):
        with pytest.raises(ValueError):
            V.check_subject(bad)
    with pytest.raises(ValueError, match="wildcard"):
        V.check_pub_subject("a.*")


def test_templates_render_each_message() -> None:
    t = Template("n={{Count}} id={{ID}} r={{Random 3 3}} go={{.Count}} sp={{ Count }}")
    a, b = t.render(1).decode(), t.render(2).decode()
    assert re.fullmatch(r"n=1 id=[0-9A-F]{22} r=[A-Za-z0-9]{3} go=1 sp=1", a)
    assert b.startswith("n=2 ")
    assert a.split()[1] != b.split()[1]  # unique ids
    ts = Template("{{TimeStamp}} {{Unix}} {{UnixNano}} {{Time}}").render(1).decode().split()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", ts[0])
    assert ts[1].isdigit() and ts[2].isdigit() and re.fullmatch(r"\d\d:\d\d:\d\d", ts[3])
    assert Template("plain").render(5) == b"plain"
    assert Template("got {{Request}}", allow_request=True).render(1, b"ping") == b"got ping"


@pytest.mark.parametrize("bad", ["{{Nope}}", "{{Random 1}}", "{{Random 5 1}}", "{{Count 3}}", "{{Request}}"])
def test_templates_reject_unknown_or_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        Template(bad)
