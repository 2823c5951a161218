"""PatternSet: subject patterns with owners, and which of them overlap, cover or fall within a
given pattern, in time near-linear in what is stored rather than pairwise.

Config validation asks these questions of many patterns at once (a stream's subjects against
each other and against every other stream's, consumer filters against the stream's subjects and
against the other consumers' filters, subject transforms against each other); compared pair by
pair that is quadratic, and a request with 10,000 subjects held the event loop for seconds. A
trie over tokens answers each question by walking only the branches that can match: a literal
token follows its own child and the ``*`` child, a ``*`` follows every single-token child, and a
``>`` (on either side) settles the rest of the walk at once.

Three relations, wildcards allowed on both sides (the rules of :mod:`jetpy.subjects`):

* *overlap*: some literal subject matches both patterns (``subjects_overlap``);
* *covering*: every subject the given pattern matches, the stored one matches too (stored ⊇ given);
* *within*: the stored pattern is a subset of the given one (stored ⊆ given).

Patterns must be valid (``is_valid_subject``); callers validate first. Pure: no I/O, no clock.
Used on stream and consumer create/update only, never on the message path. Knows nothing of
streams, consumers or subscriptions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Generic, TypeVar

__all__ = [
    "PatternSet",
    "all_covered",
    "all_overlap",
    "any_nested",
    "first_overlapping_pair",
    "overlapping_others",
]

T = TypeVar("T")

_OVERLAP: Final = 0
_COVERING: Final = 1
_WITHIN: Final = 2


# A trie node is a dict: token -> child node, and under the key ``_END`` the owners (a tuple) of
# the patterns that end at it. One plain dict per node keeps a 10,000-pattern set to ~10,000
# small objects, most of which the garbage collector stops tracking (a leaf holds a tuple of
# strings): long-lived indexes must not make every full collection (a loop pause) slower.
_Trie = dict[Any, Any]
_END: Final = None


class PatternSet(Generic[T]):
    """A multiset of (pattern, owner) pairs, indexed by the pattern's tokens."""

    __slots__ = ("_len", "_root")

    def __init__(self, entries: Iterable[tuple[str, T]] = ()) -> None:
        self._root: _Trie = {}
        self._len = 0
        for pattern, owner in entries:
            self.add(pattern, owner)

    def __len__(self) -> int:
        return self._len

    def add(self, pattern: str, owner: T) -> None:
        node = self._root
        for tok in _tokens(pattern):
            kid = node.get(tok)
            if kid is None:
                kid = node[tok] = {}
            node = kid
        node[_END] = (*node.get(_END, ()), owner)
        self._len += 1

    def discard(self, pattern: str, owner: T) -> None:
        """Remove one (pattern, owner) pair if present; branches left empty are pruned."""
        path = [self._root]
        toks = _tokens(pattern)
        for tok in toks:
            kid = path[-1].get(tok)
            if kid is None:
                return
            path.append(kid)
        owners: tuple[T, ...] = path[-1].get(_END, ())
        if owner not in owners:
            return
        i = owners.index(owner)
        if len(owners) > 1:
            path[-1][_END] = (*owners[:i], *owners[i + 1 :])
        else:
            del path[-1][_END]
        self._len -= 1
        for i in range(len(toks), 0, -1):
            if path[i]:
                break
            del path[i - 1][toks[i - 1]]

    def overlaps(self, pattern: str) -> bool:
        """Does some stored pattern overlap ``pattern``?"""
        return next(self._walk(_tokens(pattern), _OVERLAP), None) is not None

    def overlapping(self, pattern: str) -> Iterator[T]:
        """Owners of the stored patterns some literal subject matches together with ``pattern``."""
        return self._owners(pattern, _OVERLAP)

    def covering(self, pattern: str) -> Iterator[T]:
        """Owners of the stored patterns that match every subject ``pattern`` matches."""
        return self._owners(pattern, _COVERING)

    def within(self, pattern: str) -> Iterator[T]:
        """Owners of the stored patterns that match only subjects ``pattern`` matches."""
        return self._owners(pattern, _WITHIN)

    def _owners(self, pattern: str, mode: int) -> Iterator[T]:
        for owners in self._walk(_tokens(pattern), mode):
            yield from owners

    def _walk(self, toks: list[str], mode: int) -> Iterator[tuple[T, ...]]:
        """The owners of each stored pattern (each once) in ``mode``'s relation to ``toks``."""
        last = len(toks)
        stack: list[tuple[_Trie, int]] = [(self._root, 0)]
        pop, push = stack.pop, stack.append
        while stack:
            node, k = pop()
            if k == last:
                owners = node.get(_END)
                if owners:
                    yield owners
                continue
            tok = toks[k]
            if tok == ">":
                if mode == _COVERING:  # only a stored ">" covers one or more of anything
                    fwc = node.get(">")
                    if fwc is not None:
                        yield fwc[_END]
                else:  # every stored pattern with at least one more token
                    yield from _subtree(node)
                continue
            if mode != _WITHIN:
                # a stored ">" takes the one or more tokens the given pattern still has
                fwc = node.get(">")
                if fwc is not None:
                    yield fwc[_END]
            if tok == "*":
                if mode == _COVERING:
                    kid = node.get("*")
                    if kid is not None:
                        push((kid, k + 1))
                else:
                    for t, kid in node.items():
                        if t is not _END and t != ">":
                            push((kid, k + 1))
            else:
                kid = node.get(tok)
                if kid is not None:
                    push((kid, k + 1))
                if mode != _WITHIN:
                    kid = node.get("*")
                    if kid is not None:
                        push((kid, k + 1))


