"""Subject transform validity: destination tokens, mapping functions, wildcard indexes."""

from __future__ import annotations

import pytest

from jetpy.jetstream.transform import mapping_error, transform_error

VALID = [
    ("", ""),
    ("a.*", ""),
    ("a.*", "b.$1"),
    ("a.*.*", "b.{{wildcard(2)}}.{{ wildcard(1) }}"),
    ("a.*", "b.{{Wildcard(1)}}"),
    ("a.*", "b.{{partition(10,1)}}"),
    ("a", "b.{{partition(10)}}"),
    ("a.*", "b.{{splitFromLeft(1,2)}}"),
    ("a.*", "b.{{SliceFromRight(1,3)}}"),
    ("a.*", "b.{{split(1,-)}}"),
    ("a.*", "b.{{left(1,2)}}.{{right(1,2)}}"),
    ("a", "b.{{random(5)}}"),
    ("a.>", "b.>"),
    ("", "b.>"),  # empty source means ">"
    ("a.b", "c.d"),
]

INVALID = [
    ("a.*", "b..c", "invalid mapping destination: invalid transform"),
    ("a.*", "b.{{nope(1)}}", "invalid mapping destination: unknown function in {{nope(1)}}"),
    ("a.*", "b.{{wildcard(2)}}", "invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]"),
    ("a.*", "b.$2", "invalid mapping destination: wildcard index out of range in $2: [2]"),
    ("a", "b.{{wildcard(1)}}", "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}"),
    ("a.*", "b.{{wildcard()}}", "invalid mapping destination: not enough arguments passed to the function in {{wildcard()}}"),
    ("a.*", "b.{{wildcard(1,2)}}", "invalid mapping destination: too many arguments passed to the function in {{wildcard(1,2)}}"),
    ("a.*", "b.{{wildcard(x)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{wildcard(x)}}"),
    ("a.*", "b.{{split(1,a b)}}", "invalid mapping destination: function argument is invalid or in the wrong format in {{split(1,a b)}}"),
    ("a.*", "b.*", "invalid subject"),
    ("a.>", "b.c", "invalid subject"),
    ("a.*", "b.>.c", "invalid mapping destination: invalid transform in c"),
    ("a..b", "c", "invalid subject"),
]  # fmt: skip


@pytest.mark.parametrize(("src", "dest"), VALID)
def test_valid_mappings(src: str, dest: str) -> None:
    assert mapping_error(src, dest) is None


@pytest.mark.parametrize(("src", "dest", "text"), INVALID)
def test_invalid_mappings(src: str, dest: str, text: str) -> None:
    err = mapping_error(src, dest)
    assert err is not None
    assert str(err) == text


def test_transform_error_skips_token_shape_checks() -> None:
    # republish only builds the transform; "b..c" fails there as a bad subject
    err = transform_error("a.*", "b..c")
    assert err is not None and str(err) == "invalid subject"
