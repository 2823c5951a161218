"""Subject rules: validation (str and the protocol's byte twins), matching, subset and overlap."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.subjects import (
    is_literal,
    is_valid_literal_subject,
    is_valid_subject,
    subject_is_subset,
    subject_matches,
    subjects_overlap,
    tokens,
    valid_literal_bytes,
    valid_sub_bytes,
    valid_subject_bytes,
)

VALID_FILTERS = [
    "foo",
    "foo.bar",
    "*",
    ">",
    "foo.*",
    "foo.>",
    "*.bar.>",
    "$JS.API.>",
    "a.*.c",
    "foo*.bar",
    "f>o",
]
INVALID = [
    "",
    ".",
    "foo.",
    ".foo",
    "foo..bar",
    "foo.>.bar",
    ">.foo",
    "fo o",
    "foo\t",
    "a\r.b",
    "a.\n",
    "a\fb",
]


@pytest.mark.parametrize("subject", VALID_FILTERS)
def test_valid_filters(subject: str) -> None:
    assert is_valid_subject(subject)
    assert valid_subject_bytes(subject.encode())
    assert valid_sub_bytes(subject.encode())


@pytest.mark.parametrize("subject", INVALID)
def test_invalid_subjects(subject: str) -> None:
    assert not is_valid_subject(subject)
    assert not is_valid_literal_subject(subject)
    assert not valid_subject_bytes(subject.encode())


def test_literal_subjects() -> None:
    for s in ("foo", "foo.bar", "foo*.bar", "a>b", "$JS.API.INFO"):
        assert is_valid_literal_subject(s)
        assert is_literal(s)
        assert valid_literal_bytes(s.encode())
        assert valid_subject_bytes(s.encode(), allow_wildcards=False)
    for s in ("*", "foo.*", ">", "foo.>", "a.*.b"):
        assert is_valid_subject(s)
        assert not is_valid_literal_subject(s)
        assert not is_literal(s)
        assert not valid_literal_bytes(s.encode())
        assert not valid_subject_bytes(s.encode(), allow_wildcards=False)


def test_protocol_checks_follow_nats_server() -> None:
    # a SUB subject: empty tokens and ">" before the end are refused; whitespace is not looked at
    for s in (b"", b".", b"a..b", b".a", b"a.", b"a.>.b", b">.a"):
        assert not valid_sub_bytes(s)
    for s in (b"a\x0cb", b"a.\x0c", b"\x0b", b"a.>", b">"):
        assert valid_sub_bytes(s)
    # a pedantic publish subject: no empty token, no wildcard token
    for s in (b"", b"a..b", b"a.*", b">", b"a.", b".a"):
        assert not valid_literal_bytes(s)
    for s in (b"a\x0cb", b"a*", b"a.b>"):
        assert valid_literal_bytes(s)


def test_tokens() -> None:
    assert tokens("a.b.c") == ["a", "b", "c"]
    assert tokens("a") == ["a"]


@pytest.mark.parametrize(
    ("filter_", "subject", "expected"),
    [
        ("foo", "foo", True),
        ("foo", "bar", False),
        ("foo.*", "foo.bar", True),
        ("foo.*", "foo", False),
        ("foo.*", "foo.bar.baz", False),
        ("foo.>", "foo.bar", True),
        ("foo.>", "foo.bar.baz", True),
        ("foo.>", "foo", False),
        (">", "anything.at.all", True),
        ("", "x", True),
        ("*.bar", "foo.bar", True),
        ("*.bar", "foo.baz", False),
        ("a.*.c.>", "a.b.c.d.e", True),
        ("a.*.c.>", "a.b.c", False),
        ("foo*", "foo", False),
        ("foo*", "foo*", True),
    ],
)
def test_subject_matches(filter_: str, subject: str, expected: bool) -> None:
    assert subject_matches(filter_, subject) is expected


@pytest.mark.parametrize(
    ("sub", "sup", "expected"),
    [
        ("foo.bar", "foo.*", True),
        ("foo.*", "foo.>", True),
        ("foo.>", "foo.*", False),
        ("foo.*", "foo.bar", False),
        ("foo.bar.baz", ">", True),
        ("foo", "foo", True),
        ("foo", "foo.>", False),
        ("foo.*.baz", "foo.>", True),
        ("*.*", "*.>", True),
    ],
)
def test_subject_is_subset(sub: str, sup: str, expected: bool) -> None:
    assert subject_is_subset(sub, sup) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("foo.*", "foo.bar", True),
        ("foo.*", "*.bar", True),
        ("foo.>", "foo", False),
        ("foo.>", "foo.a.b", True),
        ("foo.*", "bar.*", False),
        ("foo.*", "foo.*.x", False),
        (">", "x", True),
        ("a.b", "a.b", True),
    ],
)
def test_subjects_overlap(a: str, b: str, expected: bool) -> None:
    assert subjects_overlap(a, b) is expected
    assert subjects_overlap(b, a) is expected


# -- properties ---------------------------------------------------------------------------------

literal_token = st.sampled_from(["a", "b", "c", "foo"])
filter_token = st.sampled_from(["a", "b", "c", "foo", "*"])
literal = st.lists(literal_token, min_size=1, max_size=4).map(".".join)


@st.composite
def filter_subject(draw: st.DrawFn) -> str:
    toks = draw(st.lists(filter_token, min_size=1, max_size=4))
    if draw(st.booleans()):
        toks.append(">")
    return ".".join(toks)


def brute_match(filter_: str, subject: str) -> bool:
    regex = r"\.".join(
        "[^.]+" if t == "*" else "[^.]+(?:\\.[^.]+)*" if t == ">" else re.escape(t)
        for t in filter_.split(".")
    )
    return re.fullmatch(regex, subject) is not None


@settings(max_examples=300, deadline=None)
@given(filter_subject(), literal)
def test_matching_agrees_with_a_regex(filter_: str, subject: str) -> None:
    assert subject_matches(filter_, subject) is brute_match(filter_, subject)


@settings(max_examples=300, deadline=None)
@given(filter_subject(), filter_subject(), st.lists(literal, min_size=1, max_size=30))
def test_subset_and_overlap_are_consistent_with_matching(a: str, b: str, samples: list[str]) -> None:
    if subject_is_subset(a, b):
        for s in samples:
            if subject_matches(a, s):
                assert subject_matches(b, s)
    for s in samples:
        if subject_matches(a, s) and subject_matches(b, s):
            assert subjects_overlap(a, b)
