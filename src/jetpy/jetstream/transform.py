"""Validity of subject transforms (``src`` -> ``dest`` mappings), as nats-server judges them.

Owns the rules a stream's ``subject_transform``, ``republish`` and source/mirror
``subject_transforms`` must satisfy: destination tokens, the mapping functions
(``{{wildcard(1)}}``, ``$1``, ``{{partition(4,1,2)}}``, ``{{split(1,-)}}`` ...) and their argument
shapes, and that every wildcard index refers to a ``*`` of the source. It only decides and
explains; applying a transform to a subject belongs to the stream. Knows nothing of configs.

Error texts follow nats-server's (``invalid mapping destination: ... in <token>``) because they
end up in API error descriptions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["TransformError", "mapping_error", "transform_error"]

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
