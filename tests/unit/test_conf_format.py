"""The nats-server configuration syntax: every form, includes, variables, sizes, error positions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.server.conf_format import (
    MAX_INCLUDE_DEPTH,
    ConfigError,
    ConfigList,
    ConfigMap,
    Position,
    parse_config_file,
    parse_config_text,
)

NO_ENV: dict[str, str] = {}


def parse(text: str, env: dict[str, str] | None = None) -> ConfigMap:
    return parse_config_text(text, "t.conf", env=NO_ENV if env is None else env)


def error_of(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text, env)
    return str(info.value)


# -- key/value separators, terminators, comments ---------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "port: 4222",
        "port = 4222",
        "port 4222",
        "port:4222",
        "port=4222",
        "  port \t:\t 4222  ",
        "port 4222;",
        "port: 4222,",
        "'port': 4222",
        '"port" = 4222',
        "port\n  4222",
    ],
)
def test_separators(text: str) -> None:
    assert parse(text) == {"port": 4222}


def test_several_entries_per_line_with_terminators() -> None:
    assert parse("a=1;b=2, c: 3\nd 4") == {"a": 1, "b": 2, "c": 3, "d": 4}


@pytest.mark.parametrize(
    "text",
    [
        "# only a comment",
        "// only a comment",
        "",
        "\n\n  \n",
        "a: 1 # trailing\n# full line\n// slashes\nb: 2 // trailing",
    ],
)
def test_comments(text: str) -> None:
    expected = {"a": 1, "b": 2} if "a:" in text else {}
    assert parse(text) == expected


def test_double_slash_inside_an_unquoted_value_is_not_a_comment() -> None:
    assert parse("a: x//y\nb: x //y") == {"a": "x//y", "b": "x"}


def test_json_file() -> None:
    text = '{"port": 4222, "debug": true, "authorization": {"users": [{"user": "a", "password": "b"}]}}'
    assert parse(text) == {
        "port": 4222,
        "debug": True,
        "authorization": {"users": [{"user": "a", "password": "b"}]},
    }
    assert parse('{\n  "port": 4222\n}\n') == {"port": 4222}


# -- maps and arrays ------------------------------------------------------------------------


def test_maps_nested_with_and_without_separator() -> None:
    text = "a { b { c: 1 } }\nd: { e = 2; f 3, }\ng = {\n  h: 4\n  i: 5\n}"
    assert parse(text) == {"a": {"b": {"c": 1}}, "d": {"e": 2, "f": 3}, "g": {"h": 4, "i": 5}}


def test_empty_map_and_array() -> None:
    assert parse("a {}\nb: []\nc: [\n]") == {"a": {}, "b": [], "c": []}


def test_arrays_comma_and_newline_separated() -> None:
    text = 'a: [1, 2, 3]\nb: [\n  x.y\n  z # comment\n  // another\n  "q",\n]\nc: [[1], {k: v}]'
    assert parse(text) == {"a": [1, 2, 3], "b": ["x.y", "z", "q"], "c": [[1], {"k": "v"}]}


def test_array_of_one_integer() -> None:
    # nats-server 2.9.10 rejects "[1]" (a lexer quirk); jetpy reads what was meant.
    assert parse("a: [1]") == {"a": [1]}


def test_maps_and_lists_carry_positions() -> None:
    conf = parse("a: 1\nb {\n  c: [x,\n    y]\n}")
    assert conf.position("a") == Position("t.conf", 1, 1)
    inner = conf["b"]
    assert isinstance(inner, ConfigMap)
    assert inner.position("c") == Position("t.conf", 3, 3)
    items = inner["c"]
    assert isinstance(items, ConfigList)
    assert items.positions == [Position("t.conf", 3, 7), Position("t.conf", 4, 5)]
    assert str(inner.position("c")) == "t.conf:3:3"


# -- strings ---------------------------------------------------------------------------------


def test_double_quoted_escapes() -> None:
    assert parse(r'a: "t\tn\nr\rq\"b\\x\x41"') == {"a": 't\tn\nr\rq"b\\xA'}


def test_single_quoted_is_raw() -> None:
    assert parse(r"a: 'x\ty" + '"' + "'") == {"a": 'x\\ty"'}


def test_unquoted_strings() -> None:
    conf = parse("a: hello\nb: nats://host:4222\nc: a\\x41b\nd: /var/lib/x.y")
    assert conf == {"a": "hello", "b": "nats://host:4222", "c": "aAb", "d": "/var/lib/x.y"}


def test_block_string() -> None:
    assert parse("a: (\nline one\n  ) not the end\n)\nb: 1") == {"a": "\nline one\n  ) not the end\n", "b": 1}


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("No", False),
        ("off", False),
    ],
)
def test_booleans(word: str, value: bool) -> None:
    assert parse(f"a: {word}") == {"a": value}


def test_quoted_boolean_words_stay_strings() -> None:
    assert parse("a: \"true\"\nb: 'off'") == {"a": "true", "b": "off"}


# -- numbers, sizes, durations, addresses, datetimes ----------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("-7", -7),
        ("007", 7),
        ("1.5", 1.5),
        ("-0.25", -0.25),
        ("1k", 1000),
        ("1K", 1000),
        ("1kb", 1024),
        ("1KB", 1024),
        ("1KiB", 1024),
        ("2kib", 2048),
        ("1m", 1_000_000),
        ("1MB", 1024**2),
        ("1mib", 1024**2),
        ("1g", 10**9),
        ("1G", 10**9),
        ("1GB", 1024**3),
        ("1t", 10**12),
        ("1TB", 1024**4),
        ("1p", 10**15),
        ("1PB", 1024**5),
        ("1e", 10**18),
        ("1EB", 1024**6),
        ("-1K", -1000),
        ("64MB", 64 * 1024**2),
    ],
)
def test_integers_floats_and_sizes(text: str, value: float) -> None:
    assert parse(f"a: {text}") == {"a": value}


@pytest.mark.parametrize("text", ["10s", "1h30m", "250ms", "12abc", "1kx", "1kbx", "12:30", "1_000"])
def test_tokens_starting_with_digits_but_not_numbers_are_strings(text: str) -> None:
    # durations are strings, quoted or not: "2m" unquoted would be the size 2,000,000 instead
    assert parse(f"a: {text}") == {"a": text}
    assert parse(f'a: "{text}"') == {"a": text}


def test_unquoted_2m_is_a_size_not_a_duration() -> None:
    assert parse("a: 2m") == {"a": 2_000_000}


@pytest.mark.parametrize("text", ["1.2.3", "127.0.0.1:4222", "10.0.0.1-2:5"])
def test_dotted_addresses_are_strings(text: str) -> None:
    assert parse(f"a: {text}") == {"a": text}


def test_datetime() -> None:
    assert parse("a: 2020-01-02T03:04:05Z") == {"a": datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: 99999999999999999999", "out of the 64-bit range"),
        ("a: 9EB", "out of the 64-bit range"),
        ("a: 5kbib", "invalid size suffix 'kbib'"),
        ("a: 5mb7", "must end with a new line"),
        ("a: 1.", "floats must have a digit after the '.'"),
        ("a: .5", "floats must start with a digit"),
        ("a: -x", "expected a digit after '-'"),
        ("a: 2020-01", "expected a Zulu datetime"),
        ("a: 20-01", "full Zulu form"),
        ("a: 1.5s", "must end with a new line"),
    ],
)
def test_number_errors(text: str, fragment: str) -> None:
    assert fragment in error_of(text)


# -- variables -------------------------------------------------------------------------------


def test_variable_from_file_and_block_scope() -> None:
    conf = parse("A = 1\nA = 2\nb: $A\nm { C = x, d: $C, e: $A }\nf: [$A]")
    assert conf["b"] == 2
    assert conf["m"] == {"C": "x", "d": "x", "e": 2}
    assert conf["f"] == [2]
    assert conf.variables_used == {"A"}
    assert conf["m"].variables_used == {"C"}


def test_inner_scope_shadows_outer() -> None:
    assert parse("X = outer\nm { X = inner, y: $X }\nz: $X")["m"]["y"] == "inner"


def test_variable_defined_later_is_not_visible() -> None:
    assert "'A' can not be found" in error_of("b: $A\nA = 1")


def test_inner_variable_is_not_visible_outside() -> None:
    assert "'C' can not be found" in error_of("m { C = 1 }\nb: $C")


def test_environment_variable_is_parsed_as_a_value() -> None:
    env = {"NAME": "srv", "SIZE": "2k", "FLAG": "true", "LIST": "[a, b]", "REF": "$NAME"}
    conf = parse("a: $NAME\nb: $SIZE\nc: $FLAG\nd: $LIST\ne: $REF", env)
    assert conf == {"a": "srv", "b": 2000, "c": True, "d": ["a", "b"], "e": "srv"}


def test_file_variable_wins_over_environment() -> None:
    assert parse("NAME = file\na: $NAME", {"NAME": "env"})["a"] == "file"


def test_environment_is_used_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JETPY_TEST_CONF_VAR", "42")
    assert parse_config_text("a: $JETPY_TEST_CONF_VAR") == {"a": 42}


def test_undefined_variable_names_file_line_column() -> None:
    message = error_of("a: 1\nb: $NOPE")
    assert message.startswith("t.conf:2:4: ")
    assert "'NOPE' can not be found" in message


def test_unparsable_environment_variable() -> None:
    assert "'BAD' could not be parsed" in error_of("a: $BAD", {"BAD": "x y"})


def test_self_referencing_environment_variable_is_stopped() -> None:
    assert "levels deep" in error_of("a: $LOOP", {"LOOP": "$LOOP"})


@pytest.mark.parametrize("text", ["$2a$10$abcdefgh", "$2b$12$xyz", "$2y$04$q"])
def test_bcrypt_hashes_are_not_variables(text: str) -> None:
    assert parse(f"password: {text}") == {"password": text}


def test_quoted_dollar_is_literal() -> None:
    assert parse('a: "$HOME"', {"HOME": "/root"}) == {"a": "$HOME"}


# -- includes --------------------------------------------------------------------------------


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_include_forms_and_relative_paths(tmp_path: Path) -> None:
    write(tmp_path / "conf" / "sub" / "users.conf", "users = [ {user: a, password: b} ]\n")
    write(tmp_path / "conf" / "sub" / "nested.conf", "include ../leaf.conf\nmid: 2\n")
    write(tmp_path / "conf" / "leaf.conf", "leaf: 3\n")
    write(tmp_path / "conf" / "q.conf", "q: 4\n")
    main = write(
        tmp_path / "conf" / "main.conf",
        "top: 1\ninclude ./sub/nested.conf\nINCLUDE 'q.conf'\n"
        'authorization {\n  include "sub/users.conf"\n}\n',
    )
    conf = parse_config_file(main, env=NO_ENV)
    assert conf == {
        "top": 1,
        "leaf": 3,
        "mid": 2,
        "q": 4,
        "authorization": {"users": [{"user": "a", "password": "b"}]},
    }
    # positions point into the file a key came from
    assert conf.position("leaf") == Position(str(tmp_path / "conf" / "leaf.conf"), 1, 1)


def test_include_then_override_and_variables_flow_out(tmp_path: Path) -> None:
    write(tmp_path / "vars.conf", "NAME = from_include\nport: 1\n")
    main = write(tmp_path / "main.conf", "include vars.conf; port: 2\nserver_name: $NAME\n")
    conf = parse_config_file(main, env=NO_ENV)
    assert conf["port"] == 2
    assert conf["server_name"] == "from_include"


def test_included_file_does_not_see_includer_variables(tmp_path: Path) -> None:
    # nats-server parses an include on its own; only the environment is shared
    write(tmp_path / "inner.conf", "server_name: $OUTER\n")
    main = write(tmp_path / "main.conf", "OUTER = o\ninclude inner.conf\n")
    with pytest.raises(ConfigError, match="'OUTER' can not be found"):
        parse_config_file(main, env=NO_ENV)
    assert parse_config_file(main, env={"OUTER": "env"})["server_name"] == "env"


def test_include_missing_file(tmp_path: Path) -> None:
    main = write(tmp_path / "main.conf", "a: 1\ninclude missing.conf\n")
    with pytest.raises(ConfigError) as info:
        parse_config_file(main, env=NO_ENV)
    assert str(info.value).startswith(f"{main}:2:1: error in included file 'missing.conf'")
    assert "cannot read" in str(info.value)


def test_error_inside_included_file_names_both_files(tmp_path: Path) -> None:
    inner = write(tmp_path / "inner.conf", "a: 1\nb: [1,,2]\n")
    main = write(tmp_path / "main.conf", "include inner.conf\n")
    with pytest.raises(ConfigError) as info:
        parse_config_file(main, env=NO_ENV)
    assert f"{main}:1:1:" in str(info.value)
    assert f"{inner}:2:7:" in str(info.value)


def test_include_cycle(tmp_path: Path) -> None:
    write(tmp_path / "b.conf", "include a.conf\n")
    main = write(tmp_path / "a.conf", "include b.conf\n")
    with pytest.raises(ConfigError, match="include cycle"):
        parse_config_file(main, env=NO_ENV)


def test_include_depth_limit(tmp_path: Path) -> None:
    for i in range(MAX_INCLUDE_DEPTH + 1):
        write(tmp_path / f"f{i}.conf", f"include f{i + 1}.conf\n")
    write(tmp_path / f"f{MAX_INCLUDE_DEPTH + 1}.conf", "a: 1\n")
    with pytest.raises(ConfigError, match="nested deeper"):
        parse_config_file(str(tmp_path / "f0.conf"), env=NO_ENV)
    assert parse_config_file(str(tmp_path / "f2.conf"), env=NO_ENV) == {"a": 1}


@pytest.mark.parametrize("text", ["include\n", "include [a]", "include 5.conf"])
def test_include_needs_a_file_name(text: str) -> None:
    assert "include" in error_of(text)


def test_include_as_a_key_with_separator_is_just_a_key() -> None:
    assert parse("include: x") == {"include": "x"}


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        parse_config_file("/nonexistent/jetpy.conf")


# -- syntax errors name file:line:column ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("a: 1 b: 2", "t.conf:1:6", "must end with a new line"),
        ("a {\n  b: 1 c: 2\n}", "t.conf:2:8", "a map value must end"),
        ("a: [1 2]", "t.conf:1:7", "expected ',' or ']'"),
        ("a: [1,,2]", "t.conf:1:7", "unexpected ','"),
        ("a: [,1]", "t.conf:1:5", "unexpected ','"),
        ("x {\n  a: 1\n", "t.conf:3:1", "missing '}'"),
        ("a: [1,\n2", "t.conf:2:2", "but found end of file"),
        ("a: [1,\n", "t.conf:2:1", "end of file in the array"),
        ('a: "abc', "t.conf:1:8", "unterminated string"),
        ("a: 'abc", "t.conf:1:4", "unterminated single-quoted"),
        ("a: (\nabc", "t.conf:1:4", "unterminated block string"),
        (r'a: "\q"', "t.conf:1:6", "invalid escape character 'q'"),
        (r'a: "\xZZ"', "t.conf:1:6", "two hexadecimal digits"),
        ("a:\n  1", "t.conf:1:3", "expected a value for key 'a'"),
        ("debug", "t.conf:1:1", "key 'debug' has no value"),
        ("a { b }", "t.conf:1:7", "expected a value"),
        ("= 1", "t.conf:1:1", "unexpected '='"),
        ('"a: 1', "t.conf:1:1", "unterminated quoted key"),
    ],
)
def test_syntax_errors(text: str, where: str, fragment: str) -> None:
    message = error_of(text)
    assert message.startswith(where + ": "), message
    assert fragment in message


def test_nesting_limit() -> None:
    assert "nested deeper" in error_of("a: " + "[" * 100 + "]" * 100)


def test_errors_carry_a_position_object() -> None:
    with pytest.raises(ConfigError) as info:
        parse("a: 1\n  b: [")
    assert info.value.position is not None
    assert info.value.position.line == 2


def test_config_map_equals_plain_dict() -> None:
    conf: Any = parse("a: 1")
    assert conf == {"a": 1}
    assert isinstance(conf, dict)


# -- robustness ------------------------------------------------------------------------------

FUZZ_ALPHABET = " \t\n\r{}[]()=:;,#/\"'\\$-.0123456789kKmMbBiIxXeEtTzZaoyn_"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=FUZZ_ALPHABET, max_size=60))
def test_only_config_error_escapes_the_parser(text: str) -> None:
    try:
        result = parse_config_text(text, "fuzz.conf", env={"a": "1", "n": "$a"})
    except ConfigError as e:
        assert str(e).startswith("fuzz.conf:")
    else:
        assert isinstance(result, ConfigMap)
