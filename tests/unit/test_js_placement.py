"""Which servers a stream's placement allows (``jscluster.placement``): the rule a move keeps
a server by, and the one it places others by."""

from __future__ import annotations

import pytest

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import Placement
from jetpy.server.jscluster.placement import choose, suits

TAGS = {"n1": ["a", "d"], "n2": ["a"], "n3": ["a", "b"], "n4": ["b"], "n5": ["b", "c"]}


def allowed(p: Placement | None) -> list[str]:
    return [s for s in TAGS if suits(s, p, "C1", TAGS)]


def test_suits_by_cluster_and_every_tag_lower_cased() -> None:
    assert allowed(None) == ["n1", "n2", "n3", "n4", "n5"]
    assert allowed(Placement(tags=["B"])) == ["n3", "n4", "n5"]
    assert allowed(Placement(tags=["a", "b"])) == ["n3"]
    assert allowed(Placement(cluster="C1", tags=["c"])) == ["n5"]
    assert allowed(Placement(cluster="C2")) == []
    assert allowed(Placement(tags=["zzz"])) == []


def test_choose_places_only_allowed_servers_and_names_tags_it_lacks() -> None:
    got = choose(list(TAGS), {"n4": 3}, 2, Placement(tags=["b"]), "C1", TAGS)
    assert sorted(got) == ["n3", "n5"]  # the least loaded first
    with pytest.raises(ApiError) as exc:
        choose(["n1", "n2"], {}, 1, Placement(tags=["b"]), "C1", TAGS)
    assert exc.value.err_code == E.CLUSTER_NO_PEERS.err_code
    assert "tags not matched ['b']" in exc.value.description
