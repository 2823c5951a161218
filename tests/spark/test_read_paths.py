"""Any stream is readable, on jetpy and on nats-server: with or without ``allow_direct``, through
each read path (jetpy's bulk read, batched direct gets, a pull consumer), batch and streaming,
with the same rows; ``auto`` takes the fastest path the server offers and says which, once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from nats.js import JetStreamContext
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from conftest import Proc
from jetpy.spark.options import ConnOptions
from jetpy.spark.paths import JetStreamReadError, SeqRange, choose_path, connect, read_partition, stream_head

from .conftest import make_stream, run

pytestmark = pytest.mark.spark

N = 300
SUBJECTS = ["eu", "us", "asia"]


def _subject(prefix: str, i: int) -> str:
    return f"{prefix}.{SUBJECTS[i % 3]}"


def _without_ts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "ts"} for r in rows]


def _expected(name: str, prefix: str, seqs: list[int]) -> list[dict[str, Any]]:
    return [
        {
            "stream": name,
            "subject": _subject(prefix, i),
            "seq": i,
            "data": f"m{i}".encode(),
            "headers": {"K": [f"v{i}"]} if i % 5 == 0 else None,
        }
        for i in seqs
    ]


def _stream_to_parquet(
    spark: SparkSession,
    url: str,
    name: str,
    per_trigger: int,
    tmp_path: Path,
    shape: Callable[[DataFrame], DataFrame] = lambda df: df,
    schema: str | None = None,
) -> Path:
    """An AvailableNow query of the whole stream into Parquet files, run to its end; their path."""
    reader = spark.readStream.format("jetstream")
    if schema is not None:
        reader = reader.schema(schema)
    df = (
        reader.option("servers", url)
        .option("stream", name)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", str(per_trigger))
        .load()
    )
    out = tmp_path / "out"
    q = (
        shape(df)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120)
    assert q.exception() is None
    return out


def _rows(spark: SparkSession, url: str, **opts: str) -> list[dict[str, Any]]:
    df = spark.read.format("jetstream").option("servers", url).options(**opts).load()
    rows = [r.asDict() for r in df.orderBy("seq").collect()]
    ts = [r["ts"] for r in rows]
    assert ts == sorted(ts) and all(isinstance(t, datetime) for t in ts)
    for r in rows:
        r["data"] = bytes(r["data"])
    return rows


CASES = [  # server, allow_direct, readMode, the path it reads through
    ("jetpy", False, "auto", "bulk"),
    ("jetpy", True, "direct", "direct"),
    ("jetpy", False, "consumer", "consumer"),
    ("nats-server 2.9.10", True, "auto", "consumer"),
    ("nats-server 2.15.1", True, "auto", "direct"),
    ("nats-server 2.15.1", False, "auto", "consumer"),
]


@pytest.fixture(scope="module")
def servers(js_server: Proc, ref_server: Proc, newest_server: Proc) -> dict[str, str]:
    return {
        "jetpy": js_server.url,
        "nats-server 2.9.10": ref_server.url,
        "nats-server 2.15.1": newest_server.url,
    }


@pytest.mark.parametrize(("server", "direct", "mode", "path"), CASES)
def test_every_path_reads_the_same_rows(
    spark: SparkSession, servers: dict[str, str], server: str, direct: bool, mode: str, path: str
) -> None:
    url = servers[server]
    name = f"P{CASES.index((server, direct, mode, path))}"
    prefix = name.lower()
    make_stream(url, name, [f"{prefix}.>"], N, lambda i: _subject(prefix, i), allow_direct=direct)
    w = connect(ConnOptions(servers=(url,)))
    assert choose_path(w, name, stream_head(w, name), mode) == path
    w.close()
    base = {"stream": name, "readMode": mode}
    every = _rows(spark, url, includeHeaders="true", **base)
    assert _without_ts(every) == _expected(name, prefix, list(range(1, N + 1)))
    rows = _rows(
        spark,
        url,
        filterSubjects=f"{prefix}.us,{prefix}.asia",
        startingOffsets=f'{{"{name}": 51}}',
        endingOffsets=f'{{"{name}": 251}}',
        minPartitions="3",
        **base,
    )
    assert [r["seq"] for r in rows] == [i for i in range(51, 251) if i % 3]
    rows = _rows(spark, url, filterSubject=f"{prefix}.eu", **base)
    assert [r["seq"] for r in rows] == [i for i in range(1, N + 1) if i % 3 == 0]
    assert all(r["headers"] is None for r in rows)  # only read when asked for
    # a schema naming some of the columns, in its own order: those columns of the same rows
    for ddl in (
        "data binary, headers map<string,array<string>>, seq bigint",
        "ts timestamp, subject string",
    ):
        df = (
            spark.read.format("jetstream")
            .option("servers", url)
            .options(includeHeaders="true", filterSubjects=f"{prefix}.us,{prefix}.asia", **base)
            .schema(ddl)
            .load()
        )
        names = [c.split()[0] for c in ddl.split(", ")]
        assert df.columns == names
        got = sorted(
            tuple(bytes(v) if n == "data" else v for n, v in zip(names, r, strict=True)) for r in df.collect()
        )
        assert got == sorted(tuple(e[n] for n in names) for e in every if e["seq"] % 3)


def test_time_bounds_on_a_server_without_gets_by_time(spark: SparkSession, servers: dict[str, str]) -> None:
    """nats-server 2.9 has no get by time: the start is found by a binary search over gets."""
    url = servers["nats-server 2.9.10"]
    make_stream(url, "TIMED", ["timed"], 200, lambda i: "timed")

    async def times(js: JetStreamContext) -> tuple[str, str]:
        a = await js.get_msg("TIMED", 80)
        b = await js.get_msg("TIMED", 150)
        assert a.time is not None and b.time is not None
        return a.time.isoformat(), b.time.isoformat()

    t80, t150 = run(times, url)
    seqs = [r["seq"] for r in _rows(spark, url, stream="TIMED", startingTimestamp=t80, endingTimestamp=t150)]
    # messages published in the same microsecond share a timestamp: bounds land on the first of them
    assert seqs and seqs[0] <= 80 and seqs[-1] < 150 and seqs == list(range(seqs[0], seqs[-1] + 1))
    assert len(seqs) >= 60
    late = datetime.now(UTC).replace(year=datetime.now(UTC).year + 1).isoformat()
    assert _rows(spark, url, stream="TIMED", startingTimestamp=late) == []


def test_a_path_the_server_lacks_is_refused_by_name(spark: SparkSession, servers: dict[str, str]) -> None:
    url = servers["nats-server 2.15.1"]
    make_stream(url, "NOBULK", ["nobulk"], 3, lambda i: "nobulk", allow_direct=False)
    with pytest.raises(PySparkException, match="readMode 'bulk' needs a jetpy server"):
        _rows(spark, url, stream="NOBULK", readMode="bulk")
    with pytest.raises(PySparkException, match=r"readMode 'direct'.*does not allow direct get"):
        _rows(spark, url, stream="NOBULK", readMode="direct")
    w = connect(ConnOptions(servers=(servers["nats-server 2.9.10"],)))
    make_stream(w.url, "OLD", ["old"], 1, lambda i: "old")
    with pytest.raises(JetStreamReadError, match=r"before 2\.11"):
        choose_path(w, "OLD", stream_head(w, "OLD"), "direct")
    w.close()


def test_the_path_taken_is_logged_once(servers: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    url = servers["nats-server 2.9.10"]
    make_stream(url, "LOGGED", ["logged"], 1, lambda i: "logged")
    w = connect(ConnOptions(servers=(url,)))
    with caplog.at_level(logging.INFO, "jetpy.spark"):
        for _ in range(3):
            choose_path(w, "LOGGED", stream_head(w, "LOGGED"), "auto")
    w.close()
    said = [r for r in caplog.records if "LOGGED" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "pull consumer" in said[0].getMessage() and "nats-server 2.9.10" in said[0].getMessage()


@pytest.mark.parametrize("server", ["nats-server 2.9.10", "nats-server 2.15.1", "jetpy"])
def test_streaming_reads_on_every_server(
    spark: SparkSession, servers: dict[str, str], server: str, tmp_path: Path
) -> None:
    url = servers[server]
    name = "S" + str(["nats-server 2.9.10", "nats-server 2.15.1", "jetpy"].index(server))
    make_stream(url, name, [f"{name.lower()}.>"], 250, lambda i: f"{name.lower()}.x", allow_direct=False)
    out = _stream_to_parquet(spark, url, name, 60, tmp_path, lambda df: df.select("seq", "data"))
    rows = spark.read.parquet(str(out)).orderBy("seq").collect()
    assert [r.seq for r in rows] == list(range(1, 251))
    assert [bytes(r.data) for r in rows[:2]] == [b"m1", b"m2"]


@pytest.mark.parametrize("server", ["nats-server 2.9.10", "jetpy"])
def test_streaming_reads_of_some_columns(
    spark: SparkSession, servers: dict[str, str], server: str, tmp_path: Path
) -> None:
    url = servers[server]
    name = "SC" + str(["nats-server 2.9.10", "jetpy"].index(server))
    make_stream(url, name, [f"{name.lower()}.>"], 120, lambda i: f"{name.lower()}.x", allow_direct=False)
    out = _stream_to_parquet(spark, url, name, 50, tmp_path, schema="data binary, seq bigint")
    df = spark.read.parquet(str(out))
    assert df.columns == ["data", "seq"]
    assert [(bytes(r.data), r.seq) for r in df.orderBy("seq").collect()] == [
        (f"m{i}".encode(), i) for i in range(1, 121)
    ]


@pytest.mark.parametrize(("window", "max_bytes"), [(0, 1 << 20), (7, 1 << 20), (40, 1024), (1000, 1024)])
def test_bulk_windows_in_flight_read_exactly_the_range(js_server: Proc, window: int, max_bytes: int) -> None:
    """Two windows in flight, replies interleaved by the server's turns, windows cut short by
    max_bytes asked again: every live message of the range once, none outside it."""
    url = js_server.url
    name = f"WIN{window}x{max_bytes}"
    make_stream(url, name, [f"{name.lower()}.>"], 400, lambda i: f"{name.lower()}.{i % 4}")

    async def holes(js: JetStreamContext) -> None:
        for seq in (1, 2, 50, 51, 52, 200, 333):
            await js.delete_msg(name, seq)

    run(holes, url)
    r = SeqRange(name, 3, 350, (), ConnOptions(servers=(url,)), False, 100, max_bytes, True, "bulk", window)
    seqs = sorted(s for b in read_partition(r) for s in b.column("seq").to_pylist())
    assert seqs == [i for i in range(3, 351) if i not in (50, 51, 52, 200, 333)]
