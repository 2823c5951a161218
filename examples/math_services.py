"""Seed 000's math services: adder, multiplier, subtractor and divider answer requests on
``math.<op>``; a requester sends random pairs to each and files every result in the stream
``answers``: ``answers.significant`` when the value is above 1, ``answers.throwaway`` otherwise.

    python examples/math_services.py --servers nats://127.0.0.1:4222 --rounds 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import StorageType, StreamConfig

OPS: dict[str, Callable[[float, float], float]] = {
    "add": lambda a, b: a + b,
    "multiply": lambda a, b: a * b,
    "subtract": lambda a, b: a - b,
    "divide": lambda a, b: a / b if b else 0.0,
}
SERVICES = {"add": "adder", "multiply": "multiplier", "subtract": "subtractor", "divide": "divider"}

ANSWERS = StreamConfig(
    name="answers",
    subjects=["answers.significant", "answers.throwaway"],
    storage=StorageType.FILE,
    max_msgs=1000,
    max_bytes=1024 * 1024,  # 1 MB
    max_age=5 * 24 * 3600,  # 5 days (nats-py takes seconds)
    duplicate_window=120,
    allow_direct=True,  # direct gets for any client (the Spark connector reads any stream)
)


async def start_services(nc: Client) -> None:
    """One subscriber per operation, in a queue group so more instances share the load."""
    for op, fn in OPS.items():

        async def handle(msg: Msg, fn: Callable[[float, float], float] = fn, op: str = op) -> None:
            req = json.loads(msg.data)
            value = fn(float(req["a"]), float(req["b"]))
            await msg.respond(json.dumps({"service": SERVICES[op], "op": op, **req, "value": value}).encode())

        await nc.subscribe(f"math.{op}", queue=SERVICES[op], cb=handle)


async def run_requester(nc: Client, rounds: int, seed: int = 0) -> Counter[str]:
    """``rounds`` x 4 requests; every answer is published to the stream with its PubAck awaited."""
    js = nc.jetstream()
    await js.add_stream(config=ANSWERS)
    rnd = random.Random(seed)
    filed: Counter[str] = Counter()
    for r in range(rounds):
        a, b = rnd.randint(0, 10), rnd.randint(0, 10)
        replies = await asyncio.gather(
            *(
                nc.request(f"math.{op}", json.dumps({"a": a, "b": b, "round": r}).encode(), timeout=5)
                for op in OPS
            )
        )
        for rep in replies:
            value = json.loads(rep.data)["value"]
            subject = "answers.significant" if value > 1 else "answers.throwaway"
            await js.publish(subject, rep.data)
            filed[subject] += 1
    return filed


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="nats://127.0.0.1:4222")
    ap.add_argument("--rounds", type=int, default=100)
    args = ap.parse_args()
    nc = await nats.connect(args.servers)
    await start_services(nc)
    filed = await run_requester(nc, args.rounds)
    print(dict(filed))
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
