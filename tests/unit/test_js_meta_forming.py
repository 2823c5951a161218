"""The rule a pristine JetStream server follows to found the meta group or join it
(``jscluster.forming.decide``): it founds only with a view every server of it reported settled
and identical, joins any group that runs, and founds alongside a running member only when that
member named it a founder and nobody ever heard from its founder id."""

from __future__ import annotations

from jetpy.server.jscluster.forming import MetaHello, decide
from jetpy.server.nrg import member_id

ABC = ["a", "b", "c"]


def pristine(name: str, view: list[str], settled: bool = True) -> MetaHello:
    return MetaHello(name, view=view, settled=settled)


def founder(name: str, founders: list[str], heard: tuple[str, ...] = ()) -> MetaHello:
    return MetaHello(
        name,
        member=member_id(name),
        leader="",
        voters=sorted(member_id(s) for s in founders),
        founders=founders,
        heard=sorted(heard),
    )


def test_founds_once_every_server_of_its_view_agrees() -> None:
    answers = {"b": pristine("b", ABC), "c": pristine("c", ABC)}
    assert decide("a", answers, True, ABC) == ABC


def test_waits_while_unsettled_or_views_differ() -> None:
    assert decide("a", {"b": pristine("b", ABC), "c": pristine("c", ABC)}, False, ABC) is None
    assert decide("a", {"b": pristine("b", ABC, settled=False), "c": pristine("c", ABC)}, True, ABC) is None
    # b has not heard of c yet (the routes still gossip): nobody founds
    assert decide("a", {"b": pristine("b", ["a", "b"]), "c": pristine("c", ABC)}, True, ABC) is None


def test_a_lone_server_founds_only_when_settled() -> None:
    assert decide("a", {}, True, ["a"]) == ["a"]
    assert decide("a", {}, False, ["a"]) is None


def test_joins_a_running_group() -> None:
    # a group of a and b runs; c came later: it joins under a new id
    answers = {"a": founder("a", ["a", "b"]), "b": founder("b", ["a", "b"])}
    assert decide("c", answers, True, ABC) == []
    # a recovered member (no founders in this process) says nothing about founding: join
    answers = {"a": MetaHello("a", member=member_id("a"), voters=[member_id("a")])}
    assert decide("c", answers, False, ["c"]) == []


def test_a_named_founder_founds_alongside_the_first() -> None:
    """a founded with a, b, c a round before b and c saw that they all agreed: b founds too."""
    answers = {"a": founder("a", ABC), "c": pristine("c", ABC)}
    assert decide("b", answers, True, ABC) == ABC
    answers = {
        "a": founder("a", ABC, heard=(member_id("c"),)),
        "c": founder("c", ABC, heard=(member_id("a"),)),
    }
    assert decide("b", answers, False, ["b"]) == ABC


def test_a_named_founder_that_ran_before_joins_as_new() -> None:
    """Heard from already (its directory was deleted after it ran), a founder missing from the
    round, or a group whose voters changed: it joins under a new id."""
    answers = {"a": founder("a", ABC, heard=(member_id("b"),)), "c": founder("c", ABC)}
    assert decide("b", answers, True, ABC) == []
    assert decide("b", {"a": founder("a", ABC)}, True, ABC) == []
    changed = founder("a", ABC)
    changed.voters = sorted([*changed.voters, "Xnew0001"])
    assert decide("b", {"a": changed, "c": founder("c", ABC)}, True, ABC) == []
