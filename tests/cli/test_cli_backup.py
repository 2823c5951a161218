"""`jetpy stream backup STREAM DIR` and `jetpy stream restore DIR` end to end (the CLI as a
subprocess against a jetpy server): a stream with durable consumers round-trips, with and without
consumers, refusals exit as the rest of the CLI does, and a terminal sees a progress bar."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import nats

from cli.conftest import CLI, api, cli_env, run_cli
from conftest import Proc


async def make_stream(url: str, name: str, n: int = 500, size: int = 100) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
        for i in range(n):
            await js.publish(
                f"{name.lower()}.{i % 4}", os.urandom(size), headers={"I": str(i)} if i % 2 else None
            )
        await js.add_consumer(name, durable_name="WORK", ack_policy="explicit", ack_wait=60)
        sub = await js.pull_subscribe(f"{name.lower()}.>", durable="WORK", stream=name)
        msgs = await sub.fetch(10, timeout=5)
        for m in msgs[:6]:
            await m.ack()
    finally:
        await nc.close()


def consumer_view(info: dict[str, Any]) -> tuple[object, ...]:
    """What a restore keeps (``last_active`` is not state: nats-server drops it too)."""
    seqs = [{k: info[part][k] for k in ("consumer_seq", "stream_seq")} for part in ("delivered", "ack_floor")]
    return (*seqs, info["num_ack_pending"], info["num_pending"], info["config"])


async def test_backup_and_restore_round_trip(jetpy: Proc, tmp_path: Path) -> None:
    await make_stream(jetpy.url, "CLIBK")
    before = await api(jetpy.url, "STREAM.INFO.CLIBK")
    cbefore = await api(jetpy.url, "CONSUMER.INFO.CLIBK.WORK")
    target = tmp_path / "backup"
    r = run_cli(jetpy.url, "stream", "backup", "CLIBK", str(target), "--json")
    assert r.code == 0, r
    out = json.loads(r.out)
    assert out["messages"] == 500 and out["last_seq"] == 500 and out["consumers"] is True
    assert sorted(p.name for p in target.iterdir()) == ["backup.json", "stream.tar.s2"]
    assert out["bytes"] == (target / "stream.tar.s2").stat().st_size

    exists = run_cli(jetpy.url, "stream", "restore", str(target))
    assert exists.code == 1 and "err_code 10130" in exists.err and "already in use" in exists.err, exists

    assert run_cli(jetpy.url, "stream", "rm", "CLIBK", "-f").code == 0
    r = run_cli(jetpy.url, "stream", "restore", str(target))
    assert r.code == 0, r
    assert "Restored stream CLIBK: 500 messages" in r.out and "1 consumers" in r.out
    after = await api(jetpy.url, "STREAM.INFO.CLIBK")
    assert after["state"] == before["state"] and after["created"] == before["created"]
    cafter = await api(jetpy.url, "CONSUMER.INFO.CLIBK.WORK")
    assert consumer_view(cafter) == consumer_view(cbefore)


async def test_no_consumers_and_what_is_not_a_backup(jetpy: Proc, tmp_path: Path) -> None:
    await make_stream(jetpy.url, "CLINOC", n=50)
    target = tmp_path / "b"
    r = run_cli(jetpy.url, "stream", "backup", "CLINOC", str(target), "--no-consumers")
    assert r.code == 0 and "Backed up stream CLINOC: 50 messages" in r.out, r
    assert run_cli(jetpy.url, "stream", "rm", "CLINOC", "-f").code == 0
    r = run_cli(jetpy.url, "stream", "restore", str(target), "--json")
    assert r.code == 0, r
    assert json.loads(r.out)["state"]["consumer_count"] == 0

    missing = run_cli(jetpy.url, "stream", "restore", str(tmp_path / "nowhere"))
    assert missing.code == 2 and "not a stream backup" in missing.err, missing
    unknown = run_cli(jetpy.url, "stream", "backup", "NOSUCH", str(tmp_path / "x"))
    assert unknown.code == 1 and "err_code 10059" in unknown.err, unknown
    bad = run_cli(jetpy.url, "stream", "backup", "CLINOC", str(tmp_path / "y"), "--chunk-size", "lots")
    assert bad.code == 2 and "--chunk-size" in bad.err, bad


def run_on_a_terminal(*args: str) -> tuple[int, bytes, bytes]:
    """Run the CLI with stderr on a pseudo-terminal: (exit code, stdout, what the terminal saw)."""
    leader, follower = os.openpty()
    try:
        p = subprocess.Popen(
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            env={**cli_env(), "COLUMNS": "120"},
        )
        os.close(follower)
        seen = b""
        deadline = time.monotonic() + 60
        while p.poll() is None and time.monotonic() < deadline:
            try:
                seen += os.read(leader, 65536)
            except OSError:
                break
        out, _ = p.communicate(timeout=60)
    finally:
        os.close(leader)
    return p.returncode, out, seen


async def test_a_terminal_sees_a_progress_bar(jetpy: Proc, tmp_path: Path) -> None:
    await make_stream(jetpy.url, "CLIBAR", n=400, size=20_000)  # 8 MB: a second or so of chunks
    args = ["-s", jetpy.url, "stream", "backup", "CLIBAR", str(tmp_path / "bar"), "--chunk-size", "4KB"]
    code, out, seen = await asyncio.to_thread(run_on_a_terminal, *args)
    assert code == 0, out
    assert b"Backing up CLIBAR" in seen and b"%" in seen, seen[-500:]
    assert b"Backed up stream CLIBAR" in out  # the result on stdout; the bar only on the terminal
