"""nats-server's configuration file format: text in, nested dicts out.

Owns the syntax only: ``key: value`` / ``key = value`` / ``key value``; ``{}`` maps and ``[]``
arrays; ``#`` and ``//`` comments; quoted, unquoted and ``(`` block ``)`` strings; integers with
size suffixes; floats; booleans; Zulu datetimes; ``include`` files; ``$VAR`` references. Every
value remembers the file, line and column it came from, so the layer above can name them in its
errors. Knows nothing of what any key means (that is ``config``) and never touches options.

The rules follow nats-server 2.9.10's lexer as observed by running it (``nats-server -t``):

* A key ends at whitespace, ``=`` or ``:``. Between key and value there may be one ``=``/``:``
  (then the value must follow on the same line) or just whitespace. Keys are case-sensitive here;
  ``config`` compares them case-insensitively, as nats-server does.
* A value ends at a newline, ``;``, ``,`` or a comment; at the top level also at ``}`` (so a file
  may be written as one JSON object). Arrays separate values by ``,`` or newlines and allow a
  trailing ``,``; maps separate entries by ``,``, ``;`` or newlines.
* Unquoted ``true/false/yes/no/on/off`` (any case) are booleans. ``"..."`` strings (and unquoted
  ones) understand ``\\t \\n \\r \\" \\\\ \\xHH``; ``'...'`` strings are raw. ``( ... )`` is a
  raw multi-line string closed by a ``)`` alone at the start of a line.
* A value starting with a digit is an integer, float, datetime or dotted address; if other
  letters follow (``10s``, ``1h30m``, ``12:30``) the whole token is an unquoted string. Size
  suffixes: ``k m g t p e`` are powers of 1000, ``kb/kib`` ... ``eb/eib`` powers of 1024, any case.
* ``$NAME`` looks NAME up in the enclosing maps, innermost first, then in the environment, whose
  value is parsed as a config value; an undefined one is an error. ``$2a$...`` (also ``$2b$``,
  ``$2y$``) is a bcrypt hash, kept as a string. A map records which of its keys were used as
  variables, because nats-server does not report those as unknown fields.
* ``include path`` parses another file (relative to the including file) on its own, with its own
  variables, and merges its keys into the enclosing map.

Deliberate differences: errors always carry ``file:line:column``; a key with no value, an unknown
size suffix (``5kbib``) or an integer overflowing 64 bits is an error (nats-server ignores the
first two and wraps the last); ``[1]`` is an array of one integer (2.9.10 rejects it).
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

__all__ = [
    "MAX_INCLUDE_DEPTH",
    "MAX_NESTING_DEPTH",
    "MAX_VARIABLE_DEPTH",
    "ConfigError",
    "ConfigList",
    "ConfigMap",
    "Position",
    "parse_config_file",
    "parse_config_text",
]

# Limits, each guarding recursion that a hostile or broken file could make unbounded.
MAX_INCLUDE_DEPTH = 16  # nested includes; cycles are reported separately, this stops long chains
MAX_VARIABLE_DEPTH = 16  # environment variables whose values reference further variables
MAX_NESTING_DEPTH = 64  # maps and arrays inside each other (Python's stack is the real limit)

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Size suffixes exactly as nats-server 2.9.10 reads them (verified against the binary):
# a bare letter is decimal, letter + "b"/"ib" is binary. Lower-cased before lookup.
SIZE_SUFFIXES: dict[str, int] = {}
for _power, _letter in enumerate("kmgtpe", start=1):
    SIZE_SUFFIXES[_letter] = 1000**_power
    SIZE_SUFFIXES[_letter + "b"] = 1024**_power
    SIZE_SUFFIXES[_letter + "ib"] = 1024**_power
    SIZE_SUFFIXES[_letter + "i"] = 1024**_power
del _power, _letter

BOOL_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
BCRYPT_PREFIXES = ("2a$", "2b$", "2y$")  # "$2a$..." unquoted is a hash, not a variable
ESCAPES = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
ENV_VALUE_KEY = "value"  # an environment variable's text is parsed as "value = <text>"

_T = TypeVar("_T")
_SPACE = " \t"
_NEWLINE = "\n\r"
_SIZE_LETTERS = "kmgtpeKMGTPE"
_SIZE_TAIL = "bBiI"
# What ends a number token; anything else turns the token into an unquoted string.
_NUMBER_END = _SPACE + _NEWLINE + ",;}]"
_DATETIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@dataclass(frozen=True, slots=True)
class Position:
    """Where a key or value starts: file (or other source name), 1-based line and column."""

    source: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.column}"


class ConfigError(Exception):
    """A configuration that cannot be used. ``str()`` starts with ``file:line:column`` if known."""

    def __init__(self, message: str, position: Position | None = None) -> None:
        self.message = message
        self.position = position
        super().__init__(f"{position}: {message}" if position is not None else message)


class ConfigMap(dict[str, Any]):
    """A ``{}`` block or a whole file: a dict that knows where each key was set.

    ``positions[key]`` is where the key was (last) written; ``variables_used`` holds the keys of
    this map that some ``$NAME`` referenced. Compares equal to a plain dict with the same items.
    """

    __slots__ = ("positions", "source", "variables_used")

    def __init__(self, source: str = "<string>") -> None:
        super().__init__()
        self.source = source
        self.positions: dict[str, Position] = {}
        self.variables_used: set[str] = set()

    def position(self, key: str) -> Position:
        """Where ``key`` was set (the start of the map's source if it was never set)."""
        return self.positions.get(key, Position(self.source, 1, 1))


class ConfigList(list[Any]):
    """An ``[]`` array; ``positions[i]`` is where item ``i`` starts."""

    __slots__ = ("positions",)

    def __init__(self) -> None:
        super().__init__()
        self.positions: list[Position] = []


def parse_config_file(path: str, *, env: Mapping[str, str] | None = None) -> ConfigMap:
    """Parse the file at ``path``; ``include`` paths are relative to its directory."""
    return _parse_file(path, env=os.environ if env is None else env, chain=())


def parse_config_text(
    text: str, source: str = "<string>", *, env: Mapping[str, str] | None = None
) -> ConfigMap:
    """Parse ``text``; ``source`` names it in errors and, if it is a path, anchors includes."""
    return _Parser(text, source, os.environ if env is None else env, chain=()).parse()


def _parse_file(path: str, *, env: Mapping[str, str], chain: tuple[str, ...]) -> ConfigMap:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read configuration file {path!r}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"configuration file {path!r} is not valid UTF-8: {e}") from e
    return _Parser(text, path, env, chain=(*chain, os.path.realpath(path))).parse()


