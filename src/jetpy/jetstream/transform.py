"""Validity of subject transforms (``src`` -> ``dest`` mappings), as nats-server judges them.

Owns the rules a stream's ``subject_transform``, ``republish`` and source/mirror
``subject_transforms`` must satisfy: destination tokens, the mapping functions
(``{{wildcard(1)}}``, ``$1``, ``{{partition(4,1,2)}}``, ``{{split(1,-)}}`` ...) and their argument
shapes, and that every wildcard index refers to a ``*`` of the source; and applying a valid
mapping to a subject. Knows nothing of configs.

Error texts follow nats-server's (``invalid mapping destination: ... in <token>``) because they
end up in API error descriptions. :class:`SubjectTransform` applies a valid mapping to subjects.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["SubjectTransform", "TransformError", "mapping_error", "transform_error"]

_DEST_ERR: Final = "invalid mapping destination"
_BAD_TRANSFORM: Final = f"{_DEST_ERR}: invalid transform"
_UNKNOWN_FUNCTION: Final = f"{_DEST_ERR}: unknown function"
_INDEX_OUT_OF_RANGE: Final = f"{_DEST_ERR}: wildcard index out of range"
_NOT_ENOUGH_ARGS: Final = f"{_DEST_ERR}: not enough arguments passed to the function"
_INVALID_ARG: Final = f"{_DEST_ERR}: function argument is invalid or in the wrong format"
_TOO_MANY_ARGS: Final = f"{_DEST_ERR}: too many arguments passed to the function"
_BAD_SUBJECT: Final = "invalid subject"
_WHITESPACE: Final = frozenset(" \t\n\f\r")
_MAX_INT32: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class TransformError:
    """Why a mapping is rejected; ``str()`` is nats-server's text."""

    reason: str
    token: str = ""

    def __str__(self) -> str:
        return f"{self.reason} in {self.token}" if self.token else self.reason


# -- mapping functions ---------------------------------------------------------------------------
# Argument shapes: "index" = one int (the wildcard), "index_int" = wildcard index + an int32,
# "partition" = count + wildcard indexes, "split" = index + a delimiter, "random" = an int32.
# nats-server matches the name with only each word's first letter case-insensitive.
_FUNCTIONS: Final[dict[str, str]] = {
    "partition": "partition",
    "wildcard": "index",
    "splitFromLeft": "index_int",
    "splitFromRight": "index_int",
    "sliceFromLeft": "index_int",
    "sliceFromRight": "index_int",
    "split": "split",
    "left": "index_int",
    "right": "index_int",
    "random": "random",
}


def _name_pattern(name: str) -> str:
    words = re.findall(r"[a-z]+|[A-Z][a-z]*", name)
    return "".join(f"[{w[0].lower()}{w[0].upper()}]{w[1:]}" for w in words)


_FUNCTION_RES: Final[list[tuple[re.Pattern[str], str]]] = [
    (re.compile(r"\{\{\s*" + _name_pattern(name) + r"\s*\((.*)\)\s*\}\}"), shape)
    for name, shape in _FUNCTIONS.items()
]
_ARG_SEP: Final = re.compile(r",\s*")


def _is_function_token(tok: str) -> bool:
    return len(tok) > 4 and tok.startswith("{{") and tok.endswith("}}")


def _int(text: str) -> int | None:
    text = text.strip(" ")
    try:
        return int(text, 10)
    except ValueError:
        return None


def _placeholders(tok: str) -> tuple[str, list[int]] | TransformError:
    """(kind, wildcard indexes) of one destination token; kind "" = literal token."""
    if len(tok) <= 1:
        return "", []
    if tok[0] == "$":
        idx = _int(tok[1:])
        return ("index", [idx]) if idx is not None else ("", [])
    if not _is_function_token(tok):
        return "", []
    for pattern, shape in _FUNCTION_RES:
        m = pattern.search(tok)
        if m is None:
            continue
        args = _ARG_SEP.split(m.group(1))
        return _check_args(tok, shape, args)
    return TransformError(_UNKNOWN_FUNCTION, tok)


