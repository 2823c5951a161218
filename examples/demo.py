"""``make demo``: seed 000's math pipeline and seed 002's log pipeline, end to end, on an
embedded jetpy server and local Spark, then the math report again on a standalone Spark cluster.

    python examples/demo.py [--no-cluster]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import nats

import jetpy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from answers_report import report, session  # noqa: E402
from log_levels import read_counts, run_job  # noqa: E402
from log_shipper import HOSTS, LEVELS, ship  # noqa: E402
from math_services import run_requester, start_services  # noqa: E402
from standalone import standalone_cluster  # noqa: E402

T = TypeVar("T")


class EmbeddedServer:
    """jetpy.Server on its own event loop thread, so Spark (blocking) can run in the main one."""

    def __init__(self, store_dir: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"nats://127.0.0.1:{self.port}"
        self.loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._ready = threading.Event()
        self._store = store_dir
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self._serve(),), daemon=True
        )
        self.thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("embedded server did not start")

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with jetpy.Server(host="127.0.0.1", port=self.port, store_dir=self._store):
            self._ready.set()
            await self._stop.wait()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)


def banner(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 70 - len(text)), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-cluster", action="store_true", help="skip the standalone-cluster run")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--lines", type=int, default=3000)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="jetpy-demo-") as tmp:
        srv = EmbeddedServer(str(Path(tmp) / "js"))
        try:
            banner(f"embedded jetpy server on {srv.url}")

            async def math() -> dict[str, int]:
                nc = await nats.connect(srv.url)
                await start_services(nc)
                filed = await run_requester(nc, args.rounds)
                await nc.close()
                return dict(filed)

            filed = srv.run(math())
            banner("(a) math services -> stream 'answers'")
            print(f"requester filed {sum(filed.values())} answers: {filed}")
            t = time.monotonic()
            spark = session("local[*]", "jetpy-demo")
            print(f"Spark session (local[*]) in {time.monotonic() - t:.1f}s")
            banner("(a) Spark batch report per subject (local[*])")
            local = report(spark, srv.url)
            for row in local:
                print(row)
            ok &= {r["subject"]: r["count"] for r in local} == filed

            banner("(b) log shipper -> stream 'LOGS' (logs.p<partition>.<host>)")

            async def shipping(lines: int, seed: int) -> Any:
                nc = await nats.connect(srv.url)
                sent = await ship(nc, lines, seed=seed)
                await nc.close()
                return sent

            sent = srv.run(shipping(args.lines, 1))
            print(f"shipped {sum(sent.values())} lines")
            ckpt = str(Path(tmp) / "loglevels-ckpt")
            run_job(spark, srv.url, ckpt)
            first = srv.run(read_counts(srv.url, HOSTS, sorted(set(LEVELS))))
            print(f"job run 1 (AvailableNow): {sum(first.values())} lines counted")
            spark.stop()
            more = srv.run(shipping(args.lines // 2, 2))
            sent.update(more)
            print(
                f"shipped {sum(more.values())} more lines; restarting the job in a new process (same checkpoint)"
            )
            subprocess.run(
                [sys.executable, str(HERE / "log_levels.py"), "--servers", srv.url, "--checkpoint", ckpt],
                check=True,
                cwd=HERE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            counts = srv.run(read_counts(srv.url, HOSTS, sorted(set(LEVELS))))
            banner("(b) KV bucket 'loglevels' after the restart (host level count / shipped)")
            for (h, lv), n in sorted(counts.items()):
                print(f"  {h:8} {lv:5} {n:5} / {sent[(h, lv)]}")
            exact = counts == dict(sent)
            print(f"every line counted exactly once across the restart: {exact}")
            ok &= exact

            if not args.no_cluster:
                banner("(a) the same report on a standalone cluster (master + worker on 127.0.0.1)")
                with standalone_cluster(Path(tmp) / "cluster") as master:
                    print(f"master {master}")
                    out = subprocess.run(
                        [
                            sys.executable,
                            str(HERE / "answers_report.py"),
                            "--servers",
                            srv.url,
                            "--master",
                            master,
                        ],
                        check=True,
                        cwd=HERE,
                        capture_output=True,
                        text=True,
                    ).stdout
                    print(out.strip())
                    same = out.strip() == "\n".join(str(r) for r in local)
                    print(f"same result as local[*]: {same}")
                    ok &= same
        finally:
            srv.close()
    banner("demo " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
