#!/usr/bin/env python3
"""Compression and encryption at rest, measured on jetpy itself: publish cost and bytes on disk.

natsbench (``make bench``) creates its own stream and cannot ask for ``compression``; so this
starts jetpy-server fresh per run in each form (plain, s2, encrypted with ChaCha20-Poly1305 or
AES-GCM, s2 and encrypted), publishes the same compressible messages with nats-py (a window of
async publishes, every PubAck awaited), and reports per form, as medians over alternated rounds:
messages per second, the server's CPU per message while publishing (from /proc: the client is the
bottleneck here, the server's CPU is what compression and encryption add), the CPU the background
compression took after the publishes, and the stream's bytes on disk once it settled.

    .venv/bin/python scripts/at_rest_bench.py --msgs 200000 --rounds 3

Not a test: it prints numbers and asserts nothing. Every server is stopped by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import nats

REPO = Path(__file__).resolve().parents[1]
SERVER = [str(REPO / ".venv" / "bin" / "jetpy-server")]
KEY = "at-rest-bench-key-0123456789abcdef"
FORMS = {
    "plain": ("none", ""),
    "s2": ("s2", ""),
    "chachapoly": ("none", "chachapoly"),
    "aes": ("none", "aes"),
    "s2+aes": ("s2", "aes"),
}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def payload(i: int) -> bytes:
    return b'{"user":"u%05d","event":"page_view","path":"/shop/cart","ok":true}' % (i % 10000)


async def one_run(form: str, msgs: int, work: Path) -> dict[str, float]:
    compression, cipher = FORMS[form]
    store = Path(tempfile.mkdtemp(prefix=f"{form}-", dir=work))
    argv = [*SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)]
    if cipher:
        conf = store / "key.conf"
        conf.write_text(f'jetstream {{ key: "{KEY}", cipher: {cipher} }}\n')
        argv += ["-c", str(conf)]
    log = store / "server.log"
    proc = spawn(argv, log)
    try:
        deadline = time.monotonic() + 20
        while b"Server is ready" not in log.read_bytes():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(log.read_text())
            await asyncio.sleep(0.05)
        port = int(log.read_text().split("Listening for client connections on ")[1].split(":")[1].split()[0])
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        js = nc.jetstream()
        await js.add_stream(name="AT", subjects=["at.>"], compression=compression)
        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        window: list[asyncio.Future[object]] = []
        for i in range(msgs):
            window.append(await js.publish_async("at.events", payload(i)))
            if len(window) >= 2000:
                await asyncio.gather(*window)
                window.clear()
        await asyncio.gather(*window)
        t1, cpu1 = time.perf_counter(), cpu_seconds(proc.pid)
        msgdir = store / "jetstream" / "$G" / "streams" / "AT" / "msgs"
        # the background compression: each publish is a flush that puts finished copies in place
        deadline = time.monotonic() + 60
        while compression == "s2" and time.monotonic() < deadline:
            sealed = sorted(msgdir.glob("*.blk"))[:-1]
            if all(p.read_bytes()[:4] == b"JPBF" and (p.read_bytes()[6] & 1) for p in sealed):
                break
            await js.publish("at.tick", b"x")
            await asyncio.sleep(0.1)
        cpu2 = cpu_seconds(proc.pid)
        await nc.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    disk = sum(p.stat().st_size for p in msgdir.glob("*.blk"))
    return {
        "msgs_per_s": msgs / (t1 - t0),
        "cpu_us_per_msg": (cpu1 - cpu0) / msgs * 1e6,
        "background_cpu_s": cpu2 - cpu1,
        "disk_bytes": float(disk),
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--msgs", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--forms", default=",".join(FORMS))
    args = p.parse_args()
    forms = args.forms.split(",")
    results: dict[str, list[dict[str, float]]] = {f: [] for f in forms}
    with tempfile.TemporaryDirectory(prefix="jetpy-at-rest-", dir="/var/tmp") as tmp:
        for r in range(args.rounds):
            for form in forms:  # alternated, so the shared machine's drift hits every form alike
                results[form].append(await one_run(form, args.msgs, Path(tmp)))
                print(f"round {r} {form}: {results[form][-1]}", flush=True)
    base = statistics.median(x["msgs_per_s"] for x in results[forms[0]])
    print(
        f"\n{'form':<12}{'msgs/s':>10}{'vs ' + forms[0]:>10}{'CPU µs/msg':>12}{'bg CPU s':>10}{'disk MB':>10}"
    )
    for form in forms:
        med = {k: statistics.median(x[k] for x in results[form]) for k in results[form][0]}
        spread = [x["msgs_per_s"] for x in results[form]]
        print(
            f"{form:<12}{med['msgs_per_s']:>10,.0f}{med['msgs_per_s'] / base:>10.2f}"
            f"{med['cpu_us_per_msg']:>12.1f}{med['background_cpu_s']:>10.2f}{med['disk_bytes'] / 1e6:>10.2f}"
            f"   (msgs/s {min(spread):,.0f}-{max(spread):,.0f})"
        )


if __name__ == "__main__":
    asyncio.run(main())