def _tokens(pattern: str) -> list[str]:
    """A pattern's tokens up to its first ``>``: what follows one cannot change what it matches
    (as :func:`jetpy.subjects.subjects_overlap` reads it; valid patterns have nothing there).
    A stored ``>`` therefore always ends its pattern."""
    toks = pattern.split(".")
    if ">" in toks:
        del toks[toks.index(">") + 1 :]
    return toks


def _subtree(node: _Trie) -> Iterator[tuple[T, ...]]:
    """The owners of every pattern below ``node`` (not those ending at it)."""
    stack = [kid for t, kid in node.items() if t is not _END]
    while stack:
        node = stack.pop()
        for t, kid in node.items():
            if t is _END:
                yield kid
            else:
                stack.append(kid)


def first_overlapping_pair(patterns: Sequence[str]) -> tuple[int, int] | None:
    """The pair nats-server reports for patterns that overlap each other: the first ``i`` (in
    order) that overlaps any later pattern, and the first such later ``j``; None if none do.

    Patterns are taken from the last to the first, each asking whether a later one overlaps it,
    so each is walked once through a trie. A literal only overlaps an equal literal (a set
    lookup) or a wildcard pattern: the trie holds the patterns from the first wildcard one on,
    so a list of literals costs no trie at all.
    """
    n = len(patterns)
    wild = [_is_wild(p) for p in patterns]
    first_wild = wild.index(True) if True in wild else n
    later_literals: set[str] = set()
    later: PatternSet[int] = PatternSet()  # the later patterns from the first wildcard one on
    first = -1
    for i in range(n - 1, -1, -1):
        p = patterns[i]
        if later.overlaps(p) if wild[i] else (p in later_literals or (later and later.overlaps(p))):
            first = i
        if not wild[i]:
            later_literals.add(p)
        if i >= first_wild:
            later.add(p, i)
    if first < 0:
        return None
    rest: PatternSet[int] = PatternSet((patterns[j], j) for j in range(first + 1, n))
    return first, min(rest.overlapping(patterns[first]))


def _is_wild(pattern: str) -> bool:
    return ("*" in pattern or ">" in pattern) and any(t == "*" or t == ">" for t in pattern.split("."))


def all_covered(patterns: Iterable[str], by: Iterable[str]) -> bool:
    """Is every subject the ``patterns`` match also matched by one of ``by``?

    Only a wildcard pattern of ``by`` covers more than itself: those go into the trie, the
    literal ones into a set."""
    exact: set[str] = set()
    cover: PatternSet[bool] = PatternSet()
    for f in by:
        if _is_wild(f):
            cover.add(f, True)
        else:
            exact.add(f)
    return all((p in exact or bool(cover and any(cover.covering(p)))) for p in patterns)


def all_overlap(patterns: Iterable[str], of: Sequence[str]) -> bool:
    """Does every one of ``patterns`` overlap at least one pattern of ``of``?

    A literal overlaps an equal literal or a wildcard pattern, so literals are checked against a
    set and a trie of the wildcard patterns of ``of``; the trie of all of ``of`` is built only
    if a wildcard pattern asks."""
    exact = {p for p in of if not _is_wild(p)}
    wild: PatternSet[bool] = PatternSet((p, True) for p in of if p not in exact)
    every: PatternSet[bool] | None = None
    for p in patterns:
        if not _is_wild(p):
            if p in exact or (wild and wild.overlaps(p)):
                continue
            return False
        if every is None:
            every = PatternSet((q, True) for q in of)
        if not every.overlaps(p):
            return False
    return True


def overlapping_others(patterns: Sequence[str]) -> set[int]:
    """The indices of the patterns that overlap some other pattern of ``patterns``.

    Literals overlap equal literals (counted) and wildcard patterns (a trie of those); only a
    wildcard pattern is looked up in a trie of them all."""
    wild = [_is_wild(p) for p in patterns]
    seen: dict[str, int] = {}
    for p, w in zip(patterns, wild, strict=True):
        if not w:
            seen[p] = seen.get(p, 0) + 1
    found = {i for i, p in enumerate(patterns) if not wild[i] and seen[p] > 1}
    if True not in wild:
        return found
    wilds: PatternSet[int] = PatternSet((p, i) for i, p in enumerate(patterns) if wild[i])
    every: PatternSet[int] = PatternSet((p, i) for i, p in enumerate(patterns))
    for i, p in enumerate(patterns):
        if i not in found and any(j != i for j in (every if wild[i] else wilds).overlapping(p)):
            found.add(i)
    return found


def any_nested(patterns: Sequence[str]) -> bool:
    """Is some pattern of ``patterns`` a subset of another one (an equal one included)?"""
    every: PatternSet[int] = PatternSet((p, i) for i, p in enumerate(patterns))
    return any(any(j != i for j in every.within(p)) for i, p in enumerate(patterns))
