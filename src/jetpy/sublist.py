"""SubjectTree: a trie of subscriptions keyed by subject tokens, with a bounded match cache.

Owns interest: which items (subscriptions, internal handlers) match a published subject, split
into plain members and queue groups. Knows nothing of what an item is or how it is delivered.

Subjects are ``bytes`` because the protocol path never decodes them. A publish looks up the
cache first (a dict hit is the common case: publishers reuse subjects); a miss walks the trie and
stores the result. Inserting or removing a subscription drops only the cached results it could
change, so a busy subject stays cached while unrelated subscriptions come and go.

Reply subjects (``_INBOX.<id>.<n>``: a new last token per request, all matched by one wildcard
subscription) would miss the cache every time and churn it. So a miss whose walk never looked a
last token up among literal children (no subscription spells out that last level) is cached
under its prefix instead: every sibling subject then hits that one entry. Any insert or remove
clears these prefix entries (they are few; subscriptions change far less often than publishes).
While such an entry is held, :meth:`SubjectTree.sibling_result` gives it for any sibling, so a
run of replies to one inbox (a route's PubAcks, a group commit's) is matched once.

JetStream ack subjects (``$JS.ACK.<stream>.<consumer>.<five numbers>``, unique per message, all
matched by ``$JS.ACK.<stream>.<consumer>.>``) vary in more than their last token. The general
rule: a walk that looked no token after the ``d``-th up among literal children, and whose every
branch ended before the subject's last token, gives the same result for every subject with the
same first ``d`` tokens and at least as many tokens as the walk went deep. Such a miss is cached
under its first ``d`` tokens (the "deep" cache, cleared with the prefix cache).

Results list members in nats-server's order (what a client sees first when it matters, as in
the choice of subscription for a no-responders reply). The hot publish path may read
:attr:`SubjectTree.cache` directly, counting each hit with ``hot_hits += 1`` so that the
statistics stay right without a method call per message.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

__all__ = ["MatchResult", "SubjectTree"]

T = TypeVar("T")

MAX_CACHE = 4096  # cached match results; bounded so that random subjects cannot grow memory
_PWC = b"*"
_FWC = b">"

# A match result: (plain members, queue groups). Each queue group is a list of members sharing a
# queue name; one of them receives each message. Results are shared with the cache: read-only.
MatchResult = tuple[list[T], list[list[T]]]


class _Node(Generic[T]):
    __slots__ = ("fwc", "next", "plain", "pwc", "queues")

    def __init__(self) -> None:
        self.next: dict[bytes, _Node[T]] = {}
        self.pwc: _Node[T] | None = None
        self.fwc: _Node[T] | None = None
        self.plain: dict[T, None] = {}  # a dict keeps insertion order and removes in O(1)
        self.queues: dict[bytes, dict[T, None]] = {}

    def is_empty(self) -> bool:
        return not (self.next or self.pwc or self.fwc or self.plain or self.queues)


class SubjectTree(Generic[T]):
    def __init__(self, cache_size: int = MAX_CACHE) -> None:
        self._root: _Node[T] = _Node()
        self._cache: dict[bytes, MatchResult[T]] = {}
        # subject minus its last token -> the result every such subject gets (see the docstring)
        self._prefix_cache: dict[bytes, MatchResult[T]] = {}
        # first d tokens -> (result, dots the subject needs at least); see the docstring
        self._deep_cache: dict[bytes, tuple[MatchResult[T], int]] = {}
        self._deep_lens: list[int] = []  # the lengths of the deep keys (a few: they are tried in turn)
        self._cache_size = cache_size
        self.count = 0
        self.inserts = 0
        self.removes = 0
        self._matches = 0
        self._hits = 0
        self.hot_hits = 0  # cache hits counted by callers that read ``cache`` themselves

    @property
    def cache(self) -> dict[bytes, MatchResult[T]]:
        """The match cache, for lookups on a hot path (read only; count a hit in ``hot_hits``)."""
        return self._cache

    @property
    def matches(self) -> int:
        """Lookups so far (through :meth:`match` or a counted hit on :attr:`cache`)."""
        return self._matches + self.hot_hits

    @property
    def cache_hits(self) -> int:
        return self._hits + self.hot_hits

    # -- mutation -------------------------------------------------------------------------------

    def insert(self, subject: bytes, queue: bytes | None, item: T) -> None:
        node = self._root
        for tok in subject.split(b"."):
            if tok == _PWC:
                if node.pwc is None:
                    node.pwc = _Node()
                node = node.pwc
            elif tok == _FWC:
                if node.fwc is None:
                    node.fwc = _Node()
                node = node.fwc
            else:
                nxt = node.next.get(tok)
                if nxt is None:
                    nxt = node.next[tok] = _Node()
                node = nxt
        if queue is None:
            node.plain[item] = None
        else:
            node.queues.setdefault(queue, {})[item] = None
        self.count += 1
        self.inserts += 1
        self._invalidate(subject)

    def remove(self, subject: bytes, queue: bytes | None, item: T) -> bool:
        path: list[tuple[_Node[T], bytes]] = []
        node: _Node[T] | None = self._root
        for tok in subject.split(b"."):
            assert node is not None
            path.append((node, tok))
            if tok == _PWC:
                node = node.pwc
            elif tok == _FWC:
                node = node.fwc
            else:
                node = node.next.get(tok)
            if node is None:
                return False
        assert node is not None
        if queue is None:
            if item not in node.plain:
                return False
            del node.plain[item]
        else:
            members = node.queues.get(queue)
            if members is None or item not in members:
                return False
            del members[item]
            if not members:
                del node.queues[queue]
        # prune empty nodes bottom-up so the trie does not keep dead branches
        child = node
        for parent, tok in reversed(path):
            if not child.is_empty():
                break
            if tok == _PWC:
                parent.pwc = None
            elif tok == _FWC:
                parent.fwc = None
            else:
                del parent.next[tok]
            child = parent
        self.count -= 1
        self.removes += 1
        self._invalidate(subject)
        return True

    def _invalidate(self, filter_: bytes) -> None:
        if self._prefix_cache:
            self._prefix_cache.clear()
        if self._deep_cache:
            self._deep_cache.clear()
            self._deep_lens.clear()
        cache = self._cache
        if not cache:
            return
        if b"*" not in filter_ and b">" not in filter_:
            cache.pop(filter_, None)
            return
        ftoks = filter_.split(b".")
        for subj in [s for s in cache if _match_tokens(ftoks, s.split(b"."))]:
            del cache[subj]

    # -- lookup ---------------------------------------------------------------------------------

    def match(self, subject: bytes) -> MatchResult[T]:
        """Members interested in the literal ``subject``. The result must not be mutated."""
        self._matches += 1
        r = self._cache.get(subject)
        if r is not None:
            self._hits += 1
            return r
        lens = self._deep_lens
        if lens:  # _deep_match(), inline: every JetStream ack comes here
            for k in lens:
                if subject[k : k + 1] == b".":  # the key would end at a token boundary
                    e = self._deep_cache.get(subject[:k])
                    if e is not None:
                        if subject.count(b".") >= e[1] and subject.find(b"..") < 0 and subject[-1] != 46:
                            self._hits += 1
                            return e[0]
                        break
        cut = subject.rfind(b".")
        prefix = subject[:cut] if cut > 0 else b""
        if prefix:
            r = self._prefix_cache.get(prefix)
            if r is not None and cut + 1 < len(subject):
                self._hits += 1
                return r
        plain: list[T] = []
        groups: dict[bytes, list[T]] = {}
        toks = subject.split(b".")
        walk = [-1, 0, False]  # deepest literal lookup, deepest branch end, a branch ran out
        valid = b"" not in toks  # as nats-server: a subject with an empty token matches nothing
        if valid:
            _collect(self._root, toks, 0, plain, groups, walk)
        r = (plain, list(groups.values()))
        if valid and prefix:
            n = len(toks)
            depth = walk[0] + 1
            if not walk[2] and 0 < depth < n:
                self._deep_store(toks, depth, r, walk[1])
                return r
            if depth < n:  # the last token was not looked up among literal children
                pc = self._prefix_cache
                if len(pc) >= self._cache_size:
                    pc.clear()
                pc[prefix] = r
                return r
        cache = self._cache
        if len(cache) >= self._cache_size:
            # drop the older half: cheap, amortised, and keeps recently added hot subjects
            for key in list(cache)[: self._cache_size // 2]:
                del cache[key]
        cache[subject] = r
        return r

    def sibling_result(self, subject: bytes) -> MatchResult[T] | None:
        """The result :meth:`match` gives every subject that differs from ``subject`` in a
        non-empty last token only, when the prefix cache holds it (a match of one of them put it
        there, and no subscription came or went since); else None. A run of such subjects (a
        route's replies to one client's requests) is then matched once."""
        cut = subject.rfind(b".")
        if cut <= 0 or cut + 1 >= len(subject):
            return None
        return self._prefix_cache.get(subject[:cut])

    def _deep_store(self, toks: list[bytes], depth: int, r: MatchResult[T], far: int) -> None:
        dc = self._deep_cache
        lens = self._deep_lens
        if len(dc) >= self._cache_size:
            dc.clear()
            lens.clear()
        key = b".".join(toks[:depth])
        if len(key) not in lens:
            if len(lens) >= 8:
                return  # a few distinct key lengths at most: each costs every miss a lookup
            lens.append(len(key))
        dc[key] = (r, far)

    def has_interest(self, subject: bytes) -> bool:
        plain, groups = self.match(subject)
        return bool(plain or groups)

    def cache_count(self) -> int:
        return len(self._cache)

    def fanout_stats(self) -> tuple[int, int, int]:
        """(largest fanout, total fanout, cached results) over the match cache, for /subsz; a
        result's fanout counts each plain member and each queue group once."""
        mx = total = 0
        for plain, groups in self._cache.values():
            f = len(plain) + len(groups)
            total += f
            if f > mx:
                mx = f
        return mx, total, len(self._cache)

    def items(self) -> list[tuple[bytes, bytes | None, T]]:
        """Every (subject, queue, item) in the tree, for monitoring."""
        out: list[tuple[bytes, bytes | None, T]] = []
        _walk(self._root, [], out)
        return out


