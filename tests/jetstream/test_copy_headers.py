"""The pure parts of mirrors and sources: Nats-Stream-Source as nats-server 2.15 writes and reads
it (every form it has written), the index name that tells sources apart, the external api hash,
the header edits of a copy and the chain of subject transforms."""

from __future__ import annotations

import pytest

from jetpy.jetstream.models import ExternalStream, StreamSource, SubjectTransform
from jetpy.jetstream.origin import TransformChain, strip_expected
from jetpy.jetstream.sources import (
    api_hash,
    index_name,
    parse_source_header,
    source_header,
    with_source_header,
)


def test_index_names_as_nats_server_composes_them() -> None:
    assert index_name(StreamSource(name="O")) == "O > >"
    assert index_name(StreamSource(name="O", filter_subject="o.1")) == "O o.1 >"
    trs = [SubjectTransform(src="a.x.*", dest="t.x.$1"), SubjectTransform(src="a.y.*", dest="")]
    assert index_name(StreamSource(name="A", subject_transforms=trs)) == "A a.x.*\fa.y.* t.x.$1\f>"
    ext = StreamSource(name="O", external=ExternalStream(api="$JS.hub.API"))
    assert index_name(ext) == f"O:{api_hash('$JS.hub.API')} > >"


def test_api_hash_is_nats_servers_get_hash() -> None:
    # getHash as nats-server computes it (read from its source): SHA-256, each of the first 8
    # bytes mod 62 as 0-9A-Za-z; its domains are not served here, so this is not compared live
    assert api_hash("$JS.hub.API") == "bTMUkJQk"
    assert len(api_hash("")) == 8


def test_the_header_value_is_written_as_nats_server_2_15_writes_it() -> None:
    # as 2.15.1 wrote them (tests/differential compares them live)
    assert source_header("O > >", 1, "o.0", "bXQVXus2") == "O 1 > > o.0 bXQVXus2"
    assert source_header("O o.1 >", 2, "o.1", "bXQVXus2") == "O 2 o.1 > o.1 bXQVXus2"
    assert (
        source_header("A a.x.*\fa.y.* t.x.$1\f>", 1, "a.x.1", "id") == "A 1 a.x.*\fa.y.* t.x.$1\f> a.x.1 id"
    )
    assert source_header("O > >", 7, "o", "") == "O 7 > > o"  # an origin that gave no identity


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("O 1 > > o.0 bXQVXus2", ("O", "O > >", 1, "bXQVXus2")),
        ("O 2 o.1 > o.1", ("O", "O o.1 >", 2, "")),
        ("O 3 > >", ("O", "O > >", 3, "")),  # 2.10-2.14
        ("O 4", ("O", "", 4, "")),  # 2.9
        ("$JS.ACK.O.c.1.5.5.1700000000000000000.0", ("O", "", 5, "")),  # 2.2
        ("O:h4sh 9 > > s id", ("O:h4sh", "O:h4sh > >", 9, "id")),
        ("O", None),
        ("O x > >", None),
        ("O 1 >", None),
        ("$JS.ACK.O.c.1", None),
    ],
)
def test_every_form_of_the_header_reads_back(value: str, parsed: tuple[str, str, int, str] | None) -> None:
    assert parse_source_header(value) == parsed


def test_written_values_read_back_as_the_source_they_came_from() -> None:
    src = StreamSource(name="A", subject_transforms=[SubjectTransform(src="a.>", dest="b.>")])
    iname = index_name(src)
    assert parse_source_header(source_header(iname, 42, "a.q", "ident")) == ("A", iname, 42, "ident")


def test_a_copy_keeps_its_headers_less_the_checked_ones_with_its_source_last() -> None:
    hdr = b"NATS/1.0\r\nA: 1\r\nNats-Expected-Stream: O\r\nNats-Stream-Source: X 1 > > x old\r\nB: 2\r\n\r\n"
    out = with_source_header(hdr, "O 5 > > o id")
    assert out == b"NATS/1.0\r\nA: 1\r\nB: 2\r\nNats-Stream-Source: O 5 > > o id\r\n\r\n"
    assert with_source_header(b"", "O 1 > > o id") == b"NATS/1.0\r\nNats-Stream-Source: O 1 > > o id\r\n\r\n"


def test_strip_expected() -> None:
    assert strip_expected(b"NATS/1.0\r\nNats-Expected-Last-Sequence: 4\r\n\r\n") == b""
    assert strip_expected(b"NATS/1.0\r\nNats-TTL: 1h\r\nNats-Expected-Last-Sequence: 4\r\n\r\n") == (
        b"NATS/1.0\r\nNats-TTL: 1h\r\n\r\n"
    )
    plain = b"NATS/1.0\r\nK: v\r\n\r\n"
    assert strip_expected(plain) is plain


def test_the_first_matching_transform_maps_an_empty_destination_keeps() -> None:
    chain = TransformChain(
        [
            SubjectTransform(src="a.x.*", dest="t.x.$1"),
            SubjectTransform(src="a.y.*", dest=""),
            SubjectTransform(src="", dest="rest.>"),
        ]
    )
    assert chain.map("a.x.1") == "t.x.1"
    assert chain.map("a.y.2") == "a.y.2"
    assert chain.map("z") == "rest.z"
    assert not TransformChain([])
    assert TransformChain([SubjectTransform(src="q", dest="r")]).map("other") == "other"
