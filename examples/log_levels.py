"""Spark structured streaming over seed 002's ``LOGS``: log levels per host, kept in the KV
bucket ``loglevels`` (key ``<host>.<LEVEL>``, value the count).

    python examples/log_levels.py --servers nats://127.0.0.1:4222 --checkpoint /tmp/loglevels

Restart it any time: Spark resumes from its checkpoint (offsets are stream sequences and the
running counts are Spark state), and every micro-batch writes absolute counts with message ids
derived from the batch id, so a replayed micro-batch neither double counts nor double writes.
"""

from __future__ import annotations

import argparse
import asyncio

import nats
from answers_report import session
from nats.js.api import KeyValueConfig
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

BUCKET = "loglevels"


async def _bucket(servers: str) -> None:
    nc = await nats.connect(servers)
    await nc.jetstream().create_key_value(config=KeyValueConfig(bucket=BUCKET, history=1, direct=True))
    await nc.close()


def run_job(spark: SparkSession, servers: str, checkpoint: str, available_now: bool = True) -> None:
    """Process everything in ``LOGS`` not yet seen by this checkpoint, then stop (AvailableNow)."""
    asyncio.run(_bucket(servers))
    logs = (
        spark.readStream.format("jetstream")
        .option("servers", servers)
        .option("stream", "LOGS")
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "1000")
        .load()
    )
    counts = (
        logs.select(
            F.split("subject", r"\.").getItem(2).alias("host"),
            F.split(F.col("data").cast("string"), " ").getItem(1).alias("level"),
        )
        .groupBy("host", "level")
        .count()
    )

    def to_kv(batch: DataFrame, batch_id: int) -> None:
        # absolute counts of the keys this micro-batch changed; a message id made of the batch id
        # and the key makes a replay of the same micro-batch a no-op (within the duplicate window)
        key = F.concat("host", F.lit("."), "level")
        (
            batch.select(
                F.concat(F.lit(f"$KV.{BUCKET}."), key).alias("subject"),
                F.col("count").cast("string").alias("data"),
                F.concat(F.lit(f"loglevels:{batch_id}:"), key).alias("msg_id"),
            )
            .write.format("jetstream")
            .option("servers", servers)
            .mode("append")
            .save()
        )

    trigger = {"availableNow": True} if available_now else {"processingTime": "1 second"}
    q = (
        counts.writeStream.outputMode("update")
        .foreachBatch(to_kv)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger)
        .start()
    )
    if available_now:
        q.awaitTermination()


async def read_counts(servers: str, hosts: list[str], levels: list[str]) -> dict[tuple[str, str], int]:
    """The bucket's current values (KV get = direct get of the key's last message)."""
    nc = await nats.connect(servers)
    kv = await nc.jetstream().key_value(BUCKET)
    out: dict[tuple[str, str], int] = {}
    for h in hosts:
        for lv in levels:
            try:
                e = await kv.get(f"{h}.{lv}")
            except Exception:  # key not found: nothing logged at that level
                continue
            if e.value is not None:
                out[(h, lv)] = int(e.value)
    await nc.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="nats://127.0.0.1:4222")
    ap.add_argument("--checkpoint", default="/tmp/jetpy-loglevels-checkpoint")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args()
    spark = session(args.master, "log-levels")
    run_job(spark, args.servers, args.checkpoint)
    spark.stop()
    from log_shipper import HOSTS, LEVELS

    for (h, lv), n in sorted(asyncio.run(read_counts(args.servers, HOSTS, sorted(set(LEVELS)))).items()):
        print(f"{h:8} {lv:5} {n}")


if __name__ == "__main__":
    main()
