"""Seed 002's log shipper: hosts publish log lines on ``logs.p<partition>.<hostname>`` into the
stream ``LOGS`` (all partitions, file storage, limits retention, one day of logs).

    python examples/log_shipper.py --servers nats://127.0.0.1:4222 --lines 2000

Each line is ``<RFC3339 time> <LEVEL> <message>``; the partition is the host's hash modulo
``--partitions``, so one host's lines stay in order on one subject.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import zlib
from collections import Counter
from datetime import UTC, datetime

import nats
from nats.aio.client import Client
from nats.js.api import RetentionPolicy, StorageType, StreamConfig

HOSTS = ["web1", "web2", "db1", "cache1", "worker1"]
LEVELS = ["DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"]  # INFO is the common case

LOGS = StreamConfig(
    name="LOGS",
    subjects=["logs.>"],
    storage=StorageType.FILE,
    retention=RetentionPolicy.LIMITS,
    max_msgs=-1,
    max_bytes=-1,
    max_age=24 * 3600,  # 1 day, as the seed's `nats str add LOGS ... --max-age 1d`
    allow_direct=True,
)


def subject_for(host: str, partitions: int) -> str:
    return f"logs.p{zlib.crc32(host.encode()) % partitions}.{host}"


async def ship(nc: Client, lines: int, partitions: int = 4, seed: int = 0) -> Counter[tuple[str, str]]:
    """Publish ``lines`` log lines (PubAcks awaited); returns what was sent per (host, level)."""
    js = nc.jetstream(publish_async_max_pending=1000)
    await js.add_stream(config=LOGS)
    rnd = random.Random(seed)
    sent: Counter[tuple[str, str]] = Counter()
    for i in range(lines):
        host, level = rnd.choice(HOSTS), rnd.choice(LEVELS)
        line = f"{datetime.now(UTC).isoformat()} {level} request {i} handled"
        await js.publish_async(subject_for(host, partitions), line.encode())
        sent[(host, level)] += 1
    await js.publish_async_completed()
    return sent


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="nats://127.0.0.1:4222")
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    nc = await nats.connect(args.servers)
    sent = await ship(nc, args.lines, args.partitions, args.seed)
    print(f"shipped {sum(sent.values())} lines from {len({h for h, _ in sent})} hosts")
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
