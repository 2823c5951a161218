"""SubjectTree: matching with wildcards and queue groups, pruning, the match cache and its bound,
the counters, nats-server's result order, and a brute-force model under random changes."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.subjects import subject_matches
from jetpy.sublist import SubjectTree


def plain_of(tree: SubjectTree[str], subject: bytes) -> list[str]:
    return tree.match(subject)[0]


def groups_of(tree: SubjectTree[str], subject: bytes) -> list[list[str]]:
    return tree.match(subject)[1]


def test_literal_and_wildcards() -> None:
    t: SubjectTree[str] = SubjectTree()
    for subj, item in [
        (b"foo.bar", "lit"),
        (b"foo.*", "pwc"),
        (b"foo.>", "fwc"),
        (b">", "all"),
        (b"*.bar", "first"),
        (b"foo", "short"),
    ]:
        t.insert(subj, None, item)
    assert sorted(plain_of(t, b"foo.bar")) == ["all", "first", "fwc", "lit", "pwc"]
    assert sorted(plain_of(t, b"foo.baz")) == ["all", "fwc", "pwc"]
    assert sorted(plain_of(t, b"foo.bar.baz")) == ["all", "fwc"]
    assert sorted(plain_of(t, b"foo")) == ["all", "short"]
    assert plain_of(t, b"nothing.here.at.all") == ["all"]
    assert t.has_interest(b"x")
    assert t.count == 6


def test_partial_wildcard_tokens_are_literals() -> None:
    t: SubjectTree[str] = SubjectTree()
    t.insert(b"foo*", None, "a")
    t.insert(b"foo.*", None, "b")
    assert plain_of(t, b"foo*") == ["a"]
    assert plain_of(t, b"fooX") == []
    assert plain_of(t, b"foo.*") == ["b"]  # a published "*" is matched by a wildcard only


def test_subjects_with_empty_tokens_match_nothing() -> None:
    t: SubjectTree[str] = SubjectTree()
    t.insert(b">", None, "all")
    t.insert(b"a.*.b", None, "mid")
    for s in (b"", b"a..b", b".a", b"a."):
        assert t.match(s) == ([], [])


def test_queue_groups_gather_across_nodes() -> None:
    t: SubjectTree[str] = SubjectTree()
    t.insert(b"orders.new", b"workers", "w1")
    t.insert(b"orders.*", b"workers", "w2")
    t.insert(b"orders.>", b"workers", "w3")
    t.insert(b"orders.new", b"audit", "a1")
    t.insert(b"orders.new", None, "plain")
    plain, groups = t.match(b"orders.new")
    assert plain == ["plain"]
    by_size = sorted(sorted(g) for g in groups)
    assert by_size == [["a1"], ["w1", "w2", "w3"]]
    assert sorted(sorted(g) for g in groups_of(t, b"orders.old")) == [["w2", "w3"]]


def test_nats_server_order() -> None:
    # what nats-server 2.9 delivers first for "a.b.c" (pinned by the differential tests)
    t: SubjectTree[str] = SubjectTree()
    for subj, sid in [
        (b"a.*.c", "1"),
        (b"a.b.c", "2"),
        (b"a.>", "3"),
        (b"*.b.c", "4"),
        (b">", "5"),
        (b"a.b.*", "6"),
    ]:
        t.insert(subj, None, sid)
    assert plain_of(t, b"a.b.c") == ["5", "4", "3", "1", "2", "6"]
    t2: SubjectTree[str] = SubjectTree()
    t2.insert(b"in.*", None, "1")
    t2.insert(b"in.x", None, "2")
    assert plain_of(t2, b"in.x") == ["2", "1"]  # the literal before the last "*"


def test_remove_and_pruning() -> None:
    t: SubjectTree[str] = SubjectTree()
    t.insert(b"a.b.c", None, "x")
    t.insert(b"a.*.c", b"q", "y")
    t.insert(b"a.>", None, "z")
    assert not t.remove(b"a.b.c", None, "nope")
    assert not t.remove(b"a.b", None, "x")
    assert not t.remove(b"a.b.c", b"q", "x")
    assert t.remove(b"a.b.c", None, "x")
    assert not t.remove(b"a.b.c", None, "x")
    assert t.remove(b"a.*.c", b"q", "y")
    assert t.remove(b"a.>", None, "z")
    assert t.count == 0
    assert t.items() == []
    root = t._root
    assert root.is_empty()  # every branch was pruned


def test_items_lists_everything() -> None:
    t: SubjectTree[str] = SubjectTree()
    entries = [(b"a", None, "1"), (b"a.*", b"q", "2"), (b"a.>", None, "3"), (b"b.c", None, "4")]
    for subj, q, item in entries:
        t.insert(subj, q, item)
    assert sorted(t.items(), key=lambda e: e[2]) == entries


def test_cache_is_used_and_invalidated() -> None:
    t: SubjectTree[str] = SubjectTree()
    t.insert(b"foo.bar", None, "1")
    t.match(b"foo.bar")
    t.match(b"foo.baz")
    t.match(b"other")
    assert t.cache_count() == 3
    first = t.match(b"foo.bar")
    assert t.match(b"foo.bar") is first  # served from the cache
    # a literal insert drops only its own subject
    t.insert(b"foo.bar", None, "2")
    assert t.cache_count() == 2
    assert sorted(plain_of(t, b"foo.bar")) == ["1", "2"]
    # a wildcard insert drops every cached subject it matches, and nothing else
    t.insert(b"foo.*", None, "3")
    assert t.cache_count() == 1  # "other" stays
    assert sorted(plain_of(t, b"foo.baz")) == ["3"]
    assert sorted(plain_of(t, b"foo.bar")) == ["1", "2", "3"]
    t.remove(b"foo.*", None, "3")
    assert plain_of(t, b"foo.baz") == []
    t.insert(b">", None, "4")
    assert plain_of(t, b"other") == ["4"]
    t.remove(b">", None, "4")
    assert plain_of(t, b"other") == []


def test_cache_is_bounded() -> None:
    t: SubjectTree[str] = SubjectTree(cache_size=16)
    t.insert(b">", None, "all")
    for i in range(1000):
        assert plain_of(t, b"s.%d" % i) == ["all"]
        assert t.cache_count() <= 16
    assert plain_of(t, b"s.999") == ["all"]


def test_counters() -> None:
    t: SubjectTree[str] = SubjectTree()
    t.insert(b"a", None, "1")
    t.insert(b"b", None, "2")
    t.remove(b"b", None, "2")
    assert (t.count, t.inserts, t.removes) == (1, 2, 1)
    t.match(b"a")
    t.match(b"a")
    t.match(b"c")
    assert (t.matches, t.cache_hits) == (3, 1)
    # a hot path that reads the cache itself counts its hits
    assert t.cache.get(b"a") is not None
    t.hot_hits += 1
    assert (t.matches, t.cache_hits) == (4, 2)
    t.insert(b"a", b"q", "3")
    t.match(b"a")
    assert t.fanout_stats() == (2, 2, 2)  # "a": one plain member and one group; "c": none


# -- a model ------------------------------------------------------------------------------------

tok = st.sampled_from([b"a", b"b", b"c", b"d"])  # "d": never in a filter
filter_tok = st.sampled_from([b"a", b"b", b"c", b"*"])


@st.composite
def filters(draw: st.DrawFn) -> bytes:
    toks = draw(st.lists(filter_tok, min_size=1, max_size=3))
    if draw(st.booleans()):
        toks.append(b">")
    return b".".join(toks)


# long probes exercise the deep cache (results that depend on a prefix only)
literals = st.lists(tok, min_size=1, max_size=6).map(b".".join)
change = st.tuples(st.booleans(), filters(), st.sampled_from([None, b"q1", b"q2"]), st.integers(0, 5))


@settings(max_examples=300, deadline=None)
@given(st.lists(change, max_size=40), st.lists(literals, min_size=1, max_size=12))
def test_matches_a_brute_force_model(
    changes: list[tuple[bool, bytes, bytes | None, int]], probes: list[bytes]
) -> None:
    t: SubjectTree[str] = SubjectTree(cache_size=8)
    model: set[tuple[bytes, bytes | None, str]] = set()
    for add, subj, queue, n in changes:
        item = f"i{n}"
        if add and (subj, queue, item) not in model:
            t.insert(subj, queue, item)
            model.add((subj, queue, item))
        elif not add:
            assert t.remove(subj, queue, item) == ((subj, queue, item) in model)
            model.discard((subj, queue, item))
        for probe in probes:  # interleaved so the cache is exercised across changes
            plain, groups = t.match(probe)
            want = [(s, q, i) for s, q, i in model if subject_matches(s.decode(), probe.decode())]
            assert Counter(plain) == Counter(i for _, q, i in want if q is None)
            want_groups = {q: Counter(i for _, q2, i in want if q2 == q) for _, q, _ in want if q is not None}
            got = Counter(frozenset(Counter(g).items()) for g in groups)
            assert got == Counter(frozenset(c.items()) for c in want_groups.values())
    assert t.count == len(model)
    assert sorted(t.items(), key=repr) == sorted(model, key=repr)


def test_reply_subjects_share_one_prefix_entry_and_stay_correct() -> None:
    t: SubjectTree[str] = SubjectTree(cache_size=64)
    t.insert(b"_INBOX.abc.*", None, "inbox")
    t.insert(b"orders.new", None, "orders")
    t.match(b"orders.new")  # a literal last token: cached under the full subject
    for n in range(1000):  # a new reply subject per request: no churn of the main cache
        assert t.match(b"_INBOX.abc.%d" % n) == (["inbox"], [])
    assert t.cache_count() == 1 and t.cache_hits >= 999
    assert t.match(b"_INBOX.abc.") == ([], [])  # an empty last token still matches nothing
    t.insert(b"_INBOX.abc.7", b"q", "literal")  # a literal last token: the prefix entry goes
    assert t.match(b"_INBOX.abc.7") == (["inbox"], [["literal"]])
    assert t.match(b"_INBOX.abc.8") == (["inbox"], [])
    t.insert(b"*.abc.9", None, "pwc-then-literal")  # a literal last token under a wildcard branch
    plain, groups = t.match(b"_INBOX.abc.9")
    assert sorted(plain) == ["inbox", "pwc-then-literal"] and groups == []
    assert t.match(b"_INBOX.abc.10") == (["inbox"], [])


def test_ack_subjects_share_one_deep_entry_and_stay_correct() -> None:
    t: SubjectTree[str] = SubjectTree(cache_size=64)
    t.insert(b"$JS.ACK.S.C.>", None, "acks")
    t.insert(b"$JS.ACK.S.D.>", None, "other")
    for n in range(1000):  # every ack subject is new: one deep entry answers them all
        assert t.match(b"$JS.ACK.S.C.1.%d.%d.1700000000.0" % (n, n)) == (["acks"], [])
    assert t.cache_count() == 0 and t.cache_hits >= 999
    assert t.match(b"$JS.ACK.S.C") == ([], [])  # too short for ">"
    assert t.match(b"$JS.ACK.S.C.x") == (["acks"], [])
    assert t.match(b"$JS.ACK.S.C.1..2") == ([], [])  # an empty token matches nothing
    assert t.match(b"$JS.ACK.S.C.1.2.") == ([], [])
    assert t.match(b"$JS.ACK.S.D.1.2.3") == (["other"], [])
    t.insert(b"$JS.ACK.S.C.1.5.*", None, "deeper")  # a literal further down: the entries go
    assert sorted(plain_of(t, b"$JS.ACK.S.C.1.5.9")) == ["acks", "deeper"]
    assert plain_of(t, b"$JS.ACK.S.C.1.6.9") == ["acks"]
    assert plain_of(t, b"$JS.ACK.S.C.1.5.9.1") == ["acks"]
    t.insert(b"$JS.ACK.*.C.*.*.*.*.*", None, "nine")  # a branch that reaches the end: counts matter
    assert sorted(plain_of(t, b"$JS.ACK.S.C.2.2.3.4.5")) == ["acks", "nine"]
    assert plain_of(t, b"$JS.ACK.S.C.2.2.3.4") == ["acks"]
    assert plain_of(t, b"$JS.ACK.S.C.2.2.3.4.5.6") == ["acks"]
    assert sorted(plain_of(t, b"$JS.ACK.S.C.2.2.3.4.6")) == ["acks", "nine"]


def test_a_sibling_result_is_only_given_while_every_sibling_gets_it() -> None:
    t: SubjectTree[str] = SubjectTree(cache_size=64)
    t.insert(b"_INBOX.abc.*", None, "inbox")
    assert t.sibling_result(b"_INBOX.abc.1") is None  # nothing matched yet: nothing known
    r = t.match(b"_INBOX.abc.1")
    assert t.sibling_result(b"_INBOX.abc.2") is r and t.sibling_result(b"_INBOX.abc.1") is r
    for subject in (b"_INBOX.abc.", b"_INBOX", b".x", b"_INBOX.abd.1", b"_INBOX.abc.1.2"):
        assert t.sibling_result(subject) is None, subject
    t.insert(b"_INBOX.abc.7", None, "literal")  # a literal sibling: the shared result goes
    assert t.sibling_result(b"_INBOX.abc.2") is None
    assert plain_of(t, b"_INBOX.abc.7") == ["literal", "inbox"]
    assert t.sibling_result(b"_INBOX.abc.2") is None  # (a literal last token is looked up now)
    assert t.remove(b"_INBOX.abc.7", None, "literal")
    r = t.match(b"_INBOX.abc.3")
    assert t.sibling_result(b"_INBOX.abc.7") is r and r == (["inbox"], [])
    assert t.remove(b"_INBOX.abc.*", None, "inbox")  # an UNSUB: nothing stale is given
    assert t.sibling_result(b"_INBOX.abc.3") is None
    assert t.match(b"_INBOX.abc.3") == ([], [])


@settings(max_examples=300, deadline=None)
@given(st.lists(change, max_size=40), st.lists(literals, min_size=1, max_size=12))
def test_a_sibling_result_is_what_every_sibling_matches(
    changes: list[tuple[bool, bytes, bytes | None, int]], probes: list[bytes]
) -> None:
    t: SubjectTree[str] = SubjectTree(cache_size=8)
    model: set[tuple[bytes, bytes | None, str]] = set()
    for add, subj, queue, n in changes:
        item = f"i{n}"
        if add and (subj, queue, item) not in model:
            t.insert(subj, queue, item)
            model.add((subj, queue, item))
        elif not add:
            t.remove(subj, queue, item)
            model.discard((subj, queue, item))
        for probe in probes:
            t.match(probe)
            shared = t.sibling_result(probe)
            if shared is None:
                continue
            head = probe[: probe.rfind(b".") + 1]
            for last in (b"a", b"b", b"c", b"d", b"*x"):
                sibling = head + last
                want = [i for s, q, i in model if q is None and subject_matches(s.decode(), sibling.decode())]
                assert Counter(shared[0]) == Counter(want), (probe, sibling)
                assert Counter(map(len, shared[1])) == Counter(map(len, _groups(model, sibling))), (
                    probe,
                    sibling,
                )


def _groups(model: set[tuple[bytes, bytes | None, str]], subject: bytes) -> list[list[str]]:
    by_queue: dict[bytes, list[str]] = {}
    for s, q, i in model:
        if q is not None and subject_matches(s.decode(), subject.decode()):
            by_queue.setdefault(q, []).append(i)
    return list(by_queue.values())
