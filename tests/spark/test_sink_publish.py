"""The sink's publishing without a Spark session (``spark/publish.publish_rows``, as a task runs
it): through bulk publishes on jetpy, one publish per row on nats-server, the same outcome: a
task retried after it failed half-way publishes the same ids and the stream keeps each row once;
rows for several streams go each to its own; headers and ``msg_id`` columns as given."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pyarrow as pa
import pytest
from nats.js import JetStreamContext

import jetpy
from conftest import Proc
from jetpy.jetstream.api import bulk_publish as server_bulk
from jetpy.server.options import ServerOptions, User
from jetpy.spark.options import parse_sink
from jetpy.spark.publish import publish_rows

from .conftest import run, stream_msgs


def _batches(n: int, subject_of: str = "tp.{}", per: int = 700) -> list[pa.RecordBatch]:
    subjects = pa.array([subject_of.format(i % 4) for i in range(n)])
    data = pa.array([b"row %d" % i for i in range(n)], pa.binary())
    return [
        pa.RecordBatch.from_arrays([subjects.slice(a, per), data.slice(a, per)], ["subject", "data"])
        for a in range(0, n, per)
    ]


def _failing(batches: list[pa.RecordBatch], after: int) -> Iterator[pa.RecordBatch]:
    yield from batches[:after]
    raise RuntimeError("the executor was lost")


@pytest.mark.parametrize("server", ["js_server", "ref_server"])
def test_a_retried_task_stores_each_row_once(server: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(server).url
    name = f"TP{server[:3].upper()}"

    async def add(js: JetStreamContext) -> None:
        await js.add_stream(name=name, subjects=[f"{name.lower()}.>"])

    run(add, url)
    opts = parse_sink({"servers": url, "maxInFlight": "1500"})
    batches = _batches(5000, f"{name.lower()}.{{}}")
    with pytest.raises(RuntimeError, match="executor was lost"):
        publish_rows(opts, _failing(batches, 4), "write-1:0")
    first = stream_msgs(url, name)
    assert 0 < first <= 5000
    res = publish_rows(opts, iter(batches), "write-1:0")  # the retry: same ids
    assert res.published + res.duplicates == 5000
    assert res.duplicates >= 4 * 700 - opts.max_in_flight  # what the failed attempt had stored
    assert stream_msgs(url, name) == 5000
    again = publish_rows(opts, iter(batches), "write-1:0")  # the whole job again
    assert (again.published, again.duplicates) == (0, 5000)
    assert stream_msgs(url, name) == 5000


def test_rows_for_several_streams_and_headers(js_server: Proc) -> None:
    url = js_server.url

    async def add(js: JetStreamContext) -> None:
        await js.add_stream(name="TA", subjects=["ta.>"])
        await js.add_stream(name="TB", subjects=["tb.*"])

    run(add, url)
    n = 3000
    subjects = pa.array([("ta.x", "tb.y", "ta.z.w")[i % 3] for i in range(n)])
    data = pa.array([f"d{i}" for i in range(n)])
    ids = pa.array([f"id-{i}" if i % 2 else None for i in range(n)])
    headers = pa.array(
        [[("h", f"v{i}")] if i % 5 == 0 else None for i in range(n)], pa.map_(pa.string(), pa.string())
    )
    batch = pa.RecordBatch.from_arrays(
        [subjects, data, ids, headers], ["subject", "data", "msg_id", "headers"]
    )
    opts = parse_sink({"servers": url})
    res = publish_rows(opts, iter([batch]), "w:0")
    assert (res.published, res.duplicates) == (n, 0)
    assert stream_msgs(url, "TA") == 2000 and stream_msgs(url, "TB") == 1000

    async def check(js: JetStreamContext) -> None:
        ta = [await js.get_msg("TA", s) for s in (1, 2, 3, 4)]
        assert [(m.subject, m.data) for m in ta] == [
            ("ta.x", b"d0"),
            ("ta.z.w", b"d2"),
            ("ta.x", b"d3"),
            ("ta.z.w", b"d5"),
        ]
        assert ta[0].headers == {"h": "v0", "Nats-Msg-Id": "w:0:0"}
        assert ta[2].headers == {"Nats-Msg-Id": "id-3"}
        tb = await js.get_msg("TB", 2)
        assert (tb.subject, tb.data, tb.headers) == ("tb.y", b"d4", {"Nats-Msg-Id": "w:0:4"})

    run(check, url)
    again = publish_rows(opts, iter([batch]), "w:0")
    assert (again.published, again.duplicates) == (0, n)


def test_requests_bounded_by_bytes_and_max_in_flight(js_server: Proc) -> None:
    from jetpy.spark.bulk_publish import _cuts
    from jetpy.spark.paths import connect

    w = connect(parse_sink({"servers": js_server.url}).conn)
    try:
        subjects = pa.array([b"s.%d" % i for i in range(1000)], pa.binary())
        messages = pa.array([b"m" * (i % 50) for i in range(1000)], pa.binary())
        rows = pa.array(range(1000)).to_numpy()
        for limit, most in ((4096, 10_000), (1 << 20, 100), (64, 5)):
            cuts = list(_cuts(subjects, messages, limit, most, rows, w))
            assert cuts[0][0] == 0 and cuts[-1][1] == 1000
            assert all(
                a < b <= a + most and b == c
                for (a, b), (c, _) in zip(cuts, [*cuts[1:], (1000, 0)], strict=True)
            )
            for a, b in cuts:
                size = (
                    16
                    + 8
                    + sum(
                        12 + len(s) + len(m)
                        for s, m in zip(subjects[a:b].to_pylist(), messages[a:b].to_pylist(), strict=True)
                    )
                )
                assert size <= limit or b == a + 1
    finally:
        w.close()


async def test_a_busy_server_gets_the_request_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused as too many (10167: the server had requests waiting), a request is sent again
    after a pause; every row is stored once."""
    monkeypatch.setattr(server_bulk, "MAX_QUEUED_BYTES", 1)
    async with jetpy.Server(port=0, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(srv.client_url)
        await nc.jetstream().add_stream(name="BUSY", subjects=["busy.>"])
        opts = parse_sink({"servers": srv.client_url, "maxInFlight": "3000"})
        res = await asyncio.to_thread(publish_rows, opts, iter(_batches(20000, "busy.{}", 1000)), "b:0")
        assert (res.published, res.duplicates) == (20000, 0)
        assert (await nc.jetstream().stream_info("BUSY")).state.messages == 20000
        await nc.close()


async def test_a_user_who_may_not_list_streams_publishes_row_by_row(tmp_path: Path) -> None:
    perms: dict[str, object] = {
        "publish": {"allow": ["$JS.API.JETPY.PUBLISH.>", "lp.>"]},
        "subscribe": {"allow": ["_INBOX.>"]},
    }
    users = [User(user="u", password="u", permissions=perms), User(user="admin", password="admin")]
    opts = ServerOptions(host="127.0.0.1", port=0, users=users, jetstream=True, store_dir=str(tmp_path))
    async with jetpy.Server(opts) as srv:
        admin = await nats.connect(srv.client_url, user="admin", password="admin")
        await admin.jetstream().add_stream(name="LP", subjects=["lp.>"])
        sink = parse_sink({"servers": srv.client_url, "user": "u", "password": "u"})
        res = await asyncio.to_thread(publish_rows, sink, iter(_batches(3000, "lp.{}")), "u:0")
        assert (res.published, res.duplicates) == (3000, 0)
        with_stream = parse_sink({"servers": srv.client_url, "user": "u", "password": "u", "stream": "LP"})
        res = await asyncio.to_thread(publish_rows, with_stream, iter(_batches(3000, "lp.{}")), "u:0")
        assert (res.published, res.duplicates) == (0, 3000)  # the bulk publish: the same ids
        assert (await admin.jetstream().stream_info("LP")).state.messages == 3000
        await admin.close()