def _collect(
    level: _Node[T], toks: list[bytes], i: int, plain: list[T], groups: dict[bytes, list[T]], walk: list[Any]
) -> None:
    """Add the members matching ``toks[i:]`` below ``level``, in nats-server's order: per token a
    ``>`` child, then the ``*`` branch; at the end the literal node, then the last ``*`` node.
    Records in ``walk`` what the result depended on: [0] the deepest token index looked up among
    literal children, [1] the deepest index at which a branch ended early, [2] whether a branch
    reached the end of the subject (then the token count matters)."""
    node: _Node[T] | None = level
    lit: _Node[T] | None = None
    pwc: _Node[T] | None = None
    n = len(toks)
    while i < n:
        if node is None:
            if i > walk[1]:
                walk[1] = i
            return
        if node.fwc is not None:
            _add(node.fwc, plain, groups)
        pwc = node.pwc
        if pwc is not None:
            _collect(pwc, toks, i + 1, plain, groups, walk)
        nxt = node.next
        if nxt and i > walk[0]:
            walk[0] = i
        lit = nxt.get(toks[i])
        node = lit
        i += 1
    walk[2] = True
    if lit is not None:
        _add(lit, plain, groups)
    if pwc is not None:
        _add(pwc, plain, groups)


def _add(node: _Node[T], plain: list[T], groups: dict[bytes, list[T]]) -> None:
    if node.plain:
        plain.extend(node.plain)
    for q, members in node.queues.items():
        g = groups.get(q)
        if g is None:
            groups[q] = list(members)
        else:
            g.extend(members)


def _walk(node: _Node[T], prefix: list[bytes], out: list[tuple[bytes, bytes | None, T]]) -> None:
    subj = b".".join(prefix)
    for item in node.plain:
        out.append((subj, None, item))
    for q, members in node.queues.items():
        for item in members:
            out.append((subj, q, item))
    for tok, child in node.next.items():
        _walk(child, [*prefix, tok], out)
    if node.pwc is not None:
        _walk(node.pwc, [*prefix, _PWC], out)
    if node.fwc is not None:
        _walk(node.fwc, [*prefix, _FWC], out)


def _match_tokens(ftoks: list[bytes], stoks: list[bytes]) -> bool:
    for i, ft in enumerate(ftoks):
        if ft == _FWC:
            return len(stoks) > i
        if i >= len(stoks):
            return False
        if ft != _PWC and ft != stoks[i]:
            return False
    return len(ftoks) == len(stoks)