def _check_args(tok: str, shape: str, args: list[str]) -> tuple[str, list[int]] | TransformError:
    if shape == "index":
        if args == [""]:
            return TransformError(_NOT_ENOUGH_ARGS, tok)
        if len(args) > 1:
            return TransformError(_TOO_MANY_ARGS, tok)
        idx = _int(args[0])
        return (shape, [idx]) if idx is not None else TransformError(_INVALID_ARG, tok)
    if shape == "partition":
        count = _int(args[0])
        if count is None or count > _MAX_INT32:
            return TransformError(_INVALID_ARG, tok)
        indexes = [_int(a) for a in args[1:]]
        if any(i is None for i in indexes):
            return TransformError(_INVALID_ARG, tok)
        return shape, [i for i in indexes if i is not None]
    if shape == "random":
        if len(args) != 1:
            return TransformError(_NOT_ENOUGH_ARGS, tok)
        n = _int(args[0])
        return (shape, []) if n is not None and n <= _MAX_INT32 else TransformError(_INVALID_ARG, tok)
    # index_int and split take exactly two arguments
    if len(args) < 2:
        return TransformError(_NOT_ENOUGH_ARGS, tok)
    if len(args) > 2:
        return TransformError(_TOO_MANY_ARGS, tok)
    idx = _int(args[0])
    if idx is None:
        return TransformError(_INVALID_ARG, tok)
    if shape == "split":
        if " " in args[1] or "." in args[1]:
            return TransformError(_INVALID_ARG, tok)
    else:
        second = _int(args[1])
        if second is None or not -(2**31) <= second <= _MAX_INT32:
            return TransformError(_INVALID_ARG, tok)
    return shape, [idx]


def _subject_info(subject: str) -> tuple[list[str], int, bool] | None:
    """(tokens, number of ``*``, ends with ``>``), or None if not a valid transform subject."""
    if not subject:
        return None
    toks = subject.split(".")
    pwcs = 0
    fwc = False
    for tok in toks:
        if not tok or fwc:
            return None
        if tok == ">":
            fwc = True
        elif tok == "*":
            pwcs += 1
    return toks, pwcs, fwc


def transform_error(src: str, dest: str) -> TransformError | None:
    """Can a transform from ``src`` to ``dest`` be built? (nats-server's non-strict transform).

    ``src`` empty means ``>``; ``dest`` empty means "no transform". Used alone for republish.
    """
    if not dest:
        return None
    s = _subject_info(src or ">")
    d = _subject_info(dest)
    if s is None or d is None:
        return TransformError(_BAD_SUBJECT)
    _, src_pwcs, src_fwc = s
    dest_toks, dest_pwcs, dest_fwc = d
    if dest_pwcs > 0 or src_fwc != dest_fwc:
        return TransformError(_BAD_SUBJECT)
    for tok in dest_toks:
        found = _placeholders(tok)
        if isinstance(found, TransformError):
            return found
        kind, indexes = found
        if kind in ("", "random"):
            continue
        if src_pwcs > 0 or src_fwc:
            for idx in indexes:
                if idx > src_pwcs:
                    return TransformError(_INDEX_OUT_OF_RANGE, f"{tok}: [{idx}]")
        elif kind != "partition":
            # a literal source has no wildcards to refer to
            return TransformError(_INDEX_OUT_OF_RANGE, tok)
    return None


def mapping_error(src: str, dest: str) -> TransformError | None:
    """nats-server's ValidateMapping: destination token checks, then :func:`transform_error`."""
    if not dest:
        return None
    after_fwc = False
    for tok in dest.split("."):
        if not tok or after_fwc:
            return TransformError(_BAD_TRANSFORM, tok)
        if _is_function_token(tok):
            if not any(pattern.search(tok) for pattern, _ in _FUNCTION_RES):
                return TransformError(_UNKNOWN_FUNCTION, tok)
            continue
        if tok == ">":
            after_fwc = True
        elif not _WHITESPACE.isdisjoint(tok):
            return TransformError(_BAD_TRANSFORM)
    return transform_error(src, dest)


# -- applying a transform -------------------------------------------------------------------------


def _fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for c in data:
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    return h


