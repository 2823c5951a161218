"""Stream config defaults, refusals and update rules (nats-server 2.10/2.11 semantics)."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import (
    ExternalStream,
    Placement,
    RePublish,
    StreamConfig,
    StreamSource,
    SubjectTransform,
)
from jetpy.jetstream.validate import (
    DEFAULT_DUPLICATE_WINDOW,
    check_stream_config,
    check_stream_create,
    check_stream_update,
    is_valid_name,
)

S = 1_000_000_000
MS = 1_000_000


def err_of(cfg: StreamConfig, *, pedantic: bool = False) -> ApiError:
    with pytest.raises(ApiError) as exc:
        check_stream_create(cfg, pedantic=pedantic)
    return exc.value


def test_defaults() -> None:
    cfg = check_stream_config(StreamConfig(name="S"))
    assert cfg.subjects == ["S"]
    assert (cfg.max_msgs, cfg.max_bytes, cfg.max_msgs_per_subject, cfg.max_msg_size, cfg.max_consumers) == (
        -1,
        -1,
        -1,
        -1,
        -1,
    )
    assert cfg.duplicate_window == DEFAULT_DUPLICATE_WINDOW
    assert cfg.num_replicas == 1
    assert cfg.storage == "file"
    assert cfg.retention == "limits"


def test_normalization_is_idempotent() -> None:
    once = check_stream_config(StreamConfig(name="S", max_age=S, republish=RePublish(dest="out.>")))
    assert check_stream_config(once) == once


def test_duplicate_window_follows_short_max_age() -> None:
    assert check_stream_config(StreamConfig(name="S", max_age=30 * S)).duplicate_window == 30 * S
    assert check_stream_config(StreamConfig(name="S", max_age=3600 * S)).duplicate_window == 120 * S
    assert check_stream_config(StreamConfig(name="S", duplicate_window=5 * S)).duplicate_window == 5 * S


def test_mirror_and_sources() -> None:
    mirror = check_stream_config(StreamConfig(name="M", mirror=StreamSource(name="O")))
    assert mirror.subjects == []
    assert mirror.duplicate_window == 0  # a mirror dedupes nothing
    sourced = check_stream_config(
        StreamConfig(name="A", sources=[StreamSource(name="O"), StreamSource(name="P")])
    )
    assert sourced.subjects == []
    assert sourced.duplicate_window == 0  # 2.15: copies are not de-duplicated, no default window
    own = check_stream_config(StreamConfig(name="A", subjects=["a"], sources=[StreamSource(name="O")]))
    assert own.duplicate_window == 0


def test_rules_that_look_at_the_origin() -> None:
    origins = {
        "O": check_stream_config(
            StreamConfig(name="O", subjects=["o.>"], allow_direct=True, max_msg_size=100)
        ),
        "L": check_stream_config(StreamConfig(name="L", subjects=["l.>"], sources=[StreamSource(name="C")])),
    }
    look = origins.get
    m = check_stream_config(StreamConfig(name="M", mirror=StreamSource(name="O")), origins=look)
    assert m.mirror_direct is True  # follows the origin's allow_direct
    gone = check_stream_config(StreamConfig(name="M", mirror=StreamSource(name="GONE")), origins=look)
    assert gone.mirror_direct is False
    with pytest.raises(ApiError) as e:
        check_stream_config(
            StreamConfig(name="M", mirror=StreamSource(name="O")), origins=look, pedantic=True
        )
    assert e.value.err_code == 10157
    with pytest.raises(ApiError) as e:
        check_stream_config(
            StreamConfig(name="M", mirror=StreamSource(name="O"), max_msg_size=10), origins=look
        )
    assert e.value.err_code == 10030
    with pytest.raises(ApiError) as e:
        check_stream_config(
            StreamConfig(name="S", sources=[StreamSource(name="O")], max_msg_size=10), origins=look
        )
    assert e.value.err_code == 10046
    with pytest.raises(ApiError) as e:  # C sources L, which sources C
        check_stream_config(
            StreamConfig(name="C", subjects=["c"], sources=[StreamSource(name="L")]), origins=look
        )
    assert (e.value.err_code, e.value.description) == (10052, "detected cycle")
    ext = StreamSource(name="X", external=ExternalStream(api="$JS.h.API", deliver="o"))
    with pytest.raises(ApiError) as e:  # its deliveries would land in the origin's subjects
        check_stream_config(StreamConfig(name="S", sources=[StreamSource(name="O"), ext]), origins=look)
    assert e.value.err_code == 10022


def test_negative_limits_clamp_or_fail_pedantic() -> None:
    cfg = check_stream_config(StreamConfig(name="S", max_msgs=-5, max_bytes=-7))
    assert (cfg.max_msgs, cfg.max_bytes) == (-1, -1)
    err = err_of(StreamConfig(name="S", max_msgs=-5), pedantic=True)
    assert (err.err_code, err.description) == (10157, "pedantic mode: max_msgs must be set to -1")


def test_pedantic_duplicate_window() -> None:
    assert err_of(StreamConfig(name="S", max_age=30 * S), pedantic=True).err_code == 10157


def test_subject_delete_marker_ttl_enables_ttl_and_rollups() -> None:
    cfg = check_stream_config(StreamConfig(name="S", subject_delete_marker_ttl=5 * S, deny_purge=True))
    assert cfg.allow_msg_ttl and cfg.allow_rollup_hdrs and not cfg.deny_purge
    err = err_of(StreamConfig(name="S", subject_delete_marker_ttl=5 * S), pedantic=True)
    assert err.description == "subject delete marker cannot be set if message TTLs are disabled"


def test_a_republish_source_outside_the_subjects_is_taken_as_nats_server_2_15_takes_it() -> None:
    cfg = check_stream_config(
        StreamConfig(name="S", subjects=["r.>"], republish=RePublish(src="zz.>", dest="o.>"))
    )
    assert cfg.republish == RePublish(src="zz.>", dest="o.>")


def test_republish_source_defaults_to_everything() -> None:
    cfg = check_stream_config(StreamConfig(name="S", subjects=["a.>"], republish=RePublish(dest="b.>")))
    assert cfg.republish == RePublish(src=">", dest="b.>")


def test_empty_placement_is_dropped() -> None:
    assert check_stream_config(StreamConfig(name="S", placement=Placement())).placement is None
    kept = check_stream_config(StreamConfig(name="S", placement=Placement(cluster="c")))
    assert kept.placement == Placement(cluster="c")


def test_names() -> None:
    assert is_valid_name("ORDERS-1_x")
    for bad in ("", "a.b", "a*", "a>", "a b", "a\tb", "a/b", "a\\b"):
        assert not is_valid_name(bad), bad


BAD: list[tuple[str, dict[str, Any], int, str]] = [
    ("dot in name", {"name": "a.b"}, 10052, "stream name is required and can not contain '.', '*', '>'"),
    ("space in name", {"name": "a b"}, 10052, ""),
    ("empty name", {"name": ""}, 10052, ""),
    ("slash in name", {"name": "a/b"}, 10128, "Stream name can not contain path separators"),
    ("long name", {"name": "x" * 256}, 10052, "stream name is too long, maximum allowed is 255"),
    ("description", {"description": "d" * 4097}, 10052, "stream description is too long, maximum allowed is 4096"),
    ("metadata", {"metadata": {"k": "v" * (128 * 1024)}}, 10052, "stream metadata exceeds maximum size of 131072 bytes"),
    ("sealed at create", {"sealed": True}, 10052, "stream configuration for create can not be sealed"),
    ("replicas 3", {"num_replicas": 3}, 10074, "replicas > 1 not supported in non-clustered mode"),
    ("replicas 6", {"num_replicas": 6}, 10052, "maximum replicas is 5"),
    ("replicas -1", {"num_replicas": -1}, 10133, "replicas count cannot be negative"),
    ("negative max_age", {"max_age": -1}, 10052, "max age can not be negative"),
    ("tiny max_age", {"max_age": 50 * MS}, 10052, "max age needs to be >= 100ms"),
    ("negative dup", {"duplicate_window": -1}, 10052, "duplicates window can not be negative"),
    ("tiny dup", {"duplicate_window": 50 * MS}, 10052, "duplicates window needs to be >= 100ms"),
    ("dup > age", {"max_age": 60 * S, "duplicate_window": 120 * S}, 10052, "duplicates window can not be larger then max age"),
    ("rollup+deny purge", {"deny_purge": True, "allow_rollup_hdrs": True}, 10052, "roll-ups require the purge permission"),
    ("dnps old", {"discard_new_per_subject": True}, 10052, "discard new per subject requires discard new policy to be set"),
    ("dnps no max", {"discard_new_per_subject": True, "discard": "new"}, 10052, "discard new per subject requires max msgs per subject > 0"),
    ("marker ttl small", {"subject_delete_marker_ttl": 500 * MS}, 10052, "subject delete marker TTL must be at least 1 second"),
    ("marker ttl negative", {"subject_delete_marker_ttl": -1}, 10052, "subject delete marker TTL must not be negative"),
    ("invalid subject", {"subjects": ["a..b"]}, 10052, "invalid subject"),
    ("duplicate subjects", {"subjects": ["q", "q"]}, 10052, "duplicate subjects detected"),
    ("overlap", {"subjects": ["a.>", "a.b"]}, 10052, 'subject "a.>" overlaps with "a.b"'),
    ("overlap wildcards", {"subjects": ["a.*.c", "a.b.*"]}, 10052, 'subject "a.*.c" overlaps with "a.b.*"'),
    ("js api", {"subjects": ["$JS.API.>"]}, 10052, "subjects overlap with jetstream api"),
    ("js api literal", {"subjects": ["$JS.API.INFO"]}, 10052, "subjects overlap with jetstream api"),
    ("everything", {"subjects": [">"]}, 10052, "capturing all subjects requires no-ack to be true"),
    ("mirror+subjects", {"subjects": ["m"], "mirror": StreamSource(name="X")}, 10034, "stream mirrors can not contain subjects"),
    ("mirror+sources", {"mirror": StreamSource(name="X"), "sources": [StreamSource(name="Y")]}, 10031, ""),
    ("mirror+first_seq", {"mirror": StreamSource(name="X"), "first_seq": 10}, 10143, ""),
    ("mirror bad name", {"mirror": StreamSource(name="a.b")}, 10142, "mirrored stream name is invalid"),
    ("mirror marker", {"mirror": StreamSource(name="X"), "subject_delete_marker_ttl": 5 * S}, 10052, "subject delete markers forbidden on mirrors"),
    (
        "mirror filter+transforms",
        {"mirror": StreamSource(name="X", filter_subject="a", subject_transforms=[SubjectTransform(src="b", dest="c")])},
        10150,
        "",
    ),
    (
        "mirror overlapping transforms",
        {"mirror": StreamSource(name="X", subject_transforms=[SubjectTransform(src="a.>", dest="b.>"), SubjectTransform(src="a.b", dest="c")])},
        10152,
        "",
    ),
    ("source bad name", {"sources": [StreamSource(name="")]}, 10141, "sourced stream name is invalid"),
    ("source duplicate", {"sources": [StreamSource(name="X"), StreamSource(name="X")]}, 10140, ""),
    (
        "source bad transform src",
        {"sources": [StreamSource(name="X", subject_transforms=[SubjectTransform(src="a..b", dest="c")])]},
        10145,
        "source transform source: invalid subject a..b",
    ),
    (
        "source bad transform dest",
        {"sources": [StreamSource(name="X", subject_transforms=[SubjectTransform(src="a.*", dest="c.{{wildcard(2)}}")])]},
        10146,
        "source transform: invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]",
    ),
    (
        "external deliver wildcard",
        {"sources": [StreamSource(name="X", external=ExternalStream(api="$JS.h.API", deliver="dl.*"))]},
        10024,
        "stream external delivery prefix dl.* must not contain wildcards",
    ),
    (
        "external api is ours",
        {"sources": [StreamSource(name="X", external=ExternalStream(api="$JS.API", deliver="dl"))]},
        10021,
        "stream external api prefix $JS.API must not overlap with $JS.API",
    ),
    ("transform bad source", {"subject_transform": SubjectTransform(src="a.>.b", dest="x")}, 10155, ""),
    ("transform unknown fn", {"subject_transform": SubjectTransform(src="a.*", dest="x.{{nope(1)}}")}, 10156, ""),
    ("republish cycle", {"subjects": ["r.>"], "republish": RePublish(src="r.>", dest="r.x.>")}, 10052, "stream configuration for republish destination forms a cycle"),
    ("republish bad", {"subjects": ["r.>"], "republish": RePublish(src="r.*", dest="out.$3")}, 10052, "stream configuration for republish not valid"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "fields", "err_code", "description"), BAD, ids=[b[0] for b in BAD])
def test_refusals(case: str, fields: dict[str, Any], err_code: int, description: str) -> None:
    cfg = StreamConfig(**{"name": "S", **fields})
    err = err_of(cfg)
    assert err.err_code == err_code, err
    if description:
        assert err.description == description


def test_first_error_wins_in_nats_server_order() -> None:
    # R3 is refused only after the rest of the config checks out (single-server add path)
    assert err_of(StreamConfig(name="S", num_replicas=3, subjects=["a..b"])).description == "invalid subject"


def test_no_ack_may_capture_everything() -> None:
    assert check_stream_config(StreamConfig(name="S", subjects=[">"], no_ack=True)).subjects == [">"]


# -- updates -------------------------------------------------------------------------------------


def base() -> StreamConfig:
    return check_stream_config(StreamConfig(name="S", subjects=["a.>"]))


def update_err(old: StreamConfig, **fields: Any) -> ApiError:
    with pytest.raises(ApiError) as exc:
        check_stream_update(old, replace(old, **fields))
    return exc.value


def test_update_allows_limits_subjects_and_flags() -> None:
    old = base()
    new = check_stream_update(old, replace(old, subjects=["a.>", "b.>"], max_msgs=10, retention="interest"))
    assert new.subjects == ["a.>", "b.>"] and new.max_msgs == 10 and new.retention == "interest"
    raw = StreamConfig(name="S", subjects=["a.>"], description="x")
    assert check_stream_update(old, raw).description == "x"


UPDATE_BAD: list[tuple[dict[str, Any], int, str]] = [
    ({"name": "T"}, 10052, "stream configuration name must match original"),
    ({"storage": "memory"}, 10052, "stream configuration update can not change storage type"),
    (
        {"retention": "workqueue"},
        10052,
        "stream configuration update can not change retention policy to/from workqueue",
    ),
    ({"num_replicas": 3}, 10074, ""),
]


@pytest.mark.parametrize(("fields", "err_code", "description"), UPDATE_BAD)
def test_update_refusals(fields: dict[str, Any], err_code: int, description: str) -> None:
    err = update_err(base(), **fields)
    assert err.err_code == err_code
    if description:
        assert err.description == description


def test_one_way_flags() -> None:
    sealed = replace(base(), sealed=True, deny_delete=True, deny_purge=True)
    assert (
        update_err(sealed, sealed=False).description
        == "stream configuration update can not unseal a sealed stream"
    )
    dd = replace(base(), deny_delete=True)
    assert (
        update_err(dd, deny_delete=False).description
        == "stream configuration update can not cancel deny message deletes"
    )
    dp = replace(base(), deny_purge=True)
    assert (
        update_err(dp, deny_purge=False).description
        == "stream configuration update can not cancel deny purge"
    )
    ttl = replace(base(), allow_msg_ttl=True)
    assert update_err(ttl, allow_msg_ttl=False).description == "message TTL status can not be disabled"
    # turning them on is fine
    assert check_stream_update(base(), replace(base(), deny_delete=True, allow_msg_ttl=True)).deny_delete


def test_sealing_locks_the_stream_down() -> None:
    old = check_stream_config(StreamConfig(name="S", max_age=3600 * S, allow_rollup_hdrs=True))
    new = check_stream_update(old, replace(old, sealed=True))
    assert (new.max_age, new.discard, new.deny_delete, new.deny_purge, new.allow_rollup_hdrs) == (
        0,
        "new",
        True,
        True,
        False,
    )


def test_mirror_may_be_removed_but_not_changed() -> None:
    old = check_stream_config(StreamConfig(name="M", mirror=StreamSource(name="O")))
    assert update_err(old, mirror=StreamSource(name="P")).err_code == 10055
    promoted = check_stream_update(old, replace(old, mirror=None, subjects=["m.>"]))
    assert promoted.mirror is None
