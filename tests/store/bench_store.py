"""Throughput of the stores (run by hand: ``.venv/bin/python -m tests.store.bench_store``).

Not a test: it prints numbers and asserts nothing about speed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from jetpy.store import FileStore, MemoryStore, StoreConfig, StoreLimits

PAYLOAD = bytes(128)


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>12,.0f}/s"


def drain(s: FileStore, flt: str, batch: int) -> int:
    """Read the whole stream with ``load_next_batch`` (the consumers' bulk read); returns the count."""
    seq = 0
    count = 0
    while ms := s.load_next_batch(flt, seq, batch):
        seq = ms[-1].seq + 1
        count += len(ms)
    return count


def main(n: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="jetpy-bench-", dir="/var/tmp"))
    try:
        s = FileStore(root / "a", StoreConfig("bench"))
        store = s.store_msg
        t0 = time.perf_counter()
        for _ in range(n):
            store("orders.us.east", b"", PAYLOAD)
        t1 = time.perf_counter()
        s.flush()
        t2 = time.perf_counter()
        s.sync()
        t3 = time.perf_counter()
        print(
            f"file append 128 B      {rate(n, t1 - t0)}  (final flush {t2 - t1:.3f}s, fsync {t3 - t2:.3f}s)"
        )

        load = s.load_msg
        t0 = time.perf_counter()
        for seq in range(1, n + 1):
            load(seq)
        print(f"file load_msg seq      {rate(n, time.perf_counter() - t0)}")

        nxt = s.load_next_msg
        t0 = time.perf_counter()
        seq = 0
        count = 0
        while (m := nxt("orders.>", seq)) is not None:
            seq = m.seq + 1
            count += 1
        print(f"file load_next wildcard{rate(count, time.perf_counter() - t0)}")

        for label, flt in (("load_next_batch   ", ""), ("batch, filtered   ", "orders.us.east")):
            t0 = time.perf_counter()
            count = drain(s, flt, 500)
            print(f"file {label}{rate(count, time.perf_counter() - t0)}  (500 per call)")
        s.stop()

        t0 = time.perf_counter()
        s = FileStore(root / "a", StoreConfig("bench"))
        t1 = time.perf_counter()
        print(f"file recovery          {rate(n, t1 - t0)}  ({t1 - t0:.2f}s for {n:,} msgs)")
        s.stop()

        s = FileStore(root / "b", StoreConfig("bench"))
        batches = 2000
        t0 = time.perf_counter()
        for _ in range(batches):
            for _ in range(64):
                s.store_msg("gc", b"", PAYLOAD)
            s.flush()
            s.sync()
        t1 = time.perf_counter()
        print(f"group commit (64/sync) {rate(batches * 64, t1 - t0)}  ({batches / (t1 - t0):,.0f} fsync/s)")
        s.stop()

        s = FileStore(root / "c", StoreConfig("kv", limits=StoreLimits(max_msgs_per_subject=1)))
        t0 = time.perf_counter()
        for i in range(n // 4):
            s.store_msg(f"kv.k{i % 10_000}", b"", PAYLOAD)
        print(f"file KV update (1/subj){rate(n // 4, time.perf_counter() - t0)}")
        s.stop()

        mem = MemoryStore(StoreConfig("mem", "memory"))
        t0 = time.perf_counter()
        for _ in range(n // 4):
            mem.store_msg("orders.us.east", b"", PAYLOAD)
        print(f"memory append          {rate(n // 4, time.perf_counter() - t0)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