class _Parser:
    """Recursive descent over the text with one cursor; the grammar needs no separate tokens."""

    def __init__(
        self,
        text: str,
        source: str,
        env: Mapping[str, str],
        *,
        chain: tuple[str, ...],
        variable_depth: int = 0,
    ) -> None:
        self.text = text
        self.source = source
        self.env = env
        self.chain = chain  # real paths of the files including this one, for cycle detection
        self.variable_depth = variable_depth
        self.pos = 0
        self.scopes: list[ConfigMap] = []  # maps being built, outermost first, for $NAME
        self.depth = 0
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    # -- positions and errors -------------------------------------------------------------

    def position(self, pos: int | None = None) -> Position:
        p = self.pos if pos is None else pos
        line = bisect.bisect_right(self._line_starts, p)
        return Position(self.source, line, p - self._line_starts[line - 1] + 1)

    def error(self, message: str, pos: int | None = None) -> ConfigError:
        return ConfigError(message, self.position(pos))

    def peek(self, offset: int = 0) -> str:
        """The character at the cursor, or "" at the end (mind that ``"" in "abc"`` is true)."""
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else ""

    @staticmethod
    def describe(ch: str) -> str:
        return {"": "end of file", "\n": "new line", "\r": "new line"}.get(ch, repr(ch))

    # -- layout -----------------------------------------------------------------------------

    def skip_spaces(self) -> None:
        while self.peek() and self.peek() in _SPACE:
            self.pos += 1

    def at_comment(self) -> bool:
        return self.peek() == "#" or (self.peek() == "/" and self.peek(1) == "/")

    def skip_comment(self) -> None:
        while self.peek() and self.peek() not in _NEWLINE:
            self.pos += 1

    def skip_blank(self) -> None:
        """Whitespace, new lines and comments, where a key or array item may start."""
        while True:
            ch = self.peek()
            if ch and ch.isspace():
                self.pos += 1
            elif self.at_comment():
                self.skip_comment()
            else:
                return

    # -- documents and maps -----------------------------------------------------------------

    def parse(self) -> ConfigMap:
        top = ConfigMap(self.source)
        self.scopes.append(top)
        self.parse_entries(top, top_level=True)
        return top

    def parse_entries(self, target: ConfigMap, *, top_level: bool) -> None:
        """Key/value entries up to EOF (top level) or the closing ``}`` (consumed)."""
        start = self.pos
        while True:
            self.skip_blank()
            ch = self.peek()
            if ch == "":
                if top_level:
                    return
                raise self.error(
                    f"unexpected end of file in a map opened at {self.position(start - 1)}; missing '}}'"
                )
            if ch == "}":
                self.pos += 1
                if not top_level:
                    return
                continue  # a file written as one JSON object: its braces are decoration
            if top_level and ch == "{":
                self.pos += 1
                continue
            if ch in "=:":
                raise self.error(f"unexpected {ch!r} where a key was expected")
            if not top_level and ch in ",]":
                raise self.error(f"unexpected {ch!r} where a key was expected")
            self.parse_entry(target)
            if self.end_of_value(top_level=top_level) and not top_level:
                return

    def end_of_value(self, *, top_level: bool) -> bool:
        """After a value: a separator or comment must follow. True if it was a closing ``}``."""
        self.skip_spaces()
        ch = self.peek()
        if self.at_comment():
            self.skip_comment()
            return False
        if ch == "" or ch in _NEWLINE or ch in ",;":
            if ch:
                self.pos += 1
            return False
        if ch == "}":
            self.pos += 1
            return True
        where = "a top-level value" if top_level else "a map value"
        raise self.error(
            f"{where} must end with a new line, ',', ';' or a comment, but found {self.describe(ch)}"
        )

    def parse_entry(self, target: ConfigMap) -> None:
        key_pos = self.pos
        quoted, key = self.parse_key()
        if not quoted and key.lower() == "include" and self.peek().isspace():
            self.parse_include(target, key_pos)
            return
        self.skip_spaces()
        saw_newline = False
        while self.peek().isspace():  # nats-server lets a value follow its key on the next line
            saw_newline = True
            self.pos += 1
        ch = self.peek()
        if ch in "=:" and ch:
            self.pos += 1
            self.skip_spaces()
            if self.peek() in _NEWLINE:  # also true at the end of the text
                raise self.error(f"expected a value for key {key!r} but found {self.describe(self.peek())}")
        elif ch == "" or (saw_newline and self.at_comment()):
            raise self.error(f"key {key!r} has no value", key_pos)
        value = self.parse_value()
        target[key] = value
        target.positions[key] = self.position(key_pos)

    def parse_key(self) -> tuple[bool, str]:
        quote = self.peek()
        if quote in "\"'":
            start = self.pos + 1
            end = self.text.find(quote, start)
            newline = self.text.find("\n", start)
            if end < 0 or (0 <= newline < end):
                raise self.error("unterminated quoted key")
            self.pos = end + 1
            return True, self.text[start:end]
        start = self.pos
        while self.peek() and not self.peek().isspace() and self.peek() not in "=:":
            self.pos += 1
        return False, self.text[start : self.pos]

    def parse_include(self, target: ConfigMap, key_pos: int) -> None:
        self.skip_spaces()
        ch = self.peek()
        if ch in _NEWLINE or not ch:
            raise self.error("expected a file name after 'include'")
        if ch in "\"'":
            start = self.pos + 1
            end = self.text.find(ch, start)
            if end < 0:
                raise self.error("unterminated quoted include path")
            path, self.pos = self.text[start:end], end + 1
        elif ch in "[{(-\\" or ch.isdigit():
            raise self.error(f"expected a file name after 'include', found {ch!r}")
        else:
            start = self.pos
            while self.peek() and not self.peek().isspace() and self.peek() not in ";}'":
                self.pos += 1
            path = self.text[start : self.pos]
            if self.peek() == "'":
                self.pos += 1
        where = self.position(key_pos)
        full = os.path.normpath(os.path.join(os.path.dirname(self.source), path))
        if len(self.chain) >= MAX_INCLUDE_DEPTH:
            raise ConfigError(f"includes nested deeper than {MAX_INCLUDE_DEPTH} levels", where)
        if os.path.realpath(full) in self.chain:
            raise ConfigError(f"include cycle: {path!r} includes itself", where)
        try:
            included = _parse_file(full, env=self.env, chain=self.chain or (os.path.realpath(self.source),))
        except ConfigError as e:
            raise ConfigError(f"error in included file {path!r}: {e}", where) from e
        for k, v in included.items():
            target[k] = v
            target.positions[k] = included.positions[k]
        target.variables_used |= included.variables_used

    # -- values -------------------------------------------------------------------------------

    def parse_value(self) -> Any:
        ch = self.peek()
        start = self.pos
        if ch == "[":
            return self.nested(self.parse_array)
        if ch == "{":
            return self.nested(self.parse_map)
        if ch == "'":
            end = self.text.find("'", start + 1)
            if end < 0:
                raise self.error("unterminated single-quoted string")
            self.pos = end + 1
            return self.text[start + 1 : end]
        if ch == '"':
            self.pos += 1
            return self.parse_double_quoted()
        if ch == "(":
            return self.parse_block_string()
        if ch == "-":
            self.pos += 1
            if not self.peek().isdigit():
                raise self.error(f"expected a digit after '-', found {self.describe(self.peek())}")
            return self.parse_number(start, negative=True)
        if ch.isdigit():
            return self.parse_number(start, negative=False)
        if ch == ".":
            raise self.error("floats must start with a digit")
        if ch in _NEWLINE or not ch:
            raise self.error(f"expected a value but found {self.describe(ch)}")
        return self.parse_unquoted(start)

    def nested(self, parse: Callable[[], _T]) -> _T:
        self.depth += 1
        if self.depth > MAX_NESTING_DEPTH:
            raise self.error(f"maps and arrays nested deeper than {MAX_NESTING_DEPTH} levels")
        try:
            return parse()
        finally:
            self.depth -= 1

    def parse_map(self) -> ConfigMap:
        self.pos += 1  # "{"
        m = ConfigMap(self.source)
        self.scopes.append(m)
        try:
            self.parse_entries(m, top_level=False)
        finally:
            self.scopes.pop()
        return m

    def parse_array(self) -> ConfigList:
        open_pos = self.pos
        self.pos += 1  # "["
        items = ConfigList()
        while True:
            self.skip_blank()
            ch = self.peek()
            if ch == "]":
                self.pos += 1
                return items
            if ch == "":
                raise self.error(f"unexpected end of file in the array opened at {self.position(open_pos)}")
            if ch == ",":
                raise self.error("unexpected ',' in an array (empty item)")
            items.positions.append(self.position())
            items.append(self.parse_value())
            self.skip_spaces()
            if self.at_comment():
                self.skip_comment()
            ch = self.peek()
            if ch == "]":
                self.pos += 1
                return items
            if ch == "," or (ch and ch in _NEWLINE):
                self.pos += 1
                continue
            raise self.error(f"expected ',' or ']' after an array item, but found {self.describe(ch)}")

    def parse_double_quoted(self) -> str:
        start = self.pos - 1
        parts: list[str] = []
        while True:
            ch = self.peek()
            if ch == "":
                raise self.error(f"unterminated string starting at {self.position(start)}")
            self.pos += 1
            if ch == '"':
                return "".join(parts)
            parts.append(self.parse_escape() if ch == "\\" else ch)

    def parse_escape(self) -> str:
        """After a backslash: one of ``t n r " \\`` or ``xHH``."""
        ch = self.peek()
        if ch in ESCAPES and ch:
            self.pos += 1
            return ESCAPES[ch]
        if ch == "x":
            digits = self.text[self.pos + 1 : self.pos + 3]
            if len(digits) == 2 and all(c in "0123456789abcdefABCDEF" for c in digits):
                self.pos += 3
                return chr(int(digits, 16))
            raise self.error(f"expected two hexadecimal digits after '\\x', found {digits!r}")
        raise self.error(
            f'invalid escape character {self.describe(ch)}; only \\xHH, \\t, \\n, \\r, \\", \\\\ are allowed'
        )

    def parse_block_string(self) -> str:
        """``(`` ... ``)``: raw text up to a ``)`` alone at the start of a line."""
        open_pos = self.pos
        start = self.pos + 1
        i = start
        while True:
            close = self.text.find("\n)", i - 1)
            if close < 0:
                raise self.error(f"unterminated block string opened at {self.position(open_pos)}", open_pos)
            after = close + 2
            if after >= len(self.text) or self.text[after] in _NEWLINE:
                self.pos = after
                return self.text[start : close + 1]
            i = after

    def parse_unquoted(self, start: int) -> Any:
        parts: list[str] = []
        escaped = False
        while True:
            ch = self.peek()
            if ch == "" or ch in _SPACE or ch in _NEWLINE or ch in ",;]}":
                break
            self.pos += 1
            if ch == "'":  # nats-server ends an unquoted string at a quote, and drops the quote
                break
            if ch == "\\":
                escaped = True
                parts.append(self.parse_escape())
            else:
                parts.append(ch)
        word = "".join(parts)
        if not word and not escaped:
            raise self.error(f"expected a value but found {self.describe(self.peek())}", start)
        if escaped:
            return word
        if word.lower() in BOOL_WORDS:
            return BOOL_WORDS[word.lower()]
        if word.startswith("$"):
            return self.resolve_variable(word[1:], start)
        return word

    def parse_number(self, start: int, *, negative: bool) -> Any:
        """At the first digit (after any '-'): integer, sized integer, float, datetime or address."""
        text = self.text
        while self.peek().isdigit():
            self.pos += 1
        ch = self.peek()
        if ch == "-" and not negative:
            if self.pos - start != 4:
                raise self.error("dates must be in full Zulu form, like 2006-01-02T15:04:05Z")
            return self.parse_datetime(start)
        if ch == ".":
            self.pos += 1
            if not self.peek().isdigit():
                raise self.error(
                    f"floats must have a digit after the '.', found {self.describe(self.peek())}"
                )
            while self.peek().isdigit():
                self.pos += 1
            if self.peek() == ".":  # 1.2.3 or 127.0.0.1:4222: an address, kept as a string
                while self.peek() and (self.peek().isdigit() or self.peek() in ".:-"):
                    self.pos += 1
                return text[start : self.pos]
            return float(text[start : self.pos])
        if ch and ch in _SIZE_LETTERS:
            digits_end = self.pos
            self.pos += 1
            while self.peek() and self.peek() in _SIZE_TAIL:
                self.pos += 1
            nxt = self.peek()
            if negative or nxt == "" or nxt in _NUMBER_END or nxt.isdigit():
                return self.make_int(start, digits_end, text[digits_end : self.pos])
            self.pos = start  # "10ms", "1h30m": a string that happens to start with digits
            return self.parse_unquoted(start)
        if negative or ch == "" or ch in _NUMBER_END:
            return self.make_int(start, self.pos, "")
        self.pos = start
        return self.parse_unquoted(start)

    def make_int(self, start: int, digits_end: int, suffix: str) -> int:
        value = int(self.text[start:digits_end])
        if suffix:
            multiplier = SIZE_SUFFIXES.get(suffix.lower())
            if multiplier is None:
                raise self.error(
                    f"invalid size suffix {suffix!r} (use K, KB, M, MB, G, GB, T, TB, P, PB, E, EB)", start
                )
            value *= multiplier
        if not INT64_MIN <= value <= INT64_MAX:
            raise self.error(f"integer {self.text[start : self.pos]!r} is out of the 64-bit range", start)
        return value

    def parse_datetime(self, start: int) -> datetime:
        m = _DATETIME_RE.match(self.text, start)
        if m is None:
            raise self.error("expected a Zulu datetime like 2006-01-02T15:04:05Z", start)
        self.pos = m.end()
        try:
            return datetime.strptime(m.group(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError as e:
            raise self.error(f"invalid datetime {m.group()!r}: {e}", start) from e

    # -- variables ----------------------------------------------------------------------------

    def resolve_variable(self, name: str, start: int) -> Any:
        if name.startswith(BCRYPT_PREFIXES):
            return "$" + name
        for scope in reversed(self.scopes):
            if name in scope:
                scope.variables_used.add(name)
                return scope[name]
        if name in self.env:
            return self.parse_environment_value(name, start)
        raise self.error(
            f"variable reference for {name!r} can not be found "
            "(not defined earlier in this file, nor in the environment)",
            start,
        )

    def parse_environment_value(self, name: str, start: int) -> Any:
        if self.variable_depth >= MAX_VARIABLE_DEPTH:
            raise self.error(
                f"environment variable {name!r} references variables more than "
                f"{MAX_VARIABLE_DEPTH} levels deep (a cycle?)",
                start,
            )
        sub = _Parser(
            f"{ENV_VALUE_KEY} = {self.env[name]}",
            f"environment variable {name}",
            self.env,
            chain=self.chain,
            variable_depth=self.variable_depth + 1,
        )
        try:
            parsed = sub.parse()
        except ConfigError as e:
            raise self.error(f"variable reference for {name!r} could not be parsed: {e}", start) from e
        if ENV_VALUE_KEY not in parsed:
            raise self.error(f"environment variable {name!r} is empty", start)
        return parsed[ENV_VALUE_KEY]