def _chunks(tok: str, size: int, from_right: bool) -> str:
    if size <= 0 or size >= len(tok):
        return tok
    if from_right:
        head = len(tok) % size
        parts = ([tok[:head]] if head else []) + [tok[i : i + size] for i in range(head, len(tok), size)]
    else:
        parts = [tok[i : i + size] for i in range(0, len(tok), size)]
    return ".".join(parts)


# (kind, wildcard indexes, extra argument) of one destination token
_Part = tuple[str, list[int], str]


class SubjectTransform:
    """A validated ``src`` -> ``dest`` mapping, compiled once, applied per subject as
    nats-server applies it: ``$n``/``{{wildcard(n)}}`` take the n-th ``*`` of the source,
    ``{{partition(count, n...)}}`` is the FNV-1a hash of those tokens (of the whole subject
    without indexes) modulo count, the split/slice/left/right functions cut one wildcard's
    token, ``{{random(n)}}`` draws below n, and a ``>`` takes the rest of the subject."""

    __slots__ = ("_dest", "_src")

    def __init__(self, src: str, dest: str) -> None:
        err = transform_error(src, dest)
        if err is not None:
            raise ValueError(str(err))
        self._src = (src or ">").split(".")
        self._dest: list[_Part] = [self._compile(tok) for tok in dest.split(".")]

    @staticmethod
    def _compile(tok: str) -> _Part:
        if tok == ">":
            return ">", [], ""
        found = _placeholders(tok)
        assert not isinstance(found, TransformError)  # checked by transform_error
        kind, indexes = found
        if not kind:
            return "", [], tok
        if kind == "index":  # $n or {{wildcard(n)}}
            return "wildcard", indexes, ""
        name = tok[2:].lstrip().split("(", 1)[0].strip()
        args = _ARG_SEP.split(tok[tok.index("(") + 1 : tok.rindex(")")])
        if kind == "partition":
            return "partition", indexes, args[0].strip()
        if kind == "random":
            return "random", [], args[0].strip()
        extra = args[1] if kind == "split" else args[1].strip()
        return name[0].lower() + name[1:], indexes, extra

    @property
    def deterministic(self) -> bool:
        """A subject always maps to the same subject (no ``{{random(n)}}``)."""
        return all(kind != "random" for kind, _, _ in self._dest)

    def apply(self, subject: str) -> str | None:
        """The mapped subject, or None when ``subject`` does not match the source."""
        toks = subject.split(".")
        wild: list[str] = []
        rest: list[str] = []
        src = self._src
        for i, s in enumerate(src):
            if i >= len(toks):
                return None
            if s == ">":
                rest = toks[i:]
                break
            if s == "*":
                wild.append(toks[i])
            elif s != toks[i]:
                return None
        else:
            if len(toks) != len(src):
                return None
        out: list[str] = []
        for kind, indexes, extra in self._dest:
            if not kind:
                out.append(extra)
            elif kind == ">":
                out.extend(rest)
            elif kind == "wildcard":
                out.append(wild[indexes[0] - 1])
            elif kind == "partition":
                key = "".join(wild[i - 1] for i in indexes) if indexes else subject
                out.append(str(_fnv1a32(key.encode()) % int(extra)))
            elif kind == "random":
                n = int(extra)
                out.append(str(random.randrange(n)) if n > 0 else "0")
            else:
                out.append(_cut(kind, wild[indexes[0] - 1], extra))
        return ".".join(out)

    def map(self, subject: str) -> str:
        """The mapped subject, or ``subject`` itself when it does not match."""
        mapped = self.apply(subject)
        return subject if mapped is None else mapped


def _cut(kind: str, tok: str, arg: str) -> str:
    if kind == "split":
        return ".".join(p for p in tok.split(arg) if p)
    n = int(arg)
    if kind == "splitFromLeft":
        return f"{tok[:n]}.{tok[n:]}" if 0 < n < len(tok) else tok
    if kind == "splitFromRight":
        return f"{tok[: len(tok) - n]}.{tok[len(tok) - n :]}" if 0 < n < len(tok) else tok
    if kind == "sliceFromLeft":
        return _chunks(tok, n, from_right=False)
    if kind == "sliceFromRight":
        return _chunks(tok, n, from_right=True)
    if kind == "left":
        return tok[:n] if 0 < n < len(tok) else tok
    return tok[-n:] if 0 < n < len(tok) else tok  # right
