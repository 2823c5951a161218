"""Option validation: every wrong option is refused with its name and the accepted values."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from jetpy.spark.options import EARLIEST, JetStreamOptionError, parse_sink, parse_source
from jetpy.spark.schema import SCHEMA_STRUCT, read_columns

pytestmark = pytest.mark.spark


def test_defaults_and_case_insensitive_keys() -> None:
    o = parse_source(
        {"stream": "ORDERS", "STARTINGOFFSETS": "earliest", "includeheaders": "TRUE"}, streaming=True
    )
    assert o.streams == ("ORDERS",)
    assert o.conn.servers == ("nats://127.0.0.1:4222",)
    assert o.starting.kind == "earliest"
    assert o.include_headers is True
    assert o.fail_on_data_loss is True
    assert o.max_per_trigger is None
    assert parse_source({"stream": "A"}, streaming=True).starting.kind == "latest"  # as Kafka
    assert parse_source({"stream": "A"}, streaming=False).starting.kind == "earliest"
    o = parse_source(
        {"stream": "A,B", "startingOffsets": '{"A": -2, "B": 17}', "maxOffsetsPerTrigger": "5"}, True
    )
    assert o.starting.seqs == {"A": EARLIEST, "B": 17}
    assert o.max_per_trigger == 5
    o = parse_source({"stream": "A", "jsDomain": "hub", "startingTimestamp": "1700000000000"}, True)
    assert o.conn.api_prefix == "$JS.hub.API"
    assert o.starting.kind == "time" and o.starting.time_ns == 1_700_000_000_000_000_000
    s = parse_sink({"subject": "out.x", "maxInFlight": "10"})
    assert s.subject == "out.x" and s.max_in_flight == 10 and s.msg_id_column == "msg_id"


@pytest.mark.parametrize(
    ("raw", "option", "accepted"),
    [
        ({}, "stream", "stream name"),
        ({"stream": "a.b"}, "stream", "no '.'"),
        ({"stream": "A", "startingOffsets": "first"}, "startingOffsets", "'earliest', 'latest' or JSON"),
        ({"stream": "A", "startingOffsets": '{"B": 1}'}, "startingOffsets", "not one of the streams"),
        ({"stream": "A", "startingOffsets": '{"A": -3}'}, "startingOffsets", "-2 = earliest"),
        ({"stream": "A", "endingOffsets": "earliest"}, "endingOffsets", "'latest' or JSON"),
        (
            {"stream": "A", "startingTimestamp": "yesterday"},
            "startingTimestamp",
            "milliseconds since the epoch",
        ),
        ({"stream": "A", "maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger", "integer >= 1"),
        ({"stream": "A", "minPartitions": "x"}, "minPartitions", "integer >= 1"),
        ({"stream": "A", "failOnDataLoss": "maybe"}, "failOnDataLoss", "'true' or 'false'"),
        ({"stream": "A", "includeHeaders": "2"}, "includeHeaders", "'true' or 'false'"),
        ({"stream": "A", "filterSubject": "a..b"}, "filterSubject", "valid NATS subjects"),
        ({"stream": "A", "filterSubject": "a", "filterSubjects": "b"}, "filterSubjects", "not both"),
        ({"stream": "A", "servers": "http://x:1"}, "servers", "nats://host:port"),
        ({"stream": "A", "jsDomain": "d", "jsApiPrefix": "p"}, "jsApiPrefix", "not both"),
        ({"stream": "A", "startingOfsets": "earliest"}, "startingofsets", "source option"),
    ],
)
def test_source_errors_name_option_and_accepted_values(
    raw: dict[str, str], option: str, accepted: str
) -> None:
    with pytest.raises(JetStreamOptionError) as e:
        parse_source(raw, streaming=True)
    assert e.value.option == option
    assert f"'{option}'" in str(e.value)
    assert accepted in str(e.value)


def test_batch_read_refuses_latest_start() -> None:
    with pytest.raises(JetStreamOptionError, match="startingOffsets"):
        parse_source({"stream": "A", "startingOffsets": "latest"}, streaming=False)


@pytest.mark.parametrize(
    ("raw", "option"),
    [
        ({"subject": "a.*"}, "subject"),
        ({"maxInFlight": "-1"}, "maxInFlight"),
        ({"writeId": "a b"}, "writeId"),
        ({"startingOffsets": "earliest"}, "startingoffsets"),  # a source option on a sink
    ],
)
def test_sink_errors(raw: dict[str, str], option: str) -> None:
    with pytest.raises(JetStreamOptionError) as e:
        parse_sink(raw)
    assert e.value.option == option


def test_errors_surface_through_spark(spark: SparkSession, opts: dict[str, str]) -> None:
    df = spark.read.format("jetstream").options(**opts).option("stream", "X").option("failOnDataLoss", "nope")
    with pytest.raises(PySparkException) as e:
        df.load().collect()
    assert "failOnDataLoss" in str(e.value) and "'true' or 'false'" in str(e.value)
    with pytest.raises(PySparkException) as e2:
        spark.createDataFrame([("x",)], "data string").write.format("jetstream").options(**opts).mode(
            "append"
        ).save()
    assert "subject" in str(e2.value)


def test_a_schema_picks_columns() -> None:
    assert read_columns(SCHEMA_STRUCT) == ("stream", "subject", "seq", "ts", "data", "headers")
    picked = StructType([StructField("data", BinaryType()), StructField("seq", LongType())])
    assert read_columns(picked) == ("data", "seq")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (
            [StructField("seq", LongType()), StructField("offset", LongType())],
            "'offset' is not one of the columns",
        ),
        ([StructField("seq", IntegerType())], "'seq' is bigint, not int"),
        ([StructField("data", BinaryType(), nullable=False)], "'data' must be nullable"),
        ([StructField("seq", LongType()), StructField("seq", LongType())], "in any order"),
        ([], "in any order"),
    ],
)
def test_a_wrong_schema_is_refused_by_name(fields: list[StructField], says: str) -> None:
    with pytest.raises(JetStreamOptionError) as e:
        read_columns(StructType(fields))
    assert e.value.option == "schema" and says in str(e.value)
    assert "stream STRING, subject STRING, seq BIGINT" in str(e.value)


def test_a_wrong_schema_is_refused_through_spark(spark: SparkSession, opts: dict[str, str]) -> None:
    df = spark.read.format("jetstream").options(**opts).option("stream", "X").schema("seq int, data binary")
    with pytest.raises(PySparkException, match="'seq' is bigint, not int"):
        df.load().collect()
    q = (
        spark.readStream.format("jetstream")
        .options(**opts)
        .option("stream", "X")
        .schema("key string")
        .load()
        .writeStream.format("noop")
        .start()
    )
    with pytest.raises(PySparkException, match="'key' is not one of the columns"):
        q.awaitTermination(60)
