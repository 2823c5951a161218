"""Subject filter helpers private to the store.

Owns: deciding whether a stored subject matches a consumer/purge filter (``*`` matches exactly
one token, ``>`` matches one or more trailing tokens; ``""`` and ``">"`` mean "everything").
Must not know: subject validation rules for publishing (that is the server's job) or any store
data structure. ``jetpy.subjects`` will own the canonical version; this copy exists only because
the store may not import upward and the shared module does not exist yet.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["is_all", "is_literal", "subject_matches"]

# Distinct filters seen by one process are few (consumer filters, purge requests); a bounded
# cache keeps tokenising off the hot path without letting hostile filters grow memory.
_FILTER_CACHE_SIZE = 1024


def is_all(filter_subject: str) -> bool:
    """True when the filter selects every subject ("" or ">")."""
    return filter_subject == "" or filter_subject == ">"


@lru_cache(maxsize=_FILTER_CACHE_SIZE)
def _tokens(filter_subject: str) -> tuple[tuple[str, ...], bool]:
    toks = tuple(filter_subject.split("."))
    return toks, any(t == "*" or t == ">" for t in toks)


def is_literal(filter_subject: str) -> bool:
    """True when the filter has no wildcard token (so it names exactly one subject)."""
    return not is_all(filter_subject) and not _tokens(filter_subject)[1]


def subject_matches(filter_subject: str, subject: str) -> bool:
    """Whether ``subject`` (a literal) is selected by ``filter_subject``."""
    if is_all(filter_subject):
        return True
    ftoks, wild = _tokens(filter_subject)
    if not wild:
        return filter_subject == subject
    stoks = subject.split(".")
    n = len(stoks)
    for i, ft in enumerate(ftoks):
        if ft == ">":
            return n > i
        if i >= n:
            return False
        if ft != "*" and ft != stoks[i]:
            return False
    return n == len(ftoks)
