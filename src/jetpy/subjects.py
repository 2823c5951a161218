"""Subject rules: validation, wildcard matching, subset and overlap of subject filters.

Pure functions over ``str`` subjects (the JetStream and store layers) with byte-level twins for
the hot message path where decoding would cost. Knows nothing of subscriptions or connections.

Rules (nats-server's): tokens are separated by ``.``; no empty tokens; no whitespace anywhere;
``*`` matches exactly one token and ``>`` one or more, and only as whole tokens (``foo*`` is a
literal); ``>`` must be the last token. Publish subjects must be literal.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = [
    "is_literal",
    "is_valid_literal_subject",
    "is_valid_subject",
    "matches_all",
    "subject_is_subset",
    "subject_matches",
    "subjects_overlap",
    "tokens",
    "valid_literal_bytes",
    "valid_sub_bytes",
    "valid_subject_bytes",
]

_WHITESPACE = frozenset(" \t\r\n\f")
_WHITESPACE_BYTES = (b" ", b"\t", b"\r", b"\n", b"\f")
MAX_SUBJECT_TOKENS = 256  # guards the trie's recursion and the match work per publish


def tokens(subject: str) -> list[str]:
    return subject.split(".")


def is_valid_subject(subject: str, *, allow_wildcards: bool = True) -> bool:
    """A subscription (filter) subject; with ``allow_wildcards=False`` a publish subject."""
    if not subject or not _WHITESPACE.isdisjoint(subject):
        return False
    toks = subject.split(".")
    last = len(toks) - 1
    for i, tok in enumerate(toks):
        if not tok:
            return False
        if tok == ">":
            if not allow_wildcards or i != last:
                return False
        elif tok == "*" and not allow_wildcards:
            return False
    return True


def is_valid_literal_subject(subject: str) -> bool:
    return is_valid_subject(subject, allow_wildcards=False)


def is_literal(subject: str) -> bool:
    """True if no token is a wildcard (validity is checked elsewhere)."""
    if "*" not in subject and ">" not in subject:
        return True
    return all(tok not in ("*", ">") for tok in subject.split("."))


def valid_subject_bytes(subject: bytes, *, allow_wildcards: bool = True) -> bool:
    """The byte twin of :func:`is_valid_subject` for the protocol path."""
    if not subject:
        return False
    for ws in _WHITESPACE_BYTES:
        if ws in subject:
            return False
    if b".." in subject or subject[0] == 0x2E or subject[-1] == 0x2E:
        return False
    if b"*" not in subject and b">" not in subject:
        return True
    toks = subject.split(b".")
    last = len(toks) - 1
    for i, tok in enumerate(toks):
        if tok == b">":
            if not allow_wildcards or i != last:
                return False
        elif tok == b"*" and not allow_wildcards:
            return False
    return True


def valid_sub_bytes(subject: bytes) -> bool:
    """nats-server's check of a SUB subject: no empty token and ``>`` only as the last token.
    Unlike :func:`valid_subject_bytes` it does not look for whitespace: nats-server 2.9 accepts a
    form feed or vertical tab inside a subject (the protocol already split on spaces and tabs)."""
    if not subject or b".." in subject or subject[0] == 0x2E or subject[-1] == 0x2E:
        return False
    i = subject.find(b">")
    if i < 0:
        return True
    return all(tok != b">" for tok in subject.split(b".")[:-1])


def valid_literal_bytes(subject: bytes) -> bool:
    """nats-server's check of a publish subject in pedantic mode (``IsValidLiteralSubject``): no
    empty token and no wildcard token. Whitespace is not looked at (nats-server does not either:
    the protocol already split the line on spaces and tabs)."""
    if not subject or b".." in subject or subject[0] == 0x2E or subject[-1] == 0x2E:
        return False
    if b"*" not in subject and b">" not in subject:
        return True
    return all(tok != b"*" and tok != b">" for tok in subject.split(b"."))


# Distinct filters in one process are few (stream subjects, consumer and purge filters); a bounded
# cache keeps tokenising them off the match path without letting hostile filters grow memory.
_FILTER_CACHE_SIZE = 1024


def matches_all(filter_: str) -> bool:
    """True when the filter selects every subject (``""`` or ``">"``)."""
    return filter_ == "" or filter_ == ">"


@lru_cache(maxsize=_FILTER_CACHE_SIZE)
def _filter_tokens(filter_: str) -> tuple[tuple[str, ...], bool]:
    toks = tuple(filter_.split("."))
    return toks, any(t == "*" or t == ">" for t in toks)


def subject_matches(filter_: str, subject: str) -> bool:
    """Does the literal ``subject`` match the (possibly wildcard) ``filter_``? ``""`` matches all."""
    if not filter_ or filter_ == ">":
        return True
    ftoks, wild = _filter_tokens(filter_)
    if not wild:
        return filter_ == subject
    stoks = subject.split(".")
    ns = len(stoks)
    for i, ft in enumerate(ftoks):
        if ft == ">":
            return ns > i
        if i >= ns:
            return False
        if ft != "*" and ft != stoks[i]:
            return False
    return len(ftoks) == ns


def subject_is_subset(sub: str, sup: str) -> bool:
    """Is every subject matched by filter ``sub`` also matched by filter ``sup``?"""
    if sup == ">" or sub == sup:
        return True
    a = sub.split(".")
    b = sup.split(".")
    for i, bt in enumerate(b):
        if bt == ">":
            return len(a) > i
        if i >= len(a):
            return False
        at = a[i]
        if at == ">":
            return False
        if bt == "*":
            continue
        if at == "*" or at != bt:
            return False
    return len(a) == len(b)


def subjects_overlap(a: str, b: str) -> bool:
    """Could some literal subject match both filters?"""
    if a == b:
        return True
    at = a.split(".")
    bt = b.split(".")
    for i in range(max(len(at), len(bt))):
        x = at[i] if i < len(at) else None
        y = bt[i] if i < len(bt) else None
        if x == ">" or y == ">":
            # the other side needs at least one more token from here on
            return x is not None and y is not None
        if x is None or y is None:
            return False
        if x == "*" or y == "*" or x == y:
            continue
        return False
    return True
